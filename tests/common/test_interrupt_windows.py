"""Ctrl-C or SIGTERM at any line of building an output (`hf_bpe.common.outputs.staging_directory` and what it calls)
leaves nothing behind: no staging directory, no lock file, no parent directory it created.

A signal's exception surfaces wherever the main thread is; a trace function raises KeyboardInterrupt at the 1st,
2nd, 3rd, ... line run in those functions in turn, until a run gets through to the work unhurt. (A signal once came
right after `run_directory` made its directory and before the `try` that removes it.) Not while the signals are
held (`hf_bpe.common.locks.signals_held`), nor at a `try:` line's NOP, where no signal can surface (Python checks
for them at calls and loops) and where CPython 3.11's exception table has no handler.
"""

from __future__ import annotations

import contextlib
import dis
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import pytest

from hf_bpe.common import locks, outputs

FUNCTIONS = (outputs.staging_directory, outputs.created_directories, outputs.check_writable, outputs._check_target,
             locks.run_directory, locks.remove_abandoned, locks.output_lock, locks._acquire, locks._release,
             locks.signals_held, contextlib.ExitStack.enter_context)


def code_of(function: Callable[..., Any]) -> CodeType:
    return getattr(function, "__wrapped__", function).__code__


def held(handler: Any) -> bool:
    """Whether `handler` is the one `signals_held` puts in for its block."""
    return getattr(handler, "__qualname__", "") == "signals_held.<locals>.note"


def interrupted_at(line: int, block: Callable[[], None]) -> bool:
    """Run `block` with KeyboardInterrupt raised at the `line`-th line event in FUNCTIONS; whether it was."""
    codes = set(map(code_of, FUNCTIONS))
    seen = 0
    raised = False

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal seen, raised
        if (event == "line" and not raised and frame.f_code.co_code[frame.f_lasti] != dis.opmap["NOP"]
                and not held(signal.getsignal(signal.SIGINT))):
            seen += 1
            if seen == line:
                raised = True
                raise KeyboardInterrupt  # unsets the trace function: the clean-up runs as it would
        return local

    def calls(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code in codes else None

    sys.settrace(calls)
    try:
        block()
    except KeyboardInterrupt:
        assert raised
    finally:
        sys.settrace(None)
    return raised


@pytest.mark.parametrize("replace", [False, True])
def test_an_interrupt_at_any_line_before_the_work_leaves_nothing(tmp_path: Path, replace: bool) -> None:
    target = tmp_path / "parent" / "child" / "tokenizer"

    def block() -> None:
        with outputs.staging_directory(target, replace=replace) as staging:
            sys.settrace(None)  # the work: reached with nothing interrupted
            (staging / "vocab.json").write_text("{}")

    line = 1
    while interrupted_at(line, block):
        assert list(tmp_path.iterdir()) == [], f"left behind after an interrupt at line event {line}"
        line += 1
    assert line > 20 and [path.name for path in target.iterdir()] == ["vocab.json"]
