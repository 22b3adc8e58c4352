"""Joining the bytes of many token ids in bounded memory, for `Tokenizer.decode`.

`bytes.join` holds a buffer view of every piece it joins (about 90 bytes per piece, on top of the list it makes of
an iterator), so one join over 75 million ids needs gigabytes before the text exists. `join_tokens` joins
`DECODE_CHUNK` ids at a time into one growing buffer instead: besides the ids, it holds the text's UTF-8 bytes once
(plus up to an eighth as the buffer grows) and one chunk's join.

`char_of_byte` maps each byte of a decoded text to its character, for token offsets (`Tokenizer.decode_with_offsets`,
`hf_bpe.hf.offsets`).

>>> join_tokens(iter([104, 105]), {104: b"h", 105: b"i"}.__getitem__, None)
bytearray(b'hi')
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice

import numpy as np

#: Ids joined at a time.
DECODE_CHUNK = 1 << 12


def join_tokens(ids: Iterable[int], token_bytes: Callable[[int], bytes],
                check_id: Callable[[int], object] | None) -> bytearray:
    """The bytes of the tokens `ids` (a list, a numpy array, any iterable), `token_bytes(id)` each, one after the
    other. When `token_bytes` fails (KeyError, TypeError), `check_id` is called on each id of that chunk, to raise a
    better error for the bad one, before the original error is raised."""
    text = bytearray()
    for chunk in chunks_of(ids, DECODE_CHUNK):
        try:
            text += b"".join(map(token_bytes, chunk))
        except (KeyError, TypeError):
            if check_id is not None:
                for token_id in chunk:
                    check_id(token_id)
            raise
    return text


def chunks_of(ids: Iterable[int], size: int) -> Iterator[Sequence[int]]:
    """`ids` in consecutive chunks of at most `size` (a numpy array's as Python ints, read one chunk at a time).

    >>> [list(chunk) for chunk in chunks_of(np.arange(5), 2)]
    [[0, 1], [2, 3], [4]]
    """
    if isinstance(ids, np.ndarray):
        for start in range(0, len(ids), size):
            yield ids[start:start + size].tolist()
    elif isinstance(ids, (list, tuple)):
        for start in range(0, len(ids), size):
            yield ids[start:start + size]
    else:
        iterator = iter(ids)
        while chunk := list(islice(iterator, size)):
            yield chunk


def char_of_byte(text: str) -> np.ndarray:
    """For each byte of `text` in UTF-8, the index of the character it belongs to.

    A byte starts a character unless it is a continuation byte (0b10xxxxxx); lone surrogates count as the three
    bytes `surrogatepass` gives them (the encoder replaces each by U+FFFD, also three bytes).

    >>> char_of_byte("aé€").tolist()
    [0, 1, 1, 2, 2, 2]
    """
    data = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    return np.cumsum((data & 0xC0) != 0x80) - 1


__all__ = ["DECODE_CHUNK", "char_of_byte", "chunks_of", "join_tokens"]
