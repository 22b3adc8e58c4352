"""SuperBPE (Liu, Hayase, Hofmann, Oh, Smith, Choi, "SuperBPE: Space Travel for Language Models", COLM 2025): BPE
training in two stages, so that the vocabulary also holds *superwords*, tokens that bridge whitespace (" by the way").

- **Stage 1** trains as usual, with the pre-tokenization `pattern`, up to the transition size `superword_from`
  (counted as `vocab_size` counts: the 256 bytes, the merges and the special tokens).
- **Stage 2** counts the corpus again, cut with the superword pattern (by default SuperBPE's published one,
  `hf_bpe.pretokenize.superword`: only digit groups and special tokens cut, so a pre-token runs from one number to
  the next across spaces and newlines). Each distinct stage-2 pre-token is split into stage-1 tokens by hf_bpe's
  encoder, and the one merge loop goes on from that segmentation (`hf_bpe.train.extend`: the encoder's batch and
  giant-pre-token kernels, in time linear in a pre-token's length and bounded memory) up to `vocab_size`.

The result is laid out like any hf_bpe tokenizer (ids 0-255 the bytes, then the stage-1 merges, then the stage-2
merges, then the special tokens) and is saved with the superword pattern: a text is pre-tokenized with it and its
pre-tokens merged by rank, which gives the segmentation training ended with. `SuperwordStages` says which ids came
from which stage. Plain reference: `hf_bpe.train._reference.reference_superword_train`.

>>> from hf_bpe import train_bpe_from_iterator
>>> vocab, merges = train_bpe_from_iterator(["the cat sat on the mat. the cat sat."] * 3, 270, superword_from=262)
>>> [vocab[token_id] for token_id in range(256, 262)]  # stage 1: within GPT-2's pre-tokens
[b'at', b'th', b'the', b'sat', b'cat', b' the']
>>> [vocab[token_id] for token_id in range(262, 270)]  # stage 2: across spaces
[b'cat ', b'cat sat', b' the ', b'the ', b'the cat sat', b'the cat sat ', b'the cat sat o', b'the cat sat on']
"""

from __future__ import annotations

import operator
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from hf_bpe.common.errors import InputError
from hf_bpe.encode.tokenizer import Tokenizer
from hf_bpe.pretokenize import resolve_pattern
from hf_bpe.pretokenize.superword import SUPERWORD_NAME
from hf_bpe.train.checks import report_training
from hf_bpe.train.extend import base_words
from hf_bpe.train.merge_loop import Merges, Vocab, _merge, _Words

# Distinct pieces of stage-2 pre-tokens are merged this many at a time (a few hundred KB: bounded temporaries).
PIECE_BATCH = 1 << 14
# Pairs of stage-1 tokens are counted this many positions at a time.
PAIR_BLOCK = 1 << 20
# Stage-2 pre-tokens are split into pieces about this many bytes of them at a time.
SPLIT_BYTES = 1 << 22
# Parts of cut words are counted this many at a time.
PART_BLOCK = 1 << 16


def check_superword_options(superword_from: int | None, superword_pattern: str | None, vocab_size: int,
                            special_tokens: Sequence[str]) -> tuple[int, str] | None:
    """(the transition as an int, the regex text of the stage-2 pattern: `superword_pattern`, None meaning SuperBPE's
    published one), or None without `superword_from`. The transition must be an int from 256 + the special tokens up
    to `vocab_size`.

    >>> check_superword_options(None, None, 1000, []) is None, check_superword_options(500, "o200k", 1000, [])[0]
    (True, 500)
    >>> check_superword_options(2000, None, 1000, [])
    Traceback (most recent call last):
    ...
    ValueError: superword_from 2000 must be at most vocab_size (1000): stage 1 trains up to it
    """
    if superword_from is None:
        if superword_pattern is not None:
            raise ValueError("superword_pattern is the pattern of SuperBPE's stage 2: it needs superword_from")
        return None
    if isinstance(superword_from, (bool, np.bool_)):
        raise TypeError(f"superword_from must be an int, got {superword_from!r}")
    try:
        transition = operator.index(superword_from)
    except TypeError:
        raise TypeError(f"superword_from must be an int, got {type(superword_from).__name__}: "
                        f"{superword_from!r}") from None
    least = 256 + len(special_tokens)
    if transition < least:
        raise ValueError(f"superword_from {transition} is too small: it counts the 256 byte tokens and the "
                         f"{len(special_tokens)} special tokens too, so it must be at least {least}")
    if transition > vocab_size:
        raise ValueError(f"superword_from {transition} must be at most vocab_size ({vocab_size}): stage 1 trains up "
                         f"to it")
    return transition, resolve_pattern(SUPERWORD_NAME if superword_pattern is None else superword_pattern)


def continue_with_superwords(stage_one: tuple[Vocab, Merges], counts: Mapping[bytes, int], vocab_size: int,
                             special_tokens: Sequence[str], *, progress: bool | None = None, verbose: bool = False,
                             counting_seconds: float = 0.0, token_counts: np.ndarray | None = None,
                             min_frequency: int = 0, max_token_length: int | None = None,
                             cut_below: int | None = None, consume_counts: bool = False) -> tuple[Vocab, Merges]:
    """SuperBPE's stage 2: continue from stage 1's vocab and merges (special tokens last, as training returns them)
    on `counts`, the corpus counted with the stage-2 pattern, up to `vocab_size` tokens with the special tokens,
    which take the last ids again. `token_counts` (uint64, `vocab_size` entries) receives how often each id occurs in
    the final segmentation of the counts. `consume_counts=True` empties `counts` once the words are made from them
    (their memory is not needed while merging).

    The words are first cut between stage-1 tokens whose pair counts less than a guess at the last merge's count
    (`cut_below`, None: `PairCounts.guess_last_count`; see `cut_at_rare_pairs`), and merging stops below it; if
    that stops short, the guess was too high and stage 2 runs again from the uncut words (the same merges either
    way).
    """
    vocab, merges = stage_one
    ordinary = {token_id: token for token_id, token in vocab.items() if token_id < 256 + len(merges)}
    base = StageOneTokenizer(ordinary, merges)
    start = time.perf_counter()
    num_merges = vocab_size - len(special_tokens) - len(ordinary)
    counted = None if token_counts is None else token_counts[:vocab_size - len(special_tokens)]
    try:
        words = base_words(counts, base, counted)
    except ValueError as error:  # a byte stage 1 has no token for
        raise InputError(f"SuperBPE stage 2: the stage-1 tokenizer cannot encode the corpus: {error}") from None
    distinct = len(counts)
    if consume_counts:
        counts.clear()  # type: ignore[attr-defined]
    pairs = PairCounts(words)
    cut = pairs.guess_last_count(num_merges) if cut_below is None else cut_below
    options = {"token_counts": counted, "max_token_length": max_token_length}
    id_merges: list[tuple[int, int]] = []
    if cut > max(min_frequency, 1):
        before = None if counted is None else counted.copy()
        parts = cut_at_rare_pairs(words, pairs, cut, counted)
        del pairs
        id_merges = _merge(parts, num_merges, progress, **options, min_frequency=cut)
        if len(id_merges) < num_merges and counted is not None:
            counted[:] = before  # type: ignore[index]
    if len(id_merges) < num_merges:
        id_merges = _merge(words, num_merges, progress, **options, min_frequency=min_frequency)
    vocab, merges = dict(ordinary), list(merges)
    for new_id, (left, right) in enumerate(id_merges, start=len(ordinary)):
        merges.append((vocab[left], vocab[right]))
        vocab[new_id] = vocab[left] + vocab[right]
    for token in special_tokens:
        vocab[len(vocab)] = token.encode("utf-8")
    if verbose:
        report_training(distinct, counting_seconds, len(id_merges), time.perf_counter() - start)
    return vocab, merges


class PairCounts:
    """How often each distinct pair of adjacent tokens occurs in the words, each word times its frequency
    (`distinct` pair codes, sorted, and their `totals`), counted a block of positions at a time so that the
    temporary arrays stay small whatever the corpus (as `FlatCorpus` indexes its pairs)."""

    def __init__(self, words: _Words) -> None:
        self.data = words.data if isinstance(words.data, np.ndarray) else np.frombuffer(words.data, np.uint8)
        self.ends = np.cumsum(words.lengths)
        self.frequencies = words.frequencies
        blocks = range(0, len(self.data), PAIR_BLOCK)
        self.distinct = np.unique(np.concatenate([np.unique(self._block(start)[1]) for start in blocks]
                                                 or [np.zeros(0, dtype=np.int64)]))
        self.totals = np.zeros(len(self.distinct), dtype=np.float64)
        for start in blocks:
            at, codes = self._block(start)
            weights = self.frequencies[np.searchsorted(self.ends, at, side="right")]
            self.totals += np.bincount(np.searchsorted(self.distinct, codes), weights=weights,
                                       minlength=len(self.distinct))

    def _block(self, start: int) -> tuple[np.ndarray, np.ndarray]:
        """The positions from `start` (a block of them) where a pair starts inside a word, and the pairs' codes."""
        stop = min(start + PAIR_BLOCK, len(self.data))
        inside = np.ones(stop - start, dtype=bool)
        first, last = np.searchsorted(self.ends, [start + 1, stop], side="left")
        inside[self.ends[first:last + 1][self.ends[first:last + 1] <= stop] - 1 - start] = False  # words' last tokens
        at = np.flatnonzero(inside) + start
        return at, (self.data[at].astype(np.int64) << 21) | self.data[at + 1]

    def rare(self, cut_below: int) -> np.ndarray:
        """The positions where a pair counting less than `cut_below` starts."""
        found = []
        for start in range(0, len(self.data), PAIR_BLOCK):
            at, codes = self._block(start)
            found.append(at[self.totals[np.searchsorted(self.distinct, codes)] < cut_below])
        return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)

    def guess_last_count(self, num_merges: int) -> int:
        """A guess at the count of the last of `num_merges` merges: a third of the `num_merges`-th largest pair
        count now (merges make pairs that count less than the pairs they merge); 0 when there are few pairs."""
        if num_merges <= 0 or len(self.totals) <= num_merges:
            return 0
        return int(np.partition(self.totals, len(self.totals) - num_merges)[len(self.totals) - num_merges]) // 3


def cut_at_rare_pairs(words: _Words, pairs: PairCounts, cut_below: int, token_counts: np.ndarray | None = None
                      ) -> _Words:
    """The words cut between every two tokens whose pair counts less than `cut_below` (in all the words), the parts
    counted as words of their own (one token parts go to `token_counts`).

    No merge counting `cut_below` or more ever joins across such a place: every occurrence of a pair (L, R) joins,
    at the place between L and R, the same two first tokens (L's last and R's first, as the merges built L and R), so
    (L, R) counts at most what that pair of first tokens counts. So as long as the best pair counts `cut_below` or
    more, merging the parts makes the merges of merging the words, and the same final segmentation; below it, the
    words must be merged whole (`continue_with_superwords`). Stage-2 words are documents, few of them alike; their
    parts are mostly phrases, many of them alike, so the merge loop holds far fewer positions.
    """
    data, lengths = words.data, words.lengths
    if not isinstance(data, np.ndarray) or len(data) == 0:
        return words
    starts = np.zeros(len(data), dtype=bool)
    starts[np.cumsum(lengths)[:-1]] = True
    starts[0] = True
    starts[pairs.rare(cut_below) + 1] = True
    part_starts = np.flatnonzero(starts)
    del starts
    part_frequencies = words.frequencies[np.searchsorted(np.cumsum(lengths), part_starts, side="right")]
    part_ends = np.append(part_starts[1:], len(data))
    raw = data.tobytes()
    totals: dict[bytes, int] = {}
    get = totals.get
    for block in range(0, len(part_starts), PART_BLOCK):  # Python ints for a block of parts at a time
        for first, last, frequency in zip((part_starts[block:block + PART_BLOCK] * 4).tolist(),
                                          (part_ends[block:block + PART_BLOCK] * 4).tolist(),
                                          part_frequencies[block:block + PART_BLOCK].tolist()):
            part = raw[first:last]
            totals[part] = get(part, 0) + frequency
    del raw, part_starts, part_ends, part_frequencies
    single = [part for part in totals if len(part) == 4]
    if token_counts is not None and single:
        ids = np.frombuffer(b"".join(single), dtype=np.int32)
        np.add.at(token_counts, ids, np.array([totals[part] for part in single], dtype=np.uint64))
    several = [part for part in totals if len(part) > 4]
    return _Words(np.frombuffer(b"".join(several), dtype=np.int32).copy(),
                  np.fromiter((len(part) // 4 for part in several), dtype=np.int64, count=len(several)),
                  np.fromiter((totals[part] for part in several), dtype=np.int64, count=len(several)),
                  words.distinct, list(words.token_bytes))  # the merge loop adds to its list


class StageOneTokenizer(Tokenizer):
    """Stage 1's tokenizer, which splits stage-2 pre-tokens into its tokens in pieces: the same ids as `Tokenizer`'s,
    found once per distinct piece rather than once per byte of the corpus.

    A stage-2 pre-token is a document between numbers, and the corpus holds few of them twice, so merging each one
    whole costs the encoder's per-byte work on the whole corpus. But no merge can join two tokens across a place
    where no token holds the two bytes on either side: such a place splits the pre-token into parts that the encoder
    merges independently, and their ids joined are the ids of the whole (BPE merges by rank within each part; no pair
    spans the cut). The place used is before a space that follows a byte no stage-1 token has before a space (with
    GPT-2's pattern, any byte of a non-whitespace character), so the parts are mostly words, each merged once
    (`piece_cut`).

    >>> from hf_bpe.encode.cache import unpack_ids
    >>> tokenizer = StageOneTokenizer({i: bytes([i]) for i in range(256)} | {256: b"  "}, [(b" ", b" ")])
    >>> [unpack_ids(ids) for ids in tokenizer.merge_pretoken_bytes([b"a b  c"])]
    [[97, 32, 98, 256, 99]]
    >>> tokenizer.piece_cut.split(b"a b  c x")  # no token holds "b " or "c ", "  " holds two spaces
    [b'a', b' b', b'  c', b' x']
    """

    @property
    def piece_cut(self) -> re.Pattern[bytes] | None:
        """Zero-width, before each space that no stage-1 token holds together with the byte before it."""
        if not hasattr(self, "_piece_cut"):
            before_space = {token[index - 1] for token in self.vocab.values()
                            for index in range(1, len(token)) if token[index] == 0x20}
            allowed = b"".join(re.escape(bytes([byte])) for byte in range(256) if byte not in before_space)
            self._piece_cut = re.compile(b"(?<=[" + allowed + b"])(?= )") if allowed else None
        return self._piece_cut

    def merge_pretoken_bytes(self, words: Sequence[bytes]) -> list[bytes]:
        """`Tokenizer.merge_pretoken_bytes`, each distinct piece of the words (`piece_cut`) merged once."""
        cut = self.piece_cut
        if cut is None:
            return super().merge_pretoken_bytes(words)
        ids: dict[bytes, bytes] = {}
        merged: list[bytes] = []
        start = 0
        while start < len(words):  # a few MB of words at a time, each split once
            end, size = start, 0
            while end < len(words) and (end == start or size < SPLIT_BYTES):
                size += len(words[end])
                end += 1
            parts = [cut.split(word) for word in words[start:end]]
            new = list({piece for pieces in parts for piece in pieces if piece not in ids})
            for first in range(0, len(new), PIECE_BATCH):  # the encoder's batch kernel takes ~50 bytes per byte
                batch = new[first:first + PIECE_BATCH]
                ids.update(zip(batch, super().merge_pretoken_bytes(batch)))
            merged.extend(b"".join(map(ids.__getitem__, pieces)) for pieces in parts)
            start = end
        return merged


@dataclass(frozen=True)
class SuperwordStages:
    """Which ids came from which stage of a SuperBPE tokenizer, as ranges: `stage_one` (the merges learned with the
    stage-1 pattern) and `stage_two` (the merges learned on superword pre-tokens).

    >>> SuperwordStages.of(stage_one_merges=43, num_merges=50)
    SuperwordStages(stage_one=range(256, 299), stage_two=range(299, 306))
    """

    stage_one: range
    stage_two: range

    @classmethod
    def of(cls, stage_one_merges: int, num_merges: int) -> SuperwordStages:
        return cls(range(256, 256 + stage_one_merges), range(256 + stage_one_merges, 256 + num_merges))


__all__ = ["PairCounts", "StageOneTokenizer", "SuperwordStages", "check_superword_options", "continue_with_superwords",
           "cut_at_rare_pairs"]
