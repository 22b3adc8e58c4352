"""The `hf-bpe` command line.

    hf-bpe train [INPUT ...] --out DIR        train on text files (default: a small corpus shipped in the package)
    hf-bpe tokenize-dataset --tokenizer DIR --dataset NAME_OR_PATH --split S --out OUT   write OUT/S.bin token arrays
    hf-bpe card DIR [--eval-corpus F ...]     (re)write the model card of a tokenizer directory

Every user error (a missing file, invalid UTF-8, an existing output directory) is one line on stderr and exit code 2;
nothing half-written is left behind.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from hf_bpe.errors import InputError

DEFAULT_SPECIAL_TOKENS = ["<|endoftext|>"]
DEFAULT_VOCAB_SIZE = 8192


def shipped_corpus() -> Path:
    """The small English corpus (Python documentation, PSF licence) that ships inside the package."""
    return Path(str(resources.files("hf_bpe") / "corpora" / "python_docs_sample.txt"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except (InputError, ValueError, TypeError) as error:
        print(f"hf-bpe {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"hf-bpe {args.command}: interrupted; nothing was written", file=sys.stderr)
        return 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hf-bpe",
        description="Train byte-level BPE tokenizers exactly and fast, and use them across the HuggingFace ecosystem.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    from hf_bpe.card import add_card_arguments, run_card
    from hf_bpe.data import add_tokenize_dataset_arguments, run_tokenize_dataset

    for name, add_arguments, run, help, description in [
        ("train", add_train_arguments, run_train,
         "train a tokenizer and save it as a HuggingFace tokenizer directory",
         "Train a byte-level BPE tokenizer (GPT-2 pre-tokenization) on text files and save a directory that loads "
         "with AutoTokenizer.from_pretrained, tokenizers.Tokenizer.from_file and hf_bpe.HFBPETokenizer.from_pretrained."),
        ("tokenize-dataset", add_tokenize_dataset_arguments, run_tokenize_dataset,
         "tokenize a HuggingFace dataset into a flat uint16/uint32 token array (OUT/SPLIT.bin + SPLIT.json)",
         "Encode every document of a dataset split with an hf_bpe tokenizer directory and write the ids, each "
         "document followed by the end-of-text id, to OUT/SPLIT.bin (nanoGPT style), with metadata in "
         "OUT/SPLIT.json. Read it back with hf_bpe.data.load_tokens(OUT, SPLIT)."),
        ("card", add_card_arguments, run_card,
         "write the model card (README.md) of a tokenizer directory",
         "Write DIR/README.md in the HuggingFace model-card format: training corpus and time, vocabulary, "
         "compression (bytes per token) on evaluation corpora, example tokenizations, how to load it."),
    ]:
        command = commands.add_parser(name, help=help, description=description)
        add_arguments(command)
        command.set_defaults(run=run)
    return parser


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="*", metavar="INPUT", type=Path,
                        help="UTF-8 text files to train on; documents may be separated by special tokens. "
                             "Without any, trains on a 400 KB sample of the Python docs shipped with hf_bpe.")
    parser.add_argument("--out", required=True, type=Path, metavar="DIR",
                        help="directory to write (vocab.json, merges.txt, tokenizer.json, tokenizer_config.json, "
                             "model card); it must not exist or be empty unless --force is given")
    parser.add_argument("--vocab-size", type=int, default=DEFAULT_VOCAB_SIZE, metavar="N",
                        help="final vocabulary size, counting the 256 byte tokens and the special tokens "
                             "(default: %(default)s)")
    parser.add_argument("--special-token", action="append", dest="special_tokens", metavar="TOK",
                        help="a special token: splits documents, never merged, gets an id after the merges; "
                             "repeat for several (the first is the end-of-text token). "
                             f"Default: {' '.join(DEFAULT_SPECIAL_TOKENS)}")
    parser.add_argument("--no-special-tokens", action="store_true", help="train without any special token")
    parser.add_argument("--workers", type=int, default=None, metavar="N",
                        help="processes for pre-tokenization (default: all cores)")
    parser.add_argument("--errors", choices=["strict", "replace"], default="strict",
                        help="what to do with invalid UTF-8: stop and name the byte offset (strict, the default), or "
                             "replace bad bytes with U+FFFD")
    parser.add_argument("--force", action="store_true", help="replace --out if it exists and is not empty")
    parser.add_argument("--no-progress", action="store_true", help="do not show progress bars")


def run_train(args: argparse.Namespace) -> int:
    from hf_bpe import __version__
    from hf_bpe.card import TRAINING_INFO_FILE, write_model_card
    from hf_bpe.hf_export import save_tokenizer_directory
    from hf_bpe.train import train_bpe

    special_tokens = [] if args.no_special_tokens else (args.special_tokens or DEFAULT_SPECIAL_TOKENS)
    inputs = args.inputs or [shipped_corpus()]
    out: Path = args.out
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not args.force:
        raise InputError(f"{out}: directory exists and is not empty (use --force to replace it)")
    if args.workers is not None and args.workers < 1:
        raise InputError(f"--workers must be at least 1, got {args.workers}")

    start = time.perf_counter()
    vocab, merges = train_bpe(inputs, args.vocab_size, special_tokens, num_workers=args.workers,
                              errors=args.errors, progress=False if args.no_progress else None, verbose=True)
    training_seconds = time.perf_counter() - start
    if len(vocab) < args.vocab_size:
        print(f"hf-bpe train: note: no pairs left to merge, so the vocabulary has {len(vocab)} tokens, "
              f"fewer than the {args.vocab_size} asked for", file=sys.stderr)

    training_info = {
        "corpus_files": [{"path": str(path), "bytes": Path(path).stat().st_size} for path in inputs],
        "corpus_bytes": sum(Path(path).stat().st_size for path in inputs),
        "vocab_size": len(vocab),
        "special_tokens": special_tokens,
        "training_seconds": round(training_seconds, 3),
        "num_workers": args.workers or os.cpu_count() or 1,
        "hardware": describe_hardware(),
        "python": platform.python_version(),
        "hf_bpe_version": __version__,
        "date": datetime.date.today().isoformat(),
    }
    with staging_directory(out, replace=args.force) as staging:
        save_tokenizer_directory(staging, vocab, merges, special_tokens)
        (staging / TRAINING_INFO_FILE).write_text(json.dumps(training_info, indent=2) + "\n", encoding="utf-8")
        write_model_card(staging, training_info=training_info)
    print(f"hf-bpe train: wrote {out} ({len(vocab)} tokens: 256 bytes, {len(merges)} merges, "
          f"{len(special_tokens)} special) in {training_seconds:.1f} s", file=sys.stderr)
    return 0


@contextmanager
def staging_directory(target: Path, replace: bool = False) -> Iterator[Path]:
    """Build a directory under a temporary name next to `target` and move it into place only on success.

    On any error the temporary directory is removed and `target` is left as it was. An existing `target` (empty, or
    anything with `replace`) is swapped out and deleted only after the new one is in place.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.tmp-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if target.exists():
        if not replace and any(target.iterdir()):
            shutil.rmtree(staging, ignore_errors=True)
            raise InputError(f"{target}: directory exists and is not empty (use --force to replace it)")
        old = target.parent / f".{target.name}.old-{os.getpid()}"
        os.replace(target, old)
        os.replace(staging, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(staging, target)


def describe_hardware() -> str:
    """A one-line description of this machine for model cards, e.g. 'AMD EPYC 7B13, 2 cores, 24 GiB RAM'."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
        memory = f", {memory_gib:.0f} GiB RAM"
    except (ValueError, OSError, AttributeError):
        memory = ""
    return f"{cpu}, {os.cpu_count()} cores{memory}"


if __name__ == "__main__":
    sys.exit(main())
