"""The brute-force parity-aware trainer (`reference_parity_train`), and where the tie rules agree the fast path
(`train_parity_from_counts`) too: against HF `tokenizers`' ParityBpeTrainer on real text in several scripts, and on
small cases worked out by hand.

How ParityBpeTrainer is called (tokenizers 0.23): not through `Tokenizer.train_from_iterator(iterator, trainer)` or
`Tokenizer.train(files, trainer)`, which refuse it ("'ParityBpeTrainer' object is not an instance of 'Trainer'"),
and not as the example that tokenizers#2422 commented out (it needs gated Hub data), but through the trainer's own
method, with one list (or iterator) of texts per language:
`trainer.train_from_iterator(tokenizer, train_iterators, dev_iterators, ratio)`. Its `num_merges` counts merges
only; a dev set, when given, wins over ratios.

The tie rules differ: hf_bpe takes the greater (bytes, bytes), ParityBpeTrainer the greater pair of byte-level
strings (`token_to_str`), another order for bytes that GPT-2's byte-level alphabet moves (space, controls,
0x7f-0xa0, 0xad). So the reference with its own rule is compared on text made only of the other bytes, where the two
orders are the same, and with ParityBpeTrainer's order (`tie_order`) on any text.

The window variant of ParityBpeTrainer misbehaves once a language has no pair left (it may pick that language again,
or loop for ever: the reference's docstring says when), so its comparisons keep every language supplied with pairs:
fewer merges than the distinct pre-tokens of two bytes or more of any language (each needs a merge of its own
before the language can run out).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from hf_bpe.formats.gpt2 import bytes_to_unicode, str_to_token, token_to_str
from hf_bpe.train._reference import reference_counts, reference_parity_train
from hf_bpe.train.parity import train_parity_from_counts

pytestmark = pytest.mark.skipif(not hasattr(trainers, "ParityBpeTrainer"),
                                reason="ParityBpeTrainer is in tokenizers 0.23 and later")
Merges = list[tuple[bytes, bytes]]


def byte_level_order(pair: tuple[bytes, bytes]) -> tuple[str, str]:
    """ParityBpeTrainer's order among pairs of equal count: their byte-level strings."""
    return token_to_str(pair[0]), token_to_str(pair[1])


def parity_bpe_trainer(train: Sequence[Sequence[str]], num_merges: int, dev: Sequence[Sequence[str]] | None = None,
                       ratio: Sequence[float] | None = None, **options: Any) -> Merges:
    """ParityBpeTrainer's merges, with GPT-2's pre-tokenizer (what hf_bpe's GPT-2 pattern splits)."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.ParityBpeTrainer(num_merges=num_merges, show_progress=False, **options)
    trainer.train_from_iterator(tokenizer, [list(texts) for texts in train],
                                None if dev is None else [list(texts) for texts in dev], None if ratio is None
                                else list(ratio))
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    return [(str_to_token(left), str_to_token(right))
            for left, right in (merge.split(" ") if isinstance(merge, str) else merge for merge in merges)]


def reference(train: Sequence[Sequence[str]], num_merges: int, dev: Sequence[Sequence[str]] | None = None,
              ratio: Sequence[float] | None = None, **options: Any) -> Merges:
    """The reference's merges on the same texts, the languages named by their order."""
    names = [f"lang{index}" for index in range(len(train))]
    return reference_parity_train(
        {name: reference_counts(texts) for name, texts in zip(names, train)}, 256 + num_merges,
        dev=None if dev is None else {name: reference_counts(texts) for name, texts in zip(names, dev)},
        ratios=None if ratio is None else dict(zip(names, ratio)), **options)[1]


def fast_path(train: Sequence[Sequence[str]], num_merges: int, dev: Sequence[Sequence[str]] | None = None,
              ratio: Sequence[float] | None = None, **options: Any) -> Merges:
    """hf_bpe's parity-aware training (`train_parity_from_counts`, the one merge loop) on the same texts."""
    names = [f"lang{index}" for index in range(len(train))]
    return train_parity_from_counts(
        {name: reference_counts(texts) for name, texts in zip(names, train)}, 256 + num_merges,
        dev=None if dev is None else {name: reference_counts(texts) for name, texts in zip(names, dev)},
        ratios=None if ratio is None else dict(zip(names, ratio)), progress=False, **options)[1]


def merges_before_exhaustion(train: Sequence[Sequence[str]]) -> int:
    """A number of merges after which no language can have run out of pairs: the fewest distinct pre-tokens of two
    bytes or more in a language (each needs a merge making it whole before its language has no pair left)."""
    return min(sum(len(token) > 1 for token in reference_counts(texts)) for texts in train)


# Characters whose UTF-8 bytes GPT-2's byte-level alphabet keeps in place (so both tie orders agree): ASCII letters
# and punctuation, é ü ö ñ ç (c3 a9 ...), Greek α-ο (ce b1-bf), Cyrillic а-п (d0 b0-bf). No spaces.
SAME_ORDER_LETTERS = ["abcdefghijklmnopqrstuvwxyz", "éüöñçaeiou", "αβγδεζηθικλμνξο", "абвгдежзийклмноп"]
SAME_ORDER_SEPARATORS = ",.;-!"
ANY_TEXT_WORDS = {
    "en": "the cat sat on the mat and the dog ran far away from home , .".split(" "),
    "de": "die Katze saß auf der Matte und der Hund lief weit weg von zu Hause ß".split(" "),
    "el": "η γάτα κάθισε στο χαλί και ο σκύλος έτρεξε μακριά από το σπίτι".split(" "),
    "hi": "बिल्ली चटाई पर बैठी और कुत्ता घर से दूर भाग गया".split(" "),
    "ja": "猫はマットの上に座り、犬は家から遠くへ走った。".split("、"),
}


@st.composite
def same_order_texts(draw: st.DrawFn, letters: str) -> str:
    words = draw(st.lists(st.text(letters, min_size=2, max_size=6), min_size=1, max_size=12))
    separators = draw(st.lists(st.sampled_from(SAME_ORDER_SEPARATORS), min_size=len(words), max_size=len(words)))
    return "".join(word + separator for word, separator in zip(words, separators))


@st.composite
def same_order_languages(draw: st.DrawFn) -> tuple[list[list[str]], list[list[str]]]:
    """(training texts, dev texts) of 2-4 languages, each in its own alphabet."""
    alphabets = draw(st.lists(st.sampled_from(SAME_ORDER_LETTERS), min_size=2, max_size=4))
    train = [draw(st.lists(same_order_texts(letters), min_size=1, max_size=3)) for letters in alphabets]
    dev = [draw(st.lists(same_order_texts(letters), min_size=1, max_size=2)) for letters in alphabets]
    return train, dev


@st.composite
def any_languages(draw: st.DrawFn) -> tuple[list[list[str]], list[list[str]]]:
    """(training texts, dev texts) of 2-4 languages, words joined by spaces, in Latin, Greek, Devanagari and Han."""
    languages = draw(st.lists(st.sampled_from(sorted(ANY_TEXT_WORDS)), min_size=2, max_size=4))

    def texts(language: str, most: int) -> list[str]:
        words = st.lists(st.sampled_from(ANY_TEXT_WORDS[language]), min_size=1, max_size=14).map(" ".join)
        return draw(st.lists(words, min_size=1, max_size=most))

    return [texts(language, 3) for language in languages], [texts(language, 2) for language in languages]


def options_of(draw: st.DrawFn, num_languages: int, variant: str) -> tuple[dict[str, Any], list[float] | None, str]:
    """Selection options ParityBpeTrainer and the reference share, the ratios, and what drives the selection."""
    signal = draw(st.sampled_from(["dev", "ratio", "training lengths"]))
    ratio = (draw(st.lists(st.sampled_from([0.5, 1.0, 1.3, 2.57]), min_size=num_languages, max_size=num_languages))
             if signal == "ratio" else None)
    options: dict[str, Any] = {"variant": variant, "global_merges": draw(st.sampled_from([0, 0, 1, 4]))}
    if variant == "window":
        options.update(window_size=draw(st.sampled_from([1, 2, 3, 100])), alpha=draw(st.sampled_from([0.5, 1.0, 2.0])))
    else:  # options that exhaust languages, which only the base variant handles well
        options.update(min_frequency=draw(st.sampled_from([0, 0, 2, 3])),
                       max_token_length=draw(st.sampled_from([None, None, 2, 3, 5])))
    return options, ratio, signal


def check_against_parity_bpe_trainer(draw: st.DrawFn, train: list[list[str]], dev: list[list[str]],
                                     tie_order: Any = None) -> None:
    variant = draw(st.sampled_from(["base", "window"]))
    options, ratio, signal = options_of(draw, len(train), variant)
    num_merges = draw(st.integers(1, 60))
    if variant == "window":
        num_merges = min(num_merges, merges_before_exhaustion(train) - 1)
        assume(num_merges >= 1)
    dev_sets = dev if signal == "dev" else None
    expected = parity_bpe_trainer(train, num_merges, dev_sets, ratio, **options)
    assert reference(train, num_merges, dev_sets, ratio, tie_order=tie_order, **options) == expected
    if tie_order is None:  # hf_bpe's own rule: the fast path too
        assert fast_path(train, num_merges, dev_sets, ratio, **options) == expected


def test_same_order_texts_have_only_bytes_that_keep_their_order() -> None:
    """The premise of the comparison without `tie_order`: every byte of those texts is its own byte-level character,
    so comparing byte-level strings is comparing bytes."""
    characters = set("".join(SAME_ORDER_LETTERS) + SAME_ORDER_SEPARATORS)
    kept = {byte for byte, char in bytes_to_unicode().items() if char == chr(byte)}
    assert set("".join(characters).encode()) <= kept
    assert not set(" ".join(ANY_TEXT_WORDS["el"] + ANY_TEXT_WORDS["hi"]).encode()) <= kept  # the other test's


@settings(max_examples=80, deadline=None)
@given(same_order_languages(), st.data())
def test_equals_parity_bpe_trainer_where_the_tie_rules_agree(languages: tuple[list[list[str]], list[list[str]]],
                                                             data: st.DataObject) -> None:
    check_against_parity_bpe_trainer(data.draw, *languages)


@settings(max_examples=80, deadline=None)
@given(any_languages(), st.data())
def test_equals_parity_bpe_trainer_with_its_tie_order(languages: tuple[list[list[str]], list[list[str]]],
                                                      data: st.DataObject) -> None:
    check_against_parity_bpe_trainer(data.draw, *languages, tie_order=byte_level_order)


@pytest.mark.parametrize("signal", ["dev", "ratio", "training lengths"])
@pytest.mark.parametrize("variant", ["base", "window"])
def test_weights_are_repeated_text(signal: str, variant: str) -> None:
    """A weight of w is the language's text given w times to ParityBpeTrainer. Within a language every count is
    multiplied alike, and dev sets and ratios do not see the weights: they count in the global merges, and where
    the training lengths choose."""
    train = [["the cat sat on the mat, and the dog ran far away from the house"], ["die Katze saß auf der Matte"],
             ["η γάτα κάθισε στο χαλί, ο σκύλος έτρεξε"]]
    dev = [["the cat sat"], ["die Katze saß"], ["η γάτα κάθισε"]]
    weights = [1, 4, 2]
    options = {"variant": variant, "window_size": 3, "alpha": 1.0, "global_merges": 4}
    num_merges = merges_before_exhaustion(train) - 1
    dev_sets, ratio = (dev if signal == "dev" else None), ([1.0, 1.2, 2.0] if signal == "ratio" else None)
    repeated = [texts * weight for texts, weight in zip(train, weights)]
    expected = parity_bpe_trainer(repeated, num_merges, dev_sets, ratio, **options)
    weighted = reference(train, num_merges, dev_sets, ratio, tie_order=byte_level_order,
                         weights={f"lang{index}": weight for index, weight in enumerate(weights)}, **options)
    assert weighted == expected
    assert reference(train, num_merges, dev_sets, ratio, tie_order=byte_level_order, **options) != expected


def test_the_worst_served_dev_set_chooses_and_the_first_wins_ties() -> None:
    # Dev lengths 2 and 2: lang0 comes first and merges a-b; then 1 against 2: lang1 merges c-d.
    assert reference([["ab"], ["cd"]], 2, dev=[["ab"], ["cd"]]) == [(b"a", b"b"), (b"c", b"d")]
    assert reference([["cd"], ["ab"]], 2, dev=[["cd"], ["ab"]]) == [(b"c", b"d"), (b"a", b"b")]
    # The dev set chooses, not the training text: lang1's dev set is 20 tokens long, lang0's 2.
    assert reference([["ab"] * 10, ["cd"] * 5], 2, dev=[["ab"], ["cd"] * 10]) == [(b"c", b"d"), (b"a", b"b")]
    # Within the chosen language, the highest count, then the greater pair: (b, c) over (a, b) at 3 each.
    assert reference([["abc"] * 3 + ["xy"], ["z"]], 1, dev=[["abc"], ["z"]]) == [(b"b", b"c")]


def test_a_merge_applies_to_every_language() -> None:
    # lang1's dev set is the longer (6 against 4) and its best pair is a-b (2 against b-c's 1), which also shortens
    # lang0's dev set, to 2; lang1 (now 4) goes on with ab-c; then 2 against 2: lang0, the first, with ab-ab.
    merges = reference([["abab"], ["ab", "abc"]], 3, dev=[["abab"], ["abc", "abc"]])
    assert merges == [(b"a", b"b"), (b"ab", b"c"), (b"ab", b"ab")]


def test_the_window_lets_others_in() -> None:
    """With no dev set or ratio, training lengths choose: lang0's 400 tokens against lang1's 4. The base variant
    serves lang0 until it has no pair left; a window of 2 with alpha 1 (a share of at most 1/2) lets lang1 in every
    other merge."""
    train = [["aabb"] * 100, ["ccdd"]]
    assert reference(train, 6) == [(b"b", b"b"), (b"a", b"bb"), (b"a", b"abb"), (b"d", b"d"), (b"c", b"dd"),
                                   (b"c", b"cdd")]
    window = reference(train, 6, variant="window", window_size=2, alpha=1.0)
    assert window == [(b"b", b"b"), (b"a", b"bb"), (b"d", b"d"), (b"a", b"abb"), (b"c", b"dd"), (b"c", b"cdd")]
    assert parity_bpe_trainer(train, 6, variant="window", window_size=2, alpha=1.0) == window


def test_ratios_compare_compression_on_the_training_text() -> None:
    """Compression is the training text's first length over its length now, in tokens; divided by the ratio, the
    smallest is the furthest behind."""
    train = [["ab"] * 10, ["cde"] * 5]
    # Equal ratios: 1 against 1, lang0 first with a-b (20/10 = 2); then 2 against 1: lang1.
    assert reference(train, 2, ratio=[1.0, 1.0]) == [(b"a", b"b"), (b"d", b"e")]
    # 1/1 against 1/1.2: lang1 first (15/10 / 1.2 = 1.25), then lang0.
    assert reference(train, 2, ratio=[1.0, 1.2]) == [(b"d", b"e"), (b"a", b"b")]
    # 1/1 against 1/2: lang1 first, and still behind after it (1.5 / 2 = 0.75).
    assert reference(train, 2, ratio=[1.0, 2.0]) == [(b"d", b"e"), (b"c", b"de")]


def test_global_merges_come_first() -> None:
    # Pooled: a-b 6 and c-d 6, the greater is c-d; then training lengths 11 against 7: lang0's a-b.
    train = [["ab"] * 5 + ["cd"], ["ab"] + ["cd"] * 5]
    assert reference(train, 2, global_merges=1) == [(b"c", b"d"), (b"a", b"b")]
    # Without: 12 against 12, lang0 first with a-b (5), then 7 against 11, lang1 with c-d (5).
    assert reference(train, 2) == [(b"a", b"b"), (b"c", b"d")]


def test_a_language_without_pairs_is_passed_over() -> None:
    # Training lengths: lang1 (40) merges e-f and d-ef; then 20 against 20, lang0 takes its only pair; then 10
    # against 20, lang1 makes c-def; then neither has a pair left.
    expected = [(b"e", b"f"), (b"d", b"ef"), (b"a", b"b"), (b"c", b"def")]
    assert reference([["ab"] * 10, ["cdef"] * 10], 10) == expected
    # min_frequency: lang0's pairs count 1 < 2, so once chosen it is out, and lang1 goes on.
    assert reference([["xyz"], ["ab"] * 2], 2, dev=[["xyzxyz"], ["ab"]], min_frequency=2) == [(b"a", b"b")]
    # A weight of 0 leaves a language nothing to merge.
    assert reference([["ab"] * 10, ["cd"]], 2, dev=[["ab"], ["cd"] * 3], weights={"lang1": 0}) == [(b"a", b"b")]


def test_special_tokens_take_the_last_ids() -> None:
    vocab, merges = reference_parity_train({"en": {b"ab": 2}, "de": {b"cd": 1}}, 259, ["<|endoftext|>"],
                                           dev={"en": {b"ab": 1}, "de": {b"cd": 1}})
    assert merges == [(b"a", b"b"), (b"c", b"d")]
    assert (len(vocab), vocab[256], vocab[257], vocab[258]) == (259, b"ab", b"cd", b"<|endoftext|>")


@pytest.mark.parametrize("options, message", [
    ({"dev": {"en": {b"a": 1}, "de": {b"b": 1}}, "ratios": {"en": 1.0, "de": 1.0}}, "not both"),
    ({"dev": {"de": {b"b": 1}, "en": {b"a": 1}}}, "must name the sources"),
    ({"ratios": {"en": 1.0}}, "must name the sources"),
    ({"ratios": {"en": 1.0, "de": 0.0}}, "ratios must be positive"),
    ({"weights": {"en": -1}}, "weights must be"),
    ({"weights": {"fr": 1}}, "weights must be"),
    ({"variant": "sliding"}, "variant must be"),
    ({"variant": "window", "alpha": 0.0}, "window variant needs"),
])
def test_options_it_cannot_follow_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        reference_parity_train({"en": {b"ab": 1}, "de": {b"cd": 1}}, 260, **options)
