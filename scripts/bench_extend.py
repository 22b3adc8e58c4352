"""Benchmark continuing training from GPT-2's merges against training the same number of merges from scratch.

    python scripts/bench_extend.py $SHARED/corpora/multi_manpages.txt --merges 8000 --repeats 3 --json extend.json
    python scripts/bench_extend.py tests/fixtures/german.txt --merges 200 --repeats 1     # a quick check

Two comparisons, each case in a fresh subprocess, the cases alternating (which goes first alternates between
repeats):

* The merge phase (`extend`, `scratch`): both count the corpus the same way (GPT-2's pattern, documents split at
  `<|endoftext|>`, `--workers` processes), then run the merge phase: `extend` continues GPT-2
  (`hf_bpe.train.starts.extend.extend_bpe_from_counts`, which first splits every distinct pre-token into GPT-2 tokens
  with hf_bpe's encoder, in `--workers` processes) up to 50,257 + `--merges` tokens; `scratch` trains `--merges` merges
  from the bytes (`train_bpe_from_counts`, vocab 256 + merges + 1). Reported per run: counting and merge-phase
  seconds (wall, and CPU of the process and its finished workers, steadier on a shared machine); extending's
  include splitting the pre-tokens, also timed apart (`segmenting_*`), but not loading GPT-2's files
  (`base_loading_seconds`, apart too); the start state's size (words, positions); peak resident memory of the
  process and its finished workers.
* The whole command the user runs (`extend-command`, `scratch-command`): `hf-bpe train CORPUS --extend gpt2
  --vocab-size 50257+M` against `hf-bpe train CORPUS --vocab-size 257+M`, each writing its directory and card:
  wall seconds of the process, its CPU seconds with its workers', peak memory, and its phases (`--verbose`:
  startup, which holds loading GPT-2 for the extension, counting, merging, writing, card).

The issue's goal: extending takes at most the time of training from scratch; both ratios are printed. `--bytes N`
uses the first N bytes of the corpus (cut after a newline). `--json FILE` appends one record per case and run
(`bench_results.append_result`, kind "extend").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_results import append_result  # noqa: E402

CASES = ("extend", "scratch")
COMMANDS = ("extend-command", "scratch-command")
GPT2_VOCAB_SIZE = 50257
EOT = "<|endoftext|>"


def run_case(case: str, corpus: str, merges: int, workers: int | None) -> dict:
    """One case in this process (the child): count, then merge; the timings and sizes."""
    from hf_bpe.common.parallel import default_num_workers, peak_memory_bytes
    from hf_bpe.evaluation.baselines import gpt2_tokenizer
    from hf_bpe.train.api import train_bpe_from_counts
    from hf_bpe.train.counting.count import count_pretokens_in_files
    from hf_bpe.train.starts.extend import base_words, extend_bpe_from_counts

    wall = time.perf_counter()
    counts = count_pretokens_in_files([corpus], [EOT], num_workers=workers, progress=False)
    result = {"case": case, "distinct_pretokens": len(counts), "counting_seconds": time.perf_counter() - wall,
              "workers": workers or default_num_workers()}
    if case == "extend":
        wall = time.perf_counter()
        base = gpt2_tokenizer()
        result["base_loading_seconds"] = time.perf_counter() - wall
        wall, cpu = time.perf_counter(), cpu_seconds()
        words = base_words(counts, base, num_workers=result["workers"])  # once apart: extending makes it again
        result.update(words=len(words.lengths), positions=int(words.lengths.sum()),
                      segmenting_seconds=time.perf_counter() - wall, segmenting_cpu_seconds=cpu_seconds() - cpu)
        del words
    wall, cpu = time.perf_counter(), cpu_seconds()
    if case == "extend":
        vocab, merges_made = extend_bpe_from_counts(base, counts, len(base.vocab) + merges, progress=False,
                                                    num_workers=workers)
        result["new_merges"] = len(merges_made) - len(base.merges)
    else:
        vocab, merges_made = train_bpe_from_counts(counts, 256 + merges + 1, [EOT], progress=False)
        result["new_merges"] = len(merges_made)
    result.update(merging_seconds=time.perf_counter() - wall, merging_cpu_seconds=cpu_seconds() - cpu,
                  peak_mb=peak_memory_bytes() / 1e6, vocab_size=len(vocab))
    return result


def cpu_seconds() -> float:
    """CPU seconds of this process and of its finished (joined) workers."""
    import resource

    return sum(usage.ru_utime + usage.ru_stime for usage in map(resource.getrusage, (resource.RUSAGE_SELF,
                                                                                     resource.RUSAGE_CHILDREN)))


def run_command(case: str, corpus: str, args: argparse.Namespace, directory: str) -> dict:
    """`hf-bpe train` as the user runs it, in a fresh process: wall and CPU seconds, peak memory, its phases."""
    out = Path(directory) / f"out-{case}"
    extra = (["--extend", "gpt2", "--vocab-size", str(GPT2_VOCAB_SIZE + args.merges)] if case == "extend-command"
             else ["--vocab-size", str(256 + args.merges + 1)])
    if args.workers is not None:
        extra += ["--workers", str(args.workers)]
    command = [sys.executable, "-m", "hf_bpe.cli", "train", corpus, *extra, "--out", str(out), "--force",
               "--verbose", "--no-progress"]
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stderr = process.stderr.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"bench_extend: {' '.join(command)} failed:\n{stderr}")
    phases = json.loads(stderr.rsplit("hf-bpe train: phases ", 1)[1].splitlines()[0])
    return {"case": case, "process_seconds": seconds, "cpu_seconds": usage.ru_utime + usage.ru_stime,
            "peak_mb": usage.ru_maxrss * 1024 / 1e6, **{f"{name}_seconds": value for name, value in phases.items()}}


def run_in_subprocess(case: str, corpus: str, args: argparse.Namespace) -> dict:
    command = [sys.executable, __file__, corpus, "--child", case, "--merges", str(args.merges)]
    if args.workers is not None:
        command += ["--workers", str(args.workers)]
    start = time.perf_counter()
    finished = subprocess.run(command, capture_output=True, text=True, check=False)
    if finished.returncode != 0:
        raise SystemExit(f"bench_extend: the {case} run failed:\n{finished.stderr}")
    result = json.loads(finished.stdout.strip().splitlines()[-1])
    result["process_seconds"] = time.perf_counter() - start
    return result


def cut_corpus(path: str, size: int | None, directory: str) -> str:
    """The corpus, or its first `size` bytes cut after a newline, as a file in `directory`."""
    if size is None or size >= os.path.getsize(path):
        return path
    with open(path, "rb") as file:
        data = file.read(size)
    data = data[:data.rfind(b"\n") + 1] or data
    cut = Path(directory) / f"first_{len(data)}_bytes_{Path(path).name}"
    cut.write_bytes(data)
    return str(cut)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus")
    parser.add_argument("--merges", type=int, default=8000, help="new merges in both cases (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--bytes", type=int, default=None, help="use only the first N bytes of the corpus")
    parser.add_argument("--json", help="append the results to this JSON file")
    parser.add_argument("--child", choices=CASES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_case(args.child, args.corpus, args.merges, args.workers)))
        return
    with tempfile.TemporaryDirectory() as directory:
        corpus = cut_corpus(args.corpus, args.bytes, directory)
        corpus_bytes = os.path.getsize(corpus)
        results: dict[str, list[dict]] = {case: [] for case in CASES + COMMANDS}
        for repeat in range(args.repeats):
            for case in CASES if repeat % 2 == 0 else CASES[::-1]:
                result = run_in_subprocess(case, corpus, args)
                results[case].append(result)
                print(f"{case:8} counting {result['counting_seconds']:6.2f} s, merge phase "
                      f"{result['merging_seconds']:6.2f} s ({result['merging_cpu_seconds']:.2f} s CPU)"
                      + (f", of it splitting {result['segmenting_seconds']:.2f} s "
                         f"({result['segmenting_cpu_seconds']:.2f} s CPU), loading GPT-2 "
                         f"{result['base_loading_seconds']:.2f} s" if case == "extend" else "")
                      + f", {result['new_merges']} merges, peak {result['peak_mb']:.0f} MB", flush=True)
                record(args, corpus_bytes, result)
            for case in COMMANDS if repeat % 2 == 0 else COMMANDS[::-1]:
                result = run_command(case, corpus, args, directory)
                results[case].append(result)
                print(f"{case:15} {result['process_seconds']:6.2f} s ({result['cpu_seconds']:.2f} s CPU), peak "
                      f"{result['peak_mb']:.0f} MB; phases: " + ", ".join(
                          f"{name[:-8]} {value:.2f}" for name, value in result.items()
                          if name.endswith("_seconds") and name not in ("process_seconds", "cpu_seconds")
                          and value is not None), flush=True)
                record(args, corpus_bytes, result)
    merge_phase = {case: median(run["merging_seconds"] for run in results[case]) for case in CASES}
    command = {case: median(run["process_seconds"] for run in results[case]) for case in COMMANDS}
    print(f"median merge phase: extend {merge_phase['extend']:.2f} s, scratch {merge_phase['scratch']:.2f} s, ratio "
          f"{merge_phase['extend'] / max(merge_phase['scratch'], 1e-9):.2f}; whole command: extend "
          f"{command['extend-command']:.2f} s, scratch {command['scratch-command']:.2f} s, ratio "
          f"{command['extend-command'] / max(command['scratch-command'], 1e-9):.2f} (the goal: at most 1)")


def median(values: Iterable[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def record(args: argparse.Namespace, corpus_bytes: int, result: dict) -> None:
    append_result(args.json, "extend", corpus=Path(args.corpus).name, corpus_bytes=corpus_bytes, merges=args.merges,
                  **{key: round(value, 3) if isinstance(value, float) else value for key, value in result.items()})


if __name__ == "__main__":
    main()
