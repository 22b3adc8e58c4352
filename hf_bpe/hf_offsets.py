"""Character offsets of byte-level tokens, as the fast (`tokenizers`) tokenizer reports them.

A byte-level BPE tokenization is lossless: the tokens' bytes, concatenated, are the text's UTF-8 bytes. So the byte
span of each token follows from the token lengths alone. `tokenizers` aligns each byte with the character it comes
from, so a token's character span runs from the character of its first byte to the character of its last byte,
inclusive: a token holding part of a character covers the whole character, and two tokens splitting one character
both report it.

>>> token_offsets("é!", [1, 2])   # "é" is two bytes: one token holds its first byte, the next its second and "!"
[(0, 1), (0, 2)]
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate


def char_of_byte(text: str) -> list[int]:
    """For each byte of `text` in UTF-8, the index of the character it belongs to.

    >>> char_of_byte("aé€")
    [0, 1, 1, 2, 2, 2]
    """
    if text.isascii():
        return list(range(len(text)))
    result: list[int] = []
    for index, char in enumerate(text):
        code = ord(char)
        width = 1 if code < 0x80 else 2 if code < 0x800 else 3 if code < 0x10000 else 4
        result += [index] * width
    return result


def token_offsets(text: str, token_lengths: Sequence[int]) -> list[tuple[int, int]]:
    """The (start, end) character span of each token, given the byte length of each token in text order.

    Raises ValueError if the lengths do not add up to the text's UTF-8 length (the tokens are not the text).

    >>> token_offsets("hi there", [2, 6])
    [(0, 2), (2, 8)]
    """
    chars = char_of_byte(text)
    if sum(token_lengths) != len(chars):
        raise ValueError(f"token lengths add up to {sum(token_lengths)} bytes, the text has {len(chars)}")
    offsets = []
    for start, end in zip(accumulate(token_lengths, initial=0), accumulate(token_lengths)):
        if start == end:  # an empty token (never made by byte-level BPE) covers nothing
            position = chars[start] if start < len(chars) else len(text)
            offsets.append((position, position))
        else:
            offsets.append((chars[start], chars[end - 1] + 1))
    return offsets


__all__ = ["char_of_byte", "token_offsets"]
