"""Parity-aware BPE's choice of pair (Foroutan et al. 2025): the one merge loop (`merge_loop.run_merge_loop`), fed by
one store and queue per language instead of one for the pooled corpus.

Each step takes the language most in need of a merge and pops that language's best pair; the merge is then made in
every language's store and every dev set's store. `hf_bpe.train._reference.reference_parity_train` is the spec (the
choice of language, the window variant, ratios, global merges, weights, exhausted languages); this is its fast path:

* Every language's words are a `FlatCorpus` with no speculative floor, so that its pair counts are exact for every
  pair: a pair another language chose must be merged here too, wherever it occurs. Its own `_BucketQueue` ranks its
  pairs; the queues' invariant (a created pair never counts more than the bucket being drained) holds per language,
  whichever language chose the merge, as a created pair never counts more in a language than the merged pair did.
* The lengths that choose the language (dev sets, or the training words for ratios and for neither) are kept as
  running totals, lowered after each merge by the occurrences it merged: for a pair of two different tokens, exactly
  its count before the merge (its occurrences cannot overlap); for (a, a), the listed positions that now hold the new
  token. No dev word is scanned again.
* The stores share one list of the tokens' characters, so a store that does not hold the merged pair is not
  visited at all.
* The dev sets are one store of their distinct words (`DevLengths`): only their lengths are needed, not their pairs.
* The first `global_merges` merges come from a store of the pooled (weighted) words, with the usual speculative
  floor; it is dropped once they are made.

Not handled: the `strings` store and the heap queue (the loop's plain alternatives); `token_counts`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from operator import sub

import numpy as np

from hf_bpe.train.merging.flat_corpus import FlatCorpus
from hf_bpe.train.merging.merge_loop import RankedStore


class LanguageStore:
    """One language's words as a `FlatCorpus` ranked by its queue, and their running length in tokens."""

    __slots__ = ("corpus", "ranked", "tokens")

    def __init__(self, ranked: RankedStore, tokens: int) -> None:
        self.ranked, self.corpus, self.tokens = ranked, ranked.corpus, tokens

    def merge(self, pair: str, new_token: str) -> None:
        """Merge `pair` in these words (which hold it); lower `tokens` by the occurrences merged, times their words'
        frequencies."""
        corpus = self.corpus
        if pair[0] != pair[1]:  # occurrences cannot overlap: every one counted is merged
            self.tokens -= corpus.pair_counts[pair]
            self.ranked.queue.add(corpus.merge(pair, new_token))
            return
        positions = _listed_positions(corpus, pair)
        self.ranked.queue.add(corpus.merge(pair, new_token))
        merged = positions[corpus.symbols[positions] == ord(new_token)]
        self.tokens -= int(corpus.frequencies[corpus.word_of[merged]].sum())


class DevLengths:
    """The dev sets' words, each distinct word once in one `FlatCorpus` however many languages have it, and each
    language's running length in tokens: after a merge, each language's counts of the words where it merged,
    summed in one numpy operation (`counts`, words by languages)."""

    def __init__(self, corpus: FlatCorpus, counts: np.ndarray, tokens: list[int]) -> None:
        self.corpus, self.counts, self.tokens = corpus, counts, tokens

    def merge(self, pair: str, new_token: str) -> None:
        corpus = self.corpus
        if pair not in corpus.pair_counts:
            return
        positions = _listed_positions(corpus, pair)
        corpus.merge(pair, new_token)
        merged = positions[corpus.symbols[positions] == ord(new_token)]
        if len(merged):
            self.tokens = list(map(sub, self.tokens, self.counts[corpus.word_of[merged]].sum(axis=0).tolist()))


def _listed_positions(corpus: FlatCorpus, pair: str) -> np.ndarray:
    """The positions `corpus` lists for `pair` (some may be stale; none is missing: the store has no floor)."""
    entry = corpus.index.get(pair, ())
    return np.array([entry] if isinstance(entry, int) else entry, dtype=np.int64)


class ParitySelection:
    """The pairs of parity-aware training, for `run_merge_loop` (see the module docstring).

    `languages`: each language's store (with its queue, `LanguageStore.ranked`), in language order, over its
    weighted words; `initial`: each one's weighted length in tokens before any merge (single bytes included);
    `token_chars`: the list every store shares (`FlatCorpus.token_chars`); `dev`: the dev sets' store, or None;
    `ratios`: each language's target compression, or None (neither: the weighted training length chooses);
    `pooled`: the store of the pooled words for the first `global_merges`."""

    def __init__(self, languages: Sequence[LanguageStore], initial: Sequence[int], token_chars: list[str], *,
                 dev: DevLengths | None = None, ratios: Sequence[float] | None = None,
                 variant: str = "base", window_size: int = 100, alpha: float = 2.0,
                 pooled: RankedStore | None = None, global_merges: int = 0) -> None:
        self.languages, self.initial, self.dev, self.ratios = list(languages), list(initial), dev, ratios
        self.variant, self.window_size = variant, window_size
        self.share = alpha / len(self.languages)  # the most of the window a language may have had
        self.window: deque[int] = deque()
        self.window_counts = [0] * len(self.languages)
        self.pooled, self.global_merges = pooled, global_merges
        self.merges_made = 0
        # With ratios, a language without training text is never chosen (its compression is 0/0).
        self.exhausted = {index for index, total in enumerate(initial) if total == 0} if ratios is not None else set()
        self.chosen: int | None = None
        self.token_chars = token_chars  # every store's: chr(id) for every id so far

    def pop(self) -> str | None:
        if self.merges_made < self.global_merges:
            return None if self.pooled is None else self.pooled.pop()
        while len(self.exhausted) < len(self.languages):
            if self.chosen is None:  # a new step: a pair passed over keeps the step's language
                self.chosen = self._choose()
            store = self.languages[self.chosen].ranked
            pair = None if store is None else store.pop()
            if pair is not None:
                return pair
            self.exhausted.add(self.chosen)  # for good, and this step makes no merge
            self.chosen = None
        return None

    def merge(self, pair: str, new_token: str) -> None:
        self.merges_made += 1
        self.chosen = None
        self.token_chars.append(new_token)  # for every store, those without the pair too
        if self.pooled is not None:
            if self.merges_made < self.global_merges:
                self.pooled.merge(pair, new_token)
            else:
                self.pooled = None  # the global merges are made: its memory goes
        for store in self.languages:
            if pair in store.corpus.pair_counts:
                store.merge(pair, new_token)
        if self.dev is not None:
            self.dev.merge(pair, new_token)

    def _need(self) -> list[float]:
        """Each language's need of a merge, the greatest first (the reference's expressions, the same floats)."""
        if self.dev is not None:
            return self.dev.tokens
        if self.ratios is not None:  # the smaller the adjusted compression, the greater the need
            return [-(initial / max(store.tokens, 1)) / ratio
                    for initial, store, ratio in zip(self.initial, self.languages, self.ratios)]
        return [store.tokens for store in self.languages]

    def _choose(self) -> int:
        need = self._need()
        candidates = [index for index in range(len(need)) if index not in self.exhausted]
        if self.variant != "window":
            return max(candidates, key=lambda index: (need[index], -index))
        ranked = sorted(candidates, key=lambda index: (-need[index], index))
        counts, size, share = self.window_counts, self.window_size, self.share
        chosen = next((index for index in ranked if counts[index] / size <= share), ranked[-1])
        self.window.append(chosen)
        counts[chosen] += 1
        if len(self.window) > size:
            counts[self.window.popleft()] -= 1
        return chosen
