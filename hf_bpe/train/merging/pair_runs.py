"""Pairs of token ids sorted by code and grouped into runs: the merge loop's pair index is built from these
(`hf_bpe.train.merging.flat_corpus.FlatCorpus`, a block of positions at a time; the extension's batches,
`hf_bpe.train.starts.base_words.base_words`), and so are SuperBPE's stage-2 pair counts and its tables of
distinct pairs and parts (`hf_bpe.train.starts.superword_words`, `hf_bpe.train.starts.tallies`).

A pair's code is its left id shifted left by `pair_shift` bits, or'ed with its right id, so that codes sort as the
pairs (left, right) do, and ids that fit a byte sort as cheaply as bytes. A block's pairs sorted by code, positions
ascending within a code, are its `PairRuns`.

Not handled: negative ids (separators and dead positions are left out before the codes are made).
"""

from __future__ import annotations

from operator import add
from typing import NamedTuple

import numpy as np


class PairRuns(NamedTuple):
    """A block's pairs by code: `positions` sorted by code (ascending within a code; None when not asked for); one
    entry per distinct code, ascending, in `codes`, `sizes` (how many positions) and `totals` (the sum of the
    positions' weights, or None when not counted)."""

    positions: np.ndarray | None
    codes: np.ndarray
    sizes: np.ndarray
    totals: np.ndarray | None


def pair_shift(largest_id: int) -> int:
    """How far a pair's left id is shifted in its code: as many bits as `largest_id` needs, and at least 8.

    >>> pair_shift(255), pair_shift(256), pair_shift(50256)
    (8, 9, 16)
    """
    return max(8, int(largest_id).bit_length())


def stable_order(ids: np.ndarray, bits: int = 32) -> np.ndarray:
    """The stable order of sorting `ids` (non-negative, below 2 ** `bits`). Up to 16 bits, one radix sort (numpy's
    stable sort of uint16); above, when each id and its index fit one uint64 together, a sort of those values (numpy
    sorts values with SIMD, about twice as fast as two radix passes); else radix sorts of 16 bits, least significant
    first, as many as `bits` needs.

    >>> stable_order(np.array([70000, 5, 70000, 3, 5])).tolist()
    [3, 1, 4, 0, 2]
    >>> stable_order(np.array([1 << 40, 7, 1 << 40, 1 << 33]), 41).tolist()
    [1, 3, 0, 2]
    >>> stable_order(np.array([1 << 60, 7, 1 << 60, 1 << 33]), 61).tolist()
    [1, 3, 0, 2]

    Keys that are not integers (the bytes of sequences of ids, a void dtype: `hf_bpe.train.starts.tallies`) sort
    with numpy's stable sort (a timsort, bytewise), whatever `bits`.
    """
    if ids.dtype.kind not in "iu":
        return np.argsort(ids, kind="stable")
    index_bits = max(1, (len(ids) - 1).bit_length())
    if 16 < bits <= 64 - index_bits:
        packed = (ids.astype(np.uint64) << np.uint64(index_bits)) | np.arange(len(ids), dtype=np.uint64)
        packed.sort()
        return (packed & np.uint64((1 << index_bits) - 1)).astype(np.intp)
    order = np.argsort((ids & 0xFFFF).astype(np.uint16), kind="stable")
    for shift in range(16, bits, 16):
        digits = ids[order] >> shift
        if shift + 16 < bits:
            digits &= 0xFFFF
        order = order[np.argsort(digits.astype(np.uint16), kind="stable")]
    return order


def sorted_pair_runs(positions: np.ndarray | None, codes: np.ndarray, bits: int, weights: np.ndarray | None = None
                     ) -> PairRuns:
    """The pairs at `positions` (ascending; None: counted only) with `codes` (below 2 ** `bits`; or keys of bytes,
    as `stable_order` sorts them) as `PairRuns`, their `weights` summed per code when given.

    >>> runs = sorted_pair_runs(np.array([1, 2, 4, 5]), np.array([7, 3, 7, 7]), 8, np.array([1, 2, 3, 4]))
    >>> [array.tolist() for array in runs]
    [[2, 1, 4, 5], [3, 7], [1, 3], [2, 8]]
    """
    order = stable_order(codes, bits)
    codes = codes[order]
    if positions is not None:
        positions = positions[order]
    if not len(codes):
        empty = np.zeros(0, dtype=np.int64)
        return PairRuns(positions, codes, empty, None if weights is None else empty)
    starts = np.flatnonzero(np.concatenate(([True], codes[1:] != codes[:-1])))
    sizes = np.diff(np.append(starts, len(codes)))
    totals = None if weights is None else np.add.reduceat(weights[order], starts)
    return PairRuns(positions, codes[starts], sizes, totals)


def contained(codes: np.ndarray, sorted_codes: np.ndarray) -> np.ndarray:
    """Whether each of `codes` is in `sorted_codes` (ascending), by a binary search each.

    >>> contained(np.array([1, 4, 9]), np.array([4, 7])).tolist(), contained(np.array([1]), np.array([])).tolist()
    ([False, True, False], [False])
    """
    if not len(sorted_codes):
        return np.zeros(len(codes), dtype=bool)
    return sorted_codes[np.minimum(np.searchsorted(sorted_codes, codes), len(sorted_codes) - 1)] == codes


def distinct_codes(codes_of_blocks: list[np.ndarray], bits: int) -> np.ndarray:
    """The distinct codes (below 2 ** `bits`) of all blocks, ascending, as int64; each block's own are distinct and
    ascending already. Sorted as uint32 when they fit: twice as fast as int64.

    >>> distinct_codes([np.array([3, 7]), np.array([1, 7])], 8).tolist()
    [1, 3, 7]
    """
    if len(codes_of_blocks) == 1:
        return codes_of_blocks[0].astype(np.int64, copy=False)
    codes = np.concatenate([np.zeros(0, dtype=np.int64), *codes_of_blocks])
    return np.unique(codes.astype(np.uint32) if bits <= 32 else codes).astype(np.int64, copy=False)


def id_chars(symbols: np.ndarray) -> str:
    """The tokens `symbols` as one character each (surrogates included: token ids are any code points).

    >>> [ord(char) for char in id_chars(np.array([97, 0xD800, 0x10FFFF]))] == [97, 0xD800, 0x10FFFF]
    True
    """
    return symbols.astype(np.uint32).tobytes().decode("utf-32-le", "surrogatepass")


def pair_keys(codes: np.ndarray, shift: int) -> list[str]:
    """The merge loop's keys (2 characters, the ids) of pair `codes` (left id shifted by `shift`, or'ed with the
    right one).

    >>> pair_keys(np.array([97 << 8 | 98]), 8)
    ['ab']
    """
    return list(map(add, id_chars(codes >> shift), id_chars(codes & ((1 << shift) - 1))))
