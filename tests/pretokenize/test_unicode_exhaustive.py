"""Every code point U+0080-U+10FFFF (surrogates aside), in context, tokenized by hf_bpe as by `tokenizers` and tiktoken.

Issue 8: hf_bpe once followed the Unicode tables of the installed `regex` module while `tokenizers` and tiktoken follow
their own, and a random test found the difference only by luck. These tests leave nothing to luck: each code point `c`
appears after a space, doubled, before `'s`, after a letter, before punctuation and before a digit (`segment`). Many
code points are joined into one text per batch, so the libraries' per-call costs are paid once per batch; only when a
batch differs are its code points tried one by one, to name the first that differs.

The cost is per pre-token (about 2 us in each library), so `segment` is the arrangement of the six contexts that makes
the fewest pre-tokens (4.3 per code point, found by trying every order). The pre-tokenizer test reads `tokenizers`'
pre-tokens through a one-token vocab, where each pre-token is one token with its offsets.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from functools import cache
from itertools import accumulate
from pathlib import Path

import pytest
import tiktoken
import tokenizers

from hf_bpe.encode.tokenizer import Tokenizer
from hf_bpe.formats.gpt2 import load_gpt2
from hf_bpe.formats.hf_directory import save_tokenizer_directory
from hf_bpe.formats.tiktoken import tiktoken_encoding
from hf_bpe.pretokenize import UNICODE_VERSION, pretokenize
from hf_bpe.train.api import train_bpe
from tests import FIXTURES

GPT2_VOCAB, GPT2_MERGES = FIXTURES / "gpt2_vocab.json", FIXTURES / "gpt2_merges.txt"
EOT = "<|endoftext|>"
CODE_POINTS = [code_point for code_point in range(0x80, sys.maxunicode + 1) if not 0xD800 <= code_point <= 0xDFFF]
BATCH = 1 << 15
BATCHES = [tuple(CODE_POINTS[start:start + BATCH]) for start in range(0, len(CODE_POINTS), BATCH)]


def segment(c: str) -> str:
    """`c` after a space, doubled, before 's, after a letter, before punctuation and before a digit."""
    return f" {c}{c}'sa{c}.{c}1"


def batch_text(code_points: Sequence[int]) -> str:
    return "".join(map(segment, map(chr, code_points)))


def first_difference(code_points: Sequence[int], same: Callable[[str], bool],
                     segment: Callable[[str], str] = segment) -> str:
    """The first code point whose segment alone is tokenized differently, for the failure message (`segment`: how a
    code point is put in context)."""
    for code_point in code_points:
        if not same(segment(chr(code_point))):
            return f"U+{code_point:04X} ({segment(chr(code_point))!r})"
    return "no single code point (only the batch as a whole)"


@cache
def gpt2_libraries() -> tuple[Tokenizer, tokenizers.Tokenizer, tiktoken.Encoding]:
    ours = Tokenizer.from_files(GPT2_VOCAB, GPT2_MERGES)
    theirs = tokenizers.Tokenizer(tokenizers.models.BPE.from_file(str(GPT2_VOCAB), str(GPT2_MERGES)))
    theirs.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    return ours, theirs, tiktoken_encoding(*load_gpt2(GPT2_VOCAB, GPT2_MERGES), name="gpt2-offline")


@cache
def byte_level_pre_tokenizer_alone() -> tokenizers.Tokenizer:
    """The ByteLevel pre-tokenizer with a one-token vocab: every pre-token becomes one (unknown) token."""
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    return tokenizer


def byte_level_pretoken_ends(texts: list[str]) -> list[list[int]]:
    """The end offset (in characters) of each of `tokenizers`' pre-tokens of each text."""
    return [[end for _, end in encoding.offsets] for encoding in byte_level_pre_tokenizer_alone().encode_batch(texts)]


def pretoken_ends(text: str) -> list[int]:
    return list(accumulate(map(len, pretokenize(text))))


def batch_groups() -> Iterator[tuple[list[tuple[int, ...]], list[str]]]:
    """Batches four at a time with their texts: `tokenizers` and tiktoken encode the texts of a group in parallel."""
    for start in range(0, len(BATCHES), 4):
        group = BATCHES[start:start + 4]
        yield group, list(map(batch_text, group))


def test_pretokenize_equals_the_byte_level_pre_tokenizer_on_every_code_point() -> None:
    for group, texts in batch_groups():
        for code_points, text, ends in zip(group, texts, byte_level_pretoken_ends(texts)):
            if pretoken_ends(text) != ends:
                bad = first_difference(code_points, lambda text: pretoken_ends(text) == byte_level_pretoken_ends(
                    [text])[0])
                pytest.fail(f"pretokenize (Unicode {UNICODE_VERSION}) differs from the ByteLevel pre-tokenizer of "
                            f"tokenizers {tokenizers.__version__} at {bad}")


def test_gpt2_ids_equal_tokenizers_and_tiktoken_on_every_code_point() -> None:
    ours, theirs, encoding = gpt2_libraries()

    def differences(texts: list[str]) -> list[list[str]]:
        """For each text, the libraries whose ids differ from tiktoken's."""
        from_tokenizers = [encoded.ids for encoded in theirs.encode_batch_fast(texts)]
        from_tiktoken = encoding.encode_ordinary_batch(texts)
        return [[name for name, ids in (("tokenizers", tokenizers_ids), ("hf_bpe", ours.encode(text)))
                 if ids != expected]
                for text, expected, tokenizers_ids in zip(texts, from_tiktoken, from_tokenizers)]

    for group, texts in batch_groups():
        for code_points, differ in zip(group, differences(texts)):
            if differ:
                bad = first_difference(code_points, lambda text: not differences([text])[0])
                pytest.fail(f"{' and '.join(differ)} ids differ from tiktoken's (GPT-2 files) at {bad}")


@pytest.fixture(scope="module")
def trained_directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    vocab, merges = train_bpe(FIXTURES / "hf_corpora_sample.txt", 600, [EOT], num_workers=1, progress=False)
    return save_tokenizer_directory(tmp_path_factory.mktemp("unicode") / "tok", vocab, merges, [EOT])


def test_hf_tokenizer_equals_the_fast_tokenizer_on_every_code_point(trained_directory: Path) -> None:
    # Both pre-tokenize as the tests above check (the saved tokenizer.json holds the same ByteLevel pre-tokenizer),
    # so one cheap context suffices here to put every code point through both HF paths and the trained merges:
    # doubled, before punctuation, in lines of 64 code points (a run of non-letters is one pre-token per line).
    from transformers import AutoTokenizer

    from hf_bpe.hf.tokenizer import HFBPETokenizer

    ours, fast = HFBPETokenizer.from_pretrained(trained_directory), AutoTokenizer.from_pretrained(trained_directory)
    assert fast.is_fast

    def same(text: str) -> bool:
        return ours(text)["input_ids"] == fast(text)["input_ids"]

    for code_points in BATCHES:
        lines = ["".join(f"{c}{c}." for c in map(chr, code_points[start:start + 64]))
                 for start in range(0, len(code_points), 64)]
        if not same("\n".join(lines)):
            bad = next(line for line in lines if not same(line))
            pytest.fail(f"HFBPETokenizer ids differ from the fast tokenizer's on the line starting at "
                        f"U+{ord(bad[0]):04X}: {bad!r}")
