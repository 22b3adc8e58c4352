"""Merging one giant pre-token (megabytes of one character, a base64 blob) in bounded memory.

`merge_long_word` gives exactly `merge_ids` of the word's byte ids, for monotone merges (`BatchTables.monotone`:
every merge using a token ranks after the merge that makes it, true of trained merges and GPT-2's). It keeps three
int32 arrays over the word's bytes (ids, the rank of the pair starting at each position, and the link to the next
token), 12 bytes per byte, and works on bounded slices beyond them, so merging needs about 16 bytes per byte of the
word (`tests/encode/test_decode_memory.py` measures it). `merge_with_heap` takes over 100, in Python lists and ints,
and `merge_batch_packed` 30 or more. There is no array of links to the previous token: the last byte of a token of
several bytes, a position merged away, holds the token's start instead.

How: the ranks are taken in increasing order. With monotone merges, merging every occurrence of the lowest-rank
pair (leftmost first; in a run x x x of the pair (x, x), the first, third...) only makes pairs of higher rank, so a
rank, once done, never comes back. Ranks are taken a band at a time: a band is one rank, or several ranks with at
most `band` positions between them; a one-rank band is found by scanning the rank array slice by slice, a larger
band's positions are gathered once and sorted by rank, and the pairs its merges make within the band wait in a heap
of ranks. Each band costs one or two passes over the word, and there are a few dozen bands at most.

Not handled: merges that are not monotone (hand-made ones), for which the tokenizer keeps `merge_with_heap`.

>>> from hf_bpe.encode.merge_kernels import BatchTables
>>> tables = BatchTables({0x61: 0}, {(0, 0): 0, (1, 1): 1}, [1, 2])
>>> merge_long_word(b"aaaaaaa", tables, band=2, slice_size=3).tolist()
[2, 1, 0]
"""

from __future__ import annotations

import heapq

import numpy as np

from hf_bpe.encode.merge_kernels import BatchTables, MissingByteError, _lookup_ranks, every_other_in_runs

#: Words with more bytes than this go to `merge_long_word` (below it, the other kernels' memory does not matter).
LONG_WORD_BYTES = 1 << 16
# Positions handled by one numpy step: bounds the temporaries of a step.
_SLICE = 1 << 18


def merge_long_word(word: bytes, tables: BatchTables, *, band: int | None = None, slice_size: int = _SLICE
                    ) -> np.ndarray:
    """The ids of `word` (its bytes merged lowest rank first, leftmost first), as an int array; the merges must be
    monotone (`tables.monotone`). Raises MissingByteError when a byte has no token."""
    if not tables.monotone:
        raise ValueError("merge_long_word needs monotone merges")
    state = _Word(word, tables, slice_size)
    band = band or max(1 << 16, len(word) // 8)
    low = 0
    while (counts := state.rank_counts(low)) is not None:
        first = int(np.flatnonzero(counts[low:])[0]) + low
        if counts[first] >= band:
            state.merge_one_rank(first)
            low = first + 1
            continue
        within = np.cumsum(counts[first:], dtype=np.int64)
        high = first + int(np.searchsorted(within, band, side="right"))  # the band: ranks [first, high)
        state.merge_band(first, max(high, first + 1))
        low = max(high, first + 1)
    return state.result()


def merge_long_word_packed(word: bytes, tables: BatchTables, dtype: np.dtype) -> bytes | None:
    """`merge_long_word(word, tables)` as the bytes of an array of `dtype`, or None when the merges are not
    monotone or a byte has no token (for another kernel to handle)."""
    if not tables.monotone:
        return None
    try:
        return merge_long_word(word, tables).astype(dtype).tobytes()
    except MissingByteError:
        return None


class _Word:
    """The arrays of one word being merged; position n (one past the end) holds a separator, which is in no pair."""

    def __init__(self, word: bytes, tables: BatchTables, slice_size: int) -> None:
        self.tables, self.slice_size = tables, slice_size
        self.no_rank = tables.no_rank
        n = self.n = len(word)
        raw = np.frombuffer(word, dtype=np.uint8)
        self.ids = np.empty(n + 1, dtype=tables.dtype)
        self.rank = np.full(n + 1, self.no_rank, dtype=tables.dtype)
        for start in range(0, n, slice_size):
            stop = min(n, start + slice_size)
            self.ids[start:stop] = tables.byte_ids[raw[start:stop]]
            pair_stop = min(stop, n - 1)
            if pair_stop > start:
                self.rank[start:pair_stop] = tables.byte_pair_ranks[
                    (raw[start:pair_stop].astype(np.intp) << 8) | raw[start + 1:pair_stop + 1]]
        self.ids[n] = tables.separator
        if n and self.ids[:n].min() < 0:
            raise MissingByteError
        index = np.int32 if n + 2 < 2**31 else np.int64
        # At a token's start: where the next token starts. At the last byte of a token of several bytes: where that
        # token starts, which `_preceding` reads instead of a fourth array of links back.
        self.following = np.arange(1, n + 2, dtype=index)
        self.pending: dict[int, list[np.ndarray]] = {}  # rank -> positions of pairs made during the band
        self.pending_ranks: list[int] = []
        self.band_high = 0

    def rank_counts(self, low: int) -> np.ndarray | None:
        """How many positions hold each rank (ranks below `low` are done), or None when no pair is left."""
        counts = np.zeros(len(self.tables.merged_ids), dtype=np.int64)
        for start in range(0, self.n, self.slice_size):
            ranks = self.rank[start:start + self.slice_size]
            ranks = ranks[ranks != self.no_rank]
            if ranks.size:
                counts += np.bincount(ranks, minlength=counts.size)
        return counts if counts[low:].any() else None

    def merge_one_rank(self, rank: int) -> None:
        """Merge every occurrence of the pair of `rank`, scanning the rank array slice by slice, left to right."""
        self.band_high = rank + 1
        for start in range(0, self.n, self.slice_size):
            self._merge(rank, np.flatnonzero(self.rank[start:start + self.slice_size] == rank) + start)

    def merge_band(self, low: int, high: int) -> None:
        """Merge the ranks in [low, high), lowest first, with the positions of each gathered once."""
        self.band_high = high
        parts = []
        for start in range(0, self.n, self.slice_size):
            ranks = self.rank[start:start + self.slice_size]
            parts.append(np.flatnonzero((ranks >= low) & (ranks < high)) + start)
        positions = np.concatenate(parts)
        self._wait(positions, self.rank[positions], distinct=True)
        while self.pending_ranks:
            rank = heapq.heappop(self.pending_ranks)
            chunks = self.pending.pop(rank)
            candidates = chunks[0] if len(chunks) == 1 else np.unique(np.concatenate(chunks))
            for start in range(0, candidates.size, self.slice_size):
                self._merge(rank, candidates[start:start + self.slice_size])

    def _merge(self, rank: int, candidates: np.ndarray) -> None:
        """Merge the pair of `rank` at the candidates (ascending positions) where it still is."""
        candidates = candidates[self.rank[candidates] == rank]  # merged away, or its pair changed, since
        if candidates.size == 0:
            return
        take = candidates if candidates.size == 1 else every_other_in_runs(candidates, self.following)
        following, ids = self.following, self.ids
        right = following[take]
        ids[take] = self.tables.merged_ids[rank]
        ids[right] = -1
        self.rank[right] = self.no_rank
        after = following[right]
        following[take] = after
        following[after - 1] = take  # the merged token's last byte names its start
        # The pairs on either side of each merged token (at the start, index -1 is the separator: no rank).
        changed = np.concatenate((self._preceding(take), take))
        new_ranks = _lookup_ranks(ids[changed], ids[np.concatenate((take, after))], self.tables)
        self.rank[changed] = new_ranks
        waiting = new_ranks < self.band_high  # higher ranks are found by the scan of their own band
        if waiting.any():
            self._wait(changed[waiting], new_ranks[waiting])

    def _preceding(self, positions: np.ndarray) -> np.ndarray:
        """The live token before each of `positions` (token starts): the byte before a token start is the last byte
        of the token before it, which is that token's start when live, else names it (see `__init__`)."""
        before = positions - 1
        return np.where(self.ids[before] < 0, self.following[before], before)

    def _wait(self, positions: np.ndarray, ranks: np.ndarray, distinct: bool = False) -> None:
        """Queue the pairs at `positions` for merging at their `ranks`. `distinct`: the positions are ascending and
        each comes once; else a position may come twice (a pair between two merges of one step)."""
        order = np.argsort(ranks, kind="stable")  # by rank, in position order within a rank
        positions, ranks = positions[order], ranks[order]
        bounds = np.flatnonzero(np.diff(ranks)) + 1
        for rank, group in zip(ranks[np.concatenate(([0], bounds))].tolist(), np.split(positions, bounds)):
            if rank not in self.pending:
                heapq.heappush(self.pending_ranks, rank)
            self.pending.setdefault(rank, []).append(group if distinct else np.unique(group))

    def result(self) -> np.ndarray:
        ids = self.ids[:self.n]
        return ids[ids >= 0]


__all__ = ["LONG_WORD_BYTES", "merge_long_word", "merge_long_word_packed"]
