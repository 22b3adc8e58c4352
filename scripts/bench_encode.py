"""Benchmark hf_bpe's Tokenizer.encode against tiktoken and HF tokenizers on real corpora.

    python scripts/bench_encode.py /work/shared/corpora/en_pydocs.txt /work/shared/corpora/multi_manpages.txt \\
        --vocab tests/fixtures/gpt2_vocab.json --merges tests/fixtures/gpt2_merges.txt --repeats 3

Each repeat runs every contender once on the same text, in alternating order, so that noise from other processes
hits all of them alike; the table shows medians and the ratios hf_bpe / competitor (above 1 means hf_bpe is faster).
"cold" is the first encode of a fresh Tokenizer (empty caches, construction not timed), "warm" a second pass.
The ids of all contenders are checked to be equal.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import tiktoken
import tokenizers

from hf_bpe.encode import Tokenizer
from hf_bpe.gpt2_format import load_gpt2
from hf_bpe.tiktoken_compat import tiktoken_encoding

EOT = "<|endoftext|>"


def build_tiktoken(vocab_path: Path, merges_path: Path) -> tiktoken.Encoding:
    vocab, merges = load_gpt2(vocab_path, merges_path)
    return tiktoken_encoding(vocab, merges, [EOT], name="bench")


def build_hf(vocab_path: Path, merges_path: Path) -> tokenizers.Tokenizer:
    tokenizer = tokenizers.Tokenizer(tokenizers.models.BPE.from_file(str(vocab_path), str(merges_path)))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.add_special_tokens([EOT])
    return tokenizer


def timed(function: Callable[[], list[int]]) -> tuple[float, list[int]]:
    start = time.perf_counter()
    ids = function()
    return time.perf_counter() - start, ids


def bench_corpus(path: Path, vocab_path: Path, merges_path: Path, repeats: int, workers: int) -> None:
    text = path.read_text(encoding="utf-8")
    megabytes = len(text.encode("utf-8")) / 1e6
    documents = [document + EOT for document in text.split(EOT)]
    documents[-1] = documents[-1][: -len(EOT)]
    encoding = build_tiktoken(vocab_path, merges_path)
    hf = build_hf(vocab_path, merges_path)
    times: dict[str, list[float]] = {}
    reference: list[int] | None = None
    for repeat in range(repeats):
        tokenizer = Tokenizer.from_files(vocab_path, merges_path, special_tokens=[EOT])
        contenders: list[tuple[str, Callable[[], list[int]]]] = [
            ("hf_bpe cold", lambda: tokenizer.encode(text)),
            ("hf_bpe warm", lambda: tokenizer.encode(text)),
            ("tiktoken", lambda: encoding.encode(text, allowed_special="all")),
            ("hf tokenizers batch", lambda: [i for e in hf.encode_batch(documents) for i in e.ids]),
        ]
        if repeat % 2:  # alternate the order (cold must stay before warm)
            contenders = [contenders[2], contenders[3], contenders[0], contenders[1]]
        for name, function in contenders:
            seconds, ids = timed(function)
            times.setdefault(name, []).append(seconds)
            if reference is None:
                reference = ids
            elif ids != reference:
                raise SystemExit(f"{path}: {name} gives different ids than the first contender")
        if workers > 1:
            pool_tokenizer = Tokenizer.from_files(vocab_path, merges_path, special_tokens=[EOT])
            batch = [
                (f"hf_bpe encode_batch x{workers}", lambda: [i for ids in pool_tokenizer.encode_batch(
                    documents, num_workers=workers) for i in ids]),
                (f"tiktoken encode_batch x{workers}", lambda: [i for ids in encoding.encode_batch(
                    documents, num_threads=workers, allowed_special="all") for i in ids]),
            ]
            for name, function in batch if repeat % 2 == 0 else batch[::-1]:
                seconds, ids = timed(function)
                times.setdefault(name, []).append(seconds)
                if ids != reference:
                    raise SystemExit(f"{path}: {name} gives different ids")
    assert reference is not None
    print(f"\n{path.name}: {megabytes:.1f} MB, {len(documents)} documents, {len(reference)} tokens, "
          f"median of {repeats}")
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, seconds in medians.items():
        print(f"  {name:28s} {seconds:7.3f} s {megabytes / seconds:7.2f} MB/s {len(reference) / seconds / 1e6:6.2f} "
              f"M tokens/s")
    for ours in ("hf_bpe cold", "hf_bpe warm"):
        for theirs in ("tiktoken", "hf tokenizers batch"):
            print(f"  {ours} vs {theirs}: {medians[theirs] / medians[ours]:.2f}x")
    if workers > 1:
        ours, theirs = f"hf_bpe encode_batch x{workers}", f"tiktoken encode_batch x{workers}"
        print(f"  {ours} vs {theirs}: {medians[theirs] / medians[ours]:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpora", nargs="+", type=Path)
    parser.add_argument("--vocab", type=Path, default=Path("tests/fixtures/gpt2_vocab.json"))
    parser.add_argument("--merges", type=Path, default=Path("tests/fixtures/gpt2_merges.txt"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="processes/threads for the batch comparison")
    arguments = parser.parse_args()
    for path in arguments.corpora:
        bench_corpus(path, arguments.vocab, arguments.merges, arguments.repeats, arguments.workers)


if __name__ == "__main__":
    main()
