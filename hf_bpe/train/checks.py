"""What every way of training shares: the checks of the vocab size and of HF BpeTrainer's options, and the
`verbose=True` summary line (plain training: `hf_bpe.train.api`; continuing from a base: `hf_bpe.train.starts.extend`;
SuperBPE's two stages: `hf_bpe.train.starts.superword`).
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Mapping, Sequence

import numpy as np

from hf_bpe.common.errors import InputError
from hf_bpe.common.parallel import peak_memory_bytes
from hf_bpe.formats.gpt2 import str_to_token, unicode_to_bytes
from hf_bpe.pretokenize import validate_special_tokens


def report_training(distinct: int, counting_seconds: float, num_merges: int, merging_seconds: float) -> None:
    """The `verbose=True` summary line, on stderr."""
    print(f"hf_bpe: {distinct:,} distinct pre-tokens counted in {counting_seconds:.2f} s, "
          f"{num_merges:,} merges in {merging_seconds:.2f} s, "
          f"peak memory {peak_memory_bytes() / (1 << 20):,.0f} MB", file=sys.stderr)


def check_trainer_options(min_frequency: int, max_token_length: int | None) -> None:
    """Refuse a `min_frequency` that is not an int >= 0 and a `max_token_length` that is not None or an int >= 1.

    >>> check_trainer_options(2, 0)
    Traceback (most recent call last):
    ...
    ValueError: max_token_length must be None or an int >= 1, got 0
    """
    for name, value, least in (("min_frequency", min_frequency, 0), ("max_token_length", max_token_length, 1)):
        if value is None and name == "max_token_length":
            continue
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < least:
            allowed = "None or an int" if name == "max_token_length" else "an int"
            raise ValueError(f"{name} must be {allowed} >= {least}, got {value!r}")


def check_vocab_size(vocab_size: int, minimum: int) -> int:
    """`vocab_size` as an int, at least `minimum`. Any integral number is a vocab size (`numpy.int64` too); a bool,
    a float or a string is not.

    >>> check_vocab_size(np.int64(300), 256)
    300
    """
    if isinstance(vocab_size, (bool, np.bool_)):
        raise TypeError(f"vocab_size must be an int, got {type(vocab_size).__name__}: {vocab_size!r}")
    try:
        vocab_size = operator.index(vocab_size)
    except TypeError:
        raise TypeError(f"vocab_size must be an int, got {type(vocab_size).__name__}: {vocab_size!r}") from None
    if vocab_size < minimum:
        raise ValueError(f"vocab_size {vocab_size} is too small: it must be at least {minimum}")
    return vocab_size


def check_arguments(vocab_size: int, special_tokens: Sequence[str] | None) -> tuple[int, list[str]]:
    """(vocab size as an int, special tokens), checked. Any integral number is a vocab size (`numpy.int64` too);
    a bool, a float or a string is not.

    >>> check_arguments(np.int64(300), None)
    (300, [])
    """
    if isinstance(special_tokens, str):
        raise TypeError(f"special_tokens must be a sequence of str, not a str: use [{special_tokens!r}]")
    specials = validate_special_tokens(special_tokens)
    vocab_size = check_vocab_size(vocab_size, 0)
    minimum = 256 + len(specials)
    if vocab_size < minimum:
        raise ValueError(f"vocab_size {vocab_size} is too small: it must be at least {minimum} "
                         f"(256 byte tokens + {len(specials)} special tokens)")
    for token in specials:
        check_special_token_is_new(token)
    return vocab_size, specials


def check_special_token_is_new(token: str) -> None:
    """Refuse a special token that would share its bytes or its vocab.json text with a byte-level token.

    A special token of several bytes can never equal a merged token: documents are split at every occurrence of
    every special token, so no pre-token contains its bytes (UTF-8 is self-synchronizing: the bytes of a whole
    character string occur in UTF-8 text only where the string itself occurs). Two cases remain:

    >>> check_special_token_is_new("a")
    Traceback (most recent call last):
    ...
    hf_bpe.common.errors.InputError: special token 'a' is the single byte b'a', which is already token 97
    >>> check_special_token_is_new("Ġt")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    hf_bpe.common.errors.InputError: special token 'Ġt' reads as the byte-level token b' t' in vocab.json ...
    >>> check_special_token_is_new("<|endoftext|>")
    """
    encoded = token.encode("utf-8")
    if len(encoded) == 1:
        raise InputError(f"special token {token!r} is the single byte {encoded!r}, which is already token "
                         f"{encoded[0]}")
    if all(char in unicode_to_bytes() for char in token) and str_to_token(token) != encoded:
        raise InputError(f"special token {token!r} reads as the byte-level token {str_to_token(token)!r} in "
                         f"vocab.json (GPT-2's byte-to-character mapping), so the two could not be told apart: "
                         f"choose another special token")


def check_counts(counts: Mapping[bytes, int], special_tokens: list[str]) -> None:
    if not isinstance(counts, Mapping):
        raise TypeError(f"counts must be a mapping from pre-token bytes to counts, got {type(counts).__name__}")
    special_bytes = [token.encode("utf-8") for token in special_tokens]
    if _plainly_valid(counts, special_bytes):
        return  # the common case, checked in C; the loop below finds and names what is wrong
    for token, count in counts.items():
        if not isinstance(token, bytes):
            raise TypeError(f"counts keys must be bytes, got {type(token).__name__}: {token!r}")
        for special in special_bytes:
            if special in token:  # counting splits documents at special tokens: these counts were made otherwise
                raise InputError(f"pre-token {token!r} contains the special token {special.decode()!r}: merges could "
                                 f"rebuild the special token's bytes (count with the same special tokens)")
        if not isinstance(count, (int, np.integer)) or isinstance(count, bool):
            raise TypeError(f"count of pre-token {token!r} must be an int, got {type(count).__name__}: {count!r}")
        if count <= 0:
            raise ValueError(f"count of pre-token {token!r} must be positive, got {count}")


def _plainly_valid(counts: Mapping[bytes, int], special_bytes: list[bytes]) -> bool:
    """Whether every key is bytes without a special token and every count a positive int, by C-level passes.

    A special token's UTF-8 never holds the byte 0xFF, so in the keys joined by it, a special token occurs only
    inside a key.

    >>> _plainly_valid({b"a<s": 1, b">b": 2}, [b"<s>"]), _plainly_valid({b"a<s>": 1}, [b"<s>"])
    (True, False)
    """
    if not set(map(type, counts)) <= {bytes} or not set(map(type, counts.values())) <= {int}:
        return False
    if min(counts.values(), default=1) <= 0:
        return False
    joined = b"\xff".join(counts)
    return not any(special in joined for special in special_bytes)


__all__ = ["check_arguments", "check_counts", "check_trainer_options", "check_vocab_size", "report_training"]
