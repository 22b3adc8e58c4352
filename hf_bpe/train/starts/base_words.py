"""The start state of continuing from a base tokenizer (`hf_bpe.train.starts.extend`, and SuperBPE's later stage-2
rounds, `hf_bpe.train.starts.superword_passes`): each distinct pre-token split into base tokens by hf_bpe's encoder
(`Tokenizer.merge_pretoken_arrays`: the base merges in rank order, in numpy batches, giant pre-tokens in bounded
memory; shortest first, in worker processes, while this process sorts the pairs of the batches done: `base_words`),
the base ids the words hold renumbered 0, 1, ... (`compact_ids`), and the merge loop run from there
(`continue_from_base`). New tokens take the ids after the base's largest id (special tokens included).
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Iterator, Mapping

import numpy as np

from hf_bpe.common.errors import InputError
from hf_bpe.common.parallel import default_num_workers, multiprocessing_context, process_pool, worker_state
from hf_bpe.encode.tokenizer import Tokenizer
from hf_bpe.train.checks import report_training
from hf_bpe.train.counting.local_engine import check_num_workers
from hf_bpe.train.merging.merge_loop import MAX_TOKEN_ID, Merges, Vocab, _merge, _Words
from hf_bpe.train.merging.pair_runs import PairRuns, pair_shift, sorted_pair_runs
from hf_bpe.train.starts.superword_words import segment_dtype

# The distinct pre-tokens are split into base tokens this many bytes at a time (one numpy batch of the encoder each: a
# MB or two of its temporary arrays). Counted in bytes, not pre-tokens, the batches take about as long each, short
# enough that neither worker waits long for the other at the end.
SEGMENT_BYTES = 1 << 17
# With fewer batches than this the pre-tokens are split in this process: starting workers would cost more than it saves.
MIN_PARALLEL_BATCHES = 8


def base_words(counts: Mapping[bytes, int], base: Tokenizer, token_counts: np.ndarray | None = None,
               num_workers: int = 1) -> _Words:
    """The merge loop's start state for continuing `base`: each pre-token of `counts` as the base encodes it, the
    ones of two or more tokens kept as words (int32 ids), shortest first. The counts of the pre-tokens of one token go
    to `token_counts` when given.

    The pre-tokens are split in batches of about `SEGMENT_BYTES`, shortest first (the words of a batch then finish
    their merges together: fewer numpy steps per word), in `num_workers` processes when there are at least
    `MIN_PARALLEL_BATCHES` batches and they can be forked (`hf_bpe.common.parallel.process_pool`: they inherit the
    pre-tokens and the base, and send back each batch's ids as two arrays). As each batch arrives, its words' pairs
    are sorted here (`words.pair_runs`, the flat store's first indexing pass): the merge loop alone keeps one core
    busy, so this work done beside the workers' leaves less for after them.

    >>> base = Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"ab"}, [(b"a", b"b")])
    >>> words = base_words({b"abc": 2, b"ab": 5, b"ba": 1}, base)
    >>> words.data.tolist(), words.lengths.tolist(), words.frequencies.tolist(), words.first_new_id
    ([98, 97, 256, 99], [2, 2], [1, 2], 257)
    """
    check_num_workers(num_workers)
    largest = max(base.vocab, default=-1)
    if largest > MAX_TOKEN_ID:
        raise ValueError(f"the base tokenizer's ids go up to {largest}: the merge loop handles ids up to "
                         f"{MAX_TOKEN_ID}")
    token_bytes: list[bytes | None] = [None] * (largest + 1)
    for token_id, token in base.vocab.items():
        token_bytes[token_id] = token
    try:
        frequencies = np.fromiter(counts.values(), dtype=np.int64, count=len(counts))
    except OverflowError:
        raise ValueError("pre-token counts are too large: pair counts would overflow 64 bits") from None
    pretokens = list(counts)
    pretoken_lengths = np.fromiter(map(len, pretokens), dtype=np.int64, count=len(pretokens))
    order = np.argsort(pretoken_lengths, kind="stable")
    pretokens = list(map(pretokens.__getitem__, order.tolist()))
    frequencies = frequencies[order]
    bounds = _batches(pretoken_lengths[order])
    shift = pair_shift(largest)
    pieces, lengths, kept, pair_runs = [], [], [], []
    first_position = 1  # the flat store's: a separator, then each word and a separator
    segmented = _segmented(pretokens, pretoken_lengths[order], base, bounds, num_workers)
    for (start, stop), (ids, sizes) in zip(bounds, segmented):
        several = sizes > 1
        pieces.append(ids[np.repeat(several, sizes)].astype(np.int32))
        lengths.append(sizes[several])
        kept.append(np.flatnonzero(several) + start)
        # Sorted here as each batch arrives, while the workers split the next ones: the flat store's first pass.
        pair_runs.append(_batch_pair_runs(pieces[-1], lengths[-1], frequencies[kept[-1]], first_position, shift))
        first_position += len(pieces[-1]) + len(lengths[-1])
        if token_counts is not None:
            single = sizes == 1
            np.add.at(token_counts, ids[np.repeat(single, sizes)], frequencies[start:stop][single].astype(np.uint64))
    empty = np.zeros(0, dtype=np.int64)
    words = _Words(np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int32),
                   np.concatenate(lengths) if lengths else empty,
                   frequencies[np.concatenate(kept)] if kept else empty, len(counts), token_bytes)
    words.pair_runs = pair_runs
    return words


def _batches(lengths: np.ndarray) -> list[tuple[int, int]]:
    """Bounds of consecutive batches of pre-tokens of these `lengths` (ascending), each of about `SEGMENT_BYTES`
    bytes, or one pre-token.

    >>> _batches(np.array([1, 1, 2, 3] + [SEGMENT_BYTES] * 2))
    [(0, 4), (4, 5), (5, 6)]
    """
    ends = np.cumsum(lengths)
    bounds, start = [], 0
    while start < len(lengths):
        before = int(ends[start - 1]) if start else 0
        stop = max(int(np.searchsorted(ends, before + SEGMENT_BYTES, side="right")), start + 1)
        bounds.append((start, stop))
        start = stop
    return bounds


def _batch_pair_runs(ids: np.ndarray, sizes: np.ndarray, weights: np.ndarray, first_position: int, shift: int
                     ) -> PairRuns:
    """The pairs inside a batch's words (`ids` end to end, `sizes` of them each, two or more; the words'
    `weights`), as `PairRuns` of the flat store's positions, where the first word starts at `first_position` and each
    word is followed by a separator; codes with `shift`.

    >>> runs = _batch_pair_runs(np.array([5, 6, 5, 6, 7]), np.array([2, 3]), np.array([10, 1]), 1, 8)
    >>> [array.tolist() for array in runs]
    [[1, 4, 5], [1286, 1543], [2, 1], [11, 1]]
    """
    inside = np.ones(len(ids), dtype=bool)
    inside[np.cumsum(sizes) - 1] = False  # a word's last id starts no pair
    at = np.flatnonzero(inside)
    word = np.repeat(np.arange(len(sizes)), sizes - 1)  # the word of each pair
    codes = (ids[at].astype(np.int64) << shift) | ids[at + 1]
    return sorted_pair_runs((at + word + first_position).astype(np.int32), codes, 2 * shift, weights[word])


def compact_ids(words: _Words) -> tuple[_Words, np.ndarray]:
    """`words` with the base ids they hold renumbered 0, 1, ... in order, and those ids (`ids[compact] = id`); the
    base's other tokens become `other_tokens` (no merge may make them). A corpus's words hold a fraction of a large
    base's ids (GPT-2's 50,257): renumbered, the new ids stay small, so that each big merge of the loop groups its
    neighbours with a 16-bit sort (`FlatCorpus._merge_with_numpy`), and fewer tokens get sort keys. The merges are
    the same.

    >>> words = _Words(np.array([7, 3, 7, 9], dtype=np.int32), np.array([2, 2]), np.array([1, 1]), 2,
    ...                [bytes([i]) for i in range(10)])
    >>> compact, ids = compact_ids(words)
    >>> compact.data.tolist(), ids.tolist(), compact.token_bytes, sorted(compact.other_tokens)[:2]
    ([1, 0, 1, 2], [3, 7, 9], [b'\\x03', b'\\x07', b'\\t'], [b'\\x00', b'\\x01'])
    """
    used = np.zeros(words.first_new_id, dtype=bool)
    used[words.data] = True
    ids = np.flatnonzero(used)
    compact_of = np.cumsum(used, dtype=np.int32) - 1
    token_bytes = words.token_bytes
    compact = _Words(compact_of[words.data], words.lengths, words.frequencies, words.distinct,
                     list(map(token_bytes.__getitem__, ids.tolist())))
    compact.other_tokens = frozenset(token for token in token_bytes if token is not None) | words.other_tokens
    if words.pair_runs is not None:  # renumbered in order: each block's codes stay sorted
        shift, compact_shift = pair_shift(words.first_new_id - 1), pair_shift(len(ids) - 1)
        compact.pair_runs = [
            runs._replace(codes=(compact_of[runs.codes >> shift].astype(np.int64) << compact_shift)
                          | compact_of[runs.codes & ((1 << shift) - 1)])
            for runs in words.pair_runs]
    return compact, ids


def _segmented(pretokens: list[bytes], lengths: np.ndarray, base: Tokenizer, bounds: list[tuple[int, int]],
               num_workers: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Each batch of `bounds` as the base encodes it (`Tokenizer.merge_pretoken_arrays`), in order: in this process,
    or in a pool of `num_workers`. `lengths`: the pre-tokens' lengths."""
    workers = min(num_workers, len(bounds))
    # Spawned workers (threads running here, as after `ray.init`) would import hf_bpe and unpickle the pre-tokens
    # and the base: about what splitting them costs. A daemonic process (a pool's worker) may not have children.
    if (workers <= 1 or len(bounds) < MIN_PARALLEL_BATCHES or multiprocessing.current_process().daemon
            or multiprocessing_context().get_start_method() != "fork"):
        yield from (base.merge_pretoken_arrays(pretokens[start:stop]) for start, stop in bounds)
        return
    # Sent back in the smallest dtype that holds every id: receiving the arrays costs this process in proportion to
    # their bytes, while the workers use both cores.
    ids_dtype = segment_dtype(max(base.vocab, default=0) + 1)
    base._tables()  # the merge kernel's tables, built once here: the workers fork after, and share them
    # The workers read the pre-tokens from one bytes object, each batch's made afresh there: taking them from the
    # inherited list would write every object's reference count, and copy, page by page, the memory of the
    # pre-tokens into each worker (about as much as the parent holds, on a corpus of millions of them).
    ends = np.cumsum(lengths)
    with process_pool(workers, (b"".join(pretokens), ends - lengths, ends, base, ids_dtype)) as pool:
        yield from pool.imap(_segment_in_worker, bounds)


def _segment_in_worker(bounds: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    joined, starts, ends, base, ids_dtype = worker_state()
    start, stop = bounds
    words = list(map(joined.__getitem__, map(slice, starts[start:stop].tolist(), ends[start:stop].tolist())))
    ids, sizes = base.merge_pretoken_arrays(words)
    return ids.astype(ids_dtype), sizes.astype(np.int32)


def continue_from_base(base: Tokenizer, counts: Mapping[bytes, int], vocab_size: int, progress: bool | None,
                       verbose: bool, counting_seconds: float, min_frequency: int, max_token_length: int | None,
                       token_counts: np.ndarray | None = None, consume_counts: bool = True,
                       num_workers: int | None = None) -> tuple[Vocab, Merges]:
    """Continue from `counts`, emptied once the words are made (the counts made here are not the caller's) unless
    `consume_counts` is False."""
    start = time.perf_counter()
    check_num_workers(num_workers)
    try:
        words = base_words(counts, base, token_counts, default_num_workers() if num_workers is None else num_workers)
    except ValueError as error:  # a byte the base has no token for
        raise InputError(f"the base tokenizer cannot encode the corpus: {error}") from None
    if consume_counts:
        counts.clear()  # type: ignore[attr-defined]
    distinct = words.distinct
    vocab, merges = continue_words(words, base.vocab, base.merges, vocab_size, progress, min_frequency,
                                   max_token_length, token_counts)
    if verbose:
        report_training(distinct, counting_seconds, len(merges) - len(base.merges), time.perf_counter() - start)
    return vocab, merges


def continue_words(words: _Words, base_vocab: Vocab, base_merges: Merges, vocab_size: int, progress: bool | None,
                   min_frequency: int, max_token_length: int | None, token_counts: np.ndarray | None = None
                   ) -> tuple[Vocab, Merges]:
    """Merge on from a start state in the ids of the base tokenizer of `base_vocab` and `base_merges` (`base_words`,
    or SuperBPE's parts split by the merges made so far, `tallies.PartTally.words`) up to `vocab_size`: the
    base's vocab and merges, then the new ones. `words` is used up; `token_counts` (by id) receives the words' tokens
    in the final segmentation."""
    first_new_id = words.first_new_id
    num_merges = min(vocab_size - len(base_vocab), MAX_TOKEN_ID + 1 - first_new_id)
    words, base_ids = compact_ids(words)
    compact_counts = None if token_counts is None else np.zeros(len(base_ids) + num_merges, dtype=token_counts.dtype)
    id_merges = _merge(words, num_merges, progress, token_counts=compact_counts, min_frequency=min_frequency,
                       max_token_length=max_token_length)
    ids = base_ids.tolist() + list(range(first_new_id, first_new_id + len(id_merges)))  # compact id -> id
    if token_counts is not None and compact_counts is not None:
        token_counts[np.array(ids, dtype=np.int64)] += compact_counts[:len(ids)]
    vocab: Vocab = dict(base_vocab)
    merges: Merges = list(base_merges)
    for new_id, (left, right) in enumerate(id_merges, start=first_new_id):
        merges.append((vocab[ids[left]], vocab[ids[right]]))
        vocab[new_id] = vocab[ids[left]] + vocab[ids[right]]
    return vocab, merges


__all__ = ["MIN_PARALLEL_BATCHES", "SEGMENT_BYTES", "base_words", "compact_ids", "continue_from_base",
           "continue_words"]
