"""Benchmark hf_bpe's `train_bpe` against HF tokenizers' BpeTrainer, rustbpe and bpeasy, and the merge loop's variants.

    python scripts/bench_train.py $SHARED/corpora/*.txt --vocab-size 10000 --repeats 3
    python scripts/bench_train.py $SHARED/corpora/multi_manpages.txt --vocab-size 32000 --repeats 3 \
        --tools hf_bpe rustbpe hf_tokenizers bpeasy --json train.json
    python scripts/bench_train.py $LINUX --vocab-size 32000 --repeats 1 --queues
    python scripts/bench_train.py $LINUX_X4 --vocab-size 32000 --repeats 1 --tools hf_bpe
    python scripts/bench_train.py $LINUX_JSONL --vocab-size 32000 --repeats 1 --tools hf_bpe_stream
    python scripts/bench_train.py $SHARED/corpora/multi_manpages.txt --vocab-size 32000 --repeats 3 \
        --tools hf_bpe_cli rustbpe hf_bpe

Each training runs in a fresh subprocess. Reported per run: the wall time of the whole process (start-up, reading,
training, writing, exit: what a user waits for), the wall time of the training call alone (in the child, imports
excluded), the peak resident memory of the child's whole process tree (the child and its worker processes, summed,
sampled every 50 ms from /proc; PSS beside it) and the largest resident memory of any one process of the tree (the
kernel's figure, as `/usr/bin/time` reports it), then the best and the median of the runs, and the ratios to
hf_bpe. `hf_bpe_cli` runs the command `hf-bpe train CORPUS --vocab-size N --out TMP --verbose` itself, with every
default output (token counts, model card), and reports its phases as the command prints them: start-up, counting,
merging (with the token counts), writing, card. `hf_bpe_stream` (not run by
default) trains with `train_bpe_from_iterator` on JSON lines files read as a streaming `datasets.IterableDataset`
(`load_dataset("json", data_files=..., streaming=True)`, column "text"). The tools alternate, and which goes first
alternates between repeats, so that load from other processes on the machine hits both alike. Then the medians, and
the overlap of the two tools' first 1000 merges (HF breaks ties between equally frequent pairs differently, and does
not split documents at special tokens while training, so the merges are not identical).

`rustbpe` (nanochat's Rust trainer, `rustbpe.Tokenizer().train_from_iterator`) and `bpeasy` (`bpeasy.train_bpe`)
are benchmark-only: `pip install rustbpe bpeasy`, never a dependency of hf_bpe. Neither knows special tokens, so each
gets the documents split at `<|endoftext|>` (read from the files inside the timed call, as HF reads its files) and
`vocab_size - 1` (the vocab counts the 256 bytes; the special token would be the last id, as nanochat adds it), so
all tools make the same number of merges. Their merges are compared with hf_bpe's as the first merged tokens.

`--pattern NAME_OR_REGEX` trains every tool with another pre-tokenization pattern than GPT-2's (a preset name of
`hf_bpe.PATTERNS` or regex text): hf_bpe gets it as `pattern=`, HF as a Split pre-tokenizer (in the `tokenizers`
spelling, `hf_bpe.pretokenize.patterns.tokenizers_pattern`) then ByteLevel without its own regex, rustbpe and bpeasy
as their pattern argument; without it HF keeps its ByteLevel pre-tokenizer, which is GPT-2's pattern. `--json FILE`
appends one record per tool and run (`bench_results.append_result`, kind "train").

`--queues` also counts the corpus once in another child and times hf_bpe's merge loop alone with each priority
structure (`queue="buckets"`, frequency buckets, and `queue="heap"`, the lazy max-heap), and `--stores` with each
store of the words (`store="flat"`, linked positions with numpy merges, and `store="strings"`, one `str` per word),
alternating, `--repeats` times, in CPU seconds of that process (steadier than wall time on a shared machine) and wall
seconds; it checks that all give the same merges, and prints what each store holds before the first merge
(distinct words, pairs, index entries) with the memory it takes (traced by tracemalloc).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from bench_results import append_result
from tree_memory import run_measured

SPECIAL_TOKENS = ["<|endoftext|>"]
OVERLAP_MERGES = 1000
TOOLS = ("hf_bpe", "hf_tokenizers")
ALL_TOOLS = (*TOOLS, "hf_bpe_cli", "hf_bpe_stream", "rustbpe", "bpeasy")
PHASES = ("startup", "counting", "merging", "writing", "card")
# The tools whose child process gets the pattern as regex text (see `train_rustbpe`).
RESOLVED_PATTERN_TOOLS = ("rustbpe", "bpeasy")
QUEUES = ("buckets", "heap")
STORES = ("flat", "strings")
# bpeasy drops merged tokens longer than this: far above any token of these corpora, so that nothing is dropped.
BPEASY_MAX_TOKEN_LENGTH = 1 << 16


def train_hf_bpe(paths: list[str], vocab_size: int, workers: int | None, pattern: str | None) -> list[bytes]:
    from hf_bpe import train_bpe

    _, merges = train_bpe(paths, vocab_size, SPECIAL_TOKENS, num_workers=workers, progress=False, verbose=True,
                          pattern=pattern)
    return [left + right for left, right in merges]


def train_hf_bpe_stream(paths: list[str], vocab_size: int, workers: int | None, pattern: str | None) -> list[bytes]:
    import datasets

    from hf_bpe import train_bpe_from_iterator

    datasets.disable_progress_bars()
    stream = datasets.load_dataset("json", data_files=paths, split="train", streaming=True)
    _, merges = train_bpe_from_iterator((row["text"] for row in stream), vocab_size, SPECIAL_TOKENS,
                                        num_workers=workers, progress=False, verbose=True, pattern=pattern)
    return [left + right for left, right in merges]


def train_hf_tokenizers(paths: list[str], vocab_size: int, workers: int | None, pattern: str | None) -> list[bytes]:
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    from hf_bpe.formats.gpt2 import str_to_token
    from hf_bpe.pretokenize.patterns import resolve_pattern, tokenizers_pattern

    tokenizer = Tokenizer(models.BPE())
    if pattern is None:
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(tokenizers_pattern(resolve_pattern(pattern))), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train(paths, trainer)
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    return [str_to_token(left) + str_to_token(right)
            for left, right in (merge.split(" ") if isinstance(merge, str) else merge for merge in merges)]


def documents(paths: list[str]) -> Iterator[str]:
    """The files' documents, split at the special token (for the trainers that do not know special tokens)."""
    for path in paths:
        with open(path, encoding="utf-8") as file:
            yield from file.read().split(SPECIAL_TOKENS[0])


def train_rustbpe(paths: list[str], vocab_size: int, workers: int | None, pattern: str | None) -> list[bytes]:
    """`pattern` is regex text, resolved by the parent (`run_in_subprocess`): this process imports no hf_bpe, so its
    whole-process time is rustbpe's own."""
    import rustbpe

    tokenizer = rustbpe.Tokenizer()
    tokenizer.train_from_iterator(documents(paths), vocab_size - len(SPECIAL_TOKENS), pattern=pattern)
    return [token for token, rank in sorted(tokenizer.get_mergeable_ranks(), key=lambda item: item[1]) if rank >= 256]


def train_bpeasy(paths: list[str], vocab_size: int, workers: int | None, pattern: str | None) -> list[bytes]:
    """`pattern` is regex text, as for `train_rustbpe`."""
    import bpeasy

    ranks = bpeasy.train_bpe(documents(paths), pattern, BPEASY_MAX_TOKEN_LENGTH, vocab_size - len(SPECIAL_TOKENS))
    return [token for token, rank in sorted(ranks.items(), key=lambda item: item[1]) if rank >= 256]


TRAINERS = {"hf_bpe": train_hf_bpe, "hf_bpe_stream": train_hf_bpe_stream, "hf_tokenizers": train_hf_tokenizers,
            "rustbpe": train_rustbpe, "bpeasy": train_bpeasy}


def run_tool(tool: str, paths: list[str], vocab_size: int, workers: int | None, pattern: str | None) -> dict:
    """Train once; wall seconds, number of merges and the first merged tokens as hex."""
    start = time.perf_counter()
    tokens = TRAINERS[tool](paths, vocab_size, workers, pattern)
    return {"wall": time.perf_counter() - start, "num_merges": len(tokens),
            "first_tokens": [token.hex() for token in tokens[:OVERLAP_MERGES]]}


def merge_loop_variants(queues: bool, stores: bool) -> list[tuple[str, str]]:
    """The (store, queue) pairs to time: each queue with the default store, each store with the default queue."""
    from hf_bpe.train.merging.merge_loop import DEFAULT_QUEUE, DEFAULT_STORE

    variants = [(DEFAULT_STORE, queue) for queue in QUEUES] if queues else []
    variants += [(store, DEFAULT_QUEUE) for store in STORES if stores and (store, DEFAULT_QUEUE) not in variants]
    return variants


def run_merge_loops(paths: list[str], vocab_size: int, workers: int | None, repeats: int, pattern: str | None,
                    variants: list[tuple[str, str]]) -> dict:
    """Count once, then time the merge loop in each variant, alternating (CPU and wall seconds); check that all give
    the same merges; and size each store's structures."""
    from hf_bpe.train.counting.count import count_pretokens_in_files
    from hf_bpe.train.merging.merge_loop import merge_pairs

    counts = count_pretokens_in_files(paths, SPECIAL_TOKENS, num_workers=workers, progress=False, pattern=pattern)
    num_merges = vocab_size - 256 - len(SPECIAL_TOKENS)
    names = [f"{store}/{queue}" for store, queue in variants]
    cpu: dict[str, list[float]] = {name: [] for name in names}
    wall: dict[str, list[float]] = {name: [] for name in names}
    merges: dict[str, list[tuple[int, int]]] = {}
    for repeat in range(repeats):
        order = list(zip(names, variants))
        for name, (store, queue) in order if repeat % 2 == 0 else order[::-1]:
            start, start_cpu = time.perf_counter(), time.process_time()
            merges[name] = merge_pairs(counts, num_merges, progress=False, queue=queue, store=store)
            cpu[name].append(time.process_time() - start_cpu)
            wall[name].append(time.perf_counter() - start)
    if any(merges[name] != merges[names[0]] for name in names):
        sys.exit("the merge loop's variants gave different merges")
    structures = {store: store_structures(counts, store) for store in dict.fromkeys(store for store, _ in variants)}
    return {"cpu": cpu, "wall": wall, "num_merges": len(merges[names[0]]), "distinct_pretokens": len(counts),
            "structures": structures}


def store_structures(counts: dict[bytes, int], store: str) -> dict:
    """What a store holds before the first merge, and the memory it holds then (as traced by tracemalloc, which
    sees numpy's arrays and Python's objects: resident memory would show freed pages reused instead)."""
    import tracemalloc

    from hf_bpe.train.merging.flat_corpus import FlatCorpus
    from hf_bpe.train.merging.merge_loop import _Words
    from hf_bpe.train.merging.string_corpus import StringCorpus

    tracemalloc.start()
    words = _Words.of_counts(counts)
    positions = len(words.data)
    if store == "flat":
        corpus: FlatCorpus | StringCorpus = FlatCorpus(words.data, words.lengths, words.frequencies)
        index = corpus.index
    else:
        from array import array

        corpus = StringCorpus(words.strings(), array("q", words.frequencies.tobytes()))
        index = corpus.pair_words
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"words": len(words.lengths), "positions": positions, "pairs": len(corpus.pair_counts),
            "index_entries": sum(1 if isinstance(entries, int) else len(entries) for entries in index.values()),
            "held_mb": held / 1e6, "building_peak_mb": peak / 1e6}


def run_in_subprocess(child: str, args: argparse.Namespace) -> dict:
    """Run one child (a tool, the `hf-bpe train` command, or the merge loops): its JSON result, plus the wall time of
    the whole process, the peak RSS of its process tree and the largest RSS of any one process of it."""
    environment = dict(os.environ)
    if args.workers:
        environment["RAYON_NUM_THREADS"] = str(args.workers)  # HF tokenizers', rustbpe's and bpeasy's thread pools
    with tempfile.TemporaryDirectory(prefix="bench_train_") as scratch:
        if child == "hf_bpe_cli":
            command = [str(Path(sys.executable).with_name("hf-bpe")), "train", *args.corpus, "--vocab-size",
                       str(args.vocab_size), "--out", os.path.join(scratch, "tokenizer"), "--no-progress",
                       "--verbose"]
        else:
            command = [sys.executable, __file__, *args.corpus, "--vocab-size", str(args.vocab_size), "--child",
                       child, "--repeats", str(args.repeats)]
            command += ["--queues"] if args.queues else []
            command += ["--stores"] if args.stores else []
        pattern = args.pattern
        if child in RESOLVED_PATTERN_TOOLS:  # resolved here, so that their process imports no hf_bpe
            from hf_bpe.pretokenize.patterns import resolve_pattern

            pattern = resolve_pattern(args.pattern)
        if pattern is not None:
            command.append(f"--pattern={pattern}")  # one argument, whatever the regex starts with
        if args.workers:
            command += ["--workers", str(args.workers)]
        run = run_measured(command, environment)
        if run.returncode != 0:
            sys.exit(f"{child} failed with exit code {run.returncode}:\n{run.errors[-2000:]}")
        if child == "hf_bpe_cli":
            result = cli_result(run.errors, os.path.join(scratch, "tokenizer"))
        else:
            result = json.loads(run.output.strip().splitlines()[-1])
    result["process_wall"] = run.wall
    result["peak_mb"], result["peak_pss_mb"] = run.memory.rss / 1e6, run.memory.pss / 1e6
    result["max_process_mb"] = run.max_process_bytes / 1e6
    return result


def cli_result(stderr: str, directory: str) -> dict:
    """What `hf-bpe train --verbose` reports: its phases, the merges it saved, and the training time it records."""
    from hf_bpe.formats.gpt2 import load_gpt2_merges

    prefix = "hf-bpe train: phases "
    phases = json.loads([line for line in stderr.splitlines() if line.startswith(prefix)][-1][len(prefix):])
    tokens = [left + right for left, right in load_gpt2_merges(os.path.join(directory, "merges.txt"))]
    return {"wall": phases["counting"] + phases["merging"], "phases": phases, "num_merges": len(tokens),
            "first_tokens": [token.hex() for token in tokens[:OVERLAP_MERGES]]}


def corpus_fields(args: argparse.Namespace) -> dict:
    """What every JSON record says of the run: corpus, size, vocab and pattern."""
    return {"corpus": ", ".join(os.path.basename(path) for path in args.corpus),
            "corpus_bytes": sum(os.path.getsize(path) for path in args.corpus), "vocab_size": args.vocab_size,
            "pattern": args.pattern or "gpt2"}


def compare_tools(args: argparse.Namespace) -> None:
    results: dict[str, list[dict]] = {tool: [] for tool in args.tools}
    for repeat in range(args.repeats):
        for tool in args.tools if repeat % 2 == 0 else args.tools[::-1]:
            result = run_in_subprocess(tool, args)
            results[tool].append(result)
            append_result(args.json, "train", **corpus_fields(args), tool=tool, seconds=round(result["wall"], 3),
                          process_seconds=round(result["process_wall"], 3), peak_mb=round(result["peak_mb"], 1),
                          peak_pss_mb=round(result["peak_pss_mb"], 1),
                          max_process_mb=round(result["max_process_mb"], 1), num_merges=result["num_merges"],
                          **({"phases": result["phases"]} if "phases" in result else {}))
        print(f"run {repeat + 1}: " + " | ".join(describe_run(tool, results[tool][-1]) for tool in args.tools),
              flush=True)
    for name, pick in (("best", min), ("median", statistics.median)):
        print(f"{name}: " + " | ".join(
            f"{tool} {pick(run['process_wall'] for run in results[tool]):.2f} s whole "
            f"({pick(run['wall'] for run in results[tool]):.2f} s training), "
            f"{pick(run['peak_mb'] for run in results[tool]):.0f} MB tree, "
            f"{pick(run['max_process_mb'] for run in results[tool]):.0f} MB largest process" for tool in args.tools))
    if "hf_bpe_cli" in args.tools:
        runs = results["hf_bpe_cli"]
        print("hf-bpe train phases, best of each (s): " + ", ".join(
            f"{phase} {min(run['phases'][phase] for run in runs):.2f}" for phase in PHASES))
    ours = "hf_bpe_cli" if "hf_bpe_cli" in args.tools else "hf_bpe" if "hf_bpe" in args.tools else None
    if ours is None:
        return
    ours_first = set(results[ours][0]["first_tokens"])
    for tool in args.tools:
        if tool == ours:
            continue
        def ratio(key: str) -> float:
            return min(run[key] for run in results[ours]) / min(run[key] for run in results[tool])

        print(f"{ours} / {tool}: best whole-process time ratio {ratio('process_wall'):.2f}, best tree memory ratio "
              f"{ratio('peak_mb'):.2f}, largest process memory ratio {ratio('max_process_mb'):.2f}; "
              f"merges {results[ours][0]['num_merges']} and {results[tool][0]['num_merges']}, first {OVERLAP_MERGES} "
              f"merged tokens in common: {len(ours_first & set(results[tool][0]['first_tokens']))}")


def describe_run(tool: str, result: dict) -> str:
    """'hf_bpe_cli 5.10 s whole (3.90 s training) 270 MB tree (PSS 240 MB), 250 MB largest process'."""
    return (f"{tool} {result['process_wall']:6.2f} s whole ({result['wall']:6.2f} s training) "
            f"{result['peak_mb']:5.0f} MB tree (PSS {result['peak_pss_mb']:.0f} MB), "
            f"{result['max_process_mb']:.0f} MB largest process")


def compare_merge_loops(args: argparse.Namespace) -> None:
    result = run_in_subprocess("merge_loops", args)
    print(f"merge loop ({result['num_merges']} merges, the same in every variant), median of {args.repeats}, "
          f"CPU seconds (wall):")
    for name, seconds in result["cpu"].items():
        store, queue = name.split("/")
        print(f"  store {store}, queue {queue}: {statistics.median(seconds):.2f} s "
              f"({statistics.median(result['wall'][name]):.2f} s; runs {', '.join(f'{s:.2f}' for s in seconds)})")
        append_result(args.json, "merge_loop", **corpus_fields(args), store=store, queue=queue,
                      cpu_seconds=round(statistics.median(seconds), 3),
                      seconds=round(statistics.median(result["wall"][name]), 3), repeats=args.repeats,
                      num_merges=result["num_merges"])
    for store, sizes in result["structures"].items():
        print(f"store {store}: {result['distinct_pretokens']:,} distinct pre-tokens, {sizes['words']:,} words of 2+ "
              f"bytes holding {sizes['positions']:,} bytes, {sizes['pairs']:,} distinct pairs, "
              f"{sizes['index_entries']:,} index entries; they hold {sizes['held_mb']:.0f} MB (building them peaked at "
              f"{sizes['building_peak_mb']:.0f} MB)")
    print(f"peak RSS of that process (counting included) {result['peak_mb']:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", nargs="+", help="UTF-8 text files, documents separated by <|endoftext|>")
    parser.add_argument("--vocab-size", type=int, required=True)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each tool (default 3)")
    parser.add_argument("--workers", type=int, default=None,
                        help="processes for hf_bpe, threads for the others (default: each tool's own, all CPUs)")
    parser.add_argument("--tools", nargs="*", choices=ALL_TOOLS, default=list(TOOLS),
                        help="whole trainings to compare (default: hf_bpe and hf_tokenizers; none with --tools alone; "
                             "hf_bpe_cli runs the hf-bpe train command with every default output; hf_bpe_stream "
                             "reads JSON lines files as a streaming dataset; rustbpe and bpeasy must be installed)")
    parser.add_argument("--pattern", metavar="NAME_OR_REGEX", default=None,
                        help="pre-tokenization pattern for every tool: a preset name (gpt2, cl100k, o200k, llama3) "
                             "or regex text (default: GPT-2's)")
    parser.add_argument("--queues", action="store_true", help="also time the merge loop with each priority queue")
    parser.add_argument("--stores", action="store_true",
                        help="also time the merge loop with each store of the words (flat, strings)")
    parser.add_argument("--json", metavar="FILE", default=None,
                        help="append one record per tool and run (and per merge loop variant) to this JSON list")
    parser.add_argument("--child", choices=[*ALL_TOOLS, "merge_loops"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "merge_loops":
        print(json.dumps(run_merge_loops(args.corpus, args.vocab_size, args.workers, args.repeats, args.pattern,
                                         merge_loop_variants(args.queues, args.stores))))
    elif args.child:
        print(json.dumps(run_tool(args.child, args.corpus, args.vocab_size, args.workers, args.pattern)))
    else:
        print(f"{', '.join(args.corpus)}: {sum(os.path.getsize(path) for path in args.corpus) / 1e6:,.0f} MB, "
              f"vocab {args.vocab_size:,}, pattern {args.pattern or 'gpt2'}", flush=True)
        if args.tools:
            compare_tools(args)
        if args.queues or args.stores:
            compare_merge_loops(args)


if __name__ == "__main__":
    main()
