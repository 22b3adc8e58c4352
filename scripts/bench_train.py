"""Benchmark hf_bpe's `train_bpe` against HF tokenizers' BpeTrainer, and the merge loop's two priority queues.

    python scripts/bench_train.py /work/shared/corpora/*.txt --vocab-size 10000 --repeats 3
    python scripts/bench_train.py /work/corpora/linux_code.txt --vocab-size 32000 --repeats 1 --queues
    python scripts/bench_train.py /work/corpora/linux_x4.txt --vocab-size 32000 --repeats 1 --tools hf_bpe
    python scripts/bench_train.py /work/corpora/linux_code.jsonl --vocab-size 32000 --repeats 1 --tools hf_bpe_stream

Each training runs in a fresh subprocess. Reported per run: wall time of the training call (in the child, imports
excluded) and the peak resident memory of the child's whole process tree (the child and its worker processes,
summed, sampled every 50 ms from /proc; PSS beside it), then the hf_bpe / HF ratios. `hf_bpe_stream` (not run by
default) trains with `train_bpe_from_iterator` on JSON lines files read as a streaming `datasets.IterableDataset`
(`load_dataset("json", data_files=..., streaming=True)`, column "text"). The tools alternate, and which goes first
alternates between repeats, so that load from other processes on the machine hits both alike. Then the medians, and
the overlap of the two tools' first 1000 merges (HF breaks ties between equally frequent pairs differently, and does
not split documents at special tokens while training, so the merges are not identical).

`--queues` also counts the corpus once in another child and times hf_bpe's merge loop alone with each priority
structure (`queue="buckets"`, frequency buckets, and `queue="heap"`, the lazy max-heap), alternating, `--repeats`
times; it checks that both give the same merges, and prints what the merge loop's structures hold (distinct words,
pairs, index entries) with the resident memory they add.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from tree_memory import PeakTreeMemory

SPECIAL_TOKENS = ["<|endoftext|>"]
OVERLAP_MERGES = 1000
TOOLS = ("hf_bpe", "hf_tokenizers")
ALL_TOOLS = (*TOOLS, "hf_bpe_stream")
QUEUES = ("buckets", "heap")


def train_hf_bpe(paths: list[str], vocab_size: int, workers: int | None) -> list[tuple[bytes, bytes]]:
    from hf_bpe import train_bpe

    _, merges = train_bpe(paths, vocab_size, SPECIAL_TOKENS, num_workers=workers, progress=False, verbose=True)
    return merges


def train_hf_bpe_stream(paths: list[str], vocab_size: int, workers: int | None) -> list[tuple[bytes, bytes]]:
    import datasets

    from hf_bpe import train_bpe_from_iterator

    datasets.disable_progress_bars()
    stream = datasets.load_dataset("json", data_files=paths, split="train", streaming=True)
    _, merges = train_bpe_from_iterator((row["text"] for row in stream), vocab_size, SPECIAL_TOKENS,
                                        num_workers=workers, progress=False, verbose=True)
    return merges


def train_hf_tokenizers(paths: list[str], vocab_size: int, workers: int | None) -> list[tuple[bytes, bytes]]:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    from hf_bpe.formats.gpt2 import str_to_token

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train(paths, trainer)
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    return [(str_to_token(left), str_to_token(right))
            for left, right in (merge.split(" ") if isinstance(merge, str) else merge for merge in merges)]


def run_tool(tool: str, paths: list[str], vocab_size: int, workers: int | None) -> dict:
    """Train once; wall seconds, number of merges and the first merges as hex pairs."""
    train = {"hf_bpe": train_hf_bpe, "hf_bpe_stream": train_hf_bpe_stream, "hf_tokenizers": train_hf_tokenizers}[tool]
    start = time.perf_counter()
    merges = train(paths, vocab_size, workers)
    return {"wall": time.perf_counter() - start, "num_merges": len(merges),
            "first_merges": [[left.hex(), right.hex()] for left, right in merges[:OVERLAP_MERGES]]}


def run_queues(paths: list[str], vocab_size: int, workers: int | None, repeats: int) -> dict:
    """Count once, then time the merge loop with each queue, alternating; and size the merge loop's structures."""
    from hf_bpe.train.count import count_pretokens_in_files
    from hf_bpe.train.merge_loop import _Corpus, _Words, merge_pairs

    counts = count_pretokens_in_files(paths, SPECIAL_TOKENS, num_workers=workers, progress=False)
    num_merges = vocab_size - 256 - len(SPECIAL_TOKENS)
    seconds: dict[str, list[float]] = {queue: [] for queue in QUEUES}
    merges: dict[str, list[tuple[int, int]]] = {}
    for repeat in range(repeats):
        for queue in QUEUES if repeat % 2 == 0 else QUEUES[::-1]:
            start = time.perf_counter()
            merges[queue] = merge_pairs(counts, num_merges, progress=False, queue=queue)
            seconds[queue].append(time.perf_counter() - start)
    if merges["buckets"] != merges["heap"]:
        sys.exit("the two queues gave different merges")
    before = current_rss()
    corpus = _Corpus(_Words.of_counts(counts))
    structures = {
        "distinct_pretokens": len(counts),
        "words": len(corpus.words),
        "positions": sum(map(len, corpus.words)),
        "pairs": len(corpus.pair_counts),
        "index_entries": sum(map(len, corpus.pair_words.values())),
        "corpus_rss_mb": (current_rss() - before) / 1e6,
    }
    return {"seconds": seconds, "num_merges": len(merges["heap"]), "structures": structures}


def current_rss() -> int:
    with open("/proc/self/statm") as file:
        return int(file.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def run_in_subprocess(child: str, args: argparse.Namespace) -> dict:
    """Run one child (a tool, or "queues"); its JSON result, plus wall seconds and the peak RSS of its process tree."""
    command = [sys.executable, __file__, *args.corpus, "--vocab-size", str(args.vocab_size), "--child", child,
               "--repeats", str(args.repeats)]
    environment = dict(os.environ)
    if args.workers:
        command += ["--workers", str(args.workers)]
        environment["RAYON_NUM_THREADS"] = str(args.workers)  # HF tokenizers' thread pool
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=environment)
    memory = PeakTreeMemory(process.pid)
    _, status, _ = os.wait4(process.pid, 0)
    memory.stop()
    assert process.stdout is not None
    output = process.stdout.read()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{child} failed with exit code {os.waitstatus_to_exitcode(status)}")
    result = json.loads(output.strip().splitlines()[-1])
    result["peak_mb"], result["peak_pss_mb"] = memory.rss / 1e6, memory.pss / 1e6
    return result


def compare_tools(args: argparse.Namespace) -> None:
    results: dict[str, list[dict]] = {tool: [] for tool in args.tools}
    for repeat in range(args.repeats):
        for tool in args.tools if repeat % 2 == 0 else args.tools[::-1]:
            results[tool].append(run_in_subprocess(tool, args))
        print(f"run {repeat + 1}: " + " | ".join(
            f"{tool} {results[tool][-1]['wall']:7.2f} s {results[tool][-1]['peak_mb']:7.0f} MB "
            f"(PSS {results[tool][-1]['peak_pss_mb']:.0f} MB)" for tool in args.tools)
            + ("" if not {"hf_bpe", "hf_tokenizers"} <= set(args.tools) else
               f" | time ratio {results['hf_bpe'][-1]['wall'] / results['hf_tokenizers'][-1]['wall']:.2f}, "
               f"memory ratio {results['hf_bpe'][-1]['peak_mb'] / results['hf_tokenizers'][-1]['peak_mb']:.2f}"),
            flush=True)

    def median(tool: str, key: str) -> float:
        return statistics.median(run[key] for run in results[tool])

    print("median: " + " | ".join(f"{tool} {median(tool, 'wall'):.2f} s {median(tool, 'peak_mb'):.0f} MB "
                                  f"(PSS {median(tool, 'peak_pss_mb'):.0f} MB)"
                                  for tool in args.tools), end="")
    if not {"hf_bpe", "hf_tokenizers"} <= set(args.tools):
        print()
        return
    pairs = list(zip(results["hf_bpe"], results["hf_tokenizers"]))
    print(f" | time ratio {statistics.median(ours['wall'] / theirs['wall'] for ours, theirs in pairs):.2f}, "
          f"memory ratio {statistics.median(ours['peak_mb'] / theirs['peak_mb'] for ours, theirs in pairs):.2f}")
    ours_first = {tuple(pair) for pair in results["hf_bpe"][0]["first_merges"]}
    theirs_first = {tuple(pair) for pair in results["hf_tokenizers"][0]["first_merges"]}
    print(f"merges: hf_bpe {results['hf_bpe'][0]['num_merges']}, HF {results['hf_tokenizers'][0]['num_merges']}; "
          f"first {OVERLAP_MERGES} merges in common: {len(ours_first & theirs_first)}")


def compare_queues(args: argparse.Namespace) -> None:
    result = run_in_subprocess("queues", args)
    seconds = result["seconds"]
    buckets, heap = statistics.median(seconds["buckets"]), statistics.median(seconds["heap"])
    print(f"merge loop ({result['num_merges']} merges, same for both), median of {args.repeats}: "
          f"buckets {buckets:.2f} s, heap {heap:.2f} s, buckets/heap {buckets / heap:.2f} "
          f"(runs: buckets {', '.join(f'{s:.2f}' for s in seconds['buckets'])}; "
          f"heap {', '.join(f'{s:.2f}' for s in seconds['heap'])})")
    structures = result["structures"]
    print(f"merge loop structures: {structures['distinct_pretokens']:,} distinct pre-tokens, "
          f"{structures['words']:,} words of 2+ bytes holding {structures['positions']:,} bytes, "
          f"{structures['pairs']:,} distinct pairs, {structures['index_entries']:,} index entries; "
          f"building them added {structures['corpus_rss_mb']:.0f} MB RSS; "
          f"peak RSS of that process (counting included) {result['peak_mb']:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", nargs="+", help="UTF-8 text files, documents separated by <|endoftext|>")
    parser.add_argument("--vocab-size", type=int, required=True)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each tool (default 3)")
    parser.add_argument("--workers", type=int, default=None,
                        help="processes for hf_bpe, threads for HF (default: each tool's own, all CPUs)")
    parser.add_argument("--tools", nargs="*", choices=ALL_TOOLS, default=list(TOOLS),
                        help="whole trainings to compare (default: hf_bpe and hf_tokenizers; none with --tools alone; "
                             "hf_bpe_stream reads JSON lines files as a streaming dataset)")
    parser.add_argument("--queues", action="store_true", help="also time the merge loop with each priority queue")
    parser.add_argument("--child", choices=[*ALL_TOOLS, "queues"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "queues":
        print(json.dumps(run_queues(args.corpus, args.vocab_size, args.workers, args.repeats)))
    elif args.child:
        print(json.dumps(run_tool(args.child, args.corpus, args.vocab_size, args.workers)))
    else:
        print(f"{', '.join(args.corpus)}: {sum(os.path.getsize(path) for path in args.corpus) / 1e6:,.0f} MB, "
              f"vocab {args.vocab_size:,}", flush=True)
        if args.tools:
            compare_tools(args)
        if args.queues:
            compare_queues(args)


if __name__ == "__main__":
    main()
