"""Every code point U+0080-U+10FFFF (surrogates aside), in context, tokenized by hf_bpe as by `tokenizers` and tiktoken.

Issue 8: hf_bpe once followed the Unicode tables of the installed `regex` module while `tokenizers` and tiktoken follow
their own, and a random test found the difference only by luck. These tests leave nothing to luck: each code point `c`
appears after a letter, before `'s`, before a digit, doubled, before punctuation and after a space (`segment`). Many
code points are joined into one text per batch, so the libraries' per-call costs are paid once per batch; only when a
batch differs are its code points tried one by one, to name the first that differs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import accumulate
from pathlib import Path

import pytest
import tiktoken
import tokenizers

from hf_bpe.encode import Tokenizer
from hf_bpe.gpt2_format import load_gpt2
from hf_bpe.hf_export import save_tokenizer_directory
from hf_bpe.pretokenize import UNICODE_VERSION, pretokenize
from hf_bpe.tiktoken_compat import tiktoken_encoding
from hf_bpe.train import train_bpe

FIXTURES = Path(__file__).parent / "fixtures"
GPT2_VOCAB, GPT2_MERGES = FIXTURES / "gpt2_vocab.json", FIXTURES / "gpt2_merges.txt"
EOT = "<|endoftext|>"
CODE_POINTS = [code_point for code_point in range(0x80, sys.maxunicode + 1) if not 0xD800 <= code_point <= 0xDFFF]
BATCH = 1 << 15
BATCHES = [CODE_POINTS[start:start + BATCH] for start in range(0, len(CODE_POINTS), BATCH)]


def segment(c: str) -> str:
    """`c` after a letter, doubled, before punctuation, before 's, after a space and before a digit."""
    return f"a{c}{c}.{c}'s {c}1"


def batch_text(code_points: Sequence[int]) -> str:
    return "".join(map(segment, map(chr, code_points)))


def first_difference(code_points: Sequence[int], same: Callable[[str], bool]) -> str:
    """The first code point whose segment alone is tokenized differently, for the failure message."""
    for code_point in code_points:
        if not same(segment(chr(code_point))):
            return f"U+{code_point:04X} ({segment(chr(code_point))!r})"
    return "no single code point (only the batch as a whole)"


@lru_cache(maxsize=None)
def byte_level_pre_tokenizer() -> tokenizers.pre_tokenizers.ByteLevel:
    return tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)


@lru_cache(maxsize=None)
def gpt2_libraries() -> tuple[Tokenizer, tokenizers.Tokenizer, tiktoken.Encoding]:
    ours = Tokenizer.from_files(GPT2_VOCAB, GPT2_MERGES)
    theirs = tokenizers.Tokenizer(tokenizers.models.BPE.from_file(str(GPT2_VOCAB), str(GPT2_MERGES)))
    theirs.pre_tokenizer = byte_level_pre_tokenizer()
    return ours, theirs, tiktoken_encoding(*load_gpt2(GPT2_VOCAB, GPT2_MERGES), name="gpt2-offline")


def test_pretokenize_equals_the_byte_level_pre_tokenizer_on_every_code_point() -> None:
    # Pre-token boundaries (character offsets): `tokenizers` returns its pre-tokens byte-level mapped.
    def same(text: str) -> bool:
        return (list(accumulate(map(len, pretokenize(text))))
                == [end for _, (_, end) in byte_level_pre_tokenizer().pre_tokenize_str(text)])

    for code_points in BATCHES:
        text = batch_text(code_points)
        if not same(text):
            pytest.fail(f"pretokenize (Unicode {UNICODE_VERSION}) differs from tokenizers {tokenizers.__version__} "
                        f"at {first_difference(code_points, same)}")


def test_gpt2_ids_equal_tokenizers_and_tiktoken_on_every_code_point() -> None:
    ours, theirs, encoding = gpt2_libraries()

    def differences(texts: list[str]) -> list[str]:
        expected = encoding.encode_ordinary_batch(texts)
        from_tokenizers = [encoded.ids for encoded in theirs.encode_batch_fast(texts)]
        return [name for name, ids in (("tokenizers", from_tokenizers), ("hf_bpe", list(map(ours.encode, texts))))
                if ids != expected]

    for code_points in BATCHES:
        text = batch_text(code_points)
        differ = differences([text])
        if differ:
            bad = first_difference(code_points, lambda segment_text: not differences([segment_text]))
            pytest.fail(f"{' and '.join(differ)} ids differ from tiktoken's (GPT-2 files) at {bad}")


@pytest.fixture(scope="module")
def trained_directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    vocab, merges = train_bpe(FIXTURES / "hf_corpora_sample.txt", 600, [EOT], num_workers=1, progress=False)
    return save_tokenizer_directory(tmp_path_factory.mktemp("unicode") / "tok", vocab, merges, [EOT])


def test_hf_tokenizer_equals_the_fast_tokenizer_on_every_code_point(trained_directory: Path) -> None:
    from transformers import AutoTokenizer

    from hf_bpe.hf_tokenizer import HFBPETokenizer

    ours, fast = HFBPETokenizer.from_pretrained(trained_directory), AutoTokenizer.from_pretrained(trained_directory)
    assert fast.is_fast

    def same(text: str) -> bool:
        return ours(text)["input_ids"] == fast(text)["input_ids"]

    for code_points in BATCHES:
        text = batch_text(code_points)
        if not same(text):
            pytest.fail(f"HFBPETokenizer ids differ from the fast tokenizer's at {first_difference(code_points, same)}")
