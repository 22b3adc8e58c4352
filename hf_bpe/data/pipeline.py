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

One run at a time per split: a run holds the split's lock (`OUT/.SPLIT.lock`, `hf_bpe.common.locks`) from before the
dataset loads until its files are in place, and builds them in its own `OUT/.SPLIT.tmp-PID`, which the next run on
the split removes if a killed run left it behind. The map's worker processes die with this process.
"""

from __future__ import annotations

import errno
import json
import os
import pickle
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from hf_bpe.common.errors import InputError, WorkerLostError, in_chain
from hf_bpe.common.files import PathArg
from hf_bpe.common.interrupts import BlockEnd, interrupts_in_this_process_only
from hf_bpe.common.locks import output_lock, run_directory
from hf_bpe.common.lost_workers import WatchedResult
from hf_bpe.common.outputs import created_directories, publish_file
from hf_bpe.common.parallel import (
    END_POOL_SECONDS,
    WorkerProgress,
    children_exit_with_this_process,
    process_pool,
    progress_bar,
    progress_from_workers,
    worker_state,
)
from hf_bpe.data.encoders import GROUP_CHARS, ArrayTokenizer, BatchFlattener, TextEncoder, group_bounds, utf8_sizes
from hf_bpe.data.load import check_output_split
from hf_bpe.data.sources import (
    DatasetSource,
    datasets_progress_bars,
    missing_column_error,
    read_batches,
)


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

    # --out is made and locked before the dataset loads (an output that cannot be written is reported before the
    # input is converted to Arrow); directories made here are removed again if the run fails.
    with datasets_progress_bars(progress), children_exit_with_this_process(), created_directories(out_dir), \
            output_lock(out_dir, split, f"split {split!r} of {out_dir}"), _work_directory(out_dir, split) as work_dir:
        check_output_split(out_dir, split, force)  # again: another run may have written it before the lock was ours
        data = source.load()
        try:
            temporary_bin = work_dir / bin_path.name
            with open(temporary_bin, "wb") as file:
                if streaming:
                    num_documents = _write_streaming(data, source, flatten, file, batch_size, num_proc, progress)
                else:
                    num_documents = _write_mapped(data, flatten, file, work_dir, batch_size, num_proc, progress,
                                                  fingerprint=tokenizer_hash[:32])
            if num_documents == 0:
                raise source.no_rows_error()
            num_tokens = temporary_bin.stat().st_size // dtype.itemsize
            metadata = {"dtype": dtype.name, "num_tokens": num_tokens, "num_documents": num_documents,
                        **tokenizer.made_from(source, append_eot, allow_special)}
            temporary_meta = work_dir / meta_path.name
            temporary_meta.write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
            _publish(temporary_bin, temporary_meta, bin_path, meta_path, force)
        except FileExistsError as error:
            raise InputError(f"{error.filename}: split {split!r} was written by another process meanwhile; nothing "
                             f"was written (use --force to replace it)") from None
        except OSError as error:
            raise InputError(f"{bin_path}: cannot write: {error.strerror or error} (nothing was written)") from None
    return metadata


@contextmanager
def _work_directory(out_dir: Path, split: str) -> Iterator[Path]:
    """This run's own directory in `out_dir` (`hf_bpe.common.locks.run_directory`), with the ids files and the
    unfinished `.bin` and `.json`; leftovers of killed runs on the same split are removed first."""
    with ExitStack() as stack:
        try:
            work_dir = stack.enter_context(run_directory(out_dir, split))
        except OSError as error:
            raise InputError(f"{out_dir / split}.bin: cannot write: {error.strerror or error} (nothing was written)"
                             ) from None
        yield work_dir


def _publish(temporary_bin: Path, temporary_meta: Path, bin_path: Path, meta_path: Path, force: bool) -> None:
    """Move the finished `.bin`, then its `.json`, into place; a split that exists is replaced only with `force`,
    and never half: FileExistsError leaves neither file of this run in place."""
    if force:
        # The old metadata goes first: in between, a .bin without .json is reported as incomplete.
        meta_path.unlink(missing_ok=True)
        os.replace(temporary_bin, bin_path)
        os.replace(temporary_meta, meta_path)
        return
    publish_file(temporary_bin, bin_path, replace=False)
    try:
        publish_file(temporary_meta, meta_path, replace=False)
    except BaseException:
        bin_path.unlink(missing_ok=True)  # this run's, linked a moment ago
        raise


# A dataset that pickles to at most this many bytes is memory-mapped (an in-memory one pickles its data).
MAPPED_DATASET_PICKLE_BYTES = 1 << 20


class IdsToFiles:
    """The `map` function of the local engine, mapped over row ranges of `texts` (see `balanced_row_ranges`): appends
    each range's ids to this process's own file in `directory` and returns one small row saying where they are (file,
    start and stop byte, number of documents).

    The ids never pass through `datasets`: returned as a column, a batch's ids were copied three times (the
    concatenated array, the arrow array, the arrow writer's buffer) while the batch's texts were held as Python
    strings, so a map worker's memory grew with the text of a whole batch, several times over. The texts are read as
    arrow, so only one group of them is ever Python.
    """

    def __init__(self, flatten: BatchFlattener, directory: Path, texts: Any, done: WorkerProgress | None = None
                 ) -> None:
        self.flatten, self.directory, self.texts = flatten, directory, texts.with_format("arrow")
        self.done = done  # documents encoded, for the progress bar
        # A dataset memory-mapped from arrow files pickles as their names, and unpickled it maps them anew. Reading
        # each range through such a copy unmaps the pages read once the range is done: through one long-lived map,
        # every page a worker has read stays in its RSS (file-backed pages, but growing with the corpus).
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
            if self.done is not None:
                self.done.add(last - first)
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


# Each map process gets this many stripes of the corpus, spread over it, so that it sees the same mix of text as the
# others: a corpus may end with a different kind of text (a source tree's generated headers, say) that encodes at
# another speed than the rest.
STRIPES_PER_PROCESS = 16


def balanced_row_ranges(sizes: Sequence[int], num_proc: int, max_rows: int, max_bytes: int,
                        stripes: int = STRIPES_PER_PROCESS) -> list[tuple[int, int]]:
    """Row ranges [start, stop) covering all rows, for `Dataset.map(num_proc=num_proc)` to encode one range per call.

    The plan: the rows are cut into `num_proc` x `stripes` stripes of about equal bytes, each stripe into ranges of at
    most `max_rows` rows and `max_bytes` bytes (a longer row alone). Process p gets stripes p, p + num_proc, ..., so
    each process gets equal bytes drawn from all over the corpus (equal row counts can leave most of the bytes to
    one process when long documents cluster).

    The invariant: the list has the same number k of entries per process, process p's being entries [p k, (p + 1) k)
    (empty ranges `(len(sizes), len(sizes))` pad the shorter runs), which is how `map` shards its input into
    `num_proc` contiguous parts of equal counts; and the non-empty ranges, sorted by start, tile [0, len(sizes))
    exactly once, so joining the ranges' id files in that order gives the ids in dataset order.

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
             for start, stop in group_bounds(sizes[cuts[stripe]:cuts[stripe + 1]], max_bytes, max_rows)]
            for process in range(num_proc)]
    count = max(map(len, runs))
    return [span for run in runs for span in run + [(len(sizes),) * 2] * (count - len(run))]


def _write_mapped(data: Any, flatten: BatchFlattener, file: BinaryIO, work_dir: Path, batch_size: int,
                  num_proc: int, progress: bool, fingerprint: str) -> int:
    """Encode with `Dataset.map` over balanced row ranges (cache files and ids files in `work_dir`), then copy the ids
    in dataset order into `file`."""
    import datasets

    if flatten.text_column not in data.column_names:
        raise missing_column_error(flatten.text_column, data.column_names)
    texts = data.select_columns([flatten.text_column]).with_format("arrow")
    sizes = np.concatenate([np.zeros(0, dtype=np.int64),
                            *(utf8_sizes(table.column(0)) for table in texts.iter(batch_size=1 << 16))])
    num_proc = max(1, min(num_proc, len(sizes)))
    ranges = balanced_row_ranges(sizes, num_proc, max_rows=batch_size, max_bytes=8 * GROUP_CHARS)
    if not ranges:
        return 0
    # map runs over the row ranges, one per call, and reads each range's texts itself. The cache files live in this
    # run's work directory, so no reuse is possible or wanted; a given fingerprint spares datasets from hashing the
    # encoder (a dill pickle of the whole vocab). The ids go out through files (IdsToFiles), so the rows datasets
    # writes are a few numbers per range.
    starts, stops = zip(*ranges)
    # The bar counts documents: datasets' own would count the row ranges this map runs over.
    with progress_from_workers(progress, total=len(sizes), unit="doc", desc=f"tokenizing {Path(file.name).stem}"
                               ) as done, datasets_progress_bars(False):
        write_ids = IdsToFiles(flatten, work_dir, texts, done)
        block = BlockEnd()
        try:
            # datasets ends its pool with Pool.terminate, which can wait for ever: bounded after Ctrl-C or SIGTERM,
            # and on its own (after a process of the map is killed, its error ends the pool).
            with interrupts_in_this_process_only(end_within=END_POOL_SECONDS, bound_terminate=num_proc > 1) as block:
                mapped = datasets.Dataset.from_dict({"start": starts, "stop": stops}).map(
                    write_ids, batched=True, batch_size=1, num_proc=num_proc if num_proc > 1 else None,
                    remove_columns=["start", "stop"], cache_file_name=str(work_dir / "spans.arrow"),
                    load_from_cache_file=False, new_fingerprint=fingerprint)
        except KeyboardInterrupt as interrupt:
            if not block.pool_stuck:
                raise
            # The pool was ended for an error (the one it raised, interrupted in Pool.terminate), most likely a
            # killed process of the map, and did not end.
            error = interrupt.__context__
            if error is None or in_chain(error, _says_a_process_died):
                raise WorkerLostError("a process of Dataset.map(num_proc=...) died") from error
            raise error from None
        except Exception as error:
            if num_proc > 1 and in_chain(error, _says_a_process_died):
                raise WorkerLostError("a process of Dataset.map(num_proc=...) died") from error
            raise
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


def _says_a_process_died(error: BaseException) -> bool:
    """Whether `error` is how `Dataset.map(num_proc=N)` fails when one of its processes dies (killed, most often for
    memory): datasets' own RuntimeError for a worker, a broken connection for its manager process."""
    return isinstance(error, (ConnectionError, EOFError)) or (isinstance(error, RuntimeError)
                                                              and "abruptly died" in str(error))


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
    """Append bytes [start, stop) of `source` to `target`: in the kernel where it can (copy_file_range, which never
    copies the bytes through user space), else through a buffer of COPY_BYTES."""
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


def _write_streaming(data: Any, source: DatasetSource, flatten: BatchFlattener, file: BinaryIO, batch_size: int,
                     num_proc: int, progress: bool) -> int:
    """Encode an IterableDataset batch by batch (in a pool of `num_proc` processes) and append to `file`."""
    num_documents = 0
    with progress_bar(progress, desc=f"tokenizing {Path(file.name).name}", unit="doc") as bar, \
            interrupts_in_this_process_only():
        for ids, count in _encode_stream(_numbered_batches(data, source, flatten.text_column, batch_size), flatten,
                                          num_proc):
            file.write(memoryview(ids))
            num_documents += count
            bar.update(count)
    return num_documents


def _numbered_batches(data: Any, source: DatasetSource, text_column: str, batch_size: int
                      ) -> Iterator[tuple[dict[str, list[Any]], int]]:
    """(batch of Python rows, its first row): at most `batch_size` documents and, unless one document is longer,
    8 x GROUP_CHARS bytes of text. The stream is read as arrow, so only these batches become Python strings (and
    are pickled to the workers), never the text of `batch_size` documents at once."""
    first_row = 0
    for table in read_batches(iter(data.with_format("arrow").iter(batch_size=batch_size)), source):
        if text_column not in table.column_names:
            raise missing_column_error(text_column, table.column_names)
        texts = table.column(text_column)
        for start, stop in group_bounds(utf8_sizes(texts), 8 * GROUP_CHARS):
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
        pending: deque[WatchedResult[tuple[np.ndarray, int]]] = deque()
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


