"""Benchmark training on one long word: text without spaces (minified code, base64, DNA, CJK) must train in time
linear in its length.

    python scripts/bench_long_words.py --corpus $SHARED/corpora/en_gcide.txt --sizes 0.25 0.5 1 4 24 --json results.json

The word is the letters of the corpus with everything else removed, cut to each size (in MB), written as one line to
a temporary file; `train_bpe` on it at `--vocab-size` (default 300) runs in a fresh process, whose whole call is timed
(imports excluded) and whose peak RSS is sampled. A time per MB that stays flat as the word grows is linear.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_results import append_result
from tree_memory import PeakTreeMemory

NOT_LETTERS = re.compile(r"[^A-Za-z]+")


def child(path: str, vocab_size: int) -> None:
    from hf_bpe import train_bpe

    start = time.perf_counter()
    _, merges = train_bpe(path, vocab_size, progress=False)
    print(json.dumps({"seconds": time.perf_counter() - start, "num_merges": len(merges)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, required=True, help="a text whose letters make the word")
    parser.add_argument("--sizes", type=float, nargs="+", default=[0.25, 0.5, 1.0, 4.0], help="word sizes in MB")
    parser.add_argument("--vocab-size", type=int, default=300)
    parser.add_argument("--json", type=Path, help="append the results to this JSON file (scripts/bench_results.py)")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return
    letters = NOT_LETTERS.sub("", args.corpus.read_text(encoding="utf-8"))
    print(f"{args.corpus.name}: {len(letters) / 1e6:.1f} MB of letters; vocab {args.vocab_size}")
    with tempfile.TemporaryDirectory() as directory:
        for size in args.sizes:
            length = int(size * 1e6)
            if length > len(letters):
                sys.exit(f"the corpus has only {len(letters):,} letters, fewer than {size} MB")
            path = Path(directory) / "word.txt"
            path.write_text(letters[:length], encoding="ascii")
            process = subprocess.Popen([sys.executable, __file__, "--corpus", str(args.corpus),
                                        "--child", str(path), str(args.vocab_size)], stdout=subprocess.PIPE, text=True)
            memory = PeakTreeMemory(process.pid)
            output, _ = process.communicate()
            memory.stop()
            if process.returncode != 0:
                sys.exit(f"training on {size} MB failed with exit code {process.returncode}")
            result = json.loads(output.strip().splitlines()[-1])
            print(f"{size:6.2f} MB: {result['seconds']:7.2f} s ({result['seconds'] / size:.2f} s/MB), "
                  f"peak RSS {memory.rss / 1e6:.0f} MB", flush=True)
            append_result(args.json, "long_word", corpus=args.corpus.name, word_bytes=length,
                          vocab_size=args.vocab_size, seconds=result["seconds"], peak_mb=memory.rss / 1e6,
                          num_merges=result["num_merges"])


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
