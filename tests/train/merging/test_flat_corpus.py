"""Tests for hf_bpe.train.merging.flat_corpus: the flat store's numpy and Python merges, its index and counts after
every merge, the speculative floor and its lowering, all against the reference trainer (hf_bpe.train._reference)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import hf_bpe.train.merging.flat_corpus
import hf_bpe.train.merging.merge_loop
from hf_bpe.train._reference import reference_counts, reference_train_from_counts
from hf_bpe.train.merging.flat_corpus import DEAD, HEAD, SEPARATOR, FlatCorpus, speculative_floor, words_of
from hf_bpe.train.merging.merge_loop import merge_pairs
from tests import FIXTURES
from tests.train.merging.test_merge_loop import merges_as_bytes

ENDOFTEXT = "<|endoftext|>"

# Words made to stress merging: runs of one letter (overlapping occurrences), repeated pairs next to each other
# ("abab": adjacent occurrences), few letters (many merges of the same tokens), and any bytes.
repetitive_words = st.one_of(
    st.text(alphabet="ab", min_size=2, max_size=40),
    st.tuples(st.sampled_from(["a", "ab", "aab", "abc", "aaab"]), st.integers(1, 20)).map(lambda p: p[0] * p[1]),
    st.lists(st.sampled_from(["a", "aa", "ab", "ba", "b", "aaaa", " a", "é"]), min_size=1, max_size=20).map("".join),
).filter(lambda word: len(word) > 1).map(str.encode)
word_counts = st.dictionaries(st.one_of(repetitive_words, st.binary(min_size=1, max_size=10)), st.integers(1, 9),
                              min_size=1, max_size=25)
# MIN_NUMPY_MERGE values: every merge with numpy, the default, every merge in Python.
numpy_thresholds = st.sampled_from([1, 3, hf_bpe.train.merging.flat_corpus.MIN_NUMPY_MERGE, 1 << 30])


@settings(max_examples=150, deadline=None)
@given(counts=word_counts, threshold=numpy_thresholds, num_merges=st.integers(1, 60),
       queue=st.sampled_from(["buckets", "heap"]))
@example(counts={b"aaaaaaa": 2, b"abababab": 1, b"aab": 3}, threshold=1, num_merges=10, queue="buckets")
def test_numpy_and_python_merges_match_reference(counts: dict[bytes, int], threshold: int, num_merges: int,
                                                 queue: str) -> None:
    expected = reference_train_from_counts(counts, 256 + num_merges)[1]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hf_bpe.train.merging.flat_corpus, "MIN_NUMPY_MERGE", threshold)
        assert merges_as_bytes(merge_pairs(counts, num_merges, queue=queue, store="flat")) == expected


@settings(max_examples=150, deadline=None)
@given(counts=word_counts, floor=st.integers(0, 40), threshold=numpy_thresholds, num_merges=st.integers(1, 60),
       queue=st.sampled_from(["buckets", "heap"]), block=st.sampled_from([1, 3, 1 << 20]))
@example(counts={b"abcd": 5, b"abce": 5, b"xy": 2}, floor=6, threshold=1, num_merges=5, queue="buckets", block=3)
def test_any_floor_gives_the_reference_merges(counts: dict[bytes, int], floor: int, threshold: int, num_merges: int,
                                              queue: str, block: int) -> None:
    # A floor above the last merge's count makes the queue run dry early: the store is then re-indexed (in blocks
    # of `block` positions), and the merges must go on exactly as without a floor.
    expected = reference_train_from_counts(counts, 256 + num_merges)[1]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hf_bpe.train.merging.flat_corpus, "MIN_NUMPY_MERGE", threshold)
        patch.setattr(hf_bpe.train.merging.flat_corpus, "INDEX_BLOCK", block)
        patch.setattr(hf_bpe.train.merging.merge_loop, "speculative_floor", lambda frequencies, merges: floor)
        assert merges_as_bytes(merge_pairs(counts, num_merges, queue=queue, store="flat")) == expected


def live_words(corpus: FlatCorpus) -> list[tuple[int, ...]]:
    """Each word's symbols now, following the links from each word's separator; and every token's positions checked:
    contiguous, dead but for the first, the last one naming the first (the merges find left neighbours by it)."""
    symbols, next_positions = corpus.symbols.tolist(), corpus.next_positions.tolist()
    words, position = [], 0
    while position < len(symbols) - 1:
        word = []
        position = next_positions[position]
        while symbols[position] != SEPARATOR:
            assert symbols[position] >= 0, "a dead position is still linked"
            following = next_positions[position]
            assert all(symbols[inside] <= DEAD for inside in range(position + 1, following)), "a live position skipped"
            if following - position > 1:
                assert symbols[following - 1] == HEAD - position, "a token's last position does not name its head"
            word.append(symbols[position])
            position = following
        words.append(tuple(word))
    return words


def check_store(corpus: FlatCorpus, words: list[tuple[int, ...]], frequencies: list[int]) -> None:
    """The store's words, counts and index say what the reference words say."""
    assert live_words(corpus) == words
    expected: Counter[str] = Counter()
    where: dict[str, set[int]] = {}
    symbols, next_positions = corpus.symbols.tolist(), corpus.next_positions.tolist()
    for position, symbol in enumerate(symbols):
        if symbol >= 0 and symbols[next_positions[position]] >= 0:
            where.setdefault(chr(symbol) + chr(symbols[next_positions[position]]), set()).add(position)
    for word, frequency in zip(words, frequencies):
        for left, right in zip(word, word[1:]):
            expected[chr(left) + chr(right)] += frequency
    # Every pair at the floor or above is counted, exactly; below it, a pair made by a merge may be left out.
    assert all(corpus.pair_counts[pair] == count for pair, count in expected.items() if count >= corpus.floor)
    assert all(count == expected[pair] for pair, count in corpus.pair_counts.items())
    for pair, positions in where.items():  # every live occurrence is listed (when its pair is at the floor or above)
        if expected[pair] >= corpus.floor:
            entry = corpus.index[pair]
            listed = [entry] if isinstance(entry, int) else list(entry)
            assert positions <= set(listed) and listed == sorted(listed)
    # The token counts are the words' symbols weighted by their frequencies.
    token_counts = np.zeros(max([255, *map(max, words)]) + 1, dtype=np.uint64)
    corpus.add_token_counts(token_counts)
    expected_tokens: Counter[int] = Counter()
    for word, frequency in zip(words, frequencies):
        for symbol in word:
            expected_tokens[symbol] += frequency
    assert {token: count for token, count in enumerate(token_counts.tolist()) if count} == expected_tokens


@settings(max_examples=80, deadline=None)
@given(counts=word_counts, threshold=numpy_thresholds, floor=st.sampled_from([0, 2, 5]),
       new_ids=st.sampled_from(["sequential", "wide"]))
def test_counts_and_index_hold_after_every_merge(counts: dict[bytes, int], threshold: int, floor: int,
                                                 new_ids: str) -> None:
    # Merges the reference's pairs one by one into the store directly, lowering the floor as the merge loop does
    # when the next pair counts less. "Wide" ids are above 16 bits (another grouping of neighbours) and pass
    # through the surrogates, which the keys must carry as they are.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hf_bpe.train.merging.flat_corpus, "MIN_NUMPY_MERGE", threshold)
        merge_step_by_step(counts, floor, 256 if new_ids == "sequential" else 0xD7F0)


def merge_step_by_step(counts: dict[bytes, int], floor: int, first_id: int) -> None:
    corpus = FlatCorpus(*words_of(counts), floor=floor)
    corpus.token_chars.extend(map(chr, range(256, first_id)))  # the store takes new ids in order from 256
    words = [tuple(word) for word in counts if len(word) > 1]
    frequencies = [counts[bytes(word)] for word in words]
    check_store(corpus, words, frequencies)
    for step in range(30):
        pair_counts = Counter()
        for word, frequency in zip(words, frequencies):
            for pair in zip(word, word[1:]):
                pair_counts[pair] += frequency
        if not pair_counts:
            break
        best = max(pair_counts, key=lambda pair: (pair_counts[pair], pair))
        while pair_counts[best] < corpus.floor:
            corpus.lower_floor()
        new_id = first_id + step
        corpus.merge(chr(best[0]) + chr(best[1]), chr(new_id))
        words = [merge_ids(word, best, new_id) for word in words]
        check_store(corpus, words, frequencies)


def merge_ids(word: tuple[int, ...], pair: tuple[int, int], new_id: int) -> tuple[int, ...]:
    """The reference's `merge_word` on ids (it concatenates bytes): each occurrence of `pair`, left to right,
    becomes `new_id`.

    >>> merge_ids((1, 1, 1, 1, 1), (1, 1), 9)
    (9, 9, 1)
    """
    merged, position = [], 0
    while position < len(word):
        if position + 1 < len(word) and (word[position], word[position + 1]) == pair:
            merged.append(new_id)
            position += 2
        else:
            merged.append(word[position])
            position += 1
    return tuple(merged)


@pytest.mark.parametrize("fixture", ["corpus.en", "hf_corpora_sample.txt"])
def test_flat_and_strings_stores_agree_on_real_text(fixture: str) -> None:
    text = (FIXTURES / fixture).read_text(encoding="utf-8")
    counts = reference_counts(text.split(ENDOFTEXT), [ENDOFTEXT])
    flat = merge_pairs(counts, 2000, store="flat")
    assert flat == merge_pairs(counts, 2000, store="strings")
    assert len(flat) > 500


def test_the_numpy_path_runs_on_real_text(monkeypatch: pytest.MonkeyPatch) -> None:
    # The switch must send the big merges to numpy (and the small ones to Python) on real text.
    paths = Counter()
    for name in ("_merge_with_numpy", "_merge_in_python"):
        method = getattr(FlatCorpus, name)
        monkeypatch.setattr(FlatCorpus, name, lambda self, *args, method=method, name=name: (
            paths.update([name]), method(self, *args))[1])
    counts = reference_counts([(FIXTURES / "corpus.en").read_text(encoding="utf-8")])
    merge_pairs(counts, 500)
    assert paths["_merge_with_numpy"] >= 5 and paths["_merge_in_python"] >= 100


def test_speculative_floor_is_the_frequency_of_the_last_merges_word() -> None:
    frequencies = np.array([50, 1, 7, 7, 30, 2])
    assert [speculative_floor(frequencies, merges) for merges in range(8)] == [0, 50, 30, 7, 7, 2, 0, 0]


def test_a_floor_too_high_is_lowered_and_the_merges_go_on() -> None:
    counts = {b"abab": 40, b"xyxy": 12, b"cd": 3, b"ef": 2}
    corpus = FlatCorpus(*words_of(counts), floor=30)
    assert corpus.merge("ab", chr(256)) == {chr(256) * 2: 40}  # made counting 40, above the floor: kept
    assert corpus.merge(chr(256) * 2, chr(257)) == {}
    assert corpus.pair_counts == {"ba": 0, "xy": 24, "yx": 12, "cd": 3, "ef": 2}  # byte pairs: all counted
    assert corpus.lower_floor() == {"xy": 24, "yx": 12}  # to a quarter, 7: "cd" and "ef" are below it
    assert corpus.floor == 7 and set(corpus.index) == set(corpus.pair_counts) == {"xy", "yx"}
    assert corpus.lower_floor() == {"cd": 3, "ef": 2} and corpus.floor == 0
    assert set(corpus.index) == {"xy", "yx", "cd", "ef"}


def test_empty_and_single_byte_words() -> None:
    for counts in ({}, {b"a": 3}, {b"a": 1, b"b": 2}):
        corpus = FlatCorpus(*words_of(counts))
        assert corpus.pair_counts == {} and corpus.index == {}
        assert merge_pairs(counts, 5) == []


@settings(max_examples=60, deadline=None)
@given(counts=word_counts, block=st.sampled_from([1, 2, 7, 1 << 20]))
def test_byte_pairs_are_counted_and_indexed_the_same_in_any_blocks(counts: dict[bytes, int], block: int) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hf_bpe.train.merging.flat_corpus, "INDEX_BLOCK", block)
        corpus = FlatCorpus(*words_of(counts))
    words = [tuple(word) for word in counts if len(word) > 1]
    check_store(corpus, words, [counts[bytes(word)] for word in words])
    assert all(entry.dtype == np.int32 for entry in corpus.index.values() if not isinstance(entry, int))


# Token-id words (a base tokenizer's segmentation): ids of 8 to 21 bits (up to the largest code point), so that the
# pair codes need one to three radix passes of 16 bits when sorted; a few ids each, so that pairs repeat across words
# and blocks.
id_words = st.integers(8, 21).flatmap(lambda bits: st.lists(
    st.lists(st.sampled_from([min(symbol, 0x10FFFF) for symbol in (0, 1, 255, (1 << bits) - 1, (1 << bits) - 2,
                                                                   1 << (bits - 1))]),
             min_size=2, max_size=9).map(tuple), min_size=1, max_size=12, unique=True))


@settings(max_examples=50, deadline=None)
@given(words=id_words, frequencies=st.lists(st.integers(1, 9), min_size=12, max_size=12),
       block=st.sampled_from([1, 3, 8, 1 << 20]), floor=st.sampled_from([0, 2, 6, 20]))
def test_token_id_pairs_are_counted_and_indexed_the_same_in_any_blocks(words: list[tuple[int, ...]],
                                                                       frequencies: list[int], block: int,
                                                                       floor: int) -> None:
    frequencies = frequencies[:len(words)]
    data = np.array([symbol for word in words for symbol in word], dtype=np.int32)
    lengths, weights = np.array(list(map(len, words))), np.array(frequencies, dtype=np.int64)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hf_bpe.train.merging.flat_corpus, "INDEX_BLOCK", block)
        corpus = FlatCorpus(data, lengths, weights, first_new_id=int(data.max()) + 1)
        check_store(corpus, words, frequencies)
        # Counted and indexed again at a floor (as `lower_floor` does): the pairs at it or above, and only those.
        corpus.floor = floor
        keys, counts = corpus._index_pairs(floor)
    expected: Counter[str] = Counter()
    for word, frequency in zip(words, frequencies):
        for left, right in zip(word, word[1:]):
            expected[chr(left) + chr(right)] += frequency
    assert dict(zip(keys, counts)) == {pair: count for pair, count in expected.items() if count >= floor}
    assert set(corpus.index) == set(keys)
    corpus.pair_counts = dict(zip(keys, counts))
    check_store(corpus, words, frequencies)
