"""Writing files so that a reader never sees a half-written one."""

from __future__ import annotations

import os
from pathlib import Path


def write_text_atomically(path: str | os.PathLike[str], text: str) -> Path:
    """Write UTF-8 text to a temporary file beside `path`, then rename it over `path`.

    An interrupted write leaves `path` as it was (and no temporary file behind, short of a hard kill).

    >>> import tempfile
    >>> target = Path(tempfile.mkdtemp()) / "hello.txt"
    >>> write_text_atomically(target, "hi\\n").read_text()
    'hi\\n'
    """
    path = Path(path)
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return path
