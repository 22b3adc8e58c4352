"""Parity-aware training from per-language pre-token counts: the merges of `reference_parity_train`, made by the one
merge loop over one store per language (`hf_bpe.train.merging.parity_selection`).

>>> vocab, merges = train_parity_from_counts({"en": {b"abc": 3}, "fr": {b"xyz": 2}}, 260,
...                                          dev={"en": {b"abc": 1}, "fr": {b"xyz": 2}})
>>> merges
[(b'y', b'z'), (b'x', b'yz'), (b'b', b'c'), (b'a', b'bc')]

Not handled: the ParityBpeTrainer behaviours the reference names as departures (its tie order, its window variant
once a language is exhausted).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from itertools import compress, count
from operator import mul
from typing import NamedTuple

import numpy as np

from hf_bpe.encode.merge_kernels import range_positions
from hf_bpe.train._reference import check_parity_options
from hf_bpe.train.checks import check_arguments, check_counts, check_trainer_options, report_training
from hf_bpe.train.merging.field_floors import FieldFloors, PackedFields
from hf_bpe.train.merging.flat_corpus import FlatCorpus, speculative_floor
from hf_bpe.train.merging.merge_loop import (
    Merges,
    Vocab,
    gc_paused,
    run_merge_loop,
    token_order_keys,
    vocab_of_merges,
)
from hf_bpe.train.merging.pair_runs import pair_keys
from hf_bpe.train.merging.parity_selection import FieldQueue, ParitySelection

SINGLE_BYTES = [bytes([byte]) for byte in range(256)]


def train_parity_from_counts(source_counts: Mapping[str, Mapping[bytes, int]], vocab_size: int,
                             special_tokens: Sequence[str] | None = None, *,
                             dev: Mapping[str, Mapping[bytes, int]] | None = None,
                             ratios: Mapping[str, float] | None = None, variant: str = "base",
                             window_size: int = 100, alpha: float = 2.0, global_merges: int = 0,
                             weights: Mapping[str, int] | None = None, min_frequency: int = 0,
                             max_token_length: int | None = None, progress: bool | None = None,
                             verbose: bool = False, token_counts: np.ndarray | None = None,
                             consume_counts: bool = False,
                             field_floors: Sequence[int] | None = None) -> tuple[Vocab, Merges]:
    """Parity-aware BPE on each language's pre-token counts (`source_counts`, in language order): the same vocab
    and merges as `hf_bpe.train._reference.reference_parity_train` with the same arguments, whose docstring gives
    the rules (`dev` sets or `ratios`, the `variant`, `global_merges`, integer `weights`). ValueError for options it
    refuses; the counts are checked as `train_bpe_from_counts` checks them. `token_counts` (uint64, `vocab_size`
    entries) receives each token's count in the final segmentation of every language's words, times their weights,
    as `train_bpe_from_counts` gives it. `consume_counts=True` empties the counts (mutable mappings) once the store
    is built, so that their memory is free while the merge loop runs. `field_floors` (for tests) replaces the
    guessed floors of the languages and, with global merges, of the pooled field (`speculative_field_floors`):
    0 or powers of two, in that order; any floors give the same merges."""
    vocab_size, specials = check_arguments(vocab_size, special_tokens)
    check_trainer_options(min_frequency, max_token_length)
    names = list(source_counts)
    check_parity_options(names, dev, ratios, variant, window_size, alpha, weights)
    for counts in [*source_counts.values(), *(dev or {}).values()]:
        check_counts(counts, specials)
    distinct = sum(len(counts) for counts in source_counts.values())
    start = time.perf_counter()
    with gc_paused():  # the store's setup makes millions of ints, the loop millions of tuples: none in cycles
        multiplier = [1 if weights is None else weights.get(name, 1) for name in names]
        # The fields: each language's weighted training counts, then their sum (for the global merges), then the dev
        # sets.
        field_counts: list[tuple[Mapping[bytes, int], int]] = [(source_counts[name], weight)
                                                                for name, weight in zip(names, multiplier)]
        dev_fields = None
        if dev is not None:
            first_dev = len(names) + bool(global_merges)
            dev_fields = list(range(first_dev, first_dev + len(names)))
        tokens = [weight * _length_in_tokens(counts) for counts, weight in field_counts]
        if global_merges:
            tokens.append(sum(tokens))  # the pooled field's
        tokens += [_length_in_tokens(dev[name]) for name in names] if dev is not None else []
        largest = max(tokens, default=0)
        if largest >= 1 << 63:  # the queues hold counts below 2^63, as plain training's do
            raise ValueError("pre-token counts are too large: pair counts would overflow 64 bits")
        fields = PackedFields(largest.bit_length() + 1)  # no pair counts more than its field's tokens
        corpus, pooled_frequencies, language_words, byte_pair_counts = _packed_corpus(
            field_counts, [] if dev is None else [dev[name] for name in names], fields, pooled=bool(global_merges),
            exact_in_float=largest < 1 << 53)
        num_merges = vocab_size - 256 - len(specials)
        if field_floors is None:
            field_floors = speculative_field_floors([weights for _, weights in language_words],
                                                    pooled_frequencies if global_merges else None,
                                                    num_merges, global_merges)
        if len(field_floors) != len(names) + bool(global_merges):
            raise ValueError(f"field_floors: one floor per language, and one for the pooled field with global merges, "
                             f"got {len(field_floors)}")
        floors = FieldFloors(fields, list(field_floors))
        corpus.floor_mask = floors.mask()
        # The single bytes, in no pair, are not in the store.
        single_bytes = [(byte[0], occurrences * weight) for counts, weight in field_counts
                        for byte in SINGLE_BYTES if (occurrences := counts.get(byte))]
        del field_counts
        if consume_counts:
            for counts in [*source_counts.values(), *(dev or {}).values()]:
                counts.clear()  # type: ignore[attr-defined]
        token_bytes: list[bytes | None] = [bytes([byte]) for byte in range(256)]
        token_keys = token_order_keys(token_bytes)
        filed = _filed_byte_pairs(byte_pair_counts, floors.floors)
        queues = [FieldQueue(corpus.pair_counts, fields, field, token_keys, min_frequency, floors.floors[field],
                             filed[field]) for field in range(len(names))]
        global_queue = (FieldQueue(corpus.pair_counts, fields, len(names), token_keys, min_frequency,
                                   floors.floors[len(names)], filed[len(names)]) if global_merges else None)
        del filed, byte_pair_counts
        selection = ParitySelection(corpus, fields, queues, tokens, dev_fields=dev_fields,
                                    ratios=None if ratios is None else [ratios[name] for name in names],
                                    variant=variant, window_size=window_size, alpha=alpha, global_queue=global_queue,
                                    global_merges=global_merges, floors=floors, language_words=language_words)
        del queues, global_queue
        id_merges = run_merge_loop(selection, num_merges, token_bytes, token_keys, progress,
                                   max_token_length=max_token_length)
        if verbose:
            report_training(distinct, 0.0, len(id_merges), time.perf_counter() - start)
        if token_counts is not None:
            corpus.frequencies = pooled_frequencies  # the training fields' weighted counts added up
            corpus.add_token_counts(token_counts)
            for byte, count in single_bytes:
                token_counts[byte] += count
    return vocab_of_merges(id_merges, specials)


class _PackedStore(NamedTuple):
    """What `_packed_corpus` makes: the store; each word's training counts added up (Python ints), the frequencies
    of the final segmentation's token counts; each language's words in the store (their rows) with its weighted
    counts of them (int64), for its floor (`speculative_field_floors`, `field_floors.keep_pairs_in_words`); and each
    queue's field counts of the byte pairs (`_byte_pair_totals`), or None when they were not added up in numpy."""

    corpus: FlatCorpus
    pooled_frequencies: np.ndarray
    language_words: list[tuple[np.ndarray, np.ndarray]]
    byte_pair_counts: list[tuple[np.ndarray, np.ndarray]] | None


def _packed_corpus(training: list[tuple[Mapping[bytes, int], int]], dev: list[Mapping[bytes, int]],
                   fields: PackedFields, pooled: bool, exact_in_float: bool = False) -> _PackedStore:
    """One store of the distinct words of two bytes or more, each word's frequency its counts packed: the languages'
    `training` counts times their weights, then (if `pooled`) their sum, then the `dev` counts; with what
    `_PackedStore` gives beside it. `exact_in_float`: no field counts 2^53 or more, so the byte pairs' counts are
    added up per field in numpy (`_byte_pair_totals`)."""
    field_counts = [*training, *((counts, 1) for counts in dev)]
    # Every entry of every field numbered in one C-level pass: a word keeps the number it was first given (the
    # numbers of its later entries are skipped). Then the words of two bytes or more are the store's rows, in that
    # order, and the others (in no pair) go to a scratch row.
    numbers: dict[bytes, int] = {}
    given = count()
    entry_numbers = [np.fromiter(map(numbers.setdefault, counts, given), dtype=np.int64, count=len(counts))
                     if weight else None for counts, weight in field_counts]
    words = list(numbers)
    stored = np.fromiter(map(len, words), dtype=np.int64, count=len(words)) > 1
    size = int(np.count_nonzero(stored))
    row_of = np.full(next(given), size, dtype=np.int64)
    row_of[np.fromiter(numbers.values(), dtype=np.int64, count=len(numbers))[stored]] = np.arange(size)
    words = list(compress(words, stored.tolist()))
    del numbers
    packed = np.zeros(size + 1, dtype=object)
    summed = np.zeros(size + 1, dtype=object)
    field_words = []  # each field's words in the store, with its counts of them (int64), and its shift
    for field, (counts, weight) in enumerate(field_counts):
        shift = (field + (pooled and field >= len(training))) * fields.width  # the dev fields follow the pooled one
        if not weight:
            field_words.append((np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), shift))
            continue
        at = row_of[entry_numbers[field]]
        weighted = np.fromiter(counts.values(), dtype=object, count=len(counts))
        if weight != 1:
            weighted *= weight
        if field < len(training):
            summed[at] += weighted
        in_store = at < size
        field_words.append((at[in_store], weighted[in_store].astype(np.int64), shift))
        packed[at] += weighted << shift if shift else weighted
    if pooled:
        packed += summed << (len(training) * fields.width)
    lengths = np.fromiter(map(len, words), dtype=np.int64, count=size)
    data = b"".join(words)
    byte_pair_totals, byte_pair_counts = (_byte_pair_totals(data, lengths, field_words, len(training),
                                                            len(training) * fields.width if pooled else None)
                                          if exact_in_float else (None, None))
    language_words = [(rows, weights) for rows, weights, _ in field_words[:len(training)]]
    return _PackedStore(FlatCorpus(data, lengths, packed[:size], byte_pair_totals=byte_pair_totals), summed[:size],
                        language_words, byte_pair_counts)


def _byte_pair_totals(data: bytes, lengths: np.ndarray, field_words: list[tuple[np.ndarray, np.ndarray, int]],
                      languages: int, pooled_shift: int | None
                      ) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """Each byte pair's packed count in the words `data` (end to end, `lengths`; indexed by left byte << 8 | right
    byte): each field's (`field_words`: its words, its int64 counts of them, its shift; the first `languages` are
    the training fields, whose sum goes at `pooled_shift` when given) added up by a bincount, then shifted into
    place. Where the store would add up Python ints at every position, this adds int64 per field and makes Python
    ints once per pair and field. The bincount's float64 sums are exact only below 2^53: the caller checks that no
    field counts that much. Also each training field's counts, then the pooled field's when given, as the codes of
    the pairs it counts and their counts (int64): what the queues start from.

    >>> totals, field_counts = _byte_pair_totals(b"abab", np.array([2, 2]), [(np.array([0]), np.array([3]), 0),
    ...                                          (np.array([0, 1]), np.array([1, 2]), 8)], 2, None)
    >>> totals[97 << 8 | 98], [(codes.tolist(), counts.tolist()) for codes, counts in field_counts]
    (771, [([24930], [3]), ([24930], [3])])
    """
    symbols = np.frombuffer(data, dtype=np.uint8)
    offsets = np.cumsum(lengths) - lengths
    totals = np.zeros(1 << 16, dtype=object)
    pooled_sums = np.zeros(1 << 16)
    field_counts = []
    for field, (rows, weights, shift) in enumerate(field_words):
        if not len(rows):
            if field < languages:
                field_counts.append((np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.int64)))
            continue
        pairs = lengths[rows] - 1  # every word in the store has two bytes or more
        lefts = range_positions(offsets[rows], pairs)
        codes = symbols[lefts].astype(np.intp) << 8 | symbols[lefts + 1]
        sums = np.bincount(codes, weights=np.repeat(weights, pairs).astype(np.float64), minlength=1 << 16)
        counted = np.flatnonzero(sums)
        if field < languages:
            pooled_sums += sums
            field_counts.append((counted, sums[counted].astype(np.int64)))
        totals[counted] += sums[counted].astype(np.int64).astype(object) << shift
    if pooled_shift is not None:
        counted = np.flatnonzero(pooled_sums)
        totals[counted] += pooled_sums[counted].astype(np.int64).astype(object) << pooled_shift
        field_counts.append((counted, pooled_sums[counted].astype(np.int64)))
    return totals, field_counts


def _filed_byte_pairs(byte_pair_counts: list[tuple[np.ndarray, np.ndarray]] | None, floors: list[int]
                      ) -> list[tuple[list[str], np.ndarray] | None]:
    """What each queue (a language's, then the pooled one) files to begin with, from its field's counts of the byte
    pairs (the codes left byte << 8 | right byte, and their counts): the byte pairs counting at least its floor (and
    1) there, as the merge loop's keys, with those counts. All None when the counts were not added up in numpy: each
    queue then goes over the store's counts itself.

    >>> counts = (np.array([97 << 8 | 98, 98 << 8 | 99]), np.array([5, 1]))
    >>> [(pairs, counts.tolist()) for pairs, counts in _filed_byte_pairs([counts, counts], [0, 4])]
    [(['ab', 'bc'], [5, 1]), (['ab'], [5])]
    """
    if byte_pair_counts is None:
        return [None] * len(floors)
    filed: list[tuple[list[str], np.ndarray] | None] = []
    for (codes, counts), floor in zip(byte_pair_counts, floors):
        kept = counts >= max(floor, 1)
        filed.append((pair_keys(codes[kept], 8), counts[kept]))
    return filed


# Each language's floor guesses the count of its last merge as if it got this many times an even share of the merges
# (parity shares them unevenly). A guess too high costs a count of that language's words each time its floor is
# halved (`ParitySelection._lower_floor`), never a merge; one too low keeps pairs that will never be merged.
FLOOR_SHARE = 1


def speculative_field_floors(language_frequencies: Sequence[np.ndarray], pooled: np.ndarray | None,
                             num_merges: int, global_merges: int) -> list[int]:
    """The floors `train_parity_from_counts` starts from: each language's (the weighted counts of its words of two
    bytes or more, int64) is `speculative_floor` for FLOOR_SHARE times an even share of `num_merges`, and the
    `pooled` field's (the weighted sums, with global merges) is its floor for the `global_merges`; each rounded down
    to a power of two (or 0).

    >>> speculative_field_floors([np.array([40, 9, 3]), np.array([6])], None, 4, 0)
    [8, 0]
    """
    share = FLOOR_SHARE * num_merges // max(len(language_frequencies), 1)
    guesses = [speculative_floor(frequencies, share) for frequencies in language_frequencies]
    if pooled is not None:
        guesses.append(speculative_floor(pooled.astype(np.int64), global_merges))
    return [1 << (guess.bit_length() - 1) if guess > 1 else 0 for guess in guesses]


def _length_in_tokens(counts: Mapping[bytes, int]) -> int:
    """The words' length in tokens before any merge, single bytes included (exact: Python ints)."""
    return sum(map(mul, map(len, counts), counts.values()))
