"""The `hf-bpe` command line.

    hf-bpe train [INPUT ...] --out DIR        train on text files (default: a small corpus shipped in the package)
    hf-bpe train --dataset NAME_OR_PATH --out DIR   train on a dataset's text column, one document per row
    hf-bpe tokenize-dataset --tokenizer DIR --dataset NAME_OR_PATH --split S --out OUT   write OUT/S.bin token arrays
    hf-bpe card DIR [--eval-corpus F ...]     (re)write the model card of a tokenizer directory

Every user error (a missing file, invalid UTF-8, an existing output directory, an output that cannot be written, a
full disk) is one line on stderr and exit code 2, Ctrl-C is exit code 130; nothing half-written is left behind.
Outputs are checked before long work starts (see hf_bpe.common.outputs).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from hf_bpe.common.errors import InputError, describe_os_error


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return run_reporting_errors(f"hf-bpe {args.command}", args.run, args)


def run_reporting_errors(prefix: str, run: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """`run(args)`, with every error a user can cause (bad input, an unwritable or full output, Ctrl-C) reported as
    one line on stderr and exit code 2 (130 after Ctrl-C) instead of a traceback."""
    interrupted = f"{prefix}: interrupted; nothing was written"
    try:
        return run(args)
    except KeyboardInterrupt:
        print(interrupted, file=sys.stderr)
        return 130
    except Exception as error:
        if _raised_while_interrupted(error):  # e.g. a pool's TimeoutError while it shuts down after Ctrl-C
            print(interrupted, file=sys.stderr)
            return 130
        if isinstance(error, (InputError, ValueError, TypeError)):
            print(f"{prefix}: error: {error}", file=sys.stderr)
            return 2
        if isinstance(error, OSError):
            print(f"{prefix}: error: {describe_os_error(error)}", file=sys.stderr)
            return 2
        raise


def _raised_while_interrupted(error: BaseException) -> bool:
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__context__
    return False


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hf-bpe",
        description="Train byte-level BPE tokenizers exactly and fast, and use them across the HuggingFace ecosystem.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    from hf_bpe.cli.card import add_card_arguments, run_card
    from hf_bpe.cli.tokenize_dataset import add_tokenize_dataset_arguments, run_tokenize_dataset
    from hf_bpe.cli.train import add_train_arguments, run_train

    for name, add_arguments, run, help, description in [
        ("train", add_train_arguments, run_train,
         "train a tokenizer and save it as a HuggingFace tokenizer directory",
         "Train a byte-level BPE tokenizer (GPT-2 pre-tokenization) on text files and save a directory that "
         "loads with AutoTokenizer.from_pretrained, tokenizers.Tokenizer.from_file and "
         "hf_bpe.HFBPETokenizer.from_pretrained."),
        ("tokenize-dataset", add_tokenize_dataset_arguments, run_tokenize_dataset,
         "tokenize a HuggingFace dataset into a flat uint16/uint32 token array (OUT/SPLIT.bin + SPLIT.json)",
         "Encode every document of a dataset split with an hf_bpe tokenizer directory and write the ids, each "
         "document followed by the end-of-text id, to OUT/SPLIT.bin (nanoGPT style), with metadata in "
         "OUT/SPLIT.json. Read it back with hf_bpe.data.load_tokens(OUT, SPLIT). A special-token string inside a "
         "document (a literal <|endoftext|>) is encoded as text, like nanoGPT's encode_ordinary, so the only "
         "end-of-text ids are the document boundaries; --allow-special encodes it as its id, as tok(document) "
         "does. An existing OUT/SPLIT.bin is replaced only with --force; other splits may share OUT."),
        ("card", add_card_arguments, run_card,
         "write the model card (README.md) of a tokenizer directory",
         "Write DIR/README.md in the HuggingFace model-card format: training corpus and time, vocabulary, "
         "compression (bytes per token) on evaluation corpora, example tokenizations, how to load it."),
    ]:
        command = commands.add_parser(name, help=help, description=description)
        add_arguments(command)
        command.set_defaults(run=run)
    return parser

