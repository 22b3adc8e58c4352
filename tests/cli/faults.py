"""What the fault tests of the CLI share: starting `hf-bpe` as a real process in its own session, signalling it, and
finding the processes it left behind (from /proc: a process keeps its session when its parent dies)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests import REPO

EOT = "<|endoftext|>"


def start(*arguments: str, env: dict[str, str] | None = None, **options: object) -> subprocess.Popen:
    """`python -m hf_bpe.cli ARGUMENTS` in a new session (its PID is the session id), stderr captured."""
    environment = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONFAULTHANDLER": "1", **(env or {})}
    environment.pop("HF_BPE_DEBUG", None)
    return subprocess.Popen([sys.executable, "-m", "hf_bpe.cli", *arguments], stderr=subprocess.PIPE, text=True,
                            env=environment, start_new_session=True, **options)  # type: ignore[call-overload]


def finish(process: subprocess.Popen, timeout: float = 120) -> str:
    """Wait for the process; its stderr. On a timeout the test fails with the Python stack of every thread of every
    process of the session (SIGABRT, which faulthandler reports: `start` enables it), and the session is killed."""
    try:
        return process.communicate(timeout=timeout)[1]
    except subprocess.TimeoutExpired:
        for pid in session_processes(process.pid):
            try:
                os.kill(pid, signal.SIGABRT)
            except ProcessLookupError:
                pass
        try:
            stderr = process.communicate(timeout=10)[1]
        except subprocess.TimeoutExpired:
            stderr = "(no stack: the process did not end on SIGABRT)"
        kill_session(process.pid)
        process.communicate()
        raise AssertionError(f"the run hung for {timeout} s; its stacks on SIGABRT:\n{stderr}") from None


def kill_session(session: int) -> None:
    for pid in session_processes(session):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def session_processes(session: int) -> dict[int, str]:
    """{pid: command line} of the live processes (zombies aside) of session `session`."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
            command = Path(f"/proc/{entry.name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[3]) == session and fields[0] not in "ZX":
            found[int(entry.name)] = command.strip()
    return found


def children_of(pid: int) -> list[int]:
    """The PIDs of the live child processes of `pid`."""
    try:
        tasks = Path(f"/proc/{pid}/task").iterdir()
        children = [int(child) for task in tasks for child in (task / "children").read_text().split()]
    except OSError:
        return []
    return [child for child in children if child in session_processes(os.getsid(pid))]


def wait_for(condition: Callable[[], object], timeout: float, what: str, process: subprocess.Popen | None = None
             ) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the process ended ({process.returncode}) before {what}: {process.stderr.read()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def assert_no_process_left(session: int, timeout: float = 10) -> None:
    """Within `timeout` seconds, no process of the session is alive (the workers end when their parent dies)."""
    deadline = time.monotonic() + timeout
    while (left := session_processes(session)) and time.monotonic() < deadline:
        time.sleep(0.05)
    if left:
        kill_session(session)
    assert not left, f"processes left behind: {left}"


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def write_documents(path: Path, count: int, seed: int = 0) -> Path:
    """JSON lines of `count` documents of random words (few cache hits, so encoding takes a while)."""
    rng = random.Random(seed)
    words = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyzéü", k=rng.randint(1, 9))) for _ in range(50_000)]
    with open(path, "w", encoding="utf-8") as file:
        for _ in range(count):
            file.write(json.dumps({"text": " ".join(rng.choices(words, k=rng.randint(20, 200)))}) + "\n")
    return path


def tokenize_arguments(tokenizer_dir: Path, data_file: Path, out: Path, cache: Path, *extra: str) -> list[str]:
    return ["tokenize-dataset", "--tokenizer", str(tokenizer_dir), "--dataset", "json", "--data-files",
            str(data_file), "--out", str(out), "--cache-dir", str(cache), "--no-progress", *extra]


def hidden(directory: Path) -> list[str]:
    """The names in `directory` that start with a dot: temporary files, run directories, lock files."""
    return sorted(path.name for path in directory.iterdir() if path.name.startswith("."))
