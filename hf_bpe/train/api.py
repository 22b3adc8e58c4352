"""The public training functions: from files (pooled, or named sources: a mapping from names to paths, weighted or
trained parity-aware), from any iterable of texts, from pre-token counts.

Each checks its arguments before any work, counts pre-tokens (`hf_bpe.train.counting.count`) with the engine it is given
(`hf_bpe.train.counting.local_engine` or `hf_bpe.train.counting.ray_counting`), and runs the merge loop
(`hf_bpe.train.merging.merge_loop.merge_pairs`). Ids 0-255 are the bytes, then one id per merge, then the special
tokens.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from contextlib import nullcontext
from typing import Any

import numpy as np

from hf_bpe.common.files import PathArg, local_bytes
from hf_bpe.common.parallel import release_free_memory
from hf_bpe.pretokenize import resolve_pattern
from hf_bpe.train.checks import (
    check_arguments,
    check_counts,
    check_trainer_options,
    report_training,
)
from hf_bpe.train.counting.count import Convert, count_pretokens_in_files, count_pretokens_in_iterator, counting_engine
from hf_bpe.train.counting.sources import check_source_files, count_sources_and_dev_sets, source_paths
from hf_bpe.train.counting.weights import pooled_counts, source_weights
from hf_bpe.train.merging.merge_loop import Merges, Vocab, _merge, _Words, vocab_of_merges
from hf_bpe.train.starts.superword import check_superword_options
from hf_bpe.train.starts.superword_passes import StageTwoPass, check_stage_two_files, train_superwords

Sources = Mapping[str, PathArg | Sequence[PathArg]]


def train_bpe(input_path: PathArg | Sequence[PathArg] | Sources, vocab_size: int,
              special_tokens: Sequence[str] | None = None, *, num_workers: int | None = None, errors: str = "strict",
              progress: bool | None = None, verbose: bool = False, engine: str = "local",
              ray_address: str | None = None, pattern: str | None = None, min_frequency: int = 0,
              max_token_length: int | None = None, superword_from: int | None = None,
              superword_pattern: str | None = None, weights: Mapping[str, float] | None = None,
              sampling_temperature: float | None = None, parity: bool = False, dev: Sources | None = None,
              ratios: Mapping[str, float] | None = None, parity_variant: str = "base", window_size: int = 100,
              alpha: float = 2.0, global_merges: int = 0) -> tuple[Vocab, Merges]:
    """Train a byte-level BPE tokenizer on one or more UTF-8 text files, or on named sources.

    Special tokens split the text into documents (no merge crosses them) and get the last ids of the vocab.
    `vocab_size` counts the 256 byte tokens, the merges and the special tokens; training stops early when no pair
    is left to merge. `errors` is how undecodable bytes are treated ("strict" raises InputError naming the file and
    byte offset, "replace" decodes them as U+FFFD). `progress=None` shows progress bars only on a terminal.
    `pattern` is the pre-tokenization pattern: a name of `hf_bpe.PATTERNS` ("cl100k", "o200k", "llama3", ...) or
    regex text (`hf_bpe.pretokenize.patterns`); None is GPT-2's. Save and encode with the same pattern.

    `min_frequency` and `max_token_length` are HF `tokenizers`' BpeTrainer options, with its meaning: training stops
    when the best pair occurs fewer than `min_frequency` times, and no merge makes a token of `max_token_length`
    bytes or more, except the merges of two single bytes (BpeTrainer's own check, in characters of the byte-level
    alphabet: one per byte; so `max_token_length=16` gives tokens of at most 15 bytes). Continuing from a base
    tokenizer: `hf_bpe.train.starts.extend`.

    `superword_from=T` trains SuperBPE's superword tokens (`hf_bpe.train.starts.superword`): up to T tokens (counted as
    `vocab_size` counts them) with `pattern`, then on the corpus counted again with `superword_pattern` (None:
    SuperBPE's published pre-tokenization, "superword"), whose pre-tokens run across spaces. Save and encode the
    result with the superword pattern.

    `engine="local"` counts pre-tokens in `num_workers` processes on this machine; `engine="ray"` counts them on the
    Ray cluster at `ray_address` (None: a running cluster found by Ray, else a local one; the inputs must be paths
    every node can read) and needs `pip install 'hf_bpe[ray]'`. Both give the same vocab and merges: the merge loop
    always runs here.

    Named sources: `input_path` a mapping from names to a path or paths (`{"en": "en.txt", "hi": ["hi1.txt",
    "hi2.txt"]}`), counted per source in one pass (`hf_bpe.train.counting.sources`). `weights` ({name: a
    non-negative number}; missing: 1) or `sampling_temperature` T (each source weighs (n_i / sum n)^(1/T) / (n_i /
    sum n), n_i its bytes) multiply each source's counts by an integer (`hf_bpe.train.counting.weights`, whose rule
    turns real weights into integers), and the merge loop runs on the counts added up: with no weights, the same
    vocab and merges as `train_bpe` on all the files. `parity=True` trains parity-aware instead
    (`hf_bpe.train.parity.train_parity_from_counts`, whose reference `reference_parity_train` gives the rules): `dev`
    names a parallel dev set's path(s) for every source, or `ratios` a target compression ratio for every source (or
    neither: the training lengths choose), `parity_variant` is "base" or "window" (with `window_size` and `alpha`),
    and the first `global_merges` merges are of the pooled counts. SuperBPE takes no named sources.

    >>> vocab, merges = train_bpe("corpus.txt", 1000, ["<|endoftext|>"])  # doctest: +SKIP
    >>> vocab, merges = train_bpe("corpus.txt", 1000, engine="ray", ray_address="10.0.0.1:6379")  # doctest: +SKIP
    >>> vocab, merges = train_bpe({"en": "en.txt", "hi": "hi.txt"}, 1000, sampling_temperature=3.3)  # doctest: +SKIP
    >>> vocab, merges = train_bpe({"en": "en.txt", "hi": "hi.txt"}, 1000, parity=True,
    ...                           dev={"en": "dev.en", "hi": "dev.hi"})  # doctest: +SKIP
    """
    vocab_size, specials = check_arguments(vocab_size, special_tokens)
    check_trainer_options(min_frequency, max_token_length)
    regex = resolve_pattern(pattern)
    stage_two = check_superword_options(superword_from, superword_pattern, vocab_size, specials)
    engine_used = counting_engine(engine, ray_address)
    parity_options = {"dev": dev, "ratios": ratios, "variant": parity_variant, "window_size": window_size,
                      "alpha": alpha, "global_merges": global_merges} if parity else None
    if not parity:
        for name, value, default in (("dev", dev, None), ("ratios", ratios, None), ("global_merges", global_merges, 0),
                                     ("parity_variant", parity_variant, "base")):
            if value != default:
                raise ValueError(f"{name} needs parity=True")
    if isinstance(input_path, Mapping):
        if stage_two is not None:
            raise ValueError("SuperBPE trains on one pooled corpus: superword_from takes no named sources")
        counting = {"num_workers": num_workers, "errors": errors, "progress": progress, "engine": engine_used,
                    "pattern": regex}
        return _train_sources(input_path, vocab_size, specials, counting, weights, sampling_temperature,
                              parity_options, verbose=verbose, min_frequency=min_frequency,
                              max_token_length=max_token_length)
    given = [name for name, value in (("weights", weights), ("sampling_temperature", sampling_temperature),
                                      ("parity", parity or None), ("dev", dev), ("ratios", ratios))
             if value is not None]
    if given:
        raise ValueError(f"{given[0]} needs named sources: input_path a mapping from names to paths")
    paths = [input_path] if isinstance(input_path, (str, os.PathLike)) else list(input_path)
    if stage_two is not None:
        check_stage_two_files(paths, specials, stage_two[1])

    def count(regex: str, convert: Convert | None = None) -> Mapping[bytes, int]:
        return count_pretokens_in_files(paths, specials, num_workers=num_workers, errors=errors, progress=progress,
                                        engine=engine_used, pattern=regex, convert=convert)

    return _train_counted(count, regex, stage_two, vocab_size, specials, progress, verbose, min_frequency,
                          max_token_length, num_workers, local=engine_used is None,
                          corpus_bytes=None if stage_two is None else local_bytes(paths))


def _train_sources(sources: Sources, vocab_size: int, specials: list[str], counting: dict[str, Any],
                   weights: Mapping[str, float] | None, sampling_temperature: float | None,
                   parity: dict[str, Any] | None, *, verbose: bool, min_frequency: int, max_token_length: int | None
                   ) -> tuple[Vocab, Merges]:
    """`train_bpe` on named sources: every option and file checked, the integer weights found, then one counting
    pass over the sources and the dev sets, and the merge loop on the weighted counts added up, or
    parity-aware on each source's."""
    paths = source_paths(sources)
    names = list(paths)
    dev_paths = None
    if parity is not None:
        from hf_bpe.train._reference import check_parity_options  # not at the top: it imports `regex`

        if parity["dev"] is not None:  # in the sources' order, as parity training takes them
            dev_paths = source_paths(parity["dev"], "dev set")
            dev_paths = {name: dev_paths[name] for name in names if name in dev_paths} | dev_paths
        check_parity_options(names, dev_paths, parity["ratios"], parity["variant"], parity["window_size"],
                             parity["alpha"], None)
        check_global_merges(parity["global_merges"])
    sizes = {name: sum(file_sizes) for name, file_sizes in check_source_files(paths).items()}
    if dev_paths is not None:
        check_source_files(dev_paths, "dev set")
    integers, _ = source_weights(sizes, weights, sampling_temperature)
    start = time.perf_counter()
    counts, dev_counts = count_sources_and_dev_sets(paths, dev_paths, specials, **counting)
    if parity is None:
        words = _Words.of_counts(pooled_counts(counts, integers, consume=True))
        return _train(words, vocab_size, specials, counting["progress"], verbose, time.perf_counter() - start,
                      min_frequency=min_frequency, max_token_length=max_token_length)
    from hf_bpe.train.parity import train_parity_from_counts

    return train_parity_from_counts(counts, vocab_size, specials, dev=dev_counts, ratios=parity["ratios"],
                                    variant=parity["variant"], window_size=parity["window_size"],
                                    alpha=parity["alpha"], global_merges=parity["global_merges"],
                                    weights=None if set(integers.values()) == {1} else integers,
                                    min_frequency=min_frequency, max_token_length=max_token_length,
                                    progress=counting["progress"], verbose=verbose)


def check_global_merges(global_merges: int) -> None:
    """ValueError unless `global_merges` is an int >= 0."""
    if isinstance(global_merges, bool) or not isinstance(global_merges, (int, np.integer)) or global_merges < 0:
        raise ValueError(f"global_merges must be an int >= 0, got {global_merges!r}")


def train_bpe_from_iterator(texts: Iterable[str], vocab_size: int, special_tokens: Sequence[str] | None = None, *,
                            num_workers: int | None = None, progress: bool | None = None, verbose: bool = False,
                            pattern: str | None = None, min_frequency: int = 0, max_token_length: int | None = None,
                            superword_from: int | None = None, superword_pattern: str | None = None
                            ) -> tuple[Vocab, Merges]:
    """Train on an iterable of texts (e.g. a `datasets` column); each text is a separate document. `pattern`,
    `min_frequency`, `max_token_length`, `superword_from` and `superword_pattern` as for `train_bpe` (for SuperBPE's
    two counting passes, `texts` must be iterable twice: a list, a `datasets` column, not a generator).

    >>> vocab, merges = train_bpe_from_iterator(["low lower", "newest widest"], 258)
    >>> merges
    [(b'w', b'e'), (b's', b't')]
    >>> train_bpe_from_iterator(["1234 1234"], 257)[1], train_bpe_from_iterator(["1234 1234"], 257, pattern="cl100k")[1]
    ([(b'3', b'4')], [(b'2', b'3')])
    """
    vocab_size, specials = check_arguments(vocab_size, special_tokens)
    check_trainer_options(min_frequency, max_token_length)
    regex = resolve_pattern(pattern)
    stage_two = check_superword_options(superword_from, superword_pattern, vocab_size, specials)
    if stage_two is not None and iter(texts) is texts:
        raise TypeError("SuperBPE counts the texts twice: give a list or a dataset column, not an iterator")

    def count(regex: str, convert: Convert | None = None) -> Mapping[bytes, int]:
        return count_pretokens_in_iterator(texts, specials, num_workers=num_workers, progress=progress, pattern=regex,
                                           convert=convert)

    return _train_counted(count, regex, stage_two, vocab_size, specials, progress, verbose, min_frequency,
                          max_token_length, num_workers, local=True)


def _train_counted(count: Callable[[str, Convert | None], Mapping[bytes, int]], regex: str,
                   stage_two: tuple[int, str] | None, vocab_size: int, specials: list[str], progress: bool | None,
                   verbose: bool, min_frequency: int, max_token_length: int | None, num_workers: int | None, *,
                   local: bool, corpus_bytes: int | None = None) -> tuple[Vocab, Merges]:
    """Count with `regex` and train; with `stage_two` (SuperBPE's transition and pattern), up to the transition, then
    go on in counting passes with the stage-2 pattern (`hf_bpe.train.starts.superword_passes`): `count(regex, convert)`
    counts the corpus, each task's counts converted where they are counted (in the workers; with `local` ones, they
    may keep their segmentation between passes in a temporary directory, removed at the end; a corpus of
    `corpus_bytes`, when known, may skip stage 2's sample)."""
    start = time.perf_counter()
    # The counts are never bound to a name here: they are freed as soon as the words are made from them.
    words = _Words.of_counts(count(regex, None))
    options = {"min_frequency": min_frequency, "max_token_length": max_token_length}
    if stage_two is None:
        return _train(words, vocab_size, specials, progress, verbose, counting_seconds=time.perf_counter() - start,
                      **options)
    transition, superword_regex = stage_two
    stage_one = _train(words, transition, specials, progress, verbose, time.perf_counter() - start, **options)
    del words
    release_free_memory()  # the stage-2 workers fork from this process: not from the freed pages of stage 1

    def count_pass(stage_two_pass: StageTwoPass) -> Any:
        return count(superword_regex, stage_two_pass)

    with tempfile.TemporaryDirectory(prefix="hf_bpe-stage2-") if local else nullcontext() as keep_in:
        return train_superwords(stage_one, count_pass, vocab_size, specials, progress=progress, verbose=verbose,
                                num_workers=num_workers, keep_segmentation_in=keep_in, corpus_bytes=corpus_bytes,
                                **options)


def train_bpe_from_counts(counts: Mapping[bytes, int], vocab_size: int, special_tokens: Sequence[str] | None = None,
                          *, progress: bool | None = None, verbose: bool = False, pattern: str | None = None,
                          token_counts: np.ndarray | None = None, min_frequency: int = 0,
                          max_token_length: int | None = None, consume_counts: bool = False) -> tuple[Vocab, Merges]:
    """Train on pre-token counts, e.g. from `hf_bpe.train.counting.count.count_pretokens`: {pre-token bytes:
    occurrences}.

    `pattern`, the pattern the counts were made with, is only checked (InputError for a bad one): the counts are
    already pre-tokens. `token_counts`, a uint64 array of `vocab_size` zeros, receives how often each token id occurs
    when the pre-tokens are encoded with the trained tokenizer, each times its count (special tokens: 0): the merge
    loop's final segmentation, with no encoding (`hf_bpe.evaluation.token_counts`). `consume_counts=True` empties
    `counts` (a mutable mapping) once the merge loop has taken what it needs, so that their memory is free while it
    runs (as `train_bpe` frees the counts it makes).

    >>> train_bpe_from_counts({b"aaaa": 2, b"ab": 1}, 258)[1]
    [(b'a', b'a'), (b'aa', b'aa')]
    >>> counts = np.zeros(258, dtype=np.uint64)
    >>> _ = train_bpe_from_counts({b"aaaa": 2, b"ab": 1, b"b": 4}, 258, token_counts=counts)
    >>> counts[[97, 98, 256, 257]].tolist()
    [1, 5, 0, 2]
    >>> pretokens = {b"aaaa": 2, b"ab": 1}
    >>> train_bpe_from_counts(pretokens, 258, consume_counts=True)[1], pretokens
    ([(b'a', b'a'), (b'aa', b'aa')], {})
    """
    vocab_size, specials = check_arguments(vocab_size, special_tokens)
    check_trainer_options(min_frequency, max_token_length)
    resolve_pattern(pattern)
    check_counts(counts, specials)
    if token_counts is not None:
        if token_counts.shape != (vocab_size,) or token_counts.dtype != np.uint64:
            raise ValueError(f"token_counts must be a uint64 array of vocab_size ({vocab_size}) entries")
        for token, count in counts.items():
            if len(token) == 1:  # single bytes never take part in a pair: the merge loop does not hold them
                token_counts[token[0]] += count
    words = _Words.of_counts(counts)
    if consume_counts:
        if not isinstance(counts, MutableMapping):
            raise TypeError(f"consume_counts needs a mutable mapping, got {type(counts).__name__}")
        counts.clear()
    return _train(words, vocab_size, specials, progress, verbose, counting_seconds=0.0, token_counts=token_counts,
                  min_frequency=min_frequency, max_token_length=max_token_length)


def _train(words: _Words, vocab_size: int, special_tokens: list[str], progress: bool | None,
           verbose: bool, counting_seconds: float, token_counts: np.ndarray | None = None, min_frequency: int = 0,
           max_token_length: int | None = None) -> tuple[Vocab, Merges]:
    start = time.perf_counter()
    distinct = words.distinct
    id_merges = _merge(words, vocab_size - 256 - len(special_tokens), progress, token_counts=token_counts,
                       min_frequency=min_frequency, max_token_length=max_token_length)
    vocab, merges = vocab_of_merges(id_merges, special_tokens)
    if verbose:
        report_training(distinct, counting_seconds, len(merges), time.perf_counter() - start)
    return vocab, merges
