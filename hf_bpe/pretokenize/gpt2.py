"""GPT-2 pre-tokenization: the pattern with pinned character classes, and the safe split points of its fast paths.

The pattern's letters, numbers and whitespace are those of `tokenizers` and tiktoken (Unicode UNICODE_VERSION, from the
generated hf_bpe.pretokenize.unicode_classes), not those of the installed `regex` module, so hf_bpe pre-tokenizes as
they do on every code point (tests/pretokenize/test_unicode_exhaustive.py). Every pattern here is built from those
classes.

Three facts about the GPT-2 pattern make the fast paths here exact (tests/pretokenize/test_gpt2.py checks them against
the plain pattern on adversarial text):

1. A position holding U+0020 SPACE that is followed by a character the pattern does not count as whitespace is
   always a pre-token boundary, and the pre-tokens on either side do not depend on the text across it. So text can be
   cut there into pieces (each piece but the first starts with that space) and every piece pre-tokenized on its own.
   `split_at_safe_spaces` makes those pieces with one C-level `re.split`.
2. Special tokens split text into documents before any of this (`hf_bpe.pretokenize.special_tokens`).
3. Coarser still, every boundary between a run of non-whitespace and a run of whitespace can be cut, except that the
   last whitespace character before non-whitespace goes with it: a U+0020 SPACE joins the run it precedes (fact 1),
   any other whitespace character stands alone, because the pattern makes it a pre-token of its own. So every
   pre-token lies inside one *piece*: an optional space and a run of non-whitespace, or whitespace only (one
   pre-token). `split_into_pieces` makes them with one C-level `re.findall`; counting pieces first and
   pre-tokenizing only the distinct ones is what makes corpus counting fast (see hf_bpe.train.counting.count).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator

import numpy as np

from hf_bpe.pretokenize.pinned_regex import ASTRAL_REGEX, FIRST_ASTRAL, MIN_NUMPY_STAND_INS, class_char
from hf_bpe.pretokenize.regex_syntax import CLASSES, Ranges
from hf_bpe.pretokenize.unicode_classes import UNICODE_VERSION

__all__ = [
    "GPT2_ASCII_REGEX", "GPT2_PATTERN", "GPT2_REGEX", "NON_WHITESPACE_CLASS", "SAFE_SPACE_REGEX", "UNICODE_VERSION",
    "WHITESPACE_CHARS", "PinnedGpt2Regex", "pretokenize", "safe_segments", "split_at_safe_spaces", "split_into_pieces",
]

# The canonical GPT-2 pattern, as GPT-2, `tokenizers` and tiktoken spell it (tiktoken twins use this text). hf_bpe
# does not match with it: \p{L}, \p{N} and \s follow the Unicode tables of whichever engine runs it, and those
# of the installed `regex` may be newer than those of `tokenizers`. hf_bpe matches with the classes generated from
# `tokenizers` itself (hf_bpe.pretokenize.unicode_classes, Unicode UNICODE_VERSION) instead.
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

def _class_body(ranges: Ranges, below: int) -> str:
    """The inside of a character class holding the code points of `ranges` that are below `below`.

    >>> _class_body([(0x41, 0x5A), (0x2D, 0x2D), (0x10000, 0x1000B)], 0x80)
    'A-Z\\\\x2d'
    """
    parts = []
    for first, last in ranges:
        last = min(last, below - 1)
        if first < last:
            parts.append(f"{class_char(first)}-{class_char(last)}")
        elif first == last:
            parts.append(class_char(first))
    return "".join(parts)


_LETTERS, _NUMBERS, _WHITESPACE = CLASSES["L"], CLASSES["N"], CLASSES["s"]


def _gpt2_pattern(below: int) -> str:
    """GPT2_PATTERN with the pinned classes spelled out, for text whose code points are all below `below`."""
    letter, number, space = (_class_body(ranges, below) for ranges in (_LETTERS, _NUMBERS, _WHITESPACE))
    return (f"'(?:[sdmt]|ll|ve|re)| ?[{letter}]+| ?[{number}]+| ?[^{space}{letter}{number}]+"
            f"|[{space}]+(?![^{space}])|[{space}]+")


# Pre-tokenizes text without astral characters (all below U+10000) with the pinned classes.
_BMP_REGEX = re.compile(_gpt2_pattern(FIRST_ASTRAL))


def _astral_stand_ins() -> tuple[list[int], list[str]]:
    """Breakpoints and stand-ins: astral code point c has the class of `stand_ins[bisect_right(breaks, c) - 1]`.

    The stand-ins are plain ASCII characters that the pattern treats only by class: "x" (letter, and not the start of
    a contraction), "0" (number), "\t" (whitespace that is not a space) and "!" (anything else).
    """
    classed = sorted((first, last, stand_in) for ranges, stand_in in ((_LETTERS, "x"), (_NUMBERS, "0"),
                                                                        (_WHITESPACE, "\t"))
                     for first, last in ranges if last >= FIRST_ASTRAL)
    breaks, stand_ins = [FIRST_ASTRAL], ["!"]
    for first, last, stand_in in classed:
        breaks += [max(first, FIRST_ASTRAL), last + 1]
        stand_ins += [stand_in, "!"]
    return breaks, stand_ins


_ASTRAL_BREAKS, _ASTRAL_STAND_INS = _astral_stand_ins()
_ASTRAL_BREAKS_ARRAY = np.array(_ASTRAL_BREAKS, dtype=np.uint32)
_ASTRAL_STAND_INS_ARRAY = np.array(list(map(ord, _ASTRAL_STAND_INS)), dtype=np.uint32)


def _stand_in(match: re.Match[str]) -> str:
    return _ASTRAL_STAND_INS[bisect_right(_ASTRAL_BREAKS, ord(match.group())) - 1]


class PinnedGpt2Regex:
    """The GPT-2 pattern with the pinned character classes; `findall` as a compiled pattern's, on any text.

    Stdlib `re` compiles a class of BMP code points to a bitmap, one lookup per character, but tests code points
    beyond U+FFFF range by range, and every miss (each pre-token's end) walks all of those ranges: the full classes
    ran at 0.4x the speed of `regex` with \\p{L}, and so did `regex` with the classes corrected by set operations.
    So the compiled pattern holds the BMP part of the classes only (1.5-2.2x the speed of `regex` on the shared
    corpora), and text with astral characters (emoji, CJK extensions, historic scripts: rare) has each of them
    replaced by an ASCII stand-in of the same class before matching. Stand-ins keep every position, so the pre-tokens
    holding one are then cut from the original text.

    >>> PinnedGpt2Regex().findall("a\U0001d49c\U0001f600 \U000104a01's")
    ['a\U0001d49c', '\U0001f600', ' \U000104a01', "'s"]
    """

    pattern = GPT2_PATTERN

    def findall(self, text: str) -> list[str]:
        """The GPT-2 pre-tokens of text, as `tokenizers` and tiktoken make them."""
        if ASTRAL_REGEX.search(text) is None:
            return _BMP_REGEX.findall(text)
        if len(text) < MIN_NUMPY_STAND_INS:
            pretokens = _BMP_REGEX.findall(ASTRAL_REGEX.sub(_stand_in, text))
            start = 0  # the pattern matches every character: the stand-in text's pre-tokens tile text too
            for index, pretoken in enumerate(pretokens):
                end = start + len(pretoken)
                pretokens[index] = text[start:end]
                start = end
            return pretokens
        code_points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).copy()
        astral = code_points >= FIRST_ASTRAL
        code_points[astral] = _ASTRAL_STAND_INS_ARRAY[
            np.searchsorted(_ASTRAL_BREAKS_ARRAY, code_points[astral], side="right") - 1]
        pretokens = _BMP_REGEX.findall(code_points.tobytes().decode("utf-32-le", "surrogatepass"))
        ends = np.cumsum(np.fromiter(map(len, pretokens), dtype=np.int64, count=len(pretokens)))
        positions = np.flatnonzero(astral)
        if 4 * len(positions) > len(pretokens):  # dense: cutting every pre-token at C level is faster
            return list(map(text.__getitem__, map(slice, [0, *ends[:-1].tolist()], ends.tolist())))
        holding = np.searchsorted(ends, positions, side="right")  # sorted: the pre-tokens holding stand-ins
        holding = holding[np.diff(holding, prepend=-1) != 0]
        for index, end in zip(holding.tolist(), ends[holding].tolist()):
            pretokens[index] = text[end - len(pretokens[index]):end]
        return pretokens

    def __repr__(self) -> str:
        return f"PinnedGpt2Regex(Unicode {UNICODE_VERSION})"


GPT2_REGEX = PinnedGpt2Regex()

# The whitespace class of the pattern (Unicode White_Space as `tokenizers` sees it). It is spelled out, not `\s`:
# stdlib `re`'s \s also matches \x1c-\x1f.
WHITESPACE_CHARS = "".join(chr(code_point) for first, last in _WHITESPACE for code_point in range(first, last + 1))
# Matches (zero-width) before each safe space: a space followed by a non-whitespace character.
SAFE_SPACE_REGEX = re.compile("(?= [^" + re.escape(WHITESPACE_CHARS) + "])")
_WS = "[" + re.escape(WHITESPACE_CHARS) + "]"
NON_WHITESPACE_CLASS = "[^" + re.escape(WHITESPACE_CHARS) + "]"
_PIECE = re.compile(f" ?{NON_WHITESPACE_CLASS}+|{_WS}+(?!{NON_WHITESPACE_CLASS})|{_WS}")

# The GPT-2 pattern for ASCII-only strings, where the classes are short (about twice as fast as GPT2_REGEX's BMP
# pattern). tests/pretokenize/test_gpt2.py checks it.
GPT2_ASCII_REGEX = re.compile(_gpt2_pattern(0x80))


def pretokenize(text: str) -> list[str]:
    """Split text (with no special tokens in it) into GPT-2 pre-tokens, as `tokenizers` and tiktoken do.

    >>> pretokenize("Hello, world!  It's")
    ['Hello', ',', ' world', '!', ' ', ' It', "'s"]
    """
    return GPT2_REGEX.findall(text)


def split_at_safe_spaces(text: str) -> list[str]:
    """Cut text before every space that is followed by a non-whitespace character.

    The pieces concatenate back to `text`, and pre-tokenizing each piece alone gives the same pre-tokens as
    pre-tokenizing `text` (fact 1 in the module docstring). The first piece may be empty.

    >>> split_at_safe_spaces("the cat  sat\\n on")
    ['the', ' cat ', ' sat\\n', ' on']
    """
    return SAFE_SPACE_REGEX.split(text)


def safe_segments(text: str, size: int, cut: re.Pattern[str] = SAFE_SPACE_REGEX) -> Iterator[str]:
    """`text` cut into segments of at least `size` characters (the last may be shorter), each cut before the first
    safe space at or after that length: no pre-token or piece crosses it (facts 1 and 3), so the segments' pre-tokens
    and pieces are the text's, and a 100 MB document never holds the list of all of them (~60 bytes each) at once.
    A text with no safe space after `size` (a long word) stays one segment. `cut` finds (zero-width) the safe cuts
    of another pattern (`CompiledPattern.safe_cut`).

    >>> list(safe_segments("ab cd ef", 2)), list(safe_segments("a b", 8))
    (['ab', ' cd', ' ef'], ['a b'])
    """
    start = 0
    while len(text) - start > size:
        found = cut.search(text, start + size)
        if found is None:
            break
        yield text[start:found.start()]
        start = found.start()
    yield text[start:] if start else text


def split_into_pieces(text: str) -> list[str]:
    """Cut text into pieces that no pre-token crosses (fact 3 in the module docstring).

    A piece is an optional space and a run of non-whitespace, or a run of whitespace, which is a single pre-token.
    The pieces concatenate back to `text`, and pre-tokenizing each alone gives the pre-tokens of `text`.

    >>> split_into_pieces("Hi, it's  me\\n\\nok ")
    ['Hi,', " it's", ' ', ' me', '\\n', '\\n', 'ok', ' ']
    >>> pretokenize("Hi, it's  me\\n\\nok ")
    ['Hi', ',', ' it', "'s", ' ', ' me', '\\n', '\\n', 'ok', ' ']
    """
    return _PIECE.findall(text)
