"""Turning documents into flat id arrays: the encoder a pipeline runs, and how its rows become arrays.

`ArrayTokenizer` loads a tokenizer directory for a pipeline (its hash, dtype and end-of-text id); `BatchFlattener`
encodes rows into one array, each document followed by the eot id, a group of rows at a time, so that no more than
GROUP_CHARS characters of text and their ids are ever Python objects at once. Both the local pipeline
(`hf_bpe.data.pipeline`) and the Ray one (`hf_bpe.data.ray_tokenize`) use them, so their ids are the same.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import pickle
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from hf_bpe.common.errors import InputError
from hf_bpe.common.files import PathArg
from hf_bpe.data.sources import (
    DatasetSource,
    check_text,
    missing_column_error,
)
from hf_bpe.encode.tokenizer import Tokenizer

# Encodes a batch of texts into one id sequence per text (numpy arrays are joined without making Python ints). Must be
# picklable: it runs inside `map` worker processes.
TextEncoder = Callable[[list[str]], Sequence[Sequence[int]]]

HASHED_TOKENIZER_FILES = ("vocab.json", "merges.txt", "tokenizer_config.json")


class HFBPEEncoder:
    """The hf_bpe encoder of a vocab and merges as a `TextEncoder`: `encode_batch` in the calling process.

    By default documents are encoded as ordinary text, like nanoGPT's `encode_ordinary`: a special-token string inside
    a document is just text, so the only end-of-text ids in the output are the ones appended between documents. With
    `special_tokens`, those strings become their ids, as `tok(document)` does in transformers.
    `map` already runs one of these per worker process, so each works single-process (`num_workers=1`), and the
    `Tokenizer` is built on first use, in the worker: building it in the parent too would be wasted.
    """

    def __init__(self, vocab: dict[int, bytes], merges: Sequence[tuple[bytes, bytes]],
                 special_tokens: Sequence[str] | Mapping[str, int] = (), pattern: str | None = None,
                 ignore_merges: bool = False) -> None:
        self.vocab, self.merges = vocab, list(merges)
        # {token: id} where special tokens share an id (hf_bpe.formats.directory_specials), else a list as before
        self.special_tokens = dict(special_tokens) if isinstance(special_tokens, Mapping) else list(special_tokens)
        self.pattern = pattern  # the directory's pre-tokenization pattern (None: GPT-2's)
        self.ignore_merges = ignore_merges  # pre-tokens looked up whole first (a converted tiktoken file)
        self.tokenizer: Tokenizer | None = None

    @classmethod
    def from_directory(cls, tokenizer_dir: PathArg, allow_special: bool = False) -> HFBPEEncoder:
        from hf_bpe.formats.hf_directory import load_tokenizer_directory, read_directory_ignore_merges

        vocab, merges, special_tokens = loaded = load_tokenizer_directory(tokenizer_dir)
        if len(loaded.special_token_ids) > len(special_tokens):  # some share an id: their ids, as tiktoken's
            special_tokens = loaded.special_token_ids
        return cls(vocab, merges, special_tokens if allow_special else (), loaded.pattern,
                   read_directory_ignore_merges(tokenizer_dir))

    def __call__(self, texts: list[str]) -> Sequence[Sequence[int]]:
        # uint32 arrays: the ids never become Python ints, which cost more time than the encoding of code text.
        return self._tokenizer().encode_batch_to_numpy(texts, num_workers=1)

    def encode_to_arrays(self, pieces: Iterable[str], dtype: np.dtype) -> Iterator[np.ndarray]:
        """The ids of one long text given in pieces, through `encode_iterable_to_numpy`, an array per window of
        text (64K characters): neither the text nor its ids are ever whole in memory, nor the ids Python ints."""
        for ids in self._tokenizer().encode_iterable_to_numpy(pieces):
            array = ids.astype(dtype)
            del ids  # not kept alive while the next window is encoded
            yield array

    def _tokenizer(self) -> Tokenizer:
        if self.tokenizer is None:
            self.tokenizer = Tokenizer(self.vocab, self.merges, self.special_tokens, pattern=self.pattern,
                                       ignore_merges=self.ignore_merges)
        return self.tokenizer

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        # map sends its function to the workers with dill, a pure-Python pickler that is slow on a large vocab;
        # the C pickler is fast, so dill only sees the bytes it made.
        state = pickle.dumps((self.vocab, self.merges, self.special_tokens, self.pattern, self.ignore_merges),
                             protocol=pickle.HIGHEST_PROTOCOL)
        return _unpickle_encoder, (state,)


def _unpickle_encoder(state: bytes) -> HFBPEEncoder:
    return HFBPEEncoder(*pickle.loads(state))


@dataclass(frozen=True)
class ArrayTokenizer:
    """What writing a token array needs from a tokenizer directory: its hash, the array's dtype (uint16 when the ids
    fit), the end-of-text id and the encoder, checked once by `load` for every engine."""

    directory: Path
    sha256: str
    vocab_size: int
    dtype: np.dtype
    eot_id: int | None
    encoder: HFBPEEncoder

    @classmethod
    def load(cls, tokenizer_dir: PathArg, append_eot: bool = True, allow_special: bool = False) -> ArrayTokenizer:
        """InputError when the directory is not a saved tokenizer, or when `append_eot` and there is no eot token."""
        from hf_bpe.formats.hf_directory import load_tokenizer_directory

        directory = Path(tokenizer_dir)
        files_digest = _files_digest(directory)  # a missing file is named as the hash has always named it
        vocab, merges, special_tokens = loaded = load_tokenizer_directory(directory)
        sha256 = _with_pattern(files_digest, loaded.pattern)  # (tokenizer.json is parsed once)
        vocab_size = max(vocab) + 1
        eot_id = eot_token_id(directory, vocab, special_tokens)
        if append_eot and eot_id is None:
            raise InputError(f"{directory}: the tokenizer has no special tokens, so there is no end-of-text id to "
                             f"append (pass --no-append-eot to write the documents back to back)")
        return cls(directory, sha256, vocab_size, np.dtype(np.uint16 if vocab_size <= 2**16 else np.uint32), eot_id,
                   HFBPEEncoder(vocab, merges, special_tokens if allow_special else (), loaded.pattern))

    def made_from(self, source: DatasetSource, append_eot: bool, allow_special: bool) -> dict[str, Any]:
        """The fields of a token array's metadata (`S.json`) that say what it was encoded from and how: the same for
        both engines."""
        from hf_bpe._version import __version__

        return {"eot_id": self.eot_id, "append_eot": append_eot, "allow_special": allow_special,
                "vocab_size": self.vocab_size, "tokenizer": str(self.directory), "tokenizer_sha256": self.sha256,
                "dataset": source.name, "config": source.config, "data_files": list(source.data_files),
                "split": source.split, "text_column": source.text_column, "hf_bpe_version": __version__}


def tokenizer_directory_hash(directory: PathArg) -> str:
    """sha256 over the files that define a tokenizer: vocab.json, merges.txt and tokenizer_config.json, and the
    pre-tokenization pattern of tokenizer.json when it is not GPT-2's (so directories of GPT-2's pattern hash as
    they did before patterns were kept).

    Each file's name and length go in before its bytes, so no two different directories hash alike.
    """
    from hf_bpe.formats.hf_directory import read_directory_pattern

    return _with_pattern(_files_digest(directory), read_directory_pattern(directory))


def _files_digest(directory: PathArg) -> Any:
    """`tokenizer_directory_hash`'s sha256 object after the files; an InputError naming a missing one."""
    digest = hashlib.sha256()
    for name in HASHED_TOKENIZER_FILES:
        path = Path(directory) / name
        try:
            content = path.read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise InputError(f"{path}: no such file; --tokenizer must be a directory saved by hf_bpe "
                             f"(vocab.json, merges.txt, tokenizer_config.json)") from None
        digest.update(f"{name}\0{len(content)}\0".encode())
        digest.update(content)
    return digest


def _with_pattern(digest: Any, pattern: str) -> str:
    """`tokenizer_directory_hash` from the files' digest and the directory's pattern."""
    from hf_bpe.pretokenize import GPT2_PATTERN

    if pattern != GPT2_PATTERN:
        encoded = pattern.encode()
        digest.update(b"pattern\0%d\0%s" % (len(encoded), encoded))
    return digest.hexdigest()


# Texts go to the encoder in groups of about this many characters (UTF-8 bytes when read from arrow): a group's
# text and its ids (uint32 arrays from hf_bpe; lists of Python ints, ~36 bytes per token, from other encoders) live
# only until the group's ids are packed into 2-4 bytes each. A longer document goes to the encoder alone, and to
# `encode_to_arrays` (when the encoder has it) in pieces of LONG_PIECE_CHARS characters, its ids coming back in
# arrays, one per window of the encoder's stream.
GROUP_CHARS = 1 << 21
LONG_PIECE_CHARS = 1 << 20


class BatchFlattener:
    """Encodes a batch of rows into flat id arrays, each document followed by the eot id, one group at a time."""

    def __init__(self, encoder: TextEncoder, text_column: str, eot_id: int | None, dtype: np.dtype) -> None:
        self.encoder, self.text_column, self.eot_id, self.dtype = encoder, text_column, eot_id, dtype

    def encode(self, batch: dict[str, list[Any]], first_row: int) -> np.ndarray:
        """The ids of a batch of Python rows (`text_column` -> list of str) as one array."""
        if self.text_column not in batch:
            raise missing_column_error(self.text_column, list(batch))
        texts = batch[self.text_column]
        for row, text in enumerate(texts, start=first_row):
            check_text(row, self.text_column, text)
        arrays: list[np.ndarray] = []
        for start, stop in group_bounds([len(text) for text in texts], GROUP_CHARS):
            arrays.extend(self._encode_group(texts[start:stop]) if stop - start > 1 or len(texts[start]) <=
                          GROUP_CHARS else self._encode_long((texts[start],)))
        return np.concatenate(arrays) if arrays else np.zeros(0, dtype=self.dtype)

    def encode_table(self, table: Any, first_row: int) -> Iterator[np.ndarray]:
        """The ids of an arrow batch, array by array: only one group's texts are ever Python strings, and a document
        longer than a group is decoded in pieces straight from the arrow buffer into the encoder."""
        if self.text_column not in table.column_names:
            raise missing_column_error(self.text_column, table.column_names)
        row = first_row
        for chunk in table.column(self.text_column).chunks:
            sizes = utf8_sizes(chunk)
            for start, stop in group_bounds(sizes, GROUP_CHARS):
                if stop - start == 1 and sizes[start] > GROUP_CHARS:
                    yield from self._encode_long(utf8_pieces(chunk[start].as_buffer(), LONG_PIECE_CHARS))
                    continue
                texts = chunk.slice(start, stop - start).to_pylist()
                for index, text in enumerate(texts, start=row + start):
                    check_text(index, self.text_column, text)
                yield from self._encode_group(texts)
            row += len(chunk)

    def _encode_group(self, texts: list[str]) -> Iterator[np.ndarray]:
        ids_per_text = self.encoder(texts)
        if ids_per_text and all(isinstance(ids, np.ndarray) for ids in ids_per_text):
            if self.eot_id is not None:
                eot = np.array([self.eot_id], dtype=self.dtype)
                ids_per_text = [array for ids in ids_per_text for array in (ids, eot)]
            yield np.concatenate(ids_per_text, dtype=self.dtype)
            return
        if self.eot_id is not None:
            ids_per_text = [chain(ids, (self.eot_id,)) for ids in ids_per_text]
        yield np.fromiter(chain.from_iterable(ids_per_text), dtype=self.dtype)

    def _encode_long(self, pieces: Iterable[str]) -> Iterator[np.ndarray]:
        """One long document (source trees hold documents of tens of MB): its ids as a list would take ~36 bytes
        each."""
        encode_to_arrays = getattr(self.encoder, "encode_to_arrays", None)
        if encode_to_arrays is None:
            yield from self._encode_group(["".join(pieces)])
            return
        yield from encode_to_arrays(pieces, self.dtype)
        if self.eot_id is not None:
            yield np.array([self.eot_id], dtype=self.dtype)


def utf8_sizes(texts: Any) -> np.ndarray:
    """The UTF-8 size of each string of an arrow array (0 for nulls and for non-string types, whose rows are
    rejected by `check_text` once converted)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        return pc.binary_length(texts).fill_null(0).to_numpy().astype(np.int64, copy=False)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, TypeError):
        return np.zeros(len(texts), dtype=np.int64)


def utf8_pieces(data: Any, piece_bytes: int) -> Iterator[str]:
    """The text of a UTF-8 buffer in pieces decoded from `piece_bytes` bytes each (a character cut in two is completed
    by the next piece).

    >>> list(utf8_pieces("aé€😀".encode(), 3))
    ['aé', '€', '', '😀']
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(data)
    for start in range(0, len(view), piece_bytes):
        yield decoder.decode(view[start:start + piece_bytes])
    decoder.decode(b"", final=True)


def group_bounds(lengths: Sequence[int], max_length: int, max_count: int | None = None
                  ) -> Iterator[tuple[int, int]]:
    """(start, stop) of consecutive groups of at most `max_length` in total (a longer item is a group of its own) and
    at most `max_count` items.

    >>> list(group_bounds([2, 2, 4, 0, 1], 4))
    [(0, 2), (2, 4), (4, 5)]
    >>> list(group_bounds([1, 1, 1, 1, 1], 4, max_count=2))
    [(0, 2), (2, 4), (4, 5)]
    """
    start, total = 0, 0
    for index, length in enumerate(lengths):
        if index > start and (total + length > max_length or index - start == max_count):
            yield start, index
            start, total = index, 0
        total += length
    if start < len(lengths):
        yield start, len(lengths)


def eot_token_id(tokenizer_dir: PathArg, vocab: dict[int, bytes],
                 special_tokens: Sequence[str]) -> int | None:
    """The id of the tokenizer's end-of-text token: the `eos_token` of tokenizer_config.json (hf_bpe writes the first
    special token, `<|endoftext|>` when present), else the first special token; None without special tokens."""
    config_path = Path(tokenizer_dir) / "tokenizer_config.json"
    try:
        eos = json.loads(config_path.read_text(encoding="utf-8")).get("eos_token")
    except (OSError, ValueError, AttributeError):
        eos = None
    if isinstance(eos, dict):  # transformers may save it as a serialized AddedToken
        eos = eos.get("content")
    if not isinstance(eos, str):
        if not special_tokens:
            return None
        eos = special_tokens[0]
    ids_by_token = {token: token_id for token_id, token in vocab.items()}
    if eos.encode("utf-8") not in ids_by_token:
        raise InputError(f"{config_path}: the eos token {eos!r} is not in vocab.json")
    return ids_by_token[eos.encode("utf-8")]
