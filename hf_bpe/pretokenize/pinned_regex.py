"""Running a parsed pattern with stdlib `re` and the pinned character classes, on any text: `PinnedRegex`.

The same technique as GPT-2's (hf_bpe.pretokenize.gpt2.PinnedGpt2Regex), for any pattern that
hf_bpe.pretokenize.regex_syntax accepts: stdlib `re` tests a class of BMP code points with one bitmap lookup but
walks the astral ranges one by one, so the compiled patterns hold the classes' ASCII part (for ASCII text) or BMP
part (for text without astral characters). Text with astral characters has each replaced by a BMP *stand-in* that
is in exactly the same classes of the pattern (and equal to none of its literals unless the astral character is), so
the pattern cannot tell them apart; the pre-tokens are then cut from the original text at the same positions. When
some astral character has no such stand-in (a pattern that names an astral literal, say), text holding astral
characters is matched with the full classes instead: slower, never different.

`tiles` says the pattern matches every character, as each preset does (its last alternatives take any single
character of every class). Otherwise the text between matches is kept as pre-tokens of its own, as `tokenizers`'
`Split(..., "isolated")` keeps it (tiktoken drops it).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator

import numpy as np

from hf_bpe.pretokenize.regex_syntax import (
    MAX_CODE_POINT,
    Alternation,
    Anchor,
    Chars,
    Node,
    Ranges,
    Repeat,
    contains_each,
    walk,
)

FIRST_ASTRAL = 0x10000
_ALL = MAX_CODE_POINT + 1
ASTRAL_REGEX = re.compile("[\U00010000-\U0010ffff]")
# From this length on, stand-ins are put in with numpy rather than one `re.sub` callback per astral character.
MIN_NUMPY_STAND_INS = 2000
_GROUP_OPENINGS = {":": "(?:", "i": "(?:", ">": "(?>", "=": "(?=", "!": "(?!", "<=": "(?<=", "<!": "(?<!"}


def python_pattern(tree: Alternation, below: int) -> str:
    """The tree as stdlib `re` text, each class cut to the code points below `below`: right for text whose characters
    are all below it.

    >>> from hf_bpe.pretokenize.regex_syntax import parse_pattern
    >>> python_pattern(parse_pattern(r"'(?i:s)|[^\\s\\p{L}]++$"), 0x80)
    "'(?:[Ss])|[^\\\\x09-\\\\x0d\\\\x20A-Za-z]++\\\\Z"
    """
    return _emit(tree, below)


def _emit(node: Node | Alternation, below: int) -> str:
    if isinstance(node, Alternation):
        return "|".join("".join(_emit(item, below) for item in branch) for branch in node.branches)
    if isinstance(node, Chars):
        return class_text(node.ranges, below)
    if isinstance(node, Anchor):
        return "\\A" if node.kind == "start" else "\\Z"
    if isinstance(node, Repeat):
        high = "" if node.high is None else str(node.high)
        quantifier = ({(0, "1"): "?", (0, ""): "*", (1, ""): "+"}.get((node.low, high))
                      or (f"{{{node.low}}}" if high == str(node.low) else f"{{{node.low},{high}}}"))
        return _emit(node.node, below) + quantifier + {"greedy": "", "lazy": "?", "possessive": "+"}[node.mode]
    return _GROUP_OPENINGS[node.kind] + _emit(node.body, below) + ")"


def class_text(ranges: Ranges, below: int) -> str:
    """A stdlib `re` atom matching the code points of `ranges` among those below `below`.

    >>> class_text(((0x41, 0x5A), (0x10000, 0x10FFFF)), 0x10000), class_text(((0x2E, 0x2E),), 0x80)
    ('[A-Z]', '\\\\.')
    >>> class_text(((0, 0x10FFFF),), 0x80) == class_text(((0, 0x7F),), 0x80) == "[\\\\x00-\\\\U0010ffff]"
    True
    """
    inside = _cut(ranges, below)
    if not inside:
        return "[^\\x00-\\U0010ffff]"  # matches nothing
    if len(inside) == 1 and inside[0][0] == inside[0][1]:
        return re.escape(chr(inside[0][0]))
    outside = _cut(_complement_below(inside, below), below)
    if not outside:
        return "[\\x00-\\U0010ffff]"  # every code point below `below` (and, harmlessly, above)
    if len(outside) < len(inside):
        return f"[^{_class_body(outside)}]"
    return f"[{_class_body(inside)}]"


def _cut(ranges: Ranges, below: int) -> Ranges:
    return tuple((first, min(last, below - 1)) for first, last in ranges if first < below)


def _complement_below(ranges: Ranges, below: int) -> Ranges:
    result, start = [], 0
    for first, last in ranges:
        if first > start:
            result.append((start, first - 1))
        start = last + 1
    if start < below:
        result.append((start, below - 1))
    return tuple(result)


def class_char(code_point: int) -> str:
    """A code point as written in a character class: ASCII letters and digits as they are, others as escapes.

    >>> class_char(0x41), class_char(0x2D), class_char(0x3000), class_char(0x1F600)
    ('A', '\\\\x2d', '\\\\u3000', '\\\\U0001f600')
    """
    if chr(code_point).isascii() and chr(code_point).isalnum():
        return chr(code_point)
    if code_point < 0x100:
        return f"\\x{code_point:02x}"
    return f"\\u{code_point:04x}" if code_point < 0x10000 else f"\\U{code_point:08x}"


def _class_body(ranges: Ranges) -> str:
    return "".join(class_char(first) if first == last else f"{class_char(first)}-{class_char(last)}"
                   for first, last in ranges)


def stand_ins(tree: Alternation) -> tuple[list[int], list[str]] | None:
    """Breakpoints and stand-ins for the astral code points (code point c gets `stand_ins[bisect_right(breaks, c) -
    1]`), or None when some astral code point has no BMP stand-in in the same classes."""
    atoms = [node.ranges for node in walk(tree) if isinstance(node, Chars)]

    def intervals(low: int, high: int) -> list[int]:
        points = {low, high}
        for ranges in atoms:
            for first, last in ranges:
                points.update(point for point in (first, last + 1) if low < point < high)
        return sorted(points)

    def signatures(code_points: list[int]) -> list[bytes]:
        """Which atoms hold each code point, one byte per atom."""
        points = np.array(code_points, dtype=np.int64)
        held = np.zeros((len(atoms), len(points)), dtype=np.uint8)
        for row, ranges in zip(held, atoms):
            row[:] = contains_each(ranges, points)
        return [column.tobytes() for column in held.T]

    representatives: dict[bytes, int] = {}
    bmp = [first for first in intervals(0, FIRST_ASTRAL)[:-1] if not 0xD800 <= first <= 0xDFFF]
    surrogate_free = intervals(0xE000, FIRST_ASTRAL)[:-1]  # the part of the BMP after the surrogates, cut separately
    for first, signature in zip(bmp + surrogate_free, signatures(bmp + surrogate_free)):
        representatives.setdefault(signature, first)
    breaks: list[int] = []
    chosen: list[str] = []
    astral = intervals(FIRST_ASTRAL, _ALL)[:-1]
    for first, signature in zip(astral, signatures(astral)):
        stand_in = representatives.get(signature)
        if stand_in is None:
            return None
        if not chosen or chosen[-1] != chr(stand_in):
            breaks.append(first)
            chosen.append(chr(stand_in))
    return breaks, chosen


class PinnedRegex:
    """A pattern run with the pinned classes; `findall` as `tokenizers`' Split pre-tokenizer cuts text.

    >>> from hf_bpe.pretokenize.regex_syntax import parse_pattern
    >>> regex = PinnedRegex(parse_pattern(r"\\p{Lu}\\p{Ll}*|\\p{N}{1,3}|\\s+|[^\\s\\p{L}\\p{N}]+"), tiles=False)
    >>> regex.findall("Hello World1234 \\U0001d400\\U0001d41a!")
    ['Hello', ' ', 'World', '123', '4', ' ', '\\U0001d400\\U0001d41a', '!']
    >>> regex.findall("abc!")  # lower-case letters alone match nothing: kept as text of their own
    ['abc', '!']
    """

    def __init__(self, tree: Alternation, tiles: bool) -> None:
        self.tiles = tiles
        self.ascii = re.compile(python_pattern(tree, 0x80))
        self.bmp = re.compile(python_pattern(tree, FIRST_ASTRAL))
        self._tree = tree
        self._full: re.Pattern[str] | None = None
        table = stand_ins(tree)
        self._breaks, self._stand_ins = table if table is not None else ([], [])
        self._has_stand_ins = table is not None
        self._breaks_array = np.array(self._breaks, dtype=np.uint32)
        self._stand_ins_array = np.array(list(map(ord, self._stand_ins)), dtype=np.uint32)

    def findall(self, text: str) -> list[str]:
        """The pre-tokens of `text`: the matches, and the text between them when the pattern leaves some."""
        if text.isascii():
            return self.with_gaps(self.ascii, text, self.ascii.findall(text))
        if ASTRAL_REGEX.search(text) is None:
            return self.with_gaps(self.bmp, text, self.bmp.findall(text))
        if not self._has_stand_ins:
            if self._full is None:
                self._full = re.compile(python_pattern(self._tree, _ALL))
            return self.with_gaps(self._full, text, self._full.findall(text))
        standing_in = self._with_stand_ins(text)
        if not self.tiles:
            return _cut_at(text, list(_spans(self.bmp, standing_in)))
        ends = np.cumsum(np.fromiter(map(len, self.bmp.findall(standing_in)), dtype=np.int64))
        return list(map(text.__getitem__, map(slice, [0, *ends[:-1].tolist()], ends.tolist())))

    def with_gaps(self, regex: re.Pattern[str], text: str, matches: list[str]) -> list[str]:
        """`matches` (regex.findall(text)), with the text between them put back, as `tokenizers` keeps it."""
        if self.tiles or sum(map(len, matches)) == len(text):
            return matches
        return _cut_at(text, list(_spans(regex, text)))

    def _with_stand_ins(self, text: str) -> str:
        if len(text) < MIN_NUMPY_STAND_INS:
            breaks, chosen = self._breaks, self._stand_ins
            return ASTRAL_REGEX.sub(lambda match: chosen[bisect_right(breaks, ord(match.group())) - 1], text)
        code_points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).copy()
        astral = code_points >= FIRST_ASTRAL
        code_points[astral] = self._stand_ins_array[
            np.searchsorted(self._breaks_array, code_points[astral], side="right") - 1]
        return code_points.tobytes().decode("utf-32-le", "surrogatepass")

    def iter_pretokens(self, text: str, batch: int) -> Iterator[list[str]]:
        """The pre-tokens of `text` in lists of at most `batch`, without ever holding all of them (for a text too long
        to cut, under a pattern that has no safe cuts)."""
        if text.isascii() or ASTRAL_REGEX.search(text) is None:
            regex, searched = (self.ascii if text.isascii() else self.bmp), text
        elif self._has_stand_ins:
            regex, searched = self.bmp, self._with_stand_ins(text)
        else:
            if self._full is None:
                self._full = re.compile(python_pattern(self._tree, _ALL))
            regex, searched = self._full, text
        spans: list[tuple[int, int]] = []
        position = 0
        for match in regex.finditer(searched):
            start, end = match.span()
            if start > position:
                spans.append((position, start))
            spans.append((start, end))
            position = end
            if len(spans) >= batch:
                yield [text[first:last] for first, last in spans]
                spans = []
        if position < len(text):
            spans.append((position, len(text)))
        if spans:
            yield [text[first:last] for first, last in spans]


def _spans(regex: re.Pattern[str], text: str) -> Iterator[tuple[int, int]]:
    """The spans of the matches and of the text between them, in order."""
    position = 0
    for match in regex.finditer(text):
        start, end = match.span()
        if start > position:
            yield position, start
        yield start, end
        position = end
    if position < len(text):
        yield position, len(text)


def _cut_at(text: str, spans: list[tuple[int, int]]) -> list[str]:
    return [text[start:end] for start, end in spans]


__all__ = ["ASTRAL_REGEX", "FIRST_ASTRAL", "MIN_NUMPY_STAND_INS", "PinnedRegex", "class_char", "class_text",
           "python_pattern", "stand_ins"]
