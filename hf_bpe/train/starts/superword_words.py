"""SuperBPE's stage-2 start state from segmented pre-tokens: the words, their pair counts, and the words cut at rare
pairs (`hf_bpe.train.starts.superword` runs the stages).

A stage-2 pre-token arrives as its stage-1 ids packed in the smallest unsigned dtype that holds them
(`segment_dtype`: uint16 below 65,536 ids), so that the counts of whole documents, the ids joined end to end and the
pair codes stay small. Everything here is numpy over blocks of positions (`PAIR_BLOCK`), so the temporary arrays stay
bounded whatever the corpus, and exact: integer codes, sums of integers below 2**53 in float64 (bincount's weights)
only where the totals are compared with a cut, uint64 (`np.add.at`) for token counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from hf_bpe.train.merging.merge_loop import _Words
from hf_bpe.train.merging.pair_runs import contained, sorted_pair_runs, stable_order

# Pairs of stage-1 tokens are counted this many positions at a time.
PAIR_BLOCK = 1 << 18
# Cut parts of at most this many bytes are told apart by one uint64 key; longer ones by their bytes (slower to sort).
_KEY_BYTES = 8


def segment_dtype(num_ids: int) -> np.dtype:
    """The dtype stage-2 pre-tokens are packed in when stage 1 has `num_ids` ids (0 to num_ids - 1).

    >>> segment_dtype(65536), segment_dtype(65537)
    (dtype('uint16'), dtype('uint32'))
    """
    return np.dtype(np.uint16) if num_ids <= 1 << 16 else np.dtype(np.uint32)


def arrays_words(data: np.ndarray, lengths: np.ndarray, counts: np.ndarray, token_bytes: list[bytes | None],
                 token_counts: np.ndarray | None = None) -> _Words:
    """The merge loop's start state from segmented pre-tokens (every pre-token's ids end to end, their lengths in
    ids and their counts, as `StageOneTokenizer.segmented_arrays` gives them): those of two or more tokens as words
    (their ids end to end); the counts of the others go to `token_counts`.

    >>> data, lengths, counts = np.array([5, 6, 7], np.uint16), np.array([2, 1]), np.array([2, 4])
    >>> words = arrays_words(data, lengths, counts, [None] * 8)
    >>> words.data.tolist(), words.lengths.tolist(), words.frequencies.tolist(), words.first_new_id
    ([5, 6], [2], [2], 8)
    """
    several = lengths > 1
    if token_counts is not None:
        single = lengths == 1
        np.add.at(token_counts, data[np.cumsum(lengths)[single] - 1], counts[single].astype(np.uint64))
    if np.count_nonzero(several) < len(several):
        data = data[np.repeat(several, lengths)]
    return _Words(data, lengths[several], counts[several], len(lengths), token_bytes)


class PairCounts:
    """How often each distinct pair of adjacent tokens occurs in the words, each word times its frequency
    (`distinct` pair codes `left * base + right`, sorted, with `base` the first id no word holds, and their
    `totals`), counted `PAIR_BLOCK` positions at a time: each block's pairs sorted and summed alone, then added to
    the totals of the codes already known and inserted in order among them, so that the temporaries stay a few times
    the block whatever the number of distinct pairs (sorting the known codes again with each block would take a few
    times their number). With `count=False`, the pairs are not counted (`distinct` and `totals` stay empty): only
    `rare` is of use, for words whose pairs were counted before."""

    def __init__(self, words: _Words, count: bool = True, frequent: np.ndarray | None = None) -> None:
        """With `frequent` (ascending codes) and `count`, `rare_blocks(frequent)` is found while counting, from the
        same sorted blocks, rather than by sorting every block again."""
        self.data = words.data if isinstance(words.data, np.ndarray) else np.frombuffer(words.data, np.uint8)
        self.ends = np.cumsum(words.lengths)
        self.frequencies = words.frequencies
        self.base = words.first_new_id
        # Codes below 2**32 take half the memory.
        self.code_dtype = np.dtype(np.uint32) if self.base * self.base <= 1 << 32 else np.dtype(np.int64)
        self.distinct, self.totals = np.zeros(0, dtype=self.code_dtype), np.zeros(0, dtype=np.float64)
        self._rare_of, self._rare = (frequent, []) if count and frequent is not None else (None, None)
        for start in range(0, len(self.data) if count else 0, PAIR_BLOCK):
            block_codes, at, weights = self._block(start, with_weights=True)
            runs = sorted_pair_runs(at if self._rare is not None else None, block_codes,
                                    8 * block_codes.dtype.itemsize, weights)
            del weights
            if self._rare is not None:  # the rare pairs' positions: a search per distinct code, not per position
                rare_runs = np.repeat(~contained(runs.codes, frequent), runs.sizes)  # type: ignore[arg-type]
                self._rare.append(np.sort(runs.positions[rare_runs]))  # type: ignore[index]
            if not len(runs.codes):
                continue
            block_codes, block_totals = runs.codes, runs.totals
            at = np.searchsorted(self.distinct, block_codes)
            known = at < len(self.distinct)
            known[known] = self.distinct[at[known]] == block_codes[known]
            self.totals[at[known]] += block_totals[known]  # distinct codes: no two additions to one total
            new = ~known
            self.distinct = np.insert(self.distinct, at[new], block_codes[new])
            self.totals = np.insert(self.totals, at[new], block_totals[new])

    def _block(self, start: int, with_weights: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """The codes of the pairs that start at the block of positions from `start` inside a word, their positions,
        and (`with_weights`) their words' frequencies."""
        stop = min(start + PAIR_BLOCK, len(self.data))
        first, last = np.searchsorted(self.ends, [start, stop - 1], side="right")
        ends = self.ends[first:last + 1]
        inside = np.ones(stop - start, dtype=bool)
        inside[ends[ends <= stop] - 1 - start] = False  # words' last tokens start no pair
        left = self.data[start:stop].astype(self.code_dtype)
        right = self.data[start + 1:stop + 1]
        if len(right) < len(left):  # the data's last token, always a word's last
            right = np.append(right, 0)
        codes = (left * self.base + right)[inside]
        at = np.flatnonzero(inside) + start
        if not with_weights:
            return codes, at, None
        begins = np.concatenate(([self.ends[first - 1] if first else 0], ends[:-1]))
        clipped = np.minimum(ends, stop) - np.maximum(begins, start)
        weights = np.repeat(self.frequencies[first:last + 1], clipped)
        return codes, at, weights[inside]

    def frequent(self, cut_below: int) -> np.ndarray:
        """The codes of the pairs counting `cut_below` or more, ascending."""
        return self.distinct[self.totals >= cut_below]

    def rare(self, frequent: np.ndarray) -> np.ndarray:
        """The positions where a pair starts whose code is not in `frequent` (ascending codes)."""
        return np.concatenate([np.zeros(0, dtype=np.int64), *self.rare_blocks(frequent)])

    def rare_blocks(self, frequent: np.ndarray) -> Iterator[np.ndarray]:
        """`rare`, a block of positions at a time."""
        if self._rare is not None and frequent is self._rare_of:  # found while counting
            yield from self._rare
            return
        for start in range(0, len(self.data), PAIR_BLOCK):
            codes, at, _ = self._block(start)
            if len(frequent):
                order = stable_order(codes, 8 * codes.dtype.itemsize)
                # A sorted search runs several times faster than a scattered one.
                yield at[np.sort(order[~contained(codes[order], frequent)])]
            else:
                yield at


def guess_last_count(totals: np.ndarray, num_merges: int, divisor: int = 2) -> int:
    """A guess at the count of the last of `num_merges` merges, from the `totals` of the distinct pairs: the
    `num_merges`-th largest over `divisor` (merges make pairs that count less than the pairs they merge; the last
    merge counted more than half of it on every corpus and setting measured, docs/benchmarks.md); 0 when there are
    few pairs.

    >>> guess_last_count(np.array([90, 30, 60, 5]), 2), guess_last_count(np.array([90]), 2)
    (30, 0)
    >>> guess_last_count(np.array([90, 30, 60, 5]), 2, divisor=3)
    20
    """
    if num_merges <= 0 or len(totals) <= num_merges:
        return 0
    return int(np.partition(totals, len(totals) - num_merges)[len(totals) - num_merges]) // divisor


def cut_at_rare_pairs(words: _Words, pairs: PairCounts | None, frequent: np.ndarray | None,
                      token_counts: np.ndarray | None = None) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """The words cut between every two tokens whose pair's code is not in `frequent` (ascending codes; None: cut
    nowhere, the words whole), the parts counted as words of their own: for each length of two tokens or more, the
    distinct parts' bytes as keys (a void dtype of `length` ids, ascending as numpy sorts them, bytewise) and their
    counts (int64, exact); one-token parts go to `token_counts`. `hf_bpe.train.starts.tallies.PartTally.of_words`
    takes these tables as they are.

    When every pair left out of `frequent` counts less than some `cut_below` in the whole corpus, no merge counting
    `cut_below` or more ever joins across such a place: every occurrence of a pair (L, R) joins, at the place between
    L and R, the same two first tokens (L's last and R's first, as the merges built L and R), so (L, R) counts at most
    what that pair of first tokens counts. So as long as the best pair counts `cut_below` or more, merging the parts
    makes the merges of merging the words, and the same final segmentation; below it, the words must be cut at a
    lower count (`hf_bpe.train.starts.superword_passes`). Stage-2 words are documents, few of them alike; their parts
    are mostly phrases, many of them alike, so the merge loop holds far fewer positions.

    The parts of each length are told apart in numpy: by one uint64 of their bytes when they fit in 8 bytes, else by
    their bytes (a void dtype); sorted, and the frequencies of equal ones summed (`sorted_pair_runs`).

    >>> words = _Words(np.array([1, 2, 3, 1, 2, 1, 2, 3], np.uint16), np.array([3, 2, 3]), np.array([1, 1, 5]), 3,
    ...                [None] * 4)
    >>> pairs = PairCounts(words)
    >>> [(length, keys.view(np.uint16).tolist(), totals.tolist())  # (2, 3) counts 6, (1, 2) 7
    ...  for length, keys, totals in cut_at_rare_pairs(words, pairs, pairs.frequent(7))]
    [(2, [1, 2], [7])]
    """
    data = words.data if isinstance(words.data, np.ndarray) else np.frombuffer(words.data, np.uint8)
    lengths = words.lengths
    if len(data) == 0:
        return []
    starts = np.zeros(len(data), dtype=bool)
    word_starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    starts[word_starts] = True
    if frequent is not None:
        if pairs is None:
            raise ValueError("cutting at rare pairs needs the words' pair counts")
        for rare in pairs.rare_blocks(frequent):
            starts[rare + 1] = True
    parts_per_word = np.add.reduceat(starts, word_starts, dtype=np.int64)
    position_dtype = np.int32 if len(data) < 1 << 31 else np.int64
    part_starts = np.concatenate([(np.flatnonzero(starts[start:start + PAIR_BLOCK]) + start).astype(position_dtype)
                                  for start in range(0, len(data), PAIR_BLOCK)])  # no int64 of every part
    del starts, word_starts
    part_words = np.repeat(np.arange(len(lengths), dtype=position_dtype), parts_per_word)
    part_lengths = np.empty_like(part_starts)  # in the positions' dtype, as every temporary here
    part_lengths[:-1] = np.diff(part_starts)
    part_lengths[-1] = len(data) - part_starts[-1]
    if token_counts is not None:
        single = part_lengths == 1
        np.add.at(token_counts, data[part_starts[single]], words.frequencies[part_words[single]].astype(np.uint64))
        del single
    several = np.flatnonzero(part_lengths > 1)  # one-token parts hold no pair
    by_length = several[np.argsort(part_lengths[several], kind="stable")]
    part_starts, part_words, part_lengths = part_starts[by_length], part_words[by_length], part_lengths[by_length]
    del several, by_length
    tables: list[tuple[int, np.ndarray, np.ndarray]] = []
    size = data.dtype.itemsize
    bounds = [0, *(np.flatnonzero(part_lengths[1:] != part_lengths[:-1]) + 1).tolist(), len(part_lengths)]
    for group_start, group_end in zip(bounds, bounds[1:]) if len(part_lengths) else ():  # the parts of each length
        length = int(part_lengths[group_start])
        starts_chosen = part_starts[group_start:group_end]
        frequencies = words.frequencies[part_words[group_start:group_end]]
        # A column at a time: no index array of every position.
        columns = (data[starts_chosen + column] for column in range(length))
        if length * size <= _KEY_BYTES:
            runs = sorted_pair_runs(None, byte_order_keys(columns, size), 8 * length * size, frequencies)
            keys = key_bytes(runs.codes, length * size)
        else:
            rows = np.empty((len(starts_chosen), length), dtype=data.dtype)
            for column, values in enumerate(columns):
                rows[:, column] = values
            runs = sorted_pair_runs(None, rows.view(np.dtype((np.void, length * size))).ravel(), 0, frequencies)
            del rows
            keys = runs.codes
        tables.append((length, keys, runs.totals))
    return tables


def byte_order_keys(columns: Iterable[np.ndarray], size: int) -> np.ndarray:
    """Sequences of ids (given a column at a time, `size` bytes an id, together at most 8 bytes) as uint64 keys that
    sort as the sequences' bytes do (a void dtype): their bytes read as one big-endian number. Sorting these is
    several times faster than sorting the bytes, and gives the order `PartTally` keeps its keys in, so that the cut's
    tables are never sorted again, and adding them up merges sorted runs.

    >>> columns = [np.array([1, 256], np.uint16), np.array([256, 1], np.uint16)]
    >>> byte_order_keys(columns, 2).tolist()  # bytes 01 00 00 01 and 00 01 01 00 (on a little-endian machine)
    [16777217, 65792]
    """
    keys: np.ndarray | None = None
    for column in columns:
        column = column.view(column.dtype.newbyteorder(">")).astype(np.uint64)  # its bytes, first most significant
        keys = column if keys is None else (keys << np.uint64(8 * size)) | column
    return np.zeros(0, dtype=np.uint64) if keys is None else keys


def key_bytes(keys: np.ndarray, num_bytes: int) -> np.ndarray:
    """The sequences that `byte_order_keys` made `keys` of, as their `num_bytes` bytes (a void dtype).

    >>> columns = [np.array([1, 256], np.uint16), np.array([256, 1], np.uint16)]
    >>> key_bytes(byte_order_keys(columns, 2), 4).view(np.uint16).reshape(-1, 2).tolist()
    [[1, 256], [256, 1]]
    """
    big_endian = keys.astype(np.dtype(">u8")).view(np.uint8).reshape(-1, 8)
    return np.ascontiguousarray(big_endian[:, 8 - num_bytes:]).view(np.dtype((np.void, num_bytes))).ravel()


__all__ = ["PAIR_BLOCK", "PairCounts", "byte_order_keys", "cut_at_rare_pairs", "guess_last_count", "key_bytes",
           "segment_dtype", "arrays_words"]
