"""Tests for SuperBPE's stage-2 start state (hf_bpe.train.starts.superword_words): pair counts, rare positions and the
cut parts, in numpy over blocks, against counting and cutting every word in plain Python; ids in uint16 and uint32 on
either side of the dtypes' bounds, parts short enough for one uint64 key and longer ones."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hf_bpe.train.merging.merge_loop import _Words
from hf_bpe.train.starts import superword_words
from hf_bpe.train.starts.superword_words import (
    PairCounts,
    arrays_words,
    byte_order_keys,
    cut_at_rare_pairs,
    guess_last_count,
    key_bytes,
    segment_dtype,
)
from hf_bpe.train.starts.tallies import PartTally

# Ids at the bounds of uint16 and of what 16 and 32 bits hold.
WIDE_IDS = [0, 1, 255, 65534, 65535, 65536, 70000, (1 << 21) - 1]


def packed_arrays(segmented: Counter[bytes], dtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """{pre-token's ids packed in `dtype`: count} as `arrays_words` takes them: ids end to end, lengths, counts."""
    lengths = np.fromiter(map(len, segmented), dtype=np.int64, count=len(segmented)) // dtype.itemsize
    counts = np.fromiter(segmented.values(), dtype=np.int64, count=len(segmented))
    return np.frombuffer(b"".join(segmented), dtype=dtype), lengths, counts


def plain_cut(words: list[tuple[list[int], int]], cut_below: int) -> tuple[Counter, Counter, Counter]:
    """(pair counts, parts of two or more tokens with their frequencies, one-token parts' counts), word by word; a
    `cut_below` of 0 cuts nowhere."""
    pairs: Counter[tuple[int, int]] = Counter()
    for tokens, frequency in words:
        for pair in zip(tokens, tokens[1:]):
            pairs[pair] += frequency
    parts: Counter[tuple[int, ...]] = Counter()
    single: Counter[int] = Counter()
    for tokens, frequency in words:
        part = [tokens[0]]
        for left, right in zip(tokens, tokens[1:]):
            if pairs[left, right] < cut_below:
                if len(part) > 1:
                    parts[tuple(part)] += frequency
                else:
                    single[part[0]] += frequency
                part = []
            part.append(right)
        if len(part) > 1:
            parts[tuple(part)] += frequency
        else:
            single[part[0]] += frequency
    return pairs, parts, single


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.lists(st.tuples(st.lists(st.integers(0, 4), min_size=2, max_size=14), st.integers(1, 3)), min_size=1,
                      max_size=30), block=st.integers(1, 20), wide=st.booleans(), cut_below=st.integers(0, 8))
def test_blocks_count_and_cut_as_every_word_is_counted_and_cut(words: list[tuple[list[int], int]], block: int,
                                                               wide: bool, cut_below: int,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(superword_words, "PAIR_BLOCK", block)
    alphabet = WIDE_IDS[3:] if wide else [1, 2, 255, 65534, 65535]
    words = [([alphabet[token] for token in tokens], frequency) for tokens, frequency in words]
    dtype = segment_dtype(max(alphabet) + 1)
    assert dtype == (np.uint32 if wide else np.uint16)
    segmented = Counter()
    for tokens, frequency in words:
        segmented[np.array(tokens, dtype=dtype).tobytes()] += frequency
    num_ids = max(alphabet) + 1
    token_counts = np.zeros(num_ids, dtype=np.uint64)
    start_state = arrays_words(*packed_arrays(segmented, dtype), [None] * num_ids, token_counts)
    assert not token_counts.any()  # every word has two tokens or more
    pairs = PairCounts(start_state)
    expected_pairs, expected_parts, expected_single = plain_cut(words, cut_below)
    assert {divmod(code, num_ids): int(total) for code, total in zip(pairs.distinct.tolist(), pairs.totals)
            } == expected_pairs
    frequent = pairs.frequent(cut_below) if cut_below else None  # None: cut nowhere
    tables = cut_at_rare_pairs(start_state, pairs, frequent, token_counts)
    assert [length for length, _, _ in tables] == sorted({length for length, _, _ in tables})
    found: Counter[tuple[int, ...]] = Counter()
    for length, keys, totals in tables:
        assert keys.dtype == np.dtype((np.void, length * dtype.itemsize))
        order = np.argsort(keys, kind="stable")  # the tables are ascending as numpy sorts bytes, and distinct
        assert order.tolist() == list(range(len(keys))) and len(set(keys.tolist())) == len(keys)
        found.update(dict(zip(map(tuple, keys.view(dtype).reshape(-1, length).tolist()), totals.tolist())))
    assert found == expected_parts
    assert {token: int(count) for token, count in enumerate(token_counts) if count} == expected_single
    tally = PartTally.of_words(start_state, pairs, frequent)  # the same tables, with the one-token parts
    assert dict((tuple(part.tolist()), count) for part, count in tally.items()) == expected_parts + Counter(
        {(token,): count for token, count in expected_single.items()})
    uncounted = PairCounts(start_state, count=False)  # the pairs known from a pass before: cut, not counted
    assert len(uncounted.distinct) == len(uncounted.totals) == 0
    assert [(length, keys.tolist(), totals.tolist()) for length, keys, totals in
            cut_at_rare_pairs(start_state, uncounted, frequent)] == [
        (length, keys.tolist(), totals.tolist()) for length, keys, totals in tables]
    if frequent is not None:  # the rare pairs found while counting, from the same sorted blocks
        while_counting = PairCounts(start_state, frequent=frequent)
        assert while_counting._rare is not None
        assert while_counting.distinct.tolist() == pairs.distinct.tolist()
        assert while_counting.totals.tolist() == pairs.totals.tolist()
        assert [(length, keys.tolist(), totals.tolist()) for length, keys, totals in
                cut_at_rare_pairs(start_state, while_counting, frequent)] == [
            (length, keys.tolist(), totals.tolist()) for length, keys, totals in tables]


@settings(max_examples=150, deadline=None)
@given(data=st.data(), dtype=st.sampled_from([np.uint8, np.uint16, np.uint32]))
def test_byte_order_keys_sort_as_the_bytes_and_give_them_back(data: st.DataObject, dtype: type) -> None:
    size = np.dtype(dtype).itemsize
    length = data.draw(st.integers(1, 8 // size))
    rows = np.array(data.draw(st.lists(st.lists(st.integers(0, np.iinfo(dtype).max), min_size=length,
                                                max_size=length), max_size=40)), dtype=dtype).reshape(-1, length)
    keys = byte_order_keys((rows[:, column].copy() for column in range(length)), size)
    assert keys.dtype == np.uint64 and len(keys) == len(rows)
    as_bytes = rows.view(np.dtype((np.void, length * size))).ravel()
    assert key_bytes(keys, length * size).tolist() == as_bytes.tolist()
    assert np.argsort(keys, kind="stable").tolist() == np.argsort(as_bytes, kind="stable").tolist()


def test_the_packed_dtype_is_the_smallest_that_holds_every_id() -> None:
    assert [segment_dtype(size) for size in (256, 65536, 65537, 1 << 21)] == [np.uint16, np.uint16, np.uint32,
                                                                              np.uint32]


def test_no_words_make_no_pairs_and_no_parts() -> None:
    start_state = arrays_words(*packed_arrays(Counter(), np.dtype(np.uint16)), [None] * 256)
    pairs = PairCounts(start_state)
    assert len(pairs.distinct) == 0 and guess_last_count(pairs.totals, 10) == 0
    assert cut_at_rare_pairs(start_state, pairs, pairs.frequent(5)) == []
    words = _Words(np.array([3, 4], np.uint16), np.array([2]), np.array([9]), 1, [None] * 5)
    pairs = PairCounts(words)
    assert cut_at_rare_pairs(words, pairs, pairs.frequent(10)) == []
    with pytest.raises(ValueError, match="pair counts"):
        cut_at_rare_pairs(words, None, pairs.frequent(1))
