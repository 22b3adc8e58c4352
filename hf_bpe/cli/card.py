"""`hf-bpe card`: (re)write a tokenizer directory's model card, with compression on evaluation corpora.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hf_bpe.evaluation.card import write_model_card


def add_card_metadata_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """`--license` and `--dataset-name`, the model-card metadata options of `hf-bpe train` and `hf-bpe card`."""
    parser.add_argument("--license", metavar="ID",
                        help="the license of the tokenizer for the card's metadata, a Hub license id such as "
                             "apache-2.0, mit or cc-by-4.0 (default: none; hf-bpe card keeps what hf-bpe train "
                             "recorded)")
    parser.add_argument("--dataset-name", action="append", dest="dataset_names", metavar="NAME",
                        help="a Hub dataset id the tokenizer was trained on, for the card's `datasets` metadata; "
                             "repeat for several (default: the --dataset of hf-bpe train when it is a Hub name; hf-bpe "
                             "card keeps what hf-bpe train recorded)")



def add_card_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `hf-bpe card`."""
    parser.add_argument("directory", type=Path, metavar="DIR", help="a tokenizer directory saved by hf_bpe")
    parser.add_argument("--eval-corpus", action="append", default=[], type=Path, metavar="F", dest="eval_corpora",
                        help="UTF-8 text file to report bytes per token on; repeat for several")
    parser.add_argument("--language", action="append", default=[], metavar="L",
                        help="language code for the card's metadata (ISO 639-1, e.g. en); repeat for several")
    parser.add_argument("--title", help="the card's heading (default: 'Byte-level BPE tokenizer')")
    add_card_metadata_arguments(parser)


def run_card(args: argparse.Namespace) -> int:
    """Run `hf-bpe card` with parsed arguments; InputError is left to the caller to report."""
    path = write_model_card(args.directory, eval_corpora=args.eval_corpora, language=args.language,
                            title=args.title, license=args.license, datasets=args.dataset_names)
    print(f"wrote {path}", file=sys.stderr)
    return 0
