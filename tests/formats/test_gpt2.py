"""GPT-2 file format: byte-to-unicode mapping, vocab.json / merges.txt round trips and errors."""

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hf_bpe.common.errors import InputError
from hf_bpe.formats.gpt2 import (
    MERGES_HEADER,
    bytes_to_unicode,
    indented_json_of_ints,
    load_gpt2,
    load_gpt2_merges,
    load_gpt2_merges_numbered,
    load_gpt2_vocab,
    merges_file_lines,
    save_gpt2,
    str_to_token,
    strs_to_tokens,
    token_to_str,
    tokens_to_strs,
)
from tests import FIXTURES


def test_byte_mapping_is_a_printable_bijection() -> None:
    mapping = bytes_to_unicode()
    assert sorted(mapping) == list(range(256))
    assert len(set(mapping.values())) == 256
    assert all(char.isprintable() and not char.isspace() for char in mapping.values())
    assert mapping[ord(" ")] == "Ġ" and mapping[ord("\n")] == "Ċ"


@given(st.binary(max_size=40))
def test_token_strings_round_trip(token: bytes) -> None:
    assert str_to_token(token_to_str(token)) == token


@given(st.lists(st.binary(max_size=12), max_size=30), st.sampled_from(["", " ", "a b", "\n", "\u0144", "\U0001F600"]))
def test_token_strings_read_in_one_go_as_one_by_one(tokens: list[bytes], stranger: str) -> None:
    """The fast paths of saving and loading (`tokens_to_strs`, `strs_to_tokens`) against `token_to_str` and
    `str_to_token`; a character outside the byte mapping (a space, a line feed, which the fast paths put between
    tokens, the one after the mapping's last, one outside UTF-16's first plane) sends them to the plain loop."""
    texts = list(map(token_to_str, tokens))
    assert tokens_to_strs(tokens) == texts
    assert strs_to_tokens(texts) == list(map(str_to_token, texts))
    if stranger:
        assert strs_to_tokens([*texts, "Ġ" + stranger]) is None


@given(st.dictionaries(st.text(), st.integers(0, 2**40), max_size=20))
def test_vocab_json_text_is_jsons(vocab: dict[str, int]) -> None:
    assert indented_json_of_ints(vocab) == json.dumps(vocab, ensure_ascii=False, indent=2)


def test_real_gpt2_files_load() -> None:
    vocab, merges = load_gpt2(FIXTURES / "gpt2_vocab.json", FIXTURES / "gpt2_merges.txt")
    assert len(vocab) == 50257 and len(merges) == 50000
    assert vocab[50256] == b"<|endoftext|>"
    assert vocab[262] == b" the"
    assert merges[0] == (b" ", b"t")  # the file has no #version header: the first line is a merge


def small_vocab() -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    vocab = {i: bytes([i]) for i in range(256)}
    merges = [(b" ", b"t"), (b"h", b"e"), (b" t", b"he"), (b"\n", b"\n"), (b"\xe4", b"\xb8")]
    for left, right in merges:
        vocab[len(vocab)] = left + right
    vocab[len(vocab)] = b"<|endoftext|>"
    return vocab, merges


def test_save_then_load_is_exact(tmp_path: Path) -> None:
    vocab, merges = small_vocab()
    vocab_path, merges_path = save_gpt2(vocab, merges, tmp_path / "out", special_tokens=["<|endoftext|>"])
    assert merges_path.read_text(encoding="utf-8").splitlines()[0] == MERGES_HEADER
    assert json.loads(vocab_path.read_text(encoding="utf-8"))["<|endoftext|>"] == len(vocab) - 1
    assert load_gpt2(vocab_path, merges_path) == (vocab, merges)
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]  # no temp files left


def test_merges_load_with_and_without_header(tmp_path: Path) -> None:
    (tmp_path / "with.txt").write_text(f"{MERGES_HEADER}\nĠ t\nh e\n", encoding="utf-8")
    (tmp_path / "without.txt").write_text("Ġ t\nh e\n", encoding="utf-8")
    expected = [(b" ", b"t"), (b"h", b"e")]
    assert load_gpt2_merges(tmp_path / "with.txt") == expected
    assert load_gpt2_merges(tmp_path / "without.txt") == expected


def test_merges_report_their_line_numbers(tmp_path: Path) -> None:
    """Header, blank lines and CRLF endings are skipped in one place; the line numbers are the file's."""
    path = tmp_path / "merges.txt"
    path.write_text(f"{MERGES_HEADER}\r\nĠ t\r\n\r\nh e\n\nx\n", encoding="utf-8")
    with pytest.raises(InputError, match="line 6: expected two tokens"):
        load_gpt2_merges_numbered(path)
    path.write_text(f"{MERGES_HEADER}\r\nĠ t\r\n\r\nh e\n\n", encoding="utf-8")
    assert merges_file_lines(path) == [(2, "Ġ t"), (4, "h e")]
    assert load_gpt2_merges_numbered(path) == ([(b" ", b"t"), (b"h", b"e")], [2, 4])
    merges, lines = load_gpt2_merges_numbered(FIXTURES / "gpt2_merges.txt")
    assert len(merges) == len(lines) == 50000 and lines[:2] == [1, 2]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"a": 0,\n "b": }', r"vocab.json: not valid JSON \(line 2"),
        ('{"a": 0,\n "b": 0}', r"vocab.json: line 2: id 0 is used twice"),
        ('{"a": 0,\n "b": "x"}', r"vocab.json: line 2: id of 'b' is 'x'"),
        ('["a"]', r"vocab.json: expected a JSON object"),
    ],
)
def test_corrupt_vocab_names_file_and_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "vocab.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError, match=message):
        load_gpt2_vocab(path)


def test_corrupt_merges_name_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "merges.txt"
    path.write_text("#version: 0.2\nĠ t\nthree parts here\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"merges.txt: line 3: expected two tokens"):
        load_gpt2_merges(path)
    path.write_text("Ġ t\na \u4e00\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"merges.txt: line 2: character '\u4e00' is not in the GPT-2 byte mapping"):
        load_gpt2_merges(path)


def test_missing_and_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"nope.json: no such file"):
        load_gpt2_vocab(tmp_path / "nope.json")
    with pytest.raises(InputError, match=r"is a directory"):
        load_gpt2_vocab(tmp_path)
    (tmp_path / "bad.txt").write_bytes(b"\xc3\x28 x\n")
    with pytest.raises(InputError, match=r"bad.txt: invalid UTF-8 at byte offset 0"):
        load_gpt2_merges(tmp_path / "bad.txt")
