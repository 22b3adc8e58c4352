"""Tests for hf_bpe.pretokenize.gpt2: the whitespace class, the safe cuts behind the fast paths, and special-token
splits.

`adversarial_text` is the hypothesis strategy the counting tests (tests/test_count.py) share.
"""

from __future__ import annotations

import itertools
import pickle
import re
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hf_bpe.pretokenize import (
    GPT2_ASCII_REGEX,
    GPT2_REGEX,
    UNICODE_VERSION,
    WHITESPACE_CHARS,
    SpecialTokenSplitter,
    pretokenize,
    split_at_safe_spaces,
    split_into_pieces,
    validate_special_tokens,
)
from hf_bpe.pretokenize.unicode_classes import LETTER_RANGES, NUMBER_RANGES, WHITESPACE_RANGES

# Pieces of text that stress the GPT-2 pattern and the cuts: whitespace of every kind (multi-byte in UTF-8 too),
# zero-width characters (not whitespace), emoji with modifiers and ZWJ, combining marks, RTL scripts, digits of other
# scripts and numeric letters, contractions in any case, and fragments of special tokens.
ATOMS = [
    " ", "  ", "\t", "\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1f", "\x85", "\xa0", "\u1680", "\u2000", "\u200a",
    "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff",
    "👍", "👍🏽", "👩\u200d💻", "👨\u200d👩\u200d👧", "🏳\ufe0f\u200d🌈", "e\u0301", "\u0301", "a\u0308\u0323",
    "שלום", "مرحبا", "\u200f", "١٢٣",
    "५", "Ⅻ", "²", "½", "漢字", "ｈｅｌｌｏ", "123", "4", "hello", "World", "x", "ß", "İ",
    "'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'ve", "'VE", "'ll", "'LL", "'d", "'D", "'m", "'M", "'", "''",
    "don't", "I'M", "we'Ll", ".", ",", "!?", "...", "-", "_", "(", "\\", '"', "$", "<", ">", "|", "<|", "|>", "<|endo",
    "<|endoftext|>", "endoftext", "<|end|>", "\ufffd",
]
SPECIAL_TOKEN_SETS = [
    [],
    ["<|endoftext|>"],
    ["<|endoftext|>", "<|end|>"],
    # Overlapping: a token that is a prefix of another, one that contains a space, one that overlaps itself.
    ["<|endoftext|>", "<|endoftext|><|endoftext|>", "<|"],
    ["a a", "<|end|>", " "],
    ["aXa", "XaX"],
]

# Any character that has a UTF-8 encoding (not a lone surrogate).
characters = st.characters(exclude_categories=("Cs",))
adversarial_text = st.lists(st.sampled_from(ATOMS) | characters | st.text(characters, max_size=3),
                            max_size=40).map("".join)


@st.composite
def text_and_special_tokens(draw: st.DrawFn) -> tuple[str, list[str]]:
    special_tokens = draw(st.sampled_from(SPECIAL_TOKEN_SETS))
    with_space = [" " + token for token in special_tokens]
    atoms = (st.sampled_from(ATOMS + special_tokens + with_space + ["a", "X"]) | characters
             | st.text(characters, max_size=3))
    return "".join(draw(st.lists(atoms, max_size=40))), special_tokens


def table_code_points(table: str) -> set[int]:
    """The code points of a hf_bpe.pretokenize.unicode_classes table, read plainly."""
    code_points: set[int] = set()
    for item in table.split():
        first, _, last = item.partition("-")
        code_points.update(range(int(first, 16), int(last or first, 16) + 1))
    return code_points


LETTERS, NUMBERS, WHITESPACE = (table_code_points(table) for table in (LETTER_RANGES, NUMBER_RANGES, WHITESPACE_RANGES))
EVERY_CODE_POINT = [code_point for code_point in range(sys.maxunicode + 1) if not 0xD800 <= code_point <= 0xDFFF]


def plain_class(code_points: set[int]) -> str:
    """A character class of runs of consecutive code points, each written as an escaped range."""
    runs: list[list[int]] = []
    for code_point in sorted(code_points):
        if runs and runs[-1][1] == code_point - 1:
            runs[-1][1] = code_point
        else:
            runs.append([code_point, code_point])
    return "".join(f"\\U{first:08x}-\\U{last:08x}" for first, last in runs)


# The GPT-2 pattern with the table's classes written out in full, for stdlib `re`: the plain (and slow) reference for
# the pinned pattern, whose compiled part holds only BMP ranges and which gives astral characters stand-ins.
L, N, S = plain_class(LETTERS), plain_class(NUMBERS), plain_class(WHITESPACE)
PLAIN_PATTERN = re.compile(f"'(?:[sdmt]|ll|ve|re)| ?[{L}]+| ?[{N}]+| ?[^{S}{L}{N}]+|[{S}]+(?![^{S}])|[{S}]+")


def test_generated_table_is_well_formed() -> None:
    for table in (LETTER_RANGES, NUMBER_RANGES, WHITESPACE_RANGES):
        ranges = [tuple(int(end, 16) for end in item.split("-")) for item in table.split()]
        assert all(first < last for first, last, *_ in [(r[0], r[-1], 0) for r in ranges if len(r) == 2])
        starts = [r[0] for r in ranges]
        assert starts == sorted(starts) and len(set(starts)) == len(starts)
    assert not LETTERS & NUMBERS and not LETTERS & WHITESPACE and not NUMBERS & WHITESPACE
    assert not (LETTERS | NUMBERS | WHITESPACE) & set(range(0xD800, 0xE000))
    assert re.fullmatch(r"\d+\.\d+\.\d+", UNICODE_VERSION)


def test_whitespace_chars_are_the_generated_whitespace_class() -> None:
    assert set(map(ord, WHITESPACE_CHARS)) == WHITESPACE
    assert len(WHITESPACE_CHARS) == len(WHITESPACE)


@pytest.mark.parametrize("name, members, separator", [("letter", LETTERS, "a"), ("number", NUMBERS, "1"),
                                                      ("whitespace", WHITESPACE, "\t")])
def test_pinned_pattern_classifies_every_code_point_as_the_table_says(name: str, members: set[int],
                                                                     separator: str) -> None:
    # A code point joins the pre-token of the separator before it exactly when it is in the separator's class.
    probed = [code_point for code_point in EVERY_CODE_POINT if chr(code_point) != separator]
    text = separator + separator.join(map(chr, probed)) + separator + "!"
    offsets = set(itertools.accumulate(map(len, GPT2_REGEX.findall(text))))
    joined = {code_point for index, code_point in enumerate(probed) if 2 * index + 1 not in offsets}
    expected = members - {ord(separator)}
    assert joined == expected, f"{name}: first differing code point U+{min(joined ^ expected):04X}"


def ends_of(parts: list[str]) -> np.ndarray:
    """The end offsets of consecutive parts of a text."""
    return np.cumsum(np.fromiter(map(len, parts), dtype=np.int64, count=len(parts)))


def test_pieces_and_safe_spaces_use_the_pinned_whitespace_on_every_code_point() -> None:
    # Every code point after a space, before and after whitespace: the pieces and the safe spaces must cut only at
    # pre-token boundaries of the pinned pattern, and a whitespace-only piece must be one pre-token.
    text = "".join(f" {c}\t{c}x" for c in map(chr, EVERY_CODE_POINT))
    pretoken_ends = ends_of(GPT2_REGEX.findall(text))
    for cut in (split_into_pieces, split_at_safe_spaces):
        cut_ends = ends_of([part for part in cut(text) if part])
        assert cut_ends[-1] == len(text)
        inside = cut_ends[~np.isin(cut_ends, pretoken_ends)]
        assert not len(inside), f"{cut.__name__} cuts inside a pre-token at {text[inside[0] - 3:inside[0] + 3]!r}"
    pieces = split_into_pieces(text)
    piece_ends = ends_of(pieces)
    whitespace_only = np.array([piece.strip(WHITESPACE_CHARS) == "" for piece in pieces])
    split_pieces = np.searchsorted(piece_ends, pretoken_ends[~np.isin(pretoken_ends, piece_ends)], side="right")
    bad = split_pieces[whitespace_only[split_pieces]]
    assert not len(bad), f"whitespace piece {pieces[bad[0]]!r} holds several pre-tokens"


ASTRAL_ATOMS = ["\U0001f600", "\U0001d49c", "\U000104a0", "\U00020000", "\U0001d7d8", "\U0001f3fd", "\U000e0001",
                "\U0010ffff", "\U00010000", "\U00011de0", "\U0003d000", "\U000323b0"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(ATOMS + ASTRAL_ATOMS) | characters, max_size=40).map("".join),
       st.sampled_from([1, 60, 400]))
def test_pinned_pattern_equals_the_plain_pattern_with_astral_characters(text: str, repeat: int) -> None:
    # Short text takes the re.sub stand-ins; long text (repeated) the numpy ones, sparse or dense.
    text = text * repeat
    assert GPT2_REGEX.findall(text) == PLAIN_PATTERN.findall(text)
    assert pretokenize(text) == PLAIN_PATTERN.findall(text)


def test_pinned_pattern_on_long_text_with_sparse_and_dense_astral_characters() -> None:
    sparse = "the cat sat on the mat, 12 times. " * 200 + "\U0001f600 \U0001d49cx\U0001d7d8's" + "end " * 100
    dense = "\U00020000\U00020001 \U00020002\u3002\U0001d7d8\U0001d7d9\U0001f600!" * 500
    for text in (sparse, dense, sparse + dense, dense + sparse):
        assert GPT2_REGEX.findall(text) == PLAIN_PATTERN.findall(text)


@settings(max_examples=400, deadline=None)
@given(adversarial_text)
def test_cutting_at_safe_spaces_never_changes_pretokens(text: str) -> None:
    pieces = split_at_safe_spaces(text)
    assert "".join(pieces) == text
    assert [pretoken for piece in pieces for pretoken in pretokenize(piece)] == pretokenize(text)


@settings(max_examples=400, deadline=None)
@given(adversarial_text)
def test_pieces_never_change_pretokens_and_whitespace_pieces_are_one_pretoken(text: str) -> None:
    pieces = split_into_pieces(text)
    assert "".join(pieces) == text
    assert "" not in pieces
    assert [pretoken for piece in pieces for pretoken in pretokenize(piece)] == pretokenize(text)
    for piece in pieces:
        body = piece[1:] if piece.startswith(" ") else piece
        if piece.strip(WHITESPACE_CHARS) == "":
            assert pretokenize(piece) == [piece]
        else:
            assert not set(body) & set(WHITESPACE_CHARS)


def test_pieces_of_whitespace_before_text() -> None:
    # The last whitespace character before non-whitespace is a piece of its own unless it is a space.
    assert split_into_pieces("a\n\n\nb  c\t d\u3000e") == ["a", "\n\n", "\n", "b", " ", " c", "\t", " d", "\u3000",
                                                          "e"]


def test_ascii_regex_matches_gpt2_regex_on_every_short_ascii_string() -> None:
    alphabet = ["a", "Z", "s", "l", "v", "e", "r", "t", "0", "9", "'", "!", "_", " ", "\n", "\r", "\t", "\x0b", "\x0c",
                "\x1c", "\x7f"]
    for length in range(1, 4):
        for letters in itertools.product(alphabet, repeat=length):
            text = "".join(letters)
            assert GPT2_ASCII_REGEX.findall(text) == GPT2_REGEX.findall(text), text


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(max_codepoint=127)) | st.lists(st.sampled_from([a for a in ATOMS if a.isascii()]))
       .map("".join))
def test_ascii_regex_matches_gpt2_regex_on_ascii_text(text: str) -> None:
    assert GPT2_ASCII_REGEX.findall(text) == GPT2_REGEX.findall(text)


def reference_split(text: str, special_tokens: list[str]) -> list[str]:
    """Split at special tokens by a plain scan: leftmost occurrence, longest token first, keeping the tokens."""
    parts, start, position = [], 0, 0
    while position < len(text):
        matches = [token for token in special_tokens if text.startswith(token, position)]
        if matches:
            token = max(matches, key=len)
            parts += [text[start:position], token]
            position = start = position + len(token)
        else:
            position += 1
    return [*parts, text[start:]]


def reference_occurrences(text: str, special_tokens: list[str], pos: int) -> list[tuple[int, str]]:
    """(start, token) of each occurrence found by the plain scan of `reference_split`, starting at `pos`."""
    parts = reference_split(text[pos:], special_tokens)
    occurrences, offset = [], pos
    for index, part in enumerate(parts):
        if index % 2:
            occurrences.append((offset, part))
        offset += len(part)
    return occurrences


@settings(max_examples=400, deadline=None)
@given(text_and_special_tokens(), st.integers(min_value=0, max_value=50))
def test_special_token_splitter_matches_a_plain_leftmost_longest_scan(case: tuple[str, list[str]], pos: int) -> None:
    text, special_tokens = case
    splitter = SpecialTokenSplitter(special_tokens)
    expected = reference_split(text, special_tokens)
    assert splitter.split_keeping(text) == expected
    assert splitter.split(text) == expected[::2]
    pos = min(pos, len(text))
    assert [(match.start(), match.group()) for match in splitter.finditer(text, pos)] == reference_occurrences(
        text, special_tokens, pos)
    assert bool(splitter) == bool(special_tokens)
    assert splitter.longest == max(map(len, special_tokens), default=0)
    assert sorted(splitter.tokens) == sorted(set(special_tokens))
    assert [len(token) for token in splitter.tokens] == sorted(map(len, splitter.tokens), reverse=True)


@pytest.mark.parametrize("special_tokens", [["<|endoftext|>"], ["ab", "b"]])
def test_special_token_splitter_single_token_fast_path_agrees_with_the_regex_path(special_tokens: list[str]) -> None:
    # The single-token path (str.split) and the alternation path must treat edges and repeats alike.
    splitter = SpecialTokenSplitter(special_tokens)
    token = special_tokens[0]
    for text in ["", token, token * 3, f"x{token}", f"{token}y", f"x{token}{token}y", "no token"]:
        assert splitter.split_keeping(text) == reference_split(text, special_tokens), text
        assert splitter.split(text) == reference_split(text, special_tokens)[::2], text


def test_special_token_splitter_pickles_and_refuses_empty_tokens() -> None:
    splitter = pickle.loads(pickle.dumps(SpecialTokenSplitter(["<a>", "<a><b>", "<a>"])))
    assert splitter.tokens == ("<a><b>", "<a>")
    assert splitter.split_keeping("1<a><b>2<a>3") == ["1", "<a><b>", "2", "<a>", "3"]
    assert list(SpecialTokenSplitter([]).finditer("abc")) == []
    with pytest.raises(ValueError, match="must not be empty"):
        SpecialTokenSplitter(["<a>", ""])


def test_longest_special_token_wins_where_several_start() -> None:
    splitter = SpecialTokenSplitter(["<|e|>", "<|e|><|e|>", "<|"])
    assert splitter.split_keeping("a<|e|><|e|><|e|>b<|c") == ["a", "<|e|><|e|>", "", "<|e|>", "b", "<|", "c"]
    # Leftmost first: "XaX" is not matched inside the earlier "aXa".
    assert SpecialTokenSplitter(["XaX", "aXa"]).split("aXaXa") == ["", "Xa"]
    assert SpecialTokenSplitter([]).split("a b") == ["a b"]


@pytest.mark.parametrize("tokens, error, message", [
    (["<s>", "<s>"], ValueError, "duplicate special token '<s>'"),
    (["<s>", ""], ValueError, "special tokens must not be empty strings"),
    (["<s>", 3], TypeError, "special tokens must be str, got int: 3"),
])
def test_validate_special_tokens_rejects_bad_tokens(tokens: list, error: type, message: str) -> None:
    with pytest.raises(error, match=re.escape(message)):
        validate_special_tokens(tokens)


def test_validate_special_tokens_accepts_none_and_iterables() -> None:
    assert validate_special_tokens(None) == []
    assert validate_special_tokens(iter(["<a>", "<b>"])) == ["<a>", "<b>"]
