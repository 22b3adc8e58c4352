"""Benchmark the dataset tokenization pipeline with three encoders: hf_bpe, the HF fast tokenizer and tiktoken.

    python scripts/bench_dataset.py /work/shared/corpora/en_pydocs.txt --tokenizer tok/ --num-proc 2

DATA_FILE is a text file of documents separated by `<|endoftext|>` (or a .jsonl file with a "text" column). It is
turned into a json-lines dataset once; then each encoder runs the same `hf_bpe.data.tokenize_dataset` pipeline
(`Dataset.map(batched=True, num_proc=N)`, then the ids written into a `.bin`) and every `.bin` must be identical.
The encoders alternate for `--repeat` rounds and the median tokens per second (whole pipeline, wall clock) is
reported, with each competitor's ratio to hf_bpe measured within the same round.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hf_bpe.data import tokenize_dataset

SEPARATOR = "<|endoftext|>"


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
        return self.encoding.encode_ordinary_batch(texts, num_threads=self.num_threads)


def build_tiktoken(tokenizer_dir: str) -> Any:
    from hf_bpe.hf_export import load_tokenizer_directory
    from hf_bpe.tiktoken_compat import tiktoken_encoding

    vocab, merges, special_tokens = load_tokenizer_directory(tokenizer_dir)
    return tiktoken_encoding(vocab, merges, special_tokens, name="bench")


def make_jsonl(data_file: Path, out: Path, max_bytes: int | None) -> tuple[Path, int, int]:
    """The documents of DATA_FILE as json lines; returns (path, number of documents, UTF-8 bytes)."""
    if data_file.suffix == ".jsonl":
        documents = [json.loads(line)["text"] for line in data_file.read_text(encoding="utf-8").splitlines() if line]
    else:
        documents = [doc for doc in data_file.read_text(encoding="utf-8").split(SEPARATOR) if doc.strip()]
    kept, total = [], 0
    for document in documents:
        if max_bytes is not None and total >= max_bytes:
            break
        kept.append(document)
        total += len(document.encode("utf-8"))
    path = out / "documents.jsonl"
    path.write_text("".join(json.dumps({"text": doc}, ensure_ascii=False) + "\n" for doc in kept), encoding="utf-8")
    return path, len(kept), total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_file", type=Path, metavar="DATA_FILE")
    parser.add_argument("--tokenizer", required=True, metavar="DIR", help="tokenizer directory saved by hf_bpe")
    parser.add_argument("--num-proc", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3, help="rounds; the encoders alternate within each")
    parser.add_argument("--max-mb", type=float, default=None, help="use only the first documents up to this size")
    args = parser.parse_args()

    encoders = {
        "hf_bpe": lambda: None,  # tokenize_dataset's own encoder, as the CLI runs it
        "fast (AutoTokenizer)": lambda: FastTokenizerEncoder(args.tokenizer),
        # tiktoken's default: 8 threads in each map process. On a shared machine extra threads also take CPU time
        # from other users' processes, so the single-threaded variant is the like-for-like comparison.
        "tiktoken": lambda: TiktokenEncoder(args.tokenizer),
        "tiktoken (1 thread)": lambda: TiktokenEncoder(args.tokenizer, num_threads=1),
    }
    with tempfile.TemporaryDirectory(prefix="bench_dataset-") as scratch:
        scratch_dir = Path(scratch)
        max_bytes = None if args.max_mb is None else int(args.max_mb * 1e6)
        jsonl, num_documents, num_bytes = make_jsonl(args.data_file, scratch_dir, max_bytes)
        print(f"{args.data_file.name}: {num_documents:,} documents, {num_bytes / 1e6:.1f} MB; "
              f"num_proc={args.num_proc}, batch_size={args.batch_size}, {args.repeat} rounds")
        common = dict(data_files=[str(jsonl)], num_proc=args.num_proc, batch_size=args.batch_size, progress=False,
                      cache_dir=str(scratch_dir / "hf-cache"))
        # An untimed run first: it converts the json lines to arrow once, and its output is the reference.
        num_tokens = tokenize_dataset(args.tokenizer, "json", scratch_dir / "warmup", **common,
                                      encoder=TiktokenEncoder(args.tokenizer))["num_tokens"]
        reference = (scratch_dir / "warmup" / "train.bin").read_bytes()
        seconds: dict[str, list[float]] = {name: [] for name in encoders}
        ratios: dict[str, list[float]] = {name: [] for name in encoders}
        for round_index in range(args.repeat):
            order = list(encoders) if round_index % 2 == 0 else list(reversed(encoders))
            this_round = {}
            for name in order:
                out = scratch_dir / f"out-{round_index}-{name.split()[0]}"
                start = time.perf_counter()
                tokenize_dataset(args.tokenizer, "json", out, **common, encoder=encoders[name]())
                this_round[name] = time.perf_counter() - start
                if (out / "train.bin").read_bytes() != reference:
                    raise SystemExit(f"{name}: train.bin differs from the others")
            for name, elapsed in this_round.items():
                seconds[name].append(elapsed)
                ratios[name].append(this_round[name] / this_round["hf_bpe"])
            print(f"round {round_index + 1}: " + ", ".join(f"{name} {elapsed:.2f} s" for name, elapsed in
                                                           this_round.items()))
    print(f"\nall .bin files identical ({num_tokens:,} tokens)")
    print(f"{'encoder':22s} {'median s':>9s} {'tokens/s':>12s} {'MB/s':>7s} {'time / hf_bpe time':>19s}")
    for name in encoders:
        median = statistics.median(seconds[name])
        print(f"{name:22s} {median:9.2f} {num_tokens / median:12,.0f} {num_bytes / 1e6 / median:7.2f} "
              f"{statistics.median(ratios[name]):19.2f}")


if __name__ == "__main__":
    main()
