"""Peak memory of a benchmark's process tree (a child process and the workers it starts), sampled from /proc.

Used by bench_count.py, bench_train.py and bench_dataset.py, which run each measured job in a fresh child process.
RSS counts a page shared by several processes (a forked worker shares its parent's memory until either writes to it)
once per process, so summed RSS overstates a tree of forked workers; PSS divides each shared page among its sharers,
so summed PSS is the memory the tree really holds. Anonymous PSS leaves out file-backed pages (memory-mapped arrow
files, which the kernel can drop and read again). Linux only.

    memory = PeakTreeMemory(child.pid)
    child.wait()
    memory.stop()
    print(memory.rss, memory.pss, memory.anonymous)
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass


def process_tree(root: int) -> list[int]:
    """`root` and all its descendants that are alive now."""
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as file:
                    todo.extend(int(child) for child in file.read().split())
        except (FileNotFoundError, ProcessLookupError):
            pass  # the process ended while being looked at
    return found


def process_memory(pid: int) -> tuple[int, int, int]:
    """(RSS, PSS, anonymous PSS) of one process in bytes, from /proc/PID/smaps_rollup; zeros once it has exited."""
    fields = {"Rss": 0, "Pss": 0, "Pss_Anon": 0}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as file:
            for line in file:
                name, _, value = line.partition(":")
                if name in fields:
                    fields[name] = int(value.split()[0]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return fields["Rss"], fields["Pss"], fields["Pss_Anon"]


class PeakTreeMemory:
    """Samples a process tree in a thread until `stop()`: the peaks of its summed RSS, PSS and anonymous PSS."""

    def __init__(self, root: int, interval: float = 0.05) -> None:
        self.root, self.interval = root, interval
        self.rss = self.pss = self.anonymous = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> PeakTreeMemory:
        self._stop.set()
        self._thread.join()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            sizes = [process_memory(pid) for pid in process_tree(self.root)]
            self.rss = max(self.rss, sum(rss for rss, _, _ in sizes))
            self.pss = max(self.pss, sum(pss for _, pss, _ in sizes))
            self.anonymous = max(self.anonymous, sum(anonymous for _, _, anonymous in sizes))
            self._stop.wait(self.interval)


@dataclass
class MeasuredRun:
    """A finished child process: its exit code, output, wall time, the peaks of its tree (`PeakTreeMemory`) and the
    largest resident size of any one of its processes (the kernel's ru_maxrss, in bytes)."""

    returncode: int
    output: str
    errors: str
    wall: float
    memory: PeakTreeMemory
    max_process_bytes: int


def run_measured(command: list[str], environment: dict[str, str]) -> MeasuredRun:
    """Run `command` to its end with its memory sampled.

    Output goes to files, not pipes, and the process is reaped by wait4, whose resource usage is this process's and
    its descendants' alone (RUSAGE_CHILDREN would hold the largest of every tool run so far)."""
    with tempfile.TemporaryDirectory(prefix="tree_memory_") as scratch:
        with open(os.path.join(scratch, "out"), "w+") as stdout, open(os.path.join(scratch, "err"), "w+") as stderr:
            start = time.perf_counter()
            process = subprocess.Popen(command, stdout=stdout, stderr=stderr, text=True, env=environment)
            memory = PeakTreeMemory(process.pid)
            _, status, usage = os.wait4(process.pid, 0)
            wall = time.perf_counter() - start
            memory.stop()
            stdout.seek(0)
            stderr.seek(0)
            return MeasuredRun(os.waitstatus_to_exitcode(status), stdout.read(), stderr.read(), wall, memory,
                               usage.ru_maxrss * 1024)  # Linux counts ru_maxrss in KiB
