"""Counting a systematic sample of a corpus: windows of `SAMPLE_WINDOW_BYTES` bytes (characters, for texts that are
not files), one every `every` times that many of the corpus taken end to end, so that about one byte in `every` is
read and counted, spread over the whole corpus.

SuperBPE's stage 2 guesses from such a sample which pairs of stage-1 tokens matter
(`hf_bpe.train.starts.superword_passes`). Sampling the pre-tokens once counted would cost a read, a pre-tokenization
and a count of the whole corpus; sampling files' bytes reads one window in `every` only, and sampling texts
pre-tokenizes and counts one window in `every` (the texts are still iterated).

Not handled: a window may cut a character of a file (its pieces at either end are dropped, as is any invalid UTF-8
inside: the sample only guesses), a pre-token or a special token (then counted as text).

>>> import tempfile
>>> from pathlib import Path
>>> path = Path(tempfile.mkdtemp()) / "a.txt"
>>> _ = path.write_bytes(b"x" * 10)
>>> sample_tasks([str(path)], [10], every=2, window=2)  # windows at 0, 4 and 8
[(10, [('...a.txt', 0, 2), ('...a.txt', 4, 6), ('...a.txt', 8, 10)])]
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import groupby
from operator import itemgetter
from typing import Any

from hf_bpe.common.errors import InputError
from hf_bpe.common.files import open_binary
from hf_bpe.train.counting.piece_counter import PieceCounter

# A window is about a screen of text: small enough that a sample spread over the corpus is not a few whole documents,
# large enough that most of its pre-tokens are whole.
SAMPLE_WINDOW_BYTES = 1 << 12
# The windows one task reads (about a MB), each counted on its own.
WINDOWS_PER_TASK = 1 << 8

# A sample task: the bytes of the corpus it stands for (for the progress bar), and its windows (path, start, end).
SampleTask = tuple[int, list[tuple[str, int, int]]]


def sample_tasks(paths: list[str], sizes: list[int], every: int, window: int | None = None) -> list[SampleTask]:
    """The tasks that read windows of `window` bytes (`SAMPLE_WINDOW_BYTES`) at every multiple of `every` windows
    of the files of `sizes` taken end to end (a window is cut at the end of its file), `WINDOWS_PER_TASK` a task;
    each stands for the bytes from its first window to the next task's."""
    window = SAMPLE_WINDOW_BYTES if window is None else window
    step = every * window
    windows: list[tuple[str, int, int]] = []
    offset = 0  # of the current file in the files end to end
    for path, size in zip(paths, sizes):
        windows.extend((path, start, min(start + window, size)) for start in range(-offset % step, size, step))
        offset += size
    span = WINDOWS_PER_TASK * step
    return [(min(start + span, offset) - start, windows[first:first + WINDOWS_PER_TASK])
            for first, start in zip(range(0, len(windows), WINDOWS_PER_TASK), range(0, offset, span))]


class SampleWindowsTask:
    """Counts the windows of a `SampleTask`, each as a text of its own; its size is the bytes the task stands for.
    `pattern` is the regex text to count with (None: the counter's own)."""

    def __init__(self, pattern: str | None = None) -> None:
        self.pattern = pattern

    def __call__(self, counter: PieceCounter, task: SampleTask) -> int:
        covered, windows = task
        for path, in_file in groupby(windows, key=itemgetter(0)):
            try:
                with open_binary(path) as file:
                    for _, start, end in in_file:
                        file.seek(start)
                        counter.add_text(file.read(end - start).decode("utf-8", "ignore"), self.pattern)
            except OSError as error:
                raise InputError(f"{path}: cannot read file: {error.strerror}") from None
        return covered


def sample_texts(texts: Iterable[str], every: int, window: int | None = None) -> Iterator[str]:
    """The windows of `window` characters (`SAMPLE_WINDOW_BYTES`) at every multiple of `every` windows of the texts
    taken end to end, each a text of its own (a window is cut at the end of its text). What is not a text is passed
    on as it is, for the counting to refuse.

    >>> list(sample_texts(["abcdefg", "hi", "jklmn"], every=3, window=2))  # windows at 0, 6 and 12
    ['ab', 'g', 'mn']
    """
    window = SAMPLE_WINDOW_BYTES if window is None else window
    step = every * window
    offset = 0  # of the current text in the texts end to end
    for text in texts:
        if not isinstance(text, str):
            yield text
            continue
        for start in range(-offset % step, len(text), step):
            yield text[start:start + window]
        offset += len(text)


def sample_of(convert: Any) -> int:
    """How sparsely a counting pass's `convert` asks for the corpus to be counted: one byte (or character) in its
    `sample` (a stage-2 sample, `StageTwoPass`, which converts the windows with `counting_all()`), or 1 (all)."""
    return getattr(convert, "sample", 1) if hasattr(convert, "counting_all") else 1
