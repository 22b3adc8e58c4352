"""The local counting engine: worker processes on this machine, each pulling tasks from a queue.

Each worker keeps one `PieceCounter` and sends pre-token counts to the parent when its table is flushed and at the
end; the parent adds them into one table. Interrupts are left to the parent, which stops the workers, and a worker
dies with its parent (`hf_bpe.common.parallel.exit_with_parent`), so none is left behind by `kill -9` of the parent.
"""

from __future__ import annotations

import os
import queue
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence, Sized
from typing import Any

from hf_bpe.common.errors import InputError
from hf_bpe.common.locks import signals_held
from hf_bpe.common.lost_workers import how_it_ended
from hf_bpe.common.parallel import (
    default_num_workers,
    exit_with_parent,
    leave_interrupts_to_the_parent,
    multiprocessing_context,
    start_workers,
)
from hf_bpe.train.counting.piece_counter import PieceCounter, Task, add_counts


class LocalCountingEngine:
    """Counts in `num_workers` processes on this machine (default: one per usable CPU); 1 counts in this process.

    Workers pull tasks from a bounded queue and send back the pre-token counts of their piece table whenever it is
    converted. A task error (e.g. invalid UTF-8) is reported with the task's index; workers then skip later tasks,
    and the error of the first failing task is raised, so the offset reported is the first bad byte of the input.
    """

    def __init__(self, num_workers: int | None = None) -> None:
        check_num_workers(num_workers)
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
                                                first_error_index, os.getpid()))
                          for _ in range(self.num_workers)]
        self.bar = bar
        self.total: Counter[bytes] = Counter()
        self.errors: dict[int, str] = {}
        self.finished = 0
        start_workers(lambda: [process.start() for process in self.processes])
        try:
            for index, task in enumerate(tasks):
                self._put((index, task))
                self._handle_messages(block=False)
            for _ in self.processes:
                self._put(None)
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

    def _put(self, item: Any) -> None:
        """Put `item` on the task queue, handling the workers' messages while it is full. Each try holds Ctrl-C and
        SIGTERM back (`signals_held`): their exception, raised inside `put`, could leave the queue's lock taken, and
        closing the queue in the clean-up would then hang."""
        while True:
            with signals_held():
                try:
                    self.task_queue.put(item, timeout=0.05)
                    return
                except queue.Full:
                    pass
            self._handle_messages()

    def _handle_messages(self, block: bool = True) -> None:
        """Handle the messages waiting from the workers (waiting a little for one if `block`)."""
        try:
            self._handle(self.result_queue.get(timeout=0.1) if block else self.result_queue.get_nowait())
            while True:
                self._handle(self.result_queue.get_nowait())
        except queue.Empty:
            pass
        dead = [process.exitcode for process in self.processes if process.exitcode not in (None, 0)] if block else []
        if dead:
            method = self.context.get_start_method()
            raise RuntimeError(
                f"a pre-token counting worker process died{how_it_ended(dead[0])}: out of memory, or it could not "
                f"start (with the {method!r} start method the main script is re-imported: guard it with `if "
                "__name__ == \"__main__\":`, and use num_workers=1 for code read from stdin)" if method == "spawn" else
                f"a pre-token counting worker process died{how_it_ended(dead[0])}; fewer workers (num_workers, "
                "--workers) need less memory, and num_workers=1 counts in this process"
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
        self.total = add_counts(self.total, counts)


def _worker_main(run: Callable[[PieceCounter, Any], int], special_tokens: list[str], task_queue: Any,
                 result_queue: Any, first_error_index: Any, parent_pid: int) -> None:
    exit_with_parent(parent_pid)
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
            if counter.ready():  # the piece table was converted: hand its counts over to the parent
                result_queue.put(("counts", counter.pretoken_counts()))
            result_queue.put(("progress", size))
        result_queue.put(("done", None if failed else counter.pretoken_counts()))
    except BaseException:  # anything unexpected is reported to the parent rather than lost in a worker's stderr
        import traceback

        result_queue.put(("crash", traceback.format_exc()))


# --- helpers -------------------------------------------------------------------------------------------------------


def check_num_workers(num_workers: int | None) -> None:
    if num_workers is not None and num_workers < 1:
        raise ValueError(f"num_workers must be at least 1, got {num_workers}")
