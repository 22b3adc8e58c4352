r"""SuperBPE's stage-2 pre-tokenization (Liu et al., "SuperBPE: Space Travel for Language Models", 2025), as a pattern.

The authors' code cuts stage-2 text with two `tokenizers` pre-tokenizers in a row:
`Digits(individual_digits=False)`, which isolates each run of numeric characters (Rust's `char::is_numeric`: the
Unicode categories Nd, Nl and No), then `Split(Regex(r"(?=(\d{3})+(?!\d))"), "isolated")` on each piece, which cuts a
run of Oniguruma `\d` characters (Nd) into groups of three from the right. Everything else between two numeric runs is
one pre-token, across spaces and newlines: that is what lets stage 2 learn tokens such as " by the way".

`SUPERWORD_PATTERN` is that sequence as one pattern of hf_bpe's syntax, so that counting (both engines), the encoder
and every loader run it like any other pattern. It is built from pinned tables, as the presets are:

- `NUMERIC`, what `Digits` counts as numeric: the pinned `\p{N}` (hf_bpe.pretokenize.unicode_classes) plus the
  digits that Rust's newer Unicode tables add (`DIGITS_BEYOND_N`);
- `DECIMAL`, Oniguruma's `\d` in `tokenizers` (`DECIMAL_RANGES`: Nd of the same Unicode version as `\p{N}`);
- tests/pretokenize/test_superword_exhaustive.py checks both tables, and the pattern, on every code point against
  the installed `tokenizers`.

The published lookahead costs time quadratic in the length of a digit run (it rescans the rest of the run at each
digit). The pattern finds the same cuts in linear time: within a numeric run, a cut precedes every digit from which
the rest of its run of `\d` is a positive multiple of three digits long. So a pre-token starting a numeric run takes
what holds no cut (numeric non-digits, digit runs of one or two digits) and then the first (length mod 3) digits of
the next digit run, found with one possessive scan of that run; a pre-token starting at a cut is three digits, and
when they end their digit run, it also takes what follows up to the next cut in the same way.

Its name is "superword": `pattern="superword"` wherever hf_bpe takes a pattern (hf_bpe.pretokenize.patterns).

>>> from hf_bpe.pretokenize.patterns import compile_pattern
>>> compile_pattern("superword").findall("By the way, 1234567 is ½12345 x")
['By the way, ', '1', '234', '567', ' is ', '½12', '345', ' x']
"""

from __future__ import annotations

from hf_bpe.pretokenize.regex_syntax import CLASSES, Ranges, complement, parse_ranges, union
from hf_bpe.pretokenize.spelling import _spell_class

#: Code points Rust's `char::is_numeric` (in `tokenizers` 0.23.3: Unicode 17) counts and the pinned `\p{N}`
#: (Unicode 16) does not: new Nd digits (Tolong Siki) and Nl numbers (Tangut).
DIGITS_BEYOND_N = "11DE0-11DE9 16FF4-16FF6"
#: Oniguruma's `\d` in `tokenizers` 0.23.3: the Nd code points of Unicode 16.0.0 (written as in unicode_classes).
DECIMAL_RANGES = (
    "0030-0039 0660-0669 06F0-06F9 07C0-07C9 0966-096F 09E6-09EF 0A66-0A6F 0AE6-0AEF 0B66-0B6F 0BE6-0BEF 0C66-0C6F "
    "0CE6-0CEF 0D66-0D6F 0DE6-0DEF 0E50-0E59 0ED0-0ED9 0F20-0F29 1040-1049 1090-1099 17E0-17E9 1810-1819 1946-194F "
    "19D0-19D9 1A80-1A89 1A90-1A99 1B50-1B59 1BB0-1BB9 1C40-1C49 1C50-1C59 A620-A629 A8D0-A8D9 A900-A909 A9D0-A9D9 "
    "A9F0-A9F9 AA50-AA59 ABF0-ABF9 FF10-FF19 104A0-104A9 10D30-10D39 10D40-10D49 11066-1106F 110F0-110F9 "
    "11136-1113F 111D0-111D9 112F0-112F9 11450-11459 114D0-114D9 11650-11659 116C0-116C9 116D0-116E3 11730-11739 "
    "118E0-118E9 11950-11959 11BF0-11BF9 11C50-11C59 11D50-11D59 11DA0-11DA9 11F50-11F59 16130-16139 16A60-16A69 "
    "16AC0-16AC9 16B50-16B59 16D70-16D79 1CCF0-1CCF9 1D7CE-1D7FF 1E140-1E149 1E2F0-1E2F9 1E4F0-1E4F9 1E5F1-1E5FA "
    "1E950-1E959 1FBF0-1FBF9")

NUMERIC: Ranges = union(CLASSES["N"], parse_ranges(DIGITS_BEYOND_N))
DECIMAL: Ranges = parse_ranges(DECIMAL_RANGES)

#: The regex of the authors' `Split` step, as `tokenizers` runs it after `Digits(individual_digits=False)`.
PUBLISHED_SPLIT_REGEX = r"(?=(\d{3})+(?!\d))"


def _intersect_complement(ranges: Ranges, removed: Ranges) -> Ranges:
    """The code points of `ranges` not in `removed`.

    >>> _intersect_complement(((0, 9), (20, 29)), ((5, 22),))
    ((0, 4), (23, 29))
    """
    kept = complement(removed)
    result = []
    for first, last in ranges:
        for low, high in kept:
            if low <= last and first <= high:
                result.append((max(first, low), min(last, high)))
    return union(tuple(result))


#: Numeric characters that are not `\d` (fractions, superscripts, Roman numerals, ...): never cut before.
OTHER_NUMERIC: Ranges = _intersect_complement(NUMERIC, DECIMAL)


def _superword_pattern() -> str:
    numeric = _spell_class(NUMERIC)
    not_numeric = "[^" + numeric[1:]
    digit = _spell_class(DECIMAL)
    other = _spell_class(OTHER_NUMERIC)
    # The first (length mod 3) digits of a digit run of three or more: a cut follows them.
    head = f"(?:{digit}{{1,2}}(?=(?:{digit}{{3}})++(?!{digit})))"
    # Numeric characters that hold no cut: non-digits, and whole digit runs of one or two digits.
    uncut = f"(?:{other}++|{digit}{{1,2}}(?!{digit}))"
    return "|".join([
        f"{not_numeric}++",                                # the text between numeric runs, whole
        f"(?<!{numeric})(?:{uncut}++{head}?|{head})",      # the start of a numeric run, up to its first cut
        f"{digit}{{3}}(?={digit})",                        # three digits with more of their run after them
        f"{digit}{{3}}{uncut}*+{head}?",                   # the last three of a run, to the next cut
    ])


#: SuperBPE's published stage-2 pre-tokenization (`Digits` then `Split` on `PUBLISHED_SPLIT_REGEX`) as one pattern.
SUPERWORD_PATTERN = _superword_pattern()
#: The name of `SUPERWORD_PATTERN` wherever a pattern is named (`pattern="superword"`, training records, cards).
SUPERWORD_NAME = "superword"


__all__ = ["DECIMAL", "DECIMAL_RANGES", "DIGITS_BEYOND_N", "NUMERIC", "OTHER_NUMERIC", "PUBLISHED_SPLIT_REGEX",
           "SUPERWORD_NAME", "SUPERWORD_PATTERN"]
