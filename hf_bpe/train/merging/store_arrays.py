"""The flat store's arrays (`flat_corpus.FlatCorpus`): Python arrays that numpy views, so that the Python merges and
the numpy merges read and write the same memory, and the map from a position to its word in about a byte a position.

A position's word is the number of separators up to it, less one: the words lie end to end, each after a separator,
and never move. An int32 per position was a quarter of the store. `WordPositions` keeps, for each block of
`WORD_BLOCK` positions, the word of its first position (`bases`, int32), and for each position its word's distance
from that one (`offsets`, uint8: a block holds fewer than 256 separators after its first position). A lookup is
`bases[p >> WORD_BLOCK_BITS] + offsets[p]`: in the Python merges an index and a shift more than one array read; in
numpy, two takes.

Not handled: more than 2 ** 31 - 1 words (int32 bases; the store's positions are int32 too).
"""

from __future__ import annotations

from array import array

import numpy as np

WORD_BLOCK_BITS = 8
WORD_BLOCK = 1 << WORD_BLOCK_BITS
# The separators are turned into words this many positions at a time (a multiple of WORD_BLOCK): no full-size
# temporary.
_BUILD_BLOCK = 1 << 18

_DTYPES = {"i": np.int32, "B": np.uint8}


def shared_array(size: int, typecode: str = "i") -> tuple[array, np.ndarray]:
    """An `array(typecode)` of `size` zeros ("i": int32, "B": uint8), and a numpy view of it (writes through either
    show in both).

    >>> buffer, view = shared_array(3)
    >>> view[1] = 7
    >>> buffer
    array('i', [0, 7, 0])
    """
    buffer = array(typecode, [0]) * size
    return buffer, np.frombuffer(buffer, dtype=_DTYPES[typecode])


class WordPositions:
    """Each position's word, from where the words' separators are (a bool per position, True at a separator; the
    first position must be one). `at` looks up many positions; the Python merges read `base_array` and
    `offset_array` themselves (see the module docstring).

    >>> words = WordPositions(np.array([1, 0, 0, 1, 0, 1] + [0] * 300, dtype=bool))
    >>> words.at(np.array([1, 2, 4, 300])).tolist(), words.base_array[1] + words.offset_array[300]
    ([0, 0, 1, 2], 2)
    """

    def __init__(self, separators: np.ndarray) -> None:
        size = len(separators)
        self.base_array, self.bases = shared_array((size + WORD_BLOCK - 1) >> WORD_BLOCK_BITS)
        self.offset_array, self.offsets = shared_array(size, "B")
        words_before = -1
        for start in range(0, size, _BUILD_BLOCK):
            words = np.cumsum(separators[start:start + _BUILD_BLOCK], dtype=np.int64)
            words += words_before
            words_before = int(words[-1])
            bases = words[::WORD_BLOCK]
            first = start >> WORD_BLOCK_BITS
            self.bases[first:first + len(bases)] = bases
            words -= np.repeat(bases, WORD_BLOCK)[:len(words)]
            self.offsets[start:start + len(words)] = words

    def at(self, positions: np.ndarray) -> np.ndarray:
        """The words of `positions` (int32)."""
        return self.bases.take(positions >> WORD_BLOCK_BITS) + self.offsets.take(positions)


__all__ = ["WORD_BLOCK", "WORD_BLOCK_BITS", "WordPositions", "shared_array"]
