"""Benchmark pre-token counting (hf_bpe.train.counting.count): time, CPU and peak memory, on corpus files up to
gigabytes.

    python scripts/bench_count.py CORPUS... [--workers 1 2] [--chunk-bytes N] [--rounds 3] [--reference]
                                  [--iterator] [--sources]

Each run is a fresh Python process (`count_pretokens_in_files` with each worker count in turn, alternating,
`--rounds` times), so that its peak memory is its own: the peak memory of the whole process tree (the counting
process and its workers, summed, sampled every 50 ms from /proc) is printed beside the median seconds,
MB/s and CPU seconds (all processes: on a shared machine they say more than wall time). The peak is given as RSS,
which counts the pages a forked worker shares with its parent once per process, and as PSS, which divides them
among the processes sharing them (the memory the tree really holds). `--iterator` also runs
`count_pretokens_in_iterator` over the corpus streamed as a `datasets.IterableDataset` of lines (each line a text, so
its counts differ from the files' where a pre-token spans lines), to show that counting a stream is bounded too.
`--sources` also counts each CORPUS as a named source of its own (`count_sources_in_files`, one table per source,
as `hf-bpe train NAME=PATH ...` counts), alternating with the plain runs, and checks that the sources' counts add up
to the plain counts (issue 35's bound: at most 1.1x plain counting's time and memory). Its seconds are the counting's
alone, as for the plain runs; the check adds the sources up after, freeing each source's table once added.
`--reference` also runs the plain single-process reference (`Counter(GPT2_REGEX.findall(doc))` over the documents
split at <|endoftext|>, the whole corpus in memory: not for gigabytes), checks that the counts are equal, and
prints the speed-up over it. The Linux corpus (1.2 GB) takes several minutes per run on 2 cores:

    python scripts/bench_count.py $LINUX --rounds 1
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter

from tree_memory import PeakTreeMemory

SPECIAL = "<|endoftext|>"


def run_one(kind: str, paths: list[str], workers: int, chunk_bytes: int) -> None:
    """In the child process: count, then print one JSON line with the time and a digest of the counts."""
    start = time.perf_counter()
    if kind == "reference":
        counts = reference_counts(paths)
    elif kind == "iterator":
        import datasets

        from hf_bpe.train.counting.count import count_pretokens_in_iterator

        datasets.disable_progress_bars()
        stream = datasets.load_dataset("text", data_files=paths, split="train", streaming=True)
        counts = count_pretokens_in_iterator((row["text"] for row in stream), [SPECIAL], num_workers=workers,
                                             progress=False)
    elif kind == "sources":
        from hf_bpe.train.counting.sources import count_sources_in_files

        names = [os.path.splitext(os.path.basename(path))[0] for path in paths]
        by_source = count_sources_in_files({f"{index}_{name}": path for index, (name, path)
                                            in enumerate(zip(names, paths))}, [SPECIAL], num_workers=workers,
                                           chunk_bytes=chunk_bytes, progress=False)
        seconds = time.perf_counter() - start  # counting only: adding up the sources is the bench's check
        counts = Counter()
        while by_source:  # each source's table freed once added, so that the check holds no more than the result
            counts.update(by_source.popitem()[1])
    else:
        from hf_bpe.train.counting.count import count_pretokens_in_files

        counts = count_pretokens_in_files(paths, [SPECIAL], num_workers=workers, chunk_bytes=chunk_bytes,
                                          progress=False)
    if kind != "sources":
        seconds = time.perf_counter() - start
    digest = hashlib.sha256(repr(sorted(counts.items())).encode()).hexdigest()[:16]
    print(json.dumps({"seconds": seconds, "distinct": len(counts), "digest": digest}))


def reference_counts(paths: list[str]) -> Counter[bytes]:
    from hf_bpe.pretokenize import GPT2_REGEX

    counts: Counter[bytes] = Counter()
    for path in paths:
        with open(path, encoding="utf-8") as file:
            text = file.read()
        for document in text.split(SPECIAL):
            counts.update(pretoken.encode() for pretoken in GPT2_REGEX.findall(document))
    return counts


def measure(kind: str, paths: list[str], workers: int, chunk_bytes: int) -> dict[str, float | str]:
    """Run one count in a child process; its result, wall seconds, CPU seconds and peak tree RSS."""
    command = [sys.executable, __file__, "--run-one", kind, "--workers", str(workers), "--chunk-bytes",
               str(chunk_bytes), *paths]
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    memory = PeakTreeMemory(child.pid)
    _, status, usage = os.wait4(child.pid, 0)
    memory.stop()
    peak_rss, peak_pss = memory.rss, memory.pss
    wall = time.perf_counter() - start
    assert child.stdout is not None
    output = child.stdout.read()
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        sys.exit(f"{kind} run failed with exit code {child.returncode}")
    result = json.loads(output.strip().splitlines()[-1])
    # The child's rusage includes its workers (they were waited for) but not this process's sampling.
    result.update(wall=wall, cpu=usage.ru_utime + usage.ru_stime, peak_rss=peak_rss, peak_pss=peak_pss)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpora", nargs="+")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--chunk-bytes", type=int, default=1 << 20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reference", action="store_true")
    parser.add_argument("--iterator", action="store_true")
    parser.add_argument("--sources", action="store_true")
    parser.add_argument("--run-one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run_one:
        run_one(args.run_one, args.corpora, args.workers[0], args.chunk_bytes)
        return
    megabytes = sum(os.path.getsize(path) for path in args.corpora) / 1e6
    runs: dict[str, list[dict[str, float | str]]] = {}
    for _ in range(args.rounds):
        for workers in args.workers:
            runs.setdefault(f"files workers={workers}", []).append(
                measure("files", args.corpora, workers, args.chunk_bytes))
            if args.iterator:
                runs.setdefault(f"iterator workers={workers}", []).append(
                    measure("iterator", args.corpora, workers, args.chunk_bytes))
            if args.sources:
                runs.setdefault(f"sources workers={workers}", []).append(
                    measure("sources", args.corpora, workers, args.chunk_bytes))
    if args.sources:
        for workers in args.workers:
            results = runs[f"files workers={workers}"] + runs[f"sources workers={workers}"]
            same = {result["digest"] for result in results}
            print(f"sources workers={workers}: counts added up {'equal' if len(same) == 1 else 'DIFFER from'} "
                  "the plain counts")
    if args.reference:
        runs["reference (1 process)"] = [measure("reference", args.corpora, 1, args.chunk_bytes)]
        reference_digest = runs["reference (1 process)"][0]["digest"]
        for name, results in runs.items():
            if name.startswith("files"):
                same = all(result["digest"] == reference_digest for result in results)
                print(f"{name}: counts {'equal' if same else 'DIFFER'} to the reference")
    first = next(iter(runs.values()))[0]
    print(f"{megabytes:.1f} MB, {first['distinct']} distinct pre-tokens, chunk_bytes={args.chunk_bytes} "
          "(shared machine: compare ratios within one run)")
    # Seconds as measured inside the child: counting only, without starting Python and importing.
    reference_seconds = float(runs["reference (1 process)"][0]["seconds"]) if args.reference else float("nan")
    for name, results in runs.items():
        median = statistics.median(float(result["seconds"]) for result in results)
        cpu = statistics.median(float(result["cpu"]) for result in results)
        peak_rss = max(float(result["peak_rss"]) for result in results)
        peak_pss = max(float(result["peak_pss"]) for result in results)
        print(f"{name:24s} median {median:7.2f} s  {megabytes / median:6.1f} MB/s  reference/this "
              f"{reference_seconds / median:5.2f}x  CPU (all processes) {cpu:7.2f} s  process tree peak RSS "
              f"{peak_rss / 1e9:6.3f} GB, PSS {peak_pss / 1e9:6.3f} GB  "
              f"runs {[round(float(result['seconds']), 1) for result in results]}")


if __name__ == "__main__":
    main()
