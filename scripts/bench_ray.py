"""Benchmark the Ray engine against the local engine on this machine: the overhead of running through Ray.

    python scripts/bench_ray.py CORPUS... [--nodes 2] [--cpus-per-node 1] [--repeats 2] [--tokenize FILE] \
        [--object-store-mb MB] [--json FILE]

The figures of docs/benchmarks.md for the 1.2 GB Linux corpus (documents split at `<|endoftext|>`):

    python scripts/bench_ray.py --tokenize ~/.cache/hf_bpe_corpora/linux_code.txt --repeats 1 \
        --jsonl ~/.cache/hf_bpe_corpora/linux_code.jsonl --json ray_linux.json

Starts a throwaway Ray cluster on loopback (a head node and `--nodes - 1` worker nodes joining it with `ray start
--address`, `--cpus-per-node` CPUs each), then alternates, `--repeats` times:

* counting: `count_pretokens_in_files(CORPUS..., engine=RayCountingEngine(address))` (what `hf-bpe train --engine
  ray --ray-address ADDRESS` does before the merge loop, connecting and disconnecting as the CLI does) against the
  local engine with as many worker processes as the cluster has CPUs;
* with `--tokenize FILE`: FILE cut into documents (at `<|endoftext|>` when it has one, else every `--doc-lines`
  lines), written as JSON lines (streamed; `--jsonl PATH` keeps the file and reuses it), then `hf-bpe
  tokenize-dataset` with `--engine ray` against `--engine local --num-proc CPUs`, each as its own driver process,
  with a tokenizer trained on FILE's first MB.

Results are checked equal (counts, token bytes) and the median wall times and their ratio printed. For each run the
script samples (every 0.2 s) the peak RSS (VmHWM) of every process: the driver, its descendants (local pool
workers), and every process of the Ray cluster (raylets, GCS, agents, actors); and the object store's peak use and
spill, from Ray's own figures (`hf_bpe.cluster.store_stats`). `--json FILE` appends one record per engine and input
(`scripts/bench_results.py`). The cluster's start-up time is printed once: a real cluster is started once and
serves many runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_results import append_result

from hf_bpe.cluster.local_cluster import LocalRayCluster
from hf_bpe.cluster.store_stats import ObjectStoreMonitor
from hf_bpe.data.shards import file_sha256
from hf_bpe.train.counting.count import count_pretokens_in_files
from hf_bpe.train.counting.ray_counting import RayCountingEngine

SPECIAL = "<|endoftext|>"


class PeakMemory:
    """Samples (every 0.2 s) the RSS peak (VmHWM) of every process of a run: `roots` and their descendants (the
    driver and a local pool), and `members()` (the processes of the Ray cluster), by process id and role."""

    def __init__(self, roots: Callable[[], list[int]], members: Callable[[], list[int]] = list,
                 exclude: Callable[[], list[int]] = list) -> None:
        self.roots, self.members, self.exclude = roots, members, exclude
        self.peaks: dict[int, tuple[str, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            pids = set(self.members())
            for root in self.roots():
                pids.add(root)
                pids.update(_descendants(root))
            for pid in pids - set(self.exclude()):
                peak = _peak_rss_mb(pid)
                if peak:
                    role = _role(pid)
                    self.peaks[pid] = (role, max(peak, self.peaks.get(pid, (role, 0.0))[1]))
            if self._stop.wait(0.2):
                return

    def by_role(self) -> dict[str, float]:
        """The largest peak of each role (driver, pool worker, raylet, an actor class...)."""
        roles: dict[str, float] = {}
        for role, peak in self.peaks.values():
            roles[role] = max(roles.get(role, 0.0), peak)
        return dict(sorted(roles.items(), key=lambda item: -item[1]))

    def total_mb(self) -> float:
        return sum(peak for _, peak in self.peaks.values())


def _peak_rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _role(pid: int) -> str:
    """What a process is: a Ray actor's class (`ray::_EncodingWorker`), a Ray daemon, or a command's name."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            arguments = cmdline.read().split(b"\0")
    except OSError:
        return "?"
    first = arguments[0].decode(errors="replace")
    if first.startswith("ray::"):
        return first.split(".")[0].split()[0]
    for argument in arguments[:3]:
        name = Path(argument.decode(errors="replace")).name
        if name in ("raylet", "gcs_server") or name.endswith(".py") or name == "hf_bpe.cli":
            return name
    return Path(first).name


def _descendants(root: int) -> list[int]:
    from hf_bpe.cluster.local_cluster import _descendants as below

    return below(root)


def cluster_pids(cluster: LocalRayCluster) -> list[int]:
    """Every process of the cluster: its `ray start` processes (children of this script) and what they started."""
    pids = set(cluster._member_pids())
    for process in cluster.processes.values():
        pids.add(process.pid)
        pids.update(_descendants(process.pid))
    return sorted(pids)


def timed(function: Callable[[], Any], memory: PeakMemory, store: ObjectStoreMonitor | None = None
          ) -> tuple[float, Any]:
    with memory, store if store is not None else contextlib.nullcontext():
        start = time.perf_counter()
        result = function()
        seconds = time.perf_counter() - start
    return seconds, result


def compare(name: str, runs: dict[str, Callable[[PeakMemory], tuple[float, Any, PeakMemory, Any]]], repeats: int,
            same: Callable[[Any, Any], bool], json_path: str | None, record: dict[str, Any]) -> None:
    """Alternate the engines' runs `repeats` times; print the median times, the ratio, the peaks; append records."""
    times: dict[str, list[float]] = {engine: [] for engine in runs}
    last: dict[str, tuple[PeakMemory, Any]] = {}
    for _ in range(repeats):
        results = {}
        for engine, run in runs.items():
            seconds, results[engine], memory, store = run()
            times[engine].append(seconds)
            last[engine] = (memory, store)
            print(f"  {name} {engine}: {seconds:.2f} s; peak RSS by role (MB): "
                  f"{ {role: round(mb) for role, mb in memory.by_role().items()} }", flush=True)
        assert same(results["local"], results["ray"]), f"{name}: the engines disagree"
    local_s, ray_s = statistics.median(times["local"]), statistics.median(times["ray"])
    _, store = last["ray"]
    print(f"| {name} | {local_s:.2f} s | {ray_s:.2f} s | {ray_s / local_s:.2f}x | "
          f"{store.peak_used_bytes / 1e6:.0f} MB / {store.peak_spilled_bytes / 1e6:.0f} MB | "
          f"{last['local'][0].total_mb():.0f} / {last['ray'][0].total_mb():.0f} MB |", flush=True)
    for engine in runs:
        memory, engine_store = last[engine]
        append_result(json_path, "ray", **record, work=name, engine=engine, seconds=statistics.median(times[engine]),
                      all_seconds=times[engine], peak_rss_mb_by_role=memory.by_role(),
                      peak_rss_mb_by_process={str(pid): [role, round(mb, 1)] for pid, (role, mb) in
                                              memory.peaks.items()},
                      object_store_peak_bytes=engine_store.peak_used_bytes if engine_store else None,
                      spilled_peak_bytes=engine_store.peak_spilled_bytes if engine_store else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpora", nargs="*", help="text files to count (the training inputs)")
    parser.add_argument("--nodes", type=int, default=2, help="nodes of the local cluster (default: %(default)s)")
    parser.add_argument("--cpus-per-node", type=int, default=1, help="CPUs per node (default: %(default)s)")
    parser.add_argument("--object-store-mb", type=int, help="object store per node, MB (default: Ray's)")
    parser.add_argument("--repeats", type=int, default=2, help="alternating runs of each engine (default: %(default)s)")
    parser.add_argument("--train-vocab", type=int, metavar="V",
                        help="also time the driver's merge loop (train_bpe_from_counts) on the counts, to vocab V")
    parser.add_argument("--tokenize", metavar="FILE", help="also compare tokenize-dataset on FILE cut into documents")
    parser.add_argument("--doc-lines", type=int, default=20,
                        help="lines per document for --tokenize when FILE has no <|endoftext|> (default: 20)")
    parser.add_argument("--jsonl", metavar="PATH", help="where to keep FILE as JSON lines (reused if it exists)")
    parser.add_argument("--json", metavar="FILE", help="append the results to this JSON file (bench_results.py)")
    args = parser.parse_args()
    cpus = args.nodes * args.cpus_per_node

    start = time.perf_counter()
    store_bytes = args.object_store_mb << 20 if args.object_store_mb else None
    with LocalRayCluster(args.nodes, args.cpus_per_node, object_store_memory=store_bytes) as cluster:
        os.environ.update(cluster.environment())
        seconds = time.perf_counter() - start
        print(f"cluster of {args.nodes} nodes x {args.cpus_per_node} CPU started in {seconds:.1f} s "
              f"at {cluster.address}", flush=True)
        import ray

        ray.init(address=cluster.address, logging_level="WARNING", log_to_driver=False)  # for the store's figures
        print("| work | local engine | ray engine | ray / local | object store peak / spill (ray) | "
              "peak RSS, sum over processes, local / ray |\n|---|---:|---:|---:|---:|---:|")
        record = {"nodes": args.nodes, "cpus_per_node": args.cpus_per_node, "object_store_mb": args.object_store_mb}
        if args.corpora:
            bench_count(args, cluster, cpus, record)
        if args.tokenize:
            bench_tokenize(args, cluster, cpus, record)


def bench_count(args: argparse.Namespace, cluster: LocalRayCluster, cpus: int, record: dict[str, Any]) -> None:
    me = os.getpid()

    def run(function: Callable[[], Any], ray_engine: bool) -> Callable[[], tuple[float, Any, PeakMemory, Any]]:
        def measured() -> tuple[float, Any, PeakMemory, Any]:
            # The cluster's nodes are children of this script: counted for the Ray engine only.
            memory = (PeakMemory(lambda: [me], lambda: cluster_pids(cluster)) if ray_engine
                      else PeakMemory(lambda: [me], exclude=lambda: cluster_pids(cluster)))
            store = ObjectStoreMonitor(cluster.temp_dir, interval=0.2)
            seconds, result = timed(function, memory, store)
            return seconds, result, memory, store
        return measured

    megabytes = sum(os.path.getsize(path) for path in args.corpora) / 1e6
    compare(f"count {', '.join(Path(path).name for path in args.corpora)} ({megabytes:.0f} MB)", {
        "local": run(lambda: count_pretokens_in_files(args.corpora, [SPECIAL], num_workers=cpus, progress=False),
                     False),
        "ray": run(lambda: count_pretokens_in_files(args.corpora, [SPECIAL], progress=False,
                                                    engine=RayCountingEngine(cluster.address)), True),
    }, args.repeats, lambda first, second: first == second, args.json,
        {**record, "corpus": [Path(path).name for path in args.corpora], "corpus_bytes": int(megabytes * 1e6)})
    if args.train_vocab:
        bench_merge_loop(args.corpora, cpus, args.train_vocab)


def bench_merge_loop(corpora: list[str], cpus: int, vocab_size: int) -> None:
    """The part of training that runs on the driver whatever the engine: its time and the distinct pre-tokens."""
    from hf_bpe.train.api import train_bpe_from_counts

    counts = count_pretokens_in_files(corpora, [SPECIAL], num_workers=cpus, progress=False)
    memory = PeakMemory(lambda: [os.getpid()])
    seconds, (_, merges) = timed(lambda: train_bpe_from_counts(counts, vocab_size, [SPECIAL]), memory)
    print(f"merge loop on the driver: {len(counts):,} distinct pre-tokens, {len(merges):,} merges in {seconds:.1f} s, "
          f"driver peak RSS {memory.by_role()}", flush=True)


def write_jsonl(path: str, target: Path, doc_lines: int) -> int:
    """FILE as JSON lines, streamed: documents split at <|endoftext|> when FILE has one, else every `doc_lines`
    lines. Returns the number of documents."""
    with open(path, encoding="utf-8") as probe:
        by_eot = SPECIAL in probe.read(1 << 24)
    count = 0
    temporary = target.with_name(f".{target.name}.tmp")
    with open(path, encoding="utf-8", newline="") as source, open(temporary, "w", encoding="utf-8") as out:
        pending: list[str] = []
        for line in source:
            if by_eot and SPECIAL in line:
                head, *documents = line.split(SPECIAL)
                pending.append(head)
                for document in documents:
                    out.write(json.dumps({"text": "".join(pending)}) + "\n")
                    count += 1
                    pending = [document]
                continue
            pending.append(line)
            if not by_eot and len(pending) == doc_lines:
                out.write(json.dumps({"text": "".join(pending)}) + "\n")
                count, pending = count + 1, []
        if "".join(pending):
            out.write(json.dumps({"text": "".join(pending)}) + "\n")
            count += 1
    os.replace(temporary, target)
    return count


def bench_tokenize(args: argparse.Namespace, cluster: LocalRayCluster, cpus: int, record: dict[str, Any]) -> None:
    from hf_bpe.formats.hf_directory import save_tokenizer_directory
    from hf_bpe.train.api import train_bpe_from_iterator

    work = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    source = Path(args.jsonl) if args.jsonl else work / "docs.jsonl"
    if not source.exists():
        print(f"  {source}: {write_jsonl(args.tokenize, source, args.doc_lines):,} documents written", flush=True)
    with open(args.tokenize, encoding="utf-8") as file:
        head = file.read(1 << 20)
    vocab, merges = train_bpe_from_iterator([head], 8000, [SPECIAL])
    tokenizer = save_tokenizer_directory(work / "tok", vocab, merges, [SPECIAL])
    runs = iter(range(1_000_000))

    def cli(engine: str) -> Callable[[], tuple[float, Any, PeakMemory, Any]]:
        def measured() -> tuple[float, Any, PeakMemory, Any]:
            out = work / f"{engine}-{next(runs)}"
            options = (["--engine", "ray", "--ray-address", cluster.address, "--concatenate"] if engine == "ray"
                       else ["--num-proc", str(cpus)])
            command = [sys.executable, "-m", "hf_bpe.cli", "tokenize-dataset", "--tokenizer", str(tokenizer),
                       "--dataset", "json", "--data-files", str(source), "--out", str(out), "--no-progress", *options]
            driver: list[int] = []
            memory = PeakMemory(lambda: driver, lambda: cluster_pids(cluster) if engine == "ray" else [])
            store = ObjectStoreMonitor(cluster.temp_dir, interval=0.2) if engine == "ray" else None

            def run() -> str:
                process = subprocess.Popen(command, env=cluster.environment())
                driver.append(process.pid)
                if process.wait() != 0:
                    raise SystemExit(f"{engine} failed: {' '.join(command)}")
                digest = file_sha256(out / "train.bin")
                import shutil

                shutil.rmtree(out, ignore_errors=True)
                return digest

            seconds, digest = timed(run, memory, store)
            return seconds, digest, memory, store
        return measured

    megabytes = source.stat().st_size / 1e6
    compare(f"tokenize-dataset {Path(args.tokenize).name} ({megabytes:.0f} MB jsonl)",
            {"local": cli("local"), "ray": cli("ray")}, args.repeats, lambda first, second: first == second,
            args.json, {**record, "corpus": Path(args.tokenize).name, "jsonl_bytes": source.stat().st_size})
    import shutil

    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
