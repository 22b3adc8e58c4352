"""Benchmark continuing training from GPT-2's merges against training the same number of merges from scratch.

    python scripts/bench_extend.py $SHARED/corpora/multi_manpages.txt --merges 8000 --repeats 3 --json extend.json
    python scripts/bench_extend.py tests/fixtures/german.txt --merges 200 --repeats 1     # a quick check

Both cases count the corpus the same way (GPT-2's pattern, documents split at `<|endoftext|>`, `--workers`
processes), then run the merge loop: `extend` continues GPT-2 (`hf_bpe.train.extend.extend_bpe_from_counts`, which
first splits every distinct pre-token into GPT-2 tokens with hf_bpe's encoder) up to 50,257 + `--merges` tokens;
`scratch` trains `--merges` merges from the bytes (`train_bpe_from_counts`, vocab 256 + merges + 1). The issue's
goal: extending takes at most the time of training from scratch.

Each run is a fresh subprocess; reported per run: counting and merge-loop seconds (wall, and CPU of the process,
steadier on a shared machine; extending's include splitting the pre-tokens into GPT-2 tokens, also timed apart, but
not loading GPT-2's files, timed apart too), the start state's size (words, positions), and the peak resident
memory of the process and its finished workers. The cases alternate, and which goes first alternates between
repeats. `--bytes N` uses the first N bytes of the corpus (cut after a newline). `--json FILE` appends one record per
case and run (`bench_results.append_result`, kind "extend").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_results import append_result  # noqa: E402

CASES = ("extend", "scratch")
EOT = "<|endoftext|>"


def run_case(case: str, corpus: str, merges: int, workers: int | None) -> dict:
    """One case in this process (the child): count, then merge; the timings and sizes."""
    from hf_bpe.common.parallel import peak_memory_bytes
    from hf_bpe.evaluation.baselines import gpt2_tokenizer
    from hf_bpe.train.api import train_bpe_from_counts
    from hf_bpe.train.count import count_pretokens_in_files
    from hf_bpe.train.extend import base_words, extend_bpe_from_counts

    wall, cpu = time.perf_counter(), time.process_time()
    counts = count_pretokens_in_files([corpus], [EOT], num_workers=workers, progress=False)
    result = {"case": case, "distinct_pretokens": len(counts), "counting_seconds": time.perf_counter() - wall}
    if case == "extend":
        wall = time.perf_counter()
        base = gpt2_tokenizer()
        result["base_loading_seconds"] = time.perf_counter() - wall
        cpu = time.process_time()
        words = base_words(counts, base)  # once apart, for its size and time: extending makes it again
        result.update(words=len(words.lengths), positions=int(words.lengths.sum()),
                      segmenting_cpu_seconds=time.process_time() - cpu)
        del words
    wall, cpu = time.perf_counter(), time.process_time()
    if case == "extend":
        vocab, merges_made = extend_bpe_from_counts(base, counts, len(base.vocab) + merges, progress=False)
        result["new_merges"] = len(merges_made) - len(base.merges)
    else:
        vocab, merges_made = train_bpe_from_counts(counts, 256 + merges + 1, [EOT], progress=False)
        result["new_merges"] = len(merges_made)
    result.update(merging_seconds=time.perf_counter() - wall, merging_cpu_seconds=time.process_time() - cpu,
                  peak_mb=peak_memory_bytes() / 1e6, vocab_size=len(vocab))
    return result


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
        results: dict[str, list[dict]] = {case: [] for case in CASES}
        for repeat in range(args.repeats):
            for case in CASES if repeat % 2 == 0 else CASES[::-1]:
                result = run_in_subprocess(case, corpus, args)
                results[case].append(result)
                print(f"{case:8} counting {result['counting_seconds']:6.2f} s, merging {result['merging_seconds']:6.2f}"
                      f" s ({result['merging_cpu_seconds']:.2f} s CPU), {result['new_merges']} merges, peak "
                      f"{result['peak_mb']:.0f} MB", flush=True)
                append_result(args.json, "extend", corpus=Path(args.corpus).name, corpus_bytes=corpus_bytes,
                              merges=args.merges, **{key: round(value, 3) if isinstance(value, float) else value
                                                     for key, value in result.items()})
    medians = {case: sorted(run["merging_seconds"] for run in runs)[len(runs) // 2] for case, runs in results.items()}
    print(f"median merge loop: extend {medians['extend']:.2f} s, scratch {medians['scratch']:.2f} s, ratio "
          f"{medians['extend'] / max(medians['scratch'], 1e-9):.2f} (the goal: at most 1)")


if __name__ == "__main__":
    main()
