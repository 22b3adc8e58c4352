"""hf_bpe.common.locks and the publication steps of hf_bpe.common.outputs: one run per output, leftovers of dead runs
removed and a live run's never, nothing overwritten by a run that ignores the lock. The other side of each lock is a
real process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from hf_bpe.common.errors import InputError
from hf_bpe.common.locks import OWNER_FILE, lock_path, output_lock, remove_abandoned, run_directory, signals_held
from hf_bpe.common.outputs import publish_file, staging_directory
from tests import REPO

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="flock and /proc: Linux")


def holder(tmp_path: Path, code: str) -> subprocess.Popen:
    """A process that runs `code` (with `base` bound to tmp_path), prints "ready" and then sleeps until killed."""
    script = f"""
        import sys, time
        from pathlib import Path
        from hf_bpe.common.locks import output_lock, run_directory
        base = Path({str(tmp_path)!r})
        with {code}:
            print("ready", flush=True)
            time.sleep(60)
    """
    process = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(REPO)})
    assert process.stdout is not None and process.stdout.readline() == "ready\n"
    return process


def kill(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait()


def test_a_second_run_on_a_locked_output_is_refused_naming_the_holder(tmp_path: Path) -> None:
    other = holder(tmp_path, 'output_lock(base, "train", "split train")')
    try:
        with pytest.raises(InputError, match=rf"^another hf-bpe run \(process {other.pid}\) is writing split train; "
                                             r"wait for it to finish, or choose another output$"):
            with output_lock(tmp_path, "train", "split train"):
                pass
    finally:
        kill(other)
    # The holder was killed: its lock file is left, but the lock died with it.
    assert lock_path(tmp_path, "train").is_file()
    with output_lock(tmp_path, "train", "split train"):
        assert lock_path(tmp_path, "train").read_text() == f"{os.getpid()}\n"
    assert list(tmp_path.iterdir()) == []


def test_leftovers_of_dead_runs_are_removed_and_a_live_runs_are_kept(tmp_path: Path) -> None:
    live = holder(tmp_path, 'run_directory(base, "train") as work')
    killed = holder(tmp_path, 'run_directory(base, "train") as work')
    kill(killed)
    live_dir, killed_dir = tmp_path / f".train.tmp-{live.pid}", tmp_path / f".train.tmp-{killed.pid}"
    (killed_dir / "ids-1.bin").write_bytes(b"\0" * 4096)
    # The PID of a dead run taken by a live process (here: this one): the lock, not the PID, tells.
    reused = tmp_path / f".train.tmp-{os.getpid()}"
    reused.mkdir()
    (reused / OWNER_FILE).write_text("1\n")
    # Without an owner file (killed before it made one): removed only when no process has the PID.
    without_owner_dead, without_owner_live = tmp_path / ".train.tmp-999999999", tmp_path / f".train.tmp-{live.pid}0"
    without_owner_dead.mkdir()
    # Another output's run directory, and names that only look alike, are not this output's.
    others = [tmp_path / f".validation.tmp-{killed.pid}", tmp_path / ".train.tmp-12x", tmp_path / "train.tmp-1"]
    for path in others:
        path.mkdir()
    try:
        removed = remove_abandoned(tmp_path, "train")
        assert sorted(removed) == sorted([killed_dir, reused, without_owner_dead])
        assert live_dir.is_dir() and (live_dir / OWNER_FILE).is_file()
        assert all(path.is_dir() for path in others) and not without_owner_live.exists()
    finally:
        kill(live)
    assert remove_abandoned(tmp_path, "train") == [live_dir]


def test_a_run_directory_is_removed_with_its_contents_when_the_block_ends(tmp_path: Path) -> None:
    with pytest.raises(KeyError):
        with run_directory(tmp_path, "train") as work:
            (work / "ids.bin").write_bytes(b"1234")
            assert work.name == f".train.tmp-{os.getpid()}"
            raise KeyError("failed")
    assert list(tmp_path.iterdir()) == []


def test_publish_file_never_overwrites_without_replace(tmp_path: Path) -> None:
    (tmp_path / "new").write_text("new")
    (tmp_path / "train.bin").write_text("written by another run")
    with pytest.raises(FileExistsError):
        publish_file(tmp_path / "new", tmp_path / "train.bin", replace=False)
    assert (tmp_path / "train.bin").read_text() == "written by another run" and (tmp_path / "new").is_file()
    publish_file(tmp_path / "new", tmp_path / "other.bin", replace=False)
    assert (tmp_path / "other.bin").read_text() == "new" and not (tmp_path / "new").exists()


def test_staging_refuses_a_target_another_process_wrote_meanwhile(tmp_path: Path) -> None:
    """A writer that ignores the lock (another tool, or NFS mounted without locks) fills the target during the run:
    the move into place fails with one error naming the target, keeps the other writer's files and leaves nothing."""
    target = tmp_path / "tok"
    with pytest.raises(InputError, match=rf"^{target}: was written by another process meanwhile; nothing was "
                                         r"written \(use --force to replace it\)$"):
        with staging_directory(target) as staging:
            (staging / "vocab.json").write_text("{}")
            subprocess.run(["sh", "-c", f"mkdir -p {target} && echo other > {target}/vocab.json"], check=True)
    assert (target / "vocab.json").read_text() == "other\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["tok"]


def test_staging_refuses_while_another_run_holds_the_target(tmp_path: Path) -> None:
    other = holder(tmp_path, 'output_lock(base, "tok", str(base / "tok"))')
    try:
        with pytest.raises(InputError, match=rf"another hf-bpe run \(process {other.pid}\) is writing "
                                             rf"{tmp_path / 'tok'};"):
            with staging_directory(tmp_path / "tok"):
                pass
    finally:
        kill(other)
    assert sorted(path.name for path in tmp_path.iterdir()) == [".tok.lock"]  # the killed holder's
    with staging_directory(tmp_path / "tok", replace=True) as staging:
        (staging / "a").write_text("a")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["tok"]


def test_force_replaces_a_directory_without_leaving_the_old_one(tmp_path: Path) -> None:
    target = tmp_path / "tok"
    target.mkdir()
    (target / "old.txt").write_text("old")
    with staging_directory(target, replace=True) as staging:
        (staging / "new.txt").write_text("new")
    assert sorted(path.name for path in target.iterdir()) == ["new.txt"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["tok"]


def test_signals_held_wait_for_the_block_while_other_threads_run() -> None:
    # A signal sent to the process goes to a thread that does not block it, and Python then runs its handler in the
    # main thread: blocking it in the main thread alone (pthread_sigmask) would not hold it back.
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    order: list[str] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: order.append("handled"))
    try:
        with signals_held():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)  # a call: where Python runs the handlers of the signals that came
            order.append("block ended")
        with pytest.raises(KeyboardInterrupt), signals_held():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
            order.append("second block ended")
    finally:
        signal.signal(signal.SIGTERM, previous)
        stop.set()
        thread.join()
    assert order == ["block ended", "handled", "second block ended"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
