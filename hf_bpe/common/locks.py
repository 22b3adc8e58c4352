"""Who owns an output: one run at a time per output, and a private directory per run that a later run may remove.

* `output_lock(directory, name, what)`: an exclusive `flock` on `directory/.NAME.lock`, held from the start of a run
  to the moment its output is in place. A second run on the same output fails at once with an InputError naming the
  process that holds it, instead of both runs writing and the last rename winning.
* `run_directory(directory, name)`: `directory/.NAME.tmp-PID`, where a run builds its output. The run holds a lock on
  a file inside it (`OWNER_FILE`) for as long as it lives, so the kernel releases it when the run dies, however it
  dies; `remove_abandoned` (called by `run_directory` first) deletes the run directories of the same output whose
  lock is free. A live run's directory is never touched, and a reused PID cannot fool the check: it is the lock, not
  the PID, that says whether the owner is alive.

On NFS, Linux emulates `flock` with POSIX byte-range locks, which the server arbitrates across clients (NFSv4, or
NFSv3 with the lock manager); a mount with `nolock` or `local_lock=flock` makes them local to one client. Outputs
are therefore also published in a way that fails rather than overwrites (see `hf_bpe.common.outputs`). Not handled:
platforms without `fcntl` (Windows), where neither lock is taken.

>>> import tempfile
>>> base = Path(tempfile.mkdtemp())
>>> with output_lock(base, "train", "split 'train'"), run_directory(base, "train") as work:
...     work.name.startswith(".train.tmp-"), sorted(path.name for path in base.iterdir())[0]
(True, '.train.lock')
>>> list(base.iterdir())
[]
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hf_bpe.common.errors import InputError

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

#: The file inside a run directory that its run holds locked while it lives.
OWNER_FILE = ".owner"


def lock_path(directory: Path, name: str) -> Path:
    """The lock file of output `name` in `directory`.

    >>> lock_path(Path("out"), "train").as_posix()
    'out/.train.lock'
    """
    return directory / f".{name}.lock"


@contextmanager
def output_lock(directory: Path, name: str, what: str) -> Iterator[None]:
    """Hold the output lock of `name` in `directory` (which must exist) for the block; InputError if another process
    holds it. `what` names the output in that message, e.g. "split 'train' of out/".

    The lock file holds the owner's PID (for the message) and is removed when the block ends.
    """
    fd: int | None = None
    try:
        with signals_held():  # between making the lock file and holding fd here, a signal would leave it behind
            fd = _acquire(lock_path(directory, name), what)
        yield
    finally:
        _release(lock_path(directory, name), fd)


@contextmanager
def signals_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait until the block ends (in the main thread, where Python runs their handlers): for a
    step that makes something and hands it to the clean-up that removes it, or that an exception would leave half
    done. `multiprocessing.Queue.put`, for one, leaves its queue's lock taken when the exception comes between taking
    the lock and entering its `with` block, and closing the queue then waits for that lock forever.

    The handlers are swapped for one that notes the signals, and those noted are sent again when the block ends.
    Blocking the signals (`pthread_sigmask`) would not do: that holds them back from this thread only, another thread
    (a queue's feeder) takes them, and Python runs their handlers in this thread all the same. Not handled: a process
    forked in the block, which would inherit the noting handler.

    >>> with signals_held():
    ...     pass
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []

    def note(signum: int, frame: Any) -> None:
        noted.append(signum)

    # Each step is safe wherever a signal comes: the handlers are read before any is swapped, and the second is put
    # back even if the first, once back, raises.
    interrupt, terminate = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGINT, note)
        signal.signal(signal.SIGTERM, note)
        yield
    finally:
        try:
            signal.signal(signal.SIGINT, signal.SIG_DFL if interrupt is None else interrupt)
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if terminate is None else terminate)
        for number in noted:
            signal.raise_signal(number)


def _acquire(path: Path, what: str) -> int | None:
    if fcntl is None:
        return None
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as error:
            raise InputError(f"{path}: cannot create the lock file of {what}: {error.strerror or error}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            holder = _read_pid(fd)
            os.close(fd)
            if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                by = f"process {holder}" if holder else "another process"
                raise InputError(f"another hf-bpe run ({by}) is writing {what}; wait for it to finish, or choose "
                                 f"another output") from None
            if error.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                return None  # a file system without locks: publication alone refuses to overwrite
            raise InputError(f"{path}: cannot lock: {error.strerror or error}") from None
        # The holder before us removes the file as it lets go: a lock on a removed file guards nothing, so lock the
        # file that is there now instead.
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return fd
        os.close(fd)


def _release(path: Path, fd: int | None) -> None:
    if fd is None:
        return
    try:
        path.unlink(missing_ok=True)  # while still holding it: see _acquire
    finally:
        os.close(fd)


def _read_pid(fd: int) -> int | None:
    """The PID the holder wrote into the lock file; it writes it just after taking the lock, so wait a little."""
    for _ in range(20):
        try:
            text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        except OSError:
            return None
        if text.isdigit():
            return int(text)
        time.sleep(0.005)
    return None


@contextmanager
def run_directory(directory: Path, name: str) -> Iterator[Path]:
    """A new, empty `directory/.NAME.tmp-PID` owned by this process for the block, then removed with its contents.

    The abandoned run directories of `name` (see `remove_abandoned`) are removed first. Errors creating it are
    OSErrors, for the caller to describe.
    """
    remove_abandoned(directory, name)
    path = directory / f".{name}.tmp-{os.getpid()}"
    shutil.rmtree(path, ignore_errors=True)  # an earlier block of this process that could not remove it
    fd: int | None = None
    try:
        # Made inside the try: a signal that interrupts right after mkdir still removes it (the path has this
        # process's PID, so it is ours to remove even when mkdir fails).
        path.mkdir()
        fd = os.open(path / OWNER_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as error:
                if error.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                    raise
        os.write(fd, f"{os.getpid()}\n".encode())
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        if fd is not None:
            os.close(fd)


def remove_abandoned(directory: Path, name: str) -> list[Path]:
    """Remove the run directories `directory/.NAME.tmp-PID` whose owner is gone; return the ones removed.

    A run directory's owner is gone when the lock on its `OWNER_FILE` is free. One without that file was made by a
    run that died before creating it (or by hf_bpe 0.1): it is removed only when no process has its PID.

    >>> import tempfile
    >>> base = Path(tempfile.mkdtemp())
    >>> (base / ".train.tmp-999999999").mkdir(); _ = (base / ".train.tmp-999999999" / "ids.bin").write_bytes(b"12")
    >>> [path.name for path in remove_abandoned(base, "train")], list(base.iterdir())
    (['.train.tmp-999999999'], [])
    """
    pattern = re.compile(rf"\.{re.escape(name)}\.tmp-(\d+)")
    removed = []
    try:
        entries = list(directory.iterdir())
    except OSError:
        return removed
    for path in entries:
        match = pattern.fullmatch(path.name)
        if match is None or path.is_symlink() or not path.is_dir():
            continue
        with _claimed_if_abandoned(path, int(match[1])) as abandoned:
            if abandoned:  # removed while its lock is held here, so that no run can take it over meanwhile
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
    return removed


@contextmanager
def _claimed_if_abandoned(path: Path, pid: int) -> Iterator[bool]:
    """Whether the run directory's owner is gone, holding its lock for the block if so."""
    try:
        fd = os.open(path / OWNER_FILE, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        fd, abandoned = None, not pid_is_alive(pid)
    except OSError:
        fd, abandoned = None, False  # cannot tell: keep it
    else:
        abandoned = _try_lock(fd) if fcntl is not None else not pid_is_alive(pid)
    try:
        yield abandoned
    finally:
        if fd is not None:
            os.close(fd)


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def pid_is_alive(pid: int) -> bool:
    """Whether a process with this PID exists (it may be another program that reuses the PID).

    >>> pid_is_alive(os.getpid())
    True
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


__all__ = ["OWNER_FILE", "lock_path", "output_lock", "pid_is_alive", "remove_abandoned", "run_directory"]
