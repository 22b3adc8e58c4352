"""The `hf-bpe` command line.

    hf-bpe train [INPUT ...] --out DIR        train on text files (default: a small corpus shipped in the package)
    hf-bpe train --dataset NAME_OR_PATH --out DIR   train on a dataset's text column, one document per row
    hf-bpe tokenize-dataset --tokenizer DIR --dataset NAME_OR_PATH --split S --out OUT   write OUT/S.bin token arrays
    hf-bpe card DIR [--eval-corpus F ...]     (re)write the model card of a tokenizer directory
    hf-bpe eval DIR ... --corpus F ... [--baseline gpt2]   compare tokenizers on corpora (table, --json, --plot)
    hf-bpe show DIR [TEXT | --file F] [--html FILE]   show a text token by token
    hf-bpe convert FILE.tiktoken --pattern NAME_OR_REGEX --out DIR   a tiktoken file -> a tokenizer directory
    hf-bpe export-tiktoken DIR --out FILE.tiktoken   a tokenizer directory -> a tiktoken file

Every user error (a missing file, invalid UTF-8, an existing output directory, an output that cannot be written, a
full disk) is one line on stderr and exit code 2, Ctrl-C is exit code 130, SIGTERM exit code 143; nothing
half-written is left behind. Anything unexpected (out of memory, a lost worker, a bug) is one line and exit code 2
too; HF_BPE_DEBUG=1 shows its traceback instead. Outputs are checked before long work starts (see
hf_bpe.common.outputs). docs/robustness.md describes it all for users.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from hf_bpe.common.errors import InputError, WorkerLostError, describe_os_error, in_chain
from hf_bpe.common.parallel import children_exit_with_this_process

#: Set to 1 to see the traceback of an error instead of its one-line report.
DEBUG_VARIABLE = "HF_BPE_DEBUG"
EXIT_ERROR, EXIT_INTERRUPTED, EXIT_TERMINATED = 2, 130, 128 + signal.SIGTERM


def main(argv: Sequence[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    names = {name for name, *_ in COMMANDS}
    parser = build_parser(arguments[0] if arguments and arguments[0] in names else None)
    args = parser.parse_args(arguments)
    code = run_reporting_errors(f"hf-bpe {args.command}", args.run, args)
    if argv is None:  # the program itself (`hf-bpe`, `python -m hf_bpe.cli`): only its exit is left to do
        _late_signals_ignored()
    return code


def _late_signals_ignored() -> None:
    """Ignore Ctrl-C and SIGTERM from now on: the run has finished or cleaned up, and its exit code is decided.

    Once Python starts to exit it gives SIGINT and SIGTERM their default action back, so a signal that comes while
    the interpreter finalizes (Ray's connection closing, threads ending) would kill the process: a run that wrote
    everything would end as killed by the signal instead of with 0, and an interrupted one without its 130.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, signal.SIG_IGN)


def run_reporting_errors(prefix: str, run: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """`run(args)`, with whatever goes wrong reported as one line on stderr instead of a traceback.

    Exit codes: 2 for an error (bad input, an unwritable or full output, and anything unexpected: out of memory, a
    lost worker process or Ray actor, a bug), 130 after Ctrl-C (SIGINT), 143 after SIGTERM (what `timeout`, Slurm
    and Kubernetes send), which is handled like Ctrl-C: the run stops and cleans up. Every process the run forks
    dies with it, even after SIGKILL (`children_exit_with_this_process`). With HF_BPE_DEBUG=1 an error is raised
    with its traceback instead.
    """
    terminated: list[int] = []
    try:
        with _sigterm_raises_terminated(terminated), children_exit_with_this_process():
            return run(args)
    except KeyboardInterrupt as error:
        return _report_interrupt(prefix, bool(terminated) or isinstance(error, Terminated))
    except SystemExit as error:
        if error.code != signal.SIGTERM:
            raise
        return _report_interrupt(prefix, True)  # Ray's SIGTERM handler (sys.exit(signum)) replaces ours in ray.init
    except BaseException as error:  # also what is not an Exception, such as a panic in a Rust extension
        # An error raised while interrupted (a pool's TimeoutError as it shuts down after Ctrl-C) is the interrupt.
        if terminated or in_chain(error, lambda cause: isinstance(cause, KeyboardInterrupt)):
            return _report_interrupt(prefix, bool(terminated))
        if os.environ.get(DEBUG_VARIABLE, "") not in ("", "0"):
            raise
        print(f"{prefix}: {describe_error(error, args)}", file=sys.stderr)
        return EXIT_ERROR


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised the way Ctrl-C raises KeyboardInterrupt, so that every clean-up that handles Ctrl-C (stopping
    worker pools, removing temporary files) handles it too."""


@contextmanager
def _sigterm_raises_terminated(received: list[int]) -> Iterator[None]:
    """In the block, the first SIGTERM raises Terminated in this process (later ones are noted and let the clean-up
    finish). A forked child that inherited the handler dies of the signal instead, as it would without it.

    An exception raised by a signal handler surfaces wherever the main thread is, and where Python cannot raise it
    (an at-fork hook, a `__del__`) it prints "Exception ignored in ..." with a traceback and goes on as if nothing
    happened. Such a swallowed Terminated or KeyboardInterrupt is raised again 10 ms later (SIGALRM), silently.
    """
    if sys.platform == "win32":
        yield
        return
    owner = os.getpid()
    again: list[type[BaseException]] = []  # the interrupt to raise again, once swallowed

    def on_sigterm(signum: int, frame: Any) -> None:
        if os.getpid() != owner:  # a child forked by a way that skipped the at-fork hook below
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        received.append(signum)
        if len(received) == 1:
            raise Terminated

    def on_alarm(signum: int, frame: Any) -> None:
        if again and os.getpid() == owner:
            raise again.pop()

    def on_unraisable(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and os.getpid() == owner:
            again[:] = [type(unraisable.exc_value)]
            signal.setitimer(signal.ITIMER_REAL, 0.01)
            return
        previous_hook(unraisable)

    _OURS.update({on_sigterm, on_alarm})
    try:
        previous = [signal.signal(number, handler)
                    for number, handler in ((signal.SIGTERM, on_sigterm), (signal.SIGALRM, on_alarm))]
    except ValueError:  # not the main thread: leave the signals as they are
        yield
        return
    previous_hook, sys.unraisablehook = sys.unraisablehook, on_unraisable
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        sys.unraisablehook = previous_hook
        for number, handler in zip((signal.SIGTERM, signal.SIGALRM), previous):
            signal.signal(number, signal.SIG_DFL if handler is None else handler)
        _OURS.difference_update({on_sigterm, on_alarm})


# The handlers installed by _sigterm_raises_terminated. A forked child gets the default ones back at once: a Python
# handler runs only when the child's main thread runs Python code, and a worker blocked in C (a pool worker waiting
# on its queue's lock) would then never die of the SIGTERM its pool's terminate() sends it.
_OURS: set[Any] = set()


def _default_handlers_in_child() -> None:
    for number in (signal.SIGTERM, signal.SIGALRM):
        if signal.getsignal(number) in _OURS:
            try:
                signal.signal(number, signal.SIG_DFL)
            except ValueError:  # not the main thread; on_sigterm's check of the PID stays
                pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_default_handlers_in_child)


def _report_interrupt(prefix: str, terminated: bool) -> int:
    if terminated:
        print(f"{prefix}: terminated (SIGTERM); nothing was written", file=sys.stderr)
        return EXIT_TERMINATED
    print(f"{prefix}: interrupted; nothing was written", file=sys.stderr)
    return EXIT_INTERRUPTED


def describe_error(error: BaseException, args: argparse.Namespace) -> str:
    """The one line reported for `error`: "error: ..." with what went wrong and, for the unexpected, what to do.

    >>> describe_error(InputError("a.txt: no such file"), argparse.Namespace())
    'error: a.txt: no such file'
    >>> describe_error(MemoryError(), argparse.Namespace(num_proc=2, batch_size=1000))
    'error: out of memory; try fewer --num-proc, a smaller --batch-size or a machine with more memory'
    >>> describe_error(WorkerLostError("a worker died"), argparse.Namespace(num_proc=2))
    'error: a worker died; if it ran out of memory, try fewer --num-proc or a machine with more memory'
    >>> describe_error(KeyError("vocab"), argparse.Namespace())
    "internal error: KeyError: 'vocab' (a bug in hf_bpe: please report it with the traceback HF_BPE_DEBUG=1 shows)"
    """
    if isinstance(error, InputError):  # says it all, even when raised while handling a Ray or memory error
        return f"error: {one_line(str(error))}"
    ray_error = in_chain(error, lambda cause: type(cause).__module__.startswith("ray."))
    if ray_error is not None:
        kinds = {kind.__name__ for kind in type(ray_error).__mro__}
        what = f"{type(ray_error).__name__}: {one_line(str(ray_error), 200)}"
        if kinds & _RAY_LOST_WORKER:
            return f"error: a Ray worker was lost ({what}); {_after_lost_ray_worker(args)}"
        if "RayTaskError" in kinds:
            return f"error: a task on the Ray cluster failed: {what}"
        return f"error: the Ray cluster failed ({what})"
    lost = in_chain(error, lambda cause: isinstance(cause, WorkerLostError))
    if lost is not None:
        return f"error: {one_line(str(lost))}; if it ran out of memory, try {_memory_advice(args)}"
    if in_chain(error, lambda cause: isinstance(cause, MemoryError)) is not None:
        return f"error: out of memory; try {_memory_advice(args)}"
    if isinstance(error, OSError):
        return f"error: {one_line(describe_os_error(error))}"
    if isinstance(error, (ValueError, TypeError, RuntimeError)):
        return f"error: {one_line(str(error))}"
    return (f"internal error: {type(error).__name__}: {one_line(str(error))} (a bug in hf_bpe: please report it "
            f"with the traceback {DEBUG_VARIABLE}=1 shows)")


def _memory_advice(args: argparse.Namespace) -> str:
    """What the command's options offer against running out of memory."""
    advice = [text for text, name in (("fewer --workers", "workers"), ("fewer --num-proc", "num_proc"),
                                      ("a smaller --batch-size", "batch_size")) if hasattr(args, name)]
    return f"{', '.join(advice)}{' or ' if advice else ''}a machine with more memory"


def one_line(message: str, limit: int = 400) -> str:
    """A message on one line. One without a line break is kept as it is (its spaces may be quoted text); in one with
    line breaks, a traceback (a worker's) becomes its last line, runs of whitespace one space, and the whole at most
    `limit` characters.

    >>> one_line("a worker failed:\\nTraceback (most recent call last):\\n  File ...\\nZeroDivisionError: boom")
    'a worker failed: ZeroDivisionError: boom'
    >>> one_line("special token '  ' is empty")
    "special token '  ' is empty"
    """
    if "\n" not in message and "\r" not in message:
        return message or "(no message)"
    head, marker, tail = message.partition("Traceback (most recent call last):")
    if marker:
        lines = [line for line in tail.splitlines() if line.strip() and not line.startswith((" ", "\t"))]
        message = head + (lines[-1] if lines else "")
    text = " ".join(message.split()) or "(no message)"
    return text if len(text) <= limit else text[:limit - 3] + "..."


# Ray's exceptions for a worker process, node or object that is gone (by name: ray is imported only when used).
_RAY_LOST_WORKER = {"RayActorError", "WorkerCrashedError", "NodeDiedError", "ObjectLostError", "OutOfMemoryError",
                    "LocalRayletDiedError", "OwnerDiedError"}


def _after_lost_ray_worker(args: argparse.Namespace) -> str:
    if getattr(args, "command", None) == "tokenize-dataset":
        return "rerun the command with --resume: the shards already written are kept"
    return "rerun the command (a node that ran out of memory needs fewer tasks at once, or more memory)"


# Each command: its name, its module, the module's functions that add its options and run it, its help line, and
# its description (the text, or the name of the module's constant that holds it).
COMMANDS = [
    ("train", "hf_bpe.cli.train", "add_train_arguments", "run_train",
     "train a tokenizer and save it as a HuggingFace tokenizer directory",
     "Train a byte-level BPE tokenizer (GPT-2 pre-tokenization) on text files and save a directory that "
     "loads with AutoTokenizer.from_pretrained, tokenizers.Tokenizer.from_file and "
     "hf_bpe.HFBPETokenizer.from_pretrained."),
    ("tokenize-dataset", "hf_bpe.cli.tokenize_dataset", "add_tokenize_dataset_arguments", "run_tokenize_dataset",
     "tokenize a HuggingFace dataset into a flat uint16/uint32 token array (OUT/SPLIT.bin + SPLIT.json)",
     "Encode every document of a dataset split with an hf_bpe tokenizer directory and write the ids, each "
     "document followed by the end-of-text id, to OUT/SPLIT.bin (nanoGPT style), with metadata in "
     "OUT/SPLIT.json. Read it back with hf_bpe.data.load_tokens(OUT, SPLIT). A special-token string inside a "
     "document (a literal <|endoftext|>) is encoded as text, like nanoGPT's encode_ordinary, so the only "
     "end-of-text ids are the document boundaries; --allow-special encodes it as its id, as tok(document) "
     "does. An existing OUT/SPLIT.bin is replaced only with --force; other splits may share OUT."),
    ("card", "hf_bpe.cli.card", "add_card_arguments", "run_card",
     "write the model card (README.md) of a tokenizer directory",
     "Write DIR/README.md in the HuggingFace model-card format: training corpus and time, vocabulary, "
     "compression (bytes per token) on evaluation corpora against baselines, under-trained tokens, plots "
     "(PNG files in DIR, with matplotlib), example tokenizations, how to load it."),
    ("eval", "hf_bpe.cli.eval", "add_eval_arguments", "run_eval", "compare tokenizers and baselines on corpora",
     "EVAL_DESCRIPTION"),
    ("show", "hf_bpe.cli.show", "add_show_arguments", "run_show",
     "show a text token by token (terminal colours or an HTML page)", "SHOW_DESCRIPTION"),
    ("convert", "hf_bpe.cli.convert", "add_convert_arguments", "run_convert",
     "turn a .tiktoken file into a HuggingFace tokenizer directory", "CONVERT_DESCRIPTION"),
    ("export-tiktoken", "hf_bpe.cli.convert", "add_export_tiktoken_arguments", "run_export_tiktoken",
     "write the .tiktoken file of a tokenizer directory", "EXPORT_DESCRIPTION"),
]


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The `hf-bpe` parser. With `command`, only that command gets its options (the others are listed with their
    help line), so that running a command imports only its own modules: start-up time counts in every run."""
    import importlib

    parser = argparse.ArgumentParser(
        prog="hf-bpe",
        description="Train byte-level BPE tokenizers exactly and fast, and use them across the HuggingFace ecosystem.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module_name, add_name, run_name, help, description in COMMANDS:
        if command is not None and name != command:
            commands.add_parser(name, help=help)
            continue
        module = importlib.import_module(module_name)
        if description.isidentifier():
            description = getattr(module, description)
        subparser = commands.add_parser(name, help=help, description=description)
        getattr(module, add_name)(subparser)
        subparser.set_defaults(run=getattr(module, run_name))
    return parser

