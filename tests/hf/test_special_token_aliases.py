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
def directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("harmony") / "o200k_harmony"


@pytest.fixture(scope="module")
def loaders(directory: Path) -> dict[str, object]:
    return harmony(directory)


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


REMOTE_SCRIPT = r'''
import json, sys
from transformers import AutoTokenizer
tokenizer = AutoTokenizer.from_pretrained(sys.argv[1], trust_remote_code=sys.argv[2] == "remote")
texts = json.loads(sys.stdin.read())
print(json.dumps({"class": type(tokenizer).__name__, "ids": [tokenizer(text)["input_ids"] for text in texts],
                  "decoded": tokenizer.decode([200018])}))
'''


@pytest.mark.parametrize("how", ["remote", "plain"])
def test_auto_tokenizer_in_a_fresh_process(loaders: dict[str, object], directory: Path,
                                           tmp_path_factory: pytest.TempPathFactory, how: str) -> None:
    """With remote code (hf_bpe's class, also under transformers 4 when $HF_BPE_PYTHON points there) the shared id
    is tiktoken's; the plain AutoTokenizer encodes the alias as text."""
    import json
    import subprocess

    from tests.hf.test_loading import PYTHON, subprocess_env

    texts = [f"a{ALIAS}b<|endofprompt|>", "<|reserved_200017|> x <|call|>"]
    work = tmp_path_factory.mktemp("fresh")
    result = subprocess.run([PYTHON, "-c", REMOTE_SCRIPT, str(directory), how], input=json.dumps(texts),
                            capture_output=True, text=True, encoding="utf-8", cwd=work, env=subprocess_env(work),
                            timeout=600)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    encoding: tiktoken.Encoding = loaders["tiktoken"]  # type: ignore[assignment]
    allowed = encoding.special_tokens_set - ({ALIAS} if how == "plain" else set())
    assert answer["ids"] == [encoding.encode(text, allowed_special=allowed, disallowed_special=()) for text in texts]
    assert answer["decoded"] == "<|endofprompt|>"
    assert (answer["class"] == "HFBPETokenizer") == (how == "remote")


def test_a_tokenizer_trained_like_it_keeps_the_alias_at_its_tokens_new_id(loaders: dict[str, object]) -> None:
    from tests import FIXTURES

    old: HFBPETokenizer = loaders["hf_bpe_class"]  # type: ignore[assignment]
    texts = (FIXTURES / "tinystories_sample.txt").read_text(encoding="utf-8").split("\n\n")
    new = old.train_new_from_iterator(texts, 256 + len(old.added_tokens_decoder) + 40, progress=False)
    new_id = new.convert_tokens_to_ids("<|endofprompt|>")
    assert new_id != 200018 and new.init_kwargs["special_token_aliases"] == {ALIAS: new_id}
    assert new(f"a{ALIAS}b<|endofprompt|>")["input_ids"].count(new_id) == 2


def test_tokenize_dataset_with_special_tokens_encodes_the_alias_as_its_id(loaders: dict[str, object],
                                                                          directory: Path) -> None:
    import pickle

    from hf_bpe.data.encoders import HFBPEEncoder

    encoding: tiktoken.Encoding = loaders["tiktoken"]  # type: ignore[assignment]
    texts = [f"a{ALIAS}b<|endofprompt|>", "<|reserved_200017|> x"]
    encoder = pickle.loads(pickle.dumps(HFBPEEncoder.from_directory(directory, allow_special=True)))  # as map sends it
    assert [list(ids) for ids in encoder(texts)] == encoding.encode_batch(texts, allowed_special="all")
    ordinary = HFBPEEncoder.from_directory(directory)
    assert [list(ids) for ids in ordinary(texts)] == encoding.encode_batch(texts, disallowed_special=())
