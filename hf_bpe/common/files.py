"""Reading input files and writing output files: one-line errors for bad input, no half-written output.

Text files are UTF-8, read in byte ranges (`read_text`) so that a corpus larger than memory is read one chunk at a
time. A corpus path may also be an fsspec URL (`s3://bucket/corpus.txt`, `file:///data/corpus.txt`, ...) when fsspec
is installed, so that every node of a cluster reads the same input (`open_binary`). A UTF-8 byte order mark is kept
as the character U+FEFF, as Python's "utf-8" codec and the HF tokenizers
trainer both keep it; a UTF-16 or UTF-32 byte order mark is refused up front (`check_input_files`), naming the
encoding and how to convert the file. A compressed file (gzip, bzip2, xz, zstd, zip) is not read transparently: its
first invalid byte is reported as such ("decompress it first"), not as invalid UTF-8 (errors="replace" reads its
bytes as asked).
"""

from __future__ import annotations

import codecs
import os
import stat
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO, Union

from hf_bpe.common.errors import InputError
from hf_bpe.common.outputs import publish_file

PathArg = Union[str, "os.PathLike[str]"]

# Longest first: the UTF-32 LE mark starts with the UTF-16 LE one.
_OTHER_ENCODING_MARKS = [(codecs.BOM_UTF32_LE, "UTF-32LE"), (codecs.BOM_UTF32_BE, "UTF-32BE"),
                         (codecs.BOM_UTF16_LE, "UTF-16LE"), (codecs.BOM_UTF16_BE, "UTF-16BE")]


def is_url(path: PathArg) -> bool:
    """Whether `path` is a URL with a protocol (`s3://...`, `file://...`) rather than a local path.

    >>> is_url("s3://bucket/corpus.txt"), is_url("data/corpus.txt")
    (True, False)
    """
    return isinstance(path, str) and "://" in path


def local_bytes(paths: Sequence[PathArg]) -> int | None:
    """The total size of the files, or None when one is a URL or cannot be read (counting will say why).

    >>> local_bytes([]), local_bytes(["https://example.com/a.txt"])
    (0, None)
    """
    if any(map(is_url, paths)):
        return None
    try:
        return sum(map(os.path.getsize, paths))
    except OSError:
        return None


def open_binary(path: PathArg) -> BinaryIO:
    """Open a local file, or an fsspec URL, for reading bytes (seekable)."""
    if not is_url(path):
        return open(path, "rb")
    filesystem, url_path = _url_filesystem(path)
    return filesystem.open(url_path, "rb")


def check_input_files(paths: Sequence[PathArg]) -> list[int]:
    """The sizes of the files, after checking each is a readable regular file that is not UTF-16 or UTF-32.

    Raises InputError for a missing, unreadable or non-regular file, a UTF-16/UTF-32 byte order mark, no files, or
    files that are all empty.
    """
    if not paths:
        raise InputError("no input files given")
    sizes = []
    for path in paths:
        name = os.fspath(path)
        size = _file_size(path)
        try:
            with open_binary(path) as file:
                _check_no_other_encoding_mark(name, file.read(4))
        except OSError as error:
            raise InputError(f"{name}: cannot read file: {error.strerror or error}") from None
        sizes.append(size)
    if not any(sizes):
        others = f" (as are all {len(paths)} input files)" if len(paths) > 1 else ""
        raise InputError(f"{os.fspath(paths[0])}: file is empty{others}")
    return sizes


def _file_size(path: PathArg) -> int:
    """The size of a regular file, given as a local path or a URL; InputError naming it otherwise."""
    name = os.fspath(path)
    try:
        if is_url(path):
            filesystem, url_path = _url_filesystem(name)
            info = filesystem.info(url_path)
            kind = "directory" if info.get("type") == "directory" else "file"
            size = info.get("size")
        else:
            status = os.stat(path)
            kind = "directory" if stat.S_ISDIR(status.st_mode) else "file" if stat.S_ISREG(status.st_mode) else ""
            size = status.st_size
    except FileNotFoundError:
        raise InputError(f"{name}: no such file") from None
    except OSError as error:
        raise InputError(f"{name}: cannot read file: {error.strerror or error}") from None
    if kind == "directory":
        raise InputError(f"{name}: is a directory, not a text file")
    if kind != "file":
        raise InputError(f"{name}: is not a regular file")
    return int(size or 0)


def _url_filesystem(url: str) -> tuple[Any, str]:
    """(fsspec filesystem, path in it) for a URL; InputError when fsspec or the protocol's package is missing."""
    try:
        import fsspec.core
    except ImportError:
        raise InputError(f"{url}: reading URLs needs fsspec (pip install fsspec, or pip install 'hf_bpe[ray]')") \
            from None
    try:
        return fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as error:
        raise InputError(f"{url}: cannot open this URL: {error}") from None


def read_text(path: PathArg, start: int = 0, end: int | None = None, errors: str = "strict") -> str:
    """The UTF-8 text of bytes [start, end) of a file (the whole file by default).

    With errors="strict", invalid UTF-8 raises InputError naming the file and the absolute byte offset of the first
    bad byte; errors="replace" decodes each bad sequence as U+FFFD (exactly like `bytes.decode`).

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "a.txt"
    >>> _ = path.write_bytes("naïve \\xff".encode("latin-1"))
    >>> read_text(path, 0, 6, "replace")
    'na\\ufffdve '
    >>> read_text(path)
    Traceback (most recent call last):
    ...
    hf_bpe.common.errors.InputError: ...a.txt: invalid UTF-8 at byte offset 2 (invalid continuation byte); ...
    """
    name = os.fspath(path)
    try:
        with open_binary(path) as file:
            file.seek(start)
            data = file.read() if end is None else file.read(end - start)
    except FileNotFoundError:
        raise InputError(f"{name}: no such file") from None
    except OSError as error:
        raise InputError(f"{name}: cannot read file: {error.strerror}") from None
    try:
        return data.decode("utf-8", errors)
    except UnicodeDecodeError as error:
        if start == 0:
            _check_no_other_encoding_mark(name, data[:4])
            _check_not_compressed(name, data[:6])
        raise InputError(
            f"{name}: invalid UTF-8 at byte offset {start + error.start} ({error.reason}); "
            "to replace bad bytes with U+FFFD, pass errors=\"replace\" (CLI: --errors replace)"
        ) from None


def find_invalid_utf8(path: PathArg, start: int = 0, end: int | None = None) -> tuple[int, int | None]:
    """(bytes that errors="replace" replaces, absolute offset of the first one or None) in bytes [start, end).

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "a.txt"
    >>> _ = path.write_bytes(b"ok \\xff\\xfe and \\xe2\\x82")
    >>> find_invalid_utf8(path)
    (4, 3)
    """
    with open_binary(path) as file:
        file.seek(start)
        data = file.read() if end is None else file.read(end - start)
    _replacements.bytes, _replacements.first = 0, None
    data.decode("utf-8", _COUNTING_REPLACE)
    first = None if _replacements.first is None else start + _replacements.first
    return _replacements.bytes, first


def read_small_bytes(path: PathArg, expected: str = "a file") -> bytes:
    """The whole content of a small file; InputError naming the file for a missing file, a directory (where
    `expected` was wanted) or an unreadable file."""
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise InputError(f"{os.fspath(path)}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{os.fspath(path)}: is a directory, expected {expected}") from None
    except OSError as error:
        raise InputError(f"{os.fspath(path)}: cannot read file: {error.strerror or error}") from None


def read_small_text(path: PathArg) -> str:
    """The whole UTF-8 text of a small file such as vocab.json, merges.txt or a JSON config.

    Raises InputError naming the file for a missing file, a directory, an unreadable file or invalid UTF-8 (with the
    byte offset).
    """
    data = read_small_bytes(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"{os.fspath(path)}: invalid UTF-8 at byte offset {error.start} ({error.reason})") from None


def write_text_atomically(path: str | os.PathLike[str], text: str) -> Path:
    """Write UTF-8 text to a temporary file beside `path`, then rename it over `path`.

    An interrupted write leaves `path` as it was (and no temporary file behind, short of a hard kill).

    >>> import tempfile
    >>> target = Path(tempfile.mkdtemp()) / "hello.txt"
    >>> write_text_atomically(target, "hi\\n").read_text()
    'hi\\n'
    """
    return write_atomically(path, lambda temporary: temporary.write_text(text, encoding="utf-8"))


def write_atomically(path: PathArg, write: Callable[[Path], object], replace: bool = True) -> Path:
    """Have `write` write a temporary file beside `path`, then rename it to `path`: readers see the old file or the
    whole new one, never a part. The temporary file is removed if `write` fails. Without `replace`, an existing
    `path` (one that appeared meanwhile too) is never replaced: FileExistsError (`publish_file`)."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(temporary)
        publish_file(temporary, path, replace)
    finally:
        temporary.unlink(missing_ok=True)
    return path


def _check_no_other_encoding_mark(name: str, prefix: bytes) -> None:
    for mark, encoding in _OTHER_ENCODING_MARKS:
        if prefix.startswith(mark):
            family = encoding[:6]
            raise InputError(f"{name}: starts with a {encoding} byte order mark: the file is {family}, not UTF-8; "
                             f"convert it first, e.g. `iconv -f {family} -t UTF-8 {name} > converted.txt`")


# The magic numbers of compressed and archive formats: such a file is bytes, not text, and "replace" would train on
# the compressed bytes.
_COMPRESSED_MAGIC = [(b"\x1f\x8b", "gzip", "gunzip -k"), (b"BZh", "bzip2", "bunzip2 -k"),
                     (b"\xfd7zXZ\x00", "xz", "unxz -k"), (b"\x28\xb5\x2f\xfd", "zstd", "unzstd"),
                     (b"PK\x03\x04", "zip", "unzip")]


def _check_not_compressed(name: str, prefix: bytes) -> None:
    """InputError for a file that starts like a gzip, bzip2, xz, zstd or zip file.

    >>> _check_not_compressed("corpus.txt.gz", b"\\x1f\\x8b\\x08\\x00")
    Traceback (most recent call last):
    ...
    hf_bpe.common.errors.InputError: corpus.txt.gz: is gzip-compressed, not UTF-8 text: decompress it first (e.g. \
`gunzip -k corpus.txt.gz`) and train on the text
    """
    for magic, kind, command in _COMPRESSED_MAGIC:
        if prefix.startswith(magic) and not (kind == "bzip2" and not prefix[3:4].isdigit()):
            raise InputError(f"{name}: is {kind}-compressed, not UTF-8 text: decompress it first (e.g. "
                             f"`{command} {name}`) and train on the text")


# The "replace" decoding error handler, also counting the bytes it replaces (per thread) for `find_invalid_utf8`.
_COUNTING_REPLACE = "hf_bpe.count_and_replace"
_replacements = threading.local()


def _count_and_replace(error: UnicodeError) -> tuple[str, int]:
    assert isinstance(error, UnicodeDecodeError)
    if _replacements.first is None:
        _replacements.first = error.start
    _replacements.bytes += error.end - error.start
    return "\ufffd", error.end


codecs.register_error(_COUNTING_REPLACE, _count_and_replace)

__all__ = ["PathArg", "check_input_files", "find_invalid_utf8", "is_url", "open_binary", "read_small_text", "read_text",
           "write_text_atomically"]
