"""Continue training from a base tokenizer's merges: extend GPT-2's, Llama 3's or one's own tokenizer with merges
learned on new text, every base id and merge unchanged.

It is the one merge loop (`hf_bpe.train.merge_loop._merge`) from another start state (`merge_loop._Words`): each
distinct pre-token of the corpus is split into base tokens by hf_bpe's encoder (`Tokenizer.merge_pretoken_arrays`:
the base merges in rank order, in numpy batches, giant pre-tokens in bounded memory; shortest first, in worker
processes, while this process sorts the pairs of the batches done: `base_words`), and merging goes on from that
segmentation with the usual tie rule until the vocabulary is full, over the base ids the words hold renumbered 0, 1,
... (`compact_ids`). New tokens take the ids after the base's largest id (special tokens included). The plain
definition is `hf_bpe.train._reference.reference_extend_from_counts`.

The interface, for continuing from any stage (SuperBPE's stage 2 is `extend_bpe(stage_1, ..., pattern=superword)`):

- `extend_bpe(base, paths, vocab_size)`, `extend_bpe_from_iterator(base, texts, vocab_size)`: count the corpus with
  the base's pattern (or `pattern=`, any preset or regex) and special tokens, then continue;
- `extend_bpe_from_counts(base, counts, vocab_size)`: continue from pre-token counts already made;
- `base` is an `hf_bpe.Tokenizer` (its vocab with special tokens, merges, pattern) or a tokenizer directory
  (`load_base`); `vocab_size` is the final size, special tokens included; each returns `(vocab, merges)`: the base's
  vocab plus the new ids, the base's merges followed by the new ones. Save them with the base's special tokens and
  the pattern trained with (`hf_bpe.save_tokenizer_directory(..., base.special_tokens, pattern=...)`).
- `min_frequency` and `max_token_length` as `hf_bpe.train_bpe` takes them;
- `superword_from=N` and `superword_pattern` (`extend_bpe`, `extend_bpe_from_iterator`): SuperBPE's superwords on top
  of the base's first N tokens instead (`hf_bpe.train.superword_extend`).

>>> from hf_bpe import Tokenizer
>>> base = Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"lo", 257: b"<|endoftext|>"}, [(b"l", b"o")],
...                  ["<|endoftext|>"])
>>> vocab, merges = extend_bpe_from_iterator(base, ["low lower lowest"], 260)
>>> merges
[(b'l', b'o'), (b'lo', b'w'), (b'low', b'e')]
>>> vocab[258], vocab[259]
(b'low', b'lowe')
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hf_bpe.common.errors import InputError
from hf_bpe.common.files import PathArg
from hf_bpe.common.parallel import default_num_workers, multiprocessing_context, process_pool, worker_state
from hf_bpe.encode.directory import load_directory_tokenizer
from hf_bpe.encode.tokenizer import Tokenizer
from hf_bpe.formats.gpt2 import load_gpt2_merges, load_gpt2_vocab
from hf_bpe.pretokenize import resolve_pattern
from hf_bpe.train.checks import check_trainer_options, check_vocab_size, report_training
from hf_bpe.train.count import Convert, count_pretokens_in_files, count_pretokens_in_iterator, counting_engine
from hf_bpe.train.local_engine import check_num_workers
from hf_bpe.train.merge_loop import MAX_TOKEN_ID, Merges, Vocab, _merge, _Words
from hf_bpe.train.pair_runs import PairRuns, pair_shift, sorted_pair_runs
from hf_bpe.train.superword_words import segment_dtype

if TYPE_CHECKING:
    from hf_bpe.train.superword_extend import SuperwordsOnBase

# The distinct pre-tokens are split into base tokens this many bytes at a time (one numpy batch of the encoder each: a
# MB or two of its temporary arrays). Counted in bytes, not pre-tokens, the batches take about as long each, short
# enough that neither worker waits long for the other at the end.
SEGMENT_BYTES = 1 << 17
# With fewer batches than this the pre-tokens are split in this process: starting workers would cost more than it saves.
MIN_PARALLEL_BATCHES = 8


def load_base(base: Tokenizer | PathArg) -> Tokenizer:
    """The base tokenizer: a `Tokenizer` as given, or a directory: one saved by hf_bpe or HF (vocab.json, merges.txt,
    tokenizer.json, tokenizer_config.json; `hf-bpe convert` makes one of a tiktoken file, whose pre-tokens that are
    tokens are looked up whole, `ignore_merges`, as tiktoken does), or GPT-2's bare
    `vocab.json` and `merges.txt` (GPT-2's pattern; the tokens that are neither a byte nor made by a merge, such as
    `<|endoftext|>`, are its special tokens). InputError naming the path otherwise.
    """
    if isinstance(base, Tokenizer):
        return base
    directory = Path(base)
    if not directory.is_dir():
        raise InputError(f"{directory}: not a tokenizer directory")
    if (directory / "tokenizer.json").is_file() or not (directory / "vocab.json").is_file():
        return load_directory_tokenizer(directory)
    vocab_path, merges_path = directory / "vocab.json", directory / "merges.txt"
    if not merges_path.is_file():
        raise InputError(f"{merges_path}: no such file (a base tokenizer directory needs vocab.json and merges.txt)")
    made = {left + right for left, right in load_gpt2_merges(merges_path)}
    try:
        special_tokens = [token.decode("utf-8") for _, token in sorted(load_gpt2_vocab(vocab_path).items())
                          if len(token) > 1 and token not in made]
    except UnicodeDecodeError as error:
        raise InputError(f"{vocab_path}: a token that no merge makes is not UTF-8 text, so it cannot be a special "
                         f"token: {error.object!r}") from None
    return Tokenizer.from_files(vocab_path, merges_path, special_tokens)


def extend_bpe(base: Tokenizer | PathArg, input_path: PathArg | Sequence[PathArg], vocab_size: int, *,
               num_workers: int | None = None, errors: str = "strict", progress: bool | None = None,
               verbose: bool = False, engine: str = "local", ray_address: str | None = None,
               pattern: str | None = None, min_frequency: int = 0, max_token_length: int | None = None,
               superword_from: int | None = None, superword_pattern: str | None = None) -> tuple[Vocab, Merges]:
    """Continue training `base` on UTF-8 text files, up to `vocab_size` tokens in all; the options as `train_bpe`
    takes them. The corpus is cut at the base's special tokens and pre-tokenized with the base's pattern, or with
    `pattern` when given (then save the result with it). Returns the base's vocab and merges with the new ones.

    `superword_from=N` learns SuperBPE's superwords on top of the base's first N tokens instead (counted as
    `vocab_size` counts them; N = the base's size keeps every base id), on the corpus cut with `superword_pattern`
    (None: SuperBPE's published one); save the result with the superword pattern (`hf_bpe.train.superword_extend`).

    >>> vocab, merges = extend_bpe("gpt2-dir", "new_language.txt", 50257 + 8000)  # doctest: +SKIP
    >>> vocab, merges = extend_bpe("gpt2-dir", "corpus.txt", 60000, superword_from=50257)  # doctest: +SKIP
    """
    base = load_base(base)
    vocab_size = check_vocab_size(vocab_size, len(base.vocab) if superword_from is None else 0)
    superwords = _superwords_on_base(base, superword_from, superword_pattern, vocab_size, pattern)
    check_trainer_options(min_frequency, max_token_length)
    regex = resolve_pattern(base.pattern if pattern is None else pattern)
    engine_used = counting_engine(engine, ray_address)
    paths = [input_path] if isinstance(input_path, (str, os.PathLike)) else list(input_path)

    def count(regex: str, convert: Convert | None = None) -> Mapping[bytes, int]:
        return count_pretokens_in_files(paths, list(base.special_tokens), num_workers=num_workers, errors=errors,
                                        progress=progress, engine=engine_used, pattern=regex, convert=convert)

    return _count_and_extend(base, count, regex, superwords, vocab_size, progress, verbose, min_frequency,
                             max_token_length, num_workers)


def extend_bpe_from_iterator(base: Tokenizer | PathArg, texts: Iterable[str], vocab_size: int, *,
                             num_workers: int | None = None, progress: bool | None = None, verbose: bool = False,
                             pattern: str | None = None, min_frequency: int = 0, max_token_length: int | None = None,
                             superword_from: int | None = None, superword_pattern: str | None = None
                             ) -> tuple[Vocab, Merges]:
    """Continue training `base` on an iterable of texts (each a document), as `extend_bpe` (with `superword_from`,
    the texts are counted in several passes: a list or a dataset column, not an iterator)."""
    base = load_base(base)
    vocab_size = check_vocab_size(vocab_size, len(base.vocab) if superword_from is None else 0)
    superwords = _superwords_on_base(base, superword_from, superword_pattern, vocab_size, pattern)
    check_trainer_options(min_frequency, max_token_length)
    regex = resolve_pattern(base.pattern if pattern is None else pattern)
    if superwords is not None and iter(texts) is texts:
        raise TypeError("superwords count the texts several times: give a list or a dataset column, not an iterator")

    def count(regex: str, convert: Convert | None = None) -> Mapping[bytes, int]:
        return count_pretokens_in_iterator(texts, list(base.special_tokens), num_workers=num_workers,
                                           progress=progress, pattern=regex, convert=convert)

    return _count_and_extend(base, count, regex, superwords, vocab_size, progress, verbose, min_frequency,
                             max_token_length, num_workers)


def _superwords_on_base(base: Tokenizer, superword_from: int | None, superword_pattern: str | None,
                        vocab_size: int, pattern: str | None) -> SuperwordsOnBase | None:
    """`superword_extend.check_superwords_on_base`, imported when called: its stage 2 imports this module."""
    from hf_bpe.train.superword_extend import check_superwords_on_base

    return check_superwords_on_base(base, superword_from, superword_pattern, vocab_size, pattern)


def _count_and_extend(base: Tokenizer, count: Callable[[str, Convert | None], Mapping[bytes, int]], regex: str,
                      superwords: SuperwordsOnBase | None, vocab_size: int, progress: bool | None, verbose: bool,
                      min_frequency: int, max_token_length: int | None, num_workers: int | None
                      ) -> tuple[Vocab, Merges]:
    """Count with `regex` (`count(regex, convert)`) and continue; with `superwords`, learn them instead, in counting
    passes with the stage-2 pattern."""
    if superwords is not None:
        return superwords.train(lambda stage_two_pass: count(superwords.regex, stage_two_pass),
                                vocab_size, progress=progress, verbose=verbose, min_frequency=min_frequency,
                                max_token_length=max_token_length, num_workers=num_workers)
    start = time.perf_counter()
    counts = count(regex, None)
    return _extend(base, counts, vocab_size, progress, verbose, time.perf_counter() - start, min_frequency,
                   max_token_length, num_workers=num_workers)


def extend_bpe_from_counts(base: Tokenizer | PathArg, counts: Mapping[bytes, int], vocab_size: int, *,
                           progress: bool | None = None, verbose: bool = False, min_frequency: int = 0,
                           max_token_length: int | None = None, token_counts: np.ndarray | None = None,
                           consume_counts: bool = False, num_workers: int | None = None) -> tuple[Vocab, Merges]:
    """Continue training `base` on pre-token counts ({pre-token bytes: occurrences}, made with the special tokens of
    `base`). `token_counts` (uint64, one entry per id up to the largest new one) receives how often each token occurs
    in the final segmentation of the counts, each pre-token times its count, as `train_bpe_from_counts`'s.
    `consume_counts=True` empties `counts` once the merge loop's words are made from them, as there. The pre-tokens are
    split into base tokens in `num_workers` processes (default: one per usable CPU; see `base_words`).

    >>> base = Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"ab"}, [(b"a", b"b")])
    >>> extend_bpe_from_counts(base, {b"abab": 2, b"abc": 1}, 258)[1]
    [(b'a', b'b'), (b'ab', b'ab')]
    """
    base = load_base(base)
    vocab_size = check_vocab_size(vocab_size, len(base.vocab))
    check_trainer_options(min_frequency, max_token_length)
    if consume_counts and not isinstance(counts, MutableMapping):
        raise TypeError(f"consume_counts needs a mutable mapping, got {type(counts).__name__}")
    return _extend(base, counts, vocab_size, progress, verbose, 0.0, min_frequency, max_token_length, token_counts,
                   consume_counts, num_workers)


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
    for (start, stop), (ids, sizes) in zip(bounds, _segmented(pretokens, base, bounds, num_workers)):
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


def _segmented(pretokens: list[bytes], base: Tokenizer, bounds: list[tuple[int, int]], num_workers: int
               ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Each batch of `bounds` as the base encodes it (`Tokenizer.merge_pretoken_arrays`), in order: in this process,
    or in a pool of `num_workers`."""
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
    with process_pool(workers, (pretokens, base, ids_dtype)) as pool:
        yield from pool.imap(_segment_in_worker, bounds)


def _segment_in_worker(bounds: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    pretokens, base, ids_dtype = worker_state()
    ids, sizes = base.merge_pretoken_arrays(pretokens[bounds[0]:bounds[1]])
    return ids.astype(ids_dtype), sizes.astype(np.int32)


def _extend(base: Tokenizer, counts: Mapping[bytes, int], vocab_size: int, progress: bool | None, verbose: bool,
            counting_seconds: float, min_frequency: int, max_token_length: int | None,
            token_counts: np.ndarray | None = None, consume_counts: bool = True, num_workers: int | None = None
            ) -> tuple[Vocab, Merges]:
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
    distinct, first_new_id = words.distinct, words.first_new_id
    num_merges = min(vocab_size - len(base.vocab), MAX_TOKEN_ID + 1 - first_new_id)
    words, base_ids = compact_ids(words)
    compact_counts = None if token_counts is None else np.zeros(len(base_ids) + num_merges, dtype=token_counts.dtype)
    id_merges = _merge(words, num_merges, progress, token_counts=compact_counts, min_frequency=min_frequency,
                       max_token_length=max_token_length)
    ids = base_ids.tolist() + list(range(first_new_id, first_new_id + len(id_merges)))  # compact id -> id
    if token_counts is not None and compact_counts is not None:
        token_counts[np.array(ids, dtype=np.int64)] += compact_counts[:len(ids)]
    vocab: Vocab = dict(base.vocab)
    merges: Merges = list(base.merges)
    for new_id, (left, right) in enumerate(id_merges, start=first_new_id):
        merges.append((vocab[ids[left]], vocab[ids[right]]))
        vocab[new_id] = vocab[ids[left]] + vocab[ids[right]]
    if verbose:
        report_training(distinct, counting_seconds, len(id_merges), time.perf_counter() - start)
    return vocab, merges
