"""Ranges of an array laid end to end, by numpy alone: the gather behind each "take these slices of a flat array"
(words of a flat store, pieces of a batch, pre-tokens of a table), with no Python step per range."""

from __future__ import annotations

import numpy as np


def range_positions(starts: np.ndarray, sizes: np.ndarray, dtype: type = np.intp) -> np.ndarray:
    """The positions `starts[i]`, ..., `starts[i] + sizes[i] - 1` of every range, in order, as `dtype`.

    >>> range_positions(np.array([5, 0, 9]), np.array([2, 0, 3])).tolist()
    [5, 6, 9, 10, 11]
    """
    ends = np.cumsum(sizes, dtype=dtype)
    return np.repeat(starts - (ends - sizes), sizes) + np.arange(ends[-1] if len(ends) else 0, dtype=dtype)
