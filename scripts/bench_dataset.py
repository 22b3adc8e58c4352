"""Benchmark the dataset tokenization pipeline with several encoders: hf_bpe, tiktoken and the HF fast tokenizer.

    python scripts/bench_dataset.py ../shared/corpora/en_pydocs.txt --tokenizer tok/ --num-proc 2
    python scripts/bench_dataset.py $LINUX --jsonl $LINUX_JSONL \\
        --tokenizer gpt2-dir/ --num-proc 2 --encoders hf_bpe tiktoken-1 --repeat 2

DATA_FILE is a text file of documents separated by `<|endoftext|>` (or a .jsonl file with a "text" column). It is
turned into a json-lines dataset once (`--jsonl PATH` keeps it, and reuses it when it exists; the conversion streams,
so a corpus of gigabytes is fine) and converted to arrow once, untimed. Then each encoder runs the same
`hf_bpe.data.pipeline.tokenize_dataset` pipeline as `hf-bpe tokenize-dataset` (`Dataset.map(batched=True,
num_proc=N)`, then the ids written into a `.bin`), each in a fresh process, and every `.bin` must be identical (sha256).

The encoders alternate for `--repeat` rounds; reported per encoder: the median wall time of the whole pipeline,
tokens/s, MB/s, the peak memory of the run's whole process tree (the main process plus the map workers, their
proportional set sizes summed, sampled every 0.2 s; in brackets without the memory-mapped arrow files), and the ratio of
its time to hf_bpe's measured within the same round (the machine may be shared): hf_bpe's throughput relative to an
encoder is that encoder's time / hf_bpe's time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from tree_memory import PeakTreeMemory

from hf_bpe.data.pipeline import tokenize_dataset

SEPARATOR = "<|endoftext|>"
READ_CHARS = 1 << 24


class FastTokenizerEncoder:
    """`AutoTokenizer.from_pretrained(DIR)` (a PreTrainedTokenizerFast) called as `tok(texts)`; built in each worker."""

    def __init__(self, tokenizer_dir: str) -> None:
        self.tokenizer_dir, self.tokenizer = tokenizer_dir, None

    def __getstate__(self) -> dict[str, Any]:
        return {"tokenizer_dir": self.tokenizer_dir, "tokenizer": None}

    def __call__(self, texts: list[str]) -> Sequence[Sequence[int]]:
        if self.tokenizer is None:
            from transformers import AutoTokenizer

            self.tokenizer = AutoTokenizer.from_pretrained(self.tokenizer_dir)
        return self.tokenizer(texts)["input_ids"]


class TiktokenEncoder:
    """A `tiktoken.Encoding` built from DIR's vocab (ids as ranks) and the GPT-2 pattern; built in each worker."""

    def __init__(self, tokenizer_dir: str, num_threads: int = 8) -> None:
        self.tokenizer_dir, self.num_threads, self.encoding = tokenizer_dir, num_threads, None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "encoding": None}

    def __call__(self, texts: list[str]) -> Sequence[Sequence[int]]:
        if self.encoding is None:
            self.encoding = build_tiktoken(self.tokenizer_dir)
        if self.num_threads == 1:  # uint32 arrays, as hf_bpe's encoder gives the pipeline: no Python ints
            return [self.encoding.encode_to_numpy(text, disallowed_special=()) for text in texts]
        return self.encoding.encode_ordinary_batch(texts, num_threads=self.num_threads)

    def encode_to_arrays(self, pieces: Iterable[str], dtype: Any) -> Iterator[Any]:
        """One long document, as the pipeline gives it to hf_bpe's encoder: tiktoken's `encode_to_numpy` (ordinary
        text with no special tokens allowed or disallowed) instead of a list of Python ints."""
        if self.encoding is None:
            self.encoding = build_tiktoken(self.tokenizer_dir)
        yield self.encoding.encode_to_numpy("".join(pieces), disallowed_special=()).astype(dtype)


def build_tiktoken(tokenizer_dir: str) -> Any:
    from hf_bpe.formats.hf_directory import load_tokenizer_directory
    from hf_bpe.formats.tiktoken import tiktoken_encoding

    vocab, merges, special_tokens = load_tokenizer_directory(tokenizer_dir)
    return tiktoken_encoding(vocab, merges, special_tokens, name="bench")


# tiktoken's default is 8 threads in each map process; on a shared machine extra threads also take CPU time from
# other users' processes, so the single-threaded variant is the like-for-like comparison.
ENCODERS = {
    "hf_bpe": lambda tokenizer_dir: None,  # tokenize_dataset's own encoder, as the CLI runs it
    "tiktoken": lambda tokenizer_dir: TiktokenEncoder(tokenizer_dir),
    "tiktoken-1": lambda tokenizer_dir: TiktokenEncoder(tokenizer_dir, num_threads=1),
    "fast": lambda tokenizer_dir: FastTokenizerEncoder(tokenizer_dir),
}


def documents_of(data_file: Path) -> Iterator[str]:
    """The documents of a text file separated by `<|endoftext|>`, read 16M characters at a time."""
    with open(data_file, encoding="utf-8") as file:
        rest = ""
        while block := file.read(READ_CHARS):
            parts = (rest + block).split(SEPARATOR)
            rest = parts.pop()
            yield from parts
        yield rest


def make_jsonl(data_file: Path, path: Path, max_bytes: int | None) -> tuple[int, int]:
    """Write the non-blank documents of DATA_FILE to `path` as json lines; return (documents, UTF-8 bytes)."""
    if data_file.suffix == ".jsonl":
        documents: Iterator[str] = (json.loads(line)["text"] for line in open(data_file, encoding="utf-8") if line)
    else:
        documents = (document for document in documents_of(data_file) if document.strip())
    count = total = 0
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "w", encoding="utf-8") as out:
        for document in documents:
            if max_bytes is not None and total >= max_bytes:
                break
            out.write(json.dumps({"text": document}, ensure_ascii=False) + "\n")
            count += 1
            total += len(document.encode("utf-8"))
    os.replace(temporary, path)
    return count, total


def jsonl_stats(path: Path) -> tuple[int, int]:
    """(documents, UTF-8 bytes of the texts) of an existing json-lines file."""
    count = total = 0
    with open(path, encoding="utf-8") as file:
        for line in file:
            count += 1
            total += len(json.loads(line)["text"].encode("utf-8"))
    return count, total


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while block := file.read(1 << 24):
            digest.update(block)
    return digest.hexdigest()


def run_one(args: argparse.Namespace) -> None:
    """In a fresh process: one pipeline run with one encoder; prints its metadata as JSON."""
    metadata = tokenize_dataset(args.tokenizer, "json", args.out, data_files=[str(args.jsonl)],
                                num_proc=args.num_proc, batch_size=args.batch_size, progress=False,
                                cache_dir=args.cache_dir, encoder=ENCODERS[args.run_one](args.tokenizer))
    print(json.dumps(metadata))


def timed_run(name: str, args: argparse.Namespace, jsonl: Path, out: Path, cache_dir: Path
              ) -> tuple[float, tuple[int, int], dict[str, Any]]:
    """(wall seconds, (peak tree PSS, peak anonymous PSS) in bytes, metadata) of one pipeline run in a subprocess."""
    command = [sys.executable, __file__, "--run-one", name, "--tokenizer", args.tokenizer, "--jsonl", str(jsonl),
               "--out", str(out), "--num-proc", str(args.num_proc), "--batch-size", str(args.batch_size),
               "--cache-dir", str(cache_dir), "unused"]
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    memory = PeakTreeMemory(process.pid)
    stdout, _ = process.communicate()
    elapsed = time.perf_counter() - start
    memory.stop()
    peak = (memory.pss, memory.anonymous)
    if process.returncode != 0:
        raise SystemExit(f"{name}: the pipeline failed (exit {process.returncode})")
    return elapsed, peak, json.loads(stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_file", type=Path, metavar="DATA_FILE")
    parser.add_argument("--tokenizer", required=True, metavar="DIR", help="tokenizer directory saved by hf_bpe")
    parser.add_argument("--num-proc", type=int, default=2, help="map processes (default: %(default)s)")
    parser.add_argument("--batch-size", type=int, default=1000, help="documents per batch (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; the encoders alternate within each "
                                                              "(default: %(default)s)")
    parser.add_argument("--max-mb", type=float, default=None, help="use only the first documents up to this size "
                                                                   "(default: all)")
    parser.add_argument("--encoders", nargs="+", choices=list(ENCODERS), default=list(ENCODERS),
                        help="encoders to compare, hf_bpe first (default: all)")
    parser.add_argument("--jsonl", type=Path, help="where to keep the json lines (reused if it exists; "
                                                   "default: a temporary file)")
    parser.add_argument("--run-one", choices=list(ENCODERS), help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--cache-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run_one:
        run_one(args)
        return
    if "hf_bpe" not in args.encoders:
        raise SystemExit("--encoders must include hf_bpe, the reference of the ratios")

    with tempfile.TemporaryDirectory(prefix="bench_dataset-", dir=os.environ.get("BENCH_TMP")) as scratch:
        scratch_dir = Path(scratch)
        jsonl = args.jsonl or scratch_dir / "documents.jsonl"
        max_bytes = None if args.max_mb is None else int(args.max_mb * 1e6)
        if jsonl.exists():
            num_documents, num_bytes = jsonl_stats(jsonl)
        else:
            start = time.perf_counter()
            num_documents, num_bytes = make_jsonl(args.data_file, jsonl, max_bytes)
            print(f"wrote {jsonl} in {time.perf_counter() - start:.0f} s")
        print(f"{jsonl.name}: {num_documents:,} documents, {num_bytes / 1e6:.1f} MB; num_proc={args.num_proc}, "
              f"batch_size={args.batch_size}, {args.repeat} rounds; load average {os.getloadavg()[0]:.1f}")
        cache_dir = scratch_dir / "hf-cache"
        import datasets

        start = time.perf_counter()
        datasets.load_dataset("json", data_files={"train": [str(jsonl)]}, split="train", cache_dir=str(cache_dir))
        print(f"json lines -> arrow (untimed, once) in {time.perf_counter() - start:.0f} s")

        seconds: dict[str, list[float]] = {name: [] for name in args.encoders}
        ratios: dict[str, list[float]] = {name: [] for name in args.encoders}
        peaks: dict[str, list[tuple[int, int]]] = {name: [] for name in args.encoders}
        reference, num_tokens = None, 0
        for round_index in range(args.repeat):
            order = list(args.encoders) if round_index % 2 == 0 else list(reversed(args.encoders))
            this_round = {}
            for name in order:
                out = scratch_dir / f"out-{round_index}-{name}"
                elapsed, peak, metadata = timed_run(name, args, jsonl, out, cache_dir)
                digest = file_sha256(out / "train.bin")
                shutil.rmtree(out)
                reference = reference or digest
                if digest != reference:
                    raise SystemExit(f"{name}: train.bin differs from the other encoders'")
                num_tokens = metadata["num_tokens"]
                this_round[name] = elapsed
                peaks[name].append(peak)
            for name, elapsed in this_round.items():
                seconds[name].append(elapsed)
                ratios[name].append(elapsed / this_round["hf_bpe"])
            print(f"round {round_index + 1}: " + ", ".join(f"{name} {elapsed:.1f} s" for name, elapsed in
                                                           this_round.items()), flush=True)
    print(f"\nall .bin files identical ({num_tokens:,} tokens, sha256 {reference[:16]}...)")
    print(f"{'encoder':12s} {'median s':>9s} {'tokens/s':>12s} {'MB/s':>7s} {'peak PSS (anonymous)':>21s} "
          f"{'its time / hf_bpe time':>23s}")
    for name in args.encoders:
        median = statistics.median(seconds[name])
        print(f"{name:12s} {median:9.1f} {num_tokens / median:12,.0f} {num_bytes / 1e6 / median:7.2f} "
              f"{max(total for total, _ in peaks[name]) / 1e9:6.2f} GB "
              f"({max(anonymous for _, anonymous in peaks[name]) / 1e9:.2f} GB) "
              f"{statistics.median(ratios[name]):15.2f}")


if __name__ == "__main__":
    main()
