"""Counting GPT-2 pre-tokens in a corpus: the first stage of training.

Semantics, exactly as the plain reference `Counter(GPT2_REGEX.findall(doc) for doc in special_regex.split(text))`:
special tokens split the text into documents (leftmost occurrence, the longest special token first when several start
at one place) and are never counted; pre-tokens are the GPT-2 regex matches inside each document, keyed by their UTF-8
bytes. Each text of an iterable is a document boundary too.

How it is fast (each step is differential-tested against that reference in tests/test_count.py):

* Text is cut into *pieces* with one C-level `re.findall` (`hf_bpe.pretokenize.split_into_pieces`): no pre-token
  crosses a piece, so pieces are counted with `collections.Counter` (in C) and the slow GPT-2 regex runs only on the
  distinct pieces, each pre-token's count being the sum of its pieces' counts.
* Even the distinct pieces are not pre-tokenized one call at a time: pieces seen equally often are pre-tokenized
  together with one regex call on their concatenation (joining at a space before non-whitespace, or with a "\\n"
  separator, changes no pre-token), and the result is counted by `Counter.update` in C, repeated that many times.
  ASCII pieces use `GPT2_ASCII_REGEX` (stdlib `re`, about twice as fast as `regex`).
* Files are split into chunks of about `chunk_bytes` at safe cuts found by the parent (`find_chunk_boundaries`), and
  worker processes each pull chunks from a queue, read their own byte range, and add its pieces to one piece count per
  worker. Each worker converts its piece counts to pre-token counts once, at the end, so no distinct piece is
  pre-tokenized twice by one worker.

>>> sorted(count_pretokens(["Hi hi<|endoftext|>hi"], ["<|endoftext|>"]).items())
[(b' hi', 1), (b'Hi', 1), (b'hi', 1)]
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import re
import stat
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, BinaryIO, Union

from hf_bpe.errors import InputError
from hf_bpe.pretokenize import (
    GPT2_ASCII_REGEX,
    GPT2_REGEX,
    WHITESPACE_CHARS,
    split_into_pieces,
    validate_special_tokens,
)

PathArg = Union[str, "os.PathLike[str]"]

DEFAULT_CHUNK_BYTES = 1 << 20
# With the default num_workers, less input than this is counted in this process: starting a worker (a new
# interpreter importing hf_bpe) costs about as much as counting a few megabytes.
MIN_PARALLEL_BYTES = 4 << 20
# Texts from an iterable are sent to the workers in batches of about this many characters.
BATCH_CHARS = 1 << 20

_WHITESPACE = frozenset(WHITESPACE_CHARS)
# A candidate file cut: a space byte followed by a byte that starts a non-whitespace character. Multi-byte UTF-8
# whitespace (NBSP, U+3000, ...) is excluded by the negative lookahead, which needs up to 3 bytes after the space.
_MULTIBYTE_WHITESPACE = [char.encode() for char in WHITESPACE_CHARS if ord(char) >= 0x80]
_SPACE_CUT = re.compile(
    b" (?=(?!" + b"|".join(re.escape(char) for char in _MULTIBYTE_WHITESPACE) + b")[^\t\n\x0b\x0c\r ])"
)
_CUT_LOOKAHEAD = 4
_CUT_WINDOW = 1 << 12
# Pieces seen at most this often are pre-tokenized in groups by count (see `PieceCounter.pretoken_counts`).
_REPEAT_LIMIT = 8
_SEPARATOR = "\n"


def count_pretokens(texts: Iterable[str], special_tokens: Sequence[str] = ()) -> Counter[bytes]:
    """Pre-token counts (UTF-8 bytes of each GPT-2 pre-token) of the texts, in this process.

    Each text is pre-tokenized on its own; special tokens split it further and are not counted.

    >>> count_pretokens(["the cat", "the"])
    Counter({b'the': 2, b' cat': 1})
    """
    counter = PieceCounter(special_tokens)
    for index, text in enumerate(texts):
        _check_is_text(index, text)
        counter.add_text(text)
    return counter.pretoken_counts()


def count_pretokens_in_files(paths: PathArg | Sequence[PathArg], special_tokens: Sequence[str] = (), *,
                             num_workers: int | None = None, errors: str = "strict",
                             chunk_bytes: int = DEFAULT_CHUNK_BYTES, progress: bool | None = None) -> Counter[bytes]:
    """Pre-token counts of UTF-8 text files, read in chunks by `num_workers` processes (default: all cores).

    `num_workers=1` counts in this process, as does the default for less than `MIN_PARALLEL_BYTES` of input.
    `errors="replace"` decodes invalid UTF-8 as U+FFFD; with the default "strict", invalid UTF-8 raises `InputError`
    naming the file and the byte offset of the first bad byte. An empty file among others is skipped; if every file
    is empty, that is an `InputError`. `progress=None` shows a tqdm bar (bytes processed) when stderr is a terminal.

    Memory is bounded by the chunk size, not the file size (see `find_chunk_boundaries`): only text with no safe cut
    at all, such as megabytes without a space or a special token, makes a chunk grow past `chunk_bytes`. Worker
    processes are started with "spawn", which re-imports the main script: guard it with `if __name__ == "__main__":`.
    """
    if errors not in ("strict", "replace"):
        raise ValueError(f"errors must be 'strict' or 'replace', got {errors!r}")
    if chunk_bytes < 1:
        raise ValueError(f"chunk_bytes must be positive, got {chunk_bytes}")
    _check_num_workers(num_workers)
    specials = validate_special_tokens(special_tokens)
    path_list = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    sizes = _check_input_files(path_list)
    special_bytes = [token.encode() for token in specials]
    tasks: list[tuple[str, int, int]] = []
    for path, size in zip(path_list, sizes):
        if size:
            with open(path, "rb") as file:
                boundaries = find_chunk_boundaries(file, size, chunk_bytes, special_bytes)
            tasks.extend((os.fspath(path), start, end) for start, end in zip(boundaries, boundaries[1:]))
    if num_workers is None and sum(sizes) < MIN_PARALLEL_BYTES:
        num_workers = 1  # starting worker processes would take longer than counting
    with _progress_bar(progress, total=sum(sizes), unit="B", unit_scale=True) as bar:
        return _count_tasks(tasks, _FileTask(specials, errors), num_workers, bar)


def count_pretokens_in_iterator(texts: Iterable[str], special_tokens: Sequence[str] = (), *,
                                num_workers: int | None = None, progress: bool | None = None) -> Counter[bytes]:
    """Pre-token counts of an iterable of texts (e.g. a `datasets` column), counted in parallel in batches.

    Each text is pre-tokenized on its own, as in `count_pretokens`. Batches are sent to `num_workers` processes
    (default: all cores) while the iterable is consumed; input that fits in one batch is counted in this process.
    """
    _check_num_workers(num_workers)
    specials = validate_special_tokens(special_tokens)
    total = len(texts) if hasattr(texts, "__len__") else None  # type: ignore[arg-type]
    batches = _batches(texts)
    first = next(batches, [])
    second = next(batches, None)
    with _progress_bar(progress, total=total, unit=" texts") as bar:
        if second is None:
            bar.update(len(first))
            return count_pretokens(first, specials)
        all_batches = _chain_batches(first, second, batches)
        return _count_tasks(all_batches, _BatchTask(specials), num_workers, bar)


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
    """Counts the pieces (`split_into_pieces`) of texts, then turns them into pre-token counts in one go.

    >>> counter = PieceCounter(["<s>"])
    >>> counter.add_text("a cat<s> a cat")
    >>> counter.pieces
    Counter({' cat': 2, 'a': 1, ' a': 1})
    >>> sorted(counter.pretoken_counts().items())
    [(b' a', 1), (b' cat', 2), (b'a', 1)]
    """

    def __init__(self, special_tokens: Sequence[str] = ()) -> None:
        self.pieces: Counter[str] = Counter()
        tokens = sorted(set(special_tokens), key=lambda token: (-len(token), token))
        self._single_special = tokens[0] if len(tokens) == 1 else None
        # Stdlib `re` alternation tries alternatives in order, so longest first gives the longest match at a place.
        self._special_regex = re.compile("|".join(map(re.escape, tokens))) if len(tokens) > 1 else None

    def add_text(self, text: str) -> None:
        """Count the pieces of one text (its special tokens split it into documents and are dropped)."""
        if self._single_special is not None:
            documents = text.split(self._single_special)
        elif self._special_regex is not None:
            documents = self._special_regex.split(text)
        else:
            documents = [text]
        update = self.pieces.update
        for document in documents:
            update(split_into_pieces(document))

    def pretoken_counts(self) -> Counter[bytes]:
        """The pre-token counts of everything added so far, keyed by UTF-8 bytes."""
        counts: Counter[str] = Counter()
        # Pieces are grouped by count so that most of the work runs in C: a group's pieces are pre-tokenized with
        # one regex call and its pre-tokens counted with `Counter.update`, repeated `count` times. Within a group,
        # pieces starting with a space are simply concatenated (a space before non-whitespace is a safe cut); the
        # others are joined with separators (`_pretokenize_joined`). ASCII pieces use the faster stdlib regex.
        groups: dict[int, tuple[list[str], list[str], list[str], list[str]]] = {}
        frequent: list[tuple[str, int]] = []
        for piece, count in self.pieces.items():
            first = piece[0]
            if first in _WHITESPACE:
                if first != " " or len(piece) == 1 or piece[1] in _WHITESPACE:
                    counts[piece] += count  # whitespace only: one pre-token
                    continue
                kind = 0
            else:
                kind = 2
            if count > _REPEAT_LIMIT:
                frequent.append((piece, count))
                continue
            group = groups.get(count)
            if group is None:
                group = groups[count] = ([], [], [], [])
            group[kind if piece.isascii() else kind + 1].append(piece)
        for count, (spaced_ascii, spaced, bare_ascii, bare) in groups.items():
            for regex, pieces, separated in ((GPT2_ASCII_REGEX, spaced_ascii, False), (GPT2_REGEX, spaced, False),
                                             (GPT2_ASCII_REGEX, bare_ascii, True), (GPT2_REGEX, bare, True)):
                if not pieces:
                    continue
                pretokens = _pretokenize_joined(regex, pieces) if separated else regex.findall("".join(pieces))
                counts.update(pretokens * count if count > 1 else pretokens)
                if separated:
                    counts[_SEPARATOR] -= (len(pieces) - 1) * count
        for piece, count in frequent:
            for pretoken in (GPT2_ASCII_REGEX if piece.isascii() else GPT2_REGEX).findall(piece):
                counts[pretoken] += count
        try:
            return Counter({pretoken.encode(): count for pretoken, count in counts.items() if count})
        except UnicodeEncodeError as error:
            raise InputError(f"text contains the lone surrogate {error.object[error.start]!r}, which has no UTF-8 "
                             "encoding") from None


def _pretokenize_joined(regex: re.Pattern[str] | Any, pieces: list[str]) -> list[str]:
    """The pre-tokens of all pieces in one regex call, with a "\\n" pre-token between two pieces.

    The pieces must hold no whitespace but an optional leading space. Between two non-whitespace characters, or before
    a space and non-whitespace, a newline is a pre-token of its own and both sides of it are safe cuts, so the
    separator changes nothing else. The caller subtracts the separators (no piece has a "\\n" pre-token).

    >>> _pretokenize_joined(GPT2_REGEX, ["Hi,", " it's", "ok"])
    ['Hi', ',', '\\n', ' it', "'s", '\\n', 'ok']
    """
    return regex.findall(_SEPARATOR.join(pieces))


# --- files ---------------------------------------------------------------------------------------------------------


def _check_input_files(paths: list[PathArg]) -> list[int]:
    """The sizes of the files, raising InputError for a missing, unreadable or non-regular file, or no data at all."""
    if not paths:
        raise InputError("no input files given")
    sizes = []
    for path in paths:
        try:
            info = os.stat(path)
        except FileNotFoundError:
            raise InputError(f"{os.fspath(path)}: no such file") from None
        except OSError as error:
            raise InputError(f"{os.fspath(path)}: cannot read file: {error.strerror}") from None
        if stat.S_ISDIR(info.st_mode):
            raise InputError(f"{os.fspath(path)}: is a directory, not a text file")
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{os.fspath(path)}: is not a regular file")
        try:
            with open(path, "rb"):
                pass
        except OSError as error:
            raise InputError(f"{os.fspath(path)}: cannot read file: {error.strerror}") from None
        sizes.append(info.st_size)
    if not any(sizes):
        others = f" (as are all {len(paths)} input files)" if len(paths) > 1 else ""
        raise InputError(f"{os.fspath(paths[0])}: file is empty{others}")
    return sizes


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


def _read_text(path: str, start: int, end: int, errors: str) -> str:
    with open(path, "rb") as file:
        file.seek(start)
        data = file.read(end - start)
    try:
        return data.decode("utf-8", errors)
    except UnicodeDecodeError as error:
        raise InputError(
            f"{path}: invalid UTF-8 at byte offset {start + error.start} ({error.reason}); "
            "to replace bad bytes with U+FFFD, pass errors=\"replace\" (CLI: --errors replace)"
        ) from None


# --- tasks and workers ---------------------------------------------------------------------------------------------


class _FileTask:
    """Counts one byte range (path, start, end) of a file; its size is the number of bytes."""

    def __init__(self, special_tokens: Sequence[str], errors: str) -> None:
        self.special_tokens = list(special_tokens)
        self.errors = errors

    def __call__(self, counter: PieceCounter, task: tuple[str, int, int]) -> int:
        path, start, end = task
        counter.add_text(_read_text(path, start, end, self.errors))
        return end - start


class _BatchTask:
    """Counts a batch (list) of texts, each on its own; its size is the number of texts."""

    def __init__(self, special_tokens: Sequence[str]) -> None:
        self.special_tokens = list(special_tokens)

    def __call__(self, counter: PieceCounter, batch: list[str]) -> int:
        for text in batch:
            counter.add_text(text)
        return len(batch)


def _count_tasks(tasks: Iterable[Any], run: _FileTask | _BatchTask, num_workers: int | None, bar: Any
                 ) -> Counter[bytes]:
    """Run the tasks in this process or in worker processes and add up the pre-token counts."""
    workers = _default_num_workers() if num_workers is None else num_workers
    if isinstance(tasks, list) and len(tasks) <= 1:
        workers = 1
    if workers == 1:
        counter = PieceCounter(run.special_tokens)
        for task in tasks:
            bar.update(run(counter, task))
        return counter.pretoken_counts()
    if isinstance(tasks, list):
        workers = min(workers, len(tasks))
    return _WorkerPool(run, workers).count(tasks, bar)


class _WorkerPool:
    """Worker processes that pull tasks from a queue, each keeping one piece count, converted once at the end.

    A task error (e.g. invalid UTF-8) is reported with the task's index; workers then skip later tasks, and the error
    of the first failing task is raised, so the offset reported is the first bad byte of the input.
    """

    def __init__(self, run: _FileTask | _BatchTask, num_workers: int) -> None:
        # "spawn" behaves the same on Linux and macOS, and is safe when the parent has threads (tqdm, tokenizers).
        self.context = multiprocessing.get_context("spawn")
        self.run = run
        self.num_workers = num_workers

    def count(self, tasks: Iterable[Any], bar: Any) -> Counter[bytes]:
        context = self.context
        self.task_queue = context.Queue(maxsize=4 * self.num_workers)
        self.result_queue = context.Queue()
        first_error_index = context.Value("q", sys.maxsize)
        self.processes = [context.Process(target=_worker_main, daemon=True,
                                          args=(self.run, self.task_queue, self.result_queue, first_error_index))
                          for _ in range(self.num_workers)]
        self.bar = bar
        self.total: Counter[bytes] = Counter()
        self.errors: dict[int, str] = {}
        self.finished = 0
        for process in self.processes:
            process.start()
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
            for process in self.processes:
                if process.is_alive() and self.finished < len(self.processes):
                    process.terminate()
                process.join()
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
            raise RuntimeError(
                "a pre-token counting worker process died: out of memory, or it could not start (with the 'spawn' "
                "start method the main script is re-imported: guard it with `if __name__ == \"__main__\":`, and "
                "use num_workers=1 for code read from stdin)"
            ) from None

    def _handle(self, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "progress":
            self.bar.update(message[1])
        elif kind == "error":
            self.errors[message[1]] = message[2]
        elif kind == "crash":
            raise RuntimeError(f"a pre-token counting worker failed:\n{message[1]}")
        else:
            self.finished += 1
            counts = message[1]
            if counts is not None:
                if len(counts) > len(self.total):  # add the smaller Counter to the larger
                    self.total, counts = counts, self.total
                self.total.update(counts)


def _worker_main(run: _FileTask | _BatchTask, task_queue: Any, result_queue: Any, first_error_index: Any) -> None:
    try:
        counter = PieceCounter(run.special_tokens)
        failed = False
        while (item := task_queue.get()) is not None:
            index, task = item
            if index > first_error_index.value:
                continue
            try:
                result_queue.put(("progress", run(counter, task)))
            except InputError as error:
                failed = True
                with first_error_index.get_lock():
                    first_error_index.value = min(first_error_index.value, index)
                result_queue.put(("error", index, str(error)))
        result_queue.put(("done", None if failed else counter.pretoken_counts()))
    except BaseException:  # anything unexpected is reported to the parent rather than lost in a worker's stderr
        import traceback

        result_queue.put(("crash", traceback.format_exc()))


# --- helpers -------------------------------------------------------------------------------------------------------


def _check_num_workers(num_workers: int | None) -> None:
    if num_workers is not None and num_workers < 1:
        raise ValueError(f"num_workers must be at least 1, got {num_workers}")


def _default_num_workers() -> int:
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def _check_is_text(index: int, text: object) -> None:
    if not isinstance(text, str):
        raise InputError(f"text #{index} of the input is {type(text).__name__}, not str")


def _batches(texts: Iterable[str]) -> Iterator[list[str]]:
    """Lists of consecutive texts of about BATCH_CHARS characters in all, checking that each text is a str."""
    batch: list[str] = []
    size = 0
    for index, text in enumerate(texts):
        _check_is_text(index, text)
        batch.append(text)
        size += len(text) + 1
        if size >= BATCH_CHARS:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _chain_batches(first: list[str], second: list[str], rest: Iterator[list[str]]) -> Iterator[list[str]]:
    yield first
    yield second
    yield from rest


def _progress_bar(progress: bool | None, **options: Any) -> Any:
    if progress is None:
        progress = sys.stderr.isatty()
    from tqdm.auto import tqdm

    return tqdm(disable=not progress, desc="counting pre-tokens", **options)


__all__ = ["DEFAULT_CHUNK_BYTES", "MIN_PARALLEL_BYTES", "PieceCounter", "count_pretokens",
           "count_pretokens_in_files", "count_pretokens_in_iterator", "find_chunk_boundaries"]
