"""Benchmark hf_bpe's `train_bpe` against HF tokenizers' BpeTrainer on the same corpus and vocab size.

    python scripts/bench_train.py /work/shared/corpora/en_gcide.txt /work/shared/corpora/en_pydocs.txt \
        --vocab-size 10000 --repeats 3 --workers 2

Each training runs in a fresh subprocess, so the peak RSS reported is that tool's alone (the child's own
`ru_maxrss` plus that of its worker processes). The tools alternate, and which goes first alternates between
repeats, so that load from other processes on the machine hits both alike. Reported per run: training wall time (in
the child, imports excluded), peak RSS, and the hf_bpe / HF ratio; then the medians, and the overlap of the two
tools' first 1000 merges (HF breaks ties between equally frequent pairs differently, so they are not identical).

Note: HF's trainer does not split documents at special tokens (it learns merges such as "<|" from
"<|endoftext|>" in the text); hf_bpe does. The corpora here are large enough for that to hardly matter.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

SPECIAL_TOKENS = ["<|endoftext|>"]
OVERLAP_MERGES = 1000


def train_hf_bpe(paths: list[str], vocab_size: int, workers: int | None) -> list[tuple[bytes, bytes]]:
    from hf_bpe import train_bpe

    _, merges = train_bpe(paths, vocab_size, SPECIAL_TOKENS, num_workers=workers, progress=False)
    return merges


def train_hf_tokenizers(paths: list[str], vocab_size: int, workers: int | None) -> list[tuple[bytes, bytes]]:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    from hf_bpe.gpt2_format import str_to_token

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train(paths, trainer)
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    return [(str_to_token(left), str_to_token(right))
            for left, right in (merge.split(" ") if isinstance(merge, str) else merge for merge in merges)]


TOOLS = {"hf_bpe": train_hf_bpe, "hf_tokenizers": train_hf_tokenizers}


def run_child(tool: str, paths: list[str], vocab_size: int, workers: int | None) -> None:
    """Train once and print a JSON line: wall seconds, peak RSS in MB, first merges as hex pairs."""
    start = time.perf_counter()
    merges = TOOLS[tool](paths, vocab_size, workers)
    wall = time.perf_counter() - start
    peak_kb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
               + resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    print(json.dumps({"wall": wall, "peak_mb": peak_kb / 1024, "num_merges": len(merges),
                      "first_merges": [[left.hex(), right.hex()] for left, right in merges[:OVERLAP_MERGES]]}))


def run_in_subprocess(tool: str, paths: list[str], vocab_size: int, workers: int | None) -> dict:
    command = [sys.executable, __file__, *paths, "--vocab-size", str(vocab_size), "--child", tool]
    environment = dict(os.environ)
    if workers:
        command += ["--workers", str(workers)]
        environment["RAYON_NUM_THREADS"] = str(workers)  # HF tokenizers' thread pool
    result = subprocess.run(command, capture_output=True, text=True, env=environment)
    if result.returncode != 0:
        sys.exit(f"{tool} failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", nargs="+", help="UTF-8 text files, documents separated by <|endoftext|>")
    parser.add_argument("--vocab-size", type=int, required=True)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=None, help="processes for hf_bpe, threads for HF")
    parser.add_argument("--child", choices=sorted(TOOLS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_child(args.child, args.corpus, args.vocab_size, args.workers)
        return

    results: dict[str, list[dict]] = {tool: [] for tool in TOOLS}
    for repeat in range(args.repeats):
        order = ["hf_bpe", "hf_tokenizers"] if repeat % 2 == 0 else ["hf_tokenizers", "hf_bpe"]
        for tool in order:
            results[tool].append(run_in_subprocess(tool, args.corpus, args.vocab_size, args.workers))
        ours, theirs = results["hf_bpe"][-1], results["hf_tokenizers"][-1]
        print(f"run {repeat + 1}: hf_bpe {ours['wall']:6.2f} s {ours['peak_mb']:6.0f} MB | "
              f"HF tokenizers {theirs['wall']:6.2f} s {theirs['peak_mb']:6.0f} MB | "
              f"time ratio {ours['wall'] / theirs['wall']:.2f}, memory ratio {ours['peak_mb'] / theirs['peak_mb']:.2f}",
              flush=True)

    def median(tool: str, key: str) -> float:
        return statistics.median(run[key] for run in results[tool])

    time_ratios = [ours["wall"] / theirs["wall"] for ours, theirs in zip(results["hf_bpe"], results["hf_tokenizers"])]
    memory_ratios = [ours["peak_mb"] / theirs["peak_mb"]
                     for ours, theirs in zip(results["hf_bpe"], results["hf_tokenizers"])]
    print(f"median: hf_bpe {median('hf_bpe', 'wall'):.2f} s {median('hf_bpe', 'peak_mb'):.0f} MB | "
          f"HF tokenizers {median('hf_tokenizers', 'wall'):.2f} s {median('hf_tokenizers', 'peak_mb'):.0f} MB | "
          f"time ratio {statistics.median(time_ratios):.2f}, memory ratio {statistics.median(memory_ratios):.2f}")
    ours_first = {tuple(pair) for pair in results["hf_bpe"][0]["first_merges"]}
    theirs_first = {tuple(pair) for pair in results["hf_tokenizers"][0]["first_merges"]}
    print(f"merges: hf_bpe {results['hf_bpe'][0]['num_merges']}, HF {results['hf_tokenizers'][0]['num_merges']}; "
          f"first {OVERLAP_MERGES} merges in common: {len(ours_first & theirs_first)}")


if __name__ == "__main__":
    main()
