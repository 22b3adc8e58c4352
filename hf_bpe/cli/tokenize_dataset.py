"""`hf-bpe tokenize-dataset`: its options, checked against each other before any work, and the run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hf_bpe.cli.options import add_dataset_arguments, add_engine_arguments, check_engine_arguments
from hf_bpe.common.errors import InputError
from hf_bpe.data.engines import tokenize_dataset_on


def add_tokenize_dataset_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `hf-bpe tokenize-dataset` and `scripts/tokenize_dataset.py`."""
    parser.add_argument("--tokenizer", required=True, metavar="DIR",
                        help="tokenizer directory saved by hf_bpe (vocab.json, merges.txt, tokenizer_config.json)")
    add_dataset_arguments(parser, required=True)
    parser.add_argument("--out", required=True, metavar="OUT",
                        help="output directory for S.bin and S.json (created if needed); other splits may already be "
                             "there, but an existing S.bin is replaced only with --force")
    parser.add_argument("--force", action="store_true", help="replace OUT/S.bin if it exists (default: refuse)")
    parser.add_argument("--num-proc", type=int, default=None, metavar="N",
                        help="processes for datasets.map (with --streaming: for the encoder pool); local engine only "
                             "(default: 1)")
    parser.add_argument("--append-eot", action=argparse.BooleanOptionalAction, default=True,
                        help="append the end-of-text id (the eos token, else the first special token) after every "
                             "document (default: on)")
    parser.add_argument("--allow-special", action="store_true",
                        help="encode special-token strings inside documents as their ids, as tok(document) does in "
                             "transformers (default: off: they are encoded as ordinary text, like nanoGPT's "
                             "encode_ordinary, so the only end-of-text ids are the appended document boundaries)")
    parser.add_argument("--batch-size", type=int, default=1000, metavar="B",
                        help="documents per encoded batch (default: %(default)s)")
    add_engine_arguments(parser)
    parser.add_argument("--resume", action="store_true",
                        help="--engine ray only: keep the shards of an interrupted run (Ctrl-C, a lost node, a "
                             "killed driver) whose checksums are recorded and encode only the rest; a local run "
                             "restarts from zero (default: off)")
    parser.add_argument("--concatenate", action="store_true",
                        help="--engine ray only: also join the shards into one OUT/S.bin (default: off: "
                             "load_tokens reads the shards as one array)")
    parser.add_argument("--no-progress", action="store_true",
                        help="do not show progress bars (default: shown; with --engine ray, text bytes encoded, "
                             "throughput, shards and documents read)")


def run_tokenize_dataset(args: argparse.Namespace) -> int:
    """Run `hf-bpe tokenize-dataset` with parsed arguments; InputError is left to the caller to report."""
    # The flags are checked against each other before ray is needed: a wrong combination is reported the same way
    # whether ray is installed or not.
    if args.engine == "ray":
        for flag, given in (("--streaming", args.streaming), ("--num-proc", args.num_proc is not None),
                            ("--cache-dir", args.cache_dir is not None)):
            if given:
                raise InputError(f"{flag} is for --engine local; with --engine ray, the driver reads the dataset "
                                 f"and streams it to the actors")
    check_engine_arguments(args)
    options = dict(split=args.split, text_column=args.text_column, data_files=args.data_files, config=args.config,
                   append_eot=args.append_eot, allow_special=args.allow_special, batch_size=args.batch_size,
                   force=args.force, progress=not args.no_progress)
    if args.engine == "ray":
        options.update(ray_address=args.ray_address, resume=args.resume, concatenate=args.concatenate)
    else:
        for flag, given in (("--resume", args.resume), ("--concatenate", args.concatenate)):
            if given:
                raise InputError(f"{flag} needs --engine ray (the local engine writes one {args.split}.bin, "
                                 f"from zero each run: docs/cluster.md says why)")
        options.update(num_proc=args.num_proc or 1, streaming=args.streaming, cache_dir=args.cache_dir)
    metadata = tokenize_dataset_on(args.engine, args.tokenizer, args.dataset, args.out, **options)
    print(f"wrote {Path(args.out) / args.split}: {metadata['num_tokens']:,} {metadata['dtype']} tokens from "
          f"{metadata['num_documents']:,} documents", file=sys.stderr)
    return 0
