"""Continue training from a base tokenizer's merges: extend GPT-2's, Llama 3's or one's own tokenizer with merges
learned on new text, every base id and merge unchanged.

It is the one merge loop (`hf_bpe.train.merging.merge_loop._merge`) from another start state (`merge_loop._Words`): each
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
  of the base's first N tokens instead (`hf_bpe.train.starts.superword_extend`).

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

import os
import time
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hf_bpe.common.errors import InputError
from hf_bpe.common.files import PathArg
from hf_bpe.encode.directory import load_directory_tokenizer
from hf_bpe.encode.tokenizer import Tokenizer
from hf_bpe.formats.gpt2 import load_gpt2_merges, load_gpt2_vocab
from hf_bpe.pretokenize import resolve_pattern
from hf_bpe.train.checks import check_trainer_options, check_vocab_size
from hf_bpe.train.counting.count import Convert, count_pretokens_in_files, count_pretokens_in_iterator, counting_engine
from hf_bpe.train.merging.merge_loop import Merges, Vocab
from hf_bpe.train.starts.base_words import continue_from_base

if TYPE_CHECKING:
    from hf_bpe.train.starts.superword_extend import SuperwordsOnBase



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
    (None: SuperBPE's published one); save the result with the superword pattern
    (`hf_bpe.train.starts.superword_extend`).

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
    from hf_bpe.train.starts.superword_extend import check_superwords_on_base

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
    return continue_from_base(base, counts, vocab_size, progress, verbose, time.perf_counter() - start, min_frequency,
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
    return continue_from_base(base, counts, vocab_size, progress, verbose, 0.0, min_frequency, max_token_length,
                              token_counts, consume_counts, num_workers)
