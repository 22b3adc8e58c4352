"""Parity-aware training's floors, one per field of the packed counts (`parity_selection`), and the lowering of one
field's floor by counting the pairs of that field's words only.

A pair is left out of the store (`FlatCorpus`: not counted, not indexed) while it counts less than its floor in every
field (`FlatCorpus.floor_mask`). Lowering the floors all at once counts every pair of the store again
(`FlatCorpus.lower_floor`). But a pair that one field's lowered floor keeps occurs in that field's words (its count
there is not 0): `keep_pairs_in_words` finds those pairs among the pairs of those words alone, then counts and
indexes them over the whole store. So each language's floor can start near the count of its own last merge, and be
lowered, a language at a time, when its queue runs dry above it.
"""

from __future__ import annotations

import numpy as np

from hf_bpe.encode.merge_kernels import range_positions
from hf_bpe.train.merging.flat_corpus import SEPARATOR, FlatCorpus, index_entries, lowered_floor, pair_keys
from hf_bpe.train.merging.pair_runs import contained, pair_shift, sorted_pair_runs


class PackedFields:
    """Counts of several fields packed in one Python int, `width` bits each, field 0 lowest (field j is
    `(packed >> (j * width)) & mask`).

    >>> fields = PackedFields(8)
    >>> packed = 3 | 7 << 16  # fields 3, 0, 7
    >>> (packed - (1 | 2 << 16)) >> 16 & fields.mask  # subtracted field by field
    5
    """

    def __init__(self, width: int) -> None:
        self.width, self.mask = width, (1 << width) - 1


class FieldFloors:
    """The floors of the counted fields (the languages' training fields, then the pooled one): each 0 or a power of
    two. `mask` is the store's `floor_mask`: a field's bits from its floor up.

    >>> floors = FieldFloors(PackedFields(8), [16, 0, 8])
    >>> hex(floors.mask()), list(map(hex, floors.field_masks()))
    ('0xf8fff0', ['0xf0', '0xff00', '0xf80000'])
    >>> floors.lower(0, 0), floors.floors, floors.lower(1, 0)
    (True, [4, 0, 2], False)
    >>> floors.lower_one(2, 2), floors.floors  # pairs below 2 could not be merged (min_frequency 2)
    (False, [4, 0, 2])
    >>> floors.lower_one(0, 0), floors.floors
    (True, [2, 0, 2])
    """

    def __init__(self, fields: PackedFields, floors: list[int]) -> None:
        if any(floor & (floor - 1) for floor in floors):
            raise ValueError(f"field floors must be 0 or powers of two, got {floors}")
        self.fields, self.floors = fields, floors

    def mask(self) -> int:
        return sum(self.field_masks())

    def field_masks(self) -> list[int]:
        """Each field's bits from its floor up: a packed count has one of them when it counts at least the floor
        there (the floor is a power of two), and so does a bitwise or of counts when one of them does."""
        return [(self.fields.mask & -max(floor, 1)) << (field * self.fields.width)
                for field, floor in enumerate(self.floors)]

    def lower(self, field: int, min_frequency: int) -> bool:
        """Lower every floor as `FlatCorpus.lower_floor` lowers a plain one, once `field`'s queue ran dry above its
        floor. False (nothing lowered) when no pair below `field`'s floor can be merged (it is 0, or at most
        `min_frequency`)."""
        if self.floors[field] <= max(min_frequency, 1):
            return False
        self.floors = list(map(lowered_floor, self.floors))
        return True

    def lower_one(self, field: int, min_frequency: int) -> bool:
        """Halve `field`'s floor alone (`keep_pairs_in_words` counts what it then keeps); False as `lower`. A
        lowering costs a count of that language's words only, so it is cheaper to take smaller steps than
        `lower`'s: the floor stays nearer the count of the language's last merge."""
        if self.floors[field] <= max(min_frequency, 1):
            return False
        self.floors[field] //= 2
        return True


class StorePositions:
    """Where the store's words lie and where its tokens are, for the lowerings of one field's floor: the separators'
    positions (word i lies between the i-th and the next; they never move) and the live positions (those holding a
    token), found once and then narrowed at each look, since a position that died stays dead. So a lowering goes over
    the positions live at the last one, not over the whole store, most of whose positions the early merges killed."""

    def __init__(self, corpus: FlatCorpus) -> None:
        self.separators = np.flatnonzero(corpus.symbols == SEPARATOR)
        self._live = np.flatnonzero(corpus.symbols >= 0).astype(np.int32)  # the store's positions are int32

    def live(self, symbols: np.ndarray) -> np.ndarray:
        """The positions holding a token in `symbols` (the store's, now), ascending."""
        self._live = self._live[symbols[self._live] >= 0]
        return self._live


def keep_pairs_in_words(corpus: FlatCorpus, positions: StorePositions, words: np.ndarray, weights: np.ndarray,
                        floor: int, old_floor: int, mask: int) -> dict[str, int]:
    """Once one field's floor is lowered from `old_floor` to `floor` (the store's `floor_mask` becoming `mask`):
    count and index in `corpus` every pair it left out that counts `floor` or more in that field (and so less than
    `old_floor`: those counting more were kept), whose words are `words` (word numbers) with the counts `weights`
    (int64) there. Return every pair that counts from `floor` to below `old_floor` in that field, kept now or before
    (by another field), with its (packed) count: what that field's queue, which files no pair below its floor,
    must add.

    >>> from hf_bpe.train.merging.flat_corpus import words_of
    >>> data, lengths, _ = words_of({b"ab": 1, b"cd": 1})
    >>> corpus = FlatCorpus(data, lengths, np.array([1, 2 << 8], dtype=object))
    >>> corpus.floor_mask = 0xFF00  # field 1 from 1: "cd" kept, "ab" left out
    >>> corpus.pair_counts = {"cd": 512}
    >>> positions = StorePositions(corpus)
    >>> keep_pairs_in_words(corpus, positions, np.array([0]), np.array([1]), 1, 2, 0xFFFF), sorted(corpus.pair_counts)
    ({'ab': 1}, ['ab', 'cd'])
    >>> keep_pairs_in_words(corpus, positions, np.array([1]), np.array([2]), 1, 4, 0xFFFF)  # "cd" kept before
    {'cd': 512}
    """
    corpus.floor_mask = mask
    symbols, next_positions = corpus.symbols, corpus.next_positions
    # The words' positions: each word lies between two separators.
    separators = positions.separators
    firsts = separators[words] + 1
    sizes = separators[words + 1] - firsts
    in_words = range_positions(firsts, sizes)
    position_weights = np.repeat(weights, sizes)
    lefts = symbols[in_words]
    rights = symbols[next_positions[in_words]]
    live = (lefts >= 0) & (rights >= 0)
    shift = pair_shift(len(corpus.token_chars) - 1)
    codes = lefts[live].astype(np.int64) << shift | rights[live]
    runs = sorted_pair_runs(None, codes, 2 * shift, position_weights[live])
    codes = runs.codes[(runs.totals >= floor) & (runs.totals < old_floor)]
    keys = pair_keys(codes, shift)
    counted = list(map(corpus.pair_counts.get, keys))
    if None not in counted:
        return dict(zip(keys, counted))
    in_range = {key: count for key, count in zip(keys, counted) if count is not None}  # kept by other fields
    codes = codes[np.array([count is None for count in counted], dtype=bool)]
    # Their positions in the whole store, ascending: those where one of their left tokens is followed by one of
    # their right tokens, then those of their codes.
    starts_one = np.zeros(len(corpus.token_chars), dtype=bool)
    starts_one[codes >> shift] = True
    ends_one = np.zeros(len(corpus.token_chars) + 2, dtype=bool)  # two more: a separator or a dead position after
    ends_one[codes & ((1 << shift) - 1)] = True
    live = positions.live(symbols)
    candidates = live[starts_one[symbols[live]]]
    rights = symbols[next_positions[candidates]]
    followed = ends_one[rights]
    candidates, rights = candidates[followed], rights[followed]
    codes_there = symbols[candidates].astype(np.int64) << shift | rights
    matched = contained(codes_there, codes)
    at = candidates[matched].astype(np.int32)
    runs = sorted_pair_runs(at, codes_there[matched], 2 * shift, corpus.frequencies[corpus.words.at(at)])
    keys = pair_keys(runs.codes, shift)
    stops = np.cumsum(runs.sizes)
    corpus.index.update(index_entries(keys, runs.positions, (stops - runs.sizes).tolist(), stops.tolist()))
    kept = dict(zip(keys, runs.totals.tolist()))
    corpus.pair_counts.update(kept)
    in_range.update(kept)
    return in_range
