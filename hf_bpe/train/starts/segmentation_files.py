"""SuperBPE's stage-2 segmentation kept on disk between passes, so that a pass reads ids instead of reading,
pre-tokenizing and segmenting the corpus again (`hf_bpe.train.starts.superword_passes` runs the passes).

When the sample cannot tell which pairs matter (a corpus of up to a few hundred MB), stage 2 counts every pair in a
pass of its own, then counts the parts in another: two full segmentations of the corpus. With a directory for these
files, the workers of the first pass also write what they segmented (one file per hand-over of their tables:
`save_segmentation`), and the parts pass, and any pass at a lower cut, runs over the files instead
(`count_segmentation_files`), in a pool of worker processes. The counts are those of segmenting again: the same
pre-tokens, counted as many times, in other batches.

A corpus big enough for the sample segments the whole corpus once, in the parts pass: that pass keeps what it
segmented, which only the passes at a lower cut read (when the sample missed a pair that matters).

Not handled: the Ray engine (its actors' files would be on other machines). The caller owns the directory and
removes it: the CLI's run directory (removed on every exit, and by the next run after a SIGKILL), or a temporary
directory for the Python API. The files are used only when the directory's disk has room for them, twice over
(`room_for`).
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from hf_bpe.common.errors import InputError
from hf_bpe.common.parallel import default_num_workers, process_pool, worker_state

T = TypeVar("T")
SUFFIX = ".npz"
# Ids end to end, lengths in ids, counts (`StageOneTokenizer.segmented_arrays`).
Arrays = tuple[np.ndarray, np.ndarray, np.ndarray]


def save_segmentation(directory: str | Path, arrays: Arrays) -> None:
    """Write `arrays` to a new file of `directory`, under a temporary name until it is complete.

    >>> import tempfile
    >>> directory = tempfile.mkdtemp()
    >>> save_segmentation(directory, (np.array([5, 6, 7], np.uint16), np.array([2, 1]), np.array([3, 4])))
    >>> [array.tolist() for array in load_segmentation(segmentation_files(directory)[0])]
    [[5, 6, 7], [2, 1], [3, 4]]
    """
    name = Path(directory) / f"{os.getpid()}-{uuid.uuid4().hex}"
    partial = name.with_suffix(".part")
    try:
        with open(partial, "wb") as file:
            np.savez(file, data=arrays[0], lengths=arrays[1], counts=arrays[2])
        os.replace(partial, name.with_suffix(SUFFIX))
    except OSError as error:
        raise InputError(f"{directory}: cannot keep SuperBPE's stage-2 segmentation: {error.strerror or error}"
                         ) from None


def load_segmentation(path: str | Path) -> Arrays:
    with np.load(path) as arrays:
        return arrays["data"], arrays["lengths"], arrays["counts"]


def segmentation_files(directory: str | Path) -> list[Path]:
    """The complete files in `directory`, in name order."""
    return sorted(Path(directory).glob(f"*{SUFFIX}"))


def room_for(directory: str | Path, ids: int, id_bytes: int) -> bool:
    """Whether the disk of `directory` has room for `ids` ids of `id_bytes` bytes each, with their words' lengths and
    counts, twice over (the number of ids is a guess from a sample)."""
    return shutil.disk_usage(directory).free > 2 * ids * (id_bytes + 4)


def count_segmentation_files(files: list[Path], count: Callable[[np.ndarray, np.ndarray, np.ndarray], T],
                             add: Callable[[T], Any], num_workers: int | None) -> None:
    """`add(count(*arrays))` for each file's arrays: in `num_workers` processes (default: one per usable CPU), each
    loading its files itself, or in this process for one worker or one file."""
    workers = min(default_num_workers() if num_workers is None else num_workers, len(files))
    if workers <= 1:
        for path in files:
            add(count(*load_segmentation(path)))
        return
    with process_pool(workers, count) as pool:
        for counted in pool.imap_unordered(_count_file, files):
            add(counted)


def _count_file(path: Path) -> Any:
    return worker_state()(*load_segmentation(path))
