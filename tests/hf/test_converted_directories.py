r"""Directories that other tools wrote: transformers' tiktoken converter, run on tiktoken's gpt2 encoding.

`transformers.integrations.tiktoken.convert_tiktoken_to_fast(encoding, dir)` dumps the encoding's ranks to a file
(through `blobfile`, which it needs for that alone) and runs `TikTokenConverter(that file,
pattern=encoding._pat_str, extra_special_tokens=encoding._special_tokens)` (`additional_special_tokens` in
transformers 4), which gives the special tokens the ids after the ranks. The test writes the rank file itself and
runs the converter on it: the same steps. The ranks are GPT-2's (tests/fixtures/gpt2_vocab.json; tiktoken's gpt2
encoding is these ranks with its r50k pattern), so the directory is what a user converting tiktoken's gpt2 gets:
only a tokenizer.json, whose Split regex ends `...|\s++$|\s+(?!\S)|\s`, and merges for every split of every token.

Every loader gives tiktoken's ids on 20,000 whitespace-heavy texts: the plain `AutoTokenizer`, `tokenizers` and
`HFBPETokenizer` on the converted directory, and all six loaders of tests/hf/test_loading.py (each in a fresh
process) on the directory `HFBPETokenizer.save_pretrained` writes from it.
"""

from __future__ import annotations

import base64
import inspect
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import tiktoken
import tiktoken_ext.openai_public
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tiktoken.load import load_tiktoken_bpe

from hf_bpe.common.errors import InputError
from hf_bpe.formats.gpt2 import load_gpt2_vocab
from hf_bpe.formats.hf_directory import read_directory_pattern
from hf_bpe.hf.tokenizer import HFBPETokenizer
from hf_bpe.pretokenize import GPT2_PATTERN
from tests import FIXTURES
from tests.hf.test_loading import Loader

EOT = "<|endoftext|>"
R50K = tiktoken_ext.openai_public.r50k_pat_str
# Loaders that read the converted directory itself, and those that need the files hf_bpe saves (vocab.json and
# merges.txt, hf_bpe_tokenizer.py for remote code).
ON_THE_CONVERTED_DIRECTORY = ("auto", "tokenizers", "hf_bpe_class")
ON_THE_SAVED_DIRECTORY = ("remote_code", "hf_bpe", "tiktoken")

WHITESPACE = [" ", "  ", "   ", "\n", "\n\n", "\r\n", "\r", "\t", " \t", "\t\n", "\xa0", "\u3000", "\u2028", "\x85",
              "\x0b", "\x0c", "\u2009", "\u200b", " \n ", "\n \n"]
WORDS = ["a", "Hello", "'s", "'LL", "'ve", "12345", "7", "!", "?!", "...", "é", "日本", "\U0001f600", "x1", EOT]
whitespace_heavy = st.lists(st.sampled_from(WHITESPACE) | st.sampled_from(WHITESPACE) | st.sampled_from(WORDS)
                            | st.characters(exclude_categories=["Cs"]), max_size=12).map("".join)


def write_rank_file(path: Path, ranks: dict[bytes, int]) -> None:
    """A tiktoken rank file, as tiktoken's `dump_tiktoken_bpe` writes it."""
    path.write_bytes(b"".join(base64.b64encode(token) + b" " + str(rank).encode() + b"\n"
                              for token, rank in sorted(ranks.items(), key=lambda item: item[1])))


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers.convert_slow_tokenizer import TikTokenConverter

    directory = tmp_path_factory.mktemp("converted") / "gpt2"
    (directory / "tiktoken").mkdir(parents=True)
    rank_file = directory / "tiktoken" / "tokenizer.model"
    vocab = load_gpt2_vocab(FIXTURES / "gpt2_vocab.json")
    write_rank_file(rank_file, {token: token_id for token_id, token in vocab.items() if token_id != 50256})
    # transformers 5 names the special tokens extra_special_tokens, 4 additional_special_tokens.
    parameters = inspect.signature(TikTokenConverter.__init__).parameters
    specials = "extra_special_tokens" if "extra_special_tokens" in parameters else "additional_special_tokens"
    converter = TikTokenConverter(vocab_file=str(rank_file), pattern=R50K, **{specials: [EOT]})
    converter.converted().save(str(directory / "tokenizer.json"))
    return directory


@pytest.fixture(scope="module")
def reference(converted: Path) -> tiktoken.Encoding:
    """tiktoken's gpt2 encoding, from the rank file the converter read."""
    ranks = load_tiktoken_bpe(str(converted / "tiktoken" / "tokenizer.model"))
    return tiktoken.Encoding("gpt2-from-fixtures", pat_str=R50K, mergeable_ranks=ranks, special_tokens={EOT: 50256})


@pytest.fixture(scope="module")
def saved(converted: Path) -> Path:
    target = converted.parent / "saved"
    HFBPETokenizer.from_pretrained(converted).save_pretrained(target)
    return target


@pytest.fixture(scope="module")
def loaders(converted: Path, saved: Path) -> Iterator[list[tuple[Loader, list[int]]]]:
    """Each loader with the directories it reads (indexes into its own list of directories)."""
    workdir = converted.parent
    started = [(Loader(name, [converted, saved], [[EOT]] * 2, workdir), [0, 1])
               for name in ON_THE_CONVERTED_DIRECTORY]
    started += [(Loader(name, [saved], [[EOT]], workdir), [0]) for name in ON_THE_SAVED_DIRECTORY]
    try:
        for loader, _ in started:
            loader.handshake_answer = loader.handshake()
        yield started
    finally:
        for loader, _ in started:
            loader.close()


def test_the_converter_writes_the_r50k_regex_that_hf_bpe_reads_as_gpt2s(converted: Path) -> None:
    content = json.loads((converted / "tokenizer.json").read_text(encoding="utf-8"))
    split, byte_level = content["pre_tokenizer"]["pretokenizers"]
    assert split["pattern"]["Regex"] == R50K and split["pattern"]["Regex"].endswith(r"|\s++$|\s+(?!\S)|\s")
    assert byte_level["type"] == "ByteLevel" and byte_level["use_regex"] is False
    assert len(content["model"]["merges"]) > 50_000  # a merge for every split of a token into two tokens
    assert read_directory_pattern(converted) == GPT2_PATTERN


def seeded_whitespace_heavy(count: int, seed: int) -> list[str]:
    """`count` texts drawn as `whitespace_heavy` draws them (up to 12 parts: whitespace runs twice as often as words,
    any code point but a surrogate), from a seeded generator: hypothesis is slow to draw this many."""
    generator = random.Random(seed)

    def part() -> str:
        choice = generator.randrange(4)
        if choice < 2:
            return generator.choice(WHITESPACE)
        if choice == 2:
            return generator.choice(WORDS)
        return chr(generator.choice([generator.randrange(0xD800), generator.randrange(0xE000, sys.maxunicode + 1)]))

    return ["".join(part() for _ in range(generator.randrange(13))) for _ in range(count)]


def assert_every_loader_gives_tiktokens_ids(loaders, reference: tiktoken.Encoding, texts: list[str]) -> None:
    expected = reference.encode_batch(texts, allowed_special="all")
    for loader, directories in loaders:
        for directory in directories:
            got = loader.encode(directory, texts)
            for index, (ids, want) in enumerate(zip(got, expected)):
                assert ids == want, f"{loader.name} (directory {directory}) on {texts[index]!r}: {ids} != {want}"


def test_every_loader_gives_tiktokens_ids_on_20000_whitespace_heavy_texts(loaders, reference: tiktoken.Encoding
                                                                          ) -> None:
    assert_every_loader_gives_tiktokens_ids(loaders, reference, seeded_whitespace_heavy(20_000, seed=0))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow, HealthCheck.data_too_large])
@given(texts=st.lists(whitespace_heavy, min_size=100, max_size=100))
@example(texts=["a \n\n b \n", " \n", "x  \t\n", "\n\n\n", "  Hello\u3000 \u2028", f"end {EOT}\n "] * 17)
def test_every_loader_gives_tiktokens_ids_on_whitespace_heavy_text(loaders, reference: tiktoken.Encoding,
                                                                   texts: list[str]) -> None:
    assert_every_loader_gives_tiktokens_ids(loaders, reference, texts)


def test_the_saved_directory_holds_gpt2s_pre_tokenizer(saved: Path) -> None:
    # The r50k regex is GPT-2's pattern, so hf_bpe writes GPT-2's own pre-tokenizer back.
    content = json.loads((saved / "tokenizer.json").read_text(encoding="utf-8"))
    assert content["pre_tokenizer"]["type"] == "ByteLevel" and content["pre_tokenizer"]["use_regex"] is True


def test_a_regex_that_means_something_else_is_refused_saying_where(converted: Path, tmp_path: Path) -> None:
    # The same directory with `\s+$`, which Oniguruma also ends before a line feed: refused, naming `$` and its offset.
    content = json.loads((converted / "tokenizer.json").read_text(encoding="utf-8"))
    content["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = R50K.replace(r"\s++$", r"\s+$")
    (tmp_path / "tokenizer.json").write_text(json.dumps(content), encoding="utf-8")
    with pytest.raises(InputError) as raised:
        HFBPETokenizer.from_pretrained(tmp_path)
    message = str(raised.value)
    assert message.startswith(f"{tmp_path / 'tokenizer.json'}: the Split regex ")
    assert f"`$` at character {R50K.index('$') - 1} (Oniguruma also matches it before a line feed" in message
