"""Parity-aware training from per-language pre-token counts: the merges of `reference_parity_train`, made by the one
merge loop over one store per language (`hf_bpe.train.merging.parity_selection`).

>>> vocab, merges = train_parity_from_counts({"en": {b"abc": 3}, "fr": {b"xyz": 2}}, 260,
...                                          dev={"en": {b"abc": 1}, "fr": {b"xyz": 2}})
>>> merges
[(b'y', b'z'), (b'x', b'yz'), (b'b', b'c'), (b'a', b'bc')]

Not handled: `token_counts` (the per-language report, `hf-bpe eval --corpus NAME=FILE`, encodes held-out text
instead), and the ParityBpeTrainer behaviours the reference names as departures (its tie order, its window variant
once a language is exhausted).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from operator import mul

import numpy as np

from hf_bpe.train._reference import check_parity_options
from hf_bpe.train.checks import check_arguments, check_counts, check_trainer_options, report_training
from hf_bpe.train.merging.flat_corpus import FlatCorpus, speculative_floor
from hf_bpe.train.merging.merge_loop import (
    Merges,
    RankedStore,
    Vocab,
    _Words,
    run_merge_loop,
    token_order_keys,
    vocab_of_merges,
)
from hf_bpe.train.merging.parity_selection import DevLengths, LanguageStore, ParitySelection
from hf_bpe.train.merging.queues import QUEUES


def train_parity_from_counts(source_counts: Mapping[str, Mapping[bytes, int]], vocab_size: int,
                             special_tokens: Sequence[str] | None = None, *,
                             dev: Mapping[str, Mapping[bytes, int]] | None = None,
                             ratios: Mapping[str, float] | None = None, variant: str = "base",
                             window_size: int = 100, alpha: float = 2.0, global_merges: int = 0,
                             weights: Mapping[str, int] | None = None, min_frequency: int = 0,
                             max_token_length: int | None = None, progress: bool | None = None,
                             verbose: bool = False) -> tuple[Vocab, Merges]:
    """Parity-aware BPE on each language's pre-token counts (`source_counts`, in language order): the same vocab
    and merges as `hf_bpe.train._reference.reference_parity_train` with the same arguments, whose docstring gives
    the rules (`dev` sets or `ratios`, the `variant`, `global_merges`, integer `weights`). ValueError for options it
    refuses; the counts are checked as `train_bpe_from_counts` checks them."""
    vocab_size, specials = check_arguments(vocab_size, special_tokens)
    check_trainer_options(min_frequency, max_token_length)
    names = list(source_counts)
    check_parity_options(names, dev, ratios, variant, window_size, alpha, weights)
    for counts in [*source_counts.values(), *(dev or {}).values()]:
        check_counts(counts, specials)
    start = time.perf_counter()
    multiplier = [1 if weights is None else weights.get(name, 1) for name in names]
    num_merges = vocab_size - 256 - len(specials)
    token_bytes: list[bytes | None] = [bytes([byte]) for byte in range(256)]
    token_keys = token_order_keys(token_bytes)
    languages = [_language_store(source_counts[name], weight, token_keys, min_frequency)
                 for name, weight in zip(names, multiplier)]
    initial = [store.tokens for store in languages]
    dev_lengths = None if dev is None else _dev_lengths([dev[name] for name in names])
    pooled = None
    if global_merges:
        pooled_counts = _pooled(source_counts, names, multiplier)
        words = _Words.of_counts(pooled_counts)
        words.check_totals()
        floor = max(speculative_floor(words.frequencies, min(global_merges, num_merges)),
                    min_frequency if min_frequency > 1 else 0)
        corpus = FlatCorpus(words.data, words.lengths, words.frequencies, floor)
        pooled = RankedStore(corpus, QUEUES["buckets"](corpus.pair_counts, token_keys, corpus.floor), min_frequency)
        del words, pooled_counts
    token_chars = languages[0].corpus.token_chars
    for store in [*languages, dev_lengths, pooled]:
        if store is not None:
            store.corpus.token_chars = token_chars
    selection = ParitySelection(languages, initial, token_chars, dev=dev_lengths,
                                ratios=None if ratios is None else [ratios[name] for name in names],
                                variant=variant, window_size=window_size, alpha=alpha, pooled=pooled,
                                global_merges=global_merges)
    del pooled
    id_merges = run_merge_loop(selection, num_merges, token_bytes, token_keys, progress,
                               max_token_length=max_token_length)
    if verbose:
        distinct = sum(len(counts) for counts in source_counts.values())
        report_training(distinct, 0.0, len(id_merges), time.perf_counter() - start)
    return vocab_of_merges(id_merges, specials)


def _language_store(counts: Mapping[bytes, int], weight: int, token_keys: list[str], min_frequency: int
                    ) -> LanguageStore:
    """A language's words, each count times `weight`, in a store with no floor, ranked by a queue sharing
    `token_keys`."""
    weighted = counts if weight == 1 else {word: count * weight for word, count in counts.items() if count * weight}
    words = _Words.of_counts(weighted)
    words.check_totals()
    corpus = FlatCorpus(words.data, words.lengths, words.frequencies)
    ranked = RankedStore(corpus, QUEUES["buckets"](corpus.pair_counts, token_keys), min_frequency)
    return LanguageStore(ranked, weight * _length_in_tokens(counts))


def _dev_lengths(dev_counts: list[Mapping[bytes, int]]) -> DevLengths:
    """The dev sets' distinct words of two bytes or more in one store, with each language's count of each."""
    rows: dict[bytes, int] = {}
    for counts in dev_counts:
        for word in counts:
            if len(word) > 1:
                rows.setdefault(word, len(rows))
    table = np.zeros((len(rows), len(dev_counts)), dtype=np.int64)
    for language, counts in enumerate(dev_counts):
        words = [word for word in counts if len(word) > 1]
        table[[rows[word] for word in words], language] = [counts[word] for word in words]
    totals = dict(zip(rows, table.sum(axis=1).tolist()))
    words = _Words.of_counts(totals)
    words.check_totals()
    corpus = FlatCorpus(words.data, words.lengths, words.frequencies)
    return DevLengths(corpus, table, [_length_in_tokens(counts) for counts in dev_counts])


def _length_in_tokens(counts: Mapping[bytes, int]) -> int:
    """The words' length in tokens before any merge, single bytes included (exact: Python ints)."""
    return sum(map(mul, map(len, counts), counts.values()))


def _pooled(source_counts: Mapping[str, Mapping[bytes, int]], names: list[str], multiplier: list[int]
            ) -> dict[bytes, int]:
    """Every language's counts times its weight, added up (the counts the global merges rank)."""
    pooled: dict[bytes, int] = {}
    get = pooled.get
    for name, weight in zip(names, multiplier):
        if weight:
            for word, count in source_counts[name].items():
                pooled[word] = get(word, 0) + count * weight
    return pooled
