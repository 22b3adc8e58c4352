"""A saved directory of tiktoken's o200k_harmony table (with the test rank file of tests/encode/test_special_tokens.py),
where `<|endofprompt|>` and `<|reserved_200018|>` share the id 200018, read by every loader.

hf_bpe's loaders (`Tokenizer` from the directory's files and `special_token_ids`, its tiktoken twin,
`HFBPETokenizer` also after `save_pretrained`) give tiktoken's ids on hypothesis text full of special-token strings.
`tokenizers` and the plain `AutoTokenizer` keep one added token per id, so they give the ids tiktoken gives with
`<|reserved_200018|>` encoded as ordinary text; every loader decodes every special id as tiktoken does.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
import tiktoken
import tokenizers
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import AutoTokenizer

from hf_bpe import Tokenizer
from hf_bpe.formats.hf_directory import load_tokenizer_directory, save_tokenizer_directory
from hf_bpe.formats.tiktoken import tiktoken_encoding
from hf_bpe.formats.tiktoken_files import load_tiktoken
from hf_bpe.hf.tokenizer import HFBPETokenizer
from tests.encode.test_special_tokens import special_text, table

ALIAS = "<|reserved_200018|>"


@cache
def harmony(directory: Path) -> dict[str, object]:
    """The loaders of the saved o200k_harmony directory, and tiktoken's encoding of the same table."""
    path, arguments = table("o200k_harmony")
    vocab, merges, specials = load_tiktoken(path, arguments["special_tokens"])
    save_tokenizer_directory(directory, vocab, merges, specials, pattern=arguments["pat_str"])
    loaded = load_tokenizer_directory(directory)
    hf = HFBPETokenizer.from_pretrained(directory)
    hf.save_pretrained(directory.parent / "resaved")
    return {
        "tiktoken": tiktoken.Encoding(**arguments),
        "from_files": Tokenizer.from_files(directory / "vocab.json", directory / "merges.txt",
                                           loaded.special_token_ids, pattern=loaded.pattern),
        "twin": tiktoken_encoding(loaded[0], loaded[1], loaded.special_token_ids, pattern=loaded.pattern),
        "hf_bpe_class": hf,
        "resaved": HFBPETokenizer.from_pretrained(directory.parent / "resaved"),
        "tokenizers": tokenizers.Tokenizer.from_file(str(directory / "tokenizer.json")),
        "auto": AutoTokenizer.from_pretrained(directory),
    }


@pytest.fixture(scope="module")
def loaders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    return harmony(tmp_path_factory.mktemp("harmony") / "o200k_harmony")


def encode_with(name: str, loader: object, text: str) -> list[int]:
    if name == "tiktoken" or name == "twin":
        return loader.encode(text, allowed_special="all")  # type: ignore[attr-defined]
    if name == "from_files":
        return loader.encode(text)  # type: ignore[attr-defined]
    if name == "tokenizers":
        return loader.encode(text).ids  # type: ignore[attr-defined]
    return loader(text)["input_ids"]  # type: ignore[operator]


def check(loaders: dict[str, object], text: str) -> None:
    encoding: tiktoken.Encoding = loaders["tiktoken"]  # type: ignore[assignment]
    expected = encoding.encode(text, allowed_special="all")
    as_text = encoding.encode(text, allowed_special=encoding.special_tokens_set - {ALIAS}, disallowed_special=())
    for name, loader in loaders.items():
        got = encode_with(name, loader, text)
        assert got == (as_text if name in ("tokenizers", "auto") else expected), (name, text)


SPECIALS = ["<|endofprompt|>", ALIAS, "<|endoftext|>", "<|startoftext|>", "<|reserved_200017|>", "<|call|>",
            "<|reserved_201087|>"]


def test_every_loader_reads_the_shared_id(loaders: dict[str, object]) -> None:
    check(loaders, f"a{ALIAS}b<|endofprompt|> c {ALIAS}{ALIAS}<|reserved_200017|>")
    assert loaders["hf_bpe_class"].init_kwargs["special_token_aliases"] == {ALIAS: 200018}  # type: ignore[attr-defined]
    assert loaders["resaved"].init_kwargs["special_token_aliases"] == {ALIAS: 200018}  # type: ignore[attr-defined]


def test_every_loader_decodes_every_special_id_as_tiktoken(loaders: dict[str, object]) -> None:
    encoding: tiktoken.Encoding = loaders["tiktoken"]  # type: ignore[assignment]
    ids = sorted(set(table("o200k_harmony")[1]["special_tokens"].values()))
    expected = encoding.decode(ids)
    assert loaders["from_files"].decode(ids) == expected  # type: ignore[attr-defined]
    assert loaders["twin"].decode(ids) == expected  # type: ignore[attr-defined]
    assert loaders["tokenizers"].decode(ids, skip_special_tokens=False) == expected  # type: ignore[attr-defined]
    for name in ("hf_bpe_class", "resaved", "auto"):
        assert loaders[name].decode(ids) == expected, name  # type: ignore[attr-defined]


@settings(max_examples=80, deadline=None)
@given(text=special_text(SPECIALS))
def test_every_loader_gives_tiktokens_ids_on_random_text(loaders: dict[str, object], text: str) -> None:
    check(loaders, text)


@settings(max_examples=20, deadline=None)
@given(texts=st.lists(special_text(SPECIALS), min_size=2, max_size=4))
def test_batches_of_texts_too(loaders: dict[str, object], texts: list[str]) -> None:
    encoding: tiktoken.Encoding = loaders["tiktoken"]  # type: ignore[assignment]
    assert loaders["hf_bpe_class"](texts)["input_ids"] == encoding.encode_batch(  # type: ignore[operator]
        texts, allowed_special="all")
