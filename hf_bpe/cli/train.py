"""`hf-bpe train`: its options, checked before any work; counting the corpus with the chosen engine; the merge
loop; and the tokenizer directory, built under a temporary name and moved into place when complete.
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
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any

from hf_bpe.cli.options import add_progress_argument, check_workers
from hf_bpe.common.errors import InputError, describe_os_error
from hf_bpe.common.parallel import peak_memory_bytes, seconds_since_start

DEFAULT_SPECIAL_TOKENS = ["<|endoftext|>"]
DEFAULT_VOCAB_SIZE = 8192


def shipped_corpus() -> Path:
    """The small English corpus (Python documentation, PSF licence) that ships inside the package."""
    return Path(str(resources.files("hf_bpe") / "corpora" / "python_docs_sample.txt"))


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    from hf_bpe.cli.options import add_dataset_arguments, add_engine_arguments

    # str, not Path: an fsspec URL such as s3://bucket/corpus.txt must keep its "//".
    parser.add_argument("inputs", nargs="*", metavar="INPUT", type=str,
                        help="UTF-8 text files (or fsspec URLs such as s3://bucket/corpus.txt) to train on; documents "
                             "may be separated by special tokens. NAME=PATH names a source (see named sources "
                             "below): then every INPUT must be named. "
                             "Without any (and without --dataset), trains on a 400 KB sample of the Python docs "
                             "shipped with hf_bpe.")
    parser.add_argument("--out", required=True, type=Path, metavar="DIR",
                        help="directory to write (vocab.json, merges.txt, tokenizer.json, tokenizer_config.json, "
                             "model card); it must not exist or be empty unless --force is given, and is checked to "
                             "be writable before training starts")
    parser.add_argument("--vocab-size", type=int, default=DEFAULT_VOCAB_SIZE, metavar="N",
                        help="final vocabulary size, counting the 256 byte tokens and the special tokens "
                             "(default: %(default)s)")
    parser.add_argument("--special-token", action="append", dest="special_tokens", metavar="TOK",
                        help="a special token: splits documents, never merged, gets an id after the merges; "
                             "repeat for several (the first is the end-of-text token). "
                             f"Default: {' '.join(DEFAULT_SPECIAL_TOKENS)}")
    parser.add_argument("--no-special-tokens", action="store_true", help="train without any special token")
    parser.add_argument("--pad-token", metavar="TOK",
                        help="the tokenizer's pad token (pad_token in tokenizer_config.json); if it is not one of "
                             "the special tokens it is added as one, after them, so it counts in --vocab-size "
                             "(default: none; transformers users often set tok.pad_token = tok.eos_token instead)")
    parser.add_argument("--pattern", metavar="NAME_OR_REGEX",
                        help="the pre-tokenization pattern: gpt2 (the default), cl100k (or gpt4), o200k, llama3, or "
                             "regex text as tiktoken and tokenizers read it; kept in tokenizer.json, the training "
                             "record and the card")
    parser.add_argument("--extend", metavar="BASE",
                        help="continue training from the merges of BASE: a tokenizer directory (hf_bpe's, HF's, one "
                             "made by hf-bpe convert from a tiktoken file, or GPT-2's bare vocab.json and merges.txt), "
                             "gpt2, or cl100k=PATH / o200k=PATH. Every BASE id and merge is kept, the new tokens take "
                             "the ids after BASE's largest, and --vocab-size counts BASE's tokens too; the pattern and "
                             "special tokens are BASE's")
    parser.add_argument("--superword-from", type=int, metavar="T",
                        help="SuperBPE: train up to T tokens (counted as --vocab-size counts them) with --pattern, "
                             "then count the corpus again with --superword-pattern and go on learning superword "
                             "tokens, which bridge spaces, up to --vocab-size; the tokenizer is saved with the "
                             "superword pattern. With --extend BASE, BASE's first T tokens (its bytes, first merges "
                             "and special tokens) are stage 1 instead; T = BASE's size keeps every BASE id")
    parser.add_argument("--superword-pattern", metavar="NAME_OR_REGEX",
                        help="SuperBPE's stage-2 pattern (default: superword, the published one: pre-tokens are cut "
                             "only at digit groups of three and special tokens)")
    parser.add_argument("--min-frequency", type=int, default=0, metavar="N",
                        help="stop when the most frequent pair occurs fewer than N times (HF BpeTrainer's "
                             "min_frequency; default: %(default)s)")
    parser.add_argument("--max-token-length", type=int, default=None, metavar="N",
                        help="make no token of N bytes or more, except pairs of single bytes (HF BpeTrainer's "
                             "max_token_length, which it checks with <; default: no limit)")
    parser.add_argument("--workers", type=int, default=None, metavar="N",
                        help="processes for pre-tokenization (default: the CPUs this process may use)")
    parser.add_argument("--errors", choices=["strict", "replace"], default="strict",
                        help="what to do with invalid UTF-8 in INPUT files: stop and name the byte offset (strict, "
                             "the default), or replace bad bytes with U+FFFD and report how many were replaced")
    add_engine_arguments(parser)
    from hf_bpe.cli.train_sources import add_source_arguments

    add_source_arguments(parser)
    dataset_options = parser.add_argument_group(
        "training on a dataset", "Instead of INPUT files, the text column of a HuggingFace dataset split, each row "
                                 "one document (the same options as tokenize-dataset).")
    add_dataset_arguments(dataset_options, required=False)
    from hf_bpe.cli.card import add_card_metadata_arguments

    add_card_metadata_arguments(parser.add_argument_group("model card"))
    parser.add_argument("--force", action="store_true", help="replace --out if it exists and is not empty")
    parser.add_argument("--verbose", action="store_true",
                        help="also print the seconds each phase took, as one JSON object on stderr: start-up "
                             "(from the process start), counting, merging (with the token counts, taken from the "
                             "merge loop's final state), writing the tokenizer files, the model card, and the total")
    add_progress_argument(parser)


def run_train(args: argparse.Namespace) -> int:
    import numpy as np

    from hf_bpe._version import __version__
    from hf_bpe.cli.options import check_engine_arguments
    from hf_bpe.cli.train_sources import named_inputs, plan_sources
    from hf_bpe.common.files import local_bytes
    from hf_bpe.common.outputs import staging_directory
    from hf_bpe.common.parallel import default_num_workers
    from hf_bpe.encode.tokenizer import Tokenizer
    from hf_bpe.evaluation.card import TRAINING_INFO_FILE, check_card_metadata, write_model_card
    from hf_bpe.evaluation.token_counts import (
        COUNT_DTYPE,
        new_token_ids,
        save_token_counts,
        summary_note,
        token_counts_record,
    )
    from hf_bpe.formats.hf_directory import save_tokenizer_directory
    from hf_bpe.pretokenize import UNICODE_VERSION, preset_name, resolve_pattern
    from hf_bpe.train.api import check_trainer_options, train_bpe_from_counts
    from hf_bpe.train.starts.extend import extend_bpe_from_counts
    from hf_bpe.train.starts.superword_passes import check_stage_two_files, train_superwords

    base = extension_base(args)
    special_tokens = training_special_tokens(args) if base is None else list(base.special_tokens)
    source = None
    if args.dataset:  # datasets is imported only for a dataset: start-up counts in every run
        from hf_bpe.data.sources import DatasetSource

        source = DatasetSource.from_args(args)
    check_train_arguments(args, source)
    check_engine_arguments(args)
    check_card_metadata(args.license, card_dataset_names(args, source))
    plan = plan_sources(args, source)  # named sources: their options checked and files opened, or None
    inputs = [] if source else (named_inputs(plan, args.inputs) or [shipped_corpus()])
    # Refuses a bad vocab size or special token now, not after counting: training on no pre-tokens takes no time.
    try:
        check_trainer_options(args.min_frequency, args.max_token_length)
    except ValueError as error:
        message = str(error).replace("min_frequency", "--min-frequency")
        raise InputError(message.replace("max_token_length", "--max-token-length")) from None
    if base is None:
        train_bpe_from_counts({}, args.vocab_size, special_tokens, progress=False, pattern=args.pattern)
    stage_two = superword_options(args, base, special_tokens)
    if stage_two is not None:
        check_stage_two_files(inputs, special_tokens, stage_two[1])
    pattern = resolve_pattern(args.pattern)
    progress = False if args.no_progress else None

    out: Path = args.out
    corpus_bytes = None if source else local_bytes(inputs)
    needed = minimum_output_bytes(args.vocab_size, len(special_tokens), corpus_bytes)
    with staging_directory(out, replace=args.force, min_free_bytes=needed) as staging:
        startup_seconds = seconds_since_start()
        start = time.perf_counter()
        on_base = None if stage_two is None else stage_two[2]  # superwords on BASE: no stage 1 to count for
        if plan is not None:  # each source counted, then added up with its weight (or kept apart for --parity)
            counts, corpus_info = plan.count(args, special_tokens, progress)
        else:
            counts, corpus_info = (Counter(), {}) if on_base else count_training_corpus(args, inputs, source,
                                                                                          special_tokens, progress)
        counting_seconds = time.perf_counter() - start
        # Plain training empties the counts once the merge loop has taken them.
        distinct = plan.distinct if plan is not None else len(counts)
        # For the under-trained tokens: the merge loop's final segmentation of the corpus, as the tokenizer encodes it.
        options = {"progress": progress, "min_frequency": args.min_frequency,
                   "max_token_length": args.max_token_length}
        if stage_two is not None:  # SuperBPE: stage 1 (trained up to the transition, or BASE's), then stage 2

            def count_pass(stage_two_pass: Any) -> Any:  # the passes of stage 2 over the corpus
                nonlocal corpus_info
                pass_start = time.perf_counter()
                counted, corpus_info = count_training_corpus(args, inputs, source, special_tokens, progress,
                                                             pattern=stage_two[1], convert=stage_two_pass)
                note_pass(time.perf_counter() - pass_start, counted)
                return counted

            def note_pass(seconds: float, counted: Any) -> None:  # each stage-2 pass, timed as counting
                nonlocal counting_seconds, distinct
                counting_seconds += seconds
                parts = getattr(counted, "parts", None)  # the distinct parts of documents merged
                distinct = len(counted) if parts is None else parts.distinct()

            # Local workers may keep their segmentation between passes, in the run directory: removed on every exit.
            keep_in = None
            if args.engine != "ray":
                keep_in = staging.parent / "stage2-segmentation"
                keep_in.mkdir()
            stage_two_options = {"num_workers": args.workers, "verbose": args.verbose, "on_kept_pass": note_pass,
                                 "keep_segmentation_in": None if keep_in is None else str(keep_in),
                                 "corpus_bytes": corpus_bytes, **options}

            if on_base is None:
                token_counts = np.zeros(args.vocab_size, dtype=COUNT_DTYPE)
                stage_one = train_bpe_from_counts(counts, stage_two[0], special_tokens, consume_counts=True,
                                                  **options)
                stage_one_counted = distinct
                del counts
                vocab, merges = train_superwords(stage_one, count_pass, args.vocab_size, special_tokens,
                                                 token_counts=token_counts, **stage_two_options)
            else:  # laid out by `superword_extend`: every BASE id kept when all its tokens are
                stage_one, stage_one_counted = on_base.stage_one, None
                token_counts = np.zeros(on_base.num_ids(args.vocab_size), dtype=COUNT_DTYPE)
                vocab, merges = on_base.train(count_pass, args.vocab_size, token_counts=token_counts,
                                              **stage_two_options)
            if keep_in is not None:
                shutil.rmtree(keep_in)  # its disk free again before the writing
        elif base is None:
            token_counts = np.zeros(args.vocab_size, dtype=COUNT_DTYPE)
            if plan is not None and plan.parity is not None:
                vocab, merges = plan.train_parity(args.vocab_size, special_tokens, token_counts, **options)
            else:
                vocab, merges = train_bpe_from_counts(counts, args.vocab_size, special_tokens,
                                                      token_counts=token_counts, consume_counts=True, **options)
        else:  # ids by the base's, which may leave gaps: one count per id up to the largest new one
            token_counts = np.zeros(max(base.vocab) + 1 + args.vocab_size - len(base.vocab), dtype=COUNT_DTYPE)
            vocab, merges = extend_bpe_from_counts(base, counts, args.vocab_size, token_counts=token_counts,
                                                   consume_counts=True, num_workers=args.workers, **options)
        training_seconds = time.perf_counter() - start
        token_counts = token_counts[:max(vocab) + 1]
        peak_memory_mb = peak_memory_bytes() / 1e6
        if len(vocab) < args.vocab_size:
            print(f"hf-bpe train: note: no pairs left to merge, so the vocabulary has {len(vocab)} tokens, "
                  f"fewer than the {args.vocab_size} asked for", file=sys.stderr)
        training_info = {
            **corpus_info,
            "vocab_size": len(vocab),
            "special_tokens": special_tokens,
            "pad_token": args.pad_token,
            "distinct_pretokens": distinct,
            "counting_seconds": round(counting_seconds, 3),
            "training_seconds": round(training_seconds, 3),
            "peak_memory_mb": round(peak_memory_mb),
            "engine": args.engine,
            "num_workers": args.workers or default_num_workers(),
            "hardware": describe_hardware(),
            "python": platform.python_version(),
            "hf_bpe_version": __version__,
            "unicode_version": UNICODE_VERSION,
            "pattern": preset_name(pattern) or pattern,
            "superword": None if stage_two is None else {
                "from": stage_two[0], "stage_1_pattern": preset_name(pattern) or pattern,
                "stage_1_distinct_pretokens": stage_one_counted, "stage_1_merges": len(stage_one[1])},
            # The merges of BASE kept first in merges.txt: all of them, but with superwords on its first tokens.
            "extends": None if base is None else {"base": args.extend, "vocab_size": len(base.vocab),
                                                  "merges": len(on_base.stage_one[1] if on_base else base.merges)},
            "min_frequency": args.min_frequency,
            "max_token_length": args.max_token_length,
            "date": datetime.date.today().isoformat(),
            "license": args.license,
            "dataset_names": card_dataset_names(args, source),
            "token_counts": token_counts_record(token_counts),
        }
        if stage_two is not None:  # the tokenizer pre-tokenizes as stage 2 did
            pattern = stage_two[1]
            training_info["pattern"] = preset_name(pattern) or pattern
        try:
            writing_start = time.perf_counter()
            # A converted tiktoken file's way, kept; stage 2 merges its pre-tokens by rank (`superword_extend`).
            ignore_merges = base is not None and base.ignore_merges and stage_two is None
            save_tokenizer_directory(staging, vocab, merges, special_tokens, pad_token=args.pad_token,
                                     pattern=pattern, ignore_merges=ignore_merges)
            save_token_counts(staging, token_counts)
            (staging / TRAINING_INFO_FILE).write_text(json.dumps(training_info, indent=2) + "\n", encoding="utf-8")
            card_start = time.perf_counter()
            write_model_card(staging, training_info=training_info, plots=False, token_counts=token_counts,
                             tokenizer=Tokenizer(vocab, merges, special_tokens, pattern=pattern,
                                                 ignore_merges=ignore_merges))
            card_seconds = time.perf_counter() - card_start
        except OSError as error:
            raise InputError(f"{out}: cannot write the tokenizer: {describe_os_error(error)} "
                             f"(nothing was written)") from None
    # An extension's own tokens, after the base's merges (counted once above: a converted rank file's are lazy).
    new_ids = None if base is None else new_token_ids(vocab, merges, training_info["extends"]["merges"])
    print(f"hf-bpe train: wrote {out} ({len(vocab)} tokens: 256 bytes, {len(merges)} merges, "
          f"{len(special_tokens)} special) in {training_seconds:.1f} s ({distinct:,} distinct pre-tokens counted "
          f"in {counting_seconds:.1f} s, peak memory {peak_memory_mb:,.0f} MB)"
          f"{summary_note(token_counts, vocab, special_tokens, new_ids)}{replacement_note(training_info)}",
          file=sys.stderr)
    if args.verbose:
        total = seconds_since_start()
        phases = {"startup": startup_seconds, "counting": counting_seconds,
                  "merging": training_seconds - counting_seconds,
                  "writing": card_start - writing_start, "card": card_seconds, "total": total}
        print("hf-bpe train: phases " + json.dumps({name: None if seconds is None else round(seconds, 3)
                                                    for name, seconds in phases.items()}), file=sys.stderr)
    return 0


def extension_base(args: argparse.Namespace) -> Any:
    """The `hf_bpe.Tokenizer` of --extend BASE, or None without it; InputError for options that BASE decides (the
    pattern, the special tokens), a BASE that is not a tokenizer, and a --vocab-size not larger than BASE's (with
    --superword-from, `superword_options` checks it against the tokens kept). Sets `args.pattern` to BASE's, which
    the corpus is counted with (stage 1's, with --superword-from)."""
    if args.extend is None:
        return None
    for flag, given in (("--pattern", args.pattern), ("--special-token", args.special_tokens),
                        ("--no-special-tokens", args.no_special_tokens), ("--pad-token", args.pad_token)):
        if given:
            raise InputError(f"--extend takes the pattern and special tokens from BASE, so {flag} cannot be given")
    from hf_bpe.encode.tokenizer import Tokenizer
    from hf_bpe.evaluation.baselines import TIKTOKEN_SPECIAL_TOKENS, resolve_baseline
    from hf_bpe.train.starts.extend import load_base

    base = load_base(args.extend) if Path(args.extend).is_dir() else resolve_baseline(args.extend).tokenizer
    if not isinstance(base, Tokenizer):  # a rank file (cl100k=PATH), which baselines encode with tiktoken
        base = Tokenizer.from_tiktoken(base.path, pattern=base.name, special_tokens=TIKTOKEN_SPECIAL_TOKENS[base.name])
    if args.superword_from is None and args.vocab_size <= len(base.vocab):
        raise InputError(f"--vocab-size {args.vocab_size} must be larger than the {len(base.vocab):,} tokens of "
                         f"--extend {args.extend}: it is the final size, BASE's tokens included")
    args.pattern = base.pattern
    return base


def superword_options(args: argparse.Namespace, base: Any, special_tokens: list[str]) -> tuple[int, str, Any] | None:
    """(--superword-from, the regex of --superword-pattern, and with --extend BASE, BASE's first tokens as stage 1:
    `hf_bpe.train.starts.superword_extend.SuperwordsOnBase`), checked, or None without --superword-from."""
    from hf_bpe.train.starts.superword import check_superword_options
    from hf_bpe.train.starts.superword_extend import check_superwords_on_base

    try:
        if base is not None:
            on_base = check_superwords_on_base(base, args.superword_from, args.superword_pattern, args.vocab_size)
            return None if on_base is None else (on_base.keep, on_base.regex, on_base)
        checked = check_superword_options(args.superword_from, args.superword_pattern, args.vocab_size,
                                          special_tokens)
        return None if checked is None else (*checked, None)
    except (TypeError, ValueError) as error:
        message = str(error).replace("superword_from", "--superword-from").replace("vocab_size", "--vocab-size")
        message = message.replace("the base tokenizer", f"--extend {args.extend}")
        raise InputError(message.replace("superword_pattern", "--superword-pattern")) from None


def training_special_tokens(args: argparse.Namespace) -> list[str]:
    """The special tokens to train with: --special-token (or the default), plus --pad-token when it is new."""
    special_tokens = [] if args.no_special_tokens else list(args.special_tokens or DEFAULT_SPECIAL_TOKENS)
    if args.pad_token is not None:
        if args.no_special_tokens:
            raise InputError("--pad-token is a special token, so it cannot be combined with --no-special-tokens")
        if args.pad_token not in special_tokens:
            special_tokens.append(args.pad_token)
    return special_tokens


def check_train_arguments(args: argparse.Namespace, source: Any) -> None:
    """The checks on `hf-bpe train`'s own options that need no file to be read."""
    check_workers(args.workers)
    if source is not None:
        if args.inputs:
            raise InputError("give INPUT files or --dataset, not both")
        if args.errors != "strict":
            raise InputError("--errors applies to INPUT files; dataset text is already decoded")
    else:
        for flag, given in (("--data-files", args.data_files), ("--config", args.config),
                            ("--streaming", args.streaming), ("--cache-dir", args.cache_dir)):
            if given:
                raise InputError(f"{flag} needs --dataset")


def count_training_corpus(args: argparse.Namespace, inputs: list[str | Path], source: Any, special_tokens: list[str],
                          progress: bool | None, pattern: str | None = None, convert: Any = None
                          ) -> tuple[Counter[bytes], dict[str, Any]]:
    """Pre-token counts of the INPUT files or the dataset, and what the training record says about the corpus;
    counted with `pattern` when given (SuperBPE's stage 2), else with --pattern; `convert` as
    `count_pretokens_in_files` takes it (a stage-2 pass)."""
    from hf_bpe.common.files import check_input_files
    from hf_bpe.train.counting import count
    from hf_bpe.train.counting.count import counting_engine

    engine_options = {"engine": counting_engine(args.engine, args.ray_address),
                      "pattern": args.pattern if pattern is None else pattern, "convert": convert}
    if source is not None:
        from hf_bpe.data.sources import datasets_progress_bars, metadata_of, row_texts

        with datasets_progress_bars(progress is not False):
            texts = row_texts(source.load(), source)
        counts = count.count_pretokens_in_iterator(texts, special_tokens, num_workers=args.workers,
                                                   progress=progress, **engine_options)
        return counts, {"dataset": metadata_of(source, texts.num_rows), "corpus_files": [],
                        "corpus_bytes": texts.num_bytes}
    stats = count.CountStats() if args.errors == "replace" else None
    counts = count.count_pretokens_in_files(inputs, special_tokens, num_workers=args.workers, errors=args.errors,
                                            progress=progress, stats=stats, **engine_options)
    sizes = check_input_files(inputs)  # as counting found them: local files or URLs
    info: dict[str, Any] = {
        "corpus_files": [{"path": str(path), "bytes": size} for path, size in zip(inputs, sizes)],
        "corpus_bytes": sum(sizes),
        "errors": args.errors,
    }
    if stats is not None:
        first = stats.first_replacement
        info["replaced_bytes"] = stats.replaced_bytes
        info["first_replacement"] = None if first is None else {"path": str(first[0]), "byte_offset": first[1]}
    return counts, info


def replacement_note(training_info: dict[str, Any]) -> str:
    """'; replaced N invalid bytes with U+FFFD, the first at PATH byte OFFSET' for --errors replace, else ''.

    >>> replacement_note({"replaced_bytes": 2, "first_replacement": {"path": "a.txt", "byte_offset": 120}})
    '; replaced 2 bytes of invalid UTF-8 with U+FFFD, the first at a.txt byte offset 120'
    >>> replacement_note({"replaced_bytes": 0, "first_replacement": None})
    '; no invalid UTF-8 to replace'
    """
    if "replaced_bytes" not in training_info:
        return ""
    first = training_info.get("first_replacement")
    if not training_info["replaced_bytes"] or not first:
        return "; no invalid UTF-8 to replace"
    return (f"; replaced {training_info['replaced_bytes']:,} byte{'s' if training_info['replaced_bytes'] != 1 else ''}"
            f" of invalid UTF-8 with U+FFFD, the first at {first['path']} byte offset {first['byte_offset']}")


def card_dataset_names(args: argparse.Namespace, source: Any) -> list[str]:
    """The card's `datasets` metadata: --dataset-name, else the --dataset trained on when it is a Hub name."""
    if args.dataset_names:
        return list(args.dataset_names)
    name = source.hub_name() if source is not None else None
    return [name] if name else []


def minimum_output_bytes(vocab_size: int, num_special_tokens: int = 0, corpus_bytes: int | None = None) -> int:
    """A floor on the size of the saved tokenizer directory: each token takes at least ~32 bytes over vocab.json,
    merges.txt and tokenizer.json (measured: 80-90), plus the small files. Less free space than this fails for sure.

    Only tokens that can be made count: each merge joins two symbols of the corpus, so there are at most as many
    merges as bytes in it, and a vocab size far beyond a small corpus is not counted in full (`corpus_bytes`, when
    the size is known before counting).

    >>> minimum_output_bytes(1_000_000, 1, corpus_bytes=4_000)
    152608
    """
    tokens = vocab_size if corpus_bytes is None else min(vocab_size, 256 + num_special_tokens + corpus_bytes)
    return 32 * tokens + 16_384


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

