"""Weights of named sources, exact: each source's pre-token counts are multiplied by an integer.

    hf-bpe train en=en.txt hi=hi.txt el=el.txt --weight hi=2.5 --out tok
    hf-bpe train en=en.txt hi=hi.txt el=el.txt --sampling-temperature 3.3 --out tok

A weight W is a non-negative number (0 leaves a source out of the pooled counts); a source without one weighs 1.
`--sampling-temperature T` sets the weight of source i to (n_i / sum n)^(1/T) / (n_i / sum n), where n_i is the size
of its text in UTF-8 bytes (its files' sizes): training then sees each source as often as mT5's and XLM-R's
sampling with exponent 1/T draws from it (T = 1: every weight 1; larger T favours the small sources).

Training multiplies counts, so the weights must be integers, and real weights are turned into integers by one
rule (`integer_weights`), recorded with them in `hf_bpe_training.json` and the model card:

    k_i = round(w_i * RESOLUTION / w_min), then every k_i divided by the greatest common divisor of them all,

where w_min is the smallest positive weight, `RESOLUTION` is 100 and `round` rounds halves to even (Python's). So the
smallest positive weight becomes 100 before the division, each k_i is within 0.5 of w_i * 100 / w_min (a relative
error of at most 0.5% for every source), and weights that are already in whole ratios (1, 2, 3; or 0.5 and 1.5)
come out exact and as small as they can be (1, 2, 3; 1 and 3). Equal weights are all 1, so training on named
sources without weights is training on their text put together. A weight is the same as repeating the source's text
that many times; no text is written or repeated on disk.

>>> weights, record = source_weights({"en": 9_000, "hi": 1_000}, sampling_temperature=2.0)
>>> weights, round(record["sources"]["en"]["weight"], 4), round(record["sources"]["hi"]["weight"], 4)
({'en': 1, 'hi': 3}, 1.0541, 3.1623)
>>> source_weights({"en": 8_000, "hi": 1_000, "el": 3_000}, sampling_temperature=3.3)[0]
{'en': 50, 'hi': 213, 'el': 99}
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from fractions import Fraction
from functools import reduce
from typing import Any

from hf_bpe.common.errors import InputError

RESOLUTION = 100
RULE = (f"k = round(w * {RESOLUTION} / smallest positive w), halves to even, then all k divided by their greatest "
        "common divisor; counts are multiplied by k")


def parse_named_numbers(values: Sequence[str], flag: str, names: Sequence[str], *, positive: bool = False
                        ) -> dict[str, float]:
    """`NAME=NUMBER` option values as {name: number}, in the order given; InputError (naming `flag` and the value) for
    a value that is not NAME=NUMBER, a name not in `names`, a name given twice, or a number that is negative (with
    `positive`, not positive), infinite or not a number.

    >>> parse_named_numbers(["en=2", "hi=0.5"], "--weight", ["en", "hi"])
    {'en': 2.0, 'hi': 0.5}
    >>> parse_named_numbers(["en=-1"], "--weight", ["en"])
    Traceback (most recent call last):
    ...
    hf_bpe.common.errors.InputError: --weight en=-1: the weight must be a non-negative number, got -1
    """
    what = "weight" if flag == "--weight" else flag.lstrip("-").replace("-", " ")
    numbers: dict[str, float] = {}
    for value in values:
        name, equals, text = value.rpartition("=")
        if not equals or not name:
            raise InputError(f"{flag} {value}: give NAME={what.upper().replace(' ', '_')} (NAME one of the sources: "
                             f"{', '.join(names)})")
        if name not in names:
            raise InputError(f"{flag} {value}: no source is named {name} (the sources: {', '.join(names)})")
        if name in numbers:
            raise InputError(f"{flag} {value}: the name {name} is given twice")
        try:
            number = float(text)
        except ValueError:
            number = math.nan
        if not math.isfinite(number) or number < 0 or (positive and number == 0):
            kind = "a positive" if positive else "a non-negative"
            raise InputError(f"{flag} {value}: the {what} must be {kind} number, got {text}")
        numbers[name] = number
    return numbers


def temperature_weights(sizes: Mapping[str, int], temperature: float) -> dict[str, float]:
    """The weight of each source under temperature sampling: (n_i / sum n)^(1/T) / (n_i / sum n), n_i its size.

    >>> temperature_weights({"en": 900, "hi": 100}, 1.0)
    {'en': 1.0, 'hi': 1.0}
    """
    if not (isinstance(temperature, (int, float)) and math.isfinite(temperature) and temperature > 0):
        raise InputError(f"the sampling temperature must be a positive number, got {temperature}")
    total = sum(sizes.values())
    weights = {}
    for name, size in sizes.items():
        if size <= 0:
            raise InputError(f"source {name} has no text, so it has no sampling weight")
        share = size / total
        weights[name] = share ** (1 / temperature) / share
    return weights


def integer_weights(weights: Mapping[str, float]) -> dict[str, int]:
    """The integers the counts are multiplied by, from non-negative real weights (the rule in the module docstring).

    >>> integer_weights({"a": 1, "b": 1}), integer_weights({"a": 0.5, "b": 1.5, "c": 0})
    ({'a': 1, 'b': 1}, {'a': 1, 'b': 3, 'c': 0})
    >>> integer_weights({"a": 1, "b": 1 / 3}), integer_weights({"a": 1, "b": 0.7})
    ({'a': 3, 'b': 1}, {'a': 143, 'b': 100})
    """
    for name, weight in weights.items():
        if not (isinstance(weight, (int, float)) and not isinstance(weight, bool) and math.isfinite(weight)
                and weight >= 0):
            raise InputError(f"the weight of source {name} must be a non-negative number, got {weight!r}")
    positive = [weight for weight in weights.values() if weight > 0]
    if not positive:
        raise InputError("every source's weight is 0: at least one must be positive")
    smallest = Fraction(min(positive))  # exact arithmetic: the rule's rounding, not float's, decides
    scaled = {name: round(Fraction(weight) * RESOLUTION / smallest) for name, weight in weights.items()}
    divisor = reduce(math.gcd, scaled.values())
    return {name: value // divisor for name, value in scaled.items()}


def source_weights(sizes: Mapping[str, int], weights: Mapping[str, float] | None = None,
                   sampling_temperature: float | None = None) -> tuple[dict[str, int], dict[str, Any]]:
    """(the integer weight of each source, the record of how it was found), for sources of `sizes` bytes of text.

    `weights` gives some sources a weight (the others weigh 1); `sampling_temperature` sets them all instead (not
    both). The record holds the rule, the temperature, and per source its bytes, its real and its integer weight.
    """
    if weights is not None and sampling_temperature is not None:
        raise InputError("give weights or a sampling temperature, not both")
    unknown = [name for name in weights or () if name not in sizes]
    if unknown:
        raise InputError(f"weight for {unknown[0]}, which is no source (the sources: {', '.join(sizes)})")
    real = (temperature_weights(sizes, sampling_temperature) if sampling_temperature is not None
            else {name: (weights or {}).get(name, 1.0) for name in sizes})
    integers = integer_weights(real)
    record = {
        "rule": RULE,
        "resolution": RESOLUTION,
        "sampling_temperature": sampling_temperature,
        "sources": {name: {"bytes": sizes[name], "weight": real[name], "integer_weight": integers[name]}
                    for name in sizes},
    }
    return integers, record


def pooled_counts(counts_by_source: dict[str, Counter[bytes]], weights: Mapping[str, int] | None = None, *,
                  consume: bool = False) -> Counter[bytes]:
    """The sources' pre-token counts added up, each times its integer weight (missing: 1; 0 leaves it out).
    `consume=True` empties `counts_by_source` as it goes (a table may become the result), so that no more than the
    result and the tables not yet added are held.

    >>> pooled_counts({"en": Counter({b"a": 2}), "hi": Counter({b"a": 1, b"b": 1})}, {"hi": 3})
    Counter({b'a': 5, b'b': 3})
    """
    pooled: Counter[bytes] = Counter()
    for name in list(counts_by_source):
        counts = counts_by_source.pop(name) if consume else counts_by_source[name]
        weight = 1 if weights is None else weights.get(name, 1)
        if not isinstance(weight, int) or isinstance(weight, bool) or weight < 0:
            raise TypeError(f"the weight of source {name} must be a non-negative int, got {weight!r}")
        if weight == 0 or not counts:
            continue
        if weight != 1:
            counts = Counter({pretoken: count * weight for pretoken, count in counts.items()})
        elif not consume or not isinstance(counts, Counter):
            counts = Counter(counts)  # never add into the caller's table
        if len(counts) > len(pooled):
            pooled, counts = counts, pooled
        pooled.update(counts)
    return pooled


def describe_weights(record: Mapping[str, Any]) -> str:
    """One line for the model card: each source's real and integer weight, and the rule.

    >>> describe_weights(source_weights({"en": 9_000, "hi": 1_000}, sampling_temperature=2.0)[1])  # doctest: +ELLIPSIS
    'sampling temperature 2: `en` 1.054 (counts times 1), `hi` 3.162 (counts times 3); integers by k = round(w * ...'
    """
    sources = record.get("sources") or {}
    parts = [f"`{name}` {entry.get('weight', 0):.4g} (counts times {entry.get('integer_weight')})"
             for name, entry in sources.items() if isinstance(entry, Mapping)]
    temperature = record.get("sampling_temperature")
    start = f"sampling temperature {temperature:g}: " if isinstance(temperature, (int, float)) else ""
    return f"{start}{', '.join(parts)}; integers by {record.get('rule', RULE)}"


__all__ = ["RESOLUTION", "RULE", "describe_weights", "integer_weights", "parse_named_numbers", "pooled_counts",
           "source_weights", "temperature_weights"]
