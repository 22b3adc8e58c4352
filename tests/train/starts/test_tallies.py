"""Tests for hf_bpe.train.starts.tallies: the numpy tables of counts add up as Counters do, however the entries arrive,
and a counting worker hands them over once they are full (hf_bpe.train.counting.piece_counter.PieceCounter.ready)."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hf_bpe.encode.merge_kernels import BatchTables
from hf_bpe.train.counting.piece_counter import PieceCounter, add_counts
from hf_bpe.train.merging.merge_loop import _Words
from hf_bpe.train.starts import tallies
from hf_bpe.train.starts.superword_passes import StageTwoCounts
from hf_bpe.train.starts.tallies import KeyCounts, PairTally, PartTally

runs = st.lists(st.lists(st.tuples(st.integers(0, 50), st.integers(1, 9)), max_size=20), max_size=12)


@settings(max_examples=200, deadline=None)
@given(runs=runs, shift=st.sampled_from([0, 12, 30, 58]), tables=st.lists(st.booleans(), max_size=12))
def test_key_counts_add_up_as_a_counter(runs: list[list[tuple[int, int]]], shift: int, tables: list[bool]) -> None:
    """Keys of a few bits and of up to 64 (each of `stable_order`'s sorts); runs given as they come, or as tables
    (`distinct`: summed and sorted first)."""
    expected: Counter[int] = Counter()
    tally = KeyCounts()
    for run, table in zip(runs, tables + [False] * len(runs)):
        run = [(key << shift, count) for key, count in run]
        for key, count in run:
            expected[key] += count
        if table:
            summed = Counter({key: 0 for key, _ in run})
            for key, count in run:
                summed[key] += count
            run = sorted(summed.items())
        keys = np.array([key for key, _ in run], dtype=np.uint64 if shift > 40 else np.int64)
        tally.update(KeyCounts(keys, np.array([count for _, count in run], dtype=np.int64), distinct=table))
    assert len(tally) >= len(expected)
    assert dict(zip(tally.keys.tolist(), tally.totals.tolist())) == expected
    assert tally.keys.tolist() == sorted(expected) and len(tally) == len(expected)


@settings(max_examples=200, deadline=None)
@given(runs=st.lists(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 9)), max_size=20), min_size=1, max_size=6),
       key_shift=st.sampled_from([0, 30, 40]), total_shift=st.sampled_from([0, 20, 40]))
def test_added_up_is_a_counter_whether_key_and_total_share_a_word_or_not(runs: list[list[tuple[int, int]]],
                                                                         key_shift: int, total_shift: int) -> None:
    """Keys and totals small enough to be sorted packed in one uint64, and too large for it (46 + 46 bits)."""
    expected: Counter[int] = Counter()
    arrays = []
    for run in runs:
        for key, count in run:
            expected[key << key_shift] += count << total_shift
        arrays.append((np.array([key << key_shift for key, _ in run], dtype=np.int64),
                       np.array([count << total_shift for _, count in run], dtype=np.int64)))
    keys, totals = tallies.added_up(arrays)
    assert arrays == []
    assert keys.tolist() == sorted(expected) and totals.tolist() == [expected[key] for key in sorted(expected)]


@settings(max_examples=100, deadline=None)
@given(runs=runs, cut=st.integers(1, 30), kept=st.sets(st.integers(0, 50)))
def test_pair_tallies_find_frequent_pairs_and_the_most_frequent_left_out(runs: list[list[tuple[int, int]]],
                                                                         cut: int, kept: set[int]) -> None:
    expected: Counter[int] = Counter()
    tally = PairTally()
    for run in runs:
        expected.update({key: 0 for key, _ in run})
        for key, count in run:
            expected[key] += count
        tally.update(PairTally(np.array([key for key, _ in run], dtype=np.int64),
                               np.array([count for _, count in run], dtype=np.int64)))
    assert tally.frequent(cut).tolist() == sorted(key for key, count in expected.items() if count >= cut)
    left_out = [count for key, count in expected.items() if key not in kept]
    assert tally.most_outside(np.array(sorted(kept), dtype=np.int64)) == max(left_out, default=0)


parts = st.lists(st.tuples(st.lists(st.integers(0, 70000), min_size=1, max_size=7), st.integers(1, 5)), max_size=15)


@settings(max_examples=100, deadline=None)
@given(groups=st.lists(parts, max_size=5), dtype=st.sampled_from([np.uint16, np.uint32]))
def test_part_tallies_add_up_as_a_counter_of_sequences(groups: list[list[tuple[list[int], int]]],
                                                       dtype: type) -> None:
    expected: Counter[tuple[int, ...]] = Counter()
    total: object = Counter()  # as the counting engines start
    for group in groups:
        group = [([token % (1 << 16) if dtype is np.uint16 else token for token in part], count)
                 for part, count in group]
        words = _Words(np.array([token for part, _ in group for token in part], dtype=dtype),
                       np.array([len(part) for part, _ in group], dtype=np.int64),
                       np.array([count for _, count in group], dtype=np.int64), len(group), [])
        tally = PartTally.of_words(words)  # whole, equal ones counted together; one-id parts too
        for part, count in group:
            expected[tuple(part)] += count
        total = add_counts(total, StageTwoCounts(tally))  # type: ignore[arg-type]
    if not isinstance(total, Counter):
        assert total.parts.distinct() == len(expected)  # before `items` sorts the parts in, as after
    found = {} if isinstance(total, Counter) else {tuple(part.tolist()): count
                                                    for part, count in total.parts.items()}
    assert found == expected
    if not isinstance(total, Counter):
        token_counts = np.zeros(1 << 17, dtype=np.uint64)
        words = total.parts.words([], token_counts)
        ends = np.cumsum(words.lengths).tolist()
        merged = {tuple(words.data[end - length:end].tolist()): count
                  for end, length, count in zip(ends, words.lengths.tolist(), words.frequencies.tolist())}
        merged.update({(token,): int(token_counts[token]) for token in np.flatnonzero(token_counts).tolist()})
        assert merged == expected


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(group=st.lists(st.tuples(st.lists(st.integers(0, 5), min_size=1, max_size=40), st.integers(1, 5)),
                      max_size=25),
       num_merges=st.integers(1, 12), block=st.integers(1, 64), rng=st.randoms(use_true_random=False))
def test_parts_split_by_merges_made_are_each_part_merged_in_turn(group: list[tuple[list[int], int]], num_merges: int,
                                                                 block: int, rng: random.Random,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """`PartTally.words(merged=)`, the start state of merging on: each distinct part as merging the merges in turn
    leaves it (the merged token's id after every id before), in blocks of any size; one-token results counted."""
    monkeypatch.setattr(tallies, "MERGED_BLOCK_IDS", block)
    merges: list[tuple[int, int]] = []
    for new_id in range(6, 6 + num_merges):  # each merge over ids made before it, as training makes them
        merges.append((rng.randrange(new_id), rng.randrange(new_id)))
    expected: Counter[tuple[int, ...]] = Counter()
    for part, count in group:
        ids = list(part)
        for rank, pair in enumerate(merges):  # merging in turn, left to right, as the merge loop does
            at, merged = 0, []
            while at < len(ids):
                if tuple(ids[at:at + 2]) == pair:
                    merged.append(6 + rank)
                    at += 2
                else:
                    merged.append(ids[at])
                    at += 1
            ids = merged
        expected[tuple(ids)] += count
    words = _Words(np.array([token for part, _ in group for token in part], dtype=np.uint16),
                   np.array([len(part) for part, _ in group], dtype=np.int64),
                   np.array([count for _, count in group], dtype=np.int64), len(group), [])
    token_counts = np.zeros(6 + num_merges, dtype=np.uint64)
    tables = BatchTables({}, {pair: rank for rank, pair in reversed(list(enumerate(merges)))},
                         range(6, 6 + num_merges))
    split = PartTally.of_words(words).words([], token_counts, merged=tables)
    ends = np.cumsum(split.lengths).tolist()
    found: Counter[tuple[int, ...]] = Counter()
    for end, length, count in zip(ends, split.lengths.tolist(), split.frequencies.tolist()):
        found[tuple(split.data[end - length:end].tolist())] += count
    found.update({(token,): int(token_counts[token]) for token in np.flatnonzero(token_counts).tolist()})
    assert split.data.dtype == np.int32 and found == expected


def test_a_worker_hands_a_tally_over_once_it_is_full(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = PieceCounter()
    assert not counter.ready()
    counter.pretokens = StageTwoCounts(pairs=PairTally(np.arange(10), np.ones(10, dtype=np.int64)))
    monkeypatch.setattr("hf_bpe.train.starts.superword_passes.HANDOVER_PAIRS", 11)
    assert not counter.ready()  # pre-token counts would go at once; a tally waits
    monkeypatch.setattr("hf_bpe.train.starts.superword_passes.HANDOVER_PAIRS", 10)
    assert counter.ready()
    assert isinstance(counter.pretoken_counts(), StageTwoCounts) and not counter.ready()
