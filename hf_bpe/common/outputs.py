"""Output directories of the commands: checked before long work, built under a temporary name, never half-written.

`staging_directory` is how `hf-bpe train` saves a tokenizer directory: the staging directory is created (and a file
written into it) *before* training, so an output that cannot be written (a read-only mount, a path under a regular
file, `/proc`) is reported before any counting instead of losing the trained tokenizer at the end.
`created_directories` is how `tokenize-dataset` makes its `--out`: directories it created are removed again when the
run fails. `publish_file` moves a finished file into place without ever overwriting one it was not asked to replace.
Both commands hold the output's lock for the whole run (`hf_bpe.common.locks`), so concurrent runs on one output
cannot both publish.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from hf_bpe.common.errors import InputError, describe_os_error
from hf_bpe.common.locks import output_lock, remove_abandoned, run_directory, signals_held


@contextmanager
def created_directories(directory: Path, name: Path | None = None) -> Iterator[Path]:
    """Create `directory` and any missing parents; if the block fails, remove those that were created and are empty.

    Errors name `name` (default: `directory`), the path the user gave.

    >>> import tempfile
    >>> base = Path(tempfile.mkdtemp())
    >>> try:
    ...     with created_directories(base / "a" / "b"):
    ...         raise KeyError("failed")
    ... except KeyError:
    ...     pass
    >>> list(base.iterdir())
    []
    """
    created: list[Path] = []
    name = name or directory
    try:
        for path in [*reversed(directory.parents), directory]:
            if path.is_dir():
                continue
            created.append(path)  # before mkdir: a signal that interrupts right after it still removes it
            try:
                path.mkdir()
            except FileExistsError:
                created.pop()
                if not path.is_dir():
                    raise InputError(f"{name}: cannot create the directory: {path} exists and is not a "
                                     f"directory") from None
                continue
            except OSError as error:
                created.pop()
                raise InputError(f"{name}: cannot create the directory: {describe_os_error(error)}") from None
        yield directory
    except BaseException:
        _remove_empty(created)
        raise


def _remove_empty(directories: list[Path]) -> None:
    for path in reversed(directories):
        try:
            path.rmdir()
        except FileNotFoundError:
            continue  # not made yet (interrupted before its mkdir)
        except OSError:
            return  # not empty: leave it and its parents


def check_writable(directory: Path, what: str, min_free_bytes: int = 0) -> None:
    """Write and remove a small probe file in `directory`, and check it has `min_free_bytes` free: else InputError.

    Root may write where the mode bits say no, so only an actual write tells; a read-only mount fails here with EROFS.
    """
    probe = directory / f".hf_bpe-write-probe-{os.getpid()}"
    try:
        with open(probe, "wb") as file:
            file.write(b"\0" * 4096)
            file.flush()
            os.fsync(file.fileno())
    except OSError as error:
        raise InputError(f"{what}: cannot write there: {error.strerror or error}") from None
    finally:
        probe.unlink(missing_ok=True)
    if min_free_bytes:
        stats = os.statvfs(directory)
        free = stats.f_bavail * stats.f_frsize
        if free < min_free_bytes:
            raise InputError(f"{what}: only {free:,} bytes free there, and the output needs about "
                             f"{min_free_bytes:,}")


@contextmanager
def staging_directory(target: Path, replace: bool = False, min_free_bytes: int = 0) -> Iterator[Path]:
    """Build a directory under a temporary name next to `target` and move it into place only on success.

    The staging directory is created and written to on entry, so an unwritable `target` fails before the work. On any
    error the staging directory (and parents created for it) are removed and `target` is left as it was. An empty
    `target` is replaced by the rename; with `replace`, an existing `target` is moved aside and deleted only after the
    new one is in place.

    One run at a time: the output lock of `target` (`hf_bpe.common.locks`) is held until the new directory is in
    place, so a second run on the same `target` fails at once. The staging directory is `.NAME.tmp-PID/NAME` next to
    `target`; what a killed run leaves there is removed by the next run on `target`.

    >>> import tempfile
    >>> target = Path(tempfile.mkdtemp()) / "tok"
    >>> with staging_directory(target) as staging:
    ...     _ = (staging / "vocab.json").write_text("{}")
    >>> [path.name for path in target.iterdir()], [path.name for path in target.parent.iterdir()]
    (['vocab.json'], ['tok'])
    """
    _check_target(target, replace)
    with created_directories(target.parent, target), ExitStack() as stack:
        # A signal between a context's yield and the stack taking its exit would leave its directory or lock file
        # behind: signals wait for the stack (the slow part, old runs' directories, is removed before).
        try:
            remove_abandoned(target.parent, target.name)
            with signals_held():
                work = stack.enter_context(run_directory(target.parent, target.name))
            staging = work / target.name
            staging.mkdir()
        except OSError as error:
            raise InputError(f"{target}: cannot create the directory: {error.strerror or error}") from None
        with signals_held():
            stack.enter_context(output_lock(target.parent, target.name, str(target)))
        _check_target(target, replace)  # again: another run may have written it before this one took the lock
        check_writable(staging, str(target), min_free_bytes)
        yield staging
        _move_into_place(staging, target, replace, work)


def _check_target(target: Path, replace: bool) -> None:
    if target.exists() and not target.is_dir():
        raise InputError(f"{target}: exists and is not a directory")
    if target.is_dir() and not replace and any(target.iterdir()):
        raise InputError(f"{target}: directory exists and is not empty (use --force to replace it)")


def _move_into_place(staging: Path, target: Path, replace: bool, work: Path) -> None:
    """Rename `staging` to `target`. Without `replace`, rename(2) itself refuses a `target` that is no longer empty,
    so even a writer that ignores the lock cannot be overwritten."""
    old = work / ".replaced"
    try:
        if replace and target.exists():
            os.rename(target, old)
            try:
                os.rename(staging, target)
            except OSError:
                os.rename(old, target)
                raise
        else:
            os.rename(staging, target)
    except OSError as error:
        if error.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
            raise InputError(f"{target}: was written by another process meanwhile; nothing was written (use --force "
                             f"to replace it)") from None
        raise InputError(f"{target}: cannot move the new directory into place: {error.strerror or error} "
                         f"(nothing was written)") from None


def publish_file(temporary: Path, target: Path, replace: bool) -> None:
    """Move the finished file `temporary` to `target`: over it with `replace`, else only if `target` does not exist.

    Without `replace` the file is hard-linked into place (link(2) fails if the name exists, atomically, on NFS too)
    and raises FileExistsError for an existing `target`; where hard links are not supported, the check and the
    rename are two steps.

    >>> import tempfile
    >>> base = Path(tempfile.mkdtemp())
    >>> _ = (base / "a.tmp").write_text("new"); _ = (base / "a").write_text("old")
    >>> try:
    ...     publish_file(base / "a.tmp", base / "a", replace=False)
    ... except FileExistsError:
    ...     print("refused")
    refused
    >>> publish_file(base / "a.tmp", base / "a", replace=True); (base / "a").read_text()
    'new'
    """
    if replace:
        os.replace(temporary, target)
        return
    try:
        os.link(temporary, target)
    except FileExistsError:
        raise
    except OSError as error:
        if error.errno not in _NO_HARD_LINKS:
            raise
        if os.path.lexists(target):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(target)) from None
        os.rename(temporary, target)
        return
    os.unlink(temporary)


# link(2) errors that mean "no hard links here" (FAT, some FUSE and network file systems).
_NO_HARD_LINKS = (errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS, errno.EXDEV, errno.EMLINK)
