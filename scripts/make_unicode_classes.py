"""Generate hf_bpe/pretokenize/unicode_classes.py: the pattern classes as `tokenizers` and tiktoken see them.

    python scripts/make_unicode_classes.py            # probe, check, write hf_bpe/pretokenize/unicode_classes.py
    python scripts/make_unicode_classes.py --check    # probe, compare with the committed table, exit 1 if different

hf_bpe pre-tokenizes with explicit character classes instead of `\\p{L}`, `\\p{N}`, `\\s` and the other classes the
preset patterns use, so that it splits text exactly as the installed `tokenizers` (Oniguruma) and tiktoken (Rust
`regex`) do, whatever Unicode tables the Python `regex` module has. This script asks both libraries, never a Unicode
database:

- GPT-2's letters, numbers and whitespace: probe texts `s c1 s c2 s ...` of every code point `c` (U+0000-U+10FFFF,
  surrogates aside) with an ASCII separator `s` of known class, run through GPT-2's pattern (tokenizers' ByteLevel
  pre-tokenizer). `c` joins the pre-token of the `s` before it exactly when it has the class of `s`: `!` (neither
  letter, number nor whitespace: the pattern's `[^\\s\\p{L}\\p{N}]+`), then `a` (letters) for the rest, then `1`
  (numbers), then `\\n` (whitespace, which must be everything left). Each probe holds only the code points not yet
  classified, so the texts stay short.
- Every class of `CLASS_NAMES` (`\\p{Lu}`, `\\p{M}`, ...): the pattern `[^\\p{X}]+|\\p{X}+` on `! c1 ! c2 ! ...`
  (`!` is in none of them): `c` joins the `!` before it exactly when it is not in the class. tokenizers runs the
  pattern as a `Split` pre-tokenizer, tiktoken as its pattern. The classes of L, N and whitespace found this way must
  equal GPT-2's.
- tokenizers reports pre-token offsets. tiktoken does not, so it encodes the probe with a vocab of the 256 bytes plus
  every two-byte token `s` + (first byte of `c`): that merge happens exactly when `s` and `c` share a pre-token.
- The two classifications must agree. The Unicode version is the newest one whose new letters (a few per version,
  `VERSION_SENTINELS`) are all letters to the libraries while those of the next version are not.

Run it when `tokenizers` or tiktoken is upgraded; CI runs `--check`. It takes a few seconds per class.
"""

from __future__ import annotations

import argparse
import difflib
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np

MODULE_PATH = Path(__file__).resolve().parent.parent / "hf_bpe" / "pretokenize" / "unicode_classes.py"
# hf_bpe.pretokenize.gpt2.GPT2_PATTERN, copied: the script must run when the module it generates is missing or out of
# date.
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
SURROGATES = range(0xD800, 0xE000)

# Letters first assigned in each Unicode version (DerivedAge.txt), a few per version from different scripts.
VERSION_SENTINELS: dict[str, tuple[int, ...]] = {
    "13.0.0": (0x10E80, 0x10FB0, 0x18B00, 0x30000),  # Yezidi, Chorasmian, Khitan Small Script, CJK Extension G
    "14.0.0": (0x10570, 0x12F90, 0x16A70, 0x1E290),  # Vithkuqi, Cypro-Minoan, Tangsa, Toto
    "15.0.0": (0x11F04, 0x1E4D0, 0x31350),  # Kawi, Nag Mundari, CJK Extension H
    "15.1.0": (0x2EBF0,),  # CJK Extension I
    "16.0.0": (0x1C89, 0xA7CB, 0x105C0, 0x1E5D0),  # Cyrillic TJE, Latin ramshorn, Todhri, Ol Onal
    "17.0.0": (0xA7CE, 0x10940, 0x11DB0, 0x16EA0, 0x323B0),  # Latin, Sidetic, Tolong Siki, Beria Erfe, CJK Ext. J
}

# Separator, class name, in probing order: each probe classifies the code points the earlier probes left.
PROBES = (("!", "other"), ("a", "letters"), ("1", "numbers"), ("\n", "whitespace"))
# The classes the preset patterns use (hf_bpe.pretokenize.patterns), as written in a pattern, and the name of GPT-2's
# class each must equal. "s" stands for `\\s`.
CLASS_NAMES = ("L", "N", "s", "Lu", "Ll", "Lt", "Lm", "Lo", "M")
SAME_AS_GPT2 = {"L": "letters", "N": "numbers", "s": "whitespace"}
CLASS_SEPARATOR = "!"  # Po: in none of CLASS_NAMES
# The generated tables of the classes GPT-2 has too keep their names.
TABLE_NAMES = {"L": "LETTER", "N": "NUMBER", "s": "WHITESPACE"}

class ProbeError(Exception):
    """The libraries' classes cannot be read or trusted; main() prints it on one line and exits with status 2."""


Classes = dict[str, list[int]]
JoinProbe = Callable[[str, Sequence[int]], np.ndarray]


def probe_text(separator: str, code_points: Sequence[int]) -> str:
    """`s c1 s c2 ... s cn s`: each code point after a separator, and one closing separator."""
    return separator + separator.join(map(chr, code_points)) + separator


def class_pattern(name: str) -> str:
    """The probe pattern of one class: runs of the class, and runs of everything else.

    >>> class_pattern("Lu"), class_pattern("s")
    ('[^\\\\p{Lu}]+|\\\\p{Lu}+', '[^\\\\s]+|\\\\s+')
    """
    spelled = "\\s" if name == "s" else f"\\p{{{name}}}"
    return f"[^{spelled}]+|{spelled}+"


def joins_with_tokenizers(separator: str, code_points: Sequence[int], pattern: str | None = None) -> np.ndarray:
    """For each code point, whether `tokenizers` keeps it in the separator's pre-token: with the ByteLevel
    pre-tokenizer (GPT-2's pattern), or with a `Split` pre-tokenizer of `pattern`."""
    from tokenizers import Regex
    from tokenizers.pre_tokenizers import ByteLevel, Split

    pre_tokenizer = (ByteLevel(add_prefix_space=False, use_regex=True) if pattern is None
                     else Split(Regex(pattern), "isolated"))
    text = probe_text(separator, code_points)
    pieces = pre_tokenizer.pre_tokenize_str(text)
    starts = np.zeros(len(text) + 1, dtype=bool)
    starts[np.fromiter((start for _, (start, _end) in pieces), dtype=np.int64, count=len(pieces))] = True
    return ~starts[1:2 * len(code_points):2]  # code point i sits at character 2i + 1


def joins_with_tiktoken(separator: str, code_points: Sequence[int], pattern: str = GPT2_PATTERN) -> np.ndarray:
    """For each code point, whether tiktoken (GPT-2's pattern, or `pattern`) keeps it in the separator's pre-token.

    The vocab holds the 256 bytes and `separator + b` for every first byte b of a probed code point. A pair
    (separator, b) only occurs where a separator precedes a code point (the separator byte never occurs inside a
    multi-byte character, and the separator itself is not probed), so a two-byte token marks a code point that joined.
    """
    import tiktoken

    sep = separator.encode()
    if any(chr(code_point) == separator for code_point in code_points):
        raise ValueError("the separator must not be probed")
    ranks = {bytes([byte]): byte for byte in range(256)}
    for byte in sorted({chr(code_point).encode("utf-8")[0] for code_point in code_points}):
        ranks[sep + bytes([byte])] = len(ranks)
    encoding = tiktoken.Encoding(name="probe", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    text = probe_text(separator, code_points)
    token_lengths = np.where(np.array(encoding.encode_ordinary(text), dtype=np.int64) < 256, 1, 2)
    token_starts = np.concatenate(([0], np.cumsum(token_lengths)[:-1]))
    merged = np.zeros(len(text.encode("utf-8")) + 1, dtype=bool)
    merged[token_starts[token_lengths == 2]] = True
    utf8_lengths = np.fromiter((len(chr(code_point).encode("utf-8")) for code_point in code_points), dtype=np.int64,
                               count=len(code_points))
    separator_offsets = np.concatenate(([0], np.cumsum(utf8_lengths + 1)[:-1]))
    return merged[separator_offsets]


def classify(joins: JoinProbe) -> Classes:
    """Letters, numbers and whitespace (sorted code points) as one library's GPT-2 pre-tokenization sees them."""
    remaining = np.array([code_point for code_point in range(sys.maxunicode + 1) if code_point not in SURROGATES])
    classes: Classes = {}
    for separator, name in PROBES:
        probed = remaining[remaining != ord(separator)]
        joined = joins(separator, probed.tolist())
        members = np.sort(np.append(probed[joined], ord(separator)))
        classes[name] = members.tolist()
        remaining = probed[~joined]
    if len(remaining):
        raise ProbeError(f"{len(remaining)} code points in no class, first U+{remaining[0]:04X}")
    return classes


def classify_named(joins: Callable[[str, Sequence[int], str], np.ndarray], name: str) -> list[int]:
    """The code points of one class of CLASS_NAMES (sorted), as one library sees them (see the module docstring)."""
    probed = np.array([code_point for code_point in range(sys.maxunicode + 1)
                       if code_point not in SURROGATES and chr(code_point) != CLASS_SEPARATOR])
    joined = joins(CLASS_SEPARATOR, probed.tolist(), class_pattern(name))
    return probed[~joined].tolist()


def unicode_version(letters: Iterable[int]) -> str:
    """The newest version whose sentinel letters are all letters, checking that no later version's are."""
    letter_set = set(letters)
    present = [version for version, sentinels in VERSION_SENTINELS.items()
               if all(code_point in letter_set for code_point in sentinels)]
    absent = [version for version, sentinels in VERSION_SENTINELS.items()
              if not any(code_point in letter_set for code_point in sentinels)]
    versions = list(VERSION_SENTINELS)
    if not present or present != versions[:len(present)] or absent != versions[len(present):]:
        raise ProbeError(f"cannot tell the Unicode version (sentinels of {present} present, "
                         f"of {absent} absent); extend VERSION_SENTINELS")
    if not absent:
        raise ProbeError(f"newer than Unicode {present[-1]}; add the next version's sentinels")
    return present[-1]


def ranges_text(code_points: Sequence[int]) -> str:
    """Inclusive ranges in hex separated by spaces: `0041-005A 00AA ...`.

    >>> ranges_text([0x41, 0x42, 0x43, 0xAA, 0x10000, 0x10001])
    '0041-0043 00AA 10000-10001'
    """
    ranges: list[list[int]] = []
    for code_point in code_points:
        if ranges and ranges[-1][1] == code_point - 1:
            ranges[-1][1] = code_point
        else:
            ranges.append([code_point, code_point])
    return " ".join(f"{start:04X}" if start == end else f"{start:04X}-{end:04X}" for start, end in ranges)


def string_literal(text: str, indent: str = "    ", width: int = 112) -> str:
    """A parenthesised, line-wrapped Python string literal (cut at spaces) for the generated module."""
    lines, line = [], ""
    for word in text.split(" "):
        if line and len(line) + len(word) + 1 > width:
            lines.append(line + " ")
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    return "(\n" + "\n".join(f'{indent}"{line}"' for line in lines) + "\n)"


def module_source(classes: Classes, named: dict[str, list[int]], version: str, tokenizers_version: str,
                  tiktoken_version: str) -> str:
    """The text of hf_bpe/pretokenize/unicode_classes.py."""
    title = f"The patterns' character classes as `tokenizers` and tiktoken see them (Unicode {version})."
    extra = "".join(f"\n# \\p{{{name}}}: {len(named[name])} code points.\n{name.upper()}_RANGES = "
                    f"{string_literal(ranges_text(named[name]))}\n" for name in CLASS_NAMES if name not in SAME_AS_GPT2)
    table = "".join(f'\n    "{name}": {TABLE_NAMES.get(name, name.upper())}_RANGES,' for name in CLASS_NAMES)
    return f'''"""{title}

GENERATED by scripts/make_unicode_classes.py: do not edit by hand. It probed `tokenizers` {tokenizers_version} and
tiktoken {tiktoken_version} on every code point and found that they agree. Regenerate it with
`python scripts/make_unicode_classes.py` when either is upgraded; `--check` says whether it is still current.

Each table lists inclusive code-point ranges in hex (`0041-005A`; a lone code point stands alone), separated by
spaces. hf_bpe.pretokenize builds its patterns from them instead of `\\\\p{{L}}`, `\\\\p{{N}}`, `\\\\s`, ..., so that
its pre-tokens do not depend on the Unicode tables of the installed `regex` module or of Python's `re`.
"""

UNICODE_VERSION = "{version}"

# \\p{{L}}: {len(classes["letters"])} code points.
LETTER_RANGES = {string_literal(ranges_text(classes["letters"]))}

# \\p{{N}}: {len(classes["numbers"])} code points.
NUMBER_RANGES = {string_literal(ranges_text(classes["numbers"]))}

# \\s: {len(classes["whitespace"])} code points.
WHITESPACE_RANGES = {string_literal(ranges_text(classes["whitespace"]))}
{extra}
# Every class by the name a pattern gives it ("s" is `\\s`).
CLASS_RANGES = {{{table}
}}
'''


def generate() -> str:
    """Probe both libraries, check that they agree, and return the module text."""
    try:
        import tiktoken
        import tokenizers
    except ImportError as error:
        raise ProbeError(f"{error.name} is needed to probe its classes: pip install tokenizers tiktoken") from None

    classes = classify(joins_with_tokenizers)
    tiktoken_classes = classify(joins_with_tiktoken)
    for name, code_points in classes.items():
        differ = sorted(set(code_points) ^ set(tiktoken_classes[name]))
        if differ:
            raise ProbeError(f"tokenizers and tiktoken disagree on {name} for {len(differ)} "
                             f"code points, first U+{differ[0]:04X}")
    named: dict[str, list[int]] = {}
    for name in CLASS_NAMES:
        named[name] = classify_named(joins_with_tokenizers, name)
        differ = sorted(set(named[name]) ^ set(classify_named(joins_with_tiktoken, name)))
        if differ:
            raise ProbeError(f"tokenizers and tiktoken disagree on \\p{{{name}}} for {len(differ)} code points, "
                             f"first U+{differ[0]:04X}")
        if name in SAME_AS_GPT2 and named[name] != classes[SAME_AS_GPT2[name]]:
            raise ProbeError(f"class {name} differs from GPT-2's {SAME_AS_GPT2[name]}")
    letters = sorted(code_point for name in ("Lu", "Ll", "Lt", "Lm", "Lo") for code_point in named[name])
    if letters != named["L"]:
        raise ProbeError("\\p{L} is not the union of \\p{Lu}, \\p{Ll}, \\p{Lt}, \\p{Lm} and \\p{Lo}")
    version = unicode_version(classes["letters"])
    return module_source(classes, named, version, tokenizers.__version__, tiktoken.__version__)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true",
                        help="compare with the committed module instead of writing it; exit 1 if it differs")
    parser.add_argument("--output", type=Path, default=MODULE_PATH,
                        help="module to write or check (default: %(default)s)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        return _check_or_write(generate(), args.output, args.check, started)
    except (ProbeError, OSError) as error:
        print(f"make_unicode_classes: {error}", file=sys.stderr)
        return 2


def _check_or_write(source: str, output: Path, check: bool, started: float) -> int:
    """Compare `source` with `output` (1 if it differs) or write it atomically (temporary file and rename)."""
    if check:
        current = output.read_text(encoding="utf-8") if output.exists() else ""
        if current != source:
            sys.stdout.writelines(difflib.unified_diff(current.splitlines(keepends=True),
                                                       source.splitlines(keepends=True), str(output),
                                                       "regenerated", n=0))
            print(f"make_unicode_classes: {output} is out of date for the installed tokenizers/tiktoken; "
                  "run scripts/make_unicode_classes.py and commit it", file=sys.stderr)
            return 1
        print(f"make_unicode_classes: {output} is current ({time.perf_counter() - started:.1f} s)")
        return 0
    temporary = output.with_name(output.name + ".tmp")
    temporary.write_text(source, encoding="utf-8")
    temporary.replace(output)
    print(f"make_unicode_classes: wrote {output} ({time.perf_counter() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
