r"""Pre-tokenization patterns: the presets, custom patterns, and how each one is run fast and exactly.

`PATTERNS` holds the presets, spelled as their owners ship them:

- `gpt2`: GPT-2's pattern (the default everywhere), as GPT-2 and `tokenizers`' ByteLevel pre-tokenizer spell it;
- `cl100k` (alias `gpt4`): tiktoken's cl100k_base, with its possessive quantifiers
  (tiktoken_ext/openai_public.py, `cl100k_base`);
- `o200k`: tiktoken's o200k_base (tiktoken_ext/openai_public.py, `o200k_base`);
- `llama3`: the `Split` regex of Meta-Llama-3's tokenizer.json, also transformers' `TikTokenConverter` default
  (transformers/convert_slow_tokenizer.py); unlike cl100k it has no possessive quantifiers and keeps a run of
  newlines together (`\s*[\r\n]+`).

tiktoken's own spelling of GPT-2's pattern (`R50K_PATTERN`: tiktoken's gpt2, r50k_base, p50k_base and p50k_edit,
possessive quantifiers and `\s++$`) splits every text as GPT-2's does, so it is read as the `gpt2` preset (a test
checks it against tiktoken on every code point in context).

Any other string is a custom pattern in the syntax tiktoken and `tokenizers` share; hf_bpe.pretokenize.regex_syntax
says what is accepted, and refuses the rest with an `InputError` naming the construct (a class such as `\p{Han}`
whose tables hf_bpe does not pin, say).

>>> resolve_pattern("gpt4") == PATTERNS["cl100k"], preset_name(PATTERNS["gpt4"])
(True, 'cl100k')
>>> compile_pattern("cl100k").findall("Hello world's 12345!!\n\n  x")
['Hello', ' world', "'s", ' ', '123', '45', '!!\n\n', ' ', ' x']

How each pattern runs (`CompiledPattern`): GPT-2 keeps its fast paths (hf_bpe.pretokenize.gpt2). The other presets
share one proven *safe cut*: a single space between two non-whitespace characters. No pre-token crosses the position
before it, and the pre-tokens on either side do not depend on the text across it: every alternative of these
patterns consumes a space only as its first character or inside a whitespace run, so a match starting before the
cut cannot reach the space (the character before it is not whitespace), and every test such a match makes at the
space (a class that excludes the space, `(?!\S)`, `$`) fails or succeeds there exactly as at the end of the text. A
match starting at the cut sees only the text after it (the presets have no look-behind). GPT-2's weaker rule (a
space before non-whitespace) does not hold for cl100k: its `\s++$` joins "\n\t" at the end of a text, but not before
" b". tests/pretokenize/test_patterns.py checks the cuts against the plain pattern on adversarial text. Text is cut
there into pieces, which counting counts before pre-tokenizing each distinct piece once.

A custom pattern gets no cut at all: each document (text between special tokens) is matched whole, as tiktoken and
`tokenizers` match it, so a huge document without special tokens is held whole while it is counted or encoded.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import cache, lru_cache

from hf_bpe.common.errors import InputError
from hf_bpe.pretokenize.gpt2 import (
    GPT2_ASCII_REGEX,
    GPT2_PATTERN,
    GPT2_REGEX,
    NON_WHITESPACE_CLASS,
    SAFE_SPACE_REGEX,
    safe_segments,
    split_into_pieces,
)
from hf_bpe.pretokenize.pinned_regex import PinnedRegex
from hf_bpe.pretokenize.regex_syntax import parse_pattern
from hf_bpe.pretokenize.spelling import oniguruma_differences, spell_for_tokenizers
from hf_bpe.pretokenize.superword import SUPERWORD_NAME, SUPERWORD_PATTERN

# tiktoken_ext/openai_public.py (tiktoken 0.14), cl100k_base's pat_str.
CL100K_PATTERN = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
                  r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s""")
# tiktoken_ext/openai_public.py (tiktoken 0.14), o200k_base's pat_str: these seven alternatives joined by "|".
O200K_PATTERN = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])
# The Split pre-tokenizer's regex in meta-llama/Meta-Llama-3-8B's tokenizer.json, which transformers'
# TikTokenConverter (convert_slow_tokenizer.py) also uses by default.
LLAMA3_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
                  r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")

# tiktoken_ext/openai_public.py (tiktoken 0.14), r50k_pat_str: GPT-2's pattern as tiktoken spells it for speed, the
# pattern of its gpt2, r50k_base, p50k_base and p50k_edit encodings.
R50K_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""

#: The preset patterns by name ("gpt4" is cl100k's other name).
PATTERNS: dict[str, str] = {"gpt2": GPT2_PATTERN, "cl100k": CL100K_PATTERN, "gpt4": CL100K_PATTERN,
                            "o200k": O200K_PATTERN, "llama3": LLAMA3_PATTERN}
_PRESET_NAMES = {regex: name for name, regex in reversed(PATTERNS.items())}  # the first name of each text
#: Named patterns beside the presets, which tiktoken does not ship: SuperBPE's stage-2 pre-tokenization
#: (hf_bpe.pretokenize.superword). Their pre-tokens run across spaces: their safe cut is `BEFORE_DIGITS`.
OTHER_NAMED: dict[str, str] = {SUPERWORD_NAME: SUPERWORD_PATTERN}
_OTHER_NAMES = {regex: name for name, regex in OTHER_NAMED.items()}
# Texts spelled otherwise than a preset that split every text as it does: they are read as that preset.
_SAME_AS_PRESET = {R50K_PATTERN: "gpt2"}

#: Zero-width, before each safe cut of the presets other than GPT-2 (see the module docstring).
BETWEEN_WORDS_SPACE = re.compile(f"(?<={NON_WHITESPACE_CLASS})(?= {NON_WHITESPACE_CLASS})")
#: Zero-width, before an ASCII digit that follows an ASCII character that is no digit: the safe cut of the superword
#: pattern, which starts a pre-token at every run of numeric characters (no ASCII character but a digit is numeric),
#: whose cut into groups of three depends on the run alone. Text without digits has none.
BEFORE_DIGITS = re.compile(r"(?<=[\x00-/:-\x7f])(?=[0-9])")
# Counting and encoding hand out pre-tokens in lists of about this many when a text is matched in batches.
_BATCH = 1 << 16


def resolve_pattern(pattern: str | None) -> str:
    r"""The regex text of a pattern given by preset name (or None: GPT-2) or as regex text, which is checked.

    >>> resolve_pattern(None) == resolve_pattern("gpt2") == PATTERNS["gpt2"]
    True
    >>> resolve_pattern(r"\p{Han}+|.")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    hf_bpe.common.errors.InputError: pattern '\\p{Han}+|.': the class \p{Han} is not supported (hf_bpe has ...
    """
    if pattern is None:
        return GPT2_PATTERN
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a preset name or regex text, got {type(pattern).__name__}")
    if pattern in PATTERNS:
        return PATTERNS[pattern]
    if pattern in OTHER_NAMED:
        return OTHER_NAMED[pattern]
    if pattern in _SAME_AS_PRESET:
        return PATTERNS[_SAME_AS_PRESET[pattern]]
    compile_pattern(pattern)
    return pattern


def preset_name(regex: str) -> str | None:
    """The preset name of a regex text (or of a preset name), else None; a preset's `tokenizers` spelling counts, and
    so does tiktoken's spelling of GPT-2's pattern. The other named patterns (`OTHER_NAMED`) have their names too.

    >>> preset_name(PATTERNS["llama3"]), preset_name("gpt4"), preset_name("a+"), preset_name(R50K_PATTERN)
    ('llama3', 'cl100k', None, 'gpt2')
    >>> preset_name(SUPERWORD_PATTERN)
    'superword'
    """
    if regex in PATTERNS:
        return _PRESET_NAMES[PATTERNS[regex]]
    if regex in OTHER_NAMED or regex in _OTHER_NAMES:
        return _OTHER_NAMES.get(regex, regex)
    return _PRESET_NAMES.get(regex) or _SAME_AS_PRESET.get(regex) or _preset_spellings().get(regex)


@cache
def _preset_spellings() -> dict[str, str]:
    return {tokenizers_pattern(regex): name for regex, name in _PRESET_NAMES.items()}


def tokenizers_pattern(regex: str) -> str:
    r"""The regex text a `tokenizers` Split pre-tokenizer needs to cut text as tiktoken does with `regex`.

    >>> tokenizers_pattern(PATTERNS["llama3"]) == PATTERNS["llama3"]
    True
    >>> print(tokenizers_pattern(PATTERNS["cl100k"]).replace("|", "\n|"))
    '(?i:[sdmt]
    |ll
    |ve
    |re)
    |[^\r\n\p{L}\p{N}]?+\p{L}++
    |(?>\p{N}{1,3})
    | ?[^\s\p{L}\p{N}]++[\r\n]*+
    |\s++\z
    |\s*[\r\n]
    |\s+(?!\S)
    |\s
    """
    return spell_for_tokenizers(parse_pattern(regex))


def pattern_from_tokenizers(regex: str, source: str = "tokenizer.json") -> str:
    r"""The pattern of a `tokenizers` Split regex: a preset's text when it spells one, else the regex itself, which
    must mean the same to tiktoken; an InputError naming `source` and, for each construct that Oniguruma reads
    otherwise (hf_bpe.pretokenize.spelling.oniguruma_differences), where it is.

    >>> pattern_from_tokenizers(tokenizers_pattern(PATTERNS["cl100k"])) == PATTERNS["cl100k"]
    True
    >>> pattern_from_tokenizers(r"\p{L}++|\s++$|\s") == r"\p{L}++|\s++$|\s"  # no line feed can follow `\s++`
    True
    >>> pattern_from_tokenizers(r"\s+$|\S+")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    hf_bpe.common.errors.InputError: tokenizer.json: the Split regex ... to tiktoken: `$` at character 3 (...
    """
    try:
        tree = parse_pattern(regex)
    except InputError as error:
        raise InputError(f"{source}: {error}") from None
    # Checked first, also for a preset's own text: tiktoken's cl100k text holds `\p{N}{1,3}+`, which tokenizers
    # reads otherwise, so a tokenizer.json holding it is refused rather than read as cl100k.
    differences = oniguruma_differences(tree)
    if differences:
        raise InputError(f"{source}: the Split regex {regex!r} means something else to tokenizers (Oniguruma) than "
                         f"to tiktoken: {'; '.join(differences)}; hf_bpe reads it as tiktoken does when it is "
                         f"written {spell_for_tokenizers(tree)!r}")
    name = preset_name(regex)
    return regex if name is None else resolve_pattern(name)


class CompiledPattern:
    """A pattern ready to run: `findall` pre-tokenizes as `tokenizers` and tiktoken do, and the fast paths of
    counting and encoding ask it where text may be cut (see the module docstring).

    `findall_ascii` is `findall` for ASCII text only; `safe_cut` is a zero-width regex at every safe cut, or None;
    `pieces` cuts text into parts that no pre-token crosses (for GPT-2 the finer pieces of
    hf_bpe.pretokenize.gpt2; for a custom pattern the pre-tokens themselves, `pieces_are_pretokens`).
    """

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.name = preset_name(pattern)
        self.is_gpt2 = pattern == GPT2_PATTERN
        self.findall: Callable[[str], list[str]]
        self.findall_ascii: Callable[[str], list[str]]
        self.safe_cut: re.Pattern[str] | None
        if self.is_gpt2:
            self.findall, self.findall_ascii, self.safe_cut = GPT2_REGEX.findall, GPT2_ASCII_REGEX.findall, \
                SAFE_SPACE_REGEX
            self.pieces_are_pretokens = self.counts_pretokens = False
            self.regex: PinnedRegex | None = None
            return
        tree = parse_pattern(pattern)
        if self.name is None:
            _check_tokenizers_reads(pattern, spell_for_tokenizers(tree))
        self.regex = PinnedRegex(tree, tiles=self.name is not None)
        self.findall = self.regex.findall
        ascii_regex = self.regex.ascii
        self.findall_ascii = ascii_regex.findall if self.regex.tiles else (
            lambda text: self.regex.with_gaps(ascii_regex, text, ascii_regex.findall(text)))  # type: ignore[union-attr]
        self.safe_cut = (BETWEEN_WORDS_SPACE if self.name in PATTERNS else BEFORE_DIGITS
                         if self.name == SUPERWORD_NAME else None)
        self.pieces_are_pretokens = self.safe_cut is None
        # Superword's pieces are the text between two numbers, which rarely repeats: telling them apart saves no
        # pre-tokenizing, and cutting at a look-behind and a look-ahead costs more than pre-tokenizing the text.
        self.counts_pretokens = self.pieces_are_pretokens or self.name == SUPERWORD_NAME

    def pieces(self, text: str) -> list[str]:
        """`text` cut into parts that pre-tokenize alone as in `text` (each a pre-token if `pieces_are_pretokens`).

        >>> compile_pattern("o200k").pieces("Hello world, again\\n")
        ['Hello', ' world,', ' again\\n']
        """
        if self.is_gpt2:
            return split_into_pieces(text)
        if self.safe_cut is None:
            return self.findall(text)
        return self.safe_cut.split(text)

    def counted(self, text: str) -> list[str]:
        """What counting tallies of `text`: its pre-tokens when `counts_pretokens`, else its `pieces`, which it
        pre-tokenizes once each (`hf_bpe.train.counting.piece_counter`).

        >>> compile_pattern("superword").counted("abc 1234 x")
        ['abc ', '1', '234', ' x']
        """
        if self.counts_pretokens and not self.pieces_are_pretokens:  # superword: the text as one piece
            return self.pretokens_of_piece(text)
        return self.pieces(text)

    def pretokens_of_piece(self, piece: str) -> list[str]:
        """The pre-tokens of one piece (of `pieces`)."""
        if self.pieces_are_pretokens:
            return [piece]
        return self.findall_ascii(piece) if piece.isascii() else self.findall(piece)

    def segments(self, text: str, size: int) -> Iterator[str]:
        """`text` in segments of at least `size` characters cut at safe cuts (see
        hf_bpe.pretokenize.gpt2.safe_segments); the whole text when the pattern has no safe cut."""
        if self.safe_cut is None:
            yield text
            return
        yield from safe_segments(text, size, SAFE_SPACE_REGEX if self.is_gpt2 else self.safe_cut)

    def pretoken_batches(self, text: str, size: int) -> Iterator[list[str]]:
        """The pre-tokens of a long text in lists, one per segment of about `size` characters (without safe cuts,
        lists of at most 65,536 pre-tokens), so that all of them are never held at once."""
        if self.safe_cut is None and self.regex is not None:
            yield from self.regex.iter_pretokens(text, _BATCH)
            return
        for segment in self.segments(text, size):
            yield self.findall_ascii(segment) if segment.isascii() else self.findall(segment)

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return compile_pattern, (self.pattern,)

    def __repr__(self) -> str:
        return f"CompiledPattern({self.name or self.pattern!r})"


def _check_tokenizers_reads(pattern: str, spelled: str) -> None:
    """InputError unless `tokenizers` (Oniguruma) compiles the pattern that a saved tokenizer.json would hold (it
    refuses a few constructs stdlib `re` takes, such as a quantified look-ahead)."""
    from tokenizers import Regex

    try:
        Regex(spelled)
    except Exception as error:  # tokenizers raises a plain Exception naming Oniguruma's complaint
        raise InputError(f"pattern {pattern!r}: tokenizers cannot compile it for tokenizer.json "
                         f"({str(error).strip()})") from None


def compile_pattern(regex: str) -> CompiledPattern:
    """The compiled pattern of a regex text (or preset name), built once per process and pattern.

    Raises InputError for a regex hf_bpe cannot run exactly, naming the construct, or Python's own complaint.

    >>> compile_pattern(r"[a-z]+|(").pattern
    Traceback (most recent call last):
    ...
    hf_bpe.common.errors.InputError: pattern '[a-z]+|(': a group that is never closed (at character 7)
    """
    if isinstance(regex, str) and (regex in PATTERNS or regex in _SAME_AS_PRESET):
        regex = PATTERNS[_SAME_AS_PRESET.get(regex, regex)]
    elif isinstance(regex, str) and regex in OTHER_NAMED:
        regex = OTHER_NAMED[regex]
    return _compile(regex)


@lru_cache(maxsize=32)
def _compile(regex: str) -> CompiledPattern:
    try:
        return CompiledPattern(regex)
    except re.error as error:
        raise InputError(f"pattern {regex!r}: {error}") from None
    except RecursionError:
        raise InputError(f"pattern {regex!r}: nested too deeply") from None


__all__ = ["BEFORE_DIGITS", "BETWEEN_WORDS_SPACE", "CL100K_PATTERN", "LLAMA3_PATTERN", "O200K_PATTERN", "OTHER_NAMED",
           "PATTERNS",
           "R50K_PATTERN", "CompiledPattern", "compile_pattern", "pattern_from_tokenizers", "preset_name",
           "resolve_pattern", "tokenizers_pattern"]
