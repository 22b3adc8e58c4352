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

import numpy as np

from hf_bpe.encode.decoding import char_of_byte


def token_offsets(text: str, token_lengths: Sequence[int] | np.ndarray, base: int = 0) -> list[tuple[int, int]]:
    """The (start, end) character span of each token, given the byte length (at least 1) of each token in text
    order; `base` is added to every position (the text's place in a longer one).

    Raises ValueError if the lengths do not add up to the text's UTF-8 length (the tokens are not the text).

    >>> token_offsets("hi there", [2, 6])
    [(0, 2), (2, 8)]
    >>> token_offsets("é!", [1, 2], base=10)
    [(10, 11), (10, 12)]
    """
    chars = char_of_byte(text)
    ends = np.cumsum(np.asarray(token_lengths, dtype=np.int64))
    total = int(ends[-1]) if len(ends) else 0
    if total != len(chars):
        raise ValueError(f"token lengths add up to {total} bytes, the text has {len(chars)}")
    if not len(ends):
        return []
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1]
    return list(zip((chars[starts] + base).tolist(), (chars[ends - 1] + 1 + base).tolist()))


__all__ = ["char_of_byte", "token_offsets"]
