"""Ctrl-C and SIGTERM around worker processes: `interrupts_in_this_process_only`, for a block that runs a pool."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass
class BlockEnd:
    """What `interrupts_in_this_process_only` yields: `pool_stuck` is True once the block's main thread was
    interrupted because a pool's `terminate` had not ended within the bound (`bound_terminate`)."""

    pool_stuck: bool = False


# How often the block looks at where its main thread is (`bound_terminate`).
WATCH_SECONDS = 0.1


def _in_pool_terminate(frame: Any) -> Any:
    """The frame of `Pool._terminate_pool` (CPython's or `multiprocess`') on this stack, or None."""
    while frame is not None:
        if frame.f_code.co_name == "_terminate_pool" and frame.f_code.co_filename.endswith("pool.py"):
            return frame
        frame = frame.f_back
    return None


@contextmanager
def interrupts_in_this_process_only(end_within: float | None = None, bound_terminate: bool = False
                                    ) -> Iterator[BlockEnd]:
    """In the main thread, for a block that runs worker processes: Ctrl-C raises KeyboardInterrupt in this process
    only. It sends SIGINT to every process of the terminal's group; the workers forked in the block inherit this
    handler, which ignores the signal in them, so that ending the pool ends them without a traceback from each.

    `end_within`, for a pool that a library starts and ends (`datasets.map(num_proc=N)`): after the first Ctrl-C or
    SIGTERM, the block gets that many seconds to end, then its main thread gets SIGINT, which raises
    KeyboardInterrupt out of whatever it waits on. `Pool.terminate` can wait for ever (see `parallel._end_pool`),
    and this process holds no reference to such a pool to end it as `_end_pool` does. The pool's threads are
    daemons, and its workers, sent SIGTERM by `terminate`, die with this process anyway
    (`parallel.children_exit_with_this_process`). SIGTERM keeps its own handler, which is called as before; with the
    default one, the process just dies. Errors raised where Python cannot raise them (a generator the interrupt
    left, closed as it unwinds) are not printed then.

    `bound_terminate`, with `end_within`: a pool's `terminate` that the main thread is still in after that many
    seconds is interrupted the same way, with no Ctrl-C; the `BlockEnd` the block gets says so. The library ends its
    pool so when a worker or its manager dies (the out-of-memory killer), and `terminate` can then wait for ever as
    after Ctrl-C: the SIGTERM it sends the workers may kill one that holds a queue's lock. A thread looks at the main
    thread's stack every `WATCH_SECONDS`.

    Not handled: a block run outside the main thread, where Python cannot set signal handlers; the block is run as
    it is.
    """
    end = BlockEnd()
    if threading.current_thread() is not threading.main_thread():
        yield end
        return
    this_process, main_thread = os.getpid(), threading.get_ident()
    deadline = threading.Timer(end_within or 0.0, signal.pthread_kill, (main_thread, signal.SIGINT))
    deadline.daemon = True

    hook = sys.unraisablehook

    def quiet_after_interrupt(unraisable: Any) -> None:
        # The library's pool and generators end as the interrupt unwinds them: an error raised where Python cannot
        # raise it (in a generator closed there, "Exception ignored in ...") is part of the stop. An interrupt goes
        # on to the hook before (the command line's raises it again).
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            hook(unraisable)

    def start_deadline() -> None:
        if end_within is not None and os.getpid() == this_process and deadline.ident is None:
            sys.unraisablehook = quiet_after_interrupt
            deadline.start()

    stop_watching = threading.Event()

    def bound_pool_terminate() -> None:
        seen, since = None, 0.0
        while not stop_watching.wait(WATCH_SECONDS):
            frame = _in_pool_terminate(sys._current_frames().get(main_thread))
            if frame is None or frame is not seen:
                seen, since = frame, time.monotonic()
            elif time.monotonic() - since > (end_within or 0.0):
                end.pool_stuck = True
                sys.unraisablehook = quiet_after_interrupt
                signal.pthread_kill(main_thread, signal.SIGINT)
                return

    watcher = (threading.Thread(target=bound_pool_terminate, name="bound-pool-terminate", daemon=True)
               if bound_terminate and end_within is not None else None)

    def interrupt_here_only(signum: int, frame: Any) -> None:
        if os.getpid() == this_process:
            start_deadline()
            raise KeyboardInterrupt

    terminate = signal.getsignal(signal.SIGTERM)

    def terminate_with_deadline(signum: int, frame: Any) -> None:
        start_deadline()
        terminate(signum, frame)  # type: ignore[operator]

    previous = signal.signal(signal.SIGINT, interrupt_here_only)
    if end_within is not None and callable(terminate):
        signal.signal(signal.SIGTERM, terminate_with_deadline)
        _HANDLERS_FOR_THIS_PROCESS.add(terminate_with_deadline)
    if watcher is not None:
        watcher.start()
    try:
        yield end
    finally:
        stop_watching.set()
        if watcher is not None:
            watcher.join()
        deadline.cancel()
        if deadline.ident is not None:
            deadline.join()
        signal.signal(signal.SIGINT, previous)
        if signal.getsignal(signal.SIGTERM) is terminate_with_deadline:
            signal.signal(signal.SIGTERM, terminate)
        _HANDLERS_FOR_THIS_PROCESS.discard(terminate_with_deadline)
        if sys.unraisablehook is quiet_after_interrupt:
            sys.unraisablehook = hook


# SIGTERM handlers set by interrupts_in_this_process_only. A child forked in its block gets the default handler back
# at once (`_default_sigterm_in_child`): a Python handler runs only once the child's main thread runs Python code
# again.
_HANDLERS_FOR_THIS_PROCESS: set[Any] = set()


def _default_sigterm_in_child() -> None:
    if signal.getsignal(signal.SIGTERM) in _HANDLERS_FOR_THIS_PROCESS:
        try:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        except ValueError:  # forked from another thread: the handler still hands the signal to the previous one
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_default_sigterm_in_child)
