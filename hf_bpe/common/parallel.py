"""Worker processes and progress bars, shared by counting, encoding and the dataset pipeline.

* `default_num_workers()`: the CPUs this process may run on (`os.sched_getaffinity`, so `taskset` and container
  CPU sets are honoured), not every CPU of the machine.
* `multiprocessing_context()`: "fork" on Linux while this process runs no other Python thread (tqdm's idle monitor
  thread aside), else "spawn". Fork starts a worker in milliseconds, hands it large objects without pickling, and
  does not re-run the main script, so a script without an `if __name__ == "__main__":` guard works, as it does with
  HF tokenizers and tiktoken. Forking
  while another thread runs can copy a lock that thread holds and deadlock the child, so then "spawn" is used (it
  re-imports the main script, which must be guarded). "forkserver" is no help for unguarded scripts: its server and
  children run the main script's body too (see tests/test_parallel.py). Thread pools of C libraries (OpenBLAS,
  `tokenizers`) install fork handlers and do not count.
* `process_pool(num_workers, state)` / `worker_state()`: a `multiprocessing.Pool` whose workers receive `state` once,
  through the pool's initializer, instead of with every task.
* `progress_bar(progress, ...)`: a tqdm bar shown when asked, or by default when stderr is a terminal. It starts no
  monitor thread, so it does not prevent forking.

>>> with process_pool(2, {"offset": 10}) as pool:
...     pool.map(_add_offset, [1, 2, 3])
[11, 12, 13]
"""

from __future__ import annotations

import gc
import multiprocessing
import multiprocessing.context
import multiprocessing.pool
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")

_NO_STATE = object()
_worker_state: Any = _NO_STATE


def default_num_workers() -> int:
    """The number of CPUs this process may run on (at least 1).

    >>> default_num_workers() >= 1
    True
    """
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def multiprocessing_context() -> multiprocessing.context.BaseContext:
    """"fork" on Linux when no other Python thread is running in this process, "spawn" otherwise.

    >>> multiprocessing_context().get_start_method() in ("fork", "spawn")
    True
    """
    if sys.platform.startswith("linux") and not _other_threads():
        return multiprocessing.get_context("fork")
    # macOS system libraries are not fork-safe (CPython's default there is "spawn" for that reason).
    return multiprocessing.get_context("spawn")


@contextmanager
def process_pool(num_workers: int, state: Any) -> Iterator[multiprocessing.pool.Pool]:
    """A pool of `num_workers` processes from `multiprocessing_context()`; in each, `worker_state()` is `state`.

    `state` reaches each worker once (inherited with "fork", pickled once per worker with "spawn"). On normal exit
    the pool is closed and joined; on an exception (or Ctrl-C, which the workers leave to this process) its workers
    are terminated.
    """
    pool = start_workers(lambda: multiprocessing_context().Pool(num_workers, initializer=_set_worker_state,
                                                                  initargs=(state,)))
    try:
        yield pool
    except BaseException:
        pool.terminate()
        pool.join()
        raise
    pool.close()
    pool.join()


def start_workers(start: Callable[[], T]) -> T:
    """`start()`, which starts worker processes, with the garbage collector's objects frozen meanwhile.

    A forked worker shares this process's memory until either side writes to a page. Frozen objects are left alone by
    the workers' garbage collector, which would otherwise touch (and so copy) every object the parent holds.
    """
    gc.freeze()
    try:
        return start()
    finally:
        gc.unfreeze()


def worker_state() -> Any:
    """Inside a `process_pool` worker: the `state` given to `process_pool`."""
    if _worker_state is _NO_STATE:
        raise RuntimeError("worker_state() called outside a process_pool worker")
    return _worker_state


def progress_bar(progress: bool | None, **tqdm_options: Any) -> Any:
    """A tqdm progress bar: shown if `progress` is True, or if it is None and stderr is a terminal.

    >>> with progress_bar(False, total=3) as bar:
    ...     bar.update(3)
    ...     bar.disable
    True
    """
    if progress is None:
        progress = sys.stderr.isatty()
    return _bar_class()(disable=not progress, **tqdm_options)


_bar_classes: list[type] = []


def _bar_class() -> type:
    """tqdm.auto's class, without the monitor thread tqdm starts for every bar (a thread rules out "fork")."""
    if not _bar_classes:
        from tqdm.auto import tqdm

        _bar_classes.append(type("ProgressBar", (tqdm,), {"monitor_interval": 0}))
    return _bar_classes[0]


def _other_threads() -> list[threading.Thread]:
    """The running Python threads other than this one, leaving out tqdm's monitor thread.

    tqdm starts that daemon for its bars (not for `progress_bar`'s) and keeps it after they close. It sleeps on an
    event, waking every 10 s for an instant to look at open bars under tqdm's own lock, which workers never take.
    """
    monitor = sys.modules.get("tqdm._monitor")
    monitor_class = getattr(monitor, "TMonitor", ())
    current = threading.current_thread()
    return [thread for thread in threading.enumerate()
            if thread is not current and not isinstance(thread, monitor_class)]


def leave_interrupts_to_the_parent() -> None:
    """In a worker process: ignore Ctrl-C (SIGINT, sent to the whole process group), so that only the parent handles
    it, stopping its workers, instead of every worker printing a KeyboardInterrupt traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _set_worker_state(state: Any) -> None:
    global _worker_state
    _worker_state = state
    leave_interrupts_to_the_parent()


def _add_offset(value: int) -> int:
    """A pool task for the module doctest (doctests cannot define functions a worker can import)."""
    return value + worker_state()["offset"]


__all__ = ["default_num_workers", "leave_interrupts_to_the_parent", "multiprocessing_context", "process_pool",
           "progress_bar", "start_workers", "worker_state"]
