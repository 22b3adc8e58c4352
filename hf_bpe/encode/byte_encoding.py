"""Bytes that may not be UTF-8 in, text with each token's character offset out: tiktoken's `Encoding._encode_bytes`
and `Encoding.decode_with_offsets`, for `Tokenizer.encode_bytes` and `Tokenizer.decode_with_offsets`.

**Encoding bytes** (tiktoken's `CoreBPE::_encode_bytes`, src/py.rs). Bytes that are UTF-8 are encoded as their text,
with every special token as ordinary text (tiktoken's `encode_ordinary`). Other bytes cannot be pre-tokenized, since
the pattern runs on characters, so the encoder guesses where the cuts would be: it encodes the valid prefix (up to
the first byte that is not UTF-8) as text, takes back the tokens of its last pre-token, and of the whitespace tokens
(bytes of space, tab and line feed only) right before it, since a run of whitespace may have been cut where the
rest would have joined it; those tokens' bytes and all the bytes after the prefix are then one pre-token (looked up
whole, else merged, as the tokenizer merges a pre-token). Decoding the ids gives back the bytes.

>>> from hf_bpe.encode.tokenizer import Tokenizer
>>> tokenizer = Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"a\\xff", 257: b" a"}, [(b"a", b"\\xff"),
...                       (b" ", b"a")])
>>> encode_bytes(tokenizer, b"a a\\xff\\xfe")  # " a" is taken back: " " + "a\\xff" + "\\xfe"
[97, 32, 256, 254]

**Offsets** (tiktoken's `decode_with_offsets`): each token's offset is the index, in the decoded text, of the first
character that holds bytes of it; a token that starts inside a character (its first byte a continuation byte) gets
that character's index. The bytes must be UTF-8, as tiktoken requires: UnicodeDecodeError otherwise.

>>> decode_with_offsets(tokenizer, [32, 256])
Traceback (most recent call last):
...
UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in position 2: invalid start byte
>>> decode_with_offsets(tokenizer, [257, 0xC3, 0xA9, 33])  # " a", then "é" in two tokens, then "!"
(' aé!', [0, 2, 2, 3])
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

import numpy as np

from hf_bpe.encode.cache import unpack_ids
from hf_bpe.encode.decoding import char_of_byte
from hf_bpe.pretokenize import SpecialChoice, compile_pattern

# The bytes of a token that tiktoken takes back with the last pre-token (`_increase_last_piece_token_len`).
_WHITESPACE = frozenset(b" \n\t")


class TokenizerLike(Protocol):
    """What these functions use of a `hf_bpe.encode.tokenizer.Tokenizer`, which calls them (and is not imported)."""

    @property
    def pattern(self) -> str: ...

    def encode(self, text: str, *, allowed_special: SpecialChoice = "all",
               disallowed_special: SpecialChoice = "all") -> list[int]: ...

    def id_to_token(self, id: int) -> bytes: ...

    def merge_pretoken_bytes(self, words: Sequence[bytes]) -> list[bytes]: ...


def encode_bytes(tokenizer: TokenizerLike, data: bytes) -> list[int]:
    """The ids of `data` as tiktoken's `Encoding._encode_bytes` gives them (see the module docstring)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"encode_bytes expects bytes, got {type(data).__name__}")
    data = bytes(data)
    try:
        return _encode_ordinary(tokenizer, data.decode("utf-8"))
    except UnicodeDecodeError as error:
        valid = error.start  # the end of the longest valid prefix, as Rust's `Utf8Error::valid_up_to`
    text = data[:valid].decode("utf-8")
    ids = _encode_ordinary(tokenizer, text)
    start = len(ids) - _last_pretoken_length(tokenizer, text)
    if start < len(ids) and _is_whitespace(tokenizer, ids[start]):
        while start > 0 and _is_whitespace(tokenizer, ids[start - 1]):
            start -= 1
    rest = b"".join(map(tokenizer.id_to_token, ids[start:])) + data[valid:]
    return ids[:start] + unpack_ids(tokenizer.merge_pretoken_bytes([rest])[0])


def decode_with_offsets(tokenizer: TokenizerLike, ids: Iterable[int]) -> tuple[str, list[int]]:
    """The text of `ids` and each token's character offset in it, as tiktoken's `decode_with_offsets` gives them;
    UnicodeDecodeError when the tokens' bytes are not UTF-8, ValueError for an unknown id."""
    tokens = list(map(tokenizer.id_to_token, ids))
    text = b"".join(tokens).decode("utf-8")
    starts = np.cumsum([0] + list(map(len, tokens[:-1])), dtype=np.int64) if tokens else np.zeros(0, np.int64)
    # The character of each token's first byte: its own, or the one a continuation byte belongs to.
    return text, char_of_byte(text)[starts].tolist()


def _encode_ordinary(tokenizer: TokenizerLike, text: str) -> list[int]:
    """tiktoken's `encode_ordinary`: special tokens encoded as the text they are."""
    return tokenizer.encode(text, allowed_special=set(), disallowed_special=())


def _last_pretoken_length(tokenizer: TokenizerLike, text: str) -> int:
    """How many of the ids of `text` its last pre-token has (0 for empty text): a pre-token's ids do not depend on
    its neighbours, so they are those of the pre-token alone."""
    pattern = compile_pattern(tokenizer.pattern)
    piece = next((piece for piece in reversed(pattern.pieces(text)) if piece), "")  # pieces pre-tokenize alone
    if not piece:
        return 0
    last = pattern.pretokens_of_piece(piece)[-1]
    return len(unpack_ids(tokenizer.merge_pretoken_bytes([last.encode("utf-8")])[0]))


def _is_whitespace(tokenizer: TokenizerLike, token_id: int) -> bool:
    return _WHITESPACE.issuperset(tokenizer.id_to_token(token_id))


__all__ = ["decode_with_offsets", "encode_bytes"]
