"""Tests for hf_bpe.train.merging.store_arrays: each position's word, in a byte a position, is the count of the
separators up to it less one, whatever the words' lengths and however the building is cut into blocks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hf_bpe.train.merging import store_arrays
from hf_bpe.train.merging.store_arrays import WORD_BLOCK, WORD_BLOCK_BITS, WordPositions


@settings(max_examples=200, deadline=None)
@given(lengths=st.lists(st.one_of(st.integers(0, 3), st.integers(250, 700)), min_size=1, max_size=40),
       build_blocks=st.integers(1, 4))
def test_words_are_the_separators_counted(lengths: list[int], build_blocks: int) -> None:
    # Words of no symbol put a separator at every position of a block (offsets up to 255); long ones span blocks.
    separators = np.zeros(sum(lengths) + len(lengths) + 1, dtype=bool)
    separators[np.cumsum(np.array(lengths) + 1)] = True
    separators[0] = True
    expected = np.cumsum(separators) - 1
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store_arrays, "_BUILD_BLOCK", build_blocks * WORD_BLOCK)
        words = WordPositions(separators)
    positions = np.arange(len(separators))
    assert words.at(positions).tolist() == expected.tolist()
    assert [words.base_array[p >> WORD_BLOCK_BITS] + words.offset_array[p] for p in positions.tolist()
            ] == expected.tolist()


def test_a_block_of_separators_only() -> None:
    separators = np.ones(3 * WORD_BLOCK, dtype=bool)
    assert WordPositions(separators).at(np.arange(3 * WORD_BLOCK)).tolist() == list(range(3 * WORD_BLOCK))
