"""Where a stream of rows is cut into shards of consecutive documents, the same wherever the stream's batches end.

A shard takes rows while its UTF-8 text stays within `max_bytes` (it takes at least one row, so a longer document
is a shard of its own) and it has fewer than `max_rows` rows. The rule looks only at the rows, never at how they
arrive, so a run that reads the dataset in other batches (another machine, a resumed run) cuts the same shards:
what `--resume` relies on to keep the shards an earlier run finished.

>>> import pyarrow as pa
>>> cutter = ShardCutter(max_rows=3, max_bytes=10)
>>> batches = [pa.table({"text": ["aaaa", "bbbb"]}), pa.table({"text": ["cc", "", "dddddddddddd", "e"]})]
>>> [(shard.first_row, shard.num_rows, shard.num_bytes) for shard in cutter.shards(batches)]
[(0, 3, 10), (3, 1, 0), (4, 1, 12), (5, 1, 1)]
>>> [(shard.first_row, shard.num_rows) for shard in ShardCutter(3, 10).shards([pa.table({"text": list("abcdefg")})])]
[(0, 3), (3, 3), (6, 1)]
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from hf_bpe.data.encoders import utf8_sizes


@dataclass
class ShardRows:
    """One shard: its number, its rows [first_row, first_row + num_rows) of the dataset, their UTF-8 bytes, and
    their text as a one-column Arrow table whose buffers hold only these rows (so it ships without the rest)."""

    index: int
    first_row: int
    num_rows: int
    num_bytes: int
    table: Any


class ShardCutter:
    """Cuts one-column Arrow tables, in dataset order, into `ShardRows` (see the module docstring). `rows` counts
    the rows seen and `num_shards` the shards cut so far."""

    def __init__(self, max_rows: int, max_bytes: int) -> None:
        if max_rows < 1 or max_bytes < 1:
            raise ValueError(f"max_rows and max_bytes must be positive, got {max_rows} and {max_bytes}")
        self.max_rows, self.max_bytes = max_rows, max_bytes
        self.rows = self.num_shards = 0

    def shards(self, tables: Iterable[Any]) -> Iterator[ShardRows]:
        parts: list[Any] = []  # slices of the open shard's column
        rows = size = 0  # the open shard's rows and bytes
        name = "text"
        for table in tables:
            name, column = table.column_names[0], table.column(0)
            sizes = utf8_sizes(column)
            position = 0
            while position < len(sizes):
                room = self.max_rows - rows
                cumulative = np.cumsum(sizes[position:position + room])
                take = int(np.searchsorted(cumulative, self.max_bytes - size, side="right"))
                if take == 0 and rows == 0:
                    take = 1  # a document longer than a shard is a shard of its own
                if take:
                    parts.append(column.slice(position, take))
                    rows, size = rows + take, size + int(cumulative[take - 1])
                    position += take
                if rows == self.max_rows or position < len(sizes):  # full, or the next row does not fit
                    yield self._shard(name, parts, rows, size)
                    parts, rows, size = [], 0, 0
        if rows:
            yield self._shard(name, parts, rows, size)

    def _shard(self, name: str, parts: list[Any], rows: int, size: int) -> ShardRows:
        import pyarrow as pa

        chunks = [chunk for part in parts for chunk in part.chunks]
        # concat_arrays copies the rows into new buffers: a slice would ship its whole batch's buffers.
        table = pa.table({name: pa.concat_arrays(chunks) if chunks else pa.array([], pa.string())})
        shard = ShardRows(self.num_shards, self.rows, rows, size, table)
        self.num_shards += 1
        self.rows += rows
        return shard


__all__ = ["ShardCutter", "ShardRows"]
