"""SuperBPE's stage-2 pattern on every code point, against the authors' `tokenizers` pre-tokenizers.

- The pinned tables: `NUMERIC` is exactly what `Digits` isolates, `DECIMAL` exactly what Oniguruma's `\\d` matches in
  the installed `tokenizers` (an upgrade that moves either fails here, as scripts/make_unicode_classes.py --check does
  for the presets' classes).
- The pre-tokens: each code point `c` in the contexts the pattern treats specially (`segment`: before, after and
  inside digit runs of every length mod 3, after a fraction, between spaces and newlines), cut by hf_bpe as by
  `Digits(individual_digits=False)` then `Split(Regex(r"(?=(\\d{3})+(?!\\d))"), "isolated")`, and as by a `Split` of
  the pattern itself (what a saved tokenizer.json would hold for it, read by Oniguruma).
"""

from __future__ import annotations

import sys
from functools import cache
from itertools import accumulate

import pytest
import tokenizers
from tokenizers import Regex
from tokenizers.pre_tokenizers import Digits, Sequence, Split

from hf_bpe.pretokenize import compile_pattern, tokenizers_pattern
from hf_bpe.pretokenize.regex_syntax import contains
from hf_bpe.pretokenize.superword import DECIMAL, NUMERIC, PUBLISHED_SPLIT_REGEX, SUPERWORD_PATTERN
from tests.pretokenize.test_unicode_exhaustive import first_difference

CODE_POINTS = [code_point for code_point in range(sys.maxunicode + 1) if not 0xD800 <= code_point <= 0xDFFF]
BATCH = 1 << 14
BATCHES = [tuple(CODE_POINTS[start:start + BATCH]) for start in range(0, len(CODE_POINTS), BATCH)]
LINE = 64


def segment(c: str) -> str:
    return f"x{c}1{c}23{c}456{c}{c}7890 {c}½{c}1234{c}\n{c}12 "


def lines_of(code_points: tuple[int, ...]) -> list[str]:
    return ["".join(map(segment, map(chr, code_points[start:start + LINE])))
            for start in range(0, len(code_points), LINE)]


def _alone(pre_tokenizer: object) -> tokenizers.Tokenizer:
    """A tokenizer whose one-token vocab makes each pre-token one token, with its offsets."""
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizer
    return tokenizer


@cache
def published() -> tokenizers.Tokenizer:
    return _alone(Sequence([Digits(individual_digits=False), Split(Regex(PUBLISHED_SPLIT_REGEX), "isolated")]))


@cache
def pattern_split() -> tokenizers.Tokenizer:
    return _alone(Split(Regex(tokenizers_pattern(SUPERWORD_PATTERN)), "isolated"))


def their_ends(tokenizer: tokenizers.Tokenizer, texts: list[str]) -> list[list[int]]:
    return [[end for _, end in encoding.offsets] for encoding in tokenizer.encode_batch(texts)]


def our_ends(text: str) -> list[int]:
    return list(accumulate(map(len, compile_pattern(SUPERWORD_PATTERN).findall(text))))


def test_the_pinned_tables_are_what_digits_and_backslash_d_match_in_tokenizers() -> None:
    digits, decimal = _alone(Digits(individual_digits=False)), _alone(Split(Regex(r"\d"), "isolated"))
    for code_points in BATCHES:
        texts = ["a" + "a".join(map(chr, code_points[start:start + LINE])) + "a"
                 for start in range(0, len(code_points), LINE)]
        for tokenizer, table, name in ((digits, NUMERIC, "Digits"), (decimal, DECIMAL, "\\d")):
            found = {ord(char) for encoding, text in zip(tokenizer.encode_batch(texts), texts)
                     for start, end in encoding.offsets if "a" not in (char := text[start:end])}
            expected = {code_point for code_point in code_points if contains(table, code_point)}
            assert found == expected, (f"{name} in tokenizers {tokenizers.__version__}: "
                                       f"{sorted(map(hex, found ^ expected))[:10]} moved")


# Two halves of the code points, so that the test processes share them.
@pytest.mark.parametrize("half", [0, 1])
def test_pretokens_equal_the_published_pre_tokenizers_on_every_code_point(half: int) -> None:
    readers = {"published": published(), "pattern_split": pattern_split()}
    middle = len(BATCHES) // 2
    for code_points in (BATCHES[:middle], BATCHES[middle:])[half]:
        texts = lines_of(code_points)
        ours = [our_ends(text) for text in texts]
        for reader, theirs in readers.items():
            if ours != their_ends(theirs, texts):
                def agrees(text: str, theirs: tokenizers.Tokenizer = theirs) -> bool:
                    return our_ends(text) == their_ends(theirs, [text])[0]

                bad = first_difference(code_points, agrees, segment)
                pytest.fail(f"the superword pattern differs from tokenizers {tokenizers.__version__} ({reader}) "
                            f"at {bad}")
