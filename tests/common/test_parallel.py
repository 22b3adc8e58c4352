"""Tests for hf_bpe.common.parallel: worker counts, the start method, the pool with per-worker state, progress bars."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from hf_bpe.common.parallel import (
    default_num_workers,
    multiprocessing_context,
    process_pool,
    progress_bar,
    worker_state,
)
from tests import REPO


def scaled(value: int) -> int:
    return value * worker_state()["factor"]


def run_script(tmp_path: Path, code: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=timeout,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.fixture
def running_thread() -> object:
    """A second Python thread, alive for the test."""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    yield thread
    stop.set()
    thread.join()


def test_default_num_workers_follows_cpu_affinity() -> None:
    if hasattr(os, "sched_getaffinity"):
        assert default_num_workers() == len(os.sched_getaffinity(0))
    else:
        assert default_num_workers() == (os.cpu_count() or 1)


@pytest.mark.skipif(shutil.which("taskset") is None, reason="needs taskset")
def test_default_num_workers_under_taskset_is_one() -> None:
    code = "from hf_bpe.common.parallel import default_num_workers; print(default_num_workers())"
    output = subprocess.run(["taskset", "-c", "0", sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, cwd=REPO).stdout
    assert output.strip() == "1"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork is chosen on Linux only")
def test_fork_without_threads_and_spawn_with_a_running_thread() -> None:
    code = """if True:
        import threading, tqdm
        from hf_bpe.common.parallel import multiprocessing_context as context
        print(context().get_start_method())
        with tqdm.tqdm(total=1, disable=True) as bar:  # starts tqdm's monitor thread, which outlives the bar
            pass
        print(threading.active_count(), context().get_start_method())
    """
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO).stdout
    assert output.split() == ["fork", "2", "fork"]
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert multiprocessing_context().get_start_method() == "spawn"
    finally:
        stop.set()
        thread.join()


def test_progress_bar_starts_no_thread_and_is_hidden_off_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    threads = threading.active_count()
    with progress_bar(None, total=10, desc="working") as bar:  # stderr is captured: not a terminal
        bar.update(10)
        assert threading.active_count() == threads
    assert capsys.readouterr() == ("", "")
    with progress_bar(True, total=10, desc="working") as bar:
        bar.update(10)
        assert threading.active_count() == threads
    captured = capsys.readouterr()
    assert captured.out == "" and "working" in captured.err and "10/10" in captured.err


def test_pool_workers_get_their_state() -> None:
    with process_pool(2, {"factor": 3}) as pool:
        assert pool.map(scaled, range(10)) == [3 * i for i in range(10)]


def test_pool_workers_get_their_state_with_spawn(running_thread: object) -> None:
    assert multiprocessing_context().get_start_method() == "spawn"
    with process_pool(2, {"factor": 5}) as pool:
        assert pool.map(scaled, [1, 2]) == [5, 10]


def test_pool_error_reaches_the_caller_and_pool_is_terminated() -> None:
    with pytest.raises(KeyError, match="factor"):
        with process_pool(1, {}) as pool:
            pool.map(scaled, [1])
    assert not pool._pool or all(not worker.is_alive() for worker in pool._pool)


def test_worker_state_outside_a_worker_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="outside a process_pool worker"):
        worker_state()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork is chosen on Linux only")
def test_script_without_main_guard_trains_with_worker_processes(tmp_path: Path) -> None:
    # 3 MB of text is several chunks, so num_workers=2 starts worker processes; with "spawn" each would re-run this
    # unguarded script and die. The body's marker line must be printed once: by the script, not by workers.
    code = """
        import random
        from hf_bpe.common.parallel import process_pool
        from hf_bpe.train.api import train_bpe
        print("body ran", flush=True)
        rng = random.Random(0)
        words = ["alpha", "beta", "gamma", "it's", "naïve", "42", "\\n"]
        with open("corpus.txt", "w", encoding="utf-8") as file:
            file.write(" ".join(rng.choice(words) for _ in range(500_000)))
        vocab, merges = train_bpe("corpus.txt", 300, ["<|endoftext|>"], num_workers=2, progress=False)
        with process_pool(2, None) as pool:
            assert pool.map(abs, [-1, -2]) == [1, 2]
        print(len(vocab), len(merges))
    """
    result = run_script(tmp_path, code)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "body ran" and lines.count("body ran") == 1 and len(lines) == 2


@pytest.mark.skipif("forkserver" not in __import__("multiprocessing").get_all_start_methods(), reason="no forkserver")
def test_forkserver_runs_the_body_of_an_unguarded_script_again(tmp_path: Path) -> None:
    # Why multiprocessing_context() never picks "forkserver" for scripts: its server imports the main script (here a
    # guarded one, so the pool still works), running any unguarded code in it again.
    code = """
        import multiprocessing
        print("body ran", flush=True)
        if __name__ == "__main__":
            with multiprocessing.get_context("forkserver").Pool(1) as pool:
                print(pool.map(abs, [-1]), flush=True)
    """
    result = run_script(tmp_path, code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("body ran") >= 2 and "[1]" in result.stdout


@pytest.mark.parametrize("work", ["count", "pool"])
def test_ctrl_c_stops_the_workers_with_one_interrupt_in_the_parent_only(tmp_path: Path, work: str) -> None:
    import time

    code = f"""
        import sys, time
        from hf_bpe.train.counting.count import count_pretokens_in_iterator
        from hf_bpe.common.parallel import process_pool
        def texts():
            print("started", flush=True)
            while True:
                yield "some text, it's long enough " * 2000
        try:
            if {work!r} == "count":
                count_pretokens_in_iterator(texts(), num_workers=2, progress=False)
            else:
                with process_pool(2, None) as pool:
                    print("started", flush=True)
                    pool.map(time.sleep, [60, 60])
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(130)
    """
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    child = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, start_new_session=True)
    assert child.stdout is not None
    assert child.stdout.readline() == "started\n"
    time.sleep(2)  # the workers are running
    os.killpg(child.pid, signal.SIGINT)  # as Ctrl-C in a terminal: to the whole process group
    try:
        stdout, stderr = child.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)  # a hang: leave no process behind
        child.communicate()
        raise
    assert child.returncode == 130 and stdout == "interrupted\n"
    assert "KeyboardInterrupt" not in stderr and "Traceback" not in stderr, stderr


def test_a_fork_hook_interrupted_before_its_release_does_not_stop_later_forks() -> None:
    """Ctrl-C just as a fork returns raises KeyboardInterrupt inside the after-fork hook, where Python drops it: the
    hook's release of the bar's lock is skipped. Later forks, and the progress thread, must still go on."""
    script = textwrap.dedent("""
        import multiprocessing, os
        from hf_bpe.common import parallel

        parallel._bar_write_lock.acquire()  # what a fork whose after-fork hook was interrupted leaves
        with parallel.progress_from_workers(True, total=2) as done:
            for _ in range(2):
                process = multiprocessing.get_context("fork").Process(target=os.getpid)
                process.start()
                process.join()
                done.add(1)
        print("forked", process.exitcode)
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert run.stdout.strip() == "forked 0", run.stderr


def test_a_pool_ends_after_an_error_even_with_its_result_queue_lock_left_held() -> None:
    """A worker killed while it sends a result leaves the result queue's lock held (held here by this process, as
    such a worker leaves it): `Pool.terminate` alone then waits for ever for its task handler."""
    script = textwrap.dedent("""
        from hf_bpe.common import parallel

        parallel.END_POOL_SECONDS = 1.0
        try:
            with parallel.process_pool(2, None) as pool:
                pool._outqueue._wlock.acquire()
                raise OSError("No space left on device")
        except OSError:
            print("ended", [process.is_alive() for process in pool._pool], parallel._other_threads())
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert run.stdout.strip() == "ended [False, False] []", run.stderr  # no worker, and no thread of the pool


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_large_allocations_mapped_keeps_no_freed_array_resident() -> None:
    # After a freed 16 MB array, glibc serves 2 MB arrays from its heap, where small arrays between them keep the
    # freed ones resident (the plain run keeps about 200 MB); mapped on their own, they go back when freed.
    script = textwrap.dedent("""
        import sys
        import numpy as np
        from hf_bpe.common.parallel import large_allocations_mapped
        def resident():
            with open("/proc/self/status") as status:
                return next(int(line.split()[1]) // 1024 for line in status if line.startswith("VmRSS"))
        def work():
            big = np.ones(16 << 20, np.uint8)
            del big
            arrays, kept = [], []
            for _ in range(100):
                arrays.append(np.ones(2 << 20, np.uint8))
                kept.append(np.ones(100_000, np.uint8))
            del arrays
            return kept
        before = resident()
        if sys.argv[1] == "mapped":
            with large_allocations_mapped():
                kept = work()
        else:
            kept = work()
        print(resident() - before)
    """)
    grown = {way: int(subprocess.run([sys.executable, "-c", script, way], capture_output=True, text=True, check=True,
                                     cwd=REPO).stdout) for way in ("plain", "mapped")}
    assert grown["plain"] > 100 and grown["mapped"] < 40, grown


# For a test script: a task of a pool's worker that takes the pool's result queue's lock, as a worker killed while it
# sends a result leaves it held, says "held", and waits.
HOLD_THE_RESULT_LOCK = textwrap.dedent("""
    import sys, time

    def hold_the_result_lock(batch):
        frame = sys._getframe()
        while "outqueue" not in frame.f_locals:  # up to the pool's worker loop
            frame = frame.f_back
        if frame.f_locals["outqueue"]._wlock.acquire(timeout=0.5):
            print("held", flush=True)
        time.sleep(600)
""")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_library_pool_left_with_its_result_queue_lock_held_ends_within_the_bound(signum: int) -> None:
    """`datasets.map(num_proc=2)` ends its pool with `Pool.terminate`, which waits for ever once a worker killed while
    it sent a result has left the result queue's lock held. Here a worker takes that lock and waits, as such a worker
    leaves it; the run must still end, with its exit code, within `end_within`, and leave no process behind."""
    from tests.cli.faults import assert_no_process_left, finish

    script = HOLD_THE_RESULT_LOCK + textwrap.dedent("""
        import argparse, sys
        import datasets
        from hf_bpe.cli.main import run_reporting_errors
        from hf_bpe.common.interrupts import interrupts_in_this_process_only

        def run(args):
            with interrupts_in_this_process_only(end_within=1.0):
                datasets.Dataset.from_dict({"x": [1, 2]}).map(hold_the_result_lock, batched=True, batch_size=1,
                                                              num_proc=2)
            return 0

        sys.exit(run_reporting_errors("map", run, argparse.Namespace()))
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, start_new_session=True)
    assert child.stdout is not None
    assert child.stdout.readline() == "held\n"
    os.kill(child.pid, signum)
    stderr = finish(child, timeout=30)
    expected = ("map: interrupted; nothing was written", 130) if signum == signal.SIGINT else \
        ("map: terminated (SIGTERM); nothing was written", 143)
    assert (stderr.strip().splitlines()[-1], child.returncode) == expected, stderr
    assert "Traceback" not in stderr, stderr
    assert_no_process_left(child.pid)


def test_a_library_pool_ended_after_a_killed_worker_with_its_result_queue_lock_held_ends_within_the_bound() -> None:
    """As above, with no Ctrl-C: a worker SIGKILLed (the out-of-memory killer), whose death makes `datasets` raise and
    end its pool while the other worker holds the result queue's lock. With `watch_kills` the kill starts the
    deadline, and the block says which process it was."""
    from tests.cli.faults import assert_no_process_left, finish

    script = HOLD_THE_RESULT_LOCK + textwrap.dedent("""
        import os, signal, time
        import datasets
        from hf_bpe.common.interrupts import interrupts_in_this_process_only

        def hold_the_lock_or_die(batch):
            if batch["x"][0] == 1:
                time.sleep(1.0)  # the other worker holds the lock by then
                os.kill(os.getpid(), signal.SIGKILL)
            hold_the_result_lock(batch)

        end = None
        try:
            with interrupts_in_this_process_only(end_within=1.0, bound_terminate=True) as end:
                datasets.Dataset.from_dict({"x": [0, 1]}).map(hold_the_lock_or_die, batched=True, batch_size=1,
                                                              num_proc=2)
        except KeyboardInterrupt:
            print("ended", end.pool_stuck, file=sys.stderr, flush=True)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, start_new_session=True)
    stderr = finish(child, timeout=60)
    assert stderr.splitlines()[-1:] == ["ended True"], stderr
    assert_no_process_left(child.pid)


@pytest.mark.parametrize("wait", ["map", "imap", "imap_unordered", "apply_async"])
def test_a_worker_killed_while_the_pool_runs_is_reported_not_waited_for(wait: str) -> None:
    """CPython's pool starts a new worker in place of a dead one and waits for ever for the task it held."""
    script = textwrap.dedent(f"""
        import os, signal, time
        from hf_bpe.common.errors import WorkerLostError
        from hf_bpe.common.parallel import process_pool

        def task(number):
            if number == 3:
                os.kill(os.getpid(), signal.SIGKILL)  # what the out-of-memory killer sends
            time.sleep(0.2)
            return number

        try:
            with process_pool(2, None) as pool:
                if {wait!r} == "apply_async":
                    [result.get() for result in [pool.apply_async(task, (number,)) for number in range(6)]]
                else:
                    list(getattr(pool, {wait!r})(task, range(6)))
        except WorkerLostError as error:
            print(error)
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert run.stdout.strip() == "a worker process died (killed by SIGKILL, which the out-of-memory killer sends)", \
        run.stderr
