"""Benchmark SuperBPE training (`train_bpe(..., superword_from=T)`) against plain training to the same vocab size, with
hf_bpe and with HF tokenizers' BpeTrainer: the issue's bounds are SuperBPE at most 3x hf_bpe's plain time on the same
corpus, and a peak memory at most HF's for plain training.

    python scripts/bench_superword.py $SHARED/corpora/*.txt --vocab-size 32000 --superword-from 28000 --repeats 3 \
        --json docs/results/superword.json
    python scripts/bench_superword.py tests/fixtures/hf_corpora_sample.txt --vocab-size 2000 --superword-from 1500

Each corpus is trained on alone. Each training runs in a fresh subprocess: its wall time (the training call alone,
imports excluded, and the whole process), the peak memory of its process tree (the child and its worker processes,
sampled every 50 ms; scripts/tree_memory.py) as summed PSS, which counts a page a forked worker shares with its
parent once, and as summed RSS, which counts it once per process, and the largest of any one process (the kernel's
figure). The memory bound is checked on PSS: for HF's one process the two differ only by shared libraries' pages.
Tools: `plain` (hf_bpe to --vocab-size), `superword` (hf_bpe, stage 1 to --superword-from, then stage 2),
`hf_plain` (BpeTrainer to --vocab-size, GPT-2's pattern). The tools alternate, and which goes first alternates
between repeats. `--json FILE` appends one record per tool and run (`bench_results.append_result`, kind
"superword"), with the ratios to plain's and HF's medians in a final record per corpus.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from bench_results import append_result
from tree_memory import run_measured

SPECIAL_TOKENS = ["<|endoftext|>"]
TOOLS = ("plain", "superword", "hf_plain")


def train(tool: str, corpus: str, vocab_size: int, transition: int, workers: int | None) -> dict:
    """One training in this process (the child): wall seconds and what was made."""
    start = time.perf_counter()
    if tool == "hf_plain":
        from tokenizers import Tokenizer, models, pre_tokenizers, trainers

        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        tokenizer.train([corpus], trainer)
        num_merges = len(json.loads(tokenizer.to_str())["model"]["merges"])
    else:
        from hf_bpe import train_bpe

        options = {"superword_from": transition} if tool == "superword" else {}
        _, merges = train_bpe(corpus, vocab_size, SPECIAL_TOKENS, num_workers=workers, progress=False, **options)
        num_merges = len(merges)
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


def compare(args: argparse.Namespace) -> None:
    for corpus in args.corpus:
        size = Path(corpus).stat().st_size
        runs: dict[str, list[dict]] = {tool: [] for tool in TOOLS}
        for repeat in range(args.repeats):
            for tool in (TOOLS if repeat % 2 == 0 else TOOLS[::-1]):
                result = run_in_subprocess(tool, corpus, args)
                runs[tool].append(result)
                print(f"{Path(corpus).name} {tool:9} run {repeat + 1}: {result['wall']:8.2f} s training, "
                      f"{result['process_wall']:8.2f} s process, peak {result['peak_pss_mb']:7.0f} MB PSS, "
                      f"{result['peak_mb']:7.0f} MB RSS (largest process "
                      f"{result['max_process_mb']:.0f} MB), {result['num_merges']:,} merges", flush=True)
                append_result(args.json, "superword", corpus=Path(corpus).name, corpus_bytes=size, tool=tool,
                              vocab_size=args.vocab_size, superword_from=args.superword_from, run=repeat, **result)
        fields = ("wall", "process_wall", "peak_mb", "peak_pss_mb")
        medians = {tool: {field: statistics.median(run[field] for run in results) for field in fields}
                   for tool, results in runs.items()}
        time_ratio = medians["superword"]["wall"] / medians["plain"]["wall"]
        memory_ratio = medians["superword"]["peak_pss_mb"] / medians["hf_plain"]["peak_pss_mb"]
        rss_ratio = medians["superword"]["peak_mb"] / medians["hf_plain"]["peak_mb"]
        print(f"{Path(corpus).name}: SuperBPE takes {time_ratio:.2f}x plain training's time (bound: 3x) and "
              f"{memory_ratio:.2f}x HF plain training's peak memory (PSS; bound: 1x; summed RSS {rss_ratio:.2f}x)",
              flush=True)
        append_result(args.json, "superword_summary", corpus=Path(corpus).name, corpus_bytes=size,
                      vocab_size=args.vocab_size, superword_from=args.superword_from, medians=medians,
                      time_ratio_to_plain=time_ratio, memory_ratio_to_hf_plain=memory_ratio,
                      rss_ratio_to_hf_plain=rss_ratio)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", nargs="+", help="UTF-8 text files, documents separated by <|endoftext|>")
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
    compare(args)


if __name__ == "__main__":
    main()
