"""Throughput of `HFBPETokenizer(batch)` against the fast tokenizer (`AutoTokenizer`) loaded from the same directory.

Usage: python scripts/bench_hf.py DIR CORPUS [--docs 1000] [--repeats 5] [--padding] [--overflow] [--offsets]

The corpus is split into documents at `<|endoftext|>`; each timed call encodes one batch of `--docs` documents, the
two tokenizers alternating, and the medians are reported with their ratio. The first call of each (cold caches) is
reported separately. Both must give the same outputs, field by field, or the script exits 1. Then the cost of
`datasets` hashing each tokenizer (paid on every `Dataset.map` call) and the size of its pickle (sent to every
worker) are reported.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def read_documents(path: Path, limit: int) -> list[str]:
    documents = [document for document in path.read_text(encoding="utf-8").split("<|endoftext|>") if document]
    return documents[:limit]


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--docs", type=int, default=1000, help="documents per batch (default 1000)")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per tokenizer (default 5)")
    parser.add_argument("--padding", action="store_true", help="also pad and truncate to 512, return numpy")
    parser.add_argument("--overflow", action="store_true",
                        help="windows of 512 tokens with stride 128 (return_overflowing_tokens)")
    parser.add_argument("--offsets", action="store_true", help="also return the offsets mapping")
    args = parser.parse_args(argv)

    from transformers import AutoTokenizer

    from hf_bpe.hf.tokenizer import HFBPETokenizer

    documents = read_documents(args.corpus, args.docs)
    megabytes = sum(len(document.encode("utf-8")) for document in documents) / 1e6
    fast = AutoTokenizer.from_pretrained(args.directory)
    ours = HFBPETokenizer.from_pretrained(args.directory)
    options: dict[str, Any] = {}
    if args.padding:
        fast.pad_token = fast.eos_token
        ours.pad_token = ours.eos_token
        options = dict(padding=True, truncation=True, max_length=512, return_tensors="np")
    if args.overflow:
        options.update(truncation=True, max_length=512, stride=128, return_overflowing_tokens=True)
    if args.offsets:
        options["return_offsets_mapping"] = True
    print(f"{len(documents)} documents, {megabytes:.2f} MB, options {options or 'none'}")

    times: dict[str, list[float]] = {"fast": [], "hf_bpe": []}
    cold: dict[str, float] = {}
    outputs: dict[str, Any] = {}
    for repeat in range(args.repeats + 1):
        order = [("fast", fast), ("hf_bpe", ours)]
        if repeat % 2:
            order.reverse()
        for name, tokenizer in order:
            seconds, outputs[name] = timed(lambda: tokenizer(documents, **options))
            if repeat == 0:
                cold[name] = seconds
            else:
                times[name].append(seconds)
    same = plain(outputs["fast"]) == plain(outputs["hf_bpe"])
    for name in ("fast", "hf_bpe"):
        median = statistics.median(times[name])
        print(f"{name:>7}: cold {cold[name]:.3f} s, warm median {median:.3f} s ({megabytes / median:.2f} MB/s) "
              f"over {args.repeats} runs")
    ratio = statistics.median(times["fast"]) / statistics.median(times["hf_bpe"])
    print(f"hf_bpe throughput / fast throughput: warm {ratio:.2f}x, cold {cold['fast'] / cold['hf_bpe']:.2f}x")
    report_hashing_and_pickles(fast, ours, args.repeats)
    if not same:
        print("MISMATCH: the two tokenizers gave different outputs", file=sys.stderr)
        return 1
    return 0


def plain(encoding: Any) -> dict[str, Any]:
    return {key: value.tolist() if hasattr(value, "tolist") else value for key, value in encoding.items()}


def report_hashing_and_pickles(fast: Any, ours: Any, repeats: int) -> None:
    import pickle

    from datasets.fingerprint import Hasher

    for name, tokenizer in (("fast", fast), ("hf_bpe", ours)):
        seconds = statistics.median(timed(lambda: Hasher.hash(tokenizer))[0] for _ in range(max(repeats, 3)))
        size = len(pickle.dumps(tokenizer))
        print(f"{name:>7}: datasets Hasher.hash {seconds * 1000:.1f} ms, pickle {size / 1000:.0f} KB")


if __name__ == "__main__":
    sys.exit(main())
