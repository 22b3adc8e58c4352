"""`hf-bpe train` on named sources: `NAME=PATH` inputs, their weights, and parity-aware training.

    hf-bpe train en=en.txt hi=hi.txt el=el.txt --sampling-temperature 3.3 --out tok
    hf-bpe train en=en.txt hi=hi.txt --parity --dev en=dev.en --dev hi=dev.hi --out tok

Every option is checked, and every file of the sources and dev sets opened, before counting starts
(`plan_sources`); then the sources are counted in one pass (`hf_bpe.train.counting.sources`), the dev sets in
another, and the merge loop runs on the sources' counts times their integer weights added up
(`hf_bpe.train.counting.weights`) or, with `--parity`, parity-aware on each source's
(`hf_bpe.train.parity.train_parity_from_counts`). What the training record adds: `sources` (files, bytes and
distinct pre-tokens of each), `weights` (the rule, the real and the integer weights) and `parity` (the options, and
each dev set's files).
"""

from __future__ import annotations

import argparse
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hf_bpe.common.errors import InputError

PARITY_VARIANTS = ("base", "window")


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of named sources (INPUTs given as NAME=PATH) and of parity-aware training."""
    group = parser.add_argument_group(
        "named sources", "INPUTs given as NAME=PATH (a language, a domain; PATH a file or a glob) are counted per "
                         "source, and can be weighted or trained parity-aware. A NAME is a letter or digit, then "
                         "letters, digits, _ . + -; an INPUT that is an existing file is always a path.")
    group.add_argument("--weight", action="append", default=[], metavar="NAME=W", dest="weights",
                       help="multiply the counts of source NAME by W, a non-negative number (default 1; 0 leaves it "
                            "out); real weights become integers by a recorded rule; repeat for several")
    group.add_argument("--sampling-temperature", type=float, metavar="T",
                       help="weigh each source as mT5 and XLM-R sample: (n/N)^(1/T) / (n/N), n its bytes of text, N "
                            "all sources' (T > 1 favours the small ones); not with --weight")
    group.add_argument("--parity", action="store_true",
                       help="parity-aware training (Foroutan et al. 2025): each merge is the best pair of the source "
                            "worst compressed so far, by --dev or --ratio (neither: by its own training text)")
    group.add_argument("--dev", action="append", default=[], metavar="NAME=PATH",
                       help="with --parity, source NAME's parallel dev set (a file or a glob); one for every source")
    group.add_argument("--ratio", action="append", default=[], metavar="NAME=R", dest="ratios",
                       help="with --parity, source NAME's target compression ratio (R > 0; only the ratios relative "
                            "to each other count); one for every source, not with --dev")
    group.add_argument("--parity-variant", choices=PARITY_VARIANTS,
                       help="base: the worst-served source each step; window: the worst served among those chosen "
                            "at most ALPHA/(number of sources) of the last WINDOW_SIZE steps (default: base)")
    group.add_argument("--window-size", type=int, metavar="N", help="the window variant's steps (default: 100)")
    group.add_argument("--alpha", type=float, metavar="A", help="the window variant's share (default: 2.0)")
    group.add_argument("--global-merges", type=int, metavar="K",
                       help="with --parity, make the first K merges from all sources' counts added up (default: 0)")


@dataclass
class SourcePlan:
    """Named sources as checked before counting: their files and sizes, integer weights, parity options and dev sets;
    after `count`, each source's counts (and the dev sets')."""

    paths: dict[str, list[str]]
    file_sizes: dict[str, list[int]]
    weights: dict[str, int]
    weights_record: dict[str, Any]
    parity: dict[str, Any] | None = None
    dev_paths: dict[str, list[str]] | None = None
    counts: dict[str, Counter[bytes]] = field(default_factory=dict)
    dev_counts: dict[str, Counter[bytes]] | None = None
    distinct: int = 0

    @property
    def files(self) -> list[str]:
        return [path for paths in self.paths.values() for path in paths]

    def count(self, args: argparse.Namespace, special_tokens: list[str], progress: bool | None
              ) -> tuple[Counter[bytes], dict[str, Any]]:
        """Count the sources (and dev sets): (the weighted counts added up for plain training, empty for parity, whose
        counts stay in `counts`), and what the training record says about them."""
        from hf_bpe.train.counting.count import CountStats, counting_engine
        from hf_bpe.train.counting.sources import count_sources_and_dev_sets
        from hf_bpe.train.counting.weights import pooled_counts

        stats = CountStats() if args.errors == "replace" else None
        options = {"num_workers": args.workers, "errors": args.errors, "progress": progress, "pattern": args.pattern,
                   "engine": counting_engine(args.engine, args.ray_address)}
        self.counts, self.dev_counts = count_sources_and_dev_sets(self.paths, self.dev_paths, special_tokens,
                                                                  stats=stats, **options)
        sources = {name: {"files": [{"path": path, "bytes": size} for path, size in zip(paths, self.file_sizes[name])],
                          "bytes": sum(self.file_sizes[name]), "distinct_pretokens": len(self.counts[name])}
                   for name, paths in self.paths.items()}
        info: dict[str, Any] = {
            "corpus_files": [file for source in sources.values() for file in source["files"]],
            "corpus_bytes": sum(source["bytes"] for source in sources.values()),
            "errors": args.errors,
            "sources": sources,
            "weights": self.weights_record,
            "parity": None if self.parity is None else {**self.parity, "dev_sets": None if self.dev_paths is None else {
                name: {"files": paths, "distinct_pretokens": len(self.dev_counts[name])}  # type: ignore[index]
                for name, paths in self.dev_paths.items()}},
        }
        if stats is not None:
            first = stats.first_replacement
            info["replaced_bytes"] = stats.replaced_bytes
            info["first_replacement"] = None if first is None else {"path": str(first[0]), "byte_offset": first[1]}
        if self.parity is not None:
            self.distinct = len(set().union(*self.counts.values()))
            return Counter(), info
        pooled = pooled_counts(self.counts, self.weights, consume=True)
        self.distinct = len(pooled)
        return pooled, info

    def train_parity(self, vocab_size: int, special_tokens: list[str], token_counts: Any, **options: Any
                     ) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
        """Parity-aware training on the counted sources; `token_counts` receives each source's token counts times its
        weight (the merge loop's final segmentation)."""
        from hf_bpe.train.parity import train_parity_from_counts

        parity = self.parity or {}
        weights = None if set(self.weights.values()) == {1} else self.weights
        return train_parity_from_counts(
            self.counts, vocab_size, special_tokens, dev=self.dev_counts, ratios=parity.get("ratios"),
            variant=parity["variant"], window_size=parity["window_size"], alpha=parity["alpha"],
            global_merges=parity["global_merges"], weights=weights, token_counts=token_counts,
            consume_counts=True, **options)


def plan_sources(args: argparse.Namespace, dataset: Any) -> SourcePlan | None:
    """The named sources of `hf-bpe train`'s INPUTs, every option of theirs checked and every file opened (None for
    bare INPUTs, a dataset or the shipped corpus, once the options that need names are found absent). InputError for
    any bad input, naming the option and value."""
    from hf_bpe.train.counting.sources import check_source_files, parse_sources
    from hf_bpe.train.counting.weights import parse_named_numbers, source_weights

    sources = parse_sources(args.inputs) if args.inputs and dataset is None else None
    _check_parity_flags(args, sources)
    if sources is None:
        return None
    for flag, given in (("--extend", args.extend), ("--superword-from", args.superword_from)):
        if given is not None:
            raise InputError(f"{flag} trains on one pooled corpus: give bare INPUT paths, not NAME=PATH")
    names = list(sources)
    weights = parse_named_numbers(args.weights, "--weight", names) if args.weights else None
    if weights is not None and args.sampling_temperature is not None:
        raise InputError("give --weight or --sampling-temperature, not both")
    if args.sampling_temperature is not None and not 0 < args.sampling_temperature < float("inf"):
        raise InputError(f"--sampling-temperature must be a positive number, got {args.sampling_temperature}")
    parity, dev_paths = _parity_options(args, names) if args.parity else (None, None)
    file_sizes = check_source_files(sources)
    if dev_paths is not None:
        check_source_files(dev_paths, "dev set")
    sizes = {name: sum(file_sizes[name]) for name in names}
    try:
        integers, record = source_weights(sizes, weights, args.sampling_temperature)
    except InputError as error:
        raise InputError(str(error).replace("every source's weight is 0", "every --weight is 0")) from None
    return SourcePlan(sources, file_sizes, integers, record, parity, dev_paths)


def _check_parity_flags(args: argparse.Namespace, sources: dict[str, list[str]] | None) -> None:
    """InputError for options given without what they need: names, or --parity."""
    if sources is None:
        for flag, given in (("--parity", args.parity), ("--weight", args.weights),
                            ("--sampling-temperature", args.sampling_temperature is not None)):
            if given:
                raise InputError(f"{flag} needs named sources: give the INPUTs as NAME=PATH (e.g. en=en.txt "
                                 "de=de.txt)")
    if not args.parity:
        for flag, given in (("--dev", args.dev), ("--ratio", args.ratios), ("--parity-variant", args.parity_variant),
                            ("--window-size", args.window_size), ("--alpha", args.alpha),
                            ("--global-merges", args.global_merges)):
            if given:
                raise InputError(f"{flag} needs --parity")
    elif args.parity_variant != "window":
        for flag, given in (("--window-size", args.window_size), ("--alpha", args.alpha)):
            if given is not None:
                raise InputError(f"{flag} needs --parity-variant window")


def _parity_options(args: argparse.Namespace, names: list[str]) -> tuple[dict[str, Any], dict[str, list[str]] | None]:
    """The parity options as the training record keeps them, and the dev sets' files in the sources' order."""
    from hf_bpe.train.counting.sources import parse_sources
    from hf_bpe.train.counting.weights import parse_named_numbers

    if args.dev and args.ratios:
        raise InputError("give --dev or --ratio, not both")
    window_size = 100 if args.window_size is None else args.window_size
    alpha = 2.0 if args.alpha is None else args.alpha
    if window_size < 1:
        raise InputError(f"--window-size must be at least 1, got {window_size}")
    if not 0 < alpha < float("inf"):
        raise InputError(f"--alpha must be a positive number, got {alpha}")
    global_merges = args.global_merges or 0
    if global_merges < 0:
        raise InputError(f"--global-merges must be at least 0, got {global_merges}")
    ratios = parse_named_numbers(args.ratios, "--ratio", names, positive=True) if args.ratios else None
    dev = None
    if args.dev:
        for value in args.dev:
            name = value.partition("=")[0]
            if "=" not in value or name not in names:
                raise InputError(f"--dev {value}: no source is named {name} (the sources: {', '.join(names)})")
        dev = parse_sources(args.dev, "--dev")
        if dev is None:  # every value is an existing file's name
            raise InputError(f"--dev {args.dev[0]}: give NAME=PATH (this is the name of a file)")
    for given, flag in ((ratios, "--ratio"), (dev, "--dev")):
        missing = [name for name in names if given is not None and name not in given]
        if missing:
            raise InputError(f"{flag}: none for source {missing[0]} (give one for every source: "
                             f"{', '.join(names)})")
    parity = {"variant": args.parity_variant or "base", "window_size": window_size, "alpha": alpha,
              "global_merges": global_merges, "ratios": None if ratios is None else {name: ratios[name]
                                                                                   for name in names},
              "chooses_by": "dev sets" if dev else "ratios" if ratios else "training text"}
    return parity, None if dev is None else {name: dev[name] for name in names}


def named_inputs(plan: SourcePlan | None, inputs: Sequence[str | os.PathLike[str]]) -> list[Any]:
    """The files training reads: the sources' files, or the INPUTs as given."""
    return list(inputs) if plan is None else list(plan.files)
