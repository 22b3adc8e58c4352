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

Each `map` batch becomes a single row holding that batch's ids already flattened (with the eot ids), so the arrow
cache holds a few big arrays instead of millions of small lists. The `.bin` is written under a temporary name and
renamed only when complete, so an interrupted run never leaves a `.bin` that looks finished.
"""

from __future__ import annotations

import argparse
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

# Encodes a batch of texts into one id sequence per text. Must be picklable: it runs inside `map` worker processes.
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
        return self._tokenizer().encode_batch(texts, num_workers=1)

    def encode_to_array(self, text: str, dtype: np.dtype) -> np.ndarray:
        """The ids of one long text as an array, through `encode_iterable`: they never exist as a list of ints."""
        return np.fromiter(self._tokenizer().encode_iterable((text,)), dtype=dtype)

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


# Texts go to the encoder in groups of about this many characters: its output, lists of Python ints (~36 bytes per
# token), lives only until the group's ids are packed into 2-4 bytes each, so a batch of long documents does not
# hold gigabytes (measured: a map worker on 150 MB of the Linux corpus peaked at 1.7 GB with whole batches).
GROUP_CHARS = 1 << 21


class BatchFlattener:
    """The `map` function: a batch of rows -> one row holding all their ids, each document followed by the eot id."""

    def __init__(self, encoder: TextEncoder, text_column: str, eot_id: int | None, dtype: np.dtype) -> None:
        self.encoder, self.text_column, self.eot_id, self.dtype = encoder, text_column, eot_id, dtype

    def __call__(self, batch: dict[str, list[Any]], indices: list[int]) -> dict[str, list[Any]]:
        return {"ids": [self.encode(batch, indices[0] if indices else 0)], "num_documents": [len(indices)]}

    def encode(self, batch: dict[str, list[Any]], first_row: int) -> np.ndarray:
        if self.text_column not in batch:
            raise missing_column_error(self.text_column, list(batch))
        texts = batch[self.text_column]
        for row, text in enumerate(texts, start=first_row):
            check_text(row, self.text_column, text)
        arrays = []
        for group in _groups_by_length(texts, GROUP_CHARS):
            if len(group) == 1 and len(group[0]) > GROUP_CHARS and hasattr(self.encoder, "encode_to_array"):
                # One long document (the Linux sources hold a 100 MB one): its ids as a list would take gigabytes.
                arrays.append(self.encoder.encode_to_array(group[0], self.dtype))
                if self.eot_id is not None:
                    arrays.append(np.array([self.eot_id], dtype=self.dtype))
                continue
            ids_per_text = self.encoder(group)
            if self.eot_id is not None:
                ids_per_text = [chain(ids, (self.eot_id,)) for ids in ids_per_text]
            arrays.append(np.fromiter(chain.from_iterable(ids_per_text), dtype=self.dtype))
        return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)


def _groups_by_length(texts: list[str], max_chars: int) -> Iterator[list[str]]:
    """Consecutive groups of `texts` of at most `max_chars` characters each (a longer text is a group of its own).

    >>> [len(group) for group in _groups_by_length(["ab", "cd", "efgh", "", "i"], 4)]
    [2, 2, 1]
    """
    group: list[str] = []
    length = 0
    for text in texts:
        if group and length + len(text) > max_chars:
            yield group
            group, length = [], 0
        group.append(text)
        length += len(text)
    if group or not texts:
        yield group


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
    """Encode with `Dataset.map` (cache files in `work_dir`), then copy the ids in dataset order into `file`."""
    if flatten.text_column not in data.column_names:
        raise missing_column_error(flatten.text_column, data.column_names)
    data = data.select_columns([flatten.text_column])
    # The cache files live in this run's work directory, so no reuse is possible or wanted; a given fingerprint spares
    # datasets from hashing the encoder (a dill pickle of the whole vocab). Each output row holds a whole batch's ids,
    # so rows are written as they come (writer_batch_size=1) and read back one at a time: the default of 1,000 rows
    # would keep a worker's whole output in memory.
    with _interrupts_in_this_process_only():
        mapped = data.map(flatten, batched=True, batch_size=batch_size, with_indices=True,
                          num_proc=num_proc if num_proc > 1 and len(data) > 1 else None,
                          remove_columns=data.column_names, cache_file_name=str(work_dir / "ids.arrow"),
                          writer_batch_size=1, load_from_cache_file=False, new_fingerprint=fingerprint,
                          desc="tokenizing")
    ids_column = mapped.with_format("arrow")
    with progress_bar(progress, total=len(mapped), desc=f"writing {Path(file.name).name}", unit="batch") as bar:
        for table in ids_column.iter(batch_size=1):
            for chunk in table.column("ids").chunks:
                ids = chunk.flatten().to_numpy(zero_copy_only=False).astype(flatten.dtype, copy=False)
                file.write(memoryview(ids))
            bar.update(table.num_rows)
    return int(sum(mapped["num_documents"]))


def _write_streaming(data: Any, flatten: BatchFlattener, file: BinaryIO, batch_size: int, num_proc: int,
                     progress: bool) -> int:
    """Encode an IterableDataset batch by batch (in a pool of `num_proc` processes) and append to `file`."""
    num_documents = 0
    with progress_bar(progress, desc=f"tokenizing {Path(file.name).name}", unit="doc") as bar, \
            _interrupts_in_this_process_only():
        for ids, count in _encode_stream(_numbered_batches(data, batch_size), flatten, num_proc):
            file.write(memoryview(ids))
            num_documents += count
            bar.update(count)
    return num_documents


def _numbered_batches(data: Any, batch_size: int) -> Iterator[tuple[dict[str, list[Any]], int]]:
    first_row = 0
    for batch in data.iter(batch_size=batch_size):
        yield batch, first_row
        first_row += len(next(iter(batch.values()), []))


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
