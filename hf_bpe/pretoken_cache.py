"""The encoder's cache: pre-token -> ids, bounded in bytes, with misses batched.

The encoder looks pre-tokens up with C-level `map(cache.__getitem__, pretokens)`. A miss does not encode anything:
it records the pre-token in `waiting` and hands out the marker `(-1,)`; `resolve` later merges every waiting
pre-token at once (one numpy batch, `hf_bpe.merge`), and `replace_markers` puts the ids in place of the markers.

>>> cache = PretokenCache(lambda pretokens: [tuple(map(ord, p)) for p in pretokens], 1 << 20)
>>> cache["ab"], cache[" c"], cache["ab"], cache.waiting
((-1,), (-1,), (-1,), ['ab', ' c', 'ab'])
>>> cache.resolve()
{'ab': (97, 98), ' c': (32, 99)}
>>> cache["ab"], cache.waiting
((97, 98), [])
>>> replace_markers([5, -1, 6, -1], [(1, 2), ()])
[5, 1, 2, 6]
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Callable, Iterable
from itertools import chain, compress

import numpy as np

#: In a list of ids, stands for the ids of a pre-token that waits in the cache (ids are never negative).
PENDING = -1
PENDING_IDS = (PENDING,)
#: Pre-tokens longer than this are encoded but not cached, so that one huge pre-token cannot pin memory.
MAX_CACHED_LENGTH = 256

Ids = tuple[int, ...]


class PretokenCache(dict[str, Ids]):
    """pre-token -> ids, bounded by `max_bytes`; `merge` encodes a list of pre-tokens.

    Memory: the pre-tokens are kept in two generations of half of `max_bytes` each. When the young one (this dict)
    fills up, it becomes the old one and starts empty; a miss finds a pre-token in the old generation before
    computing it, and moves it back. So the pre-tokens used since the last turn survive, the bound holds, and a
    full cache never turns into a stream of misses.
    """

    def __init__(self, merge: Callable[[list[str]], list[Ids]], max_bytes: int) -> None:
        super().__init__()
        self._merge = merge
        self._generation_bytes = max_bytes // 2
        self._bytes = 0
        self._old: dict[str, Ids] = {}
        self._old_bytes = 0
        #: The pre-tokens that got a marker, once per marker, in the order handed out.
        self.waiting: list[str] = []
        self._single_ids: dict[Ids, Ids] = {}

    def _shared(self, ids: Ids) -> Ids:
        """One tuple object for all pre-tokens that are the same single token: most occurrences are of such
        pre-tokens, and the lookups then read a few thousand hot tuples instead of one per pre-token."""
        return self._single_ids.setdefault(ids, ids) if len(ids) == 1 else ids

    def size(self) -> int:
        """The bytes held, as counted against `max_bytes`: keys, ids and hash tables of both generations."""
        return self._bytes + sys.getsizeof(self) + self._old_bytes

    def __missing__(self, pretoken: str) -> Ids:
        ids = self._old.pop(pretoken, None)
        if ids is None:
            self.waiting.append(pretoken)
            return PENDING_IDS
        self[pretoken] = ids
        self._bytes += sys.getsizeof(pretoken) + sys.getsizeof(ids)  # the old generation's bytes stay counted too
        return ids

    def resolve(self) -> dict[str, Ids]:
        """Merge and cache the waiting pre-tokens, return their ids; `waiting` is emptied."""
        pretokens = _compact_copies(list(dict.fromkeys(self.waiting)))
        self.waiting.clear()
        values = dict(zip(pretokens, map(self._shared, self._merge(pretokens))))
        self._store(pretokens, values)
        return values

    def _store(self, pretokens: list[str], values: dict[str, Ids]) -> None:
        """Cache the pre-tokens in text order: the lookups, in text order too, then find nearby pre-tokens' entries,
        keys and ids close together in memory (about 15% faster than another order)."""
        cacheable = [pretoken for pretoken in pretokens if len(pretoken) <= MAX_CACHED_LENGTH]
        added = _size_of(cacheable, map(values.__getitem__, cacheable))
        if self._bytes + added + sys.getsizeof(self) > self._generation_bytes:
            self._old = {}
            self._old = dict(self)
            self._old_bytes = self._bytes + sys.getsizeof(self._old)
            self.clear()
            self._bytes = 0
            if added > self._generation_bytes:
                return  # more new pre-tokens than a generation holds: not cached
        self.update(zip(cacheable, map(values.__getitem__, cacheable)))
        self._bytes += added


def _compact_copies(strings: list[str]) -> list[str]:
    """Copies of `strings`, allocated one after the other: as cache keys, they are read on every lookup, and the
    originals lie scattered among the text's discarded pre-tokens.

    >>> _compact_copies(["ab", "", "c"])
    ['ab', '', 'c']
    """
    joined = "".join(strings)
    ends = np.cumsum(np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))).tolist()
    return list(map(joined.__getitem__, map(slice, [0, *ends], ends)))


def _size_of(keys: list[str], values: Iterable[Ids]) -> int:
    """The bytes `sys.getsizeof` counts for the str keys and the tuples of ids (an upper bound for non-ASCII keys),
    computed with C-level calls: calling `sys.getsizeof` on each would cost more than the rest of a cache miss.

    >>> keys, values = ["ab", "é"], [(1,), (2, 3)]
    >>> _size_of(keys, values) >= sum(map(sys.getsizeof, keys + values)) >= _size_of(keys, values) - 40
    True
    """
    wide = list(compress(keys, map(operator.not_, map(str.isascii, keys))))
    return (89 * len(keys) + sum(map(len, keys)) + 31 * len(wide) + 3 * sum(map(len, wide))
            + 8 * sum(map(len, values)))


def replace_markers(ids: list[int], values: list[Ids]) -> list[int]:
    """`ids` with its markers (-1), in order, replaced by `values`.

    Finding a marker costs about 7 ns per id scanned with `list.index`, against 20-26 ns to copy the ids into numpy
    first, but 0.5 us of Python per marker: so `list.index` for a few markers, numpy for many.

    >>> replace_markers([-1, 7, -1, -1], [(1,), (2, 3), ()])
    [1, 7, 2, 3]
    """
    if 32 * len(values) < len(ids):
        positions = []
        position = -1
        index = ids.index
        for _ in values:
            position = index(PENDING, position + 1)
            positions.append(position)
    else:
        positions = np.flatnonzero(np.array(ids, dtype=np.int64) == PENDING).tolist()
    between = map(ids.__getitem__, map(slice, [0, *map((1).__add__, positions)], [*positions, len(ids)]))
    return list(chain.from_iterable(chain.from_iterable(zip(between, chain(values, ((),))))))
