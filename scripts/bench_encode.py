"""Benchmark hf_bpe's Tokenizer.encode against tiktoken and HF tokenizers on real corpora.

    python scripts/bench_encode.py $SHARED/corpora/en_pydocs.txt $SHARED/corpora/multi_manpages.txt \\
        --vocab tests/fixtures/gpt2_vocab.json --merges tests/fixtures/gpt2_merges.txt --repeats 3 --json results.json

Each repeat runs every contender once on the same text, in alternating order, so that noise from other processes
hits all of them alike; the table shows medians and the ratios hf_bpe / competitor (above 1 means hf_bpe is faster).
"cold" is the first encode of a fresh Tokenizer (empty caches, construction not timed), "warm" a second pass.
The ids of all contenders are checked to be equal.

--single-pass runs the one-pass protocol instead: the corpora are read once, as one stream of documents split at
<|endoftext|>; a fresh Tokenizer encodes them with `encode_batch(docs, num_workers=1)` per 1,000 documents, and
tiktoken (built from the same files) with `encode_ordinary` per document. Both encode each group of 1,000
documents in turn (alternating which goes first), so that other processes slow both alike; the ids are compared.
It reports MB/s and the ratio tiktoken time / hf_bpe time for the first and the second half of the bytes, wall
clock and CPU time (the machine may be shared), and the peak RSS and encoder cache size:

    python scripts/bench_encode.py --single-pass $SHARED/corpora/*.txt

--profile (with --single-pass) also runs hf_bpe's calls under cProfile and prints where its time goes (the
profiler adds its own cost to each Python-level call, so the ratios of that run are not the ones to quote).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import resource
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import tiktoken
import tokenizers
from bench_results import append_result

from hf_bpe.encode.tokenizer import Tokenizer
from hf_bpe.formats.gpt2 import load_gpt2
from hf_bpe.formats.tiktoken import tiktoken_encoding

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


def bench_corpus(path: Path, vocab_path: Path, merges_path: Path, repeats: int, workers: int,
                 json_path: Path | None = None) -> None:
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
    for name, seconds in medians.items():
        append_result(json_path, "encode", corpus=path.name, corpus_bytes=int(megabytes * 1e6), contender=name,
                      seconds=seconds, megabytes_per_second=megabytes / seconds, repeats=repeats)
    if workers > 1:
        ours, theirs = f"hf_bpe encode_batch x{workers}", f"tiktoken encode_batch x{workers}"
        print(f"  {ours} vs {theirs}: {medians[theirs] / medians[ours]:.2f}x")


def read_documents(paths: list[Path], block_chars: int = 1 << 23) -> Iterator[str]:
    """The documents of the files, in order, as one stream split at <|endoftext|>, reading blocks of text."""
    rest = ""
    for path in paths:
        with path.open(encoding="utf-8") as file:
            while block := file.read(block_chars):
                documents = (rest + block).split(EOT)
                rest = documents.pop()
                yield from documents
    yield rest


def rss_megabytes() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024


def single_pass(paths: list[Path], vocab_path: Path, merges_path: Path, group: int, cache_megabytes: int,
                profile: bool = False, json_path: Path | None = None, tiktoken_file: Path | None = None,
                pattern: str | None = None) -> None:
    total_bytes = sum(path.stat().st_size for path in paths)
    if tiktoken_file is None:
        encoding = build_tiktoken(vocab_path, merges_path)
        tokenizer = Tokenizer.from_files(vocab_path, merges_path, special_tokens=[EOT],
                                         cache_bytes=cache_megabytes << 20)
    else:  # both read the same .tiktoken file, with the same pattern
        from tiktoken.load import load_tiktoken_bpe

        from hf_bpe.pretokenize import resolve_pattern

        encoding = tiktoken.Encoding("bench", pat_str=resolve_pattern(pattern),
                                     mergeable_ranks=load_tiktoken_bpe(str(tiktoken_file)), special_tokens={})
        tokenizer = Tokenizer.from_tiktoken(tiktoken_file, pattern=pattern, cache_bytes=cache_megabytes << 20)
    rss_before = rss_megabytes()
    peak_rss = rss_before
    # [half][contender] -> wall seconds, cpu seconds; bytes per half
    wall = [[0.0, 0.0], [0.0, 0.0]]
    cpu = [[0.0, 0.0], [0.0, 0.0]]
    half_bytes = [0, 0]
    done_bytes = 0
    documents = read_documents(paths)
    round_number = 0
    profiler = cProfile.Profile() if profile else None
    while batch := [document for _, document in zip(range(group), documents)]:
        size = sum(len(document.encode("utf-8")) for document in batch)
        half = 0 if done_bytes + size / 2 <= total_bytes / 2 else 1
        def encode_hf_bpe() -> list[list[int]]:
            if profiler is None:
                return tokenizer.encode_batch(batch, num_workers=1)
            return profiler.runcall(tokenizer.encode_batch, batch, num_workers=1)

        contenders = [encode_hf_bpe, lambda: [encoding.encode_ordinary(document) for document in batch]]
        order = [0, 1] if round_number % 2 == 0 else [1, 0]
        results: list[list[list[int]]] = [[], []]
        for index in order:
            wall_start, cpu_start = time.perf_counter(), time.process_time()
            results[index] = contenders[index]()
            wall[half][index] += time.perf_counter() - wall_start
            cpu[half][index] += time.process_time() - cpu_start
        if results[0] != results[1]:
            raise SystemExit(f"hf_bpe and tiktoken differ in the documents {round_number * group} to "
                             f"{round_number * group + len(batch) - 1}")
        del results
        half_bytes[half] += size
        done_bytes += size
        round_number += 1
        peak_rss = max(peak_rss, rss_megabytes())
    names = ", ".join(path.name for path in paths)
    print(f"\nsingle pass over {names}: {total_bytes / 1e6:.0f} MB, {round_number} groups of {group} documents, "
          f"cache bound {cache_megabytes} MiB")
    for half in (0, 1):
        if not half_bytes[half]:
            continue  # one group of documents: no second half
        megabytes = half_bytes[half] / 1e6
        print(f"  half {half + 1} ({megabytes:.0f} MB): hf_bpe {megabytes / wall[half][0]:.2f} MB/s, tiktoken "
              f"{megabytes / wall[half][1]:.2f} MB/s, ratio {wall[half][1] / wall[half][0]:.2f}x wall "
              f"({cpu[half][1] / cpu[half][0]:.2f}x cpu)")
    megabytes = total_bytes / 1e6
    print(f"  whole: hf_bpe {megabytes / sum(w[0] for w in wall):.2f} MB/s, tiktoken "
          f"{megabytes / sum(w[1] for w in wall):.2f} MB/s, "
          f"ratio {sum(w[1] for w in wall) / sum(w[0] for w in wall):.2f}x "
          f"wall ({sum(c[1] for c in cpu) / sum(c[0] for c in cpu):.2f}x cpu)")
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    append_result(json_path, "encode_single_pass", corpus=names, corpus_bytes=total_bytes,
                  vocab=str(tiktoken_file or vocab_path), pattern=pattern or "gpt2",
                  halves=[{"bytes": half_bytes[half], "hf_bpe_seconds": wall[half][0],
                           "tiktoken_seconds": wall[half][1]} for half in (0, 1)],
                  ratio=sum(w[1] for w in wall) / sum(w[0] for w in wall), peak_rss_mb=peak_rss,
                  cache_mib=tokenizer.cache_size() / 2**20)
    print(f"  RSS before the pass {rss_before:.0f} MB, peak during it {peak_rss:.0f} MB (ru_maxrss {maxrss:.0f} MB); "
          f"encoder cache {tokenizer.cache_size() / 2**20:.0f} MiB")
    if profiler is not None:
        print("\nhf_bpe under cProfile (internal time):")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(12)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpora", nargs="+", type=Path)
    parser.add_argument("--vocab", type=Path, default=Path("tests/fixtures/gpt2_vocab.json"))
    parser.add_argument("--merges", type=Path, default=Path("tests/fixtures/gpt2_merges.txt"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="processes/threads for the batch comparison")
    parser.add_argument("--single-pass", action="store_true", help="run the single-pass protocol (see above)")
    parser.add_argument("--group", type=int, default=1000, help="documents per encode_batch call (--single-pass)")
    parser.add_argument("--cache-mb", type=int, default=256, help="Tokenizer cache_bytes in MiB (--single-pass)")
    parser.add_argument("--profile", action="store_true", help="profile hf_bpe's calls with cProfile (--single-pass)")
    parser.add_argument("--json", type=Path, help="append the results to this JSON file (scripts/bench_results.py)")
    parser.add_argument("--tiktoken", type=Path, metavar="FILE",
                        help="--single-pass with this .tiktoken file for both (e.g. cl100k_base.tiktoken) instead of "
                             "--vocab/--merges")
    parser.add_argument("--pattern", help="the pattern with --tiktoken: a preset name (cl100k, o200k, ...) or regex")
    arguments = parser.parse_args()
    if arguments.single_pass:
        single_pass(arguments.corpora, arguments.vocab, arguments.merges, arguments.group, arguments.cache_mb,
                    arguments.profile, arguments.json, arguments.tiktoken, arguments.pattern)
        return
    for path in arguments.corpora:
        bench_corpus(path, arguments.vocab, arguments.merges, arguments.repeats, arguments.workers, arguments.json)


if __name__ == "__main__":
    main()
