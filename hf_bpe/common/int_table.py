"""A hash table from non-negative int64 keys to int values, built and probed with numpy for many keys at once.

The merge kernels look up the ranks of thousands of token pairs per step (`hf_bpe.encode.merge_kernels`), and the
derivation of merges from a tiktoken file looks up its tokens' substrings (`hf_bpe.formats.tiktoken_merges`): a
Python dict would cost a Python call per key, a sorted array with `np.searchsorted` about 17 random reads per key.

Open addressing with linear probing at a load of at most 1/8: one or two random reads per lookup. All keys take
their first probe at once, which answers nearly all of them (a hit, or an empty slot: missing); only the few whose
home slot holds another key probe on. A run of probes ends at an empty slot (key -1); the table has room past its
last slot for probes that run off the end. A table made with room for more keys (`capacity`) takes them later,
many at once (`insert`), as the derivation adds the merges of each token length before the next needs them.

>>> table = IntTable(np.array([5, 7, 1 << 40]), np.array([50, 70, 40]), missing=-1)
>>> table.lookup(np.array([7, 6, 1 << 40, 5])).tolist()
[70, -1, 40, 50]
>>> growing = IntTable(np.array([5]), np.array([50]), missing=-1, capacity=3)
>>> growing.insert(np.array([7, 9]), np.array([70, 90]))
>>> growing.lookup(np.array([9, 5, 7, 8])).tolist()
[90, 50, 70, -1]
"""

from __future__ import annotations

import numpy as np


class IntTable:
    """`keys[i]` -> `values[i]` (keys distinct and >= 0); a key not in the table gives `missing`. Values are stored
    as `dtype` (int64 by default). `capacity`: how many keys the table will hold in all, with those `insert` adds
    (default: just `keys`)."""

    def __init__(self, keys: np.ndarray, values: np.ndarray, missing: int, dtype: type[np.signedinteger] = np.int64,
                 capacity: int = 0) -> None:
        keys = np.asarray(keys, dtype=np.int64)
        self.missing = missing
        self.room = max(capacity, len(keys))
        self.bits = max(4, (8 * self.room).bit_length())
        slots = hash_slots(keys, self.bits)
        order = np.argsort(slots, kind="stable")
        slots, keys, values = slots[order], keys[order], np.asarray(values)[order]
        # Linear probing: the i-th key of a run of equal home slots goes i places on, and runs push later runs on.
        position = np.maximum.accumulate(slots - np.arange(slots.size)) + np.arange(slots.size) if slots.size else slots
        size = (1 << self.bits) + self.room + 1
        self.keys = np.full(size, -1, dtype=np.int64)
        self.values = np.full(size, missing, dtype=dtype)
        self.keys[position] = keys
        self.values[position] = values
        self.room -= len(keys)

    def insert(self, keys: np.ndarray, values: np.ndarray) -> None:
        """Add `keys[i]` -> `values[i]` (keys distinct, >= 0, and not in the table yet; at most the room left of
        `capacity`, else ValueError). Each key probes on from its home slot to the first empty one, as in a table
        built with it; of several keys probing one empty slot, the first takes it and the others probe on."""
        keys = np.asarray(keys, dtype=np.int64)
        if len(keys) > self.room:
            raise ValueError(f"the table has room for {self.room} more keys, not {len(keys)}")
        self.room -= len(keys)
        values = np.asarray(values)
        slots = hash_slots(keys, self.bits)
        waiting = np.arange(keys.size)
        while waiting.size:
            probe = slots[waiting]
            empty = self.keys[probe] == -1
            taken, first = np.unique(probe[empty], return_index=True)
            winners = waiting[empty][first]
            self.keys[taken] = keys[winners]
            self.values[taken] = values[winners]
            placed = np.zeros(keys.size, dtype=bool)
            placed[winners] = True
            waiting = waiting[~placed[waiting]]
            slots[waiting] += 1  # their slot is taken now (before, or by a winner)

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        """The value of each key (int64, >= 0), `missing` for keys not in the table; a new array of `dtype`, of the
        keys' shape."""
        shape, keys = keys.shape, keys.reshape(-1)
        slots = hash_slots(keys, self.bits)
        found = self.keys[slots]
        values = self.values[slots]
        colliding = np.flatnonzero((found != keys) & (found != -1))
        while colliding.size:
            slots[colliding] += 1
            probe = slots[colliding]
            found = self.keys[probe]
            values[colliding] = self.values[probe]
            colliding = colliding[(found != keys[colliding]) & (found != -1)]
        return values.reshape(shape)


def hash_slots(keys: np.ndarray, bits: int) -> np.ndarray:
    """Fibonacci hashing: the top `bits` bits of key * 2^64/phi (keys >= 0).

    >>> hash_slots(np.array([0, 1, 2]), 4).tolist()
    [0, 9, 3]
    """
    return ((keys.view(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(64 - bits)).view(np.int64)


__all__ = ["IntTable", "hash_slots"]
