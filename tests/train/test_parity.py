"""Parity-aware training's fast path (`hf_bpe.train.parity`, the one merge loop with one store per language) against
the brute-force reference (`reference_parity_train`): several languages, both variants, dev sets, ratios and
neither, global merges, integer weights (0 included), special tokens, `min_frequency` and `max_token_length`, and
floors of any height (the store's pairs left out, then counted again), on words made to tie, overlap ((a, a) runs)
and rebuild known tokens."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hf_bpe.evaluation.token_counts import count_training_tokens
from hf_bpe.train._reference import merge_word, reference_parity_train
from hf_bpe.train.merging import flat_corpus
from hf_bpe.train.merging.parity_selection import ParitySelection
from hf_bpe.train.parity import train_parity_from_counts

differential = settings(max_examples=150, deadline=None, derandomize=True)

# Few letters, so that pairs tie, runs overlap and different merges make the same bytes.
words = st.binary(min_size=0, max_size=8).map(lambda raw: bytes(b"aab c\xc3\xa9"[byte % 7] for byte in raw))
counts = st.dictionaries(words.filter(bool), st.integers(1, 6), max_size=8)


@st.composite
def parity_cases(draw: st.DrawFn) -> dict:
    n = draw(st.integers(1, 4))
    names = [f"l{index}" for index in range(n)]
    sources = {name: draw(counts) for name in names}
    mode = draw(st.sampled_from(["dev", "ratios", "neither"]))
    options: dict = {"variant": draw(st.sampled_from(["base", "window"])),
                     "global_merges": draw(st.sampled_from([0, 0, 1, 3])),
                     "special_tokens": draw(st.sampled_from([(), ("<s>",), ("<s>", "<pad>")]))}
    if mode == "dev":
        options["dev"] = {name: draw(counts) for name in names}
    elif mode == "ratios":
        options["ratios"] = {name: draw(st.sampled_from([0.5, 1.0, 1.5, 3.0])) for name in names}
    if options["variant"] == "window":
        options["window_size"] = draw(st.integers(1, 6))
        options["alpha"] = draw(st.sampled_from([0.5, 1.0, 2.0]))
    if draw(st.booleans()):
        options["weights"] = {name: draw(st.integers(0, 3)) for name in names if draw(st.booleans())}
    options["min_frequency"] = draw(st.sampled_from([0, 0, 2, 4]))
    options["max_token_length"] = draw(st.sampled_from([None, None, 1, 3]))
    vocab_size = 256 + len(options["special_tokens"]) + draw(st.integers(0, 30))
    if draw(st.booleans()):  # floors of any height (else the guessed ones, mostly 0 on so little text)
        options["field_floors"] = draw(st.lists(st.sampled_from([0, 2, 4, 8, 16, 64]), min_size=n + 1,
                                                max_size=n + 1))[:n + bool(options["global_merges"])]
    return {"sources": sources, "vocab_size": vocab_size, **options}


@differential
@given(parity_cases(), st.sampled_from([1, 3, flat_corpus.MIN_NUMPY_MERGE]))
def test_parity_equals_the_reference(case: dict, numpy_threshold: int) -> None:
    """Also with every merge of the store made by numpy (threshold 1), over packed Python-int frequencies: at the
    default threshold these small cases are merged in Python only."""
    sources, vocab_size, special_tokens = case.pop("sources"), case.pop("vocab_size"), case.pop("special_tokens")
    floors = case.pop("field_floors", None)
    expected = reference_parity_train(sources, vocab_size, special_tokens, **case)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(flat_corpus, "MIN_NUMPY_MERGE", numpy_threshold)
        assert train_parity_from_counts(sources, vocab_size, special_tokens, progress=False, field_floors=floors,
                                        **case) == expected


@differential
@given(parity_cases().filter(lambda case: "dev" in case), st.sampled_from([1, 3, flat_corpus.MIN_NUMPY_MERGE]))
def test_dev_lengths_follow_every_merge(case: dict, numpy_threshold: int) -> None:
    """After every merge, each dev set's length (what chooses the language) is its words' length in tokens under the
    merges made so far, by token id, whichever path (Python or numpy) merged and counted them."""
    steps: list[tuple[int, int, int, list[int]]] = []
    merge = ParitySelection.merge

    def recorded(self: ParitySelection, pair: str, new_token: str) -> None:
        merge(self, pair, new_token)
        steps.append((ord(pair[0]), ord(pair[1]), ord(new_token), list(self.lengths)))

    sources, vocab_size, special_tokens = case.pop("sources"), case.pop("vocab_size"), case.pop("special_tokens")
    floors = case.pop("field_floors", None)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(flat_corpus, "MIN_NUMPY_MERGE", numpy_threshold)
        patch.setattr(ParitySelection, "merge", recorded)
        train_parity_from_counts(sources, vocab_size, special_tokens, progress=False, field_floors=floors, **case)
    segmented = {name: [(tuple(word), count) for word, count in counts.items()] for name, counts in case["dev"].items()}
    for left, right, new, lengths in steps:  # by id: two merges may make the same bytes
        segmented = {name: [(merge_word(tokens, (left, right), into=new), count) for tokens, count in words]
                     for name, words in segmented.items()}
        assert lengths == [sum(len(tokens) * count for tokens, count in segmented[name]) for name in sources]


# More words, counting more, shared between languages: the pairs a language's lowered floor keeps also occur in other
# languages' words, which must be counted and indexed too.
shared_words = st.lists(words.filter(lambda word: len(word) > 1), min_size=4, max_size=12, unique=True)


@st.composite
def lowered_floor_cases(draw: st.DrawFn) -> dict:
    pool = draw(shared_words)
    n = draw(st.integers(2, 4))
    sources = {f"l{index}": {word: draw(st.integers(1, 40)) for word in pool if draw(st.booleans())}
               for index in range(n)}
    dev = {name: {word: draw(st.integers(1, 5)) for word in pool if draw(st.booleans())} for name in sources}
    floors = draw(st.lists(st.sampled_from([8, 16, 32, 64]), min_size=n, max_size=n))
    return {"sources": sources, "dev": dev, "field_floors": floors, "vocab_size": 256 + draw(st.integers(5, 40))}


@differential
@given(lowered_floor_cases())
def test_one_language_floor_lowered_at_a_time(case: dict) -> None:
    """Every language's floor high, so that its queue runs dry and it is lowered alone, its words' pairs counted
    (`keep_pairs_in_words`) and their occurrences in the other languages' words indexed."""
    sources, vocab_size = case.pop("sources"), case.pop("vocab_size")
    expected = reference_parity_train(sources, vocab_size, dev=case["dev"])
    assert train_parity_from_counts(sources, vocab_size, progress=False, **case) == expected


@settings(max_examples=60, deadline=None, derandomize=True)
@given(parity_cases())
def test_token_counts_are_the_final_segmentation(case: dict) -> None:
    """Each token's count, times the weights, as encoding every source's pre-tokens with the trained tokenizer."""
    sources, vocab_size, special_tokens = case.pop("sources"), case.pop("vocab_size"), case.pop("special_tokens")
    token_counts = np.zeros(vocab_size, dtype=np.uint64)
    vocab, merges = train_parity_from_counts(sources, vocab_size, special_tokens, progress=False,
                                             token_counts=token_counts, **case)
    expected = np.zeros(vocab_size, dtype=np.uint64)
    for name, counts in sources.items():
        weight = (case.get("weights") or {}).get(name, 1)
        if weight and counts:
            found = count_training_tokens(vocab, merges, special_tokens, counts)
            expected[:len(found)] += found.astype(np.uint64) * np.uint64(weight)
    assert token_counts.tolist() == expected.tolist()


def test_counts_near_the_field_width() -> None:
    """Counts of 2^40 and more: the packed fields must hold their sums without spilling into their neighbours."""
    big = 1 << 40
    sources = {"a": {b"abab": big, b"ba": big + 3}, "b": {b"abba": 7, b"bb": big * 5}, "c": {b"ab": 1}}
    dev = {"a": {b"ab": big}, "b": {b"bbb": big // 3}, "c": {b"abab": 2}}
    for options in ({"dev": dev}, {"ratios": {"a": 1.0, "b": 2.0, "c": 1.5}}, {"global_merges": 2}):
        expected = reference_parity_train(sources, 264, **options)
        assert train_parity_from_counts(sources, 264, progress=False, **options) == expected


def test_counts_past_2_53_are_added_up_exactly() -> None:
    """The byte pairs' counts are added up per language in float64 when no field counts 2^53 or more: past that,
    (a, b) counting 2^53 + 1 must still beat (y, z) counting 2^53, which float64 would make a tie that (y, z) wins."""
    sources = {"a": {b"ab": (1 << 53) - 1, b"abz": 2, b"yz": 1 << 53}, "b": {b"ab": 1}}
    expected = reference_parity_train(sources, 258, dev={"a": {b"ab": 1}, "b": {b"ab": 1}})
    assert expected[1][0] == (b"a", b"b")
    assert train_parity_from_counts(sources, 258, progress=False, dev={"a": {b"ab": 1}, "b": {b"ab": 1}}) == expected


def test_counts_whose_pair_counts_could_pass_2_63_are_refused() -> None:
    """As plain training refuses them (the queues hold counts below 2^63), not an error inside the merge loop."""
    with pytest.raises(ValueError, match="too large"):
        train_parity_from_counts({"a": {b"ab": 1 << 70}, "b": {b"ab": 1}}, 260, progress=False)
    with pytest.raises(ValueError, match="too large"):
        train_parity_from_counts({"a": {b"ab": 1}}, 260, dev={"a": {b"abc": 1 << 62}}, progress=False)


def test_a_language_without_text_and_one_without_pairs() -> None:
    sources = {"empty": {}, "bytes": {b"a": 4, b"b": 1}, "words": {b"aaaa": 2, b"abab": 3}}
    for options in ({"dev": {"empty": {b"ab": 9}, "bytes": {b"ba": 1}, "words": {b"aa": 1}}},
                    {"ratios": {"empty": 1.0, "bytes": 2.0, "words": 1.0}}, {}):
        expected = reference_parity_train(sources, 270, **options)
        assert train_parity_from_counts(sources, 270, progress=False, **options) == expected


def test_refused_options() -> None:
    with pytest.raises(ValueError, match="not both"):
        train_parity_from_counts({"en": {b"ab": 1}}, 300, dev={"en": {}}, ratios={"en": 1.0})
    with pytest.raises(ValueError, match="must name the sources"):
        train_parity_from_counts({"en": {b"ab": 1}, "fr": {b"cd": 1}}, 300, dev={"en": {}})
    with pytest.raises(ValueError, match="variant"):
        train_parity_from_counts({"en": {b"ab": 1}}, 300, variant="fair")
