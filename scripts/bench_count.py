"""Benchmark pre-token counting (hf_bpe.count) on corpus files.

    python scripts/bench_count.py CORPUS... [--workers 1 2] [--chunk-bytes N] [--rounds 3] [--reference]

Runs `count_pretokens_in_files` with each worker count in turn, alternating, `--rounds` times, and prints the
median seconds and MB/s of each. `--reference` also times the plain single-process reference
(`Counter(GPT2_REGEX.findall(doc))` over the documents split at <|endoftext|>), checks that the counts are equal,
and prints the speed-up over it. CPU seconds (this process and the workers) are printed too: on a busy machine they
say more than wall time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections import Counter

from hf_bpe.count import DEFAULT_CHUNK_BYTES, count_pretokens_in_files
from hf_bpe.pretokenize import GPT2_REGEX

SPECIAL = "<|endoftext|>"


def cpu_seconds() -> float:
    """CPU time of this process and its finished children: less noisy than wall time on a shared machine."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def reference_counts(paths: list[str]) -> Counter[bytes]:
    counts: Counter[bytes] = Counter()
    for path in paths:
        with open(path, encoding="utf-8") as file:
            text = file.read()
        for document in text.split(SPECIAL):
            counts.update(pretoken.encode() for pretoken in GPT2_REGEX.findall(document))
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpora", nargs="+")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--chunk-bytes", type=int, default=DEFAULT_CHUNK_BYTES)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reference", action="store_true")
    args = parser.parse_args()
    megabytes = sum(os.path.getsize(path) for path in args.corpora) / 1e6
    timings: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    results = {}
    for _ in range(args.rounds):
        for workers in args.workers:
            start, cpu_start = time.perf_counter(), cpu_seconds()
            results[workers] = count_pretokens_in_files(args.corpora, [SPECIAL], num_workers=workers,
                                                        chunk_bytes=args.chunk_bytes, progress=False)
            timings.setdefault(f"hf_bpe workers={workers}", []).append(time.perf_counter() - start)
            cpu.setdefault(f"hf_bpe workers={workers}", []).append(cpu_seconds() - cpu_start)
    if args.reference:
        start, cpu_start = time.perf_counter(), cpu_seconds()
        reference = reference_counts(args.corpora)
        timings["reference (1 process)"] = [time.perf_counter() - start]
        cpu["reference (1 process)"] = [cpu_seconds() - cpu_start]
        for workers, counts in results.items():
            print(f"workers={workers}: counts {'equal' if counts == reference else 'DIFFER'} to the reference")
    print(f"{megabytes:.1f} MB, {len(next(iter(results.values())))} distinct pre-tokens, "
          f"chunk_bytes={args.chunk_bytes}")
    reference_seconds = statistics.median(timings.get("reference (1 process)", [float("nan")]))
    for name, seconds in timings.items():
        median = statistics.median(seconds)
        print(f"{name:24s} median {median:6.2f} s  {megabytes / median:6.1f} MB/s  "
              f"reference/this {reference_seconds / median:5.2f}x  CPU (all processes) "
              f"{statistics.median(cpu[name]):6.2f} s  runs {[round(s, 2) for s in seconds]}")


if __name__ == "__main__":
    main()
