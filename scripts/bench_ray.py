"""Benchmark the Ray engine against the local engine on this machine: the overhead of running through Ray.

    python scripts/bench_ray.py CORPUS... [--nodes 2] [--cpus-per-node 1] [--repeats 2] [--tokenize FILE]

Starts a throwaway Ray cluster on loopback (a head node and `--nodes - 1` worker nodes joining it with `ray start
--address`, `--cpus-per-node` CPUs each), then alternates, `--repeats` times:

* counting: `count_pretokens_in_files(CORPUS..., engine=RayCountingEngine(address))` (what `hf-bpe train --engine
  ray --ray-address ADDRESS` does before the merge loop, connecting and disconnecting as the CLI does) against the
  local engine with as many worker processes as the cluster has CPUs;
* with `--tokenize FILE`: FILE cut into documents of `--doc-lines` lines, written as JSON lines, then
  `tokenize_dataset_ray` against `tokenize_dataset(num_proc=CPUs)` with a tokenizer trained on FILE's first MB.

Results are checked equal (counts, token bytes) and the median wall times and their ratio printed, with the peak
RSS of the driver and of the largest worker process (local pool workers or Ray actors, sampled from /proc). The
cluster's start-up time is printed once: a real cluster is started once and serves many runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hf_bpe.cluster.local_cluster import LocalRayCluster
from hf_bpe.data.ray_tokenize import tokenize_dataset_ray
from hf_bpe.train.count import count_pretokens_in_files
from hf_bpe.train.ray_counting import RayCountingEngine

SPECIAL = "<|endoftext|>"
WORKER_MARKERS = ("_CountingWorker", "_EncodingWorker")


class PeakMemory:
    """Samples (every 0.2 s) the RSS peak (VmHWM) of this process and the largest of its worker processes: its
    descendants (a local pool) and Ray actor processes of hf_bpe."""

    def __init__(self) -> None:
        self.driver_mb = self.worker_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        me = os.getpid()
        while not self._stop.is_set():
            self.driver_mb = max(self.driver_mb, _peak_rss_mb(me))
            for pid in _worker_pids(me):
                self.worker_mb = max(self.worker_mb, _peak_rss_mb(pid))
            self._stop.wait(0.2)


def _peak_rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _worker_pids(root: int) -> list[int]:
    parents: dict[int, int] = {}
    workers = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parents[int(entry)] = int(stat.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                if any(marker.encode() in cmdline.read() for marker in WORKER_MARKERS):
                    workers.append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    for pid in parents:  # descendants of this process (local engine workers)
        ancestor = parents.get(pid)
        while ancestor and ancestor != root:
            ancestor = parents.get(ancestor)
        if ancestor == root:
            workers.append(pid)
    return workers


def timed(function: Callable[[], Any]) -> tuple[float, Any, PeakMemory]:
    with PeakMemory() as memory:
        start = time.perf_counter()
        result = function()
        seconds = time.perf_counter() - start
    return seconds, result, memory


def compare(name: str, local: Callable[[], Any], remote: Callable[[], Any], repeats: int,
            same: Callable[[Any, Any], bool]) -> None:
    times: dict[str, list[float]] = {"local": [], "ray": []}
    memory: dict[str, tuple[float, float]] = {}
    for _ in range(repeats):
        results = {}
        for engine, function in (("local", local), ("ray", remote)):
            seconds, results[engine], peak = timed(function)
            times[engine].append(seconds)
            memory[engine] = max(memory.get(engine, (0, 0)), (peak.driver_mb, peak.worker_mb))
            print(f"  {name} {engine}: {seconds:.2f} s", flush=True)
        assert same(results["local"], results["ray"]), f"{name}: the engines disagree"
    local_s, ray_s = statistics.median(times["local"]), statistics.median(times["ray"])
    print(f"| {name} | {local_s:.2f} s | {ray_s:.2f} s | {ray_s / local_s:.2f}x | "
          f"{memory['local'][0]:.0f} / {memory['local'][1]:.0f} MB | "
          f"{memory['ray'][0]:.0f} / {memory['ray'][1]:.0f} MB |",
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpora", nargs="*", help="text files to count (the training inputs)")
    parser.add_argument("--nodes", type=int, default=2, help="nodes of the local cluster (default: %(default)s)")
    parser.add_argument("--cpus-per-node", type=int, default=1, help="CPUs per node (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=2, help="alternating runs of each engine (default: %(default)s)")
    parser.add_argument("--train-vocab", type=int, metavar="V",
                        help="also time the driver's merge loop (train_bpe_from_counts) on the counts, to vocab V")
    parser.add_argument("--tokenize", metavar="FILE", help="also compare tokenize-dataset on FILE cut into documents")
    parser.add_argument("--doc-lines", type=int, default=20, help="lines per document for --tokenize (default: 20)")
    args = parser.parse_args()
    cpus = args.nodes * args.cpus_per_node

    start = time.perf_counter()
    with LocalRayCluster(args.nodes, args.cpus_per_node) as cluster:
        os.environ.update(cluster.environment())
        seconds = time.perf_counter() - start
        print(f"cluster of {args.nodes} nodes x {args.cpus_per_node} CPU started in {seconds:.1f} s "
              f"at {cluster.address}", flush=True)
        print("| input | local engine | ray engine | ray / local | peak RSS local (driver / worker) | "
              "peak RSS ray (driver / worker) |\n|---|---:|---:|---:|---:|---:|")
        if args.corpora:
            megabytes = sum(os.path.getsize(path) for path in args.corpora) / 1e6
            compare(f"count {', '.join(Path(path).name for path in args.corpora)} ({megabytes:.0f} MB)",
                    lambda: count_pretokens_in_files(args.corpora, [SPECIAL], num_workers=cpus, progress=False),
                    lambda: count_pretokens_in_files(args.corpora, [SPECIAL], progress=False,
                                                     engine=RayCountingEngine(cluster.address)),
                    args.repeats, lambda first, second: first == second)
            if args.train_vocab:
                bench_merge_loop(args.corpora, cpus, args.train_vocab)
        if args.tokenize:
            bench_tokenize(args.tokenize, args.doc_lines, cluster.address, cpus, args.repeats)


def bench_merge_loop(corpora: list[str], cpus: int, vocab_size: int) -> None:
    """The part of training that runs on the driver whatever the engine: its time and the distinct pre-tokens."""
    from hf_bpe.train.api import train_bpe_from_counts

    counts = count_pretokens_in_files(corpora, [SPECIAL], num_workers=cpus, progress=False)
    seconds, (_, merges), memory = timed(lambda: train_bpe_from_counts(counts, vocab_size, [SPECIAL]))
    print(f"merge loop on the driver: {len(counts):,} distinct pre-tokens, {len(merges):,} merges in {seconds:.1f} s, "
          f"driver peak RSS {memory.driver_mb:.0f} MB", flush=True)


def bench_tokenize(path: str, doc_lines: int, address: str, cpus: int, repeats: int) -> None:
    from hf_bpe.data.pipeline import tokenize_dataset
    from hf_bpe.formats.hf_directory import save_tokenizer_directory
    from hf_bpe.train.api import train_bpe_from_iterator

    work = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    lines = Path(path).read_text(encoding="utf-8").splitlines(keepends=True)
    documents = ["".join(lines[start:start + doc_lines]) for start in range(0, len(lines), doc_lines)]
    source = work / "docs.jsonl"
    source.write_text("".join(json.dumps({"text": text}) + "\n" for text in documents), encoding="utf-8")
    vocab, merges = train_bpe_from_iterator([Path(path).read_text(encoding="utf-8")[:1 << 20]], 8000, [SPECIAL])
    tokenizer = save_tokenizer_directory(work / "tok", vocab, merges, [SPECIAL])
    runs = iter(range(1_000_000))

    def local() -> bytes:
        out = work / f"local-{next(runs)}"
        tokenize_dataset(tokenizer, "json", out, data_files=[str(source)], num_proc=cpus, progress=False)
        return (out / "train.bin").read_bytes()

    def remote() -> bytes:
        out = work / f"ray-{next(runs)}"
        tokenize_dataset_ray(tokenizer, "json", out, data_files=[str(source)], ray_address=address, progress=False,
                             concatenate=True)
        return (out / "train.bin").read_bytes()

    megabytes = source.stat().st_size / 1e6
    compare(f"tokenize-dataset {Path(path).name} ({len(documents):,} docs, {megabytes:.0f} MB jsonl)", local, remote,
            repeats, lambda first, second: first == second)
    import shutil

    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
