"""Tokenize a HuggingFace dataset into one flat array of token ids, ready for language-model training.

In the style of nanoGPT's `data/openwebtext/prepare.py`: `datasets.map(batched=True, num_proc=N)` encodes the text
column with the hf_bpe encoder, then the ids are written in dataset order into `OUT/<split>.bin`, each document
followed by the end-of-text id, as `uint16` when the vocabulary fits (else `uint32`). `OUT/<split>.json` describes the
array (dtype, counts, eot id, tokenizer hash, dataset), and `load_tokens` memory-maps it back:

    python scripts/tokenize_dataset.py --tokenizer tok/ --dataset json --data-files docs.jsonl --split train \\
        --text-column text --num-proc 8 --out data/

>>> import numpy as np
>>> tokens = load_tokens("data", "train")  # doctest: +SKIP
>>> documents = np.split(tokens, np.flatnonzero(tokens == eot_id) + 1)  # doctest: +SKIP

Documents are encoded as ordinary text (nanoGPT's `encode_ordinary`): a special-token string inside a document stays
text, so the end-of-text ids in the array are exactly the document boundaries.

Memory does not grow with the corpus, a batch or a document: `map` runs over ranges of rows (`balanced_row_ranges`:
at most `--batch-size` documents and 16 MB each, equal bytes for each process, in stripes from all over the dataset);
a map worker reads its range as arrow, turns only one group of about GROUP_CHARS (2M) characters at a time into
Python strings (a longer document goes to the encoder in pieces), and appends the ids to its own file; the parent
joins the files into the `.bin` in dataset order. The `.bin` is written under a temporary name and renamed only when
complete, so an interrupted run never leaves a `.bin` that looks finished.
"""

from __future__ import annotations

import argparse
import codecs
import errno
import hashlib
import json
import os
import pickle
import shutil
import signal
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain
from multiprocessing.pool import AsyncResult
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from hf_bpe.dataset_args import (DatasetSource, add_dataset_arguments, add_engine_arguments, check_engine_arguments,
                                  check_text, datasets_progress_bars, missing_column_error,
                                  ray_engine_module)
from hf_bpe.encode import Tokenizer
from hf_bpe.errors import InputError
from hf_bpe.files import PathArg
from hf_bpe.outputs import created_directories
from hf_bpe.parallel import process_pool, progress_bar, worker_state

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
                 special_tokens: Sequence[str] = ()) -> None:
        self.vocab, self.merges, self.special_tokens = vocab, list(merges), list(special_tokens)
        self.tokenizer: Tokenizer | None = None

    @classmethod
    def from_directory(cls, tokenizer_dir: PathArg, allow_special: bool = False) -> HFBPEEncoder:
        from hf_bpe.hf_export import load_tokenizer_directory

        vocab, merges, special_tokens = load_tokenizer_directory(tokenizer_dir)
        return cls(vocab, merges, special_tokens if allow_special else ())

    def __call__(self, texts: list[str]) -> Sequence[Sequence[int]]:
        # uint32 arrays: the ids never become Python ints (0.3-0.7 s less per 12 MB of Linux code than lists).
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
            self.tokenizer = Tokenizer(self.vocab, self.merges, self.special_tokens)
        return self.tokenizer

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        # map sends its function to the workers with dill, a pure-Python pickler that needs ~0.5 s for a 50k-token
        # vocab; the C pickler needs milliseconds, so dill only sees the bytes it made.
        state = pickle.dumps((self.vocab, self.merges, self.special_tokens), protocol=pickle.HIGHEST_PROTOCOL)
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
        from hf_bpe.hf_export import load_tokenizer_directory

        directory = Path(tokenizer_dir)
        sha256 = tokenizer_directory_hash(directory)
        vocab, merges, special_tokens = load_tokenizer_directory(directory)
        vocab_size = max(vocab) + 1
        eot_id = eot_token_id(directory, vocab, special_tokens)
        if append_eot and eot_id is None:
            raise InputError(f"{directory}: the tokenizer has no special tokens, so there is no end-of-text id to "
                             f"append (pass --no-append-eot to write the documents back to back)")
        return cls(directory, sha256, vocab_size, np.dtype(np.uint16 if vocab_size <= 2**16 else np.uint32), eot_id,
                   HFBPEEncoder(vocab, merges, special_tokens if allow_special else ()))


def tokenize_dataset(tokenizer_dir: PathArg, dataset: str, out_dir: PathArg, *,
                     split: str = "train", text_column: str = "text", data_files: Sequence[str] | None = None,
                     config: str | None = None, num_proc: int = 1, append_eot: bool = True, batch_size: int = 1000,
                     streaming: bool = False, cache_dir: str | None = None, encoder: TextEncoder | None = None,
                     allow_special: bool = False, force: bool = False, progress: bool = True) -> dict[str, Any]:
    """Encode `dataset`'s `text_column` and write `out_dir/<split>.bin` and `out_dir/<split>.json`.

    `dataset` is a `save_to_disk` directory, a packaged builder (`json`, `csv`, `parquet`, `text`) or a single data
    file with `data_files`, or a Hub dataset name. Documents are encoded as ordinary text (a special-token string in
    a document is text) unless `allow_special`, which encodes them as `tok(document)` does. An existing
    `<split>.bin` is replaced only with `force`; other splits may be written into the same `out_dir`. `encoder`
    replaces the hf_bpe encoder of `tokenizer_dir` (the benchmark plugs in other tokenizers); the metadata still
    describes `tokenizer_dir`. Returns the metadata.

    >>> meta = tokenize_dataset("tok", "json", "out", data_files=["docs.jsonl"], num_proc=2)  # doctest: +SKIP
    >>> meta["dtype"], meta["num_documents"]  # doctest: +SKIP
    ('uint16', 2)
    """
    from hf_bpe import __version__

    if num_proc < 1:
        raise InputError(f"--num-proc must be at least 1, got {num_proc}")
    if batch_size < 1:
        raise InputError(f"--batch-size must be at least 1, got {batch_size}")
    out_dir = Path(out_dir)
    bin_path, meta_path = check_output_split(out_dir, split, force)
    tokenizer = ArrayTokenizer.load(tokenizer_dir, append_eot, allow_special)
    tokenizer_hash, dtype, eot_id = tokenizer.sha256, tokenizer.dtype, tokenizer.eot_id
    flatten = BatchFlattener(encoder or tokenizer.encoder, text_column, eot_id if append_eot else None, dtype)
    source = DatasetSource(dataset, split=split, text_column=text_column, data_files=list(data_files or []),
                           config=config, streaming=streaming, cache_dir=cache_dir)

    with datasets_progress_bars(progress):
        data = source.load()  # before --out is created: a dataset that does not load leaves nothing behind
        with created_directories(out_dir):
            work_dir = out_dir / f".{split}.tmp-{os.getpid()}"
            shutil.rmtree(work_dir, ignore_errors=True)
            work_dir.mkdir()
            try:
                temporary_bin = work_dir / bin_path.name
                with open(temporary_bin, "wb") as file:
                    if streaming:
                        num_documents = _write_streaming(data, flatten, file, batch_size, num_proc, progress)
                    else:
                        num_documents = _write_mapped(data, flatten, file, work_dir, batch_size, num_proc, progress,
                                                      fingerprint=tokenizer_hash[:32])
                if num_documents == 0:
                    raise source.no_rows_error()
                num_tokens = temporary_bin.stat().st_size // dtype.itemsize
                metadata = {
                    "dtype": dtype.name, "num_tokens": num_tokens, "num_documents": num_documents,
                    "eot_id": eot_id, "append_eot": append_eot, "allow_special": allow_special,
                    "vocab_size": tokenizer.vocab_size, "tokenizer": str(tokenizer_dir),
                    "tokenizer_sha256": tokenizer_hash,
                    "dataset": dataset, "config": config, "data_files": list(data_files or []), "split": split,
                    "text_column": text_column, "hf_bpe_version": __version__,
                }
                temporary_meta = work_dir / meta_path.name
                temporary_meta.write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
                # The old metadata goes first: in between, a .bin without .json is reported as incomplete.
                meta_path.unlink(missing_ok=True)
                os.replace(temporary_bin, bin_path)
                os.replace(temporary_meta, meta_path)
            except OSError as error:
                raise InputError(f"{bin_path}: cannot write: {error.strerror or error} (nothing was written)"
                                 ) from None
            finally:
                shutil.rmtree(work_dir, ignore_errors=True)
    return metadata


def check_output_split(out_dir: Path, split: str, force: bool) -> tuple[Path, Path]:
    """`out_dir/<split>.bin` and `.json`, after checking the split is a file name and, unless `force`, not written yet.

    Other splits may already be in `out_dir`: `train` and `validation` arrays usually live side by side.
    """
    if not split or "/" in split or os.sep in split or split.startswith("."):
        raise InputError(f"--split {split!r} cannot be used as a file name")
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"{out_dir}: exists and is not a directory (--out must be a directory)")
    bin_path, meta_path = out_dir / f"{split}.bin", out_dir / f"{split}.json"
    if not force:
        for path in (bin_path, meta_path, out_dir / split):
            if path.exists():
                raise InputError(f"{path}: split {split!r} was already written to {out_dir} (use --force to replace "
                                 f"it, or another --split or --out)")
    return bin_path, meta_path


def load_tokens(out_dir: PathArg, split: str) -> np.ndarray:
    """Memory-map `out_dir/<split>.bin` with the dtype recorded in `out_dir/<split>.json`.

    Returns an `np.memmap` (a plain empty array when there are no tokens: an empty file cannot be mapped). Raises
    InputError when a file is missing or the size does not match the recorded number of tokens. A split written in
    shards by `--engine ray` (metadata `"layout": "shards"`) is read by `hf_bpe.shards.load_sharded_tokens` as one
    array.

    >>> tokens = load_tokens("data", "train")  # doctest: +SKIP
    >>> tokens.dtype, len(tokens)  # doctest: +SKIP
    (dtype('uint16'), 1048576)
    """
    metadata = read_metadata(out_dir, split)
    if metadata.get("layout") == "shards":
        from hf_bpe.shards import load_sharded_tokens

        return load_sharded_tokens(out_dir, split, metadata)
    bin_path = Path(out_dir) / f"{split}.bin"
    if not bin_path.is_file():
        raise InputError(f"{bin_path}: no such file (tokenize the split first)")
    dtype = np.dtype(metadata["dtype"])
    expected = metadata["num_tokens"] * dtype.itemsize
    actual = bin_path.stat().st_size
    if actual != expected:
        raise InputError(f"{bin_path}: {actual} bytes, but {bin_path.with_suffix('.json').name} says "
                         f"{metadata['num_tokens']} {dtype.name} tokens ({expected} bytes); rerun the tokenization")
    if expected == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(bin_path, dtype=dtype, mode="r")


def read_metadata(out_dir: PathArg, split: str) -> dict[str, Any]:
    """The `out_dir/<split>.json` written next to the token array, checked for the keys `load_tokens` needs."""
    meta_path = Path(out_dir) / f"{split}.json"
    if not meta_path.is_file():
        raise InputError(f"{meta_path}: no such file; without it {split}.bin is incomplete or was not written by "
                         f"hf_bpe (rerun the tokenization)")
    try:
        metadata = json.loads(meta_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InputError(f"{meta_path}: not valid JSON ({error})") from None
    if not isinstance(metadata, dict) or metadata.get("dtype") not in ("uint16", "uint32") \
            or not isinstance(metadata.get("num_tokens"), int):
        raise InputError(f"{meta_path}: expected an object with 'dtype' (uint16 or uint32) and 'num_tokens'")
    return metadata


def tokenizer_directory_hash(directory: PathArg) -> str:
    """sha256 over the files that define a tokenizer: vocab.json, merges.txt and tokenizer_config.json.

    Each file's name and length go in before its bytes, so no two different directories hash alike.
    """
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
        for start, stop in _group_bounds([len(text) for text in texts], GROUP_CHARS):
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
            sizes = _utf8_sizes(chunk)
            for start, stop in _group_bounds(sizes, GROUP_CHARS):
                if stop - start == 1 and sizes[start] > GROUP_CHARS:
                    yield from self._encode_long(_utf8_pieces(chunk[start].as_buffer(), LONG_PIECE_CHARS))
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
        """One long document (the Linux sources hold a 24 MB one): its ids as a list would take ~36 bytes each."""
        encode_to_arrays = getattr(self.encoder, "encode_to_arrays", None)
        if encode_to_arrays is None:
            yield from self._encode_group(["".join(pieces)])
            return
        yield from encode_to_arrays(pieces, self.dtype)
        if self.eot_id is not None:
            yield np.array([self.eot_id], dtype=self.dtype)


# A dataset that pickles to at most this many bytes is memory-mapped (an in-memory one pickles its data).
MAPPED_DATASET_PICKLE_BYTES = 1 << 20


class IdsToFiles:
    """The `map` function of the local engine, mapped over row ranges of `texts` (see `balanced_row_ranges`): appends
    each range's ids to this process's own file in `directory` and returns one small row saying where they are (file,
    start and stop byte, number of documents).

    The ids never pass through `datasets`: returned as a column, a batch's ids were copied three times (the
    concatenated array, the arrow array, the arrow writer's buffer) while the batch's texts were held as Python
    strings, so a map worker's memory grew with the text of a whole batch (409 MB for one batch of 1,000 Linux
    documents, 2.3-2.9 GB of worker). The texts are read as arrow, so only one group of them is ever Python.
    """

    def __init__(self, flatten: BatchFlattener, directory: Path, texts: Any) -> None:
        self.flatten, self.directory, self.texts = flatten, directory, texts.with_format("arrow")
        # A dataset memory-mapped from arrow files pickles as their names, and unpickled it maps them anew. Reading
        # each range through such a copy unmaps the pages read once the range is done: through one long-lived map,
        # every page a worker has read stays in its RSS (file-backed pages, but growing with the corpus: 1.1 GB over
        # two workers on the Linux corpus).
        state = pickle.dumps(self.texts, protocol=pickle.HIGHEST_PROTOCOL)
        self._texts_to_map_anew = state if len(state) <= MAPPED_DATASET_PICKLE_BYTES else None
        self._file: BinaryIO | None = None
        self._file_pid = 0

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_file": None, "_file_pid": 0}

    def __call__(self, ranges: dict[str, list[int]]) -> dict[str, list[Any]]:
        file = self._own_file()
        row: dict[str, list[Any]] = {"first_row": [], "ids_file": [], "start": [], "stop": [], "num_documents": []}
        for first, last in zip(ranges["start"], ranges["stop"]):
            start = file.tell()
            if last > first:
                texts = self.texts if self._texts_to_map_anew is None else pickle.loads(self._texts_to_map_anew)
                for ids in self.flatten.encode_table(texts[first:last], first):
                    file.write(memoryview(ids))
                del texts
            for name, value in (("first_row", first), ("ids_file", Path(file.name).name), ("start", start),
                                ("stop", file.tell()), ("num_documents", last - first)):
                row[name].append(value)
        file.flush()  # the pool may end this worker without closing its files
        return row

    def _own_file(self) -> BinaryIO:
        if self._file is None or self._file_pid != os.getpid():
            self._file_pid = os.getpid()
            # Open across calls: map calls this once per batch; closed by close() or at the worker's exit.
            self._file = open(self.directory / f"ids-{self._file_pid}.bin", "ab")  # noqa: SIM115
        return self._file

    def close(self) -> None:
        """Close the file of this process (with num_proc 1 the map runs here)."""
        if self._file is not None and self._file_pid == os.getpid():
            self._file.close()
        self._file = None


def _utf8_sizes(texts: Any) -> np.ndarray:
    """The UTF-8 size of each string of an arrow array (0 for nulls and for non-string types, whose rows are
    rejected by `check_text` once converted)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        return pc.binary_length(texts).fill_null(0).to_numpy().astype(np.int64, copy=False)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, TypeError):
        return np.zeros(len(texts), dtype=np.int64)


def _utf8_pieces(data: Any, piece_bytes: int) -> Iterator[str]:
    """The text of a UTF-8 buffer in pieces decoded from `piece_bytes` bytes each (a character cut in two is completed
    by the next piece).

    >>> list(_utf8_pieces("aé€😀".encode(), 3))
    ['aé', '€', '', '😀']
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(data)
    for start in range(0, len(view), piece_bytes):
        yield decoder.decode(view[start:start + piece_bytes])
    decoder.decode(b"", final=True)


def _group_bounds(lengths: Sequence[int], max_length: int, max_count: int | None = None
                  ) -> Iterator[tuple[int, int]]:
    """(start, stop) of consecutive groups of at most `max_length` in total (a longer item is a group of its own) and
    at most `max_count` items.

    >>> list(_group_bounds([2, 2, 4, 0, 1], 4))
    [(0, 2), (2, 4), (4, 5)]
    >>> list(_group_bounds([1, 1, 1, 1, 1], 4, max_count=2))
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


# Each map process gets this many stripes of the corpus, spread over it, so that it sees the same mix of text as the
# others: the Linux corpus ends with 300 MB of GPU register headers, whose long documents encode at another speed
# than the rest of the C sources.
STRIPES_PER_PROCESS = 16


def balanced_row_ranges(sizes: Sequence[int], num_proc: int, max_rows: int, max_bytes: int,
                        stripes: int = STRIPES_PER_PROCESS) -> list[tuple[int, int]]:
    """Row ranges [start, stop) covering all rows, for `Dataset.map(num_proc=num_proc)` to encode one range per call.

    The rows are cut into `num_proc` x `stripes` stripes of about equal bytes, each stripe into ranges of at most
    `max_rows` rows and `max_bytes` bytes (a longer row alone). Process p gets stripes p, p + num_proc, ..., padded with
    empty ranges to the same count for all: map shards its input into `num_proc` contiguous parts of equal counts, so
    each process gets equal bytes of text, drawn from all over the corpus. (Equal counts of rows gave one process 79%
    of the first 300 MB of the Linux corpus; equal bytes in one run each left the register headers to one process.)
    The ranges of a process are in dataset order; sorted, all ranges are consecutive.

    >>> balanced_row_ranges([5, 1, 1, 1, 1, 1], 2, max_rows=2, max_bytes=10, stripes=1)
    [(0, 1), (6, 6), (6, 6), (1, 3), (3, 5), (5, 6)]
    >>> balanced_row_ranges([1] * 8, 2, max_rows=8, max_bytes=8, stripes=2)
    [(0, 2), (4, 6), (2, 4), (6, 8)]
    """
    num_stripes = num_proc * stripes
    prefix = np.concatenate(([0], np.cumsum(sizes, dtype=np.int64)))
    cuts = [0, *np.searchsorted(prefix, prefix[-1] * np.arange(1, num_stripes) / num_stripes, side="left").tolist(),
            len(sizes)]
    runs = [[(start + cuts[stripe], stop + cuts[stripe])
             for stripe in range(process, num_stripes, num_proc)
             for start, stop in _group_bounds(sizes[cuts[stripe]:cuts[stripe + 1]], max_bytes, max_rows)]
            for process in range(num_proc)]
    count = max(map(len, runs))
    return [span for run in runs for span in run + [(len(sizes),) * 2] * (count - len(run))]


@contextmanager
def _interrupts_in_this_process_only() -> Iterator[None]:
    """Ctrl-C sends SIGINT to every process of the terminal's group, and each forked worker of `map` or of a pool
    would print its own KeyboardInterrupt traceback. The workers inherit this handler, which ignores the signal in
    them: only this process raises KeyboardInterrupt, and ending the pool ends the workers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    this_process = os.getpid()

    def interrupt_here_only(signum: int, frame: Any) -> None:
        if os.getpid() == this_process:
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, interrupt_here_only)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _write_mapped(data: Any, flatten: BatchFlattener, file: BinaryIO, work_dir: Path, batch_size: int,
                  num_proc: int, progress: bool, fingerprint: str) -> int:
    """Encode with `Dataset.map` over balanced row ranges (cache files and ids files in `work_dir`), then copy the ids
    in dataset order into `file`."""
    import datasets

    if flatten.text_column not in data.column_names:
        raise missing_column_error(flatten.text_column, data.column_names)
    texts = data.select_columns([flatten.text_column]).with_format("arrow")
    sizes = np.concatenate([np.zeros(0, dtype=np.int64),
                            *(_utf8_sizes(table.column(0)) for table in texts.iter(batch_size=1 << 16))])
    num_proc = max(1, min(num_proc, len(sizes)))
    ranges = balanced_row_ranges(sizes, num_proc, max_rows=batch_size, max_bytes=8 * GROUP_CHARS)
    if not ranges:
        return 0
    # map runs over the row ranges, one per call, and reads each range's texts itself. The cache files live in this
    # run's work directory, so no reuse is possible or wanted; a given fingerprint spares datasets from hashing the
    # encoder (a dill pickle of the whole vocab). The ids go out through files (IdsToFiles), so the rows datasets
    # writes are a few numbers per range.
    write_ids = IdsToFiles(flatten, work_dir, texts)
    starts, stops = zip(*ranges)
    try:
        with _interrupts_in_this_process_only():
            mapped = datasets.Dataset.from_dict({"start": starts, "stop": stops}).map(
                write_ids, batched=True, batch_size=1, num_proc=num_proc if num_proc > 1 else None,
                remove_columns=["start", "stop"], cache_file_name=str(work_dir / "spans.arrow"),
                load_from_cache_file=False, new_fingerprint=fingerprint, desc="tokenizing (row ranges)")
    finally:
        write_ids.close()
    # The rows of mapped are in range order, not dataset order: sorted by first row (an empty range sorts anywhere).
    columns = (mapped.data.column(name).to_pylist() for name in ("first_row", "ids_file", "start", "stop"))
    spans = list(_joined_spans((name, start, stop) for _, name, start, stop in
                               sorted(zip(*columns), key=lambda row: row[0]) if stop > start))
    with progress_bar(progress, total=sum(stop - start for _, start, stop in spans), unit="B", unit_scale=True,
                      desc=f"writing {Path(file.name).name}") as bar:
        for name, start, stop in spans:
            with open(work_dir / name, "rb") as source:
                _copy_span(source, start, stop, file, bar)
    return sum(mapped.data.column("num_documents").to_pylist())


def _joined_spans(spans: Iterable[tuple[str, int, int]]) -> Iterator[tuple[str, int, int]]:
    """Byte spans (file, start, stop) with each run of spans that continue one another in the same file joined.

    >>> list(_joined_spans([("a", 0, 4), ("a", 4, 9), ("b", 0, 2), ("a", 9, 10)]))
    [('a', 0, 9), ('b', 0, 2), ('a', 9, 10)]
    """
    current: tuple[str, int, int] | None = None
    for name, start, stop in spans:
        if current is not None and current[0] == name and current[2] == start:
            current = (name, current[1], stop)
            continue
        if current is not None:
            yield current
        current = (name, start, stop)
    if current is not None:
        yield current


COPY_BYTES = 1 << 24
# copy_file_range's errors that mean "not here" (another file system, an old kernel, a file system without it): the
# copy then goes through Python, COPY_BYTES at a time.
NO_KERNEL_COPY = (errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL)


def _copy_span(source: BinaryIO, start: int, stop: int, target: BinaryIO, bar: Any) -> None:
    """Append bytes [start, stop) of `source` to `target`: in the kernel where it can (copy_file_range; 0.2-0.5 s
    instead of 1.4 s for 600 MB here), else through a buffer of COPY_BYTES."""
    target.flush()
    kernel_copy = getattr(os, "copy_file_range", None)
    while kernel_copy is not None and start < stop:
        try:
            copied = kernel_copy(source.fileno(), target.fileno(), min(COPY_BYTES, stop - start), start)
        except OSError as error:
            if error.errno not in NO_KERNEL_COPY:
                raise
            kernel_copy = None
            break
        if copied == 0:
            raise OSError(f"{source.name}: ends at byte {start}, before {stop}")
        start += copied
        bar.update(copied)
    source.seek(start)
    while start < stop:
        block = source.read(min(COPY_BYTES, stop - start))
        if not block:
            raise OSError(f"{source.name}: ends at byte {start}, before {stop}")
        target.write(block)
        start += len(block)
        bar.update(len(block))


def _write_streaming(data: Any, flatten: BatchFlattener, file: BinaryIO, batch_size: int, num_proc: int,
                     progress: bool) -> int:
    """Encode an IterableDataset batch by batch (in a pool of `num_proc` processes) and append to `file`."""
    num_documents = 0
    with progress_bar(progress, desc=f"tokenizing {Path(file.name).name}", unit="doc") as bar, \
            _interrupts_in_this_process_only():
        for ids, count in _encode_stream(_numbered_batches(data, flatten.text_column, batch_size), flatten,
                                          num_proc):
            file.write(memoryview(ids))
            num_documents += count
            bar.update(count)
    return num_documents


def _numbered_batches(data: Any, text_column: str, batch_size: int) -> Iterator[tuple[dict[str, list[Any]], int]]:
    """(batch of Python rows, its first row): at most `batch_size` documents and, unless one document is longer,
    8 x GROUP_CHARS bytes of text. The stream is read as arrow, so only these batches become Python strings (and
    are pickled to the workers), never the text of `batch_size` documents at once."""
    first_row = 0
    for table in data.with_format("arrow").iter(batch_size=batch_size):
        if text_column not in table.column_names:
            raise missing_column_error(text_column, table.column_names)
        texts = table.column(text_column)
        for start, stop in _group_bounds(_utf8_sizes(texts), 8 * GROUP_CHARS):
            yield {text_column: texts.slice(start, stop - start).to_pylist()}, first_row + start
        first_row += table.num_rows


def _encode_stream(batches: Iterable[tuple[dict[str, list[Any]], int]], flatten: BatchFlattener,
                   num_proc: int) -> Iterator[tuple[np.ndarray, int]]:
    """(ids, number of documents) per batch, in order; with `num_proc` > 1 the batches are encoded in a process pool."""
    if num_proc == 1:
        for batch, first_row in batches:
            yield _encode_numbered(flatten, batch, first_row)
        return
    with process_pool(num_proc, flatten) as pool:
        # A bounded read-ahead (Pool.imap's is unbounded and would pull the whole stream into memory): the next
        # batches encode while this one is written, and results come back in dataset order.
        pending: deque[AsyncResult[tuple[np.ndarray, int]]] = deque()
        for numbered_batch in batches:
            pending.append(pool.apply_async(_encode_in_worker, (numbered_batch,)))
            if len(pending) >= 2 * num_proc:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()


def _encode_in_worker(numbered_batch: tuple[dict[str, list[Any]], int]) -> tuple[np.ndarray, int]:
    return _encode_numbered(worker_state(), *numbered_batch)


def _encode_numbered(flatten: BatchFlattener, batch: dict[str, list[Any]], first_row: int) -> tuple[np.ndarray, int]:
    ids = flatten.encode(batch, first_row)
    return ids, len(batch[flatten.text_column])


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


def add_tokenize_dataset_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `hf-bpe tokenize-dataset` and `scripts/tokenize_dataset.py`."""
    parser.add_argument("--tokenizer", required=True, metavar="DIR",
                        help="tokenizer directory saved by hf_bpe (vocab.json, merges.txt, tokenizer_config.json)")
    add_dataset_arguments(parser, required=True)
    parser.add_argument("--out", required=True, metavar="OUT",
                        help="output directory for S.bin and S.json (created if needed); other splits may already be "
                             "there, but an existing S.bin is replaced only with --force")
    parser.add_argument("--force", action="store_true", help="replace OUT/S.bin if it exists (default: refuse)")
    parser.add_argument("--num-proc", type=int, default=None, metavar="N",
                        help="processes for datasets.map (with --streaming: for the encoder pool); local engine only "
                             "(default: 1)")
    parser.add_argument("--append-eot", action=argparse.BooleanOptionalAction, default=True,
                        help="append the end-of-text id (the eos token, else the first special token) after every "
                             "document (default: on)")
    parser.add_argument("--allow-special", action="store_true",
                        help="encode special-token strings inside documents as their ids, as tok(document) does in "
                             "transformers (default: off: they are encoded as ordinary text, like nanoGPT's "
                             "encode_ordinary, so the only end-of-text ids are the appended document boundaries)")
    parser.add_argument("--batch-size", type=int, default=1000, metavar="B",
                        help="documents per encoded batch (default: %(default)s)")
    add_engine_arguments(parser)
    parser.add_argument("--resume", action="store_true",
                        help="--engine ray only: keep the shards of an interrupted run whose checksums are recorded "
                             "and encode only the rest (default: off)")
    parser.add_argument("--concatenate", action="store_true",
                        help="--engine ray only: also join the shards into one OUT/S.bin (default: off: "
                             "load_tokens reads the shards as one array)")
    parser.add_argument("--no-progress", action="store_true", help="do not show progress bars (default: shown)")


def run_tokenize_dataset(args: argparse.Namespace) -> int:
    """Run `hf-bpe tokenize-dataset` with parsed arguments; InputError is left to the caller to report."""
    # The flags are checked against each other before anything is imported: a wrong combination is reported the same
    # way whether ray is installed or not.
    if args.engine == "ray":
        for flag, given in (("--streaming", args.streaming), ("--num-proc", args.num_proc is not None),
                            ("--cache-dir", args.cache_dir is not None)):
            if given:
                raise InputError(f"{flag} is for --engine local; with --engine ray, Ray Data reads the dataset")
    check_engine_arguments(args)
    if args.engine == "ray":
        metadata = ray_engine_module().tokenize_dataset_ray(
            args.tokenizer, args.dataset, args.out, split=args.split, text_column=args.text_column,
            data_files=args.data_files, config=args.config, append_eot=args.append_eot,
            allow_special=args.allow_special, batch_size=args.batch_size, ray_address=args.ray_address,
            resume=args.resume, concatenate=args.concatenate, force=args.force, progress=not args.no_progress)
    else:
        for flag, given in (("--resume", args.resume), ("--concatenate", args.concatenate)):
            if given:
                raise InputError(f"{flag} needs --engine ray (the local engine writes one {args.split}.bin)")
        metadata = tokenize_dataset(
            args.tokenizer, args.dataset, args.out, split=args.split, text_column=args.text_column,
            data_files=args.data_files, config=args.config, num_proc=args.num_proc or 1,
            append_eot=args.append_eot, batch_size=args.batch_size, streaming=args.streaming,
            cache_dir=args.cache_dir, allow_special=args.allow_special, force=args.force,
            progress=not args.no_progress)
    print(f"wrote {Path(args.out) / args.split}: {metadata['num_tokens']:,} {metadata['dtype']} tokens from "
          f"{metadata['num_documents']:,} documents", file=sys.stderr)
    return 0
