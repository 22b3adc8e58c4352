r"""Reading a pre-tokenization pattern: the regex syntax tiktoken and `tokenizers` share, parsed into a small tree.

A pattern is read as tiktoken reads it (Rust `regex` / fancy-regex): `$` is the end of the text, `X{1,3}+` is
possessive, `(?i:...)` folds case as Unicode simple case folding does. hf_bpe runs the tree with stdlib `re` and its
pinned character classes (`hf_bpe.pretokenize.pinned_regex`), and spells it back for `tokenizers`, whose Oniguruma
reads a few constructs otherwise (`hf_bpe.pretokenize.spelling`).

What is accepted, and what is refused with an `InputError` that names the construct:

- literals, `.` (anything but a newline), escapes `\r \n \t \f \v \xHH \x{H..} \uHHHH` and escaped punctuation;
- classes `[...]` and `[^...]` of literals, ranges and the classes below;
- the classes `\p{L} \p{N} \p{Lu} \p{Ll} \p{Lt} \p{Lm} \p{Lo} \p{M}` (also `\pL`, `\P{..}` negated) and `\s \S`,
  with the tables of `tokenizers` and tiktoken (hf_bpe.pretokenize.unicode_classes). Other classes (`\d`, `\w`,
  `\p{Han}`, POSIX classes, nested classes and set operations) are refused: their tables or meaning differ between
  the libraries or from ours;
- groups `(...)` (never capturing for us), `(?:...)`, `(?>...)`, `(?i:...)` holding only ASCII, lookarounds
  `(?=...)`, `(?!...)`, `(?<=...)`, `(?<!...)`;
- quantifiers `? * + {n} {n,} {n,m}`, lazy (`??`, `*?`, `+?`) or possessive (`?+`, `*+`, `++`, `{n,m}+`);
- anchors `^`/`\A` (start of the text) and `$`/`\z` (end of the text).

Refused besides: back-references, named groups, other flags, lazy braces (`{n,m}?`, which Oniguruma reads in its
own way), and a pattern that can match the empty string (tiktoken and `tokenizers` treat empty matches differently).

>>> tree = parse_pattern(r"'(?i:s)|\p{N}{1,3}+")
>>> [type(node).__name__ for branch in tree.branches for node in branch], tree.branches[1][0].mode
(['Chars', 'Group', 'Repeat'], 'possessive')
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

import numpy as np

from hf_bpe.common.errors import InputError
from hf_bpe.pretokenize.unicode_classes import CLASS_RANGES

MAX_CODE_POINT = 0x10FFFF
Ranges = tuple[tuple[int, int], ...]  # sorted, disjoint, inclusive code-point ranges


def parse_ranges(table: str) -> Ranges:
    """Ranges from a hf_bpe.pretokenize.unicode_classes table.

    >>> parse_ranges("0041-005A 00AA")
    ((65, 90), (170, 170))
    """
    items = (item.partition("-") for item in table.split())
    return tuple((int(first, 16), int(last or first, 16)) for first, _, last in items)


def union(*sets: Ranges) -> Ranges:
    """The union of range sets, normalized.

    >>> union(((1, 3),), ((4, 5), (9, 9)))
    ((1, 5), (9, 9))
    """
    merged: list[list[int]] = []
    for first, last in sorted(item for ranges in sets for item in ranges):
        if merged and first <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], last)
        else:
            merged.append([first, last])
    return tuple((first, last) for first, last in merged)


def complement(ranges: Ranges) -> Ranges:
    """Every code point not in `ranges`.

    >>> complement(((0, 9), (20, MAX_CODE_POINT)))
    ((10, 19),)
    """
    result, start = [], 0
    for first, last in ranges:
        if first > start:
            result.append((start, first - 1))
        start = last + 1
    if start <= MAX_CODE_POINT:
        result.append((start, MAX_CODE_POINT))
    return tuple(result)


def contains(ranges: Ranges, code_point: int) -> bool:
    index = bisect_right(ranges, (code_point, MAX_CODE_POINT + 1)) - 1
    return index >= 0 and ranges[index][0] <= code_point <= ranges[index][1]


def contains_each(ranges: Ranges, code_points: np.ndarray) -> np.ndarray:
    """`contains` of every code point of an int64 array at once (a bool array).

    >>> contains_each(((3, 5), (9, 9)), np.array([2, 3, 5, 6, 9])).tolist()
    [False, True, True, False, True]
    """
    if not ranges:
        return np.zeros(len(code_points), dtype=bool)
    firsts, lasts = np.array(ranges, dtype=np.int64).T
    index = np.searchsorted(firsts, code_points, side="right") - 1
    return (index >= 0) & (code_points <= lasts[np.maximum(index, 0)])


CLASSES: dict[str, Ranges] = {name: parse_ranges(table) for name, table in CLASS_RANGES.items()}
NAMED_CLASSES = tuple(name for name in CLASSES if name != "s")
NEWLINE: Ranges = ((0x0A, 0x0A),)
ANY_BUT_NEWLINE = complement(NEWLINE)
# Unicode simple case folding adds these to ASCII letters (tiktoken's Rust `regex` and Oniguruma both use it).
_EXTRA_FOLDS = {"k": 0x212A, "s": 0x017F}


# --- the tree ------------------------------------------------------------------------------------------------------


@dataclass
class Chars:
    """One character out of a set; `source` is how the pattern spells it."""

    ranges: Ranges
    source: str


@dataclass
class Anchor:
    """`start` or `end` of the text."""

    kind: str
    source: str
    at: int = -1  # where the pattern writes it (a character offset), for error messages


@dataclass
class Repeat:
    """`node` repeated `low` to `high` (None: no limit) times; mode "greedy", "lazy" or "possessive"."""

    node: Node
    low: int
    high: int | None
    mode: str
    source: str  # the quantifier as written
    at: int = -1  # where the quantifier starts in the pattern


@dataclass
class Group:
    """A group: kind ":" (plain or capturing), "i" (case-insensitive), ">" (atomic), "=", "!", "<=", "<!"."""

    kind: str
    body: Alternation
    source: str  # the opening, e.g. "(?:"
    at: int = -1  # where the opening starts in the pattern


@dataclass
class Alternation:
    branches: list[list[Node]] = field(default_factory=list)


Node = Chars | Anchor | Repeat | Group


# --- parsing -------------------------------------------------------------------------------------------------------


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.position = 0
        self.case_insensitive = 0

    def fail(self, message: str, at: int | None = None) -> InputError:
        where = self.position if at is None else at
        return InputError(f"pattern {self.text!r}: {message} (at character {where})")

    def peek(self, length: int = 1) -> str:
        return self.text[self.position:self.position + length]

    def parse(self) -> Alternation:
        tree = self.alternation()
        if self.position < len(self.text):
            raise self.fail("unbalanced ')'")
        return tree

    def alternation(self) -> Alternation:
        tree = Alternation([self.sequence()])
        while self.peek() == "|":
            self.position += 1
            tree.branches.append(self.sequence())
        return tree

    def sequence(self) -> list[Node]:
        items: list[Node] = []
        while self.position < len(self.text) and self.peek() not in "|)":
            start = self.position
            node = self.atom()
            quantified = self.quantifier(node, start)
            items.append(quantified)
        return items

    def quantifier(self, node: Node, start: int) -> Node:
        char = self.peek()
        if char not in ("?", "*", "+", "{"):
            return node
        if isinstance(node, Anchor) or (isinstance(node, Group) and node.kind in ("=", "!", "<=", "<!")):
            raise self.fail("a quantifier on a zero-width assertion")
        begin = self.position
        if char == "{":
            low, high = self.braces()
        else:
            self.position += 1
            low, high = {"?": (0, 1), "*": (0, None), "+": (1, None)}[char]
        mode = "greedy"
        if self.peek() in ("?", "+"):
            if char == "{" and self.peek() == "?":
                raise self.fail("a lazy {n,m}? quantifier (tokenizers' Oniguruma reads it otherwise)")
            mode = "lazy" if self.peek() == "?" else "possessive"
            self.position += 1
        if self.peek() in ("?", "*", "+", "{"):
            raise self.fail("a quantifier after a quantifier")
        return Repeat(node, low, high, mode, self.text[begin:self.position], begin)

    def braces(self) -> tuple[int, int | None]:
        end = self.text.find("}", self.position)
        body = self.text[self.position + 1:end] if end > 0 else ""
        low_text, comma, high_text = body.partition(",")
        if end < 0 or not low_text.isdigit() or not (high_text.isdigit() or not high_text):
            raise self.fail("a '{' that is not a quantifier {n}, {n,} or {n,m} (escape it as \\{)")
        low = int(low_text)
        high = int(high_text) if high_text else (None if comma else low)
        if high is not None and high < low or max(low, high or 0) > 1000:
            raise self.fail(f"the quantifier {{{body}}}")
        self.position = end + 1
        return low, high

    def atom(self) -> Node:
        start = self.position
        char = self.text[start]
        if char == "(":
            return self.group()
        if char == "[":
            return self.char_class()
        self.position += 1
        if char == ".":
            return Chars(ANY_BUT_NEWLINE, ".")
        if char in ("^", "$"):
            return Anchor("start" if char == "^" else "end", char, start)
        if char in ("*", "+", "?", "{"):
            raise self.fail(f"nothing to repeat before {char!r}", start)
        if char == "\\":
            escaped = self.escape(in_class=False)
            if isinstance(escaped, Anchor):
                return escaped
            ranges = escaped
        else:
            ranges = ((ord(char), ord(char)),)
        return self.folded(ranges, self.text[start:self.position])

    def folded(self, ranges: Ranges, source: str) -> Chars:
        """`ranges` with ASCII letters folded inside (?i:...), which holds only ASCII."""
        if not self.case_insensitive:
            return Chars(ranges, source)
        if ranges and ranges[-1][1] >= 0x80:
            raise self.fail(f"{source!r} inside (?i:...): hf_bpe folds the case of ASCII only there (the libraries "
                            f"fold other characters differently)")
        extra = []
        for first, last in ranges:
            for code_point in range(first, last + 1):
                char = chr(code_point)
                if char.isalpha():
                    extra += [(ord(folded), ord(folded)) for folded in (char.lower(), char.upper())]
                    if char.lower() in _EXTRA_FOLDS:
                        extra.append((_EXTRA_FOLDS[char.lower()],) * 2)
        return Chars(union(ranges, tuple(extra)), source)

    def group(self) -> Group:
        start = self.position
        kinds = {"(?:": ":", "(?i:": "i", "(?>": ">", "(?=": "=", "(?!": "!", "(?<=": "<=", "(?<!": "<!"}
        opening = next((opening for opening in sorted(kinds, key=len, reverse=True)
                        if self.text.startswith(opening, start)), None)
        if opening is None and self.peek(2) == "(?":
            raise self.fail(f"the group {self.text[start:start + 4]!r}... (supported: (?:, (?i:, (?>, (?=, (?!, "
                            f"(?<=, (?<!, and plain groups)")
        opening = opening or "("
        kind = kinds.get(opening, ":")
        self.position += len(opening)
        self.case_insensitive += kind == "i"
        body = self.alternation()
        self.case_insensitive -= kind == "i"
        if self.peek() != ")":
            raise self.fail("a group that is never closed", start)
        self.position += 1
        return Group(kind, body, opening, start)

    def char_class(self) -> Chars:
        start = self.position
        self.position += 1
        negated = self.peek() == "^"
        self.position += negated
        parts: list[Ranges] = []
        first = True
        while True:
            if self.position >= len(self.text):
                raise self.fail("a class that is never closed", start)
            char = self.text[self.position]
            if char == "]" and not first:
                self.position += 1
                break
            if char == "[" or self.peek(2) in ("&&", "--", "~~"):
                raise self.fail("nested classes and class set operations are not supported")
            low = self.class_item()
            if self.peek() == "-" and self.peek(2) != "-]" and len(low) == 1 and low[0][0] == low[0][1]:
                self.position += 1
                high = self.class_item()
                if len(high) != 1 or high[0][0] != high[0][1] or high[0][0] < low[0][0]:
                    raise self.fail("a bad range in a class")
                low = ((low[0][0], high[0][0]),)
            parts.append(low)
            first = False
        source = self.text[start:self.position]
        folded = self.folded(union(*parts), source).ranges
        return Chars(complement(folded) if negated else folded, source)

    def class_item(self) -> Ranges:
        char = self.text[self.position]
        self.position += 1
        if char != "\\":
            return ((ord(char), ord(char)),)
        escaped = self.escape(in_class=True)
        assert not isinstance(escaped, Anchor)
        return escaped

    def escape(self, in_class: bool) -> Ranges | Anchor:
        start = self.position - 1
        if self.position >= len(self.text):
            raise self.fail("a pattern that ends in a backslash")
        char = self.text[self.position]
        self.position += 1
        simple = {"r": "\r", "n": "\n", "t": "\t", "f": "\f", "v": "\v"}
        if char in simple:
            return ((ord(simple[char]),) * 2,)
        if char in ("p", "P"):
            return self.named_class(char == "P", start)
        if char in ("s", "S"):
            return CLASSES["s"] if char == "s" else complement(CLASSES["s"])
        if char in ("x", "u"):
            return ((self.hex_escape(char, start),) * 2,)
        if char in ("A", "z") and not in_class:
            return Anchor("start" if char == "A" else "end", "\\" + char, start)
        if not char.isascii() or char.isalnum() or char == "_":
            hint = {"d": "use \\p{N}, or [0-9] for ASCII digits", "w": "use [\\p{L}\\p{N}_] or a class of your own",
                    "Z": "use \\z"}.get(char.lower() if char in "dDwW" else char, "")
            raise self.fail(f"the escape \\{char} is not supported" + (f": {hint}" if hint else ""), start)
        return ((ord(char),) * 2,)

    def named_class(self, negated: bool, start: int) -> Ranges:
        if self.peek() == "{":
            end = self.text.find("}", self.position)
            if end < 0:
                raise self.fail("an unclosed \\p{", start)
            name = self.text[self.position + 1:end]
            self.position = end + 1
        else:
            name = self.peek()
            self.position += 1
        if name not in NAMED_CLASSES:
            known = ", ".join("\\p{" + known + "}" for known in NAMED_CLASSES)
            raise self.fail(f"the class \\p{{{name}}} is not supported (hf_bpe has the tables of {known} and \\s)",
                            start)
        return complement(CLASSES[name]) if negated else CLASSES[name]

    def hex_escape(self, char: str, start: int) -> int:
        if char == "x" and self.peek() == "{":
            end = self.text.find("}", self.position)
            digits = self.text[self.position + 1:end] if end > 0 else ""
            self.position = end + 1 if end > 0 else self.position
        else:
            length = 2 if char == "x" else 4
            digits = self.peek(length)
            self.position += length
            if len(digits) != length:
                digits = ""
        try:
            code_point = int(digits, 16) if digits.isascii() and digits.isalnum() else -1
        except ValueError:
            code_point = -1
        if not 0 <= code_point <= MAX_CODE_POINT or 0xD800 <= code_point <= 0xDFFF:
            raise self.fail(f"the escape {self.text[start:self.position]!r} is not a code point", start)
        return code_point


def parse_pattern(text: str) -> Alternation:
    """Parse a pattern (tiktoken's reading), refusing what hf_bpe cannot run exactly (see the module docstring).

    >>> parse_pattern(r"\\d+")
    Traceback (most recent call last):
    ...
    hf_bpe.common.errors.InputError: pattern '\\\\d+': the escape \\d is not supported: use \\p{N}, or [0-9] for \
ASCII digits (at character 0)
    >>> parse_pattern("a*")
    Traceback (most recent call last):
    ...
    hf_bpe.common.errors.InputError: pattern 'a*': it can match the empty string, which tiktoken and tokenizers \
handle differently
    """
    if not isinstance(text, str) or not text:
        raise InputError(f"a pattern must be a non-empty str, got {text!r}")
    tree = _Parser(text).parse()
    if _can_be_empty(tree):
        raise InputError(f"pattern {text!r}: it can match the empty string, which tiktoken and tokenizers handle "
                         f"differently")
    return tree


def _can_be_empty(node: Node | Alternation | list[Node]) -> bool:
    if isinstance(node, Alternation):
        return any(_can_be_empty(branch) for branch in node.branches)
    if isinstance(node, list):
        return all(map(_can_be_empty, node))
    if isinstance(node, Anchor):
        return True
    if isinstance(node, Repeat):
        return node.low == 0 or _can_be_empty(node.node)
    if isinstance(node, Group):
        return node.kind in ("=", "!", "<=", "<!") or _can_be_empty(node.body)
    return False


def walk(node: Node | Alternation | list[Node]):  # type: ignore[no-untyped-def]
    """Every node of a tree, depth first."""
    if isinstance(node, Alternation):
        for branch in node.branches:
            yield from walk(branch)
    elif isinstance(node, list):
        for item in node:
            yield from walk(item)
    else:
        yield node
        if isinstance(node, Repeat):
            yield from walk(node.node)
        elif isinstance(node, Group):
            yield from walk(node.body)


__all__ = ["Alternation", "Anchor", "CLASSES", "Chars", "Group", "MAX_CODE_POINT", "NAMED_CLASSES", "Ranges",
           "Repeat", "complement", "contains", "contains_each", "parse_pattern", "parse_ranges", "union", "walk"]
