"""Benchmark encoding one giant pre-token (megabytes without a space): time and memory per byte of its UTF-8.

    python scripts/bench_giant_pretoken.py --mb 16 --characters a é 日 ab --repeats 3 --json results.json

Each text is one of `--characters` repeated to `--mb` MB of UTF-8 (a run of one character, or of a short string,
is a single pre-token under GPT-2's pattern), encoded with `Tokenizer.encode_to_numpy` and GPT-2's merges
(`tests/fixtures`), each in a fresh process. Printed: the median wall time of `--repeats` untraced runs, the peak of
memory allocated during one more run under tracemalloc (numpy's buffers included; the input string excluded), and the
process's peak RSS growth over that run, each per byte of the text.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

from bench_results import append_result

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"


def peak_rss_bytes() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) << 10 for line in status if line.startswith("VmHWM:"))


def child(character: str, megabytes: float, repeats: int) -> None:
    from hf_bpe import Tokenizer

    tokenizer = Tokenizer.from_files(FIXTURES / "gpt2_vocab.json", FIXTURES / "gpt2_merges.txt", ["<|endoftext|>"])
    size = int(megabytes * 1e6)
    text = character * (size // len(character.encode()))
    size = len(text.encode())
    rss_before = peak_rss_bytes()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        ids = tokenizer.encode_to_numpy(text)
        seconds.append(time.perf_counter() - start)
    rss_growth = peak_rss_bytes() - rss_before
    tracemalloc.start()
    tokenizer.encode_to_numpy(text)
    traced = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(json.dumps({"character": character, "bytes": size, "characters": len(text), "ids": len(ids),
                      "seconds": statistics.median(seconds), "all_seconds": seconds,
                      "traced_bytes_per_byte": traced / size, "rss_growth_bytes_per_byte": rss_growth / size}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=16.0, help="size of each text in MB of UTF-8")
    parser.add_argument("--characters", nargs="+", default=["a", "é", "日", "ab"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, help="append the results to this JSON file (scripts/bench_results.py)")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], float(args.child[1]), int(args.child[2]))
        return
    print("| text | MB | ids | time | allocated peak / byte | RSS growth / byte | per character |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for character in args.characters:
        output = subprocess.run([sys.executable, __file__, "--child", character, str(args.mb), str(args.repeats)],
                                check=True, capture_output=True, text=True).stdout
        record = json.loads(output.splitlines()[-1])
        per_character = record["traced_bytes_per_byte"] * record["bytes"] / record["characters"]
        print(f"| {character!r} repeated | {record['bytes'] / 1e6:.0f} | {record['ids']:,} | "
              f"{record['seconds']:.2f} s | {record['traced_bytes_per_byte']:.1f} B | "
              f"{record['rss_growth_bytes_per_byte']:.1f} B | {per_character:.1f} B |")
        append_result(args.json, "giant_pretoken", **record)


if __name__ == "__main__":
    main()
