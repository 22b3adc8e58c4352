"""The saved tokenizer directory: its files, their contents, reading it back, and the errors for bad directories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hf_bpe.common.errors import InputError
from hf_bpe.formats.gpt2 import MERGES_HEADER, load_gpt2, str_to_token, unicode_to_bytes
from hf_bpe.formats.hf_directory import (
    MODULE_NAME,
    NO_MAX_LENGTH,
    SAVED_FILES,
    load_tokenizer_directory,
    merges_from_strings,
    named_special_tokens,
    save_tokenizer_directory,
)
from tests import FIXTURES

EOT = "<|endoftext|>"


@pytest.fixture(scope="module")
def reference() -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """The CS336 reference tokenizer: 500 tokens trained with `<|endoftext|>` at id 0."""
    return load_gpt2(FIXTURES / "train-bpe-reference-vocab.json", FIXTURES / "train-bpe-reference-merges.txt")


@pytest.fixture()
def saved(tmp_path: Path, reference) -> Path:
    vocab, merges = reference
    return save_tokenizer_directory(tmp_path / "tok", vocab, merges, [EOT])


def read_json(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def test_writes_every_file_and_reads_back_the_same_tokenizer(saved: Path, reference) -> None:
    assert sorted(path.name for path in saved.iterdir()) == sorted(SAVED_FILES)
    vocab, merges, specials = load_tokenizer_directory(saved)
    assert (vocab, merges, specials) == (*reference, [EOT])


def test_merges_file_has_the_version_header(saved: Path) -> None:
    # transformers 4 drops the first line of merges.txt when it has no header.
    assert (saved / "merges.txt").read_text(encoding="utf-8").split("\n")[0] == MERGES_HEADER


def test_tokenizer_config_names_a_built_in_class_and_the_remote_code(saved: Path) -> None:
    config = read_json(saved / "tokenizer_config.json")
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert config["auto_map"] == {"AutoTokenizer": [f"{MODULE_NAME}.HFBPETokenizer", None]}
    assert (config["bos_token"], config["eos_token"], config["unk_token"]) == (EOT, EOT, EOT)
    assert "pad_token" not in config
    assert config["model_max_length"] == NO_MAX_LENGTH
    assert config["clean_up_tokenization_spaces"] is False
    assert config["added_tokens_decoder"]["0"]["content"] == EOT
    assert config["added_tokens_decoder"]["0"]["special"] is True
    assert read_json(saved / "special_tokens_map.json") == {"bos_token": EOT, "eos_token": EOT, "unk_token": EOT}


def test_tokenizer_json_is_gpt2_style_byte_level_bpe(saved: Path) -> None:
    content = read_json(saved / "tokenizer.json")
    assert content["pre_tokenizer"]["type"] == "ByteLevel"
    assert content["pre_tokenizer"]["add_prefix_space"] is False
    assert content["pre_tokenizer"]["use_regex"] is True
    assert content["decoder"]["type"] == "ByteLevel"
    assert content["post_processor"]["type"] == "ByteLevel"  # adds no tokens, like GPT-2's
    assert content["model"]["type"] == "BPE"
    assert [(token["content"], token["id"], token["special"]) for token in content["added_tokens"]] == [(EOT, 0, True)]


def test_module_file_imports_the_installed_package(saved: Path) -> None:
    source = (saved / f"{MODULE_NAME}.py").read_text(encoding="utf-8")
    assert "from hf_bpe import HFBPETokenizer" in source
    assert "pip install hf_bpe" in source


def test_options_and_several_special_tokens(tmp_path: Path, reference) -> None:
    vocab, merges = reference
    vocab = {**vocab, 500: b"<pad>", 501: "<|é|>".encode()}
    directory = save_tokenizer_directory(tmp_path, vocab, merges, ["<pad>", EOT, "<|é|>"], model_max_length=256,
                                         pad_token="<pad>")
    config = read_json(directory / "tokenizer_config.json")
    assert (config["eos_token"], config["pad_token"], config["model_max_length"]) == (EOT, "<pad>", 256)
    assert config["additional_special_tokens"] == ["<pad>", "<|é|>"]
    loaded_vocab, loaded_merges, specials = load_tokenizer_directory(directory)
    # Read back as text, although "é" is also a character of the GPT-2 byte mapping.
    assert loaded_vocab == vocab and loaded_merges == merges
    assert specials == [EOT, "<pad>", "<|é|>"]  # in id order


def test_without_special_tokens(tmp_path: Path, reference) -> None:
    vocab, merges = reference
    vocab = {token_id - 1: token for token_id, token in vocab.items() if token != EOT.encode()}
    directory = save_tokenizer_directory(tmp_path, vocab, merges, [])
    assert read_json(directory / "special_tokens_map.json") == {}
    assert load_tokenizer_directory(directory) == (vocab, merges, [])


def test_named_special_tokens_prefers_endoftext() -> None:
    assert named_special_tokens(["<s>", EOT])["eos_token"] == EOT
    assert named_special_tokens(["<s>", "</s>"])["eos_token"] == "<s>"


def test_keeps_an_existing_model_card(tmp_path: Path, reference) -> None:
    (tmp_path / "README.md").write_text("my card\n", encoding="utf-8")
    save_tokenizer_directory(tmp_path, *reference, [EOT])
    assert (tmp_path / "README.md").read_text(encoding="utf-8") == "my card\n"


def test_rejects_special_tokens_missing_from_the_vocab(tmp_path: Path, reference) -> None:
    with pytest.raises(ValueError, match="'<pad>' is not in the vocab"):
        save_tokenizer_directory(tmp_path, *reference, [EOT, "<pad>"])
    with pytest.raises(ValueError, match="pad token '<pad>' must be one of the special tokens"):
        save_tokenizer_directory(tmp_path, *reference, [EOT], pad_token="<pad>")


# ------------------------------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize("name", ["vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json"])
def test_missing_file(saved: Path, name: str) -> None:
    (saved / name).unlink()
    with pytest.raises(InputError, match=rf"{name}: no such file"):
        load_tokenizer_directory(saved)


def test_not_a_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="nowhere: not a directory"):
        load_tokenizer_directory(tmp_path / "nowhere")


def test_config_naming_an_unknown_special_token(saved: Path) -> None:
    config = read_json(saved / "tokenizer_config.json")
    config["pad_token"] = "<pad>"
    (saved / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(InputError, match=r"tokenizer_config.json: pad_token '<pad>' is not in vocab.json"):
        load_tokenizer_directory(saved)


def test_config_added_token_with_an_unknown_token(saved: Path) -> None:
    config = read_json(saved / "tokenizer_config.json")
    config["added_tokens_decoder"]["400"] = {"content": "<mask>", "special": True}  # an id vocab.json uses
    (saved / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(InputError, match=r"tokenizer_config.json: added token '<mask>' is not in vocab.json"):
        load_tokenizer_directory(saved)


def test_config_that_is_not_json(saved: Path) -> None:
    (saved / "tokenizer_config.json").write_text('{\n  "eos_token": \n', encoding="utf-8")
    with pytest.raises(InputError, match=r"tokenizer_config.json: not valid JSON \(line 3"):
        load_tokenizer_directory(saved)


def test_vocab_that_does_not_match_tokenizer_json(saved: Path) -> None:
    vocab = read_json(saved / "vocab.json")
    vocab["Ġthe"], vocab["Ġa"] = vocab["Ġa"], vocab["Ġthe"]
    (saved / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(InputError, match=r"tokenizer.json: model vocab differs from vocab.json .*'Ġ"):
        load_tokenizer_directory(saved)


def test_merges_that_do_not_match_tokenizer_json(saved: Path) -> None:
    lines = (saved / "merges.txt").read_text(encoding="utf-8").split("\n")
    lines[5], lines[6] = lines[6], lines[5]
    (saved / "merges.txt").write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(InputError, match=r"tokenizer.json: model merges differ from merges.txt .*at merge 5\)"):
        load_tokenizer_directory(saved)


def test_tokenizer_json_with_other_special_tokens(saved: Path) -> None:
    content = read_json(saved / "tokenizer.json")
    content["added_tokens"] = []
    (saved / "tokenizer.json").write_text(json.dumps(content), encoding="utf-8")
    with pytest.raises(InputError, match=r"tokenizer.json: added special tokens \[\] differ from those of "
                                         r"tokenizer_config.json \['<\|endoftext\|>'\]"):
        load_tokenizer_directory(saved)


def test_corrupt_vocab_names_the_file_and_line(saved: Path) -> None:
    (saved / "vocab.json").write_text('{"a": 0,\n "b": "one"}', encoding="utf-8")
    with pytest.raises(InputError, match=r"vocab.json: line 2: id of 'b' is 'one'"):
        load_tokenizer_directory(saved)


# ------------------------------------------------------------------------ added tokens and extra settings (issue 11)

def test_added_tokens_and_settings_are_written_for_every_reader(tmp_path: Path, reference) -> None:
    from transformers import AutoTokenizer

    from hf_bpe.formats.hf_directory import AddedTokenSpec

    vocab, merges = reference
    added = [AddedTokenSpec(500, "<mask>", special=True, lstrip=True), AddedTokenSpec(501, "hello world")]
    directory = save_tokenizer_directory(tmp_path / "tok", vocab, merges, [EOT], added_tokens=added,
                                         config={"padding_side": "left", "chat_template": "{{ 'x' }}"})
    config = read_json(directory / "tokenizer_config.json")
    assert config["added_tokens_decoder"]["500"] == {"content": "<mask>", "lstrip": True, "normalized": False,
                                                      "rstrip": False, "single_word": False, "special": True}
    assert config["padding_side"] == "left"
    fast = AutoTokenizer.from_pretrained(directory)
    assert (fast.padding_side, fast.chat_template) == ("left", "{{ 'x' }}")
    text = "say hello world <mask> now"
    ids = fast(text)["input_ids"]
    assert 501 in ids and 500 in ids
    loaded_vocab, loaded_merges, specials = load_tokenizer_directory(directory)
    assert specials == [EOT, "<mask>", "hello world"]
    assert loaded_vocab[500] == b"<mask>" and loaded_merges == merges


def test_added_tokens_must_follow_the_vocab(tmp_path: Path, reference) -> None:
    from hf_bpe.formats.hf_directory import AddedTokenSpec

    vocab, merges = reference
    with pytest.raises(ValueError, match="has id 502, expected 500"):
        save_tokenizer_directory(tmp_path / "tok", vocab, merges, [EOT], added_tokens=[AddedTokenSpec(502, "<x>")])


def test_added_tokens_beyond_vocab_json_must_be_contiguous(saved: Path) -> None:
    config = read_json(saved / "tokenizer_config.json")
    config["added_tokens_decoder"]["503"] = {"content": "<far>", "special": True}
    (saved / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(InputError, match=r"added tokens have ids \[503\], which do not follow vocab.json's 500"):
        load_tokenizer_directory(saved)


def test_vocab_and_merges_from_strings_name_bad_entries() -> None:
    from hf_bpe.formats.hf_directory import merges_from_strings, vocab_from_strings

    assert vocab_from_strings({"<|endoftext|>": 0, "Ġa": 1}, literal_tokens=["Ġa"]) == \
        {0: b"<|endoftext|>", 1: "Ġa".encode()}
    with pytest.raises(InputError, match=r"merges: merge 1 \('a b c'\) is 'a b c', not two tokens|merge 1 is"):
        merges_from_strings(["a b", "a b c"])
    with pytest.raises(InputError, match="character '€' is not in the GPT-2 byte mapping"):
        merges_from_strings([("a", "€")])


def test_the_model_of_a_tokenizer_json_is_read_back(saved: Path, reference) -> None:
    from hf_bpe.formats.hf_directory import read_tokenizers_json_model, vocab_from_strings

    encoder, merges, added = read_tokenizers_json_model(saved / "tokenizer.json")
    assert vocab_from_strings(encoder, [EOT]) == reference[0] and merges == reference[1]
    assert [(token.id, token.content, token.special) for token in added] == [(0, EOT, True)]


def test_the_public_writer_is_exported() -> None:
    import hf_bpe

    assert hf_bpe.save_tokenizer_directory is save_tokenizer_directory
    assert "Example" in (save_tokenizer_directory.__doc__ or "") or ">>>" in (save_tokenizer_directory.__doc__ or "")


def merges_one_by_one(merges: list) -> list[tuple[bytes, bytes]] | str:
    """`merges_from_strings` written plainly: each merge's parts in turn, or the error's message."""
    result = []
    for index, merge in enumerate(merges):
        parts = merge.split(" ") if isinstance(merge, str) else list(merge)
        if len(parts) != 2 or not all(isinstance(part, str) and part for part in parts):
            return f"merges: merge {index} is {merge!r}, not two tokens"
        try:
            result.append((str_to_token(parts[0]), str_to_token(parts[1])))
        except KeyError as error:
            return f"merges: merge {index} ({merge!r}): character {error.args[0]!r} is not in the GPT-2 byte mapping"
    return result


# Mapping characters, and a few that are not: a space, a line feed (the fast path's separator), a CJK character.
PART = st.text(st.sampled_from(sorted(unicode_to_bytes())[:40] + [" ", "\n", "\u4e00"]), max_size=4)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.tuples(PART, PART), st.lists(PART, min_size=1, max_size=3),
                          st.builds(" ".join, st.lists(PART, min_size=1, max_size=3))), max_size=8),
       st.sampled_from(["strings", "pairs", "mixed"]))
def test_merges_from_strings_equals_converting_each_merge(merges: list, form: str) -> None:
    if form == "strings":
        merges = [merge if isinstance(merge, str) else " ".join(merge) for merge in merges]
    elif form == "pairs":
        merges = [merge.split(" ") if isinstance(merge, str) else merge for merge in merges]
    expected = merges_one_by_one(merges)
    if isinstance(expected, str):
        with pytest.raises(InputError) as raised:
            merges_from_strings(merges)
        assert str(raised.value) == expected
    else:
        assert merges_from_strings(merges) == expected
