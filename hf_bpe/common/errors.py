"""The errors users see: bad input, and OS errors described by the path they are about.

Every error a user can cause (a missing file, invalid UTF-8, a corrupt vocab) is an `InputError` whose message names
the file and, where it helps, the line or byte offset. The CLI turns it into a one-line message and exit code 2.
"""

from __future__ import annotations


class InputError(ValueError):
    """Bad input from the user: the message says which file, line or offset, and what is wrong."""


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
