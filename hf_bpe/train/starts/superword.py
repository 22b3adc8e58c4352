"""SuperBPE (Liu, Hayase, Hofmann, Oh, Smith, Choi, "SuperBPE: Space Travel for Language Models", COLM 2025): BPE
training in two stages, so that the vocabulary also holds *superwords*, tokens that bridge whitespace (" by the way").

- **Stage 1** trains as usual, with the pre-tokenization `pattern`, up to the transition size `superword_from`
  (counted as `vocab_size` counts: the 256 bytes, the merges and the special tokens).
- **Stage 2** counts the corpus again, cut with the superword pattern (by default SuperBPE's published one,
  `hf_bpe.pretokenize.superword`: only digit groups and special tokens cut, so a pre-token runs from one number to
  the next across spaces and newlines). Each stage-2 pre-token is split into stage-1 tokens as hf_bpe's encoder
  splits it (`StageOneTokenizer.segment_arrays`: each distinct piece merged once, in time linear in a pre-token's
  length), by the counting workers as they count (`StageOneTokenizer.segmented_arrays`), which send back only small
  tables: the pairs of stage-1 tokens and the documents' distinct parts between rare pairs
  (`hf_bpe.train.starts.superword_passes` runs the passes). The one merge loop goes on from those parts up to
  `vocab_size`.

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
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, repeat

import numpy as np

from hf_bpe.common.errors import InputError
from hf_bpe.encode.merge_kernels import range_positions
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
    _ = tokenizer.piece_cuts  # the same
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
    where no token holds the two bytes on either side: such a place splits the pre-token into pieces that the
    encoder merges independently, and their ids joined are the ids of the whole (BPE merges by rank within each
    piece; no pair spans the cut). Every such place is cut (`piece_cuts`: with GPT-2's pattern, between a letter and
    a punctuation mark, before a space that follows a letter, ...), so the pieces are words and runs of punctuation,
    far fewer distinct ones than the text between spaces, and each is merged once (`segment_arrays`).

    The cutting, and telling the pieces apart, are numpy over a few hundred KB of pre-tokens at a time: a piece of up
    to `SHORT_PIECE` bytes is one uint64 (`_short_keys`), sorted and made distinct; only the longer ones are bytes
    objects. The ids of the distinct pieces are looked up (or merged, `_merge_batch`) and gathered in place.

    >>> tokenizer = StageOneTokenizer({i: bytes([i]) for i in range(256)} | {256: b"  "}, [(b" ", b" ")])
    >>> int(tokenizer.piece_cuts[ord("b") << 8 | ord(" ")]), int(tokenizer.piece_cuts[ord(" ") << 8 | ord(" ")])
    (1, 0)
    """

    @property
    def piece_cuts(self) -> np.ndarray:
        """For each two bytes (`first << 8 | second`), whether no stage-1 token holds them side by side: a place
        between them splits a pre-token into pieces merged independently."""
        if not hasattr(self, "_piece_cuts"):
            cuts = np.ones(1 << 16, dtype=bool)
            for token in self.vocab.values():
                if len(token) > 1:
                    token_bytes = np.frombuffer(token, dtype=np.uint8).astype(np.intp)
                    cuts[token_bytes[:-1] << 8 | token_bytes[1:]] = False
            self._piece_cuts = cuts
        return self._piece_cuts

    @property
    def segment_dtype(self) -> np.dtype:
        """The dtype of `segment_arrays`' ids: the smallest unsigned one that holds every id (`segment_dtype`)."""
        if not hasattr(self, "_segment_dtype"):  # looked up for every batch: the vocab is not gone over each time
            self._segment_dtype = segment_dtype(max(self.vocab, default=0) + 1)
        return self._segment_dtype

    def segment_arrays(self, words: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """The ids of each word (the encoder's, as `merge_pretoken_bytes` gives them), every word's end to end in
        `segment_dtype`, and how many each word has: each word cut at its `piece_cuts`, and each distinct piece
        merged once, `SPLIT_BYTES` of words at a time. Pieces merged stay known across calls, up to `PIECE_CACHE` of
        them (those of a batch that would pass it are forgotten after it): a worker segments many chunks of one
        corpus. ValueError for a byte no stage-1 token holds.

        >>> tokenizer = StageOneTokenizer({i: bytes([i]) for i in range(256)} | {256: b"  "}, [(b" ", b" ")])
        >>> ids, lengths = tokenizer.segment_arrays([b"a b  c", b"", b"  "])
        >>> ids.tolist(), lengths.tolist()
        ([97, 32, 98, 256, 99, 256], [5, 0, 1])
        """
        if not hasattr(self, "_piece_ids"):
            self._piece_ids: dict[int | bytes, bytes] = {}
        segmented: list[tuple[np.ndarray, np.ndarray]] = []
        start = 0
        while start < len(words):  # a few hundred KB of words at a time
            end, size = start, 0
            while end < len(words) and (end == start or size < SPLIT_BYTES):
                size += len(words[end])
                end += 1
            segmented.append(self._segment_batch(words[start:end]))
            start = end
        if not segmented:
            return np.zeros(0, dtype=self.segment_dtype), np.zeros(0, dtype=np.int64)
        return (np.concatenate([ids for ids, _ in segmented]),
                np.concatenate([lengths for _, lengths in segmented]))

    def segmented_arrays(self, counts: Mapping[bytes, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The stage-2 pre-tokens of `counts` segmented (`segment_arrays`), with their counts (int64): what the
        counting workers make of what they count (`superword_words.arrays_words` takes it). InputError for a byte
        no stage-1 token holds."""
        try:
            ids, lengths = self.segment_arrays(list(counts))
        except ValueError as error:  # a byte stage 1 has no token for
            raise InputError(f"SuperBPE stage 2: the stage-1 tokenizer cannot encode the corpus: {error}") from None
        return ids, lengths, np.fromiter(counts.values(), dtype=np.int64, count=len(counts))

    def _segment_batch(self, words: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """`segment_arrays` of a few hundred KB of words."""
        text = b"".join(words)
        data = np.frombuffer(text + bytes(SHORT_PIECE), dtype=np.uint8)  # zeros after: every key's window in range
        size = len(text)
        word_lengths = np.fromiter(map(len, words), dtype=np.intp, count=len(words))
        word_starts = np.cumsum(word_lengths) - word_lengths
        begins = np.zeros(size + 1, dtype=bool)  # where a piece starts (and the end of the last one)
        if size > 1:
            begins[1:size] = self.piece_cuts[data[:size - 1].astype(np.intp) << 8 | data[1:size]]
        begins[word_starts] = True
        begins[size] = True
        bounds = np.flatnonzero(begins)
        piece_starts, piece_lengths = bounds[:-1], np.diff(bounds)
        # Each piece's index in `distinct`, the batch's distinct pieces: the short ones (by their keys), then the
        # long ones (by their bytes).
        which = np.empty(len(piece_starts), dtype=np.intp)
        short = np.flatnonzero(piece_lengths <= SHORT_PIECE)
        which[short], keys = _distinct_keys(_short_keys(data, piece_starts[short], piece_lengths[short]))
        distinct: list[int | bytes] = keys.tolist()
        long = np.flatnonzero(piece_lengths > SHORT_PIECE)
        if len(long):
            long_pieces = [text[begin:begin + length] for begin, length in
                           zip(piece_starts[long].tolist(), piece_lengths[long].tolist())]
            numbered = {piece: index for index, piece in enumerate(dict.fromkeys(long_pieces), start=len(distinct))}
            which[long] = np.fromiter(map(numbered.__getitem__, long_pieces), dtype=np.intp, count=len(long))
            distinct.extend(numbered)
        # One lookup per distinct piece: the ids of those known, None for the new ones, merged and filled in.
        known = self._piece_ids
        distinct_ids = list(map(known.get, distinct))
        missing = list(compress(range(len(distinct_ids)), map(operator.is_, distinct_ids, repeat(None))))
        new = list(map(distinct.__getitem__, missing))
        # The new pieces' bytes: the short ones (a prefix of `missing`) from their keys, the long as they are.
        short_new = bisect_left(missing, len(keys))
        new_bytes = _key_bytes(keys[missing[:short_new]]) + new[short_new:]
        merged: list[bytes] = []
        for first in range(0, len(new), PIECE_BATCH):  # the encoder's batch kernel takes ~50 bytes per byte
            merged += self._merge_batch(new_bytes[first:first + PIECE_BATCH])
        for index, ids in zip(missing, merged):
            distinct_ids[index] = ids
        if len(known) + len(new) <= PIECE_CACHE:  # the pieces first seen stay (the frequent ones, mostly)
            known.update(zip(new, merged))
        # Every piece's ids in place: the distinct pieces' ids end to end, gathered.
        dtype = self.segment_dtype
        distinct_lengths = np.fromiter(map(len, distinct_ids), dtype=np.intp, count=len(distinct_ids))
        distinct_lengths //= dtype.itemsize
        all_ids = np.frombuffer(b"".join(distinct_ids), dtype=dtype)
        lengths = distinct_lengths[which]
        ids = all_ids[range_positions(np.cumsum(distinct_lengths)[which] - lengths, lengths)]
        ends = np.cumsum(lengths)
        # Each word's number of ids: from its first piece to the next word's.
        first_piece = np.searchsorted(bounds, np.append(word_starts, size))
        ids_before = np.concatenate(([0], ends))
        return ids, np.diff(ids_before[first_piece]).astype(np.int64)

    def _merge_batch(self, pieces: list[bytes]) -> list[bytes]:
        """The ids of `pieces` (merged as pre-tokens, not cut) packed in `segment_dtype`."""
        ids, sizes = self.merge_pretoken_arrays(pieces)
        dtype = self.segment_dtype
        packed = ids.astype(dtype).tobytes()
        ends = (np.cumsum(sizes) * dtype.itemsize).tolist()
        return [packed[begin:stop] for begin, stop in zip([0, *ends], ends)]


def _distinct_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(keys, return_inverse=True)`, inverted: each key's index among the distinct keys, and those keys
    ascending. `np.unique` sorts by numpy's default argsort, a quicksort, which on a batch's pieces (tens of thousands
    of uint64 keys) takes about three times the stable one (a radix sort) that this uses. pandas' hash table
    (`factorize`) was faster again, but importing pandas in the parent and each worker costs 60-80 MB of each.

    >>> indices, distinct = _distinct_keys(np.array([9, 4, 9, 7], dtype=np.uint64))
    >>> indices.tolist(), distinct.tolist()
    ([2, 0, 2, 1], [4, 7, 9])
    """
    order = keys.argsort(kind="stable")
    ordered = keys[order]
    first = np.empty(len(ordered), dtype=bool)
    first[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    indices = np.empty(len(ordered), dtype=np.intp)
    indices[order] = np.cumsum(first) - 1
    return indices, ordered[first]


# A piece of at most this many bytes is told apart by one uint64: its length in the top byte, then its bytes.
SHORT_PIECE = 7
_SHORT_MASKS = np.array([((1 << 8 * length) - 1) << 8 * (SHORT_PIECE - length) for length in range(SHORT_PIECE + 1)],
                        dtype=np.uint64)


def _short_keys(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The keys of the pieces of `lengths` (at most SHORT_PIECE) bytes at `starts` of `data` (which runs on for
    SHORT_PIECE bytes past the last piece): `length << 56 | bytes`, the bytes big-endian and left-aligned, so that
    `_key_bytes` gives them back.

    >>> keys = _short_keys(np.frombuffer(b"abc" + bytes(7), np.uint8), np.array([0, 1, 0]), np.array([2, 1, 0]))
    >>> _key_bytes(keys)
    [b'ab', b'b', b'']
    """
    window = np.zeros(len(starts), dtype=np.uint64)
    for offset in range(SHORT_PIECE):
        window <<= np.uint64(8)
        window |= data[starts + offset]
    return (window & _SHORT_MASKS[lengths]) | (lengths.astype(np.uint64) << np.uint64(8 * SHORT_PIECE))


def _key_bytes(keys: np.ndarray) -> list[bytes]:
    """The bytes of short pieces, from their keys (`_short_keys`): each key's big-endian bytes after the first (its
    length), as many as its length, cut from one bytes object by C-level maps."""
    if not len(keys):
        return []
    starts = np.arange(1, 8 * len(keys), 8)
    stops = starts + (keys >> np.uint64(8 * SHORT_PIECE)).astype(np.intp)
    data = keys.astype(">u8").tobytes()
    return list(map(data.__getitem__, map(slice, starts.tolist(), stops.tolist())))


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
