"""Exceptions raised for bad user input.

Every error a user can cause (a missing file, invalid UTF-8, a corrupt vocab) is an `InputError` whose message names
the file and, where it helps, the line or byte offset. The CLI turns it into a one-line message and exit code 2.
"""


class InputError(ValueError):
    """Bad input from the user: the message says which file, line or offset, and what is wrong."""
