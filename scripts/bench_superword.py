"""Benchmark SuperBPE training (`train_bpe(..., superword_from=T)`) against plain training to the same vocab size, with
hf_bpe (and with HF tokenizers' BpeTrainer, `--tools plain,superword,hf_plain`): the bounds of issue 34 are SuperBPE at
most 2x hf_bpe's plain time and at most 1.25x its peak memory (summed PSS), on the same corpus in the same run.

    python scripts/bench_superword.py $SHARED/corpora/en_gcide.txt $SHARED/corpora/en_pydocs.txt \
        $SHARED/corpora/multi_manpages.txt "$SHARED/corpora/en_gcide.txt+$SHARED/corpora/en_pydocs.txt+..." \
        --vocab-size 32000 --superword-from 28000 --json docs/results/superword.json
    python scripts/bench_superword.py tests/fixtures/hf_corpora_sample.txt --vocab-size 2000 --superword-from 1500
    python scripts/bench_superword.py --plot docs/superword_scaling.png --json docs/results/superword.json

A corpus argument of several paths joined by "+" is one corpus of those files. Each training runs in a fresh
subprocess: its wall time (the training call alone, imports excluded, and the whole process), the peak memory of its
process tree (the child and its worker processes, sampled every 50 ms; scripts/tree_memory.py) as summed PSS, which
counts a page a forked worker shares with its parent once, and as summed RSS, which counts it once per process, and
the largest of any one process (the kernel's figure). Tools: `plain` (hf_bpe to --vocab-size), `superword` (hf_bpe,
stage 1 to --superword-from, then stage 2), `hf_plain` (BpeTrainer to --vocab-size, GPT-2's pattern). The tools
alternate, and which goes first alternates between repeats. `--json FILE` appends one record per tool and run
(`bench_results.append_result`, kind "superword"; hf_bpe's records with the sha256 of the merges,
`superword_merges.merges_sha256`), with the ratios to plain's medians in a final record per corpus
and setting. `--plot FILE` draws, from the newest record of each corpus and setting in `--json`, time and peak memory
against corpus size, plain and SuperBPE, one line per setting.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from bench_results import append_result, read_results
from superword_merges import merges_sha256
from tree_memory import run_measured

SPECIAL_TOKENS = ["<|endoftext|>"]
TOOLS = ("plain", "superword", "hf_plain")


def train(tool: str, corpus: str, vocab_size: int, transition: int, workers: int | None) -> dict:
    """One training in this process (the child): wall seconds and what was made."""
    paths = corpus.split("+")
    start = time.perf_counter()
    if tool == "hf_plain":
        from tokenizers import Tokenizer, models, pre_tokenizers, trainers

        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        tokenizer.train(paths, trainer)
        num_merges = len(json.loads(tokenizer.to_str())["model"]["merges"])
    else:
        from hf_bpe import train_bpe

        options = {"superword_from": transition} if tool == "superword" else {}
        _, merges = train_bpe(paths, vocab_size, SPECIAL_TOKENS, num_workers=workers, progress=False, **options)
        wall = time.perf_counter() - start
        return {"wall": wall, "num_merges": len(merges), "merges_sha256": merges_sha256(merges)}
    return {"wall": time.perf_counter() - start, "num_merges": num_merges}


def run_in_subprocess(tool: str, corpus: str, args: argparse.Namespace) -> dict:
    """One training in a fresh process: its result, the whole process's wall time and the memory figures."""
    environment = dict(os.environ)
    if args.workers:
        environment["RAYON_NUM_THREADS"] = str(args.workers)  # HF tokenizers' thread pool
    command = [sys.executable, __file__, corpus, "--child", tool, "--vocab-size", str(args.vocab_size),
               "--superword-from", str(args.superword_from)] + (["--workers", str(args.workers)] if args.workers
                                                                 else [])
    run = run_measured(command, environment)
    if run.returncode != 0:
        sys.exit(f"{tool} on {corpus} failed:\n{run.errors[-2000:]}")
    result = json.loads(run.output.strip().splitlines()[-1])
    result.update(process_wall=run.wall, peak_mb=run.memory.rss / 1e6, peak_pss_mb=run.memory.pss / 1e6,
                  max_process_mb=run.max_process_bytes / 1e6)
    return result


def corpus_name(corpus: str) -> str:
    return "+".join(Path(path).name for path in corpus.split("+"))


def compare(args: argparse.Namespace) -> None:
    tools = args.tools.split(",")
    for corpus in args.corpus:
        size = sum(Path(path).stat().st_size for path in corpus.split("+"))
        name = corpus_name(corpus)
        runs: dict[str, list[dict]] = {tool: [] for tool in tools}
        for repeat in range(args.repeats):
            for tool in (tools if repeat % 2 == 0 else tools[::-1]):
                result = run_in_subprocess(tool, corpus, args)
                runs[tool].append(result)
                print(f"{name} {tool:9} run {repeat + 1}: {result['wall']:8.2f} s training, "
                      f"{result['process_wall']:8.2f} s process, peak {result['peak_pss_mb']:7.0f} MB PSS, "
                      f"{result['peak_mb']:7.0f} MB RSS (largest process "
                      f"{result['max_process_mb']:.0f} MB), {result['num_merges']:,} merges", flush=True)
                append_result(args.json, "superword", corpus=name, corpus_bytes=size, tool=tool,
                              vocab_size=args.vocab_size, superword_from=args.superword_from, run=repeat, **result)
        fields = ("wall", "process_wall", "peak_mb", "peak_pss_mb")
        medians = {tool: {field: statistics.median(run[field] for run in results) for field in fields}
                   for tool, results in runs.items()}
        if "plain" not in medians or "superword" not in medians:
            continue
        time_ratio = medians["superword"]["process_wall"] / medians["plain"]["process_wall"]
        memory_ratio = medians["superword"]["peak_pss_mb"] / medians["plain"]["peak_pss_mb"]
        print(f"{name}: SuperBPE takes {time_ratio:.2f}x plain training's time (whole process; bound: 2x) and "
              f"{memory_ratio:.2f}x its peak memory (PSS; bound: 1.25x)", flush=True)
        append_result(args.json, "superword_summary", corpus=name, corpus_bytes=size,
                      vocab_size=args.vocab_size, superword_from=args.superword_from, medians=medians,
                      time_ratio_to_plain=time_ratio, memory_ratio_to_plain=memory_ratio)


def plot(records_path: str, out: str) -> None:
    """Time and peak memory against corpus size, for plain training and SuperBPE, from the newest summary record of
    each corpus and setting in `records_path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    newest: dict[tuple, dict] = {}  # the newest summary of each corpus and setting
    for record in read_results(records_path):
        if record.get("kind") == "superword_summary" and "memory_ratio_to_plain" in record:
            newest[record["corpus"], record["vocab_size"], record["superword_from"]] = record
    summaries = list(newest.values())
    commits = ", ".join(sorted({record["commit"] for record in summaries}))
    figure, (time_axes, memory_axes) = plt.subplots(1, 2, figsize=(11, 4.2))
    settings = sorted({(record["vocab_size"], record["superword_from"]) for record in summaries})
    for (vocab_size, transition), style in zip(settings, ("o", "s", "^")):
        chosen = sorted((record for record in summaries
                         if (record["vocab_size"], record["superword_from"]) == (vocab_size, transition)),
                        key=lambda record: record["corpus_bytes"])
        sizes = [record["corpus_bytes"] / 1e6 for record in chosen]
        for tool, color in (("plain", "tab:blue"), ("superword", "tab:orange")):
            label = f"{'plain' if tool == 'plain' else 'SuperBPE'}, {vocab_size:,}" + (
                f" (T = {transition:,})" if tool == "superword" else "")
            time_axes.plot(sizes, [record["medians"][tool]["process_wall"] for record in chosen], style + "-",
                           color=color, label=label)
            memory_axes.plot(sizes, [record["medians"][tool]["peak_pss_mb"] for record in chosen], style + "-",
                             color=color, label=label)
    for axes, title, unit in ((time_axes, "time (whole command)", "s"), (memory_axes, "peak memory (summed PSS)",
                                                                           "MB")):
        axes.set_xscale("log")
        axes.set_yscale("log")
        axes.set_xlabel("corpus size (MB)")
        axes.set_ylabel(unit)
        axes.set_title(title)
        axes.grid(True, which="both", alpha=0.3)
    time_axes.legend(fontsize=8)
    figure.suptitle(f"SuperBPE against plain training (hf_bpe {commits})")
    figure.tight_layout()
    figure.savefig(out, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", nargs="*", help="UTF-8 text files, documents separated by <|endoftext|>; "
                        "several joined by + are one corpus")
    parser.add_argument("--tools", default="plain,superword", help="which of plain, superword, hf_plain to run")
    parser.add_argument("--plot", help="draw the newest records of --json into this PNG")
    parser.add_argument("--vocab-size", type=int, default=32000)
    parser.add_argument("--superword-from", type=int, default=28000)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--workers", type=int, default=None, help="counting processes, and HF's threads")
    parser.add_argument("--json", help="append the records to this JSON file")
    parser.add_argument("--child", choices=TOOLS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(train(args.child, args.corpus[0], args.vocab_size, args.superword_from, args.workers)))
        return
    if args.corpus:
        compare(args)
    if args.plot:
        plot(args.json, args.plot)


if __name__ == "__main__":
    main()
