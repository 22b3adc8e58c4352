"""`hf-bpe show`: what a tokenizer does to a text, token by token (hf_bpe.evaluation.viewer).

    hf-bpe show tok/ "Hello, world!"            each token on its own background colour in a terminal
    hf-bpe show tok/ --file notes.txt --ids     with the id of each token
    hf-bpe show gpt2 "Hello" | cat              no terminal: plain |-separated tokens
    hf-bpe show tok/ --file notes.txt --html tokens.html   a self-contained web page
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from hf_bpe.common.errors import InputError

SHOW_DESCRIPTION = (
    "Print TEXT (or --file F, or standard input) token by token: in a terminal each token on an alternating "
    "background colour, otherwise plain tokens separated by |. Whitespace is made visible (␣ a space, ↵ a newline, "
    "⇥ a tab) and a byte of a character split across tokens is shown as <e6>. --html writes one self-contained page "
    "instead, with the id and bytes of each token shown on hover. The counts go to standard error.")


def add_show_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `hf-bpe show`."""
    parser.add_argument("tokenizer", metavar="DIR",
                        help="a tokenizer directory (saved by hf_bpe, or any HuggingFace tokenizer directory, which "
                             "tokenizers encodes from its tokenizer.json), or a baseline: gpt2, cl100k=FILE, "
                             "o200k=FILE")
    parser.add_argument("text", nargs="*", metavar="TEXT",
                        help="the text to show; several words are joined by single spaces (default: --file, else "
                             "standard input)")
    _collect_text_after_options(parser)
    parser.add_argument("--file", type=Path, metavar="F", help="show the text of this UTF-8 file (default: TEXT, else "
                                                                      "standard input)")
    parser.add_argument("--ids", action="store_true", help="show each token's id after it (default: off)")
    parser.add_argument("--html", type=Path, metavar="FILE",
                        help="write a self-contained HTML page (coloured tokens, id and bytes on hover, the counts) "
                             "instead of printing (default: print)")
    parser.add_argument("--force", action="store_true", help="replace the --html file if it exists (default: refuse)")
    parser.add_argument("--color", choices=["auto", "always", "never"], default="auto",
                        help="colour the tokens: always, never, or auto: when standard output is a terminal and "
                             "NO_COLOR is not set (default: %(default)s)")


def run_show(args: argparse.Namespace) -> int:
    """Run `hf-bpe show`; the text and the output are checked before the tokenizer is loaded."""
    from hf_bpe.cli.eval import check_output_file
    from hf_bpe.common.files import read_small_text, write_text_atomically
    from hf_bpe.evaluation.baselines import resolve_tokenizer
    from hf_bpe.evaluation.viewer import describe_counts, render_ansi, render_html, render_plain, token_spans

    args.text = " ".join(args.text) if args.text else None
    if args.text is not None and args.file is not None:
        raise InputError("give TEXT or --file, not both")
    if args.html is not None:
        check_output_file(args.html, "--html", args.force)
    if args.text is not None:
        text, source = args.text, "text"
    elif args.file is not None:
        text, source = read_small_text(args.file), args.file.name
    elif not sys.stdin.isatty():
        text, source = sys.stdin.read(), "standard input"
    else:
        raise InputError("give the TEXT to show, --file F, or text on standard input")
    named = resolve_tokenizer(args.tokenizer)
    spans = token_spans(named.tokenizer, text)
    counts = describe_counts(spans, text)
    if args.html is not None:
        write_text_atomically(args.html, render_html(spans, text, f"{source} in tokens of {named.name}",
                                                     show_ids=args.ids))
        print(f"wrote {args.html}: {counts} (encoded by {named.engine})", file=sys.stderr)
        return 0
    if use_colour(args.color, sys.stdout):
        sys.stdout.write(render_ansi(spans, show_ids=args.ids) + "\n")
    else:
        sys.stdout.write(render_plain(spans, show_ids=args.ids) + "\n")
    sys.stdout.flush()
    print(f"{named.name} (encoded by {named.engine}): {counts}", file=sys.stderr)
    return 0


def use_colour(choice: str, stream: object) -> bool:
    """Whether to colour: `always`, `never`, or (auto) when `stream` is a terminal, NO_COLOR is unset and TERM is not
    dumb (https://no-color.org).

    >>> import io
    >>> use_colour("auto", io.StringIO()), use_colour("always", io.StringIO())
    (False, True)
    """
    if choice != "auto":
        return choice == "always"
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def _collect_text_after_options(parser: argparse.ArgumentParser) -> None:
    """Let TEXT follow options, as in `hf-bpe show DIR --ids Hello`: argparse fills every positional at the first run
    of them (DIR alone, TEXT empty) and leaves later words unrecognized, so they are taken from the unrecognized
    arguments here (unknown options stay there and are reported as usual)."""
    parse_known_args = parser.parse_known_args

    def parse_known_args_with_text(args: Any = None, namespace: Any = None) -> tuple[argparse.Namespace, list[str]]:
        namespace, extras = parse_known_args(args, namespace)
        namespace.text = [*namespace.text, *(extra for extra in extras if not extra.startswith("-"))]
        return namespace, [extra for extra in extras if extra.startswith("-")]

    parser.parse_known_args = parse_known_args_with_text  # type: ignore[method-assign]
