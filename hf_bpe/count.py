"""Counting GPT-2 pre-tokens in a corpus: the first stage of training.

Semantics, exactly as the plain reference `Counter(GPT2_REGEX.findall(doc) for doc in splitter.split(text))`:
special tokens split the text into documents (leftmost occurrence, the longest special token first when several start
at one place) and are never counted; pre-tokens are the GPT-2 regex matches inside each document, keyed by their UTF-8
bytes. Each text of an iterable is a document boundary too. Lone surrogates in a text (which have no UTF-8) are
replaced as tiktoken and the encoder replace them (`replace_surrogates`).

How it is fast (each step is differential-tested against that reference in tests/test_count.py):

* Text is cut into *pieces* with one C-level `re.findall` (`hf_bpe.pretokenize.split_into_pieces`): no pre-token
  crosses a piece, so pieces are counted with `collections.Counter` (in C) and the slow GPT-2 regex runs only on the
  distinct pieces, each pre-token's count being the sum of its pieces' counts.
* ASCII pieces are pre-tokenized with `GPT2_ASCII_REGEX` (stdlib `re`, about twice as fast as `regex`).
* Files are split into chunks of about `chunk_bytes` at safe cuts found by the parent (`find_chunk_boundaries`), and
  worker processes each pull chunks from a queue, read their own byte range, and add its pieces to one piece table
  per worker, so a piece seen in many chunks is pre-tokenized once per worker and conversion (below).

Memory is bounded by the table of distinct pre-tokens, not by the corpus: distinct pieces outnumber distinct
pre-tokens 2.4-3.5x on real corpora and keep growing with the corpus, so when a worker's piece table passes
`MAX_PIECES` entries it is converted to pre-token counts (`PieceCounter.flush`), which the worker hands to the parent
at once. The parent holds one pre-token table and the one being added to it. On 300 MB and 1.2 GB of the Linux
corpus (2 workers, `scripts/bench_count.py`), the peak RSS of the whole process tree went from 1.18 and 5.2 GB to
0.35 and 0.40 GB.

Counting engines. The work is a list of *tasks* (a file chunk `(path, start, end)`, or a batch of texts) and a
picklable `run(counter, task)` that adds one task's text to a `PieceCounter` and returns its size for the progress
bar. A `CountingEngine` runs every task exactly once, in any order, on any machine, and returns the sum of the
pre-token counts; `LocalCountingEngine` (worker processes on this machine) is the default, and
`hf_bpe.ray_engine.RayCountingEngine` runs the same tasks on a Ray cluster. An engine in a few lines:

>>> class InThisProcess:
...     def count(self, tasks, run, special_tokens, bar):
...         counter = PieceCounter(special_tokens)
...         for task in tasks:
...             bar.update(run(counter, task))
...         return counter.pretoken_counts()
>>> sorted(count_pretokens_in_iterator(["Hi hi<|endoftext|>hi"], ["<|endoftext|>"], engine=InThisProcess()).items())
[(b' hi', 1), (b'Hi', 1), (b'hi', 1)]
"""

from __future__ import annotations

import os
import queue
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from dataclasses import dataclass
from typing import Any, BinaryIO, Protocol, TypeVar

from hf_bpe.errors import InputError
from hf_bpe.files import PathArg, check_input_files, find_invalid_utf8, open_binary, read_text
from hf_bpe.parallel import (
    default_num_workers,
    leave_interrupts_to_the_parent,
    multiprocessing_context,
    progress_bar,
    start_workers,
)
from hf_bpe.pretokenize import (
    GPT2_ASCII_REGEX,
    GPT2_REGEX,
    WHITESPACE_CHARS,
    SpecialTokenSplitter,
    replace_surrogates,
    safe_segments,
    split_into_pieces,
    validate_special_tokens,
)

DEFAULT_CHUNK_BYTES = 1 << 20
# With the default num_workers, less input than this is counted in this process: starting workers costs about as
# much as counting a few megabytes.
MIN_PARALLEL_BYTES = 4 << 20
# Texts from an iterable are sent to the workers in batches of about this many characters.
BATCH_CHARS = 1 << 20
# A piece table with more entries than this is converted to pre-token counts (about 60 MB of pieces per worker).
MAX_PIECES = 1 << 19
# A document longer than this many characters is cut into pieces one segment at a time (`safe_segments`).
SEGMENT_CHARS = 1 << 20

_WHITESPACE = frozenset(WHITESPACE_CHARS)
# A candidate file cut: a space byte followed by a byte that starts a non-whitespace character. Multi-byte UTF-8
# whitespace (NBSP, U+3000, ...) is excluded by the negative lookahead, which needs up to 3 bytes after the space.
_MULTIBYTE_WHITESPACE = [char.encode() for char in WHITESPACE_CHARS if ord(char) >= 0x80]
_SPACE_CUT = re.compile(
    b" (?=(?!" + b"|".join(re.escape(char) for char in _MULTIBYTE_WHITESPACE) + b")[^\t\n\x0b\x0c\r ])"
)
_CUT_LOOKAHEAD = 4
_CUT_WINDOW = 1 << 12

Task = TypeVar("Task")


class CountingEngine(Protocol):
    """Runs counting tasks somewhere and adds up their pre-token counts (see the module docstring)."""

    def count(self, tasks: Iterable[Task], run: Callable[[PieceCounter, Task], int], special_tokens: Sequence[str],
              bar: Any) -> Counter[bytes]:
        """Run `run(counter, task)` once for every task, on `PieceCounter(special_tokens)` objects, updating `bar` by
        the sizes `run` returns; return the sum of the counters' pre-token counts. Tasks may be a lazy iterator (a
        stream): an engine pulls them as it goes and holds only a bounded number at a time."""
        ...


@dataclass
class CountStats:
    """What `errors="replace"` replaced: the number of invalid bytes, and where the first one was (path, offset)."""

    replaced_bytes: int = 0
    first_replacement: tuple[str, int] | None = None


def count_pretokens(texts: Iterable[str], special_tokens: Sequence[str] = ()) -> Counter[bytes]:
    """Pre-token counts (UTF-8 bytes of each GPT-2 pre-token) of the texts, in this process.

    Each text is pre-tokenized on its own; special tokens split it further and are not counted.

    >>> count_pretokens(["the cat", "the"])
    Counter({b'the': 2, b' cat': 1})
    """
    counter = PieceCounter(special_tokens)
    for index, text in enumerate(texts):
        _check_is_text(index, text)
        counter.add_text(replace_surrogates(text))
    return counter.pretoken_counts()


def count_pretokens_in_files(paths: PathArg | Sequence[PathArg], special_tokens: Sequence[str] = (), *,
                             num_workers: int | None = None, errors: str = "strict",
                             chunk_bytes: int = DEFAULT_CHUNK_BYTES, progress: bool | None = None,
                             engine: CountingEngine | None = None, stats: CountStats | None = None
                             ) -> Counter[bytes]:
    """Pre-token counts of UTF-8 text files, read in chunks by `num_workers` processes (default: one per usable CPU).

    `num_workers=1` counts in this process, as does the default for less than `MIN_PARALLEL_BYTES` of input.
    `errors="replace"` decodes invalid UTF-8 as U+FFFD, and fills `stats` (if given) with the number of bytes replaced
    and the first one's offset; with the default "strict", invalid UTF-8 raises `InputError` naming the file and the
    byte offset of the first bad byte. A UTF-16 or UTF-32 file (byte order mark) is refused before counting. An empty
    file among others is skipped; if every file is empty, that is an `InputError`. `progress=None` shows a tqdm bar
    (bytes processed) when stderr is a terminal. `engine` counts the chunks elsewhere (see the module docstring).

    Memory is bounded by the chunk size and the table of distinct pre-tokens, not the file size (see the module
    docstring and `find_chunk_boundaries`). On Linux the workers are forked when no other thread runs, so a script
    needs no `if __name__ == "__main__":` guard; elsewhere they are spawned, which re-imports the main script.
    """
    if errors not in ("strict", "replace"):
        raise ValueError(f"errors must be 'strict' or 'replace', got {errors!r}")
    if chunk_bytes < 1:
        raise ValueError(f"chunk_bytes must be positive, got {chunk_bytes}")
    _check_num_workers(num_workers)
    specials = validate_special_tokens(special_tokens)
    path_list = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    sizes = check_input_files(path_list)
    special_bytes = [token.encode() for token in specials]
    tasks: list[tuple[str, int, int]] = []
    for path, size in zip(path_list, sizes):
        if size:
            with open_binary(path) as file:
                boundaries = find_chunk_boundaries(file, size, chunk_bytes, special_bytes)
            tasks.extend((os.fspath(path), start, end) for start, end in zip(boundaries, boundaries[1:]))
    if errors == "replace" and stats is not None:
        _find_replacements(tasks, stats)
    if engine is None:
        small = num_workers is None and sum(sizes) < MIN_PARALLEL_BYTES
        engine = LocalCountingEngine(1 if small else num_workers)  # starting workers would take longer than counting
    with progress_bar(progress, desc="counting pre-tokens", total=sum(sizes), unit="B", unit_scale=True) as bar:
        return engine.count(tasks, _FileTask(errors), specials, bar)


def count_pretokens_in_iterator(texts: Iterable[str], special_tokens: Sequence[str] = (), *,
                                num_workers: int | None = None, progress: bool | None = None,
                                engine: CountingEngine | None = None) -> Counter[bytes]:
    """Pre-token counts of an iterable of texts (e.g. a `datasets` column), counted in parallel in batches.

    Each text is pre-tokenized on its own, as in `count_pretokens`. Batches of about `BATCH_CHARS` characters are
    sent to `num_workers` processes (default: one per usable CPU) while the iterable is consumed, a few at a time, so
    a stream (a streaming `datasets.IterableDataset`) is never held in memory; input that fits in one batch is
    counted in this process. A text longer than `SEGMENT_CHARS` goes to the workers in parts (see `_batches`).
    `engine` counts the batches elsewhere (see the module docstring). Measured with `train_bpe_from_iterator` on the
    Linux corpus as a streaming `datasets.IterableDataset` of JSON lines (one document per row, up to 24 MB), 2
    workers: the process tree peaks at 907 MB RSS / 620 MB PSS for 300 MB and 1,009 / 765 MB for 1.22 GB; most of it
    is `datasets` (167 MB to import it; iterating the stream alone peaks at 384 and 482 MB), whose pages the forked
    workers share.
    """
    _check_num_workers(num_workers)
    specials = validate_special_tokens(special_tokens)
    total = len(texts) if isinstance(texts, Sized) else None
    batches = _batches(texts, specials)
    with progress_bar(progress, desc="counting pre-tokens", total=total, unit=" texts") as bar:
        if engine is None:
            first = next(batches, _Batch())
            second = next(batches, None)
            if second is None:
                bar.update(first.texts)
                return count_pretokens(first, specials)
            batches = _chain_batches(first, second, batches)
            engine = LocalCountingEngine(num_workers)
        return engine.count(batches, _BatchTask(), specials, bar)


def find_chunk_boundaries(file: BinaryIO, size: int, chunk_bytes: int, special_tokens: Sequence[bytes] = ()
                          ) -> list[int]:
    """Byte offsets [0, ..., size] that cut a file into chunks of about `chunk_bytes` that can be counted alone.

    Each cut is the first safe position at or after the next multiple of `chunk_bytes`: the start of a
    special-token occurrence, or a space followed by a non-whitespace character that does not start a special token,
    and never strictly inside any special-token occurrence (special tokens may contain spaces and occurrences may
    overlap). Such a cut is a document boundary or a place where pre-tokenization can be cut (`hf_bpe.pretokenize`,
    fact 1), and it never splits a UTF-8 character. Text with no safe cut at all (no space, no special token) makes
    the chunk grow until one is found or the file ends.

    >>> import io
    >>> data = b"one two three four"
    >>> find_chunk_boundaries(io.BytesIO(data), len(data), 5)
    [0, 7, 13, 18]
    """
    boundaries = [0]
    target = chunk_bytes
    while target < size:
        cut = _find_safe_cut(file, target, size, special_tokens)
        if cut >= size:
            break
        boundaries.append(cut)
        target = (cut // chunk_bytes + 1) * chunk_bytes
    boundaries.append(size)
    return boundaries


class PieceCounter:
    """Counts the pieces (`split_into_pieces`) of texts, and turns them into pre-token counts.

    The piece table is converted to pre-token counts (`flush`) when it passes `max_pieces` entries (default
    `MAX_PIECES`), and at the end.

    >>> counter = PieceCounter(["<s>"])
    >>> counter.add_text("a cat<s> a cat")
    >>> counter.pieces
    Counter({' cat': 2, 'a': 1, ' a': 1})
    >>> sorted(counter.pretoken_counts().items())
    [(b' a', 1), (b' cat', 2), (b'a', 1)]
    """

    def __init__(self, special_tokens: Sequence[str] = (), max_pieces: int | None = None) -> None:
        self.pieces: Counter[str] = Counter()
        self.pretokens: Counter[bytes] = Counter()  # of the pieces converted so far
        self.max_pieces = MAX_PIECES if max_pieces is None else max_pieces
        self._splitter = SpecialTokenSplitter(special_tokens)

    def add_text(self, text: str) -> None:
        """Count the pieces of one text (its special tokens split it into documents and are dropped)."""
        update = self.pieces.update
        for document in self._splitter.split(text) if self._splitter else (text,):
            if len(document) <= SEGMENT_CHARS:
                update(split_into_pieces(document))
                continue
            for segment in safe_segments(document, SEGMENT_CHARS):  # never the list of all its pieces
                self.pieces.update(split_into_pieces(segment))
                if len(self.pieces) > self.max_pieces:
                    self.flush()  # a new piece table
            update = self.pieces.update
        if len(self.pieces) > self.max_pieces:
            self.flush()

    def flush(self) -> None:
        """Convert the piece table into pre-token counts (added to `pretokens`) and empty it."""
        if not self.pieces:
            return
        converted = self._pretokens_of_pieces()
        self.pieces = Counter()
        if not self.pretokens:
            self.pretokens = Counter({pretoken.encode(): count for pretoken, count in converted.items()})
            return
        pretokens = self.pretokens
        get = pretokens.get
        for pretoken, count in converted.items():
            key = pretoken.encode()
            pretokens[key] = get(key, 0) + count

    def pretoken_counts(self) -> Counter[bytes]:
        """The pre-token counts of everything added so far, keyed by UTF-8 bytes. The counter is empty afterwards
        (its memory goes with the result), ready for more text."""
        self.flush()
        counts, self.pretokens = self.pretokens, Counter()
        return counts

    def _pretokens_of_pieces(self) -> Counter[str]:
        """The pre-token counts of the piece table: each distinct piece pre-tokenized once, with stdlib `re` when ASCII.

        One route for every piece. Grouping pieces by count and pre-tokenizing each group with one regex call on its
        concatenation (joined with "\\n" separators whose counts were subtracted again) measured no faster: 2.30-2.95 s
        of conversion against 2.41-2.63 s for this loop, 7.3-8.7 s against 7.8-8.7 s of counting in all (CPU, 72 MB of
        ../shared/corpora, one process, 3 rounds alternating on a shared machine), and its long lists of pre-tokens
        doubled the memory a conversion needs.
        """
        counts: Counter[str] = Counter()
        ascii_findall, findall = GPT2_ASCII_REGEX.findall, GPT2_REGEX.findall
        for piece, count in self.pieces.items():
            if piece[-1] in _WHITESPACE:  # a run of whitespace: one pre-token (a piece ends in whitespace only then)
                counts[piece] += count
                continue
            for pretoken in ascii_findall(piece) if piece.isascii() else findall(piece):
                counts[pretoken] += count
        return counts


# --- chunk boundaries ----------------------------------------------------------------------------------------------


def _find_safe_cut(file: BinaryIO, target: int, size: int, special_tokens: Sequence[bytes]) -> int:
    """The first safe cut at or after `target` (see `find_chunk_boundaries`), or `size` if there is none."""
    reach = max(map(len, special_tokens), default=1) - 1  # how far an occurrence can extend over a cut
    window = _CUT_WINDOW
    while target < size:
        low = max(0, target - reach)
        file.seek(low)
        data = file.read(target - low + window + reach + _CUT_LOOKAHEAD)
        at_end = low + len(data) >= size
        limit = target + window  # candidates past here are looked at in the next window
        occurrences = [(low + start, low + start + len(token))
                       for token in special_tokens for start in _find_all(data, token)]
        starts = {start for start, _ in occurrences}
        # A space right before a special token ends its document: there the space is no cut, but the token start is.
        spaces = {low + match.start() for match in _SPACE_CUT.finditer(data, target - low)}
        candidates = sorted({space for space in spaces if space + 1 not in starts}
                            | {start for start in starts if start >= target})
        for cut in candidates:
            if cut >= limit or (not at_end and cut + _CUT_LOOKAHEAD > low + len(data)):
                break
            if not any(start < cut < end for start, end in occurrences):
                return cut
        target = limit
        window *= 2
    return size


def _find_all(data: bytes, token: bytes) -> Iterator[int]:
    """Start offsets of every occurrence of token in data, overlapping ones included."""
    start = data.find(token)
    while start >= 0:
        yield start
        start = data.find(token, start + 1)



# --- tasks ---------------------------------------------------------------------------------------------------------


class _FileTask:
    """Counts one byte range (path, start, end) of a file; its size is the number of bytes."""

    def __init__(self, errors: str) -> None:
        self.errors = errors

    def __call__(self, counter: PieceCounter, task: tuple[str, int, int]) -> int:
        path, start, end = task
        counter.add_text(read_text(path, start, end, self.errors))
        return end - start


class _BatchTask:
    """Counts a batch (list) of texts, each on its own; its size is the number of texts (`_Batch.texts`)."""

    def __call__(self, counter: PieceCounter, batch: list[str]) -> int:
        for text in batch:
            counter.add_text(replace_surrogates(text))
        return getattr(batch, "texts", len(batch))


def _find_replacements(tasks: list[tuple[str, int, int]], stats: CountStats) -> None:
    """Fill `stats` with what errors="replace" replaces in the chunks (one decoding pass, about 1 s per GB)."""
    for path, start, end in tasks:
        replaced, first = find_invalid_utf8(path, start, end)
        stats.replaced_bytes += replaced
        if first is not None and stats.first_replacement is None:
            stats.first_replacement = (path, first)


# --- the local engine: worker processes ----------------------------------------------------------------------------


class LocalCountingEngine:
    """Counts in `num_workers` processes on this machine (default: one per usable CPU); 1 counts in this process.

    Workers pull tasks from a bounded queue and send back the pre-token counts of their piece table whenever it is
    converted. A task error (e.g. invalid UTF-8) is reported with the task's index; workers then skip later tasks,
    and the error of the first failing task is raised, so the offset reported is the first bad byte of the input.
    """

    def __init__(self, num_workers: int | None = None) -> None:
        _check_num_workers(num_workers)
        self.num_workers = num_workers

    def count(self, tasks: Iterable[Task], run: Callable[[PieceCounter, Task], int], special_tokens: Sequence[str],
              bar: Any) -> Counter[bytes]:
        workers = default_num_workers() if self.num_workers is None else self.num_workers
        if isinstance(tasks, Sized):
            workers = min(workers, len(tasks))
        if workers <= 1:
            counter = PieceCounter(special_tokens)
            for task in tasks:
                bar.update(run(counter, task))
            return counter.pretoken_counts()
        return _WorkerProcesses(run, special_tokens, workers).count(tasks, bar)


class _WorkerProcesses:
    """One run of `LocalCountingEngine` with worker processes: the queues, the workers and the parent's total."""

    def __init__(self, run: Callable[[PieceCounter, Any], int], special_tokens: Sequence[str], num_workers: int
                 ) -> None:
        self.context = multiprocessing_context()
        self.run = run
        self.special_tokens = list(special_tokens)
        self.num_workers = num_workers

    def count(self, tasks: Iterable[Any], bar: Any) -> Counter[bytes]:
        context = self.context
        self.task_queue = context.Queue(maxsize=2 * self.num_workers)
        self.result_queue = context.Queue()
        first_error_index = context.Value("q", sys.maxsize)
        self.processes = [context.Process(target=_worker_main, daemon=True,
                                          args=(self.run, self.special_tokens, self.task_queue, self.result_queue,
                                                first_error_index))
                          for _ in range(self.num_workers)]
        self.bar = bar
        self.total: Counter[bytes] = Counter()
        self.errors: dict[int, str] = {}
        self.finished = 0
        start_workers(lambda: [process.start() for process in self.processes])
        try:
            for index, task in enumerate(tasks):
                while True:
                    try:
                        self.task_queue.put((index, task), timeout=0.05)
                        break
                    except queue.Full:
                        self._handle_messages()
                self._handle_messages(block=False)
            for _ in self.processes:
                self.task_queue.put(None)
            while self.finished < len(self.processes):
                self._handle_messages()
        finally:
            stopped_early = self.finished < len(self.processes)
            for process in self.processes:
                if process.is_alive() and stopped_early:
                    process.terminate()
                process.join()
            if stopped_early:  # tasks may be left in the queue: do not wait to flush them to no reader
                self.task_queue.cancel_join_thread()
            # Stop the queue's feeder thread now: a thread left running would make the next pool spawn, not fork.
            for channel in (self.task_queue, self.result_queue):
                channel.close()
                channel.join_thread()
        if self.errors:
            raise InputError(self.errors[min(self.errors)])
        return self.total

    def _handle_messages(self, block: bool = True) -> None:
        """Handle the messages waiting from the workers (waiting a little for one if `block`)."""
        try:
            self._handle(self.result_queue.get(timeout=0.1) if block else self.result_queue.get_nowait())
            while True:
                self._handle(self.result_queue.get_nowait())
        except queue.Empty:
            pass
        if block and any(process.exitcode not in (None, 0) for process in self.processes):
            method = self.context.get_start_method()
            raise RuntimeError(
                f"a pre-token counting worker process died: out of memory, or it could not start (with the {method!r} "
                "start method the main script is re-imported: guard it with `if __name__ == \"__main__\":`, and "
                "use num_workers=1 for code read from stdin)" if method == "spawn" else
                "a pre-token counting worker process died (out of memory?); num_workers=1 counts in this process"
            ) from None

    def _handle(self, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "progress":
            self.bar.update(message[1])
        elif kind == "counts":
            self._add(message[1])
        elif kind == "error":
            self.errors[message[1]] = message[2]
        elif kind == "crash":
            raise RuntimeError(f"a pre-token counting worker failed:\n{message[1]}")
        else:
            self.finished += 1
            if message[1] is not None:
                self._add(message[1])

    def _add(self, counts: Counter[bytes]) -> None:
        if len(counts) > len(self.total):  # add the smaller Counter to the larger
            self.total, counts = counts, self.total
        self.total.update(counts)


def _worker_main(run: Callable[[PieceCounter, Any], int], special_tokens: list[str], task_queue: Any,
                 result_queue: Any, first_error_index: Any) -> None:
    leave_interrupts_to_the_parent()
    try:
        counter = PieceCounter(special_tokens)
        failed = False
        while (item := task_queue.get()) is not None:
            index, task = item
            if index > first_error_index.value:
                continue
            try:
                size = run(counter, task)
            except InputError as error:
                failed = True
                with first_error_index.get_lock():
                    first_error_index.value = min(first_error_index.value, index)
                result_queue.put(("error", index, str(error)))
                continue
            if counter.pretokens:  # the piece table was converted: hand its counts over to the parent
                result_queue.put(("counts", counter.pretoken_counts()))
            result_queue.put(("progress", size))
        result_queue.put(("done", None if failed else counter.pretoken_counts()))
    except BaseException:  # anything unexpected is reported to the parent rather than lost in a worker's stderr
        import traceback

        result_queue.put(("crash", traceback.format_exc()))


# --- helpers -------------------------------------------------------------------------------------------------------


def _check_num_workers(num_workers: int | None) -> None:
    if num_workers is not None and num_workers < 1:
        raise ValueError(f"num_workers must be at least 1, got {num_workers}")


def _check_is_text(index: int, text: object) -> None:
    if not isinstance(text, str):
        raise InputError(f"text #{index} of the input is {type(text).__name__}, not str")


class _Batch(list):
    """A batch of texts for `_BatchTask`: a list of strs, and `texts`, how many texts of the input end in it (a long
    text is sent as parts, possibly over several batches)."""

    texts = 0


def _batches(texts: Iterable[str], special_tokens: Sequence[str] = ()) -> Iterator[_Batch]:
    """Batches of consecutive texts of about BATCH_CHARS characters in all, checking that each text is a str.

    A text longer than `SEGMENT_CHARS` is sent as parts: its documents (split at the special tokens, after replacing
    its lone surrogates) cut into segments (`safe_segments`), each counted alone with the same result. So no batch
    holds more than about BATCH_CHARS + SEGMENT_CHARS characters, whatever the longest text, and the batches waiting
    in the queue and in the workers stay small.

    >>> [(list(batch), batch.texts) for batch in _batches(["a", "b c"])]
    [(['a', 'b c'], 2)]
    """
    splitter = SpecialTokenSplitter(special_tokens)
    batch, size = _Batch(), 0
    for index, text in enumerate(texts):
        _check_is_text(index, text)
        if len(text) <= SEGMENT_CHARS:
            batch.append(text)
            size += len(text) + 1
        else:
            text = replace_surrogates(text)  # as the workers would: no part may differ from its text there
            for document in splitter.split(text) if splitter else (text,):
                for segment in safe_segments(document, SEGMENT_CHARS):
                    if size >= BATCH_CHARS:
                        yield batch
                        batch, size = _Batch(), 0
                    batch.append(segment)
                    size += len(segment) + 1
        batch.texts += 1
        if size >= BATCH_CHARS:
            yield batch
            batch, size = _Batch(), 0
    if batch or batch.texts:
        yield batch


def _chain_batches(first: _Batch, second: _Batch, rest: Iterator[_Batch]) -> Iterator[_Batch]:
    yield first
    yield second
    yield from rest


__all__ = ["BATCH_CHARS", "DEFAULT_CHUNK_BYTES", "MAX_PIECES", "MIN_PARALLEL_BYTES", "CountStats", "CountingEngine",
           "LocalCountingEngine", "PieceCounter", "count_pretokens", "count_pretokens_in_files",
           "count_pretokens_in_iterator", "find_chunk_boundaries"]
