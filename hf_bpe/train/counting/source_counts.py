"""`SourceCounts`: pre-token counts per source, the `Tally` that a counting worker keeps when it counts named sources
(`hf_bpe.train.counting.sources`), and `add_to_source`, which counts a source's text into it.

A worker counts the pieces of all its sources in one piece table, as plain counting does, and converts it once, so
each distinct piece is pre-tokenized once per worker however many sources hold it (on a parallel corpus most do: the
handbook's 26 languages have 200,692 distinct pieces in 640,080 (source, piece) pairs; numbers, markup and
untranslated English are in all of them). The table's values tell the sources apart: a dict keeps its keys in the
order they came, so when the worker moves to another source, the counts added since the last move are the values
now less the values then (new pieces at the end), read in C without touching a piece (`snapshot`). Each source's
part is kept as numpy arrays, piece numbers (places in the table) and counts; the table's conversion (`add_pieces`,
from the counter's `flush`) gives each piece's pre-token numbers (`number_pretokens`), and numpy each source's
pre-token counts. Before, a worker converted its table at each move to another source: per-source counting took
1.3 times plain counting's time on the handbook.

A worker's tally keeps its distinct pre-tokens once (`keys`) and each source's counts as two numpy arrays,
pre-token numbers and counts (5 or 6 bytes an entry, where a Counter entry takes about 100: a parallel corpus's
sources hold several times the entries of all of them together). The parent makes each source's Counter from them
in C (`SourceCounts._fold`): a worker's last tally as it receives it, while the other workers may still count; a
tally handed over midway (a piece table passed `max_pieces`) waits in that compact form until a worker's last
comes, so that the parent does not grow while the workers are at their largest. Each source's counts equal
`hf_bpe.train._reference.reference_counts` of its texts (tests/train/counting/test_sources.py); on the handbook's
26 languages and on the three shared corpora, per-source counting takes about plain counting's time and memory
(docs/benchmarks.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from itertools import count, filterfalse, repeat
from typing import Any

import numpy as np

from hf_bpe.encode.merge_kernels import range_positions
from hf_bpe.pretokenize import WHITESPACE_CHARS, CompiledPattern
from hf_bpe.train.counting.piece_counter import MAX_PIECES, PieceCounter

# A snapshot reads the whole piece table: when the snapshots since the table's last conversion would have read more
# than one entry for every SNAPSHOT_CHARS characters counted since (many small sources), the table is converted
# instead, so that reading stays a small share of counting (an entry is read in about the time a character counts).
SNAPSHOT_CHARS = 8
# A table past max_pieces / LARGE_TABLE pieces is converted when the worker moves to another source, as it would be
# soon anyway: large sources then count into tables of their own, smaller (quicker to add to) and converted apart
# (the three shared corpora: 0.95x plain counting's time and 0.9x its memory, against 1.0x and 1.15x with one table
# for all), while the many small sources of a parallel corpus share one (a handbook worker's: 125,000 pieces at most).
LARGE_TABLE = 4
_WHITESPACE = frozenset(WHITESPACE_CHARS)
# A piece table is converted this many pieces at a time (`number_pretokens`), and a source's part of it this many
# (`SourceCounts.add_pieces`): bounded temporaries, where a worker's memory peaks.
_BATCH_PIECES = 1 << 13
_PART_SLICE = 1 << 16
_EMPTY = np.zeros(0, np.int64)
_SEPARATOR = b"\xff"  # ends each key in `SourceCounts.encoded`: no byte of UTF-8
# Counts summed as float64 (np.bincount's weights) are exact while every sum stays below this.
_EXACT_FLOAT_SUMS = 1 << 53


class SourceCounts:
    """Pre-token counts per source (by index): the `Tally` that a counting worker keeps and hands over, and that
    the parent (and Ray's actors) add up (`add_counts`). See the module docstring.

    A worker's conversion leaves `tables`, a source's (pre-token numbers, counts), and `keys`, the pre-tokens by
    number (strs; UTF-8 bytes once handed over). They become `counters`, each source's Counter (`_fold`): a
    worker's last tally as soon as the parent receives it (while the other workers may still count); one handed over
    `midway` (its table passed `max_pieces`: the worker counts on) stays `pending`, arrays and keys, a fifth of the
    memory, until a worker's last comes (that worker's memory is then gone), or the pending keys pass twice
    `max_pieces`; a worker's conversions after its first at once. `source` is the source whose text the worker
    counts; `parts` holds the sources' parts of its piece table, as (source, piece numbers, counts), until the table
    is converted. A `SourceCounts` is always true, an empty one too, so that a `PieceCounter` keeps it rather than
    replacing it by a plain Counter; its length is the entries of all its sources.

    >>> counter = PieceCounter()
    >>> for source, text in [(0, "a b"), (1, " b c's"), (0, "a")]:
    ...     add_to_source(counter, source, text)
    >>> tally = counter.pretoken_counts()
    >>> len(tally), tally.by_source()
    (5, {0: Counter({b'a': 2, b' b': 1}), 1: Counter({b' b': 1, b' c': 1, b"'s": 1})})
    """

    def __init__(self, source: int, max_pieces: int = MAX_PIECES) -> None:
        self.source = source
        self.max_pieces = max_pieces  # the counter's own: bounds `parts` too
        self.keys: list[str] = []
        self.encoded = b""  # the keys once handed over: their UTF-8 bytes, each followed by 0xff (`_keys`)
        self.tables: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.counters: dict[int, Counter[bytes]] = {}
        self.pending: list[SourceCounts] = []  # received midway, not yet made counters
        self.converted = False  # a piece table was converted (`full`)
        self.midway = False  # converted while the worker counted on (not its last tally)
        self.parts: list[tuple[int, np.ndarray, np.ndarray]] = []
        self.parts_entries = 0
        self.before = _EMPTY  # the piece table's values at the last snapshot
        self.read = 0  # entries read by the snapshots since the last conversion
        self.chars = 0  # characters counted since the last conversion

    def __bool__(self) -> bool:
        return True

    def __len__(self) -> int:
        return (sum(len(numbers) for numbers, _ in self.tables.values()) + sum(map(len, self.counters.values()))
                + sum(map(len, self.pending)))

    def __getstate__(self) -> dict[str, Any]:
        # The keys go as one bytes object, encoded here, in the worker, while the parent may wait for it: quicker to
        # make, pickle and read than a list of bytes objects, and a fifth of its memory while a tally waits.
        state = {**self.__dict__, "parts": [], "before": _EMPTY}
        if self.keys:
            state.update(keys=[], encoded=_SEPARATOR.join(_keys(self)) + _SEPARATOR)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if not self.midway:  # a worker's last: made Counters now, while the other workers may still count
            self._fold(_keys(self), self.tables)
            self.encoded, self.tables = b"", {}

    def snapshot(self, pieces: Counter[str]) -> bool:
        """Keep the current source's part of the piece table (counted since the last snapshot); False, and nothing
        kept, when the table should be converted now instead: reading it would cost more than converting it (see
        SNAPSHOT_CHARS), or it is large (see LARGE_TABLE)."""
        if ((self.read + len(pieces)) * SNAPSHOT_CHARS > self.chars or self.parts_entries > self.max_pieces
                or len(pieces) * LARGE_TABLE > self.max_pieces):
            return False
        self.read += len(pieces)
        self._keep_part(pieces)
        return True

    def add_pieces(self, pieces: Counter[str], pattern: CompiledPattern) -> None:
        """Convert the piece table (`PieceCounter.flush`'s hook; the table is used up) and add each source's part of
        it: each distinct piece pre-tokenized once."""
        self._keep_part(pieces)
        self.before = _EMPTY
        keys, offsets, lengths, numbers = number_pretokens(pieces, pattern)
        tables: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        parts, self.parts, self.parts_entries, self.read, self.chars = self.parts, [], 0, 0, 0
        while parts:
            source, at, counts = parts.pop()
            pretokens, their_counts = zip(*(_expanded(at[start:start + _PART_SLICE], counts[start:start + _PART_SLICE],
                                                      offsets, lengths, numbers)
                                            for start in range(0, len(at), _PART_SLICE)))
            _add(tables, source, *summed(np.concatenate(pretokens), np.concatenate(their_counts), len(keys)),
                 len(keys))
        self.converted = True
        if self.tables or self.counters:  # not the tally's first conversion (one process, or a Ray actor)
            self._fold(_keys(self), self.tables)
            self.keys, self.tables = keys, tables
            self._fold(_keys(self), self.tables)
            self.keys, self.tables = [], {}
        else:
            self.keys, self.tables = keys, tables

    def update(self, other: Any) -> None:  # type: ignore[override]
        """Add another `SourceCounts` (another worker's, which this one may take from). Pre-token counts that name
        no source are refused."""
        if not isinstance(other, SourceCounts):
            if other:
                raise TypeError(f"only SourceCounts add to SourceCounts, got {type(other).__name__}")
            return
        self.pending.extend(other.pending)
        if other.midway and other.tables:
            self.pending.append(other)
        else:
            self._fold(_keys(other), other.tables)
        for source, counts in other.counters.items():
            kept = self.counters.setdefault(source, counts)
            if kept is not counts:
                if len(counts) > len(kept):  # the larger Counter takes the smaller one's counts
                    self.counters[source], kept, counts = counts, counts, kept
                _add_into(kept, counts.items())
        other.counters, other.pending = {}, []
        if not (self.midway and other.midway):  # a worker's last came: it is done and its memory gone, so now
            self._fold(_keys(self), self.tables)
            self.keys, self.encoded, self.tables = [], b"", {}
            self._fold_pending(-1)
        else:
            self._fold_pending(2 * self.max_pieces)

    def full(self) -> bool:
        """Whether a worker should hand these over now: once its piece table is converted, as plain counting's
        worker hands its counts over then (its next table starts a new tally)."""
        return self.converted

    def by_source(self) -> dict[int, Counter[bytes]]:
        """{source index: its pre-token counts}; the tally is empty after."""
        self._fold(_keys(self), self.tables)
        self._fold_pending(-1)
        counters, self.keys, self.encoded, self.tables, self.counters = self.counters, [], b"", {}, {}
        return counters

    def key_count(self) -> int:
        """How many pre-tokens `tables` number."""
        return self.encoded.count(_SEPARATOR) if self.encoded else len(self.keys)

    def _fold_pending(self, keys_kept: int) -> None:
        """Make the pending tallies counters, the oldest first, until their keys are `keys_kept` or fewer."""
        while self.pending and sum(tally.key_count() for tally in self.pending) > keys_kept:
            tally = self.pending.pop(0)
            self._fold(_keys(tally), tally.tables)

    def _fold(self, keys: list[bytes], tables: dict[int, tuple[np.ndarray, np.ndarray]]) -> None:
        """Add a conversion's tables (its keys encoded) to `counters`. A source's Counter is made in C from the
        larger of its table and its Counter, and the other's counts are added to it."""
        by_number = np.array(keys, dtype=object)  # a source's keys in C, the objects shared by the sources
        for source, (numbers, counts) in tables.items():
            pairs = zip(by_number[numbers].tolist(), counts.tolist())
            kept = self.counters.get(source)
            if kept is None or len(numbers) > len(kept):
                self.counters[source] = made = Counter()
                dict.update(made, pairs)
                if kept is not None:
                    _add_into(made, kept.items())
            else:
                _add_into(kept, pairs)

    def _keep_part(self, pieces: Counter[str]) -> None:
        """Keep the current source's part of the table: the values now less those of the last snapshot (the pieces
        whose value changed, and the new ones at the end)."""
        try:  # 4 bytes a piece rather than 8, while the table is whole
            now = np.fromiter(pieces.values(), np.uint32, len(pieces))
        except OverflowError:
            now = np.fromiter(pieces.values(), np.int64, len(pieces))
        before = self.before
        changed = np.flatnonzero(now[:len(before)] != before).astype(np.uint32)
        at = np.concatenate([changed, np.arange(len(before), len(now), dtype=np.uint32)])
        if len(at):
            counts = now[at].astype(np.int64)
            counts[:len(changed)] -= before[changed]
            self.parts.append((self.source, at, _compact(counts)))  # a table has fewer than 2**32 pieces
            self.parts_entries += len(at)
        self.before = _compact(now)


def _expanded(at: np.ndarray, counts: np.ndarray, offsets: np.ndarray, lengths: np.ndarray, numbers: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """The pre-token numbers of the pieces at `at` laid end to end (`number_pretokens`'s arrays), and each piece's
    count repeated over its own."""
    size = lengths[at]
    return numbers[range_positions(offsets[at], size, np.int32)], np.repeat(counts, size)


def _add(tables: dict[int, tuple[np.ndarray, np.ndarray]], source: int, numbers: np.ndarray, counts: np.ndarray,
         size: int) -> None:
    """Add (numbers, counts) to the table of `source`, numbers being below `size` (and below 2**32: a dict of more
    pre-tokens would not fit in memory; counts are mostly below 256)."""
    kept = tables.get(source)
    if kept is not None:
        numbers, counts = summed(np.concatenate([kept[0], numbers]), np.concatenate([kept[1], counts]), size)
    if len(numbers):
        tables[source] = numbers.astype(np.uint32), _compact(counts)


def _keys(tally: SourceCounts) -> list[bytes]:
    """A tally's keys as UTF-8 bytes: cut from `encoded` once handed over (0xff is in no UTF-8), else encoded, a
    batch at a time in place (each batch's strs go as its bytes come). No lone surrogate: replaced before counting."""
    if tally.encoded:
        return tally.encoded.split(_SEPARATOR)[:-1]
    keys: list[Any] = tally.keys
    if keys and isinstance(keys[0], str):
        for start in range(0, len(keys), _BATCH_PIECES):
            keys[start:start + _BATCH_PIECES] = map(str.encode, keys[start:start + _BATCH_PIECES])
    return keys


def _add_into(table: dict[bytes, int], pairs: Iterable[tuple[bytes, int]]) -> None:
    get = table.get
    for key, count_ in pairs:
        table[key] = get(key, 0) + count_


def number_pretokens(pieces: list[str] | Counter[str], pattern: CompiledPattern
                     ) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """(keys, offsets, lengths, numbers): the pieces' pre-tokens, `keys` numbering them in the order they first come;
    piece i's pre-tokens are keys[n] for n in numbers[offsets[i]:offsets[i] + lengths[i]]. The pieces are used up.

    Pre-tokenized by `PieceCounter`'s routes (stdlib `re` for ASCII), a batch of pieces at a time; only that runs
    piece by piece in Python, the numbering by a dict in C. A worker's memory peaks here, so the table goes first:
    its dict at once, and each batch's pieces once pre-tokenized (those that are pre-tokens live on as keys).

    >>> keys, offsets, lengths, numbers = number_pretokens(["a", " b's", " b"], PieceCounter().compiled)
    >>> keys, offsets.tolist(), lengths.tolist(), numbers.tolist()
    (['a', ' b', "'s"], [0, 1, 3], [1, 2, 1], [0, 1, 2, 1])
    """
    in_order: list[str | None] = list(pieces)
    pieces.clear()
    numbering: dict[str, int] = {}
    numbers, sizes = [], []
    for start in range(0, len(in_order), _BATCH_PIECES):
        batch_numbers, batch_sizes = _number_batch(in_order, start, pattern, numbering)
        numbers.append(batch_numbers)
        sizes.append(batch_sizes)
    # int32: a table's pieces have fewer than 2**31 pre-tokens (and the worker fewer distinct ones).
    lengths = np.concatenate(sizes or [_EMPTY]).astype(np.int32)
    return list(numbering), np.cumsum(lengths, dtype=np.int32) - lengths, lengths, np.concatenate(numbers or [_EMPTY])


def _number_batch(pieces: list[str | None], start: int, pattern: CompiledPattern, numbering: dict[str, int]
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(the pre-token numbers of the batch of pieces at `start`, how many each piece has), numbering new pre-tokens.
    The batch's places in `pieces` are emptied: its pieces that are no pre-token go once it is done."""
    batch = pieces[start:start + _BATCH_PIECES]
    pieces[start:start + len(batch)] = repeat(None, len(batch))
    pretokens, sizes = _split(batch, pattern)  # type: ignore[arg-type]
    numbering.update(zip(filterfalse(numbering.__contains__, pretokens), count(len(numbering))))
    return (np.fromiter(map(numbering.__getitem__, pretokens), np.int32, len(pretokens)),
            np.array(sizes, np.int32))


def _split(pieces: list[str], pattern: CompiledPattern) -> tuple[list[str], list[int]]:
    """The pieces' pre-tokens end to end, and how many each piece has."""
    if pattern.counts_pretokens:
        return pieces, [1] * len(pieces)
    findall, findall_ascii, gpt2 = pattern.findall, pattern.findall_ascii, pattern.is_gpt2
    pretokens: list[str] = []
    sizes: list[int] = []
    append, extend, size = pretokens.append, pretokens.extend, sizes.append
    for piece in pieces:
        if gpt2 and piece[-1] in _WHITESPACE:  # a GPT-2 piece ending in whitespace is a run of it: one pre-token
            append(piece)
            size(1)
        else:
            split = findall_ascii(piece) if piece.isascii() else findall(piece)
            extend(split)
            size(len(split))
    return pretokens, sizes


def summed(numbers: np.ndarray, counts: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct numbers, ascending; the sum of the counts of each), in int64, the numbers being below `size`.

    >>> summed(np.array([3, 1, 3]), np.array([1, 2, 5]), 4)
    (array([1, 3]), array([2, 6]))
    """
    if len(numbers) * 4 >= size and int(counts.sum()) < _EXACT_FLOAT_SUMS:  # one pass over `size`, exact in float64
        sums = np.bincount(numbers, weights=counts, minlength=size)
        present = np.flatnonzero(sums)
        return present, sums[present].astype(np.int64)
    if len(numbers) == 0:
        return _EMPTY, _EMPTY
    order = np.argsort(numbers, kind="stable")
    numbers = numbers[order].astype(np.int64)
    firsts = np.flatnonzero(np.concatenate([[True], numbers[1:] != numbers[:-1]]))
    return numbers[firsts], np.add.reduceat(counts[order].astype(np.int64), firsts)


def _compact(counts: np.ndarray) -> np.ndarray:
    """The counts in the smallest of uint8, uint16, int32 and int64 that holds them (not uint64, which numpy adds to
    int64 as floats); they are added in int64 (`summed`)."""
    largest = int(counts.max()) if len(counts) else 0
    return counts.astype(np.uint8 if largest < 1 << 8 else np.uint16 if largest < 1 << 16 else np.int32
                         if largest < 1 << 31 else np.int64)


def add_to_source(counter: PieceCounter, source: int, text: str, pattern: str | None = None) -> None:
    """Count `text` as the source's on a counting engine's `PieceCounter`, whose pre-token counts are then a
    `SourceCounts` (`pattern`: regex text, None for the counter's own)."""
    tally = counter.pretokens
    if not isinstance(tally, SourceCounts):
        if tally:
            raise TypeError("this PieceCounter holds pre-token counts of no source")
        if pattern is not None and pattern != counter.pattern:
            counter.add_text("", pattern)  # take the pattern while empty: it refuses another once it holds a tally
        tally = counter.pretokens = SourceCounts(source, counter.max_pieces)  # type: ignore[assignment]
    elif tally.source != source:
        if not tally.snapshot(counter.pieces):
            counter.flush()  # the table's conversion keeps the source's part
        tally.source = source
    tally.chars += len(text)
    counter.add_text(text, pattern)
    tally.midway = tally.converted  # converted while counting: handed over midway (a worker's last comes after)


__all__ = ["LARGE_TABLE", "SNAPSHOT_CHARS", "SourceCounts", "add_to_source", "number_pretokens", "summed"]
