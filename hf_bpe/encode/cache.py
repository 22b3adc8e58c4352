"""The encoder's cache: pre-token -> ids, bounded in bytes, with misses batched.

Ids are kept as `bytes` of little-endian uint32 (`ID_DTYPE`): a text's ids are then `b"".join(map(cache.__getitem__,
pretokens))`, one C-level call, which numpy reads without a copy (`np.frombuffer`), so that token arrays never pass
through Python ints, and a cached entry takes 4 bytes per id instead of a tuple's 8 plus the int's.

A miss does not encode anything: it records the pre-token in `waiting` and hands out the marker `PENDING_IDS`;
`resolve` later merges every waiting pre-token at once (one numpy batch, `hf_bpe.encode.merge_kernels`), and
`replace_markers` puts the ids in place of the markers.

>>> cache = PretokenCache(lambda pretokens: pack_ids([tuple(map(ord, p)) for p in pretokens]), 1 << 20)
>>> cache["ab"] == cache[" c"] == PENDING_IDS, cache.waiting
(True, ['ab', ' c'])
>>> values = cache.resolve()
>>> list(values), unpack_ids(values["ab"]), unpack_ids(cache[" c"]), cache.waiting
(['ab', ' c'], [97, 98], [32, 99], [])
>>> unpack_ids(replace_markers(pack_ids([(5,), (6,)])[0] + PENDING_IDS, [pack_ids([(1, 2)])[0]]))
[5, 1, 2]
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Callable, Iterable, Sequence
from itertools import chain, compress

import numpy as np

#: How ids are stored: little-endian uint32.
ID_DTYPE = np.dtype("<u4")
#: In a text's ids, stands for the ids of a pre-token that waits in the cache (not a valid id: see MAX_ID).
PENDING = 0xFFFFFFFF
PENDING_IDS = np.array([PENDING], dtype=ID_DTYPE).tobytes()
#: The largest token id the encoder handles.
MAX_ID = PENDING - 1
#: Pre-tokens longer than this are encoded but not cached, so that one huge pre-token cannot pin memory.
MAX_CACHED_LENGTH = 256
#: Default bound, in bytes, of a Tokenizer's cache (keys, packed ids and hash tables, as `sys.getsizeof` counts).
DEFAULT_CACHE_BYTES = 256 << 20

Ids = bytes


class PretokenCache(dict[str, Ids]):
    """pre-token -> ids, bounded by `max_bytes`; `merge` encodes a list of pre-tokens.

    Memory: the pre-tokens are kept in two generations of half of `max_bytes` each. When the young one (this dict)
    fills up, it becomes the old one and starts empty; a miss finds a pre-token in the old generation before
    computing it, and moves it back. So the pre-tokens used since the last turn survive, the bound holds, and a
    full cache never turns into a stream of misses.
    """

    def __init__(self, merge: Callable[[list[str]], list[Ids]], max_bytes: int) -> None:
        """`merge` gives the ids of a list of pre-tokens, as `pack_ids` packs them."""
        super().__init__()
        self._merge = merge
        self._generation_bytes = max_bytes // 2
        self._bytes = 0
        self._old: dict[str, Ids] = {}
        self._old_bytes = 0
        #: The pre-tokens that got a marker, once per marker, in the order handed out.
        self.waiting: list[str] = []

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
        values = dict(zip(pretokens, self._merge(pretokens)))
        self._store(pretokens, values)
        return values

    def _store(self, pretokens: list[str], values: dict[str, Ids]) -> None:
        """Cache the pre-tokens in text order: the lookups, in text order too, then find nearby pre-tokens' entries,
        keys and ids close together in memory, which makes the lookups faster."""
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
    """The bytes `sys.getsizeof` counts for the str keys and the bytes of ids (an upper bound for non-ASCII keys),
    computed with C-level calls: calling `sys.getsizeof` on each would cost more than the rest of a cache miss.

    >>> keys, values = ["ab", "é"], [b"1234", b"12345678"]
    >>> _size_of(keys, values) >= sum(map(sys.getsizeof, keys + values)) >= _size_of(keys, values) - 40
    True
    """
    wide = list(compress(keys, map(operator.not_, map(str.isascii, keys))))
    return (82 * len(keys) + sum(map(len, keys)) + 31 * len(wide) + 3 * sum(map(len, wide))
            + sum(map(len, values)))


def replace_markers(ids: Ids, values: list[Ids]) -> Ids:
    """`ids` with its markers, in order, replaced by `values`; numpy finds the markers without copying `ids`.

    >>> unpack_ids(replace_markers(PENDING_IDS + pack_ids([(7,)])[0] + 2 * PENDING_IDS, pack_ids([(1,), (2, 3), ()])))
    [1, 7, 2, 3]
    """
    size = ID_DTYPE.itemsize
    positions = (np.flatnonzero(np.frombuffer(ids, dtype=ID_DTYPE) == PENDING) * size).tolist()
    between = map(ids.__getitem__, map(slice, [0, *map(size.__add__, positions)], [*positions, len(ids)]))
    return b"".join(chain.from_iterable(zip(between, chain(values, (b"",)))))


def pack_ids(id_lists: Sequence[Sequence[int]]) -> list[Ids]:
    """Each list of ids as bytes (`ID_DTYPE`), in C-level calls.

    >>> pack_ids([(1, 2), (), (3,)])
    [b'\\x01\\x00\\x00\\x00\\x02\\x00\\x00\\x00', b'', b'\\x03\\x00\\x00\\x00']
    """
    lengths = np.fromiter(map(len, id_lists), dtype=np.int64, count=len(id_lists))
    packed = np.fromiter(chain.from_iterable(id_lists), dtype=ID_DTYPE, count=int(lengths.sum())).tobytes()
    ends = (np.cumsum(lengths) * ID_DTYPE.itemsize).tolist()
    return list(map(packed.__getitem__, map(slice, [0, *ends], ends)))


def unpack_ids(ids: Ids) -> list[int]:
    """The ids in `ids` as a list of ints.

    >>> unpack_ids(pack_ids([(1, 2)])[0])
    [1, 2]
    """
    # numpy makes Python ints from int64 faster than from uint32.
    return np.frombuffer(ids, dtype=ID_DTYPE).astype(np.int64).tolist()
