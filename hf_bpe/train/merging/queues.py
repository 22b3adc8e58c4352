"""The merge loop's priority structures: which pair is merged next.

Both pop the pair with the highest count, ties going to the lexicographically greater (bytes, bytes) pair, and both
skip stale entries lazily (a pair's count is looked up when it is popped; so an entry may also be a duplicate). Both
have a `floor`: while it is set, `pop` gives None rather than a pair counting less (the store has not filed those
pairs yet, see `FlatCorpus.floor`). `_BucketQueue` is the default; the heap is kept as the plain alternative the
tests compare it with.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from itertools import compress, repeat
from operator import and_, eq, not_, rshift

import numpy as np

MAX_PAIR_COUNT = (1 << 63) - 1  # `merge_loop._Words.check_totals` refuses counts that could reach it


class _LazyHeap:
    """The most frequent pair first, from a max-heap with lazy updates.

    A pair's count only grows during the merge that creates it (every new pair contains the new token) and only
    shrinks afterwards, so a heap entry's count is never below the true count: an entry whose count is out of date
    is pushed back with the true count when it reaches the top. Entries are (-count, order key, pair), compared in C.
    """

    def __init__(self, pair_counts: dict[str, int], token_keys: list[str], floor: int = 0) -> None:
        self.pair_counts, self.token_keys, self.floor = pair_counts, token_keys, floor
        self.heap = [(-count, token_keys[ord(pair[0])] + token_keys[ord(pair[1])], pair)
                     for pair, count in pair_counts.items()]
        heapq.heapify(self.heap)

    def pop(self) -> str | None:
        """Remove and return the pair with the highest count (ties: the greater bytes), or None when none is left."""
        heap, pair_counts, heappop, floor = self.heap, self.pair_counts, heapq.heappop, self.floor
        while heap:
            if -heap[0][0] < floor:
                return None
            negative_count, key, pair = heappop(heap)
            count = pair_counts.get(pair, 0)
            if count == -negative_count:
                return pair
            if count:
                heapq.heappush(heap, (-count, key, pair))
        return None

    def add(self, created: dict[str, int]) -> None:
        """Add the pairs a merge created, with their counts."""
        token_keys, heap, heappush = self.token_keys, self.heap, heapq.heappush
        for pair, count in created.items():
            heappush(heap, (-count, token_keys[ord(pair[0])] + token_keys[ord(pair[1])], pair))


class _BucketQueue:
    """The most frequent pair first, from frequency buckets: count -> the pairs with (at most) that count.

    Only the top bucket is ordered (a heap of (order key, pair), smallest key = greatest pair first). The top count
    never rises: a pair created by a merge never counts more than the merged pair (each occurrence of it holds one
    occurrence of the new token, and there are at most as many of those as the merged pair's count), and every other
    count only falls. So buckets are visited once each, from the highest count down. Entries are lazy like the heap's:
    a pair whose count fell since it was filed is moved down to its true bucket when its bucket is reached.

    The other buckets hold bare pairs: a pair's order key is made only when its bucket becomes the top. Most pairs
    (created in a single rare word) never get there, and a (key, pair) entry for each would cost about 150 bytes per
    pair, the largest part of the merge loop's memory (there are about as many pairs as distinct pre-tokens).
    """

    def __init__(self, pair_counts: dict[str, int], token_keys: list[str], floor: int = 0,
                 field: tuple[int, int] | None = None, filed: tuple[list[str], np.ndarray] | None = None) -> None:
        """`field`, (shift, mask): `pair_counts` holds packed counts (parity-aware training's, see
        `field_floors.PackedFields`) and this queue ranks the pairs by one field of them, `(packed >> shift) &
        mask`. Its extraction is done here, in C-level maps where it can be, rather than by a view whose lookups
        would each be a Python call.

        No pair counting less than the floor (or 0) is filed, nor kept when its count falls below it: whoever
        lowers the floor adds those that then count enough (the stores' `lower_floor` returns every pair below the
        old floor; parity-aware training's lowerings, those of the lowered fields).

        `filed`: the pairs of `pair_counts` that count at least the floor (and 1) here, with those counts (int64),
        when the caller knows them (parity-aware training, from its byte pairs' counts per field): the buckets are
        made from them by a sort, rather than from every count of `pair_counts` in turn."""
        self.pair_counts, self.token_keys, self.floor = pair_counts, token_keys, floor
        self.shift, self.mask = field if field is not None else (0, -1)
        self.buckets: dict[int, list[str]] = defaultdict(list)
        lowest = max(floor, 1)
        if filed is not None:
            pairs, counts = filed
            order = np.argsort(counts, kind="stable")
            counts = counts[order]
            pairs = list(map(pairs.__getitem__, order.tolist()))
            starts = np.flatnonzero(np.diff(counts, prepend=-1)).tolist()
            self.buckets.update((count, pairs[start:stop]) for count, start, stop in
                                zip(counts[starts].tolist(), starts, [*starts[1:], len(pairs)]))
        else:
            for pair, count in pair_counts.items():
                if (count := count >> self.shift & self.mask) >= lowest:
                    self.buckets[count].append(pair)
        self.bucket_counts = [-count for count in self.buckets]  # a max-heap of the counts with a bucket
        heapq.heapify(self.bucket_counts)
        self.top_count = MAX_PAIR_COUNT  # the count of `top`, the bucket being drained
        self.top: list[tuple[str, str]] = []

    def pop(self) -> str | None:
        """Remove and return the pair with the highest count (ties: the greater bytes), or None when none is left."""
        pair_counts, heappop, shift, mask = self.pair_counts, heapq.heappop, self.shift, self.mask
        lowest = max(self.floor, 1)
        while True:
            top, top_count = self.top, self.top_count
            while top:
                _, pair = heappop(top)
                count = pair_counts.get(pair, 0) >> shift & mask
                if count == top_count:
                    return pair
                if count >= lowest:
                    self._file(count, pair)
            if not self.bucket_counts or -self.bucket_counts[0] < self.floor:
                return None
            self.top_count = top_count = -heappop(self.bucket_counts)
            # Most pairs of a bucket fell since they were filed: only those still at its count get an order key and
            # a place in the heap, the others are filed at their count now.
            pairs = self.buckets.pop(top_count)
            if mask == -1:
                counts = list(map(pair_counts.get, pairs))
            else:
                counts = list(map(and_, map(rshift, map(pair_counts.get, pairs, repeat(0)), repeat(shift)),
                                  repeat(mask)))
            current = list(map(eq, counts, repeat(top_count)))
            for pair, count in compress(zip(pairs, counts), map(not_, current)):
                if count and count >= lowest:  # merged away (None, or 0), or below the floor: dropped
                    self._file(count, pair)
            token_keys = self.token_keys
            self.top = [(token_keys[ord(pair[0])] + token_keys[ord(pair[1])], pair)
                        for pair in compress(pairs, current)]
            heapq.heapify(self.top)

    def add(self, created: dict[str, int]) -> None:
        """Add the pairs a merge created, with their counts (packed, with a `field`); those below the floor are not."""
        buckets, top_count, shift, mask = self.buckets, self.top_count, self.shift, self.mask
        lowest = max(self.floor, 1)
        for pair, count in created.items():
            if (count := count >> shift & mask) < lowest:
                continue
            bucket = buckets.get(count) if count < top_count else None
            if bucket is None:
                self._file(count, pair)
            else:
                bucket.append(pair)

    def _file(self, count: int, pair: str) -> None:
        if count < self.top_count:
            bucket = self.buckets.get(count)
            if bucket is None:
                self.buckets[count] = [pair]
                heapq.heappush(self.bucket_counts, -count)
            else:
                bucket.append(pair)
        elif count == self.top_count:
            heapq.heappush(self.top, (self.token_keys[ord(pair[0])] + self.token_keys[ord(pair[1])], pair))
        else:
            raise AssertionError(f"pair {pair!r} counts {count}, more than the top bucket's {self.top_count}")


QUEUES = {"buckets": _BucketQueue, "heap": _LazyHeap}
