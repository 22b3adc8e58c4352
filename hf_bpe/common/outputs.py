"""Output directories of the commands: checked before long work, built under a temporary name, never half-written.

`staging_directory` is how `hf-bpe train` saves a tokenizer directory: the staging directory is created (and a file
written into it) *before* training, so an output that cannot be written (a read-only mount, a path under a regular
file, `/proc`) is reported before any counting instead of losing the trained tokenizer at the end.
`created_directories` is how `tokenize-dataset` makes its `--out`: directories it created are removed again when the
run fails. `describe_os_error` turns an `OSError` into the one-line "path: reason" the CLI prints.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hf_bpe.common.errors import InputError, describe_os_error


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
    for path in [*reversed(directory.parents), directory]:
        if path.is_dir():
            continue
        try:
            path.mkdir()
        except FileExistsError:
            if not path.is_dir():
                _remove_empty(created)
                raise InputError(f"{name}: cannot create the directory: {path} exists and is not a "
                                 f"directory") from None
            continue
        except OSError as error:
            _remove_empty(created)
            raise InputError(f"{name}: cannot create the directory: {describe_os_error(error)}") from None
        created.append(path)
    try:
        yield directory
    except BaseException:
        _remove_empty(created)
        raise


def _remove_empty(directories: list[Path]) -> None:
    for path in reversed(directories):
        try:
            path.rmdir()
        except OSError:
            return  # not empty (or gone): leave it and its parents


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
    error the staging directory (and parents created for it) are removed and `target` is left as it was. An existing
    `target` (empty, or anything with `replace`) is swapped out and deleted only after the new one is in place.

    >>> import tempfile
    >>> target = Path(tempfile.mkdtemp()) / "tok"
    >>> with staging_directory(target) as staging:
    ...     _ = (staging / "vocab.json").write_text("{}")
    >>> [path.name for path in target.iterdir()]
    ['vocab.json']
    """
    if target.exists() and not target.is_dir():
        raise InputError(f"{target}: exists and is not a directory")
    if target.is_dir() and not replace and any(target.iterdir()):
        raise InputError(f"{target}: directory exists and is not empty (use --force to replace it)")
    with created_directories(target.parent, target):
        staging = target.parent / f".{target.name}.tmp-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        try:
            staging.mkdir()
        except OSError as error:
            raise InputError(f"{target}: cannot create the directory: {error.strerror or error}") from None
        try:
            check_writable(staging, str(target), min_free_bytes)
            yield staging
            _move_into_place(staging, target, replace)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise


def _move_into_place(staging: Path, target: Path, replace: bool) -> None:
    if not target.exists():
        os.replace(staging, target)
        return
    if not replace and any(target.iterdir()):
        raise InputError(f"{target}: directory exists and is not empty (use --force to replace it)")
    old = target.parent / f".{target.name}.old-{os.getpid()}"
    os.replace(target, old)
    os.replace(staging, target)
    shutil.rmtree(old, ignore_errors=True)
