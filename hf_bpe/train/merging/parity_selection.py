"""Parity-aware BPE's choice of pair (Foroutan et al. 2025): the one merge loop (`merge_loop.run_merge_loop`) over one
store of all languages' words, ranked by one queue per language.

Each step takes the language most in need of a merge and pops that language's best pair; the merge is made once, in
the one store. `hf_bpe.train._reference.reference_parity_train` is the spec (the choice of language, the window
variant, ratios, global merges, weights, exhausted languages); this is its fast path.

* **Packed counts.** A word's frequency is one Python int holding its count in every language side by side, a
  field of `PackedFields.width` bits each (`PackedFields`): the languages' (weighted) training counts, then, with
  global merges, their weighted sum, then, with dev sets, the dev counts. Pair counts are sums of frequencies and
  never fall below zero in any field (they are exact), so adding and subtracting packed ints adds and subtracts
  every field at once, with no carry between fields. So the store is the plain `FlatCorpus`, whose frequencies
  are these ints (in an object array): a word found in many languages is merged once, and its pairs' counts
  updated once.
* **Queues.** Each language's `_BucketQueue` ranks the pairs by its field of their packed counts (its `field`);
  a merge's created pairs are handed to the queues of the languages in which they occur. The queues'
  invariant (a created pair never counts more than the bucket being drained) holds per field, whichever language
  chose the merge.
* **Lengths.** The lengths that choose the language (the dev sets, or the training words for ratios and for
  neither) fall, field by field, by the packed sum of the occurrences a merge merged: for a pair of two different
  tokens, exactly its count before the merge (its occurrences cannot overlap); for (a, a), the frequencies of the
  words at the listed positions that now hold the new token. No dev word is scanned again.

* **Floors.** As plain training's store leaves out the pairs made below a speculative floor, this one leaves out the
  pairs made below every field's floor (`FieldFloors`: a power of two per training field, tested at once as a bit
  mask, `FlatCorpus.floor_mask`; `field_floors`). A language's queue gives None rather than a pair below its floor;
  that language's floor is then halved, the pairs it now keeps are counted from its words
  (`field_floors.keep_pairs_in_words`), and its queue files those that now count enough there (a queue files no
  pair below its floor). The pooled field's floor (global merges) is lowered with all the others, the whole store
  counted afresh (`FlatCorpus.lower_floor`), and every queue files its new range. The dev
  fields have no floor: their counts only shorten the dev lengths, by the merged pair's count, and a merged pair is
  always kept.

Not handled: the `strings` store and the heap queue (the loop's plain alternatives).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from functools import reduce
from itertools import compress, repeat
from operator import and_, or_, rshift

import numpy as np

from hf_bpe.train.merging.field_floors import FieldFloors, PackedFields, StorePositions, keep_pairs_in_words
from hf_bpe.train.merging.flat_corpus import FlatCorpus
from hf_bpe.train.merging.queues import QUEUES


class FieldQueue:
    """A queue of one field's pairs (`field` of the packed `pair_counts`), best first; `pop` gives None once none is
    left or the best counts less than `min_frequency`. `filed`: the pairs it starts with, and their counts there,
    when known (see `_BucketQueue`)."""

    def __init__(self, pair_counts: dict[str, int], fields: PackedFields, field: int, token_keys: list[str],
                 min_frequency: int = 0, floor: int = 0, filed: tuple[list[str], np.ndarray] | None = None) -> None:
        self.pair_counts, self.min_frequency = pair_counts, min_frequency
        self.shift, self.mask = field * fields.width, fields.mask
        self.queue = QUEUES["buckets"](pair_counts, token_keys, floor, field=(self.shift, self.mask), filed=filed)
        self.add = self.queue.add  # the pairs a merge created (packed counts): those that count enough here

    def add_counting(self, low: int, high: int) -> None:
        """File the store's pairs that count from `low` to below `high` in this field (after the floor fell from
        `high` to `low`), found by C-level maps over every pair."""
        counts = map(and_, map(rshift, self.pair_counts.values(), repeat(self.shift)), repeat(self.mask))
        self.add(dict(compress(self.pair_counts.items(), map(range(max(low, 1), high).__contains__, counts))))

    def pop(self) -> str | None:
        pair = self.queue.pop()
        if pair is None or (self.min_frequency > 1
                            and self.pair_counts.get(pair, 0) >> self.shift & self.mask < self.min_frequency):
            return None
        return pair


class ParitySelection:
    """The pairs of parity-aware training, for `run_merge_loop` (see the module docstring).

    `corpus`: the store of every language's words, its frequencies packed; `fields`: its packing, the languages'
    training fields first (0 to n - 1); `queues`: each language's `FieldQueue`, in language order; `tokens`: every
    field's length in tokens before any merge, single bytes included; `dev_fields`: the dev sets' fields, whose
    lengths choose the language (None: the training fields' do); `ratios`: each language's target compression, or
    None; `global_queue`: the queue of the pooled field for the first `global_merges`; `floors`: the floors of the
    queues' fields (the languages', then the pooled one), as the store and the queues were given them."""

    def __init__(self, corpus: FlatCorpus, fields: PackedFields, queues: Sequence[FieldQueue], tokens: list[int], *,
                 dev_fields: Sequence[int] | None = None, ratios: Sequence[float] | None = None,
                 variant: str = "base", window_size: int = 100, alpha: float = 2.0,
                 global_queue: FieldQueue | None = None, global_merges: int = 0,
                 floors: FieldFloors | None = None,
                 language_words: Sequence[tuple[np.ndarray, np.ndarray]] | None = None) -> None:
        self.corpus, self.fields, self.queues = corpus, fields, list(queues)
        self.dev_fields, self.ratios = dev_fields, ratios
        self.initial = tokens[:len(self.queues)]
        self.variant, self.window_size = variant, window_size
        self.share = alpha / len(self.queues)  # the most of the window a language may have had
        self.window: deque[int] = deque()
        self.window_counts = [0] * len(self.queues)
        self.global_queue, self.global_merges = global_queue, global_merges
        self.floors, self.language_words = floors, language_words
        self.positions: StorePositions | None = None  # the store's, once a language's floor is lowered
        self.merges_made = 0
        # With ratios, a language without training text is never chosen (its compression is 0/0).
        self.exhausted = ({index for index, total in enumerate(self.initial) if total == 0} if ratios is not None
                          else set())
        self.chosen: int | None = None
        # The lengths that choose (the dev fields', or the training fields': consecutive fields), and where their
        # fields lie in a packed count.
        choosing = list(dev_fields if dev_fields is not None else range(len(self.queues)))
        if choosing != list(range(choosing[0], choosing[0] + len(choosing))):
            raise ValueError(f"the fields whose lengths choose the language must be consecutive, got {choosing}")
        self.lengths = [tokens[field] for field in choosing]
        self.length_shift, self.length_bits = choosing[0] * fields.width, (1 << (len(choosing) * fields.width)) - 1
        # Each language's field bits from its floor up: the queues that some pair a merge created counts enough in.
        self.field_masks = (floors.field_masks()[:len(self.queues)] if floors is not None
                            else [fields.mask << (field * fields.width) for field in range(len(self.queues))])

    def pop(self) -> str | None:
        if self.merges_made < self.global_merges:
            if self.global_queue is None:
                return None
            while (pair := self.global_queue.pop()) is None and self._lower_floor(len(self.queues)):
                pass
            return pair
        while len(self.exhausted) < len(self.queues):
            if self.chosen is None:  # a new step: a pair passed over keeps the step's language
                self.chosen = self._choose()
            pair = self.queues[self.chosen].pop()
            if pair is not None:
                return pair
            if not self._lower_floor(self.chosen):
                self.exhausted.add(self.chosen)  # for good, and this step makes no merge
                self.chosen = None
        return None

    def _lower_floor(self, field: int) -> bool:
        """Once the queue of `field` (a language's, or the pooled one) ran dry above its floor: lower its floor, and
        file in each queue whose floor fell the pairs that now count enough there (a queue files none below its
        floor). A language's floor is halved alone, the pairs it now keeps counted from its words
        (`keep_pairs_in_words`); the pooled one is lowered with all the others, the whole store counted afresh
        (`FieldFloors.lower`). False when that field's floor cannot be lowered."""
        queue = self.queues[field] if field < len(self.queues) else self.global_queue
        if self.floors is None or queue is None:
            return False
        old_floors = list(self.floors.floors)
        if field < len(self.queues) and self.language_words is not None:
            if not self.floors.lower_one(field, queue.min_frequency):
                return False
            if self.positions is None:
                self.positions = StorePositions(self.corpus)
            words, weights = self.language_words[field]
            queue.queue.floor = self.floors.floors[field]
            self.field_masks = self.floors.field_masks()[:len(self.queues)]
            queue.add(keep_pairs_in_words(self.corpus, self.positions, words, weights, self.floors.floors[field],
                                          old_floors[field], self.floors.mask()))
            return True
        if not self.floors.lower(field, queue.min_frequency):
            return False
        self.corpus.lower_floor(self.floors.mask())
        self.field_masks = self.floors.field_masks()[:len(self.queues)]
        for index, each in enumerate([*self.queues, self.global_queue]):
            if each is not None:
                each.queue.floor = self.floors.floors[index]
                each.add_counting(self.floors.floors[index], old_floors[index])
        return True

    def merge(self, pair: str, new_token: str) -> None:
        self.merges_made += 1
        self.chosen = None
        corpus = self.corpus
        count = corpus.pair_counts.get(pair, 0)
        positions = None
        if pair[0] == pair[1]:  # overlapping occurrences: only those merged count
            entry = corpus.index.get(pair, ())
            positions = np.array([entry] if isinstance(entry, int) else entry, dtype=np.int64)
        created = corpus.merge(pair, new_token)
        if positions is not None:
            words = corpus.words.at(positions[corpus.symbols[positions] == ord(new_token)]).tolist()
            count = sum(map(corpus.frequency_array.__getitem__, words))
        if count:
            self._shorten(count)
        if self.global_queue is not None and self.merges_made >= self.global_merges:
            self.global_queue = None  # the global merges are made: its memory goes
        if not created:
            return
        present = reduce(or_, created.values())  # a floor bit of a field is set where some pair counts enough
        for queue in compress(self.queues, map(and_, repeat(present), self.field_masks)):
            queue.add(created)
        if self.global_queue is not None:
            self.global_queue.add(created)

    def _shorten(self, count: int) -> None:
        """Take from each length its field of the packed `count`: its nonzero fields only, the highest first (a pair
        occurs in few languages' dev sets), each found from the highest bit left."""
        lengths, width = self.lengths, self.fields.width
        rest = count >> self.length_shift & self.length_bits
        while rest:
            field = (rest.bit_length() - 1) // width
            low = field * width
            lengths[field] -= rest >> low
            rest &= (1 << low) - 1

    def _need(self) -> list[float] | list[int]:
        """Each language's need of a merge, the greatest first (the reference's expressions, the same floats)."""
        if self.dev_fields is not None:
            return self.lengths
        current = self.lengths
        if self.ratios is not None:  # the smaller the adjusted compression, the greater the need
            return [-(initial / max(tokens, 1)) / ratio for initial, tokens, ratio in zip(self.initial, current,
                                                                                          self.ratios)]
        return current

    def _choose(self) -> int:
        need = self._need()
        if self.variant != "window" and not self.exhausted:
            return need.index(max(need))  # the first of equal needs: the first language wins a tie
        candidates = ([index for index in range(len(need)) if index not in self.exhausted] if self.exhausted
                      else range(len(need)))
        if self.variant != "window":
            return max(candidates, key=need.__getitem__)
        ranked = sorted(candidates, key=lambda index: (-need[index], index))
        counts, size, share = self.window_counts, self.window_size, self.share
        chosen = next((index for index in ranked if counts[index] / size <= share), ranked[-1])
        self.window.append(chosen)
        counts[chosen] += 1
        if len(self.window) > size:
            counts[self.window.popleft()] -= 1
        return chosen
