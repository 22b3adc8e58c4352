"""Tests for hf_bpe.pretokenize.superword: SuperBPE's stage-2 pattern against the authors' `tokenizers`
pre-tokenizers on adversarial text (every code point in context: test_superword_exhaustive.py), in batches for long
texts, and in time linear in the length of a digit run."""

from __future__ import annotations

import time
from itertools import chain

from hypothesis import example, given, settings
from hypothesis import strategies as st

from hf_bpe.pretokenize import compile_pattern
from hf_bpe.pretokenize.superword import SUPERWORD_PATTERN
from tests.pretokenize.test_patterns import pattern_text
from tests.pretokenize.test_superword_exhaustive import published

# Digits of several scripts (ASCII, Arabic-Indic, fullwidth, astral mathematical), other numeric characters (a
# fraction, a superscript, a Roman numeral, an astral Aegean number, the Tolong Siki digit only Digits counts), and
# what sits between numbers.
DIGITS = ["0", "1", "9", "\u0661", "\uff15", "\U0001d7ce"]
OTHER_NUMERIC = ["\xbd", "\xb2", "\u216b", "\U00010107", "\U00011de3"]
superword_text = st.lists(st.sampled_from(DIGITS + OTHER_NUMERIC) | st.text(st.sampled_from(DIGITS), max_size=8)
                          | st.sampled_from([" ", "\n", "a", "By the way", ",", "\u3000", "\U0001f600"]),
                          max_size=30).map("".join) | pattern_text


def theirs(text: str) -> list[str]:
    return [text[start:end] for start, end in published().encode(text).offsets]


@settings(max_examples=500, deadline=None)
@given(text=superword_text)
@example(text="12\xbd3456\xbd")
@example(text="1\U0001d7ce\xbd12 3")
def test_pretokens_equal_the_published_pre_tokenizers(text: str) -> None:
    assert compile_pattern(SUPERWORD_PATTERN).findall(text) == theirs(text)


@settings(max_examples=100, deadline=None)
@given(text=superword_text, batch=st.integers(1, 5))
def test_batches_of_a_long_text_are_its_pretokens(text: str, batch: int) -> None:
    pattern = compile_pattern(SUPERWORD_PATTERN)
    assert list(chain.from_iterable(pattern.regex.iter_pretokens(text, batch))) == pattern.findall(text)


def test_pretokens_run_across_whitespace_and_cut_digits_in_threes_from_the_right() -> None:
    assert compile_pattern(SUPERWORD_PATTERN).findall("It costs 1234567 dollars.\n\nBy the way") == [
        "It costs ", "1", "234", "567", " dollars.\n\nBy the way"]


def test_time_is_linear_in_the_length_of_a_digit_run() -> None:
    # The published lookahead rescans the rest of the run at every digit; ten times the digits would then cost a
    # hundred times the time.
    pattern = compile_pattern(SUPERWORD_PATTERN)

    def seconds(length: int) -> float:
        text = "x" + "\u0661" * length + "\xbd" + "7" * (length + 1)
        start = time.process_time()
        pretokens = pattern.findall(text)
        elapsed = time.process_time() - start
        assert "".join(pretokens) == text and len(pretokens) == 2 + 2 * length // 3
        return elapsed

    short, long = min(seconds(20_000) for _ in range(3)), min(seconds(200_000) for _ in range(3))
    assert long < 30 * max(short, 1e-3)
