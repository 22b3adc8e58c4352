"""Tests for hf_bpe.common.files: input checks, chunk reading, replaced-byte counts and atomic writes."""

from __future__ import annotations

import codecs
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hf_bpe.common.errors import InputError
from hf_bpe.common.files import (
    check_input_files,
    find_invalid_utf8,
    is_url,
    read_small_text,
    read_text,
    write_text_atomically,
)


def test_read_text_reads_a_byte_range_or_the_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_bytes("héllo wörld".encode())
    assert read_text(path) == "héllo wörld"
    assert read_text(path, 0, 6) == "héllo"
    assert read_text(str(path), 7, len("héllo wörld".encode())) == "wörld"


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=40), st.data())
def test_read_text_with_replace_decodes_like_bytes_decode(data: bytes, draw: st.DataObject) -> None:
    import tempfile

    start = draw.draw(st.integers(0, len(data)))
    end = draw.draw(st.integers(start, len(data)))
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "x.bin"
        path.write_bytes(data)
        assert read_text(path, start, end, "replace") == data[start:end].decode("utf-8", "replace")
        try:
            expected = data[start:end].decode("utf-8")
        except UnicodeDecodeError as error:
            with pytest.raises(InputError) as raised:
                read_text(path, start, end)
            marks = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF32_BE)  # UTF-32LE's starts as UTF-16LE's
            compressed = (b"\x1f\x8b", b"\xfd7zXZ\x00", b"\x28\xb5\x2f\xfd", b"PK\x03\x04")  # gzip, xz, zstd, zip
            read = data[start:end]  # a range is told apart by what it holds, not by the rest of the file
            if start == 0 and read.startswith(marks):
                assert "byte order mark: the file is UTF-" in str(raised.value)
            elif start == 0 and (read.startswith(compressed) or read.startswith(b"BZh") and read[3:4].isdigit()):
                assert "-compressed, not UTF-8 text: decompress it first" in str(raised.value)
            else:
                assert str(raised.value).startswith(f"{path}: invalid UTF-8 at byte offset {start + error.start} (")
        else:
            assert read_text(path, start, end) == expected


@pytest.mark.parametrize("compress, kind", [("gzip", "gzip"), ("bz2", "bzip2"), ("lzma", "xz")])
def test_a_compressed_file_is_named_as_such(tmp_path: Path, compress: str, kind: str) -> None:
    """Training on the compressed bytes (what --errors replace would do) is never what is meant (issue 20)."""
    import importlib

    path = tmp_path / "corpus.txt.z"
    path.write_bytes(importlib.import_module(compress).compress("naïve text ".encode() * 100))
    with pytest.raises(InputError, match=rf"^{path}: is {kind}-compressed, not UTF-8 text: decompress it first "
                                         r"\(e.g. `"):
        read_text(path)
    assert read_text(path, errors="replace") == path.read_bytes().decode("utf-8", "replace")  # as asked


def test_read_text_names_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=f"^{tmp_path / 'gone.txt'}: no such file$"):
        read_text(tmp_path / "gone.txt")


@pytest.mark.parametrize("mark, name", [(codecs.BOM_UTF16_LE, "UTF-16LE"), (codecs.BOM_UTF16_BE, "UTF-16BE"),
                                        (codecs.BOM_UTF32_LE, "UTF-32LE"), (codecs.BOM_UTF32_BE, "UTF-32BE")])
def test_byte_order_marks_of_utf16_and_utf32_name_the_encoding_and_the_fix(tmp_path: Path, mark: bytes,
                                                                           name: str) -> None:
    path = tmp_path / "wide.txt"
    encoding = name.lower().replace("utf-", "utf_")
    path.write_bytes(mark + "hi there".encode(encoding))
    family = name[:6]
    message = (f"{path}: starts with a {name} byte order mark: the file is {family}, not UTF-8; convert it first, "
               f"e.g. `iconv -f {family} -t UTF-8 {path} > converted.txt`")
    with pytest.raises(InputError) as checked:
        check_input_files([path])
    assert str(checked.value) == message
    with pytest.raises(InputError) as read:
        read_text(path)
    assert str(read.value) == message


def test_utf8_byte_order_mark_is_kept_as_u_feff(tmp_path: Path) -> None:
    path = tmp_path / "bom.txt"
    path.write_bytes(codecs.BOM_UTF8 + b"hi")
    assert check_input_files([path]) == [5]
    assert read_text(path) == "\ufeffhi" == path.read_text(encoding="utf-8")


def test_check_input_files_returns_sizes_and_refuses_bad_paths(tmp_path: Path) -> None:
    full = tmp_path / "full.txt"
    full.write_bytes(b"some text")
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    assert check_input_files([full, str(empty)]) == [9, 0]
    with pytest.raises(InputError, match=f"^{empty}: file is empty \\(as are all 2 input files\\)$"):
        check_input_files([empty, empty])
    with pytest.raises(InputError, match=f"^{tmp_path}: is a directory, not a text file$"):
        check_input_files([tmp_path])
    with pytest.raises(InputError, match="^no input files given$"):
        check_input_files([])


def plain_replacements(data: bytes) -> tuple[int, int | None]:
    """Bytes that errors="replace" replaces, and the first offset: decoding strictly from each error onward."""
    replaced, first, position = 0, None, 0
    while True:
        try:
            data[position:].decode("utf-8")
            return replaced, first
        except UnicodeDecodeError as error:
            first = position + error.start if first is None else first
            replaced += error.end - error.start
            position += error.end


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=4) | st.sampled_from(["é€😀".encode(), b"ok"]), max_size=12).map(b"".join),
       st.data())
def test_find_invalid_utf8_matches_a_plain_decoder(data: bytes, draw: st.DataObject) -> None:
    import tempfile

    start = draw.draw(st.integers(0, len(data)))
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "x.bin"
        path.write_bytes(data)
        replaced, first = plain_replacements(data[start:])
        assert find_invalid_utf8(path, start, len(data)) == (replaced, None if first is None else start + first)


def test_write_text_atomically_replaces_whole_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text("old")
    write_text_atomically(target, "new ✓")
    assert target.read_text(encoding="utf-8") == "new ✓"
    assert sorted(os.listdir(tmp_path)) == ["out.json"]


# --- fsspec URLs -------------------------------------------------------------------------------------------------


def test_urls_are_checked_and_read_through_fsspec_like_local_paths(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_bytes("héllo wörld \xff".encode("latin-1"))
    url = path.as_uri()
    assert is_url(url) and not is_url(str(path))
    assert check_input_files([url]) == check_input_files([path])
    assert read_text(url, 0, 6, "replace") == read_text(path, 0, 6, "replace")
    assert find_invalid_utf8(url) == find_invalid_utf8(path)
    with pytest.raises(InputError, match=r"^file://.*a\.txt: invalid UTF-8 at byte offset 1 "):
        read_text(url)


def test_url_errors_name_the_url(tmp_path: Path) -> None:
    missing = (tmp_path / "missing.txt").as_uri()
    with pytest.raises(InputError, match=r"^file://.*missing\.txt: no such file$"):
        check_input_files([missing])
    with pytest.raises(InputError, match=r"^file://.*: is a directory, not a text file$"):
        check_input_files([tmp_path.as_uri()])
    with pytest.raises(InputError, match=r"^nosuchprotocol://x: cannot open this URL: "):
        check_input_files(["nosuchprotocol://x"])


def test_small_files_are_read_whole_with_one_line_errors(tmp_path: Path) -> None:
    path = tmp_path / "vocab.json"
    path.write_bytes(b'{"a": 0}')
    assert read_small_text(path) == '{"a": 0}'
    path.write_bytes(b'{"\xff": 0}')
    with pytest.raises(InputError, match=r"vocab\.json: invalid UTF-8 at byte offset 2 \(invalid start byte\)$"):
        read_small_text(path)
    with pytest.raises(InputError, match=r"missing\.json: no such file$"):
        read_small_text(tmp_path / "missing.json")
    with pytest.raises(InputError, match=r": is a directory, expected a file$"):
        read_small_text(tmp_path)
