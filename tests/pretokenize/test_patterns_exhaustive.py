"""Every code point U+0080-U+10FFFF (surrogates aside), in context, pre-tokenized by each preset as `tokenizers` and
tiktoken do (GPT-2's is tests/pretokenize/test_unicode_exhaustive.py).

Each code point `c` appears in the contexts the presets treat specially (`segment`): after a space and doubled,
after an apostrophe and before a letter (contractions in any case), after punctuation and before a letter, after a
digit and before digits, between an upper-case and a lower-case letter, before 's, and between newlines in a
whitespace run. Many code points share one text; only when a batch differs are its code points tried one by one, to
name the first that differs.

- Pre-tokens: `tokenizers`' Split pre-tokenizer with the regex a saved tokenizer.json holds, through a one-token
  vocab so that each pre-token is one token with its offsets.
- Ids: the tiktoken twin (tiktoken runs the owner's text, possessive quantifiers and all) against a saved
  tokenizer.json, with a vocab whose merges show where the pre-tokens around each code point end.
- Case folding: the code points that `(?i:[a-z])` matches, probed in both libraries as
  scripts/make_unicode_classes.py probes the classes (those two tests also cover the generated classes' tables).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from functools import cache
from itertools import accumulate
from pathlib import Path

import numpy as np
import pytest
import tiktoken
import tokenizers
from tokenizers import Regex
from tokenizers.pre_tokenizers import Split

from hf_bpe import PATTERNS
from hf_bpe.formats.hf_directory import save_tokenizer_directory
from hf_bpe.formats.tiktoken import tiktoken_encoding
from hf_bpe.pretokenize import UNICODE_VERSION, compile_pattern, tokenizers_pattern
from hf_bpe.pretokenize.patterns import R50K_PATTERN
from hf_bpe.pretokenize.regex_syntax import CLASSES, Chars, complement, parse_pattern, walk
from tests import load_script
from tests.pretokenize.test_unicode_exhaustive import first_difference

PRESETS = ["cl100k", "o200k", "llama3"]
EOT = "<|endoftext|>"
CODE_POINTS = [code_point for code_point in range(0x80, sys.maxunicode + 1) if not 0xD800 <= code_point <= 0xDFFF]
BATCH = 1 << 14
BATCHES = [tuple(CODE_POINTS[start:start + BATCH]) for start in range(0, len(CODE_POINTS), BATCH)]
LINE = 64  # code points per text handed to the libraries (they encode a batch of texts in parallel)


def segment(c: str) -> str:
    return f" {c}{c}'{c}t.{c}a1{c}23A{c}a{c}'s\n{c} \n"


def lines_of(code_points: Sequence[int]) -> list[str]:
    return ["".join(map(segment, map(chr, code_points[start:start + LINE])))
            for start in range(0, len(code_points), LINE)]


@cache
def split_alone(name: str) -> tokenizers.Tokenizer:
    """The Split pre-tokenizer of the saved spelling with a one-token vocab: each pre-token becomes one token."""
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = Split(Regex(tokenizers_pattern(PATTERNS[name])), "isolated")
    return tokenizer


def tokenizers_ends(name: str, texts: list[str]) -> list[list[int]]:
    return [[end for _, end in encoding.offsets] for encoding in split_alone(name).encode_batch(texts)]


def our_ends(name: str, text: str) -> list[int]:
    return list(accumulate(map(len, compile_pattern(name).findall(text))))


@pytest.mark.parametrize("name", PRESETS)
def test_pretokens_equal_the_tokenizers_split_pre_tokenizer_on_every_code_point(name: str) -> None:
    for code_points in BATCHES:
        texts = lines_of(code_points)
        if [our_ends(name, text) for text in texts] != tokenizers_ends(name, texts):
            bad = first_difference(code_points, lambda text: our_ends(name, text) == tokenizers_ends(name, [text])[0],
                                   segment)
            pytest.fail(f"{name} (Unicode {UNICODE_VERSION}) differs from the Split pre-tokenizer of tokenizers "
                        f"{tokenizers.__version__} at {bad}")


# The ASCII characters next to `c` in `segment`.
CONTEXT = sorted(set(segment("\x80").replace("\x80", "")))


@cache
def boundary_vocab() -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """A vocab whose merges show whether the characters around a non-ASCII `c` share its pre-token: the bytes, and
    one token for each pair of a context character and the first byte of a character, of the last byte of a
    character and a context character, and of a last byte and a first byte (`c` doubled). The two merges around one
    `c` never share a byte (it has at least two), so each happens exactly when its two characters are in one
    pre-token."""
    firsts = [bytes([byte]) for byte in range(0xC2, 0xF5)]
    lasts = [bytes([byte]) for byte in range(0x80, 0xC0)]
    context = [char.encode() for char in CONTEXT]
    merges = ([(left, right) for left in context for right in firsts] + [(left, right) for left in lasts
                                                                          for right in context + firsts])
    vocab = {byte: bytes([byte]) for byte in range(256)}
    vocab.update({256 + rank: left + right for rank, (left, right) in enumerate(merges)})
    return vocab, merges


@pytest.fixture(scope="module")
def boundary_directories(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return {name: save_tokenizer_directory(tmp_path_factory.mktemp(name) / "tok", *boundary_vocab(), [],
                                           pattern=name) for name in [*PRESETS, "gpt2"]}


@pytest.mark.parametrize("name", PRESETS)
def test_tiktoken_and_the_saved_tokenizer_json_cut_alike_on_every_code_point(boundary_directories,
                                                                             name: str) -> None:
    # tiktoken runs the owner's text (cl100k's possessive quantifiers and all), tokenizers the saved spelling, which
    # the test above compares with hf_bpe's pre-tokens.
    twin = tiktoken_encoding(*boundary_vocab(), name=f"{name}-boundaries", pattern=name)
    saved = tokenizers.Tokenizer.from_file(str(boundary_directories[name] / "tokenizer.json"))

    def same(texts: list[str]) -> bool:
        return [encoding.ids for encoding in saved.encode_batch_fast(texts)] == twin.encode_ordinary_batch(texts)

    for code_points in BATCHES:
        if not same(lines_of(code_points)):
            bad = first_difference(code_points, lambda text: same([text]), segment)
            pytest.fail(f"{name}: tiktoken {tiktoken.__version__} and the saved tokenizer.json cut differently at "
                        f"{bad}")


def class_edges(names: Sequence[str]) -> list[int]:
    """The first and last code point of every range of the classes `names` and of every gap between them (surrogates
    aside): for a pattern whose only non-ASCII characters are these classes, each stands for its whole range."""
    ranges = [item for name in names for item in (CLASSES[name], complement(CLASSES[name]))]
    edges = {code_point for items in ranges for first, last in items for code_point in (first, last)}
    return sorted(code_point for code_point in edges if code_point >= 0x80 and not 0xD800 <= code_point <= 0xDFFF)


def test_tiktokens_spelling_of_gpt2_cuts_as_gpt2_on_every_class_range(boundary_directories) -> None:
    # hf_bpe reads tiktoken's r50k pattern (its gpt2, r50k_base and p50k_base encodings) as the gpt2 preset: tiktoken
    # running it must cut every text as GPT-2's ByteLevel pre-tokenizer does. Both patterns name only ASCII and the
    # classes \p{L}, \p{N} and \s, whose tables tests/pretokenize/test_unicode_exhaustive.py checks on every code
    # point: the edges of their ranges stand for every code point.
    vocab, _ = boundary_vocab()
    twin = tiktoken.Encoding("r50k-boundaries", pat_str=R50K_PATTERN, special_tokens={},
                             mergeable_ranks={token: token_id for token_id, token in vocab.items()})
    saved = tokenizers.Tokenizer.from_file(str(boundary_directories["gpt2"] / "tokenizer.json"))
    assert saved.pre_tokenizer.__class__.__name__ == "ByteLevel"

    def same(texts: list[str]) -> bool:
        return [encoding.ids for encoding in saved.encode_batch_fast(texts)] == twin.encode_ordinary_batch(texts)

    def at_the_end(c: str) -> list[str]:  # where `\s++$` (r50k) and `\s+(?!\S)` (GPT-2) take a whitespace run
        return [f"a{c}", f"a {c}", f"x{c}\n{c}", f"1 \n{c}{c}", f"{c} ", f"'{c}\t"]

    code_points = class_edges(["L", "N", "s"])
    assert len(code_points) > 1000
    if not same(lines_of(code_points) + [text for c in code_points for text in at_the_end(chr(c))]):
        bad = next((f"U+{c:04X}" for c in code_points if not same([segment(chr(c)), *at_the_end(chr(c))])),
                   "no single code point (only the batch as a whole)")
        pytest.fail(f"tiktoken {tiktoken.__version__} with r50k's pattern and GPT-2's tokenizer.json cut "
                    f"differently at {bad}")


def probed(joins: Callable[..., np.ndarray], separator: str, pattern: str) -> Iterator[int]:
    code_points = [code_point for code_point in range(sys.maxunicode + 1)
                   if not 0xD800 <= code_point <= 0xDFFF and chr(code_point) != separator]
    return (code_point for code_point, joined in zip(code_points, joins(separator, code_points, pattern)) if joined)


def test_case_insensitive_letters_fold_as_in_both_libraries() -> None:
    # `'c` is one pre-token exactly when c matches (?i:[a-z]); the rest of the pattern takes one character at a time.
    probes = load_script("make_unicode_classes")
    pattern = r"'(?i:[a-z])|[\s\S]"
    folded = {node.ranges for node in walk(parse_pattern(pattern)) if isinstance(node, Chars) and len(node.ranges) > 2}
    ours = {code_point for ranges in folded for first, last in ranges for code_point in range(first, last + 1)}
    assert ours == set(range(ord("A"), ord("Z") + 1)) | set(range(ord("a"), ord("z") + 1)) | {0x017F, 0x212A}
    assert set(probed(probes.joins_with_tokenizers, "'", pattern)) == ours
    assert set(probed(probes.joins_with_tiktoken, "'", pattern)) == ours
