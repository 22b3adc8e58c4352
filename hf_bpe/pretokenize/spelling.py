r"""Spelling a parsed pattern for `tokenizers`, so that its Oniguruma (Ruby syntax) splits text as tiktoken does.

Oniguruma reads three constructs otherwise than tiktoken's Rust `regex`: `X{n,m}+` is `(?:X{n,m})+` there, not a
possessive quantifier; `$` and `^` are line anchors (`$` also matches before a line feed, `^` after one); and
`(?i:...)` also folds one character to several letters (U+00DF matches "ss"). The spelling writes these as
`(?>X{n,m})`, `\z`, `\A` and explicit classes, which mean the same to both libraries, and leaves everything else as
the pattern wrote it.

A regex that another tool wrote into a tokenizer.json is read as it is when the two libraries read it alike, which
`oniguruma_differences` decides construct by construct: an anchor is a difference only where a line feed can be next
to it. After a possessive `\s++`, which takes every whitespace character, the next character is not a line feed,
so `\s++$` (tiktoken's r50k and cl100k patterns, as transformers' converter writes them) means the same to both.

>>> from hf_bpe.pretokenize.regex_syntax import parse_pattern
>>> spell_for_tokenizers(parse_pattern(r"'(?i:s)|\p{N}{1,3}+|\s+$"))
"'(?i:s)|(?>\\p{N}{1,3})|\\s+\\z"
>>> oniguruma_differences(parse_pattern(r"\s++$|\s+$|\S+"))
['`$` at character 9 (Oniguruma also matches it before a line feed, tiktoken only at the end of the text)']
"""

from __future__ import annotations

from hf_bpe.pretokenize.regex_syntax import Alternation, Anchor, Chars, Group, Node, Ranges, Repeat, contains

# Oniguruma also folds one character to several (U+00DF to "ss", U+FB01 to "fi", ...), Rust `regex` does not: a
# case-insensitive group where two letters in a row could spell one of these is spelled out for `tokenizers`.
_MULTI_CHARACTER_FOLDS = ("ss", "st", "ff", "fi", "fl")


def spell_for_tokenizers(tree: Alternation) -> str:
    """The pattern spelled so that `tokenizers` (Oniguruma, Ruby syntax) splits as tiktoken does with the original.

    Oniguruma reads `X{n,m}+` as `(?:X{n,m})+`, `$` and `^` as line anchors, and folds some characters to several
    letters in `(?i:...)`; these become `(?>X{n,m})`, `\\z`, `\\A` and spelled-out classes. The result means the same
    to tiktoken, so it is also what a saved `tokenizer.json` holds and what reading one gives back.
    """
    return _spell(tree, folding=False)


def _spell(node: Node | Alternation, folding: bool) -> str:
    if isinstance(node, Alternation):
        return "|".join("".join(_spell(item, folding) for item in branch) for branch in node.branches)
    if isinstance(node, Chars):
        return _spell_class(node.ranges) if folding else node.source
    if isinstance(node, Anchor):
        return "\\A" if node.kind == "start" else "\\z"
    if isinstance(node, Repeat):
        inner = _spell(node.node, folding)
        if node.mode == "possessive" and node.source.startswith("{"):
            return f"(?>{inner}{node.source[:-1]})"
        return inner + node.source
    if node.kind == "i" and (folding or _folds_to_several(node.body)):
        return "(?:" + _spell(node.body, folding=True) + ")"
    return node.source + _spell(node.body, folding) + ")"


def oniguruma_differences(tree: Alternation) -> list[str]:
    """Each construct of the pattern that `tokenizers` (Oniguruma) reads otherwise than tiktoken, described with its
    offset in the pattern; empty when the pattern means the same to both as it is written.

    >>> from hf_bpe.pretokenize.regex_syntax import parse_pattern
    >>> oniguruma_differences(parse_pattern(r"^\\s|\\p{N}{1,3}+|(?i:st)|[^\\n]^a|\\s++$|\\S"))
    ['`^` at character 0 (Oniguruma also matches it after a line feed, tiktoken only at the start of the text)', \
'`{1,3}+` at character 9 (a possessive quantifier to tiktoken, a repeated group to Oniguruma)', \
'`(?i:` at character 16 (Oniguruma also folds one character to two letters there, as U+00DF to "ss")']
    """
    found: list[str] = []
    _find_differences(tree, found)
    return found


_LINE_FEED = 0x0A


def _find_differences(tree: Alternation, found: list[str]) -> None:
    for branch in tree.branches:
        for index, node in enumerate(branch):
            before = branch[index - 1] if index else None
            after = branch[index + 1] if index + 1 < len(branch) else None
            if isinstance(node, Anchor) and node.source == "$" and not (
                    _stops_before_no_line_feed(before) or _takes_other_than_line_feed(after, first=True)):
                found.append(f"`$` at character {node.at} (Oniguruma also matches it before a line feed, tiktoken "
                             f"only at the end of the text)")
            elif isinstance(node, Anchor) and node.source == "^" and not _takes_other_than_line_feed(before,
                                                                                                     first=False):
                found.append(f"`^` at character {node.at} (Oniguruma also matches it after a line feed, tiktoken "
                             f"only at the start of the text)")
            elif isinstance(node, Repeat):
                if node.mode == "possessive" and node.source.startswith("{"):
                    found.append(f"`{node.source}` at character {node.at} (a possessive quantifier to tiktoken, a "
                                 f"repeated group to Oniguruma)")
                if isinstance(node.node, Group):
                    _group_differences(node.node, found)
            elif isinstance(node, Group):
                _group_differences(node, found)


def _group_differences(group: Group, found: list[str]) -> None:
    if group.kind == "i" and _folds_to_several(group.body):
        found.append(f"`{group.source}` at character {group.at} (Oniguruma also folds one character to two letters "
                     f"there, as U+00DF to \"ss\")")
    _find_differences(group.body, found)


def _stops_before_no_line_feed(node: Node | None) -> bool:
    """Whether the character after a match of `node` can never be a line feed: `node` is a possessive run of a class
    that holds the line feed (it would have taken one), or a group whose every branch ends in one."""
    if isinstance(node, Repeat):
        return node.mode == "possessive" and node.high is None and isinstance(node.node, Chars) \
            and contains(node.node.ranges, _LINE_FEED)
    if isinstance(node, Group) and node.kind in (":", ">", "i"):
        return all(branch and _stops_before_no_line_feed(branch[-1]) for branch in node.body.branches)
    return False


def _takes_other_than_line_feed(node: Node | None, first: bool) -> bool:
    """Whether every match of `node` takes at least one character and its first (or last) is not a line feed: then
    an anchor just before (or after) it never sees a line feed next to it in either library."""
    if isinstance(node, Chars):
        return not contains(node.ranges, _LINE_FEED)
    if isinstance(node, Repeat):
        return node.low >= 1 and _takes_other_than_line_feed(node.node, first)
    if isinstance(node, Group) and node.kind in (":", ">", "i"):
        return all(branch and _takes_other_than_line_feed(branch[0 if first else -1], first)
                   for branch in node.body.branches)
    return False


def _folds_to_several(body: Alternation) -> bool:
    """Whether a case-insensitive group could match a string that Oniguruma folds from one character."""
    for branch in body.branches:
        if any(not isinstance(item, Chars) for item in branch):
            return True
        letters = ["".join(sorted({chr(c).lower() for first, last in item.ranges  # type: ignore[union-attr]
                                   for c in range(first, last + 1) if c < 0x80})) for item in branch]
        for left, right in zip(letters, letters[1:]):
            if any(a + b in _MULTI_CHARACTER_FOLDS for a in left for b in right):
                return True
    return False


def _spell_class(ranges: Ranges) -> str:
    """A class of exactly these code points, as both libraries read it.

    >>> _spell_class(((ord("S"), ord("S")), (ord("s"), ord("s")), (0x17F, 0x17F)))
    '[Ss\\\\x{17f}]'
    """
    def char(code_point: int) -> str:
        if chr(code_point).isascii() and chr(code_point).isalnum():
            return chr(code_point)
        return f"\\x{{{code_point:x}}}"

    body = "".join(char(first) if first == last else f"{char(first)}-{char(last)}" for first, last in ranges)
    return f"[{body}]"


__all__ = ["oniguruma_differences", "spell_for_tokenizers"]
