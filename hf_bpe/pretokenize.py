"""GPT-2 pre-tokenization: the regex, special-token splitting and provably safe split points.

Three facts about the GPT-2 pattern make the fast paths here exact (tests/test_pretokenize.py checks them against
the plain regex on adversarial text):

1. A position holding U+0020 SPACE that is followed by a character the pattern does not count as whitespace is
   always a pre-token boundary, and the pre-tokens on either side do not depend on the text across it. So text can be
   cut there into pieces (each piece but the first starts with that space) and every piece pre-tokenized on its own.
   `split_at_safe_spaces` makes those pieces with one C-level `re.split`.
2. Special tokens split text into documents before any of this; a match is the leftmost occurrence, the longest
   special token winning when several start at the same place.
3. Coarser still, every boundary between a run of non-whitespace and a run of whitespace can be cut, except that the
   last whitespace character before non-whitespace goes with it: a U+0020 SPACE joins the run it precedes (fact 1),
   any other whitespace character stands alone, because the pattern makes it a pre-token of its own. So every
   pre-token lies inside one *piece*: an optional space and a run of non-whitespace, or whitespace only (one
   pre-token). `split_into_pieces` makes them with one C-level `re.findall`; counting pieces first and
   pre-tokenizing only the distinct ones is what makes corpus counting fast (see hf_bpe.count).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

import regex

GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
GPT2_REGEX = regex.compile(GPT2_PATTERN)

# The characters `regex` (and so the GPT-2 pattern) matches with \s: Unicode White_Space. The stdlib `re` module's \s
# differs (it also matches \x1c-\x1f), so the class is spelled out; a test checks it against `regex` for every code
# point.
WHITESPACE_CHARS = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)
# Matches (zero-width) before each safe space: a space followed by a non-whitespace character.
SAFE_SPACE_REGEX = re.compile("(?= [^" + re.escape(WHITESPACE_CHARS) + "])")
_WS = "[" + re.escape(WHITESPACE_CHARS) + "]"
_NON_WS = "[^" + re.escape(WHITESPACE_CHARS) + "]"
_PIECE = re.compile(f" ?{_NON_WS}+|{_WS}+(?!{_NON_WS})|{_WS}")

# The GPT-2 pattern for the stdlib `re` engine, exact on ASCII-only strings (about twice as fast as `regex`): on
# ASCII, \p{L} is [A-Za-z], \p{N} is [0-9] and \s is [\t\n\v\f\r ]. tests/test_pretokenize.py checks it.
GPT2_ASCII_REGEX = re.compile(
    r"""'(?:[sdmt]|ll|ve|re)| ?[A-Za-z]+| ?[0-9]+| ?[^\t\n\x0b\x0c\r A-Za-z0-9]+"""
    r"""|[\t\n\x0b\x0c\r ]+(?![^\t\n\x0b\x0c\r ])|[\t\n\x0b\x0c\r ]+"""
)


def pretokenize(text: str) -> list[str]:
    """Split text (with no special tokens in it) into GPT-2 pre-tokens with the plain regex.

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


class SpecialTokenSplitter:
    """Finds and splits at special tokens: the leftmost occurrence, the longest token first where several start.

    Compiled once. The tokens are tried longest first in one alternation, so the leftmost match is also the longest
    token at that place (fact 2 in the module docstring); a single token takes the `str.split` fast path.

    >>> splitter = SpecialTokenSplitter(["<|e|>", "<|e|><|e|>"])
    >>> splitter.tokens, splitter.longest
    (('<|e|><|e|>', '<|e|>'), 10)
    >>> splitter.split_keeping("a<|e|><|e|><|e|>b")
    ['a', '<|e|><|e|>', '', '<|e|>', 'b']
    >>> splitter.split("a<|e|><|e|><|e|>b")
    ['a', '', 'b']
    >>> [(match.start(), match.group()) for match in splitter.finditer("x<|e|>y", 1)]
    [(1, '<|e|>')]
    >>> bool(SpecialTokenSplitter([])), SpecialTokenSplitter([]).split("a b")
    (False, ['a b'])
    """

    def __init__(self, special_tokens: Sequence[str]) -> None:
        if any(token == "" for token in special_tokens):
            raise ValueError("special tokens must not be empty strings")
        self.tokens: tuple[str, ...] = tuple(sorted(set(special_tokens), key=lambda token: (-len(token), token)))
        self.longest: int = len(self.tokens[0]) if self.tokens else 0
        alternation = "|".join(map(re.escape, self.tokens))
        # An empty alternation would match everywhere; with no tokens the pattern is never used.
        self._pattern = re.compile(alternation) if self.tokens else None
        self._keeping_pattern = re.compile(f"({alternation})") if self.tokens else None
        self._single = self.tokens[0] if len(self.tokens) == 1 else None

    def __bool__(self) -> bool:
        return bool(self.tokens)

    def __reduce__(self) -> tuple[type[SpecialTokenSplitter], tuple[tuple[str, ...]]]:
        return SpecialTokenSplitter, (self.tokens,)

    def __repr__(self) -> str:
        return f"SpecialTokenSplitter({list(self.tokens)!r})"

    def split(self, text: str) -> list[str]:
        """Split text into documents at the special tokens, dropping them.

        >>> SpecialTokenSplitter(["<|endoftext|>"]).split("a<|endoftext|>b")
        ['a', 'b']
        """
        if self._single is not None:
            return text.split(self._single)
        if self._pattern is None:
            return [text]
        return self._pattern.split(text)

    def split_keeping(self, text: str) -> list[str]:
        """Split text at the special tokens, keeping them: odd indices hold the special tokens.

        >>> SpecialTokenSplitter(["<|endoftext|>"]).split_keeping("a<|endoftext|>b")
        ['a', '<|endoftext|>', 'b']
        """
        if self._single is not None:
            documents = text.split(self._single)
            parts = [self._single] * (2 * len(documents) - 1)
            parts[::2] = documents
            return parts
        if self._keeping_pattern is None:
            return [text]
        return self._keeping_pattern.split(text)

    def finditer(self, text: str, pos: int = 0) -> Iterator[re.Match[str]]:
        """The special-token occurrences in text from `pos` on, left to right (longest first where several start)."""
        if self._pattern is None:
            return iter(())
        return self._pattern.finditer(text, pos)


def special_tokens_regex(special_tokens: Sequence[str] | None) -> regex.Pattern[str] | None:
    """A regex matching any special token, longest first so that overlapping tokens resolve to the longest one.

    Returns None when there are no special tokens.
    """
    if not special_tokens:
        return None
    ordered = sorted(set(special_tokens), key=lambda token: (-len(token), token))
    return regex.compile("|".join(regex.escape(token) for token in ordered))


def split_on_special_tokens(text: str, special_regex: regex.Pattern[str] | None) -> list[str]:
    """Split text into documents at special-token occurrences, dropping the special tokens.

    >>> split_on_special_tokens("a<|endoftext|>b", special_tokens_regex(["<|endoftext|>"]))
    ['a', 'b']
    """
    if special_regex is None:
        return [text]
    return special_regex.split(text)


def split_keeping_special_tokens(text: str, special_regex: regex.Pattern[str] | None) -> list[str]:
    """Split text at special-token occurrences, keeping them: odd indices hold the special tokens.

    >>> split_keeping_special_tokens("a<|endoftext|>b", special_tokens_regex(["<|endoftext|>"]))
    ['a', '<|endoftext|>', 'b']
    """
    if special_regex is None:
        return [text]
    return regex.split(f"({special_regex.pattern})", text)


def validate_special_tokens(special_tokens: Iterable[str] | None) -> list[str]:
    """Return the special tokens as a list, raising ValueError for empty, duplicate or non-str tokens."""
    tokens = list(special_tokens or [])
    seen: set[str] = set()
    for token in tokens:
        if not isinstance(token, str):
            raise TypeError(f"special tokens must be str, got {type(token).__name__}: {token!r}")
        if token == "":
            raise ValueError("special tokens must not be empty strings")
        if token in seen:
            raise ValueError(f"duplicate special token {token!r}")
        seen.add(token)
    return tokens
