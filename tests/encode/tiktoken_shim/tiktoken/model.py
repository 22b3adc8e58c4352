"""tiktoken's own model table: the installed tiktoken's tiktoken/model.py, run in this package, so that its
`from .core import Encoding` and `from .registry import get_encoding` are the shim's."""

from importlib.metadata import distribution
from pathlib import Path

_source = Path(str(distribution("tiktoken").locate_file("tiktoken/model.py")))
exec(compile(_source.read_text(encoding="utf-8"), str(_source), "exec"))
