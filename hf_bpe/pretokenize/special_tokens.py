"""Special tokens: checking them, and splitting text at them before pre-tokenization.

A special token splits documents and is never merged. Where several tokens start at the same place, the longest wins
(as in tiktoken and `tokenizers`), which one alternation of the tokens, longest first, gives.

Also here: `replace_surrogates`, which turns strings that have no UTF-8 form into the text tiktoken encodes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence


class SpecialTokenSplitter:
    """Finds and splits at special tokens: the leftmost occurrence, the longest token first where several start.

    Compiled once. The tokens are tried longest first in one alternation, so the leftmost match is also the longest
    token at that place (see the module docstring); a single token takes the `str.split` fast path.

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


_SURROGATE = re.compile("[\ud800-\udfff]")


def replace_surrogates(text: str) -> str:
    """`text`, with surrogate pairs joined and lone surrogates replaced by U+FFFD, exactly as tiktoken does.

    Such strings come from JSON ("\\ud83d\\ude00") or `surrogateescape` decoding, and have no UTF-8 encoding. Counting
    and encoding both call this, so training and encoding see the same text. Costs one `str.isascii()` on ASCII text.

    >>> replace_surrogates("a\\ud83d\\ude00 b\\udc80")
    'a😀 b\\ufffd'
    """
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
