"""`hf-bpe card`: (re)write a tokenizer directory's model card, with compression on evaluation corpora against
baselines, under-trained tokens and plots (hf_bpe.evaluation.card).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from hf_bpe.cli.options import add_progress_argument
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
    from hf_bpe.evaluation.card import DEFAULT_BASELINES
    from hf_bpe.evaluation.plots import PLOTS_HINT

    parser.add_argument("directory", type=Path, metavar="DIR", help="a tokenizer directory saved by hf_bpe")
    parser.add_argument("--eval-corpus", action="append", default=[], metavar="F|NAME=F", dest="eval_corpora",
                        help="UTF-8 text file to report bytes per token, tokens per word and vocabulary use on; "
                             "repeat for several; NAME=F names a language's text, and the named files, taken to be "
                             "parallel, get a per-language section: premium and fairness (default: none)")
    add_baseline_argument(parser, default=DEFAULT_BASELINES)
    add_parity_reference_argument(parser, "--eval-corpus")
    parser.add_argument("--no-plots", action="store_true",
                        help=f"do not draw the plots (default: drawn when matplotlib is installed: {PLOTS_HINT})")
    parser.add_argument("--language", action="append", default=[], metavar="L",
                        help="language code for the card's metadata (ISO 639-1, e.g. en); repeat for several")
    parser.add_argument("--title", help="the card's heading (default: 'Byte-level BPE tokenizer')")
    add_card_metadata_arguments(parser)
    add_progress_argument(parser)


def add_baseline_argument(parser: argparse.ArgumentParser, default: Sequence[str] = ()) -> None:
    """`--baseline`, the tokenizers `hf-bpe card` and `hf-bpe eval` compare with."""
    parser.add_argument("--baseline", nargs="+", action="extend", dest="baselines", metavar="B",
                        help="tokenizers to compare with: gpt2 (shipped), cl100k=FILE or o200k=FILE (a tiktoken "
                             "file you give; nothing is downloaded), or a HuggingFace tokenizer directory (tokenizers "
                             "encodes its tokenizer.json); one or more, or 'none' (default: "
                             + (" ".join(default) or "none") + ")")


def add_parity_reference_argument(parser: argparse.ArgumentParser, flag: str) -> None:
    """`--parity-reference`, the language that the premiums of `hf-bpe card` and `hf-bpe eval` compare with."""
    parser.add_argument("--parity-reference", metavar="NAME",
                        help=f"the language whose token count the others' are divided by (the premium), one of the "
                             f"names of {flag} NAME=FILE (default: the first name)")


def chosen_baselines(args: argparse.Namespace, default: Sequence[str] = ()) -> list[str]:
    """The --baseline values, or `default` when none was given; 'none' clears the list."""
    names = list(default) if args.baselines is None else list(args.baselines)
    return [] if "none" in names else names


def run_card(args: argparse.Namespace) -> int:
    """Run `hf-bpe card` with parsed arguments; InputError is left to the caller to report."""
    from hf_bpe.evaluation.card import DEFAULT_BASELINES
    from hf_bpe.evaluation.languages import parse_corpus_arguments

    corpora = parse_corpus_arguments(args.eval_corpora, "--eval-corpus")
    path = write_model_card(args.directory, eval_corpora=[corpus.path for corpus in corpora if corpus.name is None],
                            eval_languages={corpus.name: corpus.path for corpus in corpora if corpus.name is not None},
                            parity_reference=args.parity_reference, language=args.language,
                            title=args.title, license=args.license, datasets=args.dataset_names,
                            baselines=chosen_baselines(args, DEFAULT_BASELINES), plots=not args.no_plots,
                            progress=False if args.no_progress else None)
    print(f"wrote {path}", file=sys.stderr)
    return 0
