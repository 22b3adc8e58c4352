r"""Spelling a parsed pattern for `tokenizers`, so that its Oniguruma (Ruby syntax) splits text as tiktoken does.

Oniguruma reads three constructs otherwise than tiktoken's Rust `regex`: `X{n,m}+` is `(?:X{n,m})+` there, not a
possessive quantifier; `$` and `^` are line anchors; and `(?i:...)` also folds one character to several letters
(U+00DF matches "ss"). The spelling writes these as `(?>X{n,m})`, `\z`, `\A` and explicit classes, which mean the
same to both libraries, and leaves everything else as the pattern wrote it.

>>> from hf_bpe.pretokenize.regex_syntax import parse_pattern
>>> spell_for_tokenizers(parse_pattern(r"'(?i:s)|\p{N}{1,3}+|\s+$"))
"'(?i:s)|(?>\\p{N}{1,3})|\\s+\\z"
"""

from __future__ import annotations

from hf_bpe.pretokenize.regex_syntax import Alternation, Anchor, Chars, Node, Ranges, Repeat

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


__all__ = ["spell_for_tokenizers"]
