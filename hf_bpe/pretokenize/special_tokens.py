"""Special tokens: checking them, and splitting text at them before pre-tokenization.

A special token splits documents and is never merged. Where several tokens start at the same place, the longest wins
(as in tiktoken and `tokenizers`), which one alternation of the tokens, longest first, gives.

Which special tokens a call recognizes follows tiktoken's `Encoding.encode`: `allowed_special` are encoded as their
ids, text holding one of `disallowed_special` is refused, and any other special token's text is ordinary text
(`allowed_and_disallowed`, `check_disallowed`). hf_bpe's default allows them all.

Also here: `replace_surrogates`, which turns strings that have no UTF-8 form into the text tiktoken encodes.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence, Set
from functools import lru_cache
from typing import Literal

from hf_bpe.common.errors import InputError

#: What `allowed_special` and `disallowed_special` take, as in tiktoken: "all" or a collection of token strings.
SpecialChoice = Literal["all"] | Set[str] | Collection[str]


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


def place_special_tokens(vocab: dict[int, bytes], token_ids: dict[bytes, int], special_tokens: Sequence[str],
                         given_ids: Mapping[str, int] | None = None) -> dict[str, int]:
    """Each special token's id, adding it to `vocab` (id -> bytes) and `token_ids` (bytes -> id) where needed.

    Without `given_ids`, a special token already in the vocab keeps its id and the others take the ids after the
    largest, in order. With `given_ids` (tiktoken's `special_tokens={token: id}`), each token is at its id, and
    several may share one, as `<|endofprompt|>` and `<|reserved_200018|>` share 200018 in tiktoken's o200k_harmony:
    the id decodes as the token the vocab holds there, else as the first of them (tiktoken decodes o200k_harmony's
    200018 as `<|endofprompt|>`, its first); each of them encodes to it. Raises ValueError for an id that is the id
    of an ordinary token, a token that is an ordinary token with another id, or an id that is no integer.

    >>> vocab = {0: b"a"}
    >>> place_special_tokens(vocab, {b"a": 0}, ["<e>", "<p>", "<q>"], {"<e>": 1, "<p>": 2, "<q>": 2})
    {'<e>': 1, '<p>': 2, '<q>': 2}
    >>> vocab
    {0: b'a', 1: b'<e>', 2: b'<p>'}
    """
    ids: dict[str, int] = {}
    if given_ids is None:
        next_id = max(vocab, default=-1) + 1
        for special in special_tokens:
            encoded = special.encode("utf-8")
            if encoded not in token_ids:
                vocab[next_id] = encoded
                token_ids[encoded] = next_id
                next_id += 1
            ids[special] = token_ids[encoded]
        return ids
    sharing: dict[int, list[bytes]] = {}
    for special in special_tokens:
        token_id = given_ids[special]
        if not isinstance(token_id, int) or isinstance(token_id, bool) or token_id < 0:
            raise ValueError(f"special token {special!r}: its id {token_id!r} is not a non-negative integer")
        sharing.setdefault(token_id, []).append(special.encode("utf-8"))
    for special in special_tokens:
        encoded, token_id = special.encode("utf-8"), given_ids[special]
        if token_ids.get(encoded, token_id) != token_id:
            raise ValueError(f"special token {special!r} is the token of id {token_ids[encoded]}, not of {token_id}")
        held = vocab.setdefault(token_id, sharing[token_id][0])
        if held not in sharing[token_id]:
            raise ValueError(f"special token {special!r}: its id {token_id} is the id of the token {held!r}")
        token_ids[encoded] = token_id
        ids[special] = token_id
    return ids


def allowed_and_disallowed(special_tokens: Iterable[str], allowed_special: SpecialChoice,
                           disallowed_special: SpecialChoice) -> tuple[frozenset[str], frozenset[str]]:
    """(the special tokens encoded as their ids, the strings refused in the text), as tiktoken's `Encoding.encode`
    reads its arguments: `allowed_special="all"` allows every special token, `disallowed_special="all"` refuses every
    special token that is not allowed; a special token in neither is encoded as ordinary text. Strings in
    `allowed_special` that are no special token are ignored (they have no id); `disallowed_special` strings are
    refused wherever they occur, special tokens or not.

    >>> specials = ["<|a|>", "<|b|>"]
    >>> allowed_and_disallowed(specials, {"<|a|>", "<|z|>"}, "all")
    (frozenset({'<|a|>'}), frozenset({'<|b|>'}))
    >>> [sorted(tokens) for tokens in allowed_and_disallowed(specials, "all", "all")]
    [['<|a|>', '<|b|>'], []]
    >>> allowed_and_disallowed(specials, set(), ())
    (frozenset(), frozenset())
    """
    specials = frozenset(special_tokens)
    allowed = specials if _is_all(allowed_special, "allowed_special") else _strings(allowed_special, "allowed_special")
    disallowed = (specials - allowed if _is_all(disallowed_special, "disallowed_special")
                  else _strings(disallowed_special, "disallowed_special"))
    return allowed & specials, disallowed


def _is_all(choice: SpecialChoice, name: str) -> bool:
    if isinstance(choice, str):
        if choice != "all":
            raise ValueError(f'{name} must be "all" or a collection of special token strings, got {choice!r}')
        return True
    return False


def _strings(choice: Collection[str], name: str) -> frozenset[str]:
    tokens = frozenset(choice)
    for token in tokens:
        if not isinstance(token, str) or not token:
            raise ValueError(f"{name} must hold non-empty strings, got {token!r}")
    return tokens


@lru_cache(maxsize=64)
def splitter_of(tokens: frozenset[str]) -> SpecialTokenSplitter:
    """The (compiled, cached) splitter of a set of special tokens."""
    return SpecialTokenSplitter(sorted(tokens))


def check_disallowed(texts: Sequence[str], disallowed: frozenset[str], first_offset: int = 0) -> None:
    """Raise InputError, one line naming the token and its offset, for the first text holding a disallowed string
    (the leftmost occurrence; the longest where several start there). `first_offset` is added to the offset (a
    stream's window).

    >>> check_disallowed(["ok", "a <|b|>"], frozenset({"<|b|>"}))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    hf_bpe.common.errors.InputError: text 1 holds the disallowed special token '<|b|>' at offset 2: pass it in ...
    """
    if not disallowed:
        return
    splitter = splitter_of(disallowed)
    for index, text in enumerate(texts):
        match = next(splitter.finditer(text), None)
        if match is not None:
            where = f"text {index} holds" if len(texts) > 1 else "the text holds"
            raise InputError(f"{where} the disallowed special token {match.group()!r} at offset "
                             f"{first_offset + match.start()}: pass it in allowed_special to encode it as its id, or "
                             f"leave it out of disallowed_special (disallowed_special=() for none) to encode it as "
                             f"text")


def check_stream(windows: Iterable[str], disallowed: frozenset[str]) -> Iterator[str]:
    """The windows of a stream of text, each checked (`check_disallowed`, offsets in the whole stream) before it is
    passed on; a disallowed string across two windows is found too.
    """
    longest = max(map(len, disallowed), default=0)
    carried = ""  # the end of the text checked so far, too short to hold a whole disallowed string
    offset = 0
    for window in windows:
        check_disallowed([carried + window], disallowed, offset - len(carried))
        offset += len(window)
        carried = (carried + window)[-longest + 1:] if longest > 1 else ""
        yield window


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
