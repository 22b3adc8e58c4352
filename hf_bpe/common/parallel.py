"""Worker processes and progress bars, shared by counting, encoding and the dataset pipeline.

* `default_num_workers()`: the CPUs this process may run on (`os.sched_getaffinity`, so `taskset` and container
  CPU sets are honoured), not every CPU of the machine.
* `multiprocessing_context()`: "fork" on Linux while this process runs no other Python thread (tqdm's idle monitor
  thread aside), else "spawn". Fork starts a worker in milliseconds, hands it large objects without pickling, and
  does not re-run the main script, so a script without an `if __name__ == "__main__":` guard works, as it does with
  HF tokenizers and tiktoken. Forking
  while another thread runs can copy a lock that thread holds and deadlock the child, so then "spawn" is used (it
  re-imports the main script, which must be guarded). "forkserver" is no help for unguarded scripts: its server and
  children run the main script's body too (see tests/common/test_parallel.py). Thread pools of C libraries (OpenBLAS,
  `tokenizers`) install fork handlers and do not count.
* `process_pool(num_workers, state)` / `worker_state()`: a `multiprocessing.Pool` whose workers receive `state` once,
  through the pool's initializer, instead of with every task, and whose waits raise `WorkerLostError` when a worker
  dies (`hf_bpe.common.lost_workers`), where Python's pool would wait for ever.
* `progress_bar(progress, ...)`: a tqdm bar shown when asked, or by default when stderr is a terminal. It starts no
  monitor thread, so it does not prevent forking.
* `progress_from_workers(progress, ...)`: a bar in this process that follows a count forked workers add to, for
  workers that a library starts (`datasets.map(num_proc=N)`), which report nothing back until they are done.
* Workers never outlive their parent: each worker asks the kernel to kill it when its parent dies
  (`exit_with_parent`, Linux's PR_SET_PDEATHSIG), and inside `children_exit_with_this_process()` so does every
  process forked from the main thread, such as the pool and the manager process `datasets.map(num_proc=N)` starts.
  Without it, a worker blocked on its queue after `kill -9` of the parent waits for good, holding its memory.
  Not handled: other platforms, where a worker ends only when it next talks to its dead parent.

>>> with process_pool(2, {"offset": 10}) as pool:
...     pool.map(_add_offset, [1, 2, 3])
[11, 12, 13]
"""

from __future__ import annotations

import ctypes
import gc
import multiprocessing
import multiprocessing.context
import multiprocessing.pool
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from hf_bpe.common.lost_workers import WatchedPool

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
    are terminated (`_end_pool`). The workers die with this process (`exit_with_parent`). A worker that dies while the
    pool runs (the out-of-memory killer) makes the results waited for raise `WorkerLostError` (`WatchedPool`).
    """
    pool = start_workers(lambda: WatchedPool(num_workers, initializer=_set_worker_state,
                                              initargs=(state, os.getpid()), context=multiprocessing_context()))
    try:
        yield pool
    except BaseException:
        _end_pool(pool)
        raise
    pool.close()
    pool.join()



# How long `_end_pool` waits for `Pool.terminate` and `join`.
END_POOL_SECONDS = 10.0


def _end_pool(pool: multiprocessing.pool.Pool) -> None:
    """`pool.terminate()` and `pool.join()`, waited for at most `END_POOL_SECONDS`, then any worker still alive
    killed. CPython's `terminate` can wait for ever: it kills the workers before its task handler has sent the
    result handler its sentinel, and a worker killed while it was sending a result leaves the result queue's lock
    held, so that sentinel never goes (seen as a silent hang of `tokenize-dataset --streaming --num-proc 2` on a
    full disk); a worker killed while it waited for a task leaves the task queue's read lock held, which
    `terminate` takes. Once every worker is dead, those locks are released (held by a dead worker, or by the
    ending itself, which no longer needs them), and the wait goes on for as long again. The pool's threads are
    daemons: one still waiting ends with the process."""
    ender = threading.Thread(target=lambda: (pool.terminate(), pool.join()), name="hf_bpe pool end", daemon=True)
    ender.start()
    ender.join(END_POOL_SECONDS)
    if not ender.is_alive():
        return
    for process in getattr(pool, "_pool", []):  # the workers (CPython's attributes, here and below)
        if process.is_alive():
            process.kill()
            process.join(END_POOL_SECONDS)
    for lock in (getattr(getattr(pool, "_outqueue", None), "_wlock", None),
                 getattr(getattr(pool, "_inqueue", None), "_rlock", None)):
        try:
            lock.release()  # type: ignore[union-attr]
        except (AttributeError, ValueError):  # no such lock, or not held
            pass
    ender.join(END_POOL_SECONDS)


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


def seconds_since_start() -> float | None:
    """How long this process has been running, to the clock tick (Linux: its start time in /proc/self/stat against
    the boot-time clock), or None where that is unknown: start-up (the interpreter, imports) included.

    >>> 0 <= seconds_since_start() < 3600
    True
    """
    try:
        with open("/proc/self/stat", "rb") as file:
            fields = file.read().rsplit(b")", 1)[1].split()  # the name, in parentheses, may hold spaces
        return time.clock_gettime(time.CLOCK_BOOTTIME) - int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def progress_bar(progress: bool | None, **tqdm_options: Any) -> Any:
    """A tqdm progress bar: shown if `progress` is True, or if it is None and stderr is a terminal.

    >>> with progress_bar(False, total=3) as bar:
    ...     bar.update(3)
    ...     bar.disable
    True
    """
    if progress is None:
        progress = sys.stderr.isatty()
    return _bar_class()(disable=False, **tqdm_options) if progress else HiddenBar(**tqdm_options)


class HiddenBar:
    """What `progress_bar` gives when no bar is shown: it counts (`n`) and draws nothing, as a disabled tqdm bar,
    without importing tqdm, which would add to the start-up of every run without a terminal."""

    disable = True

    def __init__(self, total: float | None = None, **tqdm_options: Any) -> None:
        self.total, self.n = total, 0

    def update(self, amount: float = 1) -> None:
        self.n += amount

    def set_postfix_str(self, text: str = "", refresh: bool = True) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> HiddenBar:
        return self

    def __exit__(self, *exc_info: object) -> None:
        pass


# Shared counts of `progress_from_workers`, by key: forked workers inherit this dict, and so the shared values.
_shared_counts: dict[str, Any] = {}
# Held while the thread of `progress_from_workers` writes its bar, and by every fork: a child never starts with the
# lock of stderr held by a thread that does not exist in the child.
_bar_write_lock = threading.Lock()


class WorkerProgress:
    """What `progress_from_workers` yields: `add(n)` adds to the count, in this process or in a forked worker.

    It pickles as a key, so it can travel with a task (as the function `datasets.map` pickles for its workers); in
    a worker that was not forked from the bar's process, `add` does nothing.
    """

    def __init__(self, key: str) -> None:
        self.key = key

    def add(self, amount: int) -> None:
        shared = _shared_counts.get(self.key)
        if shared is not None:
            with shared.get_lock():
                shared.value += amount


@contextmanager
def progress_from_workers(progress: bool | None, **tqdm_options: Any) -> Iterator[WorkerProgress]:
    """A progress bar (`progress_bar(progress, **tqdm_options)`) that follows the count of the `WorkerProgress`
    yielded, as forked workers add to it; a thread of this process reads the count five times a second.

    >>> with progress_from_workers(False, total=3) as done:
    ...     done.add(3)
    """
    key = uuid.uuid4().hex
    shared = multiprocessing.Value("q", 0)
    _shared_counts[key] = shared
    stop = threading.Event()
    try:
        with progress_bar(progress, **tqdm_options) as bar:

            def follow() -> None:
                while not stop.wait(0.2):
                    if _bar_write_lock.acquire(timeout=_LOCK_WAIT_SECONDS):
                        try:
                            bar.update(shared.value - bar.n)
                        finally:
                            _bar_write_lock.release()

            thread = None if bar.disable else threading.Thread(target=follow, name="hf_bpe progress", daemon=True)
            if thread is not None:
                thread.start()
            try:
                yield WorkerProgress(key)
            finally:
                stop.set()
                if thread is not None:
                    thread.join()
            bar.update(shared.value - bar.n)
    finally:
        del _shared_counts[key]


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
    it, stopping its workers, instead of every worker printing a KeyboardInterrupt traceback. SIGTERM ends the worker
    at once and quietly (a handler inherited from the parent would run the parent's clean-up in the worker)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


# --- workers end with their parent -----------------------------------------------------------------------------------

_PR_SET_PDEATHSIG = 1
_prctl: list[Any] = []  # libc's prctl, once loaded (empty: not loaded yet; [None]: not available)
# Set in the parent while children_exit_with_this_process() is active; forked children inherit the value.
_exit_with_parent_depth = 0
# The process and whether its main thread is forking: recorded just before each fork, read in the child.
_forking: tuple[int, bool] = (0, False)


def exit_with_parent(parent_pid: int | None = None) -> None:
    """In a child process: have the kernel send it SIGKILL when its parent dies (Linux; elsewhere nothing).

    `parent_pid` is the parent it was started by: if that one is already gone (it died between the fork and this
    call), the child exits now.
    """
    prctl = _load_prctl()
    if prctl is None:
        return
    prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)


@contextmanager
def children_exit_with_this_process() -> Iterator[None]:
    """Inside the block, every process forked from this process's main thread dies when this process dies, also
    those a library forks (the pool and manager of `datasets.map(num_proc=N)`). Forks from other threads are left
    alone: the kernel would kill their children as soon as the forking thread ends, not the process."""
    global _exit_with_parent_depth
    _load_prctl()
    _exit_with_parent_depth += 1
    try:
        yield
    finally:
        _exit_with_parent_depth -= 1


def _load_prctl() -> Any:
    if not _prctl:
        function = _linux_libc_function("prctl", use_errno=True)
        if function is not None:
            function.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        _prctl.append(function)
    return _prctl[0]


def _linux_libc_function(name: str, use_errno: bool = False) -> Any:
    """The C library's function `name` on Linux (glibc's, where `mallopt` and `malloc_trim` exist); None elsewhere or
    when it has no such function."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return getattr(ctypes.CDLL(None, use_errno=use_errno), name)
    except (OSError, AttributeError):
        return None


def release_free_memory() -> None:
    """Give the heap memory this process has freed back to the system (glibc's `malloc_trim`; elsewhere nothing).

    glibc keeps freed heap pages (after a big numpy temporary, its threshold for mapping arrays of their own rises),
    and a worker forked later maps every page its parent holds: call it before forking workers from a process that
    has freed much, e.g. between SuperBPE's stages.
    """
    malloc_trim = _linux_libc_function("malloc_trim")
    if malloc_trim is not None:
        malloc_trim(0)


# glibc's `mallopt` parameter for the size from which an allocation gets a mapping of its own, and its initial value.
_M_MMAP_THRESHOLD = -3
_GLIBC_MMAP_THRESHOLD = 128 * 1024


@contextmanager
def large_allocations_mapped(threshold: int = 1 << 20) -> Iterator[None]:
    """While inside, glibc gives every allocation of `threshold` bytes or more (numpy's big arrays) a mapping of its
    own, which goes back to the system when it is freed (`mallopt(M_MMAP_THRESHOLD)`). Left to itself, glibc raises
    that threshold after freeing a big mapped array, up to 32 MiB, so that later arrays come from the heap, whose
    freed pages it keeps (what `release_free_memory` gives back, after the fact). Worker processes forked inside
    inherit it. On leaving, the threshold is set back to glibc's initial 128 KiB, where it then stays (a threshold
    once set no longer moves). Elsewhere than glibc, nothing.

    >>> with large_allocations_mapped():
    ...     pass
    """
    mallopt = _linux_libc_function("mallopt")
    if mallopt is not None:
        mallopt(_M_MMAP_THRESHOLD, threshold)
    try:
        yield
    finally:
        if mallopt is not None:
            mallopt(_M_MMAP_THRESHOLD, _GLIBC_MMAP_THRESHOLD)


# The waits for the bar's lock are bounded. A Ctrl-C just as a fork returns raises KeyboardInterrupt inside the
# after-fork hook, where Python drops it (the CLI raises it again later): the hook's release is then skipped, and an
# unbounded wait would stop every later fork, and the progress thread, for good.
_LOCK_WAIT_SECONDS = 2.0
_fork_holds_lock = False  # whether the fork under way holds the bar's lock


def _before_fork() -> None:
    global _forking, _fork_holds_lock
    _fork_holds_lock = _bar_write_lock.acquire(timeout=_LOCK_WAIT_SECONDS)
    _forking = (os.getpid(), threading.current_thread() is threading.main_thread())


def _after_fork_in_parent() -> None:
    global _fork_holds_lock
    if _fork_holds_lock:
        _fork_holds_lock = False
        _bar_write_lock.release()


def _after_fork_in_child() -> None:
    global _fork_holds_lock
    if _fork_holds_lock:
        _fork_holds_lock = False
        _bar_write_lock.release()
    parent_pid, from_main_thread = _forking
    if _exit_with_parent_depth and from_main_thread:
        exit_with_parent(parent_pid)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)


def _set_worker_state(state: Any, parent_pid: int) -> None:
    global _worker_state
    _worker_state = state
    exit_with_parent(parent_pid)
    leave_interrupts_to_the_parent()


def _add_offset(value: int) -> int:
    """A pool task for the module doctest (doctests cannot define functions a worker can import)."""
    return value + worker_state()["offset"]


def peak_memory_bytes() -> int:
    """The peak resident memory of this process or of its largest finished child (a worker process), in bytes."""
    import resource

    peak = max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, kilobytes elsewhere


__all__ = ["children_exit_with_this_process", "default_num_workers", "exit_with_parent", "peak_memory_bytes",
           "leave_interrupts_to_the_parent", "multiprocessing_context", "process_pool", "progress_bar",
           "progress_from_workers", "release_free_memory", "start_workers", "worker_state", "WorkerProgress"]
