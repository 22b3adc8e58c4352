"""Tests for hf_bpe.pretokenize.patterns, regex_syntax and pinned_regex: the presets as their owners ship them, the
patterns' pre-tokens against the plain `regex` module and `tokenizers`, the presets' safe cuts, and the errors.

`pattern_text` is the hypothesis strategy the pattern tests of counting, training and encoding share: text that
stresses the presets (case changes, digit runs, contractions in any case, punctuation before letters, every kind of
whitespace and newline run), restricted to characters on which the `regex` module's Unicode tables agree with the
pinned ones (the exhaustive tests compare the pinned classes with tiktoken and `tokenizers` on every code point).
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
from functools import cache

import pytest
import regex
import tiktoken_ext.openai_public
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tokenizers import Regex
from tokenizers.pre_tokenizers import Split

from hf_bpe import PATTERNS
from hf_bpe.common.errors import InputError
from hf_bpe.pretokenize import (
    GPT2_PATTERN,
    compile_pattern,
    pattern_from_tokenizers,
    preset_name,
    resolve_pattern,
    tokenizers_pattern,
)
from hf_bpe.pretokenize.patterns import BETWEEN_WORDS_SPACE, R50K_PATTERN
from hf_bpe.pretokenize.pinned_regex import stand_ins
from hf_bpe.pretokenize.regex_syntax import CLASSES, Chars, contains, parse_pattern, walk
from hf_bpe.pretokenize.spelling import oniguruma_differences
from hf_bpe.train._reference import reference_pretokenize
from tests.pretokenize.test_gpt2 import ATOMS

PRESETS = ["cl100k", "o200k", "llama3"]
# Custom patterns: Qwen2's (single digits), one with what Oniguruma reads otherwise (a possessive brace, `$`, a
# case-insensitive "ss"), one with a look-behind, one with an astral literal (no stand-ins: the full classes run), and
# one that leaves text unmatched (kept as pre-tokens of its own).
QWEN2 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"""
         r"""|\s+(?!\S)|\s+""")
ONIGURUMA_TRAPS = r"""'(?i:ss|t)|\p{N}{1,2}+|\p{Lu}\p{Ll}*+|\s++$|\s|[^\s\p{N}]"""
LOOK_BEHIND = r"""(?<=\p{L})\p{N}+|\p{N}{1,3}|\p{L}+|\s+|[^\s\p{L}\p{N}]+"""
ASTRAL_LITERAL = "\U0001f600+|\\p{L}+|\\P{L}"
GAPS = r"""\p{Lu}\p{Ll}*|\p{N}+"""
CUSTOM = [QWEN2, ONIGURUMA_TRAPS, LOOK_BEHIND, ASTRAL_LITERAL, GAPS]
# Every character class of the patterns above, as the `regex` module spells it.
_REGEX_CLASSES = {name: (r"\s" if name == "s" else rf"\p{{{name}}}") for name in CLASSES}

PATTERN_ATOMS = ATOMS + [
    "aB", "Ab", "ABC", "abcDEF", "ǅ", "ʰ", "ª", "\u0301", "a\u0301B", "'S", "'Ll", "'ſ", "ſ", "K", "ß", "ss", "SS",
    "'st", "'ſt", "12345", "1234567", "a123", "1a", "x1", ".a", "(a", "-x", "\ta", "\xa0a", " \n", "\n \n", "\n\n\n",
    " \r\n ", "\r\r", "a\n\t b", "!\n", "!/", "/\n", "  a", " \t a", "\u3000a", "\U0001d400\U0001d41a", "\U0001f600",
    "\U00010400", "\U0001d7ce", "𝔸x",
]


@cache
def regex_disagrees() -> frozenset[int]:
    """The code points on which the `regex` module's classes differ from the pinned ones (newer Unicode, say)."""
    every = "".join(chr(code_point) for code_point in range(sys.maxunicode + 1) if not 0xD800 <= code_point <= 0xDFFF)
    differ: set[int] = set()
    for name, spelled in _REGEX_CLASSES.items():
        theirs = set(map(ord, regex.findall(spelled, every)))
        ours = {code_point for first, last in CLASSES[name] for code_point in range(first, last + 1)}
        differ |= theirs ^ ours
    return frozenset(differ)


def _agrees(text: str) -> bool:
    return not any(ord(char) in regex_disagrees() for char in text)


characters = st.characters(exclude_categories=("Cs",)).filter(lambda char: ord(char) not in regex_disagrees())
pattern_text = st.lists(st.sampled_from(PATTERN_ATOMS) | characters | st.text(characters, max_size=3),
                        max_size=40).map("".join).filter(_agrees)


# --- the presets as their owners ship them ---------------------------------------------------------------------------


def tiktoken_pat_str(function_name: str) -> str:
    """The `pat_str` of one encoding in the installed tiktoken_ext/openai_public.py, read from its source."""
    tree = ast.parse(inspect.getsource(tiktoken_ext.openai_public))
    function = next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == function_name)
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "pat_str":
            join = node.value
            assert isinstance(join, ast.Call)
            return "|".join(ast.literal_eval(join.args[0]))
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == "pat_str" and isinstance(value, ast.Constant):
                    return value.value
    raise AssertionError(f"no pat_str in {function_name}")


def test_presets_are_spelled_as_their_owners_ship_them() -> None:
    assert PATTERNS["cl100k"] == PATTERNS["gpt4"] == tiktoken_pat_str("cl100k_base")
    assert PATTERNS["o200k"] == tiktoken_pat_str("o200k_base")
    from transformers.convert_slow_tokenizer import TikTokenConverter

    assert PATTERNS["llama3"] == inspect.signature(TikTokenConverter.__init__).parameters["pattern"].default
    assert PATTERNS["llama3"] != PATTERNS["cl100k"]
    assert PATTERNS["gpt2"] == GPT2_PATTERN
    assert R50K_PATTERN == tiktoken_ext.openai_public.r50k_pat_str
    assert {name: preset_name(text) for name, text in PATTERNS.items()} == {
        "gpt2": "gpt2", "cl100k": "cl100k", "gpt4": "cl100k", "o200k": "o200k", "llama3": "llama3"}


def test_resolving_names_and_regex_text() -> None:
    assert resolve_pattern(None) == resolve_pattern("gpt2") == GPT2_PATTERN
    assert resolve_pattern("gpt4") == PATTERNS["cl100k"]
    assert resolve_pattern(QWEN2) == QWEN2 and preset_name(QWEN2) is None
    with pytest.raises(TypeError):
        resolve_pattern(3)  # type: ignore[arg-type]


def test_the_tokenizers_spelling_is_the_owners_text_where_both_libraries_read_it_alike() -> None:
    assert tokenizers_pattern(PATTERNS["llama3"]) == PATTERNS["llama3"]
    assert tokenizers_pattern(PATTERNS["o200k"]) == PATTERNS["o200k"]
    spelled = tokenizers_pattern(PATTERNS["cl100k"])
    assert spelled == PATTERNS["cl100k"].replace(r"\p{N}{1,3}+", r"(?>\p{N}{1,3})").replace("$", r"\z")
    for name in PRESETS:
        assert pattern_from_tokenizers(tokenizers_pattern(PATTERNS[name])) == PATTERNS[name]
        assert preset_name(tokenizers_pattern(PATTERNS[name])) == name
    # Oniguruma reads these otherwise, so they are spelled out: the brace as an atomic group, `$` as the end of the
    # text, and a case-insensitive "ss" (Oniguruma matches U+00DF there) as explicit classes.
    assert tokenizers_pattern(ONIGURUMA_TRAPS) == (r"'(?:[Ss\x{17f}][Ss\x{17f}]|[Tt])|(?>\p{N}{1,2})|\p{Lu}\p{Ll}*+"
                                                   r"|\s++\z|\s|[^\s\p{N}]")
    assert pattern_from_tokenizers(tokenizers_pattern(ONIGURUMA_TRAPS)) == tokenizers_pattern(ONIGURUMA_TRAPS)


def test_cl100k_as_tiktoken_spells_it_splits_otherwise_in_tokenizers() -> None:
    # Why the saved tokenizer.json holds the tokenizers spelling: Oniguruma reads `\p{N}{1,3}+` as `(\p{N}{1,3})+`.
    owners = Split(Regex(PATTERNS["cl100k"]), "isolated").pre_tokenize_str("123456")
    spelled = Split(Regex(tokenizers_pattern(PATTERNS["cl100k"])), "isolated").pre_tokenize_str("123456")
    assert [piece for piece, _ in owners] == ["123456"]
    assert [piece for piece, _ in spelled] == compile_pattern("cl100k").findall("123456") == ["123", "456"]


# --- pre-tokens: the plain `regex` module, and `tokenizers` --------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(text=pattern_text, pattern=st.sampled_from(PRESETS + CUSTOM))
@example(text="a\n\t b\n", pattern="cl100k").via("the case GPT-2's safe cut gets wrong for cl100k")
@example(text="x'ſt'Kt 'ST", pattern="cl100k").via("case folding beyond ASCII")
@example(text="\U0001f600\U0001f600x\U0001d400\n", pattern=ASTRAL_LITERAL).via("astral characters, no stand-ins")
@example(text="Hello \U0001d400\U0001d41a! abc12", pattern=GAPS).via("text between matches")
def test_pretokens_equal_the_plain_regex_module(text: str, pattern: str) -> None:
    assert compile_pattern(pattern).findall(text) == reference_pretokenize(text, pattern)


@settings(max_examples=300, deadline=None)
@given(text=st.lists(st.sampled_from(PATTERN_ATOMS) | st.characters(exclude_categories=("Cs",)),
                     max_size=40).map("".join), pattern=st.sampled_from(PRESETS + CUSTOM))
@example(text="Straße STRASSE ß 'ßt", pattern=ONIGURUMA_TRAPS).via("Oniguruma's multi-character case folding")
@example(text="a  \n\n 12345\n", pattern=ONIGURUMA_TRAPS).via("$ before a newline")
def test_pretokens_equal_the_tokenizers_split_of_the_saved_spelling(text: str, pattern: str) -> None:
    split = Split(Regex(tokenizers_pattern(resolve_pattern(pattern))), "isolated")
    assert compile_pattern(pattern).findall(text) == [piece for piece, _ in split.pre_tokenize_str(text)]


# Random patterns: atoms, quantifiers of every mode, groups (atomic and case-insensitive), look-arounds, anchors.
_ATOMS = [r"\p{L}", r"\p{N}", r"\s", r"\S", r"[^\s\p{L}\p{N}]", "a", "'", " ", ".", r"[\r\n]", r"\p{Lu}",
          r"\p{Ll}", r"[\p{Lu}\p{M}]", r"\P{L}", "x", r"[\s\S]"]
_QUANTIFIERS = ["", "?", "*", "+", "{1,3}", "{2}", "{1,}", "?+", "*+", "++", "{1,3}+", "??", "*?", "+?"]
_ASSERTIONS = [r"(?!\S)", r"(?=\p{L})", r"(?<=\p{N})", r"(?<!\s)", "$", "^"]


@st.composite
def random_patterns(draw: st.DrawFn, depth: int = 0) -> str:
    branches = []
    for _ in range(draw(st.integers(1, 3))):
        items = []
        for _ in range(draw(st.integers(1, 3))):
            kind = draw(st.integers(0, 9))
            if kind == 9:
                items.append(draw(st.sampled_from(_ASSERTIONS)))
                continue
            if kind < 6 or depth > 1:
                atom = draw(st.sampled_from(_ATOMS))
            elif kind == 8:
                atom = "(?i:" + draw(st.sampled_from(["s", "ss", "'s|'t", "ll|ve", "st", "k", "[sdmt]"])) + ")"
            else:
                atom = ("(?:" if kind == 6 else "(?>") + draw(random_patterns(depth + 1)) + ")"
            items.append(atom + draw(st.sampled_from(_QUANTIFIERS)))
        branches.append("".join(items))
    return "|".join(branches)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(pattern=random_patterns(), text=pattern_text)
@example(pattern="a+$", text="aa\na").via("$ is the end of the text, as in tiktoken")
@example(pattern="[\\s\\S]+", text="x y").via("a class of every character")
def test_random_patterns_equal_the_regex_module_and_tokenizers(pattern: str, text: str) -> None:
    pattern += r"|[\s\S]"  # every character matched: tiktoken would drop the others
    try:
        compiled = compile_pattern(pattern)
    except InputError as error:  # what the libraries or stdlib `re` refuse, or an empty match
        assert any(reason in str(error) for reason in ("empty string", "look-behind", "tokenizers cannot compile"))
        return
    pretokens = compiled.findall(text)
    assert pretokens == reference_pretokenize(text, pattern)
    split = Split(Regex(tokenizers_pattern(pattern)), "isolated")
    assert pretokens == [piece for piece, _ in split.pre_tokenize_str(text)]
    if not oniguruma_differences(parse_pattern(pattern)):  # then as written, too
        assert pretokens == [piece for piece, _ in Split(Regex(pattern), "isolated").pre_tokenize_str(text)]


def test_astral_characters_get_stand_ins_unless_a_pattern_names_one() -> None:
    assert stand_ins(parse_pattern(PATTERNS["o200k"])) is not None
    assert stand_ins(parse_pattern(ASTRAL_LITERAL)) is None
    for pattern in PRESETS + CUSTOM[:3]:
        tree = parse_pattern(PATTERNS.get(pattern, pattern))
        atoms = [node.ranges for node in walk(tree) if isinstance(node, Chars)]
        breaks, chosen = stand_ins(tree)  # type: ignore[misc]
        ends = [*breaks[1:], sys.maxunicode + 1]
        for first, end, stand_in in zip(breaks, ends, chosen):  # in exactly the pattern's classes of its range
            assert ord(stand_in) < 0x10000
            for code_point in {first, (first + end) // 2, end - 1}:
                assert [contains(ranges, code_point) for ranges in atoms] == \
                    [contains(ranges, ord(stand_in)) for ranges in atoms], (pattern, hex(code_point))


def test_long_text_with_astral_characters_takes_the_numpy_stand_ins() -> None:
    text = "".join(f"{atom} x\U0001d400{index}" for index, atom in enumerate(PATTERN_ATOMS * 20))
    assert len(text) > 2000 and _agrees(text)
    for pattern in PRESETS + CUSTOM:
        assert compile_pattern(pattern).findall(text) == reference_pretokenize(text, pattern), pattern


# --- the presets' safe cuts ----------------------------------------------------------------------------------------


@settings(max_examples=500, deadline=None)
@given(text=pattern_text, pattern=st.sampled_from(PRESETS), size=st.integers(1, 12))
@example(text="a\n\t b", pattern="cl100k", size=1)
@example(text="x \u3000 y\xa0 z", pattern="o200k", size=1)
def test_the_presets_safe_cuts_change_no_pretoken(text: str, pattern: str, size: int) -> None:
    compiled = compile_pattern(pattern)
    expected = compiled.findall(text)
    pieces = compiled.pieces(text)
    assert "".join(pieces) == text and (all(pieces) or pieces == [""])
    assert [pretoken for piece in pieces for pretoken in compiled.pretokens_of_piece(piece)] == expected
    segments = list(compiled.segments(text, size))
    assert "".join(segments) == text
    assert [pretoken for segment in segments for pretoken in compiled.findall(segment)] == expected
    assert [pretoken for batch in compiled.pretoken_batches(text, size) for pretoken in batch] == expected


def test_gpt2s_safe_space_is_not_safe_for_cl100k() -> None:
    # `\s++$` takes "\n\t" whole at the end of a text, but only "\n" before " b": the presets cut only at a space
    # between two non-whitespace characters.
    findall = compile_pattern("cl100k").findall
    assert findall("a\n\t b") == ["a", "\n", "\t", " b"]
    assert findall("a\n\t") + findall(" b") != findall("a\n\t b")
    assert BETWEEN_WORDS_SPACE.search("a\n\t b") is None
    assert [match.start() for match in BETWEEN_WORDS_SPACE.finditer("a b  c\xa0d e")] == [1, 8]


def test_custom_patterns_have_no_cut_and_match_long_text_in_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    import hf_bpe.pretokenize.patterns as patterns_module

    monkeypatch.setattr(patterns_module, "_BATCH", 3)
    text = "Hello World 12 abc! \U0001d400\U0001d41a ok" * 5
    for pattern in CUSTOM:
        compiled = compile_pattern(pattern)
        assert compiled.safe_cut is None and list(compiled.segments(text, 4)) == [text]
        batches = list(compiled.pretoken_batches(text, 4))
        assert max(map(len, batches)) <= 4  # a batch, and the text before its last match
        assert [pretoken for batch in batches for pretoken in batch] == compiled.findall(text), pattern
        assert compiled.pieces(text) == compiled.findall(text)


# --- what is refused -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pattern, message", [
    (r"\p{Han}+|.", r"the class \p{Han} is not supported"),
    (r"\p{Greek}", r"\p{Greek}"),
    (r"\d+|\D", r"the escape \d is not supported: use \p{N}"),
    (r"\w+|\W", r"the escape \w is not supported"),
    (r"\bx", r"the escape \b"),
    (r"a*", "can match the empty string"),
    (r"(?=a)", "can match the empty string"),
    ("(a|b", "never closed"),
    ("a)", "unbalanced ')'"),
    ("[a-z", "never closed"),
    ("[[:alpha:]]", "nested classes"),
    (r"[\p{L}&&\p{Lu}]", "set operations"),
    ("a{2,1}", "quantifier {2,1}"),
    ("a{x}", "not a quantifier"),
    ("a{1,3}?", "lazy {n,m}?"),
    ("a**", "a quantifier after a quantifier"),
    ("*a", "nothing to repeat"),
    (r"(?i:é)", "inside (?i:...)"),
    (r"(?i:\p{L})", "inside (?i:...)"),
    (r"(?P<name>a)", "the group '(?P<'"),
    (r"(?s:.)", "the group '(?s:'"),
    (r"\1", r"the escape \1"),
    (r"\x{110000}", "is not a code point"),
    (r"(?<=a+)b", "look-behind requires fixed-width pattern"),
    (r"(?:(?!\S))?a", "tokenizers cannot compile it"),
    ("", "non-empty str"),
])
def test_unsupported_patterns_are_refused_naming_the_construct(pattern: str, message: str) -> None:
    with pytest.raises(InputError) as raised:
        resolve_pattern(pattern)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_a_tokenizers_regex_that_tiktoken_reads_otherwise_is_refused_when_loaded_naming_where() -> None:
    with pytest.raises(InputError) as raised:
        pattern_from_tokenizers(r"\p{N}{1,3}+|\s+$|\S")
    message = str(raised.value)
    assert message.startswith("tokenizer.json: the Split regex ") and "means something else to tokenizers" in message
    assert "`{1,3}+` at character 5 (a possessive quantifier to tiktoken" in message
    assert "`$` at character 15 (Oniguruma also matches it before a line feed" in message
    assert message.endswith(r"""when it is written '(?>\\p{N}{1,3})|\\s+\\z|\\S'""") and "\n" not in message
    assert pattern_from_tokenizers(QWEN2) == QWEN2
    # tiktoken's own cl100k text (as transformers' converter writes it) splits digits otherwise in tokenizers.
    with pytest.raises(InputError, match=r"`\{1,3\}\+` at character 54 \(a possessive quantifier"):
        pattern_from_tokenizers(PATTERNS["cl100k"])
    assert PATTERNS["cl100k"][54:60] == "{1,3}+"


def test_tiktokens_gpt2_pattern_is_read_as_gpt2_where_the_libraries_read_it_alike() -> None:
    # The r50k pattern as transformers' TikTokenConverter writes it into tokenizer.json: after the possessive `\s++`
    # no line feed can follow, so `$` is the end of the text to Oniguruma too.
    assert oniguruma_differences(parse_pattern(R50K_PATTERN)) == []
    assert pattern_from_tokenizers(R50K_PATTERN) == resolve_pattern(R50K_PATTERN) == GPT2_PATTERN
    assert preset_name(R50K_PATTERN) == "gpt2" and compile_pattern(R50K_PATTERN) is compile_pattern("gpt2")
    # What stays a difference: `$` after a run that can stop before a line feed, `^` after one.
    for pattern, where in [(r"\s+$|\S", 3), (r"[ \t]++$|[\s\S]", 7), (r"\s*$\n|[\s\S]", 3), (r"^\s|\S", 0),
                           (r"\n^a|[\s\S]", 2), (r"(?:\s++|a)$|[\s\S]", 10)]:
        assert [int(found.split(" at character ")[1].split()[0]) for found in
                oniguruma_differences(parse_pattern(pattern))] == [where], pattern
    for pattern in [r"a\s*+$|\S", r"(?:\s++|[\s\S]++)$|a", r"[^\n]^a|[\s\S]", r"a$b|[\s\S]", r"\s++\z|\A\s|\S"]:
        assert oniguruma_differences(parse_pattern(pattern)) == [], pattern


def test_a_difference_found_is_one_the_libraries_show() -> None:
    # `$` after a greedy run: Oniguruma ends "ab" before the line feed, tiktoken (and hf_bpe) do not.
    pattern = r"[^\n]+$|[\s\S]"
    assert oniguruma_differences(parse_pattern(pattern))
    as_written = [piece for piece, _ in Split(Regex(pattern), "isolated").pre_tokenize_str("ab\ncd")]
    assert as_written == ["ab", "\n", "cd"] != compile_pattern(pattern).findall("ab\ncd") == ["a", "b", "\n", "cd"]


# Random patterns around anchors: runs that can or cannot stop before a line feed, line feeds, anchors.
_ANCHOR_ITEMS = [r"\s++", r"\s*+", r"[ \t]++", r"\s+", r"\s*", r"\n", r"[^\n]", "a", r"\S+", r"(?:\s++)",
                 r"(?>\s+)", r"[\r\n]++", r"(?:\s++|a+)", r"\p{L}+", "$", "^", "$", "^"]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(branches=st.lists(st.lists(st.sampled_from(_ANCHOR_ITEMS), min_size=1, max_size=4).map("".join),
                         min_size=1, max_size=3),
       text=st.lists(st.sampled_from([" ", "\n", "\t", "a", "b", "\r\n", " \n ", "\n\n", "\xa0", "\u2028"]),
                     max_size=12).map("".join))
@example(branches=[r"\s++$", r"\s+(?!\S)", r"\s"], text="a \n\n b \n").via("r50k's whitespace alternatives")
@example(branches=[r"[^\n]+$"], text="ab\ncd").via("a difference found")
def test_a_pattern_without_differences_splits_alike_as_written_in_tokenizers(branches: list[str], text: str) -> None:
    pattern = "|".join(branches) + r"|[\s\S]"
    try:
        tree = parse_pattern(pattern)
    except InputError:  # one that can match the empty string
        return
    pretokens = compile_pattern(pattern).findall(text)
    assert pretokens == reference_pretokenize(text, pattern)
    if not oniguruma_differences(tree):
        assert pretokens == [piece for piece, _ in Split(Regex(pattern), "isolated").pre_tokenize_str(text)]


def test_compiled_patterns_pickle_by_their_text_and_are_cached() -> None:
    import pickle

    compiled = compile_pattern("o200k")
    assert pickle.loads(pickle.dumps(compiled)) is compiled
    assert compile_pattern(PATTERNS["o200k"]) is compiled
    assert repr(compiled) == "CompiledPattern('o200k')"
    assert re.fullmatch(r"CompiledPattern\('.*'\)", repr(compile_pattern(GAPS)))
