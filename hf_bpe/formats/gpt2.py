"""The GPT-2 file format: `vocab.json` and `merges.txt` with the byte-to-unicode mapping.

GPT-2 stores byte strings as text by mapping each byte to a printable character (`bytes_to_unicode`): printable
Latin-1 bytes map to themselves and the rest to U+0100 onwards, so a space is written as "Ġ".
`merges.txt` starts with a `#version: 0.2` header (transformers 4 drops the first line of a file without one, so we
always write it) and holds one merge per line, the two parts separated by a single space. Loading accepts files with
or without the header.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from functools import lru_cache
from itertools import chain, repeat
from json.encoder import encode_basestring  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any

import numpy as np

from hf_bpe.common.errors import InputError
from hf_bpe.common.files import read_small_text, write_text_atomically

MERGES_HEADER = "#version: 0.2"


@lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """The GPT-2 map from each byte value to the printable character that stands for it.

    >>> bytes_to_unicode()[ord(" ")], bytes_to_unicode()[ord("a")]
    ('Ġ', 'a')
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    mapping = {byte: chr(byte) for byte in printable}
    extra = 0
    for byte in range(256):
        if byte not in mapping:
            mapping[byte] = chr(256 + extra)
            extra += 1
    return mapping


@lru_cache(maxsize=1)
def unicode_to_bytes() -> dict[str, int]:
    """The inverse of `bytes_to_unicode`."""
    return {char: byte for byte, char in bytes_to_unicode().items()}


@lru_cache(maxsize=1)
def _byte_characters() -> str:
    """`bytes_to_unicode` as a `str.translate` table: the character of byte b at index b."""
    table = bytes_to_unicode()
    return "".join(table[byte] for byte in range(256))


def token_to_str(token: bytes) -> str:
    """Write a byte string the GPT-2 way: b" the" -> "Ġthe" (in C: saving a vocabulary writes every token twice).

    >>> token_to_str(b" the\\n\\xff")
    'ĠtheĊÿ'
    """
    return token.decode("latin-1").translate(_byte_characters())


# Separates the strings of many tokens made or read in one go: a character that no byte maps to, and whose own code
# point no token character has (so that `str.split` cuts there only).
_SEPARATOR = "\n"


@lru_cache(maxsize=1)
def _byte_of_code_point() -> np.ndarray:
    """`unicode_to_bytes` as an array indexed by code point (all mapping characters are below U+0144): each mapping
    character's byte, and U+0100 for `_SEPARATOR`."""
    table = np.zeros(max(map(ord, unicode_to_bytes())) + 1, dtype="<u2")
    for char, byte in unicode_to_bytes().items():
        table[ord(char)] = byte
    table[ord(_SEPARATOR)] = 0x100
    return table


def strs_to_tokens(texts: list[str]) -> list[bytes] | None:
    """`str_to_token` of each text, in C and numpy (the texts' code points, in UTF-16 as all mapping characters are
    below U+0144, looked up in one gather; the Latin-1 string of their bytes split at the separators); None if a
    character of some text is not in the byte mapping (the caller names it).

    >>> strs_to_tokens(["Ġthe", "", "Ċÿ"]), strs_to_tokens(["a b"])
    ([b' the', b'', b'\\n\\xff'], None)
    """
    if not texts:
        return []
    joined = _SEPARATOR.join(texts)
    if not set(joined) <= unicode_to_bytes().keys() | {_SEPARATOR} or joined.count(_SEPARATOR) != len(texts) - 1:
        return None  # a character outside the mapping (a separator inside a text among them)
    units = _byte_of_code_point()[np.frombuffer(joined.encode("utf-16-le"), dtype="<u2")]
    return list(map(str.encode, units.tobytes().decode("utf-16-le").split("\u0100"), repeat("latin-1")))


@lru_cache(maxsize=1)
def _code_unit_of_byte() -> np.ndarray:
    """`bytes_to_unicode` as an array: the UTF-16 code unit of each byte's character (all are below U+0144)."""
    return np.array([ord(bytes_to_unicode()[byte]) for byte in range(256)], dtype="<u2")


def tokens_to_strs(tokens: list[bytes]) -> list[str]:
    """`token_to_str` of each token, in one go (one numpy gather of the characters, with a separator after each
    token, one decode, one split): saving a vocabulary writes every token twice.

    >>> tokens_to_strs([b" the", b"", b"\\n\\xff"])
    ['Ġthe', '', 'Ċÿ']
    """
    lengths = np.fromiter(map(len, tokens), dtype=np.intp, count=len(tokens))
    units = np.full(len(tokens) + int(lengths.sum()), ord(_SEPARATOR), dtype="<u2")
    characters = np.ones(len(units), dtype=bool)
    characters[np.cumsum(lengths + 1) - 1] = False
    units[characters] = _code_unit_of_byte()[np.frombuffer(b"".join(tokens), dtype=np.uint8)]
    return units.tobytes().decode("utf-16-le").split(_SEPARATOR)[:-1]


def str_to_token(text: str) -> bytes:
    """Read a GPT-2 token string back into bytes: "Ġthe" -> b" the". Raises KeyError for unmapped characters."""
    table = unicode_to_bytes()
    return bytes(table[char] for char in text)


def save_gpt2(vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]], directory: str | os.PathLike[str],
              special_tokens: list[str] | None = None) -> tuple[Path, Path]:
    """Write `vocab.json` and `merges.txt` into `directory` (created if needed), each atomically.

    Special tokens are written as their own text rather than through the byte mapping, as GPT-2 does for
    `<|endoftext|>`. Returns the two paths.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    specials = {token.encode("utf-8"): token for token in special_tokens or []}
    vocab_strings: dict[str, int] = {}
    ids = sorted(vocab)
    for token_id, mapped in zip(ids, tokens_to_strs(list(map(vocab.__getitem__, ids)))):
        token = vocab[token_id]
        text = specials.get(token) or mapped
        if text in vocab_strings:
            raise ValueError(f"vocab has the token {token!r} twice (ids {vocab_strings[text]} and {token_id})")
        vocab_strings[text] = token_id
    vocab_path = directory / "vocab.json"
    merges_path = directory / "merges.txt"
    write_text_atomically(vocab_path, indented_json_of_ints(vocab_strings) + "\n")
    parts = tokens_to_strs([part for pair in merges for part in pair])
    lines = [MERGES_HEADER, *map(" ".join, zip(parts[::2], parts[1::2]))]
    write_text_atomically(merges_path, "\n".join(lines) + "\n")
    return vocab_path, merges_path


def indented_json_of_ints(mapping: dict[str, int]) -> str:
    """`json.dumps(mapping, ensure_ascii=False, indent=2)` of a {str: int} dict by C-level calls (json writes indented
    text with its pure-Python encoder, one generator step per token).

    >>> vocab = {"Ġthe": 0, 'a"\\n': 1}
    >>> indented_json_of_ints(vocab) == json.dumps(vocab, ensure_ascii=False, indent=2)
    True
    """
    if not mapping:
        return "{}"
    return "{\n" + ",\n".join(map("  {}: {}".format, map(encode_basestring, mapping), mapping.values())) + "\n}"


def load_gpt2_vocab(vocab_path: str | os.PathLike[str]) -> dict[int, bytes]:
    """Read a GPT-2 `vocab.json` into {id: bytes}.

    Entries whose text is not made of byte-mapping characters (special tokens such as `<|endoftext|>`) are read as
    their UTF-8 text. Raises InputError naming the file (and line) for invalid JSON, non-integer or duplicate ids.
    """
    vocab_path = Path(vocab_path)
    text = read_small_text(vocab_path)
    try:
        pairs = json.loads(text, object_pairs_hook=_KeyValuePairs)
    except json.JSONDecodeError as error:
        raise InputError(f"{vocab_path}: not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})") \
            from None
    if not isinstance(pairs, _KeyValuePairs):
        raise InputError(f"{vocab_path}: expected a JSON object mapping token strings to ids")
    texts, ids = [text for text, _ in pairs], [token_id for _, token_id in pairs]
    tokens = strs_to_tokens(texts)
    if tokens is not None and {int} >= set(map(type, ids)) and (not ids or min(ids) >= 0) \
            and len(set(texts)) == len(texts) and len(set(ids)) == len(ids):
        return dict(zip(ids, tokens))  # the usual file, checked in C: the loop below names what is wrong
    table = unicode_to_bytes()
    vocab: dict[int, bytes] = {}
    seen_strings: set[str] = set()
    for token_text, token_id in pairs:
        if not isinstance(token_id, int) or isinstance(token_id, bool) or token_id < 0:
            raise InputError(f"{vocab_path}: line {_line_of(text, token_text)}: id of {token_text!r} is "
                             f"{token_id!r}, not a non-negative integer")
        if token_text in seen_strings:
            raise InputError(f"{vocab_path}: line {_line_of(text, token_text)}: token {token_text!r} appears twice")
        seen_strings.add(token_text)
        if token_id in vocab:
            raise InputError(f"{vocab_path}: line {_line_of(text, token_text)}: id {token_id} is used twice")
        if all(char in table for char in token_text):
            vocab[token_id] = bytes(table[char] for char in token_text)
        else:
            vocab[token_id] = token_text.encode("utf-8")
    return vocab


def merges_file_lines(merges_path: str | os.PathLike[str]) -> list[tuple[int, str]]:
    """The merge lines of a GPT-2 `merges.txt` as (1-based line number, line), the `#version` header and blank lines
    skipped: the one place that knows the file's layout (`load_gpt2_merges` and the HF export check read it).

    Raises InputError naming the file for a missing, unreadable or non-UTF-8 file.
    """
    merges_path = Path(merges_path)
    return [(line_number, line) for line_number, line in enumerate(
                (line.rstrip("\r") for line in read_small_text(merges_path).split("\n")), start=1)
            if line and not (line_number == 1 and line.startswith("#version"))]


def load_gpt2_merges_numbered(merges_path: str | os.PathLike[str]) -> tuple[list[tuple[bytes, bytes]], list[int]]:
    """Read a GPT-2 `merges.txt` into byte pairs, with the 1-based line number of each (for error messages).

    Raises InputError naming the file and line for a line that is not two byte-mapped parts.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "merges.txt"
    >>> _ = path.write_text("#version: 0.2\\nĠ t\\n\\nh e\\n", encoding="utf-8")
    >>> load_gpt2_merges_numbered(path)
    ([(b' ', b't'), (b'h', b'e')], [2, 4])
    """
    numbered = merges_file_lines(merges_path)
    lines = [line for _, line in numbered]
    if {1} >= set(map(str.count, lines, repeat(" "))):  # each line two parts: the parts in turn
        merges = _merges_of_parts(" ".join(lines).split(" "))
        if merges is not None:  # the usual file, in C: the loop below names what is wrong
            return merges, [line_number for line_number, _ in numbered]
    table = unicode_to_bytes()
    merges: list[tuple[bytes, bytes]] = []
    line_numbers: list[int] = []
    for line_number, line in numbered:
        parts = line.split(" ")
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise InputError(f"{merges_path}: line {line_number}: expected two tokens separated by one space, "
                             f"got {line!r}")
        try:
            merges.append((bytes(table[c] for c in parts[0]), bytes(table[c] for c in parts[1])))
        except KeyError as error:
            raise InputError(f"{merges_path}: line {line_number}: character {error.args[0]!r} is not in the GPT-2 "
                             f"byte mapping") from None
        line_numbers.append(line_number)
    return merges, line_numbers


def load_gpt2_merges(merges_path: str | os.PathLike[str]) -> list[tuple[bytes, bytes]]:
    """Read a GPT-2 `merges.txt` (with or without the `#version` header) into a list of byte pairs.

    Raises InputError naming the file and line for a line that is not two byte-mapped parts.
    """
    return load_gpt2_merges_numbered(merges_path)[0]


def load_gpt2(vocab_path: str | os.PathLike[str], merges_path: str | os.PathLike[str]
              ) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Read `vocab.json` and `merges.txt`: the inverse of `save_gpt2`."""
    return load_gpt2_vocab(vocab_path), load_gpt2_merges(merges_path)


class _KeyValuePairs(list):
    """A JSON object read as its (key, value) pairs in file order, so duplicate keys are seen, not merged."""



def _line_of(text: str, token_text: str) -> int:
    """The 1-based line where `token_text` first appears as a JSON key (best effort, for error messages)."""
    index = text.find(json.dumps(token_text, ensure_ascii=False) + ":")
    if index < 0:
        index = text.find(json.dumps(token_text) + ":")
    return text.count("\n", 0, index) + 1 if index >= 0 else 0


def _merges_of_parts(parts: list[str]) -> list[tuple[bytes, bytes]] | None:
    """Each two consecutive GPT-2 token strings of `parts` as a merge of bytes, in one go (`strs_to_tokens`); None if
    a part is empty or not byte-mapped (the callers then name it)."""
    tokens = strs_to_tokens(parts)
    if tokens is None or b"" in tokens:
        return None
    return list(zip(tokens[::2], tokens[1::2]))


def merges_from_strings(merges: Sequence[Any], source: str = "merges") -> list[tuple[bytes, bytes]]:
    """GPT-2 merges given as `"Ġ t"` strings or `("Ġ", "t")` pairs -> byte pairs.

    >>> merges_from_strings(["Ġ t", ("h", "e")])
    [(b' ', b't'), (b'h', b'e')]
    """
    # The usual lists (strings of two parts, or pairs as tokenizers writes them) in C; the loop names what is wrong.
    parts: list[str] | None = None
    if all(isinstance(merge, str) for merge in merges):
        parts = " ".join(merges).split(" ") if {1} >= set(map(str.count, merges, repeat(" "))) else None
    elif all(type(merge) in (list, tuple) and len(merge) == 2 for merge in merges):
        parts = list(chain.from_iterable(merges))
    if parts and all(isinstance(part, str) for part in parts) and (fast := _merges_of_parts(parts)) is not None:
        return fast
    result = []
    for index, merge in enumerate(merges):
        parts = merge.split(" ") if isinstance(merge, str) else list(merge)
        if len(parts) != 2 or not all(isinstance(part, str) and part for part in parts):
            raise InputError(f"{source}: merge {index} is {merge!r}, not two tokens")
        try:
            result.append((str_to_token(parts[0]), str_to_token(parts[1])))
        except KeyError as error:
            raise InputError(f"{source}: merge {index} ({merge!r}): character {error.args[0]!r} is not in the "
                             f"GPT-2 byte mapping") from None
    return result
