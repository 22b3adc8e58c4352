"""Benchmark `hf_bpe.encode.merge_kernels.merge_batch_packed` on the distinct pre-tokens of real corpora, as the
encoder meets them.

    python scripts/bench_merge.py $SHARED/corpora/*.txt
    python scripts/bench_merge.py $LINUX_300MB --megabytes 100

Each corpus is read (its first --megabytes only, if given), split into documents at <|endoftext|> and pre-tokenized;
its distinct pre-tokens, in first-seen order (the order in which a one-pass encoder meets them, each once), are
UTF-8 encoded and merged in batches of --batch words (4,096 and 1,024 by default) by `merge_batch_packed` (ids as
uint32 bytes, as the encoder's cache keeps them: "new") and by a frozen copy of the merge_batch of commit a689147
("old", ids as tuples, kept in this script only, for the ratio). All run on the same batches in
rotating order, so that other processes on the (shared) machine slow them alike; times are CPU microseconds
(time.process_time) per pre-token. Every word's result is checked against `merge_ids` (the scalar kernels) before
any timing.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from functools import partial
from itertools import chain
from pathlib import Path

import numpy as np

from hf_bpe.encode.cache import ID_DTYPE
from hf_bpe.encode.merge_kernels import (
    NO_RANK,
    BatchTables,
    merge_batch_packed,
    merge_ids,
)
from hf_bpe.encode.tokenizer import Tokenizer
from hf_bpe.pretokenize import pretokenize

EOT = "<|endoftext|>"
FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"


def distinct_pretokens(path: Path, megabytes: float | None) -> list[bytes]:
    """The distinct pre-tokens of a corpus (UTF-8), in first-seen order."""
    with path.open("rb") as file:
        data = file.read(int(megabytes * 1e6) if megabytes else -1)
    text = data.decode("utf-8", errors="ignore")
    pretokens = dict.fromkeys(chain.from_iterable(map(pretokenize, text.split(EOT))))
    return list(map(str.encode, pretokens))


class OldBatchTables:
    """BatchTables as of commit a689147 (int64 arrays; its monotone flag came out False for the GPT-2 merges,
    because the ranks were reordered before the check)."""

    def __init__(self, byte_ids: dict[int, int], pair_ranks: dict[tuple[int, int], int],
                 merged_ids: Sequence[int]) -> None:
        self.byte_ids = np.full(256, -1, dtype=np.int64)
        self.byte_ids[list(byte_ids)] = list(byte_ids.values())
        pairs = np.array(list(pair_ranks), dtype=np.int64).reshape(-1, 2)
        ranks = np.fromiter(pair_ranks.values(), dtype=np.int64, count=len(pair_ranks))
        self.merged_ids = np.array(merged_ids, dtype=np.int64)
        self.id_objects: list[int] = [0] * (max(chain(byte_ids.values(), merged_ids), default=0) + 1)
        for token_id in chain(byte_ids.values(), merged_ids):
            self.id_objects[token_id] = token_id
        self.key_base = max(int(pairs.max(initial=0)), int(self.merged_ids.max(initial=0))) + 1
        keys = pairs[:, 0] * self.key_base + pairs[:, 1]
        self.hash_bits = max(4, (8 * len(keys)).bit_length())
        slots = ((keys.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))
                 >> np.uint64(64 - self.hash_bits)).astype(np.int64)
        order = np.argsort(slots, kind="stable")
        slots, keys, ranks = slots[order], keys[order], ranks[order]
        position = np.maximum.accumulate(slots - np.arange(slots.size)) + np.arange(slots.size)
        size = (1 << self.hash_bits) + len(keys) + 1
        self.table_keys = np.full(size, -1, dtype=np.int64)
        self.table_ranks = np.full(size, NO_RANK, dtype=np.int64)
        self.table_keys[position] = keys
        self.table_ranks[position] = ranks
        first_use = np.full(self.key_base, NO_RANK, dtype=np.int64)
        np.minimum.at(first_use, pairs[:, 0], ranks)
        np.minimum.at(first_use, pairs[:, 1], ranks)
        self.monotone = bool(np.all(first_use[self.merged_ids[ranks]] > ranks))


def old_merge_batch(words: Sequence[bytes], tables: OldBatchTables) -> list[tuple[int, ...]]:
    """merge_batch as of commit a689147 (per-step word starts, reduceat and boolean compaction)."""
    lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
    ids = tables.byte_ids[np.frombuffer(b"".join(words), dtype=np.uint8)]
    word = np.repeat(np.arange(len(words), dtype=np.int64), lengths)
    rank = _old_pair_ranks_at(np.arange(ids.size), ids, word, tables)
    finished_ids: list[np.ndarray] = []
    finished_words: list[np.ndarray] = []
    while ids.size:
        count = ids.size
        starts = np.flatnonzero(np.concatenate(([True], word[1:] != word[:-1])))
        word_lengths = np.diff(np.append(starts, count))
        word_min = np.minimum.reduceat(rank, starts)
        candidate = rank == np.repeat(word_min, word_lengths)
        keep = np.ones(count, dtype=bool)
        finished_word = word_min == NO_RANK
        if finished_word.any():
            finished = np.repeat(finished_word, word_lengths)
            finished_ids.append(ids[finished])
            finished_words.append(word[finished])
            candidate &= ~finished
            keep &= ~finished
        if not tables.monotone:
            first = np.minimum.reduceat(np.where(candidate, np.arange(count), count), starts)
            candidate[:] = False
            candidate[first[first < count]] = True
        elif (candidate[1:] & candidate[:-1]).any():
            positions = np.arange(count)
            run_start = np.where(candidate & ~np.concatenate(([False], candidate[:-1])), positions, 0)
            np.maximum.accumulate(run_start, out=run_start)
            candidate &= (positions - run_start) % 2 == 0
        take = np.flatnonzero(candidate)
        ids[take] = tables.merged_ids[rank[take]]
        keep[take + 1] = False
        merged_at = (np.cumsum(keep) - 1)[take]
        ids, word, rank = ids[keep], word[keep], rank[keep]
        changed = np.concatenate((merged_at[merged_at > 0] - 1, merged_at))
        rank[changed] = _old_pair_ranks_at(changed, ids, word, tables)
    all_words = np.concatenate(finished_words) if finished_words else np.zeros(0, dtype=np.int64)
    order = np.argsort(all_words, kind="stable")
    flat_ids = tuple(map(tables.id_objects.__getitem__,
                         (np.concatenate(finished_ids)[order] if finished_ids else all_words).tolist()))
    ends = np.cumsum(np.bincount(all_words, minlength=len(words))).tolist()
    return list(map(flat_ids.__getitem__, map(slice, [0, *ends], ends)))


def _old_pair_ranks_at(positions: np.ndarray, ids: np.ndarray, word: np.ndarray, tables: OldBatchTables) -> np.ndarray:
    right = np.minimum(positions + 1, ids.size - 1)
    keys = ids[positions] * tables.key_base + ids[right]
    slots = ((keys.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))
             >> np.uint64(64 - tables.hash_bits)).astype(np.int64)
    ranks = np.full(keys.size, NO_RANK, dtype=np.int64)
    pending = np.arange(keys.size)
    while pending.size:
        found = tables.table_keys[slots]
        hit = found == keys
        ranks[pending[hit]] = tables.table_ranks[slots[hit]]
        going_on = ~hit & (found != -1)
        pending, slots, keys = pending[going_on], slots[going_on] + 1, keys[going_on]
    valid = (word[right] == word[positions]) & (right > positions)
    return np.where(valid, ranks, NO_RANK)


def cpu_seconds(function: Callable[[], object]) -> float:
    start = time.process_time()
    function()
    return time.process_time() - start


def bench(words: list[bytes], tokenizer: Tokenizer, batch: int) -> list[float]:
    """CPU seconds of old merge_batch and merge_batch_packed over all batches (the order alternating)."""
    tables = BatchTables(tokenizer._byte_ids, tokenizer._pair_ranks, tokenizer._merged_ids)
    old_tables = OldBatchTables(tokenizer._byte_ids, tokenizer._pair_ranks, tokenizer._merged_ids)
    seconds = [0.0, 0.0]
    for index, start in enumerate(range(0, len(words), batch)):
        chunk = words[start:start + batch]
        contenders = [partial(old_merge_batch, chunk, old_tables), partial(merge_batch_packed, chunk, tables, ID_DTYPE)]
        for turn in range(2):
            contender = (index + turn) % 2
            seconds[contender] += cpu_seconds(contenders[contender])
    return seconds


def check(words: list[bytes], tokenizer: Tokenizer, batch: int) -> None:
    """Raise AssertionError unless merge_batch_packed gives merge_ids's ids for every word."""
    tables = BatchTables(tokenizer._byte_ids, tokenizer._pair_ranks, tokenizer._merged_ids)
    byte_ids = tokenizer._byte_ids
    for start in range(0, len(words), batch):
        chunk = words[start:start + batch]
        for word, packed in zip(chunk, merge_batch_packed(chunk, tables, ID_DTYPE), strict=True):
            expected = merge_ids([byte_ids[byte] for byte in word], tokenizer._pair_ranks, tokenizer._merged_ids)
            assert packed == np.array(expected, dtype=ID_DTYPE).tobytes(), (word, packed, expected)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpora", nargs="+", type=Path)
    parser.add_argument("--megabytes", type=float, default=None, help="read only the first MB of each corpus "
                        "(default: all)")
    parser.add_argument("--batch", type=int, nargs="+", default=[4096, 1024], help="batch sizes (default: 4096 1024)")
    parser.add_argument("--vocab", type=Path, default=FIXTURES / "gpt2_vocab.json")
    parser.add_argument("--merges", type=Path, default=FIXTURES / "gpt2_merges.txt")
    parser.add_argument("--no-check", action="store_true", help="skip the check against merge_ids")
    arguments = parser.parse_args()
    tokenizer = Tokenizer.from_files(arguments.vocab, arguments.merges, special_tokens=[EOT])
    print(f"{'corpus':<16} {'words':>7} {'bytes/w':>7} {'batch':>5} {'old us/w':>8} {'new us/w':>8} {'old/new':>7}")
    for path in arguments.corpora:
        words = distinct_pretokens(path, arguments.megabytes)
        if not arguments.no_check:
            check(words, tokenizer, max(arguments.batch))
        mean_length = sum(map(len, words)) / len(words)
        for batch in arguments.batch:
            old, new = (seconds / len(words) * 1e6 for seconds in bench(words, tokenizer, batch))
            print(f"{path.stem:<16} {len(words):>7} {mean_length:>7.1f} {batch:>5} {old:>8.2f} {new:>8.2f} "
                  f"{old / new:>7.2f}", flush=True)


if __name__ == "__main__":
    main()
