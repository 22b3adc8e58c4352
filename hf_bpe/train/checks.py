"""What every way of training shares: the checks of the vocab size and of HF BpeTrainer's options, and the
`verbose=True` summary line (plain training: `hf_bpe.train.api`; continuing from a base: `hf_bpe.train.starts.extend`;
SuperBPE's two stages: `hf_bpe.train.starts.superword`).
"""

from __future__ import annotations

import operator
import sys

import numpy as np

from hf_bpe.common.parallel import peak_memory_bytes


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


__all__ = ["check_trainer_options", "check_vocab_size", "report_training"]
