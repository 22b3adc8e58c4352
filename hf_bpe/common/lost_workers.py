"""A process pool that notices a lost worker: `WatchedPool`, and `how_it_ended` to say how a worker process ended.

A worker killed while the pool runs (by the out-of-memory killer, most often) is the one fault CPython's
`multiprocessing.Pool` does not report: it starts a new worker in its place and waits for ever for the result of the
task the dead one held. `hf_bpe.common.parallel.process_pool` makes its pools `WatchedPool`s, whose waits raise
`WorkerLostError` instead.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.pool
import signal
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from hf_bpe.common.errors import WorkerLostError

T = TypeVar("T")


# How often a `WatchedPool` waiting for a result looks at its workers, in seconds.
WATCH_SECONDS = 0.1


class WatchedPool(multiprocessing.pool.Pool):
    """A `multiprocessing.Pool` whose results raise `WorkerLostError` once one of its workers has died. CPython's
    pool starts a new worker in its place and waits for ever for the result of the task the dead one held. So each
    wait (`map`, `imap`, `imap_unordered`, `apply_async(...).get()`) looks at the workers every `WATCH_SECONDS`:
    every worker the pool has had is kept, and none may have ended while the pool runs (they end when it is closed
    or terminated, after the waits).

    Not handled: `starmap`, the `*_async` methods other than `apply_async`, and callbacks, which nothing here uses."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._workers_seen = list(self._pool)  # type: ignore[attr-defined]

    def map(self, func: Callable[[Any], T], iterable: Any, chunksize: int | None = None) -> list[T]:
        return self.wait_for(self.map_async(func, iterable, chunksize).get)

    def imap(self, func: Callable[[Any], T], iterable: Any, chunksize: int = 1) -> Iterator[T]:  # type: ignore[override]
        return self._watched(super().imap(func, iterable, chunksize))

    def imap_unordered(self, func: Callable[[Any], T], iterable: Any,  # type: ignore[override]
                       chunksize: int = 1) -> Iterator[T]:
        return self._watched(super().imap_unordered(func, iterable, chunksize))

    def apply_async(self, func: Callable[..., T], args: Any = (), kwds: Any = None,  # type: ignore[override]
                    callback: Any = None, error_callback: Any = None) -> WatchedResult[T]:
        return WatchedResult(super().apply_async(func, args, kwds or {}, callback, error_callback), self)

    def wait_for(self, get: Callable[[float], T]) -> T:
        """`get(timeout)` (a result's `get`, an iterator's `next`) until it gives, looking at the workers meanwhile."""
        while True:
            try:
                return get(WATCH_SECONDS)
            except multiprocessing.TimeoutError:
                self._check_workers()

    def _watched(self, results: Any) -> Iterator[T]:
        while True:
            try:
                yield self.wait_for(results.next)
            except StopIteration:
                return

    def _check_workers(self) -> None:
        seen = self._workers_seen
        seen.extend(process for process in list(self._pool) if process not in seen)  # type: ignore[attr-defined]
        for process in seen:
            if process.exitcode is not None:
                raise WorkerLostError(f"a worker process died{how_it_ended(process.exitcode)}")


class WatchedResult(Generic[T]):
    """`apply_async`'s result, whose `get` raises `WorkerLostError` once a worker of its pool has died."""

    def __init__(self, result: multiprocessing.pool.AsyncResult[T], pool: WatchedPool) -> None:
        self.result, self.pool = result, pool

    def get(self) -> T:
        return self.pool.wait_for(self.result.get)


def how_it_ended(exitcode: int) -> str:
    """How a worker process ended, from its exit code.

    >>> how_it_ended(-9), how_it_ended(3)
    (' (killed by SIGKILL, which the out-of-memory killer sends)', ' (exit code 3)')
    """
    if exitcode >= 0:
        return f" (exit code {exitcode})"
    try:
        name = signal.Signals(-exitcode).name
    except ValueError:
        name = f"signal {-exitcode}"
    return f" (killed by {name}{', which the out-of-memory killer sends' if name == 'SIGKILL' else ''})"
