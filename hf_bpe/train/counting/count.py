"""Counting pre-tokens in a corpus: the first stage of training.

Semantics, exactly as the plain reference `Counter(GPT2_REGEX.findall(doc) for doc in splitter.split(text))`:
special tokens split the text into documents (leftmost occurrence, the longest special token first when several start
at one place) and are never counted; pre-tokens are the GPT-2 regex matches inside each document, keyed by their UTF-8
bytes. Each text of an iterable is a document boundary too. Lone surrogates in a text (which have no UTF-8) are
replaced as tiktoken and the encoder replace them (`replace_surrogates`). Every function takes `pattern=` (a preset
name or regex text, `hf_bpe.pretokenize.patterns`) to count another pattern's pre-tokens instead of GPT-2's: the
presets' files are cut at their own safe cuts, a custom pattern's only at special tokens (each document is matched
whole, as tiktoken and `tokenizers` match it).

How it is fast (each step is differential-tested against that reference in tests/train/counting/test_count.py):

* Text is cut into *pieces* with one C-level `re.findall` (`hf_bpe.pretokenize.gpt2.split_into_pieces`): no pre-token
  crosses a piece, so pieces are counted with `collections.Counter` (in C) and the slow GPT-2 regex runs only on the
  distinct pieces, each pre-token's count being the sum of its pieces' counts.
* ASCII pieces are pre-tokenized with `GPT2_ASCII_REGEX` (stdlib `re`, about twice as fast as `regex`).
* Files are split into chunks of about `chunk_bytes` at safe cuts found by the parent (`find_chunk_boundaries`), and
  worker processes each pull chunks from a queue, read their own byte range, and add its pieces to one piece table
  per worker, so a piece seen in many chunks is pre-tokenized once per worker and conversion (below).

Memory is bounded by the table of distinct pre-tokens, not by the corpus: distinct pieces outnumber distinct
pre-tokens 2.4-3.5x on real corpora and keep growing with the corpus, so when a worker's piece table passes
`MAX_PIECES` entries it is converted to pre-token counts (`PieceCounter.flush`), which the worker hands to the parent
at once. The parent holds one pre-token table and the one being added to it (`scripts/bench_count.py` measures the
process tree's peak).

Counting engines. The work is a list of *tasks* (a file chunk `(path, start, end)`, or a batch of texts) and a
picklable `run(counter, task)` that adds one task's text to a `PieceCounter` and returns its size for the progress
bar. A `CountingEngine` runs every task exactly once, in any order, on any machine, and returns the sum of the
pre-token counts; `LocalCountingEngine` (worker processes on this machine) is the default, and
`hf_bpe.train.counting.ray_counting.RayCountingEngine` runs the same tasks on a Ray cluster. An engine in a few lines:

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
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from dataclasses import dataclass
from typing import Any, BinaryIO, Protocol

from hf_bpe.cluster.session import check_engine
from hf_bpe.common.errors import InputError
from hf_bpe.common.files import PathArg, check_input_files, find_invalid_utf8, open_binary, read_text
from hf_bpe.common.parallel import (
    progress_bar,
)
from hf_bpe.pretokenize import (
    BEFORE_DIGITS,
    GPT2_PATTERN,
    WHITESPACE_CHARS,
    SpecialTokenSplitter,
    compile_pattern,
    replace_surrogates,
    resolve_pattern,
    validate_special_tokens,
)
from hf_bpe.train.counting.local_engine import LocalCountingEngine, check_num_workers
from hf_bpe.train.counting.piece_counter import MAX_PIECES, SEGMENT_CHARS, PieceCounter, Tally, Task, add_counts
from hf_bpe.train.counting.ray_counting import RayCountingEngine
from hf_bpe.train.counting.sampling import SampleWindowsTask, sample_of, sample_tasks, sample_texts

DEFAULT_CHUNK_BYTES = 1 << 20
# With the default num_workers, less input than this is counted in this process: starting workers costs about as
# much as counting a few megabytes.
MIN_PARALLEL_BYTES = 4 << 20
# Texts from an iterable are sent to the workers in batches of about this many characters.
BATCH_CHARS = 1 << 20

# A candidate file cut: a space byte followed by a byte that starts a non-whitespace character. Multi-byte UTF-8
# whitespace (NBSP, U+3000, ...) is excluded by the negative lookahead, which needs up to 3 bytes after the space.
_MULTIBYTE_WHITESPACE = [char.encode() for char in WHITESPACE_CHARS if ord(char) >= 0x80]
_SPACE_CUT = re.compile(
    b" (?=(?!" + b"|".join(re.escape(char) for char in _MULTIBYTE_WHITESPACE) + b")[^\t\n\x0b\x0c\r ])"
)
_CUT_LOOKAHEAD = 4
_CUT_WINDOW = 1 << 12
# The presets' safe cut (hf_bpe.pretokenize.patterns.BETWEEN_WORDS_SPACE) in UTF-8: a candidate space cut whose
# previous character is not whitespace either (up to 3 bytes back, so windows start that far before their target).
_BETWEEN_WORDS_CUT = re.compile(b"".join(b"(?<!" + re.escape(char.encode()) + b")" for char in WHITESPACE_CHARS)
                                + _SPACE_CUT.pattern)
_CUT_LOOKBEHIND = 3
# The superword pattern's safe cut (hf_bpe.pretokenize.patterns.BEFORE_DIGITS) in UTF-8.
_BEFORE_DIGITS_CUT = re.compile(rb"(?<=[\x00-/:-\x7f])(?=[0-9])")
# Maps one task's pre-token counts to the counts summed instead (`count_pretokens_in_files(..., convert=)`).
Convert = Callable[[Counter[bytes]], Counter[bytes] | Tally]



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


def counting_engine(engine: str, ray_address: str | None = None) -> CountingEngine | None:
    """The counting engine named `engine` (None: the local worker processes), checked before any counting.

    Ray itself is imported only when the Ray engine counts.

    >>> counting_engine("local") is None
    True
    >>> counting_engine("spark")
    Traceback (most recent call last):
    ...
    ValueError: engine must be one of 'local', 'ray', got 'spark'
    """
    check_engine(engine, ray_address)
    return RayCountingEngine(ray_address) if engine == "ray" else None


def count_pretokens(texts: Iterable[str], special_tokens: Sequence[str] = (), *, pattern: str | None = None
                    ) -> Counter[bytes]:
    """Pre-token counts (UTF-8 bytes of each GPT-2 pre-token, or of `pattern`'s) of the texts, in this process.

    Each text is pre-tokenized on its own; special tokens split it further and are not counted.

    >>> count_pretokens(["the cat", "the"])
    Counter({b'the': 2, b' cat': 1})
    >>> count_pretokens(["12345"], pattern="cl100k")
    Counter({b'123': 1, b'45': 1})
    """
    counter = PieceCounter(special_tokens, pattern=pattern)
    for index, text in enumerate(texts):
        _check_is_text(index, text)
        counter.add_text(replace_surrogates(text))
    return counter.pretoken_counts()


def count_pretokens_in_files(paths: PathArg | Sequence[PathArg], special_tokens: Sequence[str] = (), *,
                             num_workers: int | None = None, errors: str = "strict",
                             chunk_bytes: int = DEFAULT_CHUNK_BYTES, progress: bool | None = None,
                             engine: CountingEngine | None = None, stats: CountStats | None = None,
                             pattern: str | None = None, convert: Convert | None = None) -> Counter[bytes]:
    """Pre-token counts of UTF-8 text files, read in chunks by `num_workers` processes (default: one per usable CPU).

    `num_workers=1` counts in this process, as does the default for less than `MIN_PARALLEL_BYTES` of input.
    `errors="replace"` decodes invalid UTF-8 as U+FFFD, and fills `stats` (if given) with the number of bytes replaced
    and the first one's offset; with the default "strict", invalid UTF-8 raises `InputError` naming the file and the
    byte offset of the first bad byte. A UTF-16 or UTF-32 file (byte order mark) is refused before counting. An empty
    file among others is skipped; if every file is empty, that is an `InputError`. `progress=None` shows a tqdm bar
    (bytes processed) when stderr is a terminal. `engine` counts the chunks elsewhere (see the module docstring).
    `convert`, if given, maps each chunk's pre-token counts to what is summed instead, where the chunk is counted
    (in the workers: SuperBPE's stage 2 segments its pre-tokens there; pre-token counts or another `Tally`); it must
    be picklable for Ray. A stage-2 sample's (`sample` > 1 and `counting_all()`) is given windows of about one byte
    in `sample` of the files instead of the chunks, converted by `counting_all()` (`sampling`).

    Memory is bounded by the chunk size and the table of distinct pre-tokens, not the file size (see the module
    docstring and `find_chunk_boundaries`). On Linux the workers are forked when no other thread runs, so a script
    needs no `if __name__ == "__main__":` guard; elsewhere they are spawned, which re-imports the main script.
    """
    specials, regex = check_file_options(special_tokens, pattern, errors, chunk_bytes, num_workers)
    path_list = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    sizes = check_input_files(path_list)
    every = sample_of(convert)
    run: Callable[[PieceCounter, Any], int]
    if every > 1:  # a stage-2 sample: windows of about one byte in `every`, converted whole (`sampling`)
        tasks: list[Any] = sample_tasks(list(map(os.fspath, path_list)), sizes, every)
        run, convert = SampleWindowsTask(None if regex == GPT2_PATTERN else regex), convert.counting_all()
    else:
        tasks, run = file_chunks(path_list, sizes, specials, regex, chunk_bytes, errors, stats), _FileTask(errors,
                                                                                                         regex)
    engine = engine if engine is not None else files_engine(num_workers, sum(sizes))
    with progress_bar(progress, desc="counting pre-tokens", total=sum(sizes), unit="B", unit_scale=True) as bar:
        return engine.count(tasks, _converted(run, convert, specials), specials, bar)


def count_pretokens_in_iterator(texts: Iterable[str], special_tokens: Sequence[str] = (), *,
                                num_workers: int | None = None, progress: bool | None = None,
                                engine: CountingEngine | None = None, pattern: str | None = None,
                                convert: Convert | None = None) -> Counter[bytes]:
    """Pre-token counts of an iterable of texts (e.g. a `datasets` column), counted in parallel in batches.

    Each text is pre-tokenized on its own, as in `count_pretokens`. Batches of about `BATCH_CHARS` characters are
    sent to `num_workers` processes (default: one per usable CPU) while the iterable is consumed, a few at a time, so
    a stream (a streaming `datasets.IterableDataset`) is never held in memory; input that fits in one batch is
    counted in this process. A text longer than `SEGMENT_CHARS` goes to the workers in parts (see `text_batches`).
    `engine` counts the batches elsewhere (see the module docstring); `convert` as for `count_pretokens_in_files`
    (a stage-2 sample's is given windows of the texts, `sampling.sample_texts`).
    Over a streaming dataset, most of the memory is
    `datasets`' own, whose pages the forked workers share (docs/benchmarks.md, "Streaming from a dataset").
    """
    check_num_workers(num_workers)
    specials = validate_special_tokens(special_tokens)
    regex = resolve_pattern(pattern)
    total = len(texts) if isinstance(texts, Sized) else None
    every = sample_of(convert)
    if every > 1:  # a stage-2 sample: windows of about one character in `every`, converted whole (`sampling`)
        texts, convert, total = sample_texts(texts, every), convert.counting_all(), None
    batches = text_batches(texts, specials, regex)
    with progress_bar(progress, desc="counting pre-tokens", total=total, unit=" texts") as bar:
        if engine is None:
            first = next(batches, _Batch())
            second = next(batches, None)
            if second is None:
                bar.update(first.texts)
                counts = count_pretokens(first, specials, pattern=regex)
                return counts if convert is None else convert(counts)
            batches = _chain_batches(first, second, batches)
            engine = LocalCountingEngine(num_workers)
        return engine.count(batches, _converted(_BatchTask(regex), convert, specials), specials, bar)


def check_file_options(special_tokens: Sequence[str], pattern: str | None, errors: str, chunk_bytes: int,
                       num_workers: int | None) -> tuple[list[str], str]:
    """The checked special tokens and the pattern's regex text, for counting files (`count_pretokens_in_files`,
    `hf_bpe.train.counting.sources.count_sources_in_files`); ValueError for a bad `errors`, `chunk_bytes` or
    `num_workers`."""
    if errors not in ("strict", "replace"):
        raise ValueError(f"errors must be 'strict' or 'replace', got {errors!r}")
    if chunk_bytes < 1:
        raise ValueError(f"chunk_bytes must be positive, got {chunk_bytes}")
    check_num_workers(num_workers)
    return validate_special_tokens(special_tokens), resolve_pattern(pattern)


def file_chunks(paths: Sequence[PathArg], sizes: Sequence[int], special_tokens: Sequence[str], pattern: str,
                chunk_bytes: int, errors: str = "strict", stats: CountStats | None = None
                ) -> list[tuple[str, int, int]]:
    """The chunks `(path, start, end)` of the files (of the `sizes` that `check_input_files` gave; empty ones have
    none) that counting tasks read (`find_chunk_boundaries`). With `errors="replace"`, `stats` (if given) adds up what
    the chunks' decoding replaces."""
    special_bytes = [token.encode() for token in special_tokens]
    chunks: list[tuple[str, int, int]] = []
    for path, size in zip(paths, sizes):
        if size:
            with open_binary(path) as file:
                boundaries = find_chunk_boundaries(file, size, chunk_bytes, special_bytes, pattern=pattern)
            chunks.extend((os.fspath(path), start, end) for start, end in zip(boundaries, boundaries[1:]))
    if errors == "replace" and stats is not None:
        _find_replacements(chunks, stats)
    return chunks


def files_engine(num_workers: int | None, total_bytes: int) -> CountingEngine:
    """The default engine for counting files: local workers, or this process for a little input."""
    small = num_workers is None and total_bytes < MIN_PARALLEL_BYTES
    return LocalCountingEngine(1 if small else num_workers)  # starting workers would take longer than counting


def find_chunk_boundaries(file: BinaryIO, size: int, chunk_bytes: int, special_tokens: Sequence[bytes] = (), *,
                          pattern: str | None = None) -> list[int]:
    """Byte offsets [0, ..., size] that cut a file into chunks of about `chunk_bytes` that can be counted alone.

    Each cut is the first safe position at or after the next multiple of `chunk_bytes`: the start of a
    special-token occurrence, or a space followed by a non-whitespace character that does not start a special token,
    and never strictly inside any special-token occurrence (special tokens may contain spaces and occurrences may
    overlap). Such a cut is a document boundary or a place where pre-tokenization can be cut (`hf_bpe.pretokenize.gpt2`,
    fact 1), and it never splits a UTF-8 character. Text with no safe cut at all (no space, no special token) makes
    the chunk grow until one is found or the file ends. With another `pattern` (regex text), a space cut must be that
    pattern's safe cut (for the presets, a space between two non-whitespace characters; for the superword pattern,
    whose pre-tokens run across spaces, the start of an ASCII digit run instead); a custom pattern is cut only at
    special tokens.

    >>> import io
    >>> data = b"one two three four"
    >>> find_chunk_boundaries(io.BytesIO(data), len(data), 5)
    [0, 7, 13, 18]
    """
    boundaries = [0]
    target = chunk_bytes
    space_cut = _space_cut(pattern)
    while target < size:
        cut = _find_safe_cut(file, target, size, special_tokens, space_cut)
        if cut >= size:
            break
        boundaries.append(cut)
        target = (cut // chunk_bytes + 1) * chunk_bytes
    boundaries.append(size)
    return boundaries


def _space_cut(pattern: str | None) -> re.Pattern[bytes] | None:
    """The bytes regex of the space cuts of a pattern (regex text; None: GPT-2's), or None when it has none."""
    if pattern is None or pattern == GPT2_PATTERN:
        return _SPACE_CUT
    safe_cut = compile_pattern(pattern).safe_cut
    return None if safe_cut is None else _BEFORE_DIGITS_CUT if safe_cut is BEFORE_DIGITS else _BETWEEN_WORDS_CUT


def _find_safe_cut(file: BinaryIO, target: int, size: int, special_tokens: Sequence[bytes],
                   space_cut: re.Pattern[bytes] | None = _SPACE_CUT) -> int:
    """The first safe cut at or after `target` (see `find_chunk_boundaries`), or `size` if there is none."""
    reach = max(map(len, special_tokens), default=1) - 1  # how far an occurrence can extend over a cut
    if space_cut is not _SPACE_CUT:  # the look back of the other cuts
        reach = max(reach, _CUT_LOOKBEHIND)
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
        spaces = ({low + match.start() for match in space_cut.finditer(data, target - low)}
                  if space_cut is not None else set())
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
    """Counts one byte range (path, start, end) of a file; its size is the number of bytes. `pattern` is the regex
    text to count with (None: GPT-2's, the engines' counters' own)."""

    def __init__(self, errors: str, pattern: str | None = None) -> None:
        self.errors = errors
        self.pattern = None if pattern == GPT2_PATTERN else pattern

    def __call__(self, counter: PieceCounter, task: tuple[str, int, int]) -> int:
        path, start, end = task
        counter.add_text(read_text(path, start, end, self.errors), self.pattern)
        return end - start


class _BatchTask:
    """Counts a batch (list) of texts, each on its own; its size is the number of texts (`_Batch.texts`)."""

    def __init__(self, pattern: str | None = None) -> None:
        self.pattern = None if pattern == GPT2_PATTERN else pattern

    def __call__(self, counter: PieceCounter, batch: list[str]) -> int:
        for text in batch:
            counter.add_text(replace_surrogates(text), self.pattern)
        return getattr(batch, "texts", len(batch))


class _Converted:
    """Runs a task on a counter of its own and adds `convert` of its pre-token counts to the engine's counter, whose
    pre-token table goes to the parent (`count_pretokens_in_files(..., convert=)`)."""

    def __init__(self, run: Callable[[PieceCounter, Any], int], convert: Convert, special_tokens: Sequence[str]
                 ) -> None:
        self.run, self.convert, self.special_tokens = run, convert, list(special_tokens)
        self.own: PieceCounter | None = None

    def __call__(self, counter: PieceCounter, task: Any) -> int:
        if self.own is None:  # one per process, emptied by each task
            self.own = PieceCounter(self.special_tokens)
        own = self.own
        size = self.run(own, task)
        counter.pretokens = add_counts(counter.pretokens, self.convert(own.pretoken_counts()))
        return size


def _converted(run: Callable[[PieceCounter, Any], int], convert: Convert | None, special_tokens: Sequence[str]
               ) -> Callable[[PieceCounter, Any], int]:
    return run if convert is None else _Converted(run, convert, special_tokens)


def _find_replacements(tasks: list[tuple[str, int, int]], stats: CountStats) -> None:
    """Fill `stats` with what errors="replace" replaces in the chunks (one decoding pass, about 1 s per GB)."""
    for path, start, end in tasks:
        replaced, first = find_invalid_utf8(path, start, end)
        stats.replaced_bytes += replaced
        if first is not None and stats.first_replacement is None:
            stats.first_replacement = (path, first)


# --- the tasks' helpers ---------------------------------------------------------------------------------------------


def _check_is_text(index: int, text: object) -> None:
    if not isinstance(text, str):
        raise InputError(f"text #{index} of the input is {type(text).__name__}, not str")


class _Batch(list):
    """A batch of texts for `_BatchTask`: a list of strs, and `texts`, how many texts of the input end in it (a long
    text is sent as parts, possibly over several batches)."""

    texts = 0


def text_batches(texts: Iterable[str], special_tokens: Sequence[str] = (), pattern: str | None = None
             ) -> Iterator[_Batch]:
    """Batches of consecutive texts of about BATCH_CHARS characters in all, checking that each text is a str.

    A text longer than `SEGMENT_CHARS` is sent as parts: its documents (split at the special tokens, after replacing
    its lone surrogates) cut into segments (`safe_segments`, or the safe cuts of `pattern`), each counted alone with
    the same result. So no batch holds more than about BATCH_CHARS + SEGMENT_CHARS characters, whatever the longest
    text, and the batches waiting in the queue and in the workers stay small; a custom pattern has no safe cut, so a
    long document goes whole.

    >>> [(list(batch), batch.texts) for batch in text_batches(["a", "b c"])]
    [(['a', 'b c'], 2)]
    """
    splitter = SpecialTokenSplitter(special_tokens)
    compiled = compile_pattern(resolve_pattern(pattern))
    batch, size = _Batch(), 0
    for index, text in enumerate(texts):
        _check_is_text(index, text)
        if len(text) <= SEGMENT_CHARS:
            batch.append(text)
            size += len(text) + 1
        else:
            text = replace_surrogates(text)  # as the workers would: no part may differ from its text there
            for document in splitter.split(text) if splitter else (text,):
                for segment in compiled.segments(document, SEGMENT_CHARS):
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
           "LocalCountingEngine", "PieceCounter", "check_file_options", "count_pretokens", "count_pretokens_in_files",
           "count_pretokens_in_iterator", "file_chunks", "files_engine", "find_chunk_boundaries", "text_batches"]
