"""tokenize-dataset on a Ray cluster: the same `.bin` as the local pipeline, written in shards.

`tokenize_dataset_ray(...)` reads a dataset with Ray Data, cuts its rows into shards of consecutive documents and
has actors encode each shard and write `OUT/SPLIT/part-NNNNN.bin` (layout in `hf_bpe.data.shards`); the concatenated
shards equal the single-machine `.bin` of `hf_bpe.data.pipeline.tokenize_dataset` exactly.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hf_bpe.cluster.session import check_code_fingerprint, cluster_cpus, code_fingerprint, dispatch, ray_session
from hf_bpe.common.errors import InputError
from hf_bpe.common.files import write_text_atomically
from hf_bpe.data.shards import (
    LAYOUT,
    ShardManifest,
    ShardRecord,
    concatenate_shards,
    shard_directory,
    shard_is_intact,
    shard_list,
    shard_name,
    write_shard,
)

# Without documents_per_shard, a split is cut into about this many shards (at most MAX_DOCUMENTS_PER_SHARD each).
_TARGET_SHARDS = 64
MAX_DOCUMENTS_PER_SHARD = 100_000
# The manifest is rewritten at most this often while shards finish (and always at the end).
_MANIFEST_SAVE_SECONDS = 2.0


def tokenize_dataset_ray(tokenizer_dir: str | os.PathLike[str], dataset: str, out_dir: str | os.PathLike[str], *,
                         split: str = "train", text_column: str = "text", data_files: Sequence[str] | None = None,
                         config: str | None = None, append_eot: bool = True, allow_special: bool = False,
                         batch_size: int = 1000, ray_address: str | None = None, resume: bool = False,
                         concatenate: bool = False, force: bool = False, progress: bool = True,
                         documents_per_shard: int | None = None) -> dict[str, Any]:
    """Encode `dataset`'s `text_column` on a Ray cluster into `out_dir/<split>/part-NNNNN.bin` + `out_dir/<split>.json`.

    The dataset is named as for `hf_bpe.data.pipeline.tokenize_dataset`: Parquet and JSON-lines files (`--dataset
    parquet|json
    --data-files ...`, or one such file) are read by Ray Data on the workers; a `save_to_disk` directory, a Hub name or
    another builder is loaded with `datasets` and handed to Ray Data as Arrow tables (as `ray.data.from_huggingface`
    does), from the driver. The rows are read into the object store (spilled to disk past its memory) before encoding
    starts. Paths must be readable by every node (shared filesystem or URLs), and `out_dir` must be a shared
    directory: workers write the shards.

    Shard k holds documents [k * R, (k + 1) * R) with R = `documents_per_shard` (default: the split cut into about 64
    shards, at most 100,000 documents each), so the concatenated shards equal the single-machine `.bin`. Progress is
    recorded in `out_dir/<split>/manifest.json` as shards finish; with `resume`, shards whose file still has the
    recorded sha256 are kept. `concatenate` also writes `out_dir/<split>.bin`. Returns the metadata written.
    """
    from hf_bpe._version import __version__
    from hf_bpe.data.pipeline import ArrayTokenizer, check_output_split
    from hf_bpe.data.sources import DatasetSource

    if batch_size < 1:
        raise InputError(f"--batch-size must be at least 1, got {batch_size}")
    if documents_per_shard is not None and documents_per_shard < 1:
        raise InputError(f"documents_per_shard must be at least 1, got {documents_per_shard}")
    out_dir = Path(out_dir)
    check_output_split(out_dir, split, force=True)  # the split is a file name; what exists is checked below
    tokenizer = ArrayTokenizer.load(tokenizer_dir, append_eot, allow_special)
    tokenizer_dir, tokenizer_hash, vocab_size, dtype, eot_id, encoder = (
        tokenizer.directory, tokenizer.sha256, tokenizer.vocab_size, tokenizer.dtype, tokenizer.eot_id,
        tokenizer.encoder)
    source = DatasetSource(dataset, split=split, text_column=text_column, data_files=list(data_files or []),
                           config=config)
    job = {"tokenizer_sha256": tokenizer_hash, "dataset": dataset, "config": config,
           "data_files": list(data_files or []), "split": split, "text_column": text_column,
           "append_eot": append_eot, "allow_special": allow_special, "dtype": dtype.name}
    previous = _resumable_manifest(out_dir, split, job, documents_per_shard) if resume else None
    if previous is None:  # a new run (--resume with nothing to resume too) replaces a written split only with force
        check_output_split(out_dir, split, force)

    with ray_session(ray_address) as ray:
        blocks, block_rows = _read_blocks(ray, source)
        num_rows = sum(block_rows)
        if num_rows == 0:
            raise source.no_rows_error()
        manifest = _start_manifest(out_dir, split, job, previous, documents_per_shard, num_rows)
        rows_per_shard = manifest.job["documents_per_shard"]
        num_shards = math.ceil(num_rows / rows_per_shard)
        todo = [index for index in range(num_shards)
                if not _is_done(manifest, index, num_rows, dtype.itemsize)]
        for index in todo:
            manifest.shards.pop(index, None)
        _write_shards(ray, manifest, todo, blocks, block_rows, num_rows,
                      _ShardEncoder(encoder, text_column, eot_id if append_eot else None, dtype, batch_size), progress)

    records = [manifest.shards[index] for index in range(num_shards)]
    metadata = {
        "layout": LAYOUT, "dtype": dtype.name, "num_tokens": sum(record.num_tokens for record in records),
        "num_documents": sum(record.num_documents for record in records),
        "eot_id": eot_id, "append_eot": append_eot, "allow_special": allow_special, "vocab_size": vocab_size,
        "tokenizer": str(tokenizer_dir), "tokenizer_sha256": tokenizer_hash, "dataset": dataset, "config": config,
        "data_files": list(data_files or []), "split": split, "text_column": text_column,
        "hf_bpe_version": __version__, "documents_per_shard": rows_per_shard,
        "shards": shard_list(split, records), "concatenated": None,
    }
    if concatenate:
        metadata["concatenated"] = concatenate_shards(out_dir, split, metadata).name
    write_text_atomically(out_dir / f"{split}.json", json.dumps(metadata, indent=2) + "\n")
    return metadata


def _is_done(manifest: ShardManifest, index: int, num_rows: int, itemsize: int) -> bool:
    """Whether shard `index` is recorded for the rows it must hold and its file still has the recorded checksum."""
    record = manifest.shards.get(index)
    rows = manifest.job["documents_per_shard"]
    return (record is not None and record.first_row == index * rows
            and record.num_documents == min(num_rows, (index + 1) * rows) - index * rows
            and shard_is_intact(manifest.directory / shard_name(index), record, itemsize))


def _resumable_manifest(out_dir: Path, split: str, job: dict[str, Any], documents_per_shard: int | None
                        ) -> ShardManifest | None:
    """The manifest of an earlier run of the same job, or None when there is none; InputError when the recorded run
    was a different job (another tokenizer, dataset, option or shard size), checked before any work."""
    directory = shard_directory(out_dir, split)
    previous = ShardManifest.load(directory) if directory.is_dir() else None
    if previous is None:
        return None
    recorded = dict(previous.job)
    recorded_rows = recorded.pop("documents_per_shard", None)
    if recorded != job or (documents_per_shard is not None and documents_per_shard != recorded_rows):
        changed = sorted(key for key in set(job) | set(recorded) if job.get(key) != recorded.get(key))
        raise InputError(f"{previous.path}: --resume, but the recorded run differs "
                         f"({', '.join(changed) or 'documents_per_shard'}); use --force to start again")
    return previous


def _start_manifest(out_dir: Path, split: str, job: dict[str, Any], previous: ShardManifest | None,
                    documents_per_shard: int | None, num_rows: int) -> ShardManifest:
    """The manifest of this run: `previous` when resuming, else a new one over an emptied OUT/SPLIT.
    OUT/SPLIT.json and OUT/SPLIT.bin go first, so nothing looks finished until this run ends."""
    directory = shard_directory(out_dir, split)
    (out_dir / f"{split}.json").unlink(missing_ok=True)
    (out_dir / f"{split}.bin").unlink(missing_ok=True)
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.iterdir():  # shards being written when a run was killed; all shards unless resuming
        if stale.is_file() and (stale.name.startswith(".part-") or previous is None and (
                stale.name.startswith("part-") or stale.name == "manifest.json")):
            stale.unlink()
    if previous is not None:
        return previous
    rows = documents_per_shard or min(MAX_DOCUMENTS_PER_SHARD, max(1, math.ceil(num_rows / _TARGET_SHARDS)))
    manifest = ShardManifest(directory, {**job, "documents_per_shard": rows})
    manifest.save()
    return manifest


def _read_blocks(ray: Any, source: Any) -> tuple[list[Any], list[int]]:
    """The dataset's rows as ObjectRefs to Arrow tables in dataset order, and the number of rows of each.

    One execution of the dataset: the text column is checked on the blocks themselves (asking Ray Data for the schema
    first would read the data once more)."""
    import ray.data

    context = ray.data.DataContext.get_current()
    saved = context.execution_options.preserve_order, context.enable_progress_bars
    context.execution_options.preserve_order = True  # blocks in dataset order: the shards depend on it
    context.enable_progress_bars = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    try:
        blocks = _ray_dataset(ray, source).to_arrow_refs()
    finally:
        context.execution_options.preserve_order, context.enable_progress_bars = saved
    block_info = ray.remote(num_cpus=0.1)(_block_info)
    infos = ray.get([block_info.remote(block, source.text_column) for block in blocks])
    for _, columns in infos:
        if columns is not None:
            from hf_bpe.data.sources import missing_column_error

            raise missing_column_error(source.text_column, columns)
    return blocks, [rows for rows, _ in infos]


def _block_info(table: Any, text_column: str) -> tuple[int, list[str] | None]:
    """(rows, None), or (rows, the block's columns) when it has rows but no `text_column`."""
    missing = table.num_rows and text_column not in table.column_names
    return table.num_rows, list(table.column_names) if missing else None


def _ray_dataset(ray: Any, source: Any) -> Any:
    """A Ray Dataset of the source: Parquet and JSON lines read by Ray Data itself, anything else through datasets."""
    import ray.data

    files = list(source.data_files)
    builder = source.name
    if not files and Path(source.name).is_file():
        builder, files = Path(source.name).suffix.lower().lstrip("."), [source.name]
        builder = {"jsonl": "json"}.get(builder, builder)
    readers = {"parquet": ray.data.read_parquet, "json": ray.data.read_json}
    # A split with a slice ("train[:10%]") or a configuration is a datasets feature: then datasets loads it.
    if builder in readers and files and source.config is None and "[" not in source.split:
        paths = _expand_data_files(files)
        try:
            return readers[builder](paths, file_extensions=None)
        except Exception as error:  # pyarrow and Ray raise many types for unreadable files
            raise InputError(f"could not read {source.describe()} with Ray Data: {' '.join(str(error).split())}"
                             ) from None
    # What ray.data.from_huggingface does with a local datasets.Dataset, without its first step: a Hub lookup of
    # the dataset's name (network access, and aiohttp, which ray[data] does not install).
    return ray.data.from_arrow(source.load().with_format("arrow")[:])


def _expand_data_files(files: list[str]) -> list[str]:
    """Local glob patterns expanded in sorted order (as `datasets` does), checked to exist; URLs unchanged."""
    import glob

    paths = []
    for file in files:
        if "://" in file:
            paths.append(file)
        elif any(char in file for char in "*?["):
            matches = sorted(glob.glob(file, recursive=True))
            if not matches:
                raise InputError(f"{file}: no data file matches")
            paths.extend(os.path.abspath(match) for match in matches)
        elif not Path(file).is_file():
            raise InputError(f"{file}: no such data file")
        else:
            paths.append(os.path.abspath(file))
    return paths


class _ShardEncoder:
    """Encodes rows of the text column into ids (eot after each document), in batches, as `data.tokenize_dataset`."""

    def __init__(self, encoder: Any, text_column: str, eot_id: int | None, dtype: np.dtype, batch_size: int) -> None:
        from hf_bpe.data.pipeline import BatchFlattener

        self.flatten = BatchFlattener(encoder, text_column, eot_id, dtype)
        self.text_column, self.batch_size = text_column, batch_size

    def batches(self, tables: Iterable[Any], first_row: int) -> Iterator[np.ndarray]:
        row = first_row
        for table in tables:
            for start in range(0, table.num_rows, self.batch_size):
                texts = table.column(self.text_column).slice(start, self.batch_size).to_pylist()
                yield self.flatten.encode({self.text_column: texts}, row)
                row += len(texts)


class _EncodingWorker:
    """A Ray actor holding one encoder (its cache stays warm from shard to shard) that writes shards."""

    def __init__(self, shard_encoder: _ShardEncoder, fingerprint: str) -> None:
        check_code_fingerprint(fingerprint)
        self.shard_encoder = shard_encoder

    def write(self, index: int, path: str, first_row: int, slices: list[tuple[int, int]], *tables: Any
              ) -> tuple[ShardRecord | None, str | None]:
        """Encode rows `slices[i]` of `tables[i]` (documents first_row...) into the shard file at `path`."""
        parts = [table.slice(start, end - start) for table, (start, end) in zip(tables, slices)]
        try:
            record = write_shard(path, self.shard_encoder.batches(parts, first_row),
                                 num_documents=sum(end - start for start, end in slices), first_row=first_row)
            return record, None
        except InputError as error:
            return None, str(error)


def _shard_pieces(first_row: int, end_row: int, block_starts: list[int], block_rows: list[int]
                  ) -> list[tuple[int, int, int]]:
    """(block index, start, end) row ranges within blocks that make up rows [first_row, end_row) of the dataset.

    >>> _shard_pieces(3, 7, [0, 5, 5, 9], [5, 0, 4, 2])
    [(0, 3, 5), (2, 0, 2)]
    """
    pieces = []
    for block, (start, rows) in enumerate(zip(block_starts, block_rows)):
        low, high = max(first_row, start), min(end_row, start + rows)
        if low < high:
            pieces.append((block, low - start, high - start))
    return pieces


def _write_shards(ray: Any, manifest: ShardManifest, todo: list[int], blocks: list[Any], block_rows: list[int],
                  num_rows: int, shard_encoder: _ShardEncoder, progress: bool) -> None:
    """Have one encoding actor per cluster CPU write the shards in `todo`, recording each in the manifest."""
    from tqdm.auto import tqdm

    if not todo:
        return
    rows = manifest.job["documents_per_shard"]
    block_starts = np.concatenate([[0], np.cumsum(block_rows)[:-1]]).astype(int).tolist()
    actor_class = ray.remote(num_cpus=1)(_EncodingWorker)
    encoder_ref = ray.put(shard_encoder)
    actors = [actor_class.remote(encoder_ref, code_fingerprint()) for _ in range(min(cluster_cpus(ray), len(todo)))]

    def calls() -> Iterator[tuple[Any, ...]]:
        for index in todo:
            first, end = index * rows, min(num_rows, (index + 1) * rows)
            pieces = _shard_pieces(first, end, block_starts, block_rows)
            yield (index, str(manifest.directory / shard_name(index)), first,
                   [(start, stop) for _, start, stop in pieces], *(blocks[block] for block, _, _ in pieces))

    last_save = 0.0  # the first finished shard is recorded at once, later ones every _MANIFEST_SAVE_SECONDS
    with tqdm(total=num_rows, initial=num_rows - sum(min(num_rows, (i + 1) * rows) - i * rows for i in todo),
              desc=f"tokenizing {manifest.directory.name}", unit="doc", disable=not progress) as bar:

        def record(result: tuple[ShardRecord, None]) -> None:
            nonlocal last_save
            shard = result[0]
            manifest.record(shard.first_row // rows, shard)
            bar.update(shard.num_documents)
            if time.monotonic() - last_save > _MANIFEST_SAVE_SECONDS:
                manifest.save()
                last_save = time.monotonic()

        try:
            errors = dispatch(ray, actors, "write", calls(), record)
        finally:
            manifest.save()  # even after Ctrl-C: the shards finished so far are kept by --resume
            for actor in actors:
                ray.kill(actor)
    if errors:
        raise InputError(errors[min(errors)])


__all__ = ["MAX_DOCUMENTS_PER_SHARD", "tokenize_dataset_ray"]
