"""Tables of counts in numpy that add up like Counters, for what counting workers send back besides pre-token
counts (`hf_bpe.train.counting.piece_counter.Tally`): SuperBPE's stage-2 pair counts and distinct parts
(`hf_bpe.train.starts.superword_passes`).

A Counter costs about 100 bytes an entry; these cost their key's bytes and 8 for the count: the parts of a corpus's
documents outnumber its distinct pre-tokens, so this is what keeps stage 2 near plain training's memory.

`KeyCounts` counts distinct keys of one numpy dtype. What is added to it waits as runs, and is sorted in (one sort,
the counts of equal keys summed: `added_up`) once the runs hold as many entries as the table: so adding n
entries costs O(n log n) in all, however they arrive. Integer keys sort in place packed with their totals in one
uint64, where both fit; the void dtype of parts bytewise (numpy's timsort, which merges sorted runs in about linear
time).

Not handled: counts past 2**63 (int64), negative keys.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from hf_bpe.encode.merge_kernels import BatchTables, merge_id_batch_arrays
from hf_bpe.train.merging.merge_loop import _Words
from hf_bpe.train.merging.pair_runs import contained, sorted_pair_runs
from hf_bpe.train.starts.superword_words import PAIR_BLOCK, PairCounts, cut_at_rare_pairs

# `PartTally.words` splits the parts by merges made already in blocks of about this many ids: the merge kernel's
# arrays stay small, and its steps per block few (a block's parts are of one length).
MERGED_BLOCK_IDS = 1 << 18


class KeyCounts:
    """Counts of distinct numpy keys: `keys` (ascending) and `totals` (int64). The keys given need not be distinct
    nor sorted: they wait as a run; or, `distinct`, they are (ascending as `stable_order` sorts them), and are the
    table as they are.

    >>> tally = KeyCounts(np.array([3, 9]), np.array([1, 2]), distinct=True)
    >>> tally.update(KeyCounts(np.array([9, 1]), np.array([5, 5])))
    >>> tally.keys.tolist(), tally.totals.tolist(), len(tally)
    ([1, 3, 9], [5, 1, 7], 3)
    """

    def __init__(self, keys: np.ndarray | None = None, totals: np.ndarray | None = None, distinct: bool = False
                 ) -> None:
        self._keys = np.zeros(0, dtype=np.uint32) if keys is None else keys
        self._totals = np.zeros(0, dtype=np.int64) if totals is None else totals.astype(np.int64, copy=False)
        self._runs: list[tuple[np.ndarray, np.ndarray]] = []
        self._waiting = 0
        if keys is not None and not distinct:
            self._runs, self._waiting = [(self._keys, self._totals)], len(self._keys)
            self._keys, self._totals = self._keys[:0], self._totals[:0]

    def __len__(self) -> int:
        """The number of entries held (distinct keys, and those waiting to be sorted in)."""
        return len(self._keys) + self._waiting

    def update(self, other: KeyCounts) -> None:
        for keys, totals in [(other._keys, other._totals), *other._runs]:
            if len(keys):
                self._runs.append((keys, totals))
                self._waiting += len(keys)
        if self._waiting >= max(len(self._keys), 1 << 16):
            self._sort_in()

    @property
    def keys(self) -> np.ndarray:
        self._sort_in()
        return self._keys

    @property
    def totals(self) -> np.ndarray:
        self._sort_in()
        return self._totals

    def _sort_in(self) -> None:
        if not self._runs:
            return
        runs = [(self._keys, self._totals), *self._runs]
        self._keys = self._totals = self._keys[:0]  # held by `runs` alone, which `added_up` lets go as it copies
        self._runs, self._waiting = [], 0
        self._keys, self._totals = added_up(runs)


def added_up(runs: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """The distinct keys of `runs` (pairs of keys and int64 totals) ascending, and their totals summed, as
    `sorted_pair_runs` gives them, with about half its temporary memory when each integer key and its total fit one
    uint64 together (SuperBPE's pair tables: millions of entries at once, in the parent, while the counting workers
    run): they are sorted so, in place, and summed by key. The list is emptied, each of its arrays let go once
    copied.

    >>> keys, totals = added_up([(np.array([9, 3]), np.array([1, 2])), (np.array([9, 1 << 30]), np.array([3, 4]))])
    >>> keys.tolist(), totals.tolist()
    ([3, 9, 1073741824], [2, 4, 4])
    """
    keys = np.concatenate([keys for keys, _ in runs])
    runs[:] = [totals for _, totals in runs]  # type: ignore[misc]  # the keys let go before the totals are copied
    totals = np.concatenate(runs)  # type: ignore[arg-type]
    runs.clear()
    count = len(keys)
    integers = keys.dtype.kind in "iu"
    key_bits = int(keys.max(initial=0)).bit_length() if integers else 0  # bytes: bits unused
    total_bits = max(1, int(totals.max(initial=0)).bit_length())
    if (not count or not integers or keys.dtype.itemsize != 8 or key_bits + total_bits > 64
            or int(totals.min()) < 0):
        sorted_runs = sorted_pair_runs(None, keys, key_bits, totals)
        return sorted_runs.codes, sorted_runs.totals  # type: ignore[return-value]
    shift = np.uint64(total_bits)
    packed = keys.view(np.uint64)
    packed <<= shift
    packed |= totals.view(np.uint64)
    del totals
    packed.sort()
    firsts = np.empty(count, dtype=bool)
    firsts[:1] = True
    for start in range(1, count, _CHUNK):  # no full-size temporary
        stop = min(start + _CHUNK, count)
        np.not_equal(packed[start:stop] >> shift, packed[start - 1:stop - 1] >> shift, out=firsts[start:stop])
    starts = np.flatnonzero(firsts)
    del firsts
    distinct = packed[starts]
    distinct >>= shift
    packed &= np.uint64((1 << total_bits) - 1)
    return distinct.view(keys.dtype), np.add.reduceat(packed.view(np.int64), starts)


# `added_up` compares neighbouring keys this many at a time.
_CHUNK = 1 << 20


class PairTally(KeyCounts):
    """Counts of distinct pairs of token ids: their codes (`left * base + right`) as keys.

    >>> tally = PairTally(np.array([3, 9, 12]), np.array([1, 2, 40]))
    >>> tally.frequent(2).tolist(), tally.most_outside(np.array([12])), tally.most_outside(np.array([3, 9, 12]))
    ([9, 12], 2, 0)
    """

    def frequent(self, cut_below: int) -> np.ndarray:
        """The codes of the pairs counting `cut_below` or more, ascending."""
        return self.keys[self.totals >= cut_below]

    def at_least(self, count: int) -> PairTally:
        """The pairs counting `count` or more, as a new tally.

        >>> PairTally(np.array([3, 9, 12]), np.array([1, 2, 40])).at_least(2).keys.tolist()
        [9, 12]
        """
        kept = self.totals >= count
        return PairTally(self.keys[kept], self.totals[kept], distinct=True)

    def most_outside(self, kept: np.ndarray) -> int:
        """The largest count of a pair whose code is not in `kept` (ascending codes); 0 when there is none."""
        return int(self.totals[~contained(self.keys, kept)].max(initial=0))


class PartTally:
    """Counts of distinct sequences of ids packed in `dtype` (the parts of stage-2 pre-tokens), by length: a
    `KeyCounts` per length whose keys are the sequences' bytes (a void dtype).

    >>> words = _Words(np.array([5, 6, 7, 5, 6, 5, 6], np.uint16), np.array([3, 2, 2]), np.array([1, 2, 4]), 3, [])
    >>> tally = PartTally.of_words(words, single=np.array([0, 3, 0, 0, 0, 0, 0, 0], np.uint64))
    >>> [(part.tolist(), count) for part, count in tally.items()], len(tally)  # len: once the runs are sorted in
    ([([1], 3), ([5, 6], 6), ([5, 6, 7], 1)], 3)
    """

    def __init__(self, dtype: np.dtype) -> None:
        self.dtype = np.dtype(dtype)
        self.by_length: dict[int, KeyCounts] = {}

    @classmethod
    def of_words(cls, words: _Words, pairs: PairCounts | None = None, kept: np.ndarray | None = None,
                 single: np.ndarray | None = None) -> PartTally:
        """The words of a `_Words` cut where two ids' pair (in `pairs`) has a code not in `kept` (ascending; None:
        the words whole), the parts counted: the tables `cut_at_rare_pairs` makes, as they are. The one-id parts'
        counts are added to `single` (by id, uint64; None: a new array), which the tally then takes."""
        data = words.data if isinstance(words.data, np.ndarray) else np.frombuffer(words.data, np.uint8)
        tally = cls(data.dtype)
        if single is None:
            single = np.zeros(int(data.max()) + 1 if len(data) else 0, dtype=np.uint64)
        for length, keys, totals in cut_at_rare_pairs(words, pairs, kept, single):
            tally.update_length(length, KeyCounts(keys, totals, distinct=True))
        tally.add_single(single)
        return tally

    def add_single(self, counts: np.ndarray) -> None:
        """Add the one-id parts: `counts[id]` of each id."""
        ids = np.flatnonzero(counts)
        if len(ids):  # ascending ids are not ascending bytes (little-endian): a run
            keys = ids.astype(self.dtype).view(np.dtype((np.void, self.dtype.itemsize)))
            self.update_length(1, KeyCounts(keys, counts[ids].astype(np.int64)))

    def update_length(self, length: int, counts: KeyCounts) -> None:
        if length in self.by_length:
            self.by_length[length].update(counts)
        else:
            self.by_length[length] = counts

    def __len__(self) -> int:
        return sum(map(len, self.by_length.values()))

    def distinct(self) -> int:
        """The number of distinct parts (`len` also counts those added and not yet sorted in, which may repeat)."""
        return sum(len(counts.keys) for counts in self.by_length.values())

    def update(self, other: PartTally) -> None:
        if not self.by_length:
            self.dtype = other.dtype
        for length, counts in other.by_length.items():
            self.update_length(length, counts)

    def rows(self, length: int) -> tuple[np.ndarray, np.ndarray]:
        """The distinct parts of `length` ids (a 2-D array, a part a row) and their counts."""
        counts = self.by_length[length]
        return counts.keys.view(self.dtype).reshape(-1, length), counts.totals

    def items(self) -> Iterator[tuple[np.ndarray, int]]:
        """Each distinct part and its count, by length (plainly, for tests and small tallies)."""
        for length in sorted(self.by_length):
            rows, totals = self.rows(length)
            yield from zip(rows, totals.tolist())

    def recut(self, kept: np.ndarray, num_ids: int) -> PartTally:
        """The parts cut again wherever two ids' pair (code `left * num_ids + right`) is not in `kept` (ascending),
        the pieces counted as parts (`cut_at_rare_pairs`, a block of parts at a time); this tally is emptied, a
        length at a time.

        >>> tally = PartTally.of_words(_Words(np.array([1, 2, 3, 1, 2], np.uint16), np.array([3, 2]),
        ...                                   np.array([1, 1]), 2, []))
        >>> [(part.tolist(), count) for part, count in tally.recut(np.array([1 * 4 + 2]), 4).items()]
        [([3], 1), ([1, 2], 2)]
        """
        recut = PartTally(self.dtype)
        for length in sorted(self.by_length):
            rows, totals = self.rows(length)
            del self.by_length[length]
            if length == 1:
                recut.update_length(1, KeyCounts(rows.copy().view(np.dtype((np.void, self.dtype.itemsize))).ravel(),
                                                 totals, distinct=True))  # sorted in already
                continue
            step = max(1, PAIR_BLOCK // length)
            for start in range(0, len(rows), step):
                block = _Words(rows[start:start + step].ravel(), np.full(len(rows[start:start + step]), length),
                               totals[start:start + step], 0, [None] * num_ids)
                recut.update(PartTally.of_words(block, PairCounts(block, count=False), kept,
                                                np.zeros(num_ids, dtype=np.uint64)))  # the pairs known: cut only
        return recut

    def words(self, token_bytes: list[bytes | None], token_counts: np.ndarray | None = None,
              merged: BatchTables | None = None) -> _Words:
        """The merge loop's start state: the parts of two ids or more as words (in `dtype`, or int32 with `merged`),
        their counts; the one-id parts' counts go to `token_counts`. With `merged`, the tables of merges made
        already (over these ids, in rank order: `merge_id_batch_arrays`), each part is first split as they split
        it, which is the segmentation that making those merges in turn reaches: the start state of merging on from
        them (`base_words.continue_words`). The tally is emptied, a length at a time.

        >>> tally = PartTally.of_words(_Words(np.array([5, 6, 7, 5, 6], np.uint16), np.array([3, 2]),
        ...                                   np.array([1, 4]), 2, []))
        >>> words = tally.words([], merged=BatchTables({}, {(5, 6): 0}, [8]))
        >>> words.data.tolist(), words.lengths.tolist(), words.frequencies.tolist()
        ([8, 7], [2], [1])
        """
        dtype = self.dtype if merged is None else np.dtype(np.int32)
        data, lengths, frequencies = [np.zeros(0, dtype=dtype)], [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
        distinct = len(self)
        for length in sorted(self.by_length):
            rows, totals = self.rows(length)
            del self.by_length[length]
            if length == 1:
                if token_counts is not None:
                    np.add.at(token_counts, rows[:, 0], totals.astype(np.uint64))
                continue
            if merged is None:
                data.append(rows.ravel())
                lengths.append(np.full(len(rows), length, dtype=np.int64))
                frequencies.append(totals)
                continue
            step = max(1, MERGED_BLOCK_IDS // length)
            for start in range(0, len(rows), step):
                block, counts = rows[start:start + step], totals[start:start + step]
                ids, sizes = merge_id_batch_arrays(block.ravel(), np.full(len(block), length), merged, dtype)
                several = sizes > 1
                if token_counts is not None and np.count_nonzero(several) < len(several):
                    single = ~several
                    np.add.at(token_counts, ids[np.repeat(single, sizes)], counts[single].astype(np.uint64))
                data.append(ids[np.repeat(several, sizes)])
                lengths.append(sizes[several].astype(np.int64))
                frequencies.append(counts[several])
        return _Words(np.concatenate(data), np.concatenate(lengths), np.concatenate(frequencies), distinct,
                      token_bytes)


__all__ = ["KeyCounts", "PairTally", "PartTally", "added_up"]
