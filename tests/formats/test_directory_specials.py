"""Special tokens that share an id in a saved directory (`hf_bpe.formats.directory_specials`): the HF files hold the
token the id decodes as, `tokenizer_config.json` the others; reading the directory back gives tiktoken's whole table,
and a table or a config that does not fit is refused with a message naming the token or the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hf_bpe.common.errors import InputError
from hf_bpe.formats.directory_specials import ALIASES_KEY, split_aliases
from hf_bpe.formats.hf_directory import load_tokenizer_directory, save_tokenizer_directory

BYTES = {i: bytes([i]) for i in range(256)}
TABLE = {"<|endoftext|>": 256, "<|endofprompt|>": 257, "<|reserved_257|>": 257, "<|reserved_258|>": 258}


def saved(tmp_path: Path) -> Path:
    vocab = BYTES | {256: b"<|endoftext|>", 257: b"<|endofprompt|>", 258: b"<|reserved_258|>"}
    return save_tokenizer_directory(tmp_path / "tok", vocab, [], TABLE)


def test_the_hf_files_hold_one_token_per_id_and_the_config_the_others(tmp_path: Path) -> None:
    directory = saved(tmp_path)
    config = json.loads((directory / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert config[ALIASES_KEY] == {"<|reserved_257|>": 257}
    assert config["added_tokens_decoder"]["257"]["content"] == "<|endofprompt|>"
    tokenizer_json = json.loads((directory / "tokenizer.json").read_text(encoding="utf-8"))
    assert [token["content"] for token in tokenizer_json["added_tokens"]] == [
        "<|endoftext|>", "<|endofprompt|>", "<|reserved_258|>"]
    assert "<|reserved_257|>" not in json.loads((directory / "vocab.json").read_text(encoding="utf-8"))


def test_reading_back_gives_the_whole_table(tmp_path: Path) -> None:
    loaded = load_tokenizer_directory(saved(tmp_path))
    vocab, _, specials = loaded
    assert specials == ["<|endoftext|>", "<|endofprompt|>", "<|reserved_258|>"] and vocab[257] == b"<|endofprompt|>"
    assert loaded.special_token_ids == TABLE and list(loaded.special_token_ids) == list(TABLE)


def test_a_directory_without_shared_ids_has_no_aliases(tmp_path: Path) -> None:
    directory = save_tokenizer_directory(tmp_path / "plain", BYTES | {256: b"<s>"}, [], {"<s>": 256})
    assert ALIASES_KEY not in json.loads((directory / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert load_tokenizer_directory(directory).special_token_ids == {"<s>": 256}


def test_a_token_at_an_id_without_a_special_token_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"special token '<r>' has id 97, where the vocab holds b'a' rather than"):
        save_tokenizer_directory(tmp_path / "bad", BYTES, [], {"<r>": 97})
    with pytest.raises(ValueError, match=r"special token '<r>' has id 300, where the vocab holds nothing"):
        split_aliases(BYTES, {"<r>": 300})
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize(("aliases", "message"), [
    ([1, 2], "special_token_aliases must be an object mapping tokens to ids"),
    ({"<|reserved_9|>": 9}, r"special_token_aliases: '<\|reserved_9\|>' -> 9 is not a further token for the id"),
    ({"<|endoftext|>": 257}, r"special_token_aliases: '<\|endoftext\|>' -> 257 is not a further token"),
    ({"<x>": "257"}, r"special_token_aliases: '<x>' -> '257' is not a further token"),
])
def test_a_config_with_bad_aliases_is_named(tmp_path: Path, aliases: object, message: str) -> None:
    directory = saved(tmp_path)
    config_path = directory / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config_path.write_text(json.dumps({**config, ALIASES_KEY: aliases}), encoding="utf-8")
    with pytest.raises(InputError, match=f"^{config_path}: {message}"):
        load_tokenizer_directory(directory)
