"""Merge kernels: apply the merges of a byte-level BPE to the bytes of pre-tokens, lowest rank first.

Every kernel gives the result of the plain algorithm (repeatedly merge the adjacent pair of lowest rank, the leftmost
one among equal ranks); tests/test_merge.py checks each against a plain reference merge.

Performance notes (GPT-2 vocab, one core of this project's 2-core machine, CPU time, distinct pre-tokens of the
shared corpora, 7-8 bytes on average):

* `merge_by_scanning` (pre-tokens of at most `MAX_SCAN_MERGE_LENGTH` = 24 bytes): each step finds the lowest rank with
  C-level `min` and `list.index` over a list of pair ranks and updates only the two ranks next to the merge. It is
  O(n^2) but every step is a few C calls, so for the short pre-tokens that make up almost all text it beats the heap,
  whose per-step Python work (pop, liveness and staleness checks, two pushes) costs more than a short C scan.
* `merge_with_heap` (longer pre-tokens): O(n log n) with a linked list of positions and a lazy min-heap keyed by
  `rank * n + position` (one int, so entries compare in C and ties go to the leftmost position). Without it a run of a
  million equal characters takes minutes; with it, seconds.
* `merge_batch` (at least `MIN_BATCH_MERGE` = 256 new pre-tokens at once): all words advance together in numpy
  arrays; each step merges, in every unfinished word, its lowest-rank pair (all non-overlapping occurrences of it when
  the merges are monotone, true of trained merges), and only the ranks next to a merge are looked up again, in an
  open-addressing hash table (1.8x faster lookups than a binary search over the sorted pair keys, 20% faster
  merges). 3.6 us per pre-token on en_gcide and 4.4 us on multi_manpages (whose distinct pre-tokens average 24
  bytes), against 9.9 us for the scalar kernels, in batches of 2,000. That matters when encoding a corpus in one pass:
  every distinct pre-token is merged once there, and merging is the largest single cost after pre-tokenization.
  End to end, a first pass over 15 MB (the encoder's protocol of issue 9) takes 15% less time with it on en_gcide
  (3.85 -> 3.28 s CPU), 24% on multi_manpages (5.85 -> 4.45 s) and 4% on Linux code (2.89 -> 2.77 s), so it stays.
  Below 256 words numpy's per-call overhead eats the gain. Finishing the last few long words with the scalar
  kernels instead (so that they do not keep every numpy step going) measured no gain.
* `BatchTables.id_objects`: `ndarray.tolist()` makes a new int object for every id. Mapping each id to the one int
  object the scalar kernels and the vocab use keeps the ids that cached entries hold (and whose reference counts the
  encoder's warm path touches) in a few cache lines instead of scattered over millions of objects: about 15% on the
  warm path.
"""

from __future__ import annotations

import heapq
import sys
from collections.abc import Sequence
from itertools import chain, repeat

import numpy as np

#: Pre-tokens with at most this many bytes are merged by repeated scans, longer ones with the heap.
MAX_SCAN_MERGE_LENGTH = 24
#: At least this many words are merged by `merge_batch` (numpy); fewer go one at a time.
MIN_BATCH_MERGE = 256
#: The rank standing for "no merge" (above every real rank).
NO_RANK = sys.maxsize

PairRanks = dict[tuple[int, int], int]


def merge_ids(ids: list[int], pair_ranks: PairRanks, merged_ids: Sequence[int]) -> list[int]:
    """Merge the token ids `ids` (one per byte at first) lowest rank first, leftmost first among equal ranks.

    `pair_ranks` maps (left id, right id) to the merge's rank, `merged_ids[rank]` is the id of the merged token.

    >>> merge_ids([0, 0, 0], {(0, 0): 0, (1, 0): 1}, [1, 2])
    [2]
    """
    if len(ids) <= MAX_SCAN_MERGE_LENGTH:
        return merge_by_scanning(ids, pair_ranks, merged_ids)
    return merge_with_heap(ids, pair_ranks, merged_ids)


def merge_by_scanning(ids: list[int], pair_ranks: PairRanks, merged_ids: Sequence[int]) -> list[int]:
    """`merge_ids` by scanning the pair ranks for the minimum at each step (O(n^2), for short `ids`); merges in place.

    >>> merge_by_scanning([0, 0, 0], {(0, 0): 0, (1, 0): 1}, [1, 2])
    [2]
    """
    get = pair_ranks.get
    ranks = list(map(get, zip(ids, ids[1:]), repeat(NO_RANK)))
    while ranks:
        best = min(ranks)
        if best == NO_RANK:
            break
        position = ranks.index(best)
        merged = merged_ids[best]
        ids[position:position + 2] = (merged,)
        # Only the pairs on either side of the merged token change.
        del ranks[position]
        if position < len(ranks):
            ranks[position] = get((merged, ids[position + 1]), NO_RANK)
        if position:
            ranks[position - 1] = get((ids[position - 1], merged), NO_RANK)
    return ids


def merge_with_heap(ids: list[int], pair_ranks: PairRanks, merged_ids: Sequence[int]) -> list[int]:
    """`merge_ids` in O(n log n), for long `ids`.

    Positions form a linked list; a heap holds `rank * n + position` for adjacent pairs, and entries made stale by an
    earlier merge are skipped when popped.

    >>> merge_with_heap([0, 0, 0], {(0, 0): 0, (1, 0): 1}, [1, 2])
    [2]
    """
    count = len(ids)
    if count < 2:
        return ids
    next_position = list(range(1, count + 1))
    previous_position = list(range(-1, count - 1))
    heap = [rank * count + position
            for position, rank in enumerate(map(pair_ranks.get, zip(ids, ids[1:]))) if rank is not None]
    heapq.heapify(heap)
    alive = [True] * count
    while heap:
        rank, position = divmod(heapq.heappop(heap), count)
        if not alive[position]:
            continue
        right = next_position[position]
        if right >= count or pair_ranks.get((ids[position], ids[right])) != rank:
            continue
        _merge_at(ids, position, right, merged_ids[rank], alive, next_position, previous_position)
        for left in (previous_position[position], position):
            if left >= 0 and next_position[left] < count:
                left_rank = pair_ranks.get((ids[left], ids[next_position[left]]))
                if left_rank is not None:
                    heapq.heappush(heap, left_rank * count + left)
    return [token_id for token_id, is_alive in zip(ids, alive) if is_alive]


def _merge_at(ids: list[int], position: int, right: int, merged: int, alive: list[bool], next_position: list[int],
              previous_position: list[int]) -> None:
    """Replace the linked pair at `position`, `right` by `merged`, unlinking `right`."""
    ids[position] = merged
    alive[right] = False
    after = next_position[right]
    next_position[position] = after
    if after < len(ids):
        previous_position[after] = position


class MissingByteError(Exception):
    """A word has a byte that has no token in the vocab."""


class BatchTables:
    """The merge tables as numpy arrays, for `merge_batch`.

    >>> tables = BatchTables({0x61: 0, 0x62: 1}, {(0, 1): 0}, [2])
    >>> tables.monotone, merge_batch([b"ab", b"ba"], tables)
    (True, [(2,), (1, 0)])
    """

    def __init__(self, byte_ids: dict[int, int], pair_ranks: PairRanks, merged_ids: Sequence[int]) -> None:
        self.byte_ids = np.full(256, -1, dtype=np.int64)
        self.byte_ids[list(byte_ids)] = list(byte_ids.values())
        pairs = np.array(list(pair_ranks), dtype=np.int64).reshape(-1, 2)
        ranks = np.fromiter(pair_ranks.values(), dtype=np.int64, count=len(pair_ranks))
        self.merged_ids = np.array(merged_ids, dtype=np.int64)
        # id -> the int object the scalar kernels use for it (see "id_objects" in the module docstring).
        self.id_objects: list[int] = [0] * (max(chain(byte_ids.values(), merged_ids), default=0) + 1)
        for token_id in chain(byte_ids.values(), merged_ids):
            self.id_objects[token_id] = token_id
        self.key_base = max(int(pairs.max(initial=0)), int(self.merged_ids.max(initial=0))) + 1
        keys = pairs[:, 0] * self.key_base + pairs[:, 1]
        # An open-addressing hash table of the pair keys (linear probing, load <= 1/8): one or two random reads per
        # lookup instead of a binary search's 16 (1.8x faster lookups on the GPT-2 merges). A run of probes ends at
        # an empty slot (key -1); the table has room past its last slot for probes that run off the end.
        self.hash_bits = max(4, (8 * len(keys)).bit_length())
        slots = _hash_slots(keys, self.hash_bits)
        order = np.argsort(slots, kind="stable")
        slots, keys, ranks = slots[order], keys[order], ranks[order]
        # Linear probing: the i-th key of a run of equal home slots goes i places on, and runs push later runs on.
        position = np.maximum.accumulate(slots - np.arange(slots.size)) + np.arange(slots.size) if slots.size else slots
        size = (1 << self.hash_bits) + len(keys) + 1
        self.table_keys = np.full(size, -1, dtype=np.int64)
        self.table_ranks = np.full(size, NO_RANK, dtype=np.int64)
        self.table_keys[position] = keys
        self.table_ranks[position] = ranks
        # Monotone: every merge using a token ranks after every merge producing it (true of trained merges). Then
        # merging the lowest-rank pair never creates a pair of lower or equal rank, so all non-overlapping
        # occurrences of it in a word can be merged in one step.
        first_use = np.full(self.key_base, NO_RANK, dtype=np.int64)
        np.minimum.at(first_use, pairs[:, 0], ranks)
        np.minimum.at(first_use, pairs[:, 1], ranks)
        self.monotone = bool(np.all(first_use[self.merged_ids[ranks]] > ranks))


def merge_batch(words: Sequence[bytes], tables: BatchTables) -> list[tuple[int, ...]]:
    """Merge many words (UTF-8 bytes) at once with numpy; the same ids as `merge_ids` on each word's byte ids.

    Each step finds every unfinished word's lowest pair rank and merges its leftmost occurrence (for monotone
    merges: all its non-overlapping occurrences, leftmost first); finished words leave the arrays, and only the
    pair ranks next to a merge are looked up again. Raises MissingByteError when a byte has no token.
    """
    lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
    ids = tables.byte_ids[np.frombuffer(b"".join(words), dtype=np.uint8)]
    if ids.size and ids.min() < 0:
        raise MissingByteError
    word = np.repeat(np.arange(len(words), dtype=np.int64), lengths)
    rank = _pair_ranks_at(np.arange(ids.size), ids, word, tables)  # rank[i]: the pair (ids[i], ids[i + 1])
    finished_ids: list[np.ndarray] = []
    finished_words: list[np.ndarray] = []
    while ids.size:
        count = ids.size
        starts = np.flatnonzero(np.concatenate(([True], word[1:] != word[:-1])))
        word_lengths = np.diff(np.append(starts, count))
        word_min = np.minimum.reduceat(rank, starts)
        candidate = rank == np.repeat(word_min, word_lengths)
        keep = np.ones(count, dtype=bool)
        finished_word = word_min == NO_RANK
        if finished_word.any():
            finished = np.repeat(finished_word, word_lengths)
            finished_ids.append(ids[finished])
            finished_words.append(word[finished])
            candidate &= ~finished
            keep &= ~finished
        if not tables.monotone:
            first = np.minimum.reduceat(np.where(candidate, np.arange(count), count), starts)
            candidate[:] = False
            candidate[first[first < count]] = True
        elif (candidate[1:] & candidate[:-1]).any():
            # A run of candidates is a repeated pair (x, x): take every other one from the left.
            positions = np.arange(count)
            run_start = np.where(candidate & ~np.concatenate(([False], candidate[:-1])), positions, 0)
            np.maximum.accumulate(run_start, out=run_start)
            candidate &= (positions - run_start) % 2 == 0
        take = np.flatnonzero(candidate)
        ids[take] = tables.merged_ids[rank[take]]
        keep[take + 1] = False
        merged_at = (np.cumsum(keep) - 1)[take]
        ids, word, rank = ids[keep], word[keep], rank[keep]
        changed = np.concatenate((merged_at[merged_at > 0] - 1, merged_at))
        rank[changed] = _pair_ranks_at(changed, ids, word, tables)
    all_words = np.concatenate(finished_words) if finished_words else np.zeros(0, dtype=np.int64)
    order = np.argsort(all_words, kind="stable")
    flat_ids = tuple(map(tables.id_objects.__getitem__,
                         (np.concatenate(finished_ids)[order] if finished_ids else all_words).tolist()))
    ends = np.cumsum(np.bincount(all_words, minlength=len(words))).tolist()
    return list(map(flat_ids.__getitem__, map(slice, [0, *ends], ends)))


def _pair_ranks_at(positions: np.ndarray, ids: np.ndarray, word: np.ndarray, tables: BatchTables) -> np.ndarray:
    """The rank of the pair (ids[p], ids[p + 1]) for each p in `positions`; NO_RANK at a word's end or no merge."""
    right = np.minimum(positions + 1, ids.size - 1)
    keys = ids[positions] * tables.key_base + ids[right]
    ranks = _lookup_ranks(keys, tables)
    valid = (word[right] == word[positions]) & (right > positions)
    return np.where(valid, ranks, NO_RANK)


def _hash_slots(keys: np.ndarray, bits: int) -> np.ndarray:
    """Fibonacci hashing: the top `bits` bits of key * 2^64/phi."""
    return ((keys.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(64 - bits)).astype(np.int64)


def _lookup_ranks(keys: np.ndarray, tables: BatchTables) -> np.ndarray:
    """The rank of each pair key in the hash table, NO_RANK when absent."""
    slots = _hash_slots(keys, tables.hash_bits)
    ranks = np.full(keys.size, NO_RANK, dtype=np.int64)
    pending = np.arange(keys.size)
    while pending.size:
        found = tables.table_keys[slots]
        hit = found == keys
        ranks[pending[hit]] = tables.table_ranks[slots[hit]]
        going_on = ~hit & (found != -1)
        pending, slots, keys = pending[going_on], slots[going_on] + 1, keys[going_on]
    return ranks
