"""`hf-bpe eval`: compare tokenizers and baselines on corpora (hf_bpe.evaluation.evaluate).

    hf-bpe eval tok/ other-tok/ --corpus valid.txt code.py --baseline gpt2 --json eval.json --plot eval.png

prints a Markdown table (bytes per token, tokens per word, share of the vocabulary used, tokens never used) and the
tokens each tokenizer never used in any corpus; `--json` and `--plot` write the same for machines and as bars.
Corpora given as NAME=FILE (`--corpus en=en.txt de=de.txt`) add the per-language view of
hf_bpe.evaluation.languages (premiums and fairness on parallel text), which `--json` holds and `--plot` draws.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from hf_bpe.cli.options import add_progress_argument, check_workers
from hf_bpe.common.errors import InputError

EVAL_DESCRIPTION = (
    "Encode each corpus (UTF-8 text files) with each tokenizer (hf_bpe directories and --baseline tokenizers) and "
    "report, per tokenizer and corpus: UTF-8 bytes per token (higher is better), tokens per word (whitespace-"
    "separated words; each Chinese, Japanese or Thai character counts as a word), the share of the vocabulary that "
    "occurs, and how many tokens never occur; then the tokens that occur in none of the corpora (candidates for "
    "under-trained tokens). Special tokens in a corpus count as one token each. Large corpora are encoded by "
    "--workers processes. Corpora named by language (--corpus en=en.txt hi=hi.txt), taken to be parallel, add a "
    "per-language report: each language's tokens over the --parity-reference language's (the premium) and each "
    "tokenizer's fairness (the most tokens of a language over the fewest).")


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `hf-bpe eval`."""
    from hf_bpe.cli.card import add_baseline_argument, add_parity_reference_argument
    from hf_bpe.evaluation.plots import PLOTS_HINT

    parser.add_argument("directories", nargs="*", metavar="DIR",
                        help="tokenizer directories saved by hf_bpe (another model's tokenizer directory goes after "
                             "--baseline)")
    parser.add_argument("--corpus", nargs="+", action="extend", required=True, metavar="FILE|NAME=FILE",
                        dest="corpora", help="UTF-8 text files to encode (one or more); NAME=FILE names a language's "
                                             "text, and the named corpora, taken to be parallel, get a per-language "
                                             "report: bytes per token, tokens per word, premium and fairness")
    add_baseline_argument(parser)
    add_parity_reference_argument(parser, "--corpus")
    parser.add_argument("--json", type=Path, metavar="FILE", dest="json_path",
                        help="also write the results as JSON, with the ids of the tokens never used (default: none)")
    parser.add_argument("--plot", type=Path, metavar="FILE.png",
                        help=f"also draw bytes per token per corpus and tokenizer as a PNG (needs matplotlib: "
                             f"{PLOTS_HINT}; default: none)")
    parser.add_argument("--force", action="store_true", help="replace --json and --plot files that exist (default: "
                                                             "refuse)")
    parser.add_argument("--workers", type=int, default=None, metavar="N",
                        help="processes that encode corpora of 4 MiB or more (default: the CPUs this process may use)")
    parser.add_argument("--errors", choices=["strict", "replace"], default="strict",
                        help="invalid UTF-8 in a corpus: stop and name the byte offset (strict, the default), or read "
                             "bad bytes as U+FFFD (replace)")
    add_progress_argument(parser)


def run_eval(args: argparse.Namespace) -> int:
    """Run `hf-bpe eval`; every check (tokenizers, corpora, outputs, matplotlib) comes before the encoding."""
    from hf_bpe.cli.card import chosen_baselines
    from hf_bpe.common.files import write_text_atomically
    from hf_bpe.evaluation.baselines import resolve_baseline
    from hf_bpe.evaluation.evaluate import check_corpora, evaluate, json_report, markdown_report
    from hf_bpe.evaluation.languages import check_parity_reference, language_report, parse_corpus_arguments

    baselines = chosen_baselines(args)
    if not args.directories and not baselines:
        raise InputError("give at least one tokenizer: a DIR or a --baseline")
    check_workers(args.workers)
    corpora = parse_corpus_arguments(args.corpora, "--corpus")
    check_parity_reference(args.parity_reference, [corpus.name for corpus in corpora], "--corpus")
    paths = check_corpora([corpus.path for corpus in corpora])
    for path, flag in ((args.json_path, "--json"), (args.plot, "--plot")):
        if path is not None:
            check_output_file(path, flag, args.force)
    if args.plot is not None:
        from hf_bpe.evaluation.plots import require_matplotlib

        require_matplotlib("--plot")
    tokenizers = [_hf_bpe_directory(directory) for directory in args.directories]
    tokenizers += [resolve_baseline(spec) for spec in dict.fromkeys(baselines)]
    if len({named.name for named in tokenizers}) < len(tokenizers):
        raise InputError("two tokenizers have the same name: " + ", ".join(named.name for named in tokenizers))
    results = evaluate(tokenizers, paths, num_workers=args.workers, errors=args.errors,
                       progress=False if args.no_progress else None)
    languages = language_report(results, [corpus.name for corpus in corpora], args.parity_reference)
    sys.stdout.write(markdown_report(results) + ("" if languages is None else "\n" + languages.markdown()))
    if args.json_path is not None:
        report = json_report(results) | ({} if languages is None else {"languages": languages.as_json()})
        write_text_atomically(args.json_path, json.dumps(report, indent=1) + "\n")
        print(f"wrote {args.json_path}", file=sys.stderr)
    if args.plot is not None:
        from hf_bpe.evaluation.plots import plot_bytes_per_token

        if languages is None:
            plot_bytes_per_token(results, args.plot)
        else:  # the per-language view is what named corpora ask for
            languages.plot(args.plot)
        print(f"wrote {args.plot}", file=sys.stderr)
    return 0


def _hf_bpe_directory(directory: str) -> Any:
    """A DIR that hf_bpe encodes; for one it cannot read that has a tokenizer.json, the error says to give it as a
    baseline, which `tokenizers` encodes."""
    from hf_bpe.evaluation.baselines import resolve_directory

    try:
        return resolve_directory(directory)
    except InputError as error:
        if (Path(directory) / "tokenizer.json").is_file():
            raise InputError(f"{error}; another model's tokenizer directory goes after --baseline, which tokenizers "
                             f"encodes") from None
        raise


def check_output_file(path: Path, flag: str, force: bool) -> None:
    """InputError unless `path` can be written: its folder exists and is writable, and it is new or `force`."""
    from hf_bpe.common.outputs import check_writable

    if path.is_dir():
        raise InputError(f"{flag} {path}: is a directory, expected a file name")
    if path.exists() and not force:
        raise InputError(f"{flag} {path}: exists; pass --force to replace it")
    if not path.parent.resolve().is_dir():
        raise InputError(f"{flag} {path}: no such directory {path.parent}")
    check_writable(path.parent.resolve(), f"{flag} {path}")

