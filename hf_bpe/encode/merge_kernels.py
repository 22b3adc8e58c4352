"""Merge kernels: apply the merges of a byte-level BPE to the bytes of pre-tokens, lowest rank first.

Every kernel gives the result of the plain algorithm (repeatedly merge the adjacent pair of lowest rank, the leftmost
one among equal ranks); tests/encode/test_merge_kernels.py checks each against a plain reference merge.

Performance notes (decisions and rejected options; the distinct pre-tokens of real text are short, 8-24 bytes on
average):

* `merge_by_scanning` (pre-tokens of at most `MAX_SCAN_MERGE_LENGTH` = 24 bytes): each step finds the lowest rank with
  C-level `min` and `list.index` over a list of pair ranks and updates only the two ranks next to the merge. It is
  O(n^2) but every step is a few C calls, so for the short pre-tokens that make up almost all text it beats the heap,
  whose per-step Python work (pop, liveness and staleness checks, two pushes) costs more than a short C scan.
* `merge_with_heap` (longer pre-tokens): O(n log n) with a linked list of positions and a lazy min-heap keyed by
  `rank * n + position` (one int, so entries compare in C and ties go to the leftmost position). Without it a run of a
  million equal characters takes minutes; with it, seconds.
* `merge_batch_packed` (at least `MIN_BATCH_MERGE` = 96 new pre-tokens at once): all words advance together in numpy
  arrays, end to end, each followed by a separator id that is in no pair. Each step takes every unfinished word's
  lowest pair rank (one `minimum.reduceat` over the word starts) and merges all its non-overlapping occurrences
  when the merges are monotone (true of trained merges, GPT-2's included), else the leftmost one; only the ranks
  next to a merge are looked up again, in an open-addressing hash table (all keys' first probe at once, then only
  the few whose home slot holds another key). A merge leaves a hole (positions link to their live neighbours), and
  the arrays are compacted, finished words taken out, only when holes and finished words fill half of them. The
  first ranks come from a 65,536-entry table of byte pairs. Each word's ids are cut as bytes straight from the
  arrays, for the encoder's cache, with no int object or tuple per id.
  `scripts/bench_merge.py` times it per pre-token against the scalar path (figures: docs/benchmarks.md, "Merge
  kernels"). The scalar path (`merge_ids` per word, then packing) costs more per pre-token, and the batch breaks
  even with it at a few dozen words, hence `MIN_BATCH_MERGE`. Larger batches cost about the same per word.
  Where the time goes: the pair lookups (about 12 per pre-token, a third of them next to a separator) a quarter, the
  reduceat, the candidates and the compactions most of the rest, the results a tenth.
  Measured and dropped: a row-displacement table (one probe, no loop, but seconds to build); a dense table for small
  ids with the hash behind it; other hash loads; keys packed with ranks (a lookup costs its numpy passes, not its
  probes); finishing the last words with the scalar kernels; taking finished words out at other shares; building
  result tuples by zipping id columns per result length. Pre-merging the vocab's own tokens cannot pay: the encoder
  merges each distinct pre-token once, so it would merge as many words as it saves.
* int32: ids and ranks are int32 when they fit (always for real vocabs): boolean compaction of int32 arrays is much
  faster than of int64 ones.
"""

from __future__ import annotations

import heapq
import sys
from collections.abc import Sequence
from itertools import chain, repeat

import numpy as np

from hf_bpe.common.int_table import IntTable

#: Pre-tokens with at most this many bytes are merged by repeated scans, longer ones with the heap.
MAX_SCAN_MERGE_LENGTH = 24
#: At least this many words are merged by `merge_batch_packed` (numpy); fewer go one at a time.
MIN_BATCH_MERGE = 96
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
    """The merge tables as numpy arrays, for `merge_batch_packed`.

    >>> tables = BatchTables({0x61: 0, 0x62: 1}, {(0, 1): 0}, [2])
    >>> tables.monotone, merge_batch_packed([b"ab", b"ba"], tables, np.dtype("<u2"))
    (True, [b'\\x02\\x00', b'\\x01\\x00\\x00\\x00'])
    """

    def __init__(self, byte_ids: dict[int, int], pair_ranks: PairRanks, merged_ids: Sequence[int]) -> None:
        largest_id = max(chain(byte_ids.values(), merged_ids), default=0)
        pairs = np.array(list(pair_ranks), dtype=np.int64).reshape(-1, 2)
        ranks = np.fromiter(pair_ranks.values(), dtype=np.int64, count=len(pair_ranks))
        # The separator: an id that is in no pair, placed after every word, so that no pair spans two words.
        self.separator = max(largest_id + 1, int(pairs.max(initial=-1)) + 1)
        self.key_base = self.separator + 1
        # Ids and ranks in int32 when they fit: half the memory traffic of int64 (see "int32" in the docstring).
        self.dtype: type[np.signedinteger] = np.int32 if max(self.key_base, len(merged_ids)) < 2**31 - 1 else np.int64
        self.no_rank = int(np.iinfo(self.dtype).max)
        self.byte_ids = np.full(256, -1, dtype=self.dtype)
        self.byte_ids[list(byte_ids)] = list(byte_ids.values())
        self.merged_ids = np.array(merged_ids, dtype=self.dtype)
        # Monotone: every merge using a token ranks after every merge producing it (true of trained merges). Then
        # merging the lowest-rank pair never creates a pair of lower or equal rank, so all non-overlapping
        # occurrences of it in a word can be merged in one step.
        first_use = np.full(self.key_base, NO_RANK, dtype=np.int64)
        np.minimum.at(first_use, pairs[:, 0], ranks)
        np.minimum.at(first_use, pairs[:, 1], ranks)
        self.monotone = bool(np.all(first_use[self.merged_ids[ranks]] > ranks))
        # The pair keys' hash table (`hf_bpe.common.int_table`): one or two random reads per lookup.
        self.pair_table = IntTable(pairs[:, 0] * self.key_base + pairs[:, 1], ranks, self.no_rank, self.dtype)
        # The rank of every pair of bytes, indexed by (first byte << 8) | second byte: a word's first ranks in one
        # gather.
        known = np.flatnonzero(self.byte_ids >= 0)
        first, second = np.repeat(known, known.size), np.tile(known, known.size)
        self.byte_pair_ranks = np.full(1 << 16, self.no_rank, dtype=self.dtype)
        self.byte_pair_ranks[(first << 8) | second] = _lookup_ranks(self.byte_ids[first], self.byte_ids[second], self)


def merge_batch_packed(words: Sequence[bytes], tables: BatchTables, dtype: np.dtype) -> list[bytes]:
    """Merge many words (UTF-8 bytes) at once with numpy: each word's ids, the same as `merge_ids` on its byte ids,
    packed as the bytes of an array of `dtype` (ids must fit it), cut straight from the numpy arrays.

    The words lie end to end in two arrays, ids and pair ranks (the rank of the pair starting at each position),
    each word followed by a separator. Each step finds every unfinished word's lowest pair rank (one reduceat over
    the word starts) and merges its leftmost occurrence (for monotone merges: all its non-overlapping occurrences,
    leftmost first); only the ranks next to a merge are looked up again. Merged-away positions stay as holes, and
    finished words stay, until the two fill half of the arrays. Raises MissingByteError when a byte has no token.

    >>> tables = BatchTables({0x61: 0, 0x62: 1}, {(0, 1): 0}, [2])
    >>> merge_batch_packed([b"ab", b"ba", b""], tables, np.dtype("<u2"))
    [b'\\x02\\x00', b'\\x01\\x00\\x00\\x00', b'']
    """
    done = _merged_segments(words, tables)
    if not done:
        return []
    packed = np.concatenate([ids for ids, _, _ in done]).astype(dtype).tobytes()  # separators included
    begins, ends = _word_bounds(done)
    return [packed[begin:end] for begin, end in zip((begins * dtype.itemsize).tolist(),
                                                    (ends * dtype.itemsize).tolist())]


def merge_batch_arrays(words: Sequence[bytes], tables: BatchTables, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """`merge_batch_packed`'s ids as two arrays, in word order: every word's ids end to end (`dtype`), and how many
    each word has; one gather, no bytes object per word (for callers that want arrays, such as training's start
    state).

    >>> tables = BatchTables({0x61: 0, 0x62: 1}, {(0, 1): 0}, [2])
    >>> ids, sizes = merge_batch_arrays([b"ab", b"ba", b""], tables, np.dtype("<u2"))
    >>> ids.tolist(), sizes.tolist()
    ([2, 1, 0], [1, 2, 0])
    """
    return _word_arrays(_merged_segments(words, tables), dtype)


def merge_id_batch_arrays(word_ids: np.ndarray, lengths: np.ndarray, tables: BatchTables, dtype: np.dtype
                          ) -> tuple[np.ndarray, np.ndarray]:
    """`merge_batch_arrays` on words given as ids rather than bytes: `word_ids`, every word's ids end to end, and
    `lengths`, how many each has (one or more), every id below `tables.separator` (as the ids its pairs and merges
    name are); `tables` may have no byte ids (`BatchTables({}, ...)`). Where the words are some tokenizer's
    segmentation already (SuperBPE's stage-1 ids), this applies further merges to it without going back to bytes.

    >>> tables = BatchTables({}, {(7, 8): 0, (9, 7): 1}, [9, 10])
    >>> ids, sizes = merge_id_batch_arrays(np.array([7, 8, 7, 8, 8, 7]), np.array([3, 3]), tables, np.dtype("<u4"))
    >>> ids.tolist(), sizes.tolist()
    ([10, 8, 8, 7], [1, 3])
    """
    if not len(lengths):
        return np.zeros(0, dtype=dtype), np.zeros(0, dtype=np.intp)
    if int(word_ids.max(initial=0)) >= tables.separator:
        raise ValueError(f"word ids must be below {tables.separator}, the merge tables' separator")
    lengths = lengths.astype(np.intp, copy=False)
    separators = np.cumsum(lengths + 1) - 1
    ids = np.full(len(word_ids) + len(lengths), tables.separator, dtype=tables.dtype)
    ids[range_positions(separators - lengths, lengths)] = word_ids
    rank = np.empty(ids.size, dtype=tables.dtype)
    rank[:-1] = _lookup_ranks(ids[:-1], ids[1:], tables)
    return _word_arrays(_merge_segments(ids, rank, lengths, separators, tables), dtype)


def _word_arrays(done: list[tuple[np.ndarray, np.ndarray, np.ndarray]], dtype: np.dtype
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The merged words' ids end to end (`dtype`) and how many each has, in word order, from `_merge_segments`."""
    if not done:
        return np.zeros(0, dtype=dtype), np.zeros(0, dtype=np.intp)
    segments = np.concatenate([ids for ids, _, _ in done])  # each word's ids and a separator
    numbers = np.concatenate([numbers for _, numbers, _ in done])
    lengths = np.concatenate([lengths for _, _, lengths in done])
    order = np.argsort(numbers, kind="stable")
    sizes = lengths[order] - 1
    starts = (np.cumsum(lengths) - lengths)[order]
    return segments[range_positions(starts, sizes)].astype(dtype), sizes


def _merged_segments(words: Sequence[bytes], tables: BatchTables) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """merge_batch_packed's work: (segments, word numbers, segment lengths) of the words in the order they finished,
    each segment a word's ids and a separator."""
    if not words:
        return []
    lengths = np.fromiter(map(len, words), dtype=np.intp, count=len(words))
    raw = np.frombuffer(b"\0".join(words) + b"\0", dtype=np.uint8)
    separators = np.cumsum(lengths + 1) - 1
    ids = tables.byte_ids[raw]
    ids[separators] = tables.separator
    if ids.min() < 0:
        raise MissingByteError
    rank = np.empty(ids.size, dtype=tables.dtype)  # rank[i]: the pair (ids[i], ids[i + 1])
    rank[:-1] = tables.byte_pair_ranks[(raw[:-1].astype(np.intp) << 8) | raw[1:]]
    return _merge_segments(ids, rank, lengths, separators, tables)


def _merge_segments(ids: np.ndarray, rank: np.ndarray, lengths: np.ndarray, separators: np.ndarray,
                    tables: BatchTables) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The merging itself: `ids`, the words' ids end to end, each followed by a separator (at `separators`), and
    `rank`, the rank of the pair starting at each position (the last entry unset); `lengths`, the words' ids each.
    The words' segments, as `_merged_segments` gives them."""
    no_rank = tables.no_rank
    rank[separators] = no_rank
    rank[separators[lengths > 0] - 1] = no_rank
    starts = separators - lengths  # a word's segment: from its start to its separator, both included
    segment_lengths = lengths + 1
    numbers = np.arange(len(lengths))
    done: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (segments, word numbers, segment lengths)
    # A merge leaves a hole at its right position instead of moving everything after it: positions link to their
    # live neighbours, and the arrays are compacted only when holes and finished words fill half of them.
    alive = np.ones(ids.size, dtype=bool)
    following, preceding = np.arange(1, ids.size + 1), np.arange(-1, ids.size - 1)
    holes = 0
    while True:
        word_min = np.minimum.reduceat(rank, starts)
        finished = word_min == no_rank
        finished_count = int(np.count_nonzero(finished))
        finished_size = int(segment_lengths[finished].sum()) if finished_count else 0
        if finished_count == starts.size or (holes + finished_size) * 2 > ids.size:
            live_lengths = np.add.reduceat(alive, starts, dtype=np.intp) if holes else segment_lengths
            if finished_count == starts.size:
                done.append((ids[alive] if holes else ids, numbers, live_lengths))
                break
            keep = alive
            if finished_count:
                in_finished = np.repeat(finished, segment_lengths)
                done.append((ids[in_finished & alive], numbers[finished], live_lengths[finished]))
                keep = alive & ~in_finished
                unfinished = ~finished
                numbers, word_min, live_lengths = numbers[unfinished], word_min[unfinished], live_lengths[unfinished]
            ids, rank = ids[keep], rank[keep]
            segment_lengths = live_lengths
            starts = np.cumsum(live_lengths) - live_lengths
            alive = np.ones(ids.size, dtype=bool)
            following, preceding = np.arange(1, ids.size + 1), np.arange(-1, ids.size - 1)
            holes = 0
        elif finished_count:
            word_min[finished] = -1  # no rank equals it: finished words stay, with no candidate
        take = np.flatnonzero(rank == np.repeat(word_min, segment_lengths))
        if not tables.monotone:
            word = np.searchsorted(starts, take, side="right")
            take = take[np.concatenate(([True], word[1:] != word[:-1]))]
        elif take.size > 1:
            take = every_other_in_runs(take, following)
        right = following[take]
        ids[take] = tables.merged_ids[rank[take]]
        rank[right] = no_rank
        alive[right] = False
        holes += take.size
        after = following[right]
        following[take] = after
        preceding[after] = take
        # The pairs on either side of each merged token. At a word's start the left one is (separator, token), or
        # for the first word (last separator, token) at index -1: no rank either way.
        changed = np.concatenate((preceding[take], take))
        rank[changed] = _lookup_ranks(ids[changed], ids[np.concatenate((take, after))], tables)
    return done


def range_positions(starts: np.ndarray, sizes: np.ndarray, dtype: type = np.intp) -> np.ndarray:
    """The positions `starts[i]`, ..., `starts[i] + sizes[i] - 1` of every range, in order, as `dtype`: the gather
    behind each "take these slices of a flat array" (a batch's words here; the flat store's words, the pieces of a
    batch and the pre-tokens of a table in training), with no Python step per range.

    >>> range_positions(np.array([5, 0, 9]), np.array([2, 0, 3])).tolist()
    [5, 6, 9, 10, 11]
    """
    ends = np.cumsum(sizes, dtype=dtype)
    return np.repeat(starts - (ends - sizes), sizes) + np.arange(ends[-1] if len(ends) else 0, dtype=dtype)


def every_other_in_runs(take: np.ndarray, following: np.ndarray) -> np.ndarray:
    """Positions of a repeated pair (x, x), x, x, x... (each the `following` of the one before): keep the first,
    third... of each run.

    >>> every_other_in_runs(np.array([1, 2, 3, 4, 7, 9, 10]), np.arange(1, 12))
    array([1, 3, 7, 9])
    """
    adjacent = following[take[:-1]] == take[1:]
    if not adjacent.any():
        return take
    # int32 and in place: `hf_bpe.encode.long_words` calls this on slices of a giant pre-token, in bounded memory
    # (and `hf_bpe.train.merging.flat_corpus` on a merge's occurrences).
    index = np.arange(take.size, dtype=np.int32 if take.size < 2**31 else np.int64)
    run_start = np.where(np.concatenate(([True], ~adjacent)), index, 0)
    np.maximum.accumulate(run_start, out=run_start)
    index -= run_start
    return take[(index & 1) == 0]


def _word_bounds(done: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Where each word's ids begin and end (before its separator) in the concatenated segments, in word order."""
    numbers = np.concatenate([numbers for _, numbers, _ in done])
    lengths = np.concatenate([lengths for _, _, lengths in done])
    order = np.argsort(numbers, kind="stable")  # a radix sort for ints, faster than the default
    ends = np.cumsum(lengths)[order] - 1
    return ends - lengths[order] + 1, ends


def _lookup_ranks(left: np.ndarray, right: np.ndarray, tables: BatchTables) -> np.ndarray:
    """The rank of each pair (left[i], right[i]), `tables.no_rank` when it has none."""
    return tables.pair_table.lookup(left.astype(np.int64) * tables.key_base + right)
