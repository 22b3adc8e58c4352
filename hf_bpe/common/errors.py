"""The errors users see: bad input, and OS errors described by the path they are about.

Every error a user can cause (a missing file, invalid UTF-8, a corrupt vocab) is an `InputError` whose message names
the file and, where it helps, the line or byte offset. The CLI turns it into a one-line message and exit code 2.
"""

from __future__ import annotations

from collections.abc import Callable


class InputError(ValueError):
    """Bad input from the user: the message says which file, line or offset, and what is wrong."""


class WorkerLostError(RuntimeError):
    """A worker process died while it had work (the out-of-memory killer's SIGKILL, a crash): the message says how,
    when that is known. The CLI adds what to try if it ran out of memory."""


def describe_os_error(error: OSError) -> str:
    """'PATH: reason' for an OSError, naming the file it is about when it knows one.

    >>> import errno, os
    >>> describe_os_error(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "out/train.bin"))
    'out/train.bin: No space left on device'
    >>> describe_os_error(PermissionError("not allowed"))
    'not allowed'
    """
    reason = error.strerror or str(error) or type(error).__name__
    return f"{error.filename}: {reason}" if error.filename is not None else reason


def in_chain(error: BaseException, matches: Callable[[BaseException], bool]) -> BaseException | None:
    """The first of `error`, its cause or context, theirs... that `matches`, if any."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if matches(cause):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None
