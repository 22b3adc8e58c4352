"""BpeTrainer's options, min_frequency and max_token_length: the merge loop (both stores, both queues) against the
reference trainer, and against HF `tokenizers`' BpeTrainer itself on corpora without ties (its tie rule differs)."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from hf_bpe.formats.gpt2 import str_to_token
from hf_bpe.train._reference import merge_word, reference_counts, reference_train_from_counts
from hf_bpe.train.api import train_bpe_from_counts, train_bpe_from_iterator
from hf_bpe.train.merging.merge_loop import QUEUES, STORES, merge_pairs

differential = settings(max_examples=60, deadline=None)
words = st.lists(st.sampled_from(["a", "b", "c", "ab", "abc", "aaa", "é", "ca"]), min_size=1, max_size=10).map(
    lambda parts: "".join(parts).encode())
counts = st.dictionaries(words, st.integers(1, 40), min_size=1, max_size=25)
min_frequencies = st.sampled_from([0, 1, 2, 3, 7, 20])
max_token_lengths = st.sampled_from([None, 1, 2, 3, 4, 5, 8])


@differential
@given(counts, st.integers(0, 40), min_frequencies, max_token_lengths, st.sampled_from(STORES),
       st.sampled_from(sorted(QUEUES)))
def test_options_equal_the_reference(word_counts: dict[bytes, int], num_merges: int, min_frequency: int,
                                     max_token_length: int | None, store: str, queue: str) -> None:
    _, expected = reference_train_from_counts(word_counts, 256 + num_merges, min_frequency=min_frequency,
                                              max_token_length=max_token_length)
    merges = merge_pairs(word_counts, num_merges, False, store=store, queue=queue, min_frequency=min_frequency,
                         max_token_length=max_token_length)
    tokens = [bytes([byte]) for byte in range(256)]
    for left, right in merges:
        tokens.append(tokens[left] + tokens[right])
    assert [(tokens[left], tokens[right]) for left, right in merges] == expected


@settings(max_examples=10, deadline=None)
@given(st.integers(2, 30), st.sampled_from(sorted(QUEUES)))
def test_min_frequency_with_the_floor_equals_the_reference(min_frequency: int, queue: str) -> None:
    """Many words with skewed counts, so that the speculative floor is set and lowered: min_frequency is the least
    floor, and merging stops there."""
    word_counts = {f"w{index % 37}x{index % 11}y{index}".encode(): 1 + (index * 7919) % 50 for index in range(400)}
    _, expected = reference_train_from_counts(word_counts, 256 + 200, min_frequency=min_frequency)
    assert train_bpe_from_counts(word_counts, 256 + 200, min_frequency=min_frequency)[1] == expected
    merges = merge_pairs(word_counts, 200, False, queue=queue, min_frequency=min_frequency)
    assert len(merges) == len(expected)


def has_ties(word_counts: dict[bytes, int], steps: int, min_frequency: int, max_token_length: int | None) -> bool:
    """Whether the brute-force loop meets a tie for the best pair within `steps + 1` merges (BpeTrainer breaks ties
    differently from hf_bpe, so only tie-free corpora can be compared)."""
    words = {tuple(bytes([byte]) for byte in word): count for word, count in word_counts.items()}
    shortest_refused = 10 ** 9 if max_token_length is None else max(max_token_length, 3)
    for _ in range(steps + 1):
        pair_counts: Counter[tuple[bytes, bytes]] = Counter()
        for word, count in words.items():
            for pair in zip(word, word[1:]):
                if len(pair[0] + pair[1]) < shortest_refused:
                    pair_counts[pair] += count
        ranked = pair_counts.most_common(2)
        if not ranked or ranked[0][1] < min_frequency:
            return False
        if len(ranked) == 2 and ranked[0][1] == ranked[1][1]:
            return True
        best = ranked[0][0]
        merged: Counter[tuple[bytes, ...]] = Counter()
        for word, count in words.items():
            merged[merge_word(word, best)] += count
        words = dict(merged)
    return False


def hf_merges(texts: list[str], num_merges: int, min_frequency: int, max_token_length: int | None
              ) -> list[tuple[bytes, bytes]]:
    import json

    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(vocab_size=256 + num_merges, min_frequency=min_frequency, show_progress=False,
                                  max_token_length=max_token_length,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(texts, trainer)
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    return [(str_to_token(left), str_to_token(right))
            for left, right in (merge.split(" ") if isinstance(merge, str) else merge for merge in merges)]


ascii_documents = st.lists(st.sampled_from(["a", "b", "ab", "ba", "abc", " ", "c", "dd", "cab", " a", "ee"]),
                           min_size=1, max_size=30).map("".join)


@settings(max_examples=80, deadline=None)
@given(st.lists(ascii_documents, min_size=1, max_size=8), st.integers(1, 30), min_frequencies, max_token_lengths)
def test_options_equal_hf_tokenizers_without_ties(texts: list[str], num_merges: int, min_frequency: int,
                                                  max_token_length: int | None) -> None:
    pytest.importorskip("tokenizers")
    word_counts = dict(reference_counts(texts))
    assume(not has_ties(word_counts, num_merges, min_frequency, max_token_length))
    ours = train_bpe_from_iterator(texts, 256 + num_merges, min_frequency=min_frequency,
                                   max_token_length=max_token_length)[1]
    assert ours == hf_merges(texts, num_merges, min_frequency, max_token_length)


def test_hf_max_token_length_is_strict_and_spares_byte_pairs() -> None:
    """The two facts of BpeTrainer's max_token_length this follows, shown on one corpus: a merge making a token of
    exactly max_token_length characters is refused, and pairs of single bytes are merged whatever the limit."""
    texts = ["abcd"] * 5 + ["ab"] * 3 + ["cd", "xy", "xy"]
    assert not has_ties(dict(reference_counts(texts)), 44, 0, None)
    for limit in (1, 2, 3, 4, 5):
        ours = train_bpe_from_iterator(texts, 300, max_token_length=limit)[1]
        assert ours == hf_merges(texts, 44, 0, limit)
        assert all(len(left + right) < max(limit, 3) for left, right in ours)
    assert (b"ab", b"cd") not in train_bpe_from_iterator(texts, 300, max_token_length=4)[1]
    assert (b"ab", b"cd") in train_bpe_from_iterator(texts, 300, max_token_length=5)[1]


def test_bad_option_values_are_refused() -> None:
    for options, message in (({"min_frequency": -1}, "min_frequency"), ({"min_frequency": 1.5}, "min_frequency"),
                             ({"max_token_length": 0}, "max_token_length"), ({"max_token_length": True}, "max_token")):
        with pytest.raises(ValueError, match=message):
            train_bpe_from_counts({b"ab": 1}, 300, **options)
