"""SuperBPE (Liu, Hayase, Hofmann, Oh, Smith, Choi, "SuperBPE: Space Travel for Language Models", COLM 2025): BPE
training in two stages, so that the vocabulary also holds *superwords*, tokens that bridge whitespace (" by the way").

- **Stage 1** trains as usual, with the pre-tokenization `pattern`, up to the transition size `superword_from`
  (counted as `vocab_size` counts: the 256 bytes, the merges and the special tokens).
- **Stage 2** counts the corpus again, cut with the superword pattern (by default SuperBPE's published one,
  `hf_bpe.pretokenize.superword`: only digit groups and special tokens cut, so a pre-token runs from one number to
  the next across spaces and newlines). Each stage-2 pre-token is split into stage-1 tokens as hf_bpe's encoder
  splits it (`StageOneTokenizer.segment`: each distinct piece merged once, in time linear in a pre-token's length),
  by the counting workers as they count (`StageOneTokenizer.segment_counts`), which send back only small tables:
  the pairs of stage-1 tokens and the documents' distinct parts between rare pairs
  (`hf_bpe.train.starts.superword_passes`
  runs the passes). The one merge loop goes on from those parts up to `vocab_size`.

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
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np

from hf_bpe.common.errors import InputError
from hf_bpe.encode.cache import ID_DTYPE
from hf_bpe.encode.tokenizer import Tokenizer
from hf_bpe.pretokenize import resolve_pattern
from hf_bpe.pretokenize.superword import SUPERWORD_NAME
from hf_bpe.train.merging.merge_loop import Merges, Vocab
from hf_bpe.train.starts.superword_words import segment_dtype

# Distinct pieces of stage-2 pre-tokens are merged this many at a time (a few hundred KB: bounded temporaries).
PIECE_BATCH = 1 << 13
# Stage-2 pre-tokens are split into pieces about this many bytes of them at a time (each piece a bytes object until it
# is merged: a few MB of them in each counting worker).
SPLIT_BYTES = 1 << 18
# A stage-1 tokenizer keeps the ids of at most this many pieces (about 150 bytes each, in each counting worker). A
# piece merged again in every chunk it is new to costs time; a quarter of plain counting's piece table holds the
# pieces that recur, and the workers' peak memory falls by a third (docs/benchmarks.md).
PIECE_CACHE = 1 << 17


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


def stage_one_tokenizer(stage_one: tuple[Vocab, Merges]) -> StageOneTokenizer:
    """The tokenizer of stage 1's vocab and merges (without the special tokens, which no stage-2 pre-token holds)."""
    tokenizer = StageOneTokenizer(ordinary_vocab(stage_one), stage_one[1])
    tokenizer._tables()  # the merge kernel's tables, built once here: the counting workers fork after, and share them
    return tokenizer


def ordinary_vocab(stage_one: tuple[Vocab, Merges]) -> Vocab:
    """Stage 1's vocab without its special tokens (the bytes and the merged tokens)."""
    vocab, merges = stage_one
    return {token_id: token for token_id, token in vocab.items() if token_id < 256 + len(merges)}


class StageOneTokenizer(Tokenizer):
    """Stage 1's tokenizer, which splits stage-2 pre-tokens into its tokens in pieces: the same ids as `Tokenizer`'s,
    found once per distinct piece rather than once per byte of the corpus.

    A stage-2 pre-token is a document between numbers, and the corpus holds few of them twice, so merging each one
    whole costs the encoder's per-byte work on the whole corpus. But no merge can join two tokens across a place
    where no token holds the two bytes on either side: such a place splits the pre-token into parts that the encoder
    merges independently, and their ids joined are the ids of the whole (BPE merges by rank within each part; no pair
    spans the cut). The place used is before a space that follows a byte no stage-1 token has before a space (with
    GPT-2's pattern, any byte of a non-whitespace character), so the parts are mostly words, each merged once
    (`piece_cut`, `segment`).

    >>> tokenizer = StageOneTokenizer({i: bytes([i]) for i in range(256)} | {256: b"  "}, [(b" ", b" ")])
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
            # The space first: most places fail on it at once, before the look back.
            self._piece_cut = re.compile(b"(?= )(?<=[" + allowed + b"])") if allowed else None
        return self._piece_cut

    @property
    def segment_dtype(self) -> np.dtype:
        """The dtype `segment` packs ids in: the smallest unsigned one that holds every id (`segment_dtype`)."""
        return segment_dtype(max(self.vocab, default=0) + 1)

    def segment(self, words: Sequence[bytes]) -> list[bytes]:
        """The ids of each word (the encoder's, as `merge_pretoken_bytes` gives them) packed in `segment_dtype`: each
        word split at `piece_cut`, and each distinct piece merged once, a few MB of words at a time. Pieces merged
        stay known across calls, up to `PIECE_CACHE` of them (those of a batch that would pass it are forgotten
        after it): a worker segments many chunks of one corpus.

        >>> tokenizer = StageOneTokenizer({i: bytes([i]) for i in range(256)} | {256: b"  "}, [(b" ", b" ")])
        >>> [np.frombuffer(ids, tokenizer.segment_dtype).tolist() for ids in tokenizer.segment([b"a b  c"])]
        [[97, 32, 98, 256, 99]]
        """
        cut, dtype = self.piece_cut, self.segment_dtype
        if not hasattr(self, "_piece_ids"):
            self._piece_ids: dict[bytes, bytes] = {}
        ids = self._piece_ids
        merged: list[bytes] = []
        start = 0
        while start < len(words):  # a few MB of words at a time, each split once
            end, size = start, 0
            while end < len(words) and (end == start or size < SPLIT_BYTES):
                size += len(words[end])
                end += 1
            parts = [cut.split(word) for word in words[start:end]] if cut else [[word] for word in words[start:end]]
            new = list(set(chain.from_iterable(parts)).difference(ids))
            for first in range(0, len(new), PIECE_BATCH):  # the encoder's batch kernel takes ~50 bytes per byte
                batch = new[first:first + PIECE_BATCH]
                packed = self.merge_pretoken_bytes(batch)
                ends = (np.cumsum(np.fromiter(map(len, packed), dtype=np.int64, count=len(packed)))
                        // ID_DTYPE.itemsize * dtype.itemsize).tolist()
                converted = np.frombuffer(b"".join(packed), ID_DTYPE).astype(dtype).tobytes()
                ids.update(zip(batch, [converted[begin:stop] for begin, stop in zip([0, *ends], ends)]))
            merged.extend(b"".join(map(ids.__getitem__, pieces)) for pieces in parts)
            if len(ids) > PIECE_CACHE:  # the pieces first seen stay (the frequent ones, mostly); these go again
                for piece in new:
                    del ids[piece]
            start = end
        return merged

    def segment_counts(self, counts: Mapping[bytes, int]) -> Counter[bytes]:
        """The counts of stage-2 pre-tokens keyed by their stage-1 ids (`segment`) instead of their bytes: the
        counting workers segment what they count (`count_pretokens_in_files(..., convert=)`)."""
        try:
            return Counter(dict(zip(self.segment(list(counts)), counts.values())))  # the encoding is one-to-one
        except ValueError as error:  # a byte stage 1 has no token for
            raise InputError(f"SuperBPE stage 2: the stage-1 tokenizer cannot encode the corpus: {error}") from None


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


__all__ = ["StageOneTokenizer", "SuperwordStages", "check_superword_options", "ordinary_vocab", "stage_one_tokenizer"]
