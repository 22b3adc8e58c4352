"""`range_positions` against the plain concatenation of the ranges."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hf_bpe.encode.merge_kernels import range_positions


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 20)), max_size=30),
       st.sampled_from([np.intp, np.int32]))
def test_positions_are_the_ranges_end_to_end(ranges: list[tuple[int, int]], dtype: type) -> None:
    starts = np.array([start for start, _ in ranges], dtype=np.int64)
    sizes = np.array([size for _, size in ranges], dtype=np.int64)
    expected = [position for start, size in ranges for position in range(start, start + size)]
    assert range_positions(starts, sizes, dtype).tolist() == expected
