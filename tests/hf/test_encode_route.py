"""The direct encode route's stages (hf_bpe.hf.encode_route) against plain references; field-by-field comparisons
with the
fast tokenizer are in test_hf_tokenizer.py."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hf_bpe.hf.encode_route import (
    EncodedText,
    EncodeOptions,
    split_encode_options,
    truncated_rows,
    truncation_lengths,
    window_ranges,
)
from hf_bpe.hf.encode_route import TruncationStrategy as Strategy


def reference_windows(length: int, max_length: int, stride: int, side: str) -> list[tuple[int, int]]:
    """Windows as tokenizers' Encoding.truncate describes them, written the slow obvious way."""
    if max_length >= length:
        return [(0, length)]
    if max_length == 0:
        return [(0, 0), (0, length)]
    positions = list(range(length)) if side == "right" else list(range(length))[::-1]
    windows = []
    for first in positions[::max_length - stride]:
        covered = sorted(positions[positions.index(first):][:max_length])
        windows.append((covered[0], covered[-1] + 1))
        if (side == "right" and covered[-1] == length - 1) or (side == "left" and covered[0] == 0):
            break
    return windows


@pytest.mark.parametrize("side", ["right", "left"])
def test_windows_equal_the_reference_exhaustively(side: str) -> None:
    for length in range(0, 14):
        for max_length in range(0, 15):
            for stride in range(0, max(max_length, 1)):
                assert window_ranges(length, max_length, stride, side) == \
                    reference_windows(length, max_length, stride, side), (length, max_length, stride)


def test_windows_cover_every_token_and_share_stride_tokens() -> None:
    ranges = window_ranges(100, 10, 3, "right")
    assert ranges[0] == (0, 10) and ranges[-1][1] == 100
    assert all(previous[1] - current[0] == 3 for previous, current in zip(ranges, ranges[1:]))


def test_a_stride_as_long_as_the_window_is_refused() -> None:
    with pytest.raises(ValueError, match=r"stride \(4\) must be smaller"):
        window_ranges(10, 4, 4, "right")


@given(first=st.integers(0, 30), second=st.one_of(st.none(), st.integers(0, 30)), max_length=st.integers(0, 40))
def test_longest_first_keeps_at_most_max_length_and_shares_fairly(first: int, second: int | None,
                                                                  max_length: int) -> None:
    kept_first, kept_second = truncation_lengths(first, second, Strategy.LONGEST_FIRST, max_length)
    total = kept_first + (kept_second or 0)
    assert total == min(max_length, first + (second or 0)) or max_length == 0
    assert kept_first <= first and (second is None or kept_second <= second)


def test_only_second_without_a_pair_and_too_short_sequences_are_errors() -> None:
    with pytest.raises(ValueError, match="Second sequence not provided"):
        truncation_lengths(10, None, Strategy.ONLY_SECOND, 4)
    with pytest.raises(ValueError, match="too short"):
        truncation_lengths(10, 2, Strategy.ONLY_SECOND, 4)


def test_pair_overflow_rows_come_in_the_order_tokenizers_merges_them() -> None:
    first, second = EncodedText(list(range(6))), EncodedText(list(range(10, 16)))
    options = EncodeOptions(truncation_strategy=Strategy.LONGEST_FIRST, max_length=6, stride=1,
                            return_overflowing_tokens=True)
    rows = [(row.first.ids, row.second.ids) for row in truncated_rows(first, second, options, "right")]
    first_windows = [[0, 1, 2], [2, 3, 4], [4, 5]]
    second_windows = [[10, 11, 12], [12, 13, 14], [14, 15]]
    expected = [(first_windows[0], second_windows[0])]
    for window in first_windows[1:]:
        expected += [(window, second_windows[0])] + [(window, other) for other in second_windows[1:]]
    expected += [(first_windows[0], other) for other in second_windows[1:]]
    assert rows == expected


def test_offsets_travel_with_their_ids() -> None:
    sequence = EncodedText([5, 6, 7], [(0, 1), (1, 3), (3, 4)])
    options = EncodeOptions(truncation_strategy=Strategy.LONGEST_FIRST, max_length=2, return_overflowing_tokens=True)
    rows = truncated_rows(sequence, None, options, "right")
    assert [(row.first.ids, row.first.offsets) for row in rows] == [([5, 6], [(0, 1), (1, 3)]), ([7], [(3, 4)])]


def test_options_are_frozen_and_round_trip() -> None:
    options, rest = split_encode_options({"stride": 2, "max_length": 9, "unknown": 1})
    assert rest == {"unknown": 1}
    assert split_encode_options(options.as_kwargs())[0] == options
    with pytest.raises(AttributeError):
        options.stride = 3  # type: ignore[misc]
