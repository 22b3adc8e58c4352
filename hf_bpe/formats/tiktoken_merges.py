"""The merges of a tiktoken rank file: for each token, the one split that tiktoken can ever join.

tiktoken encodes a pre-token by looking it up whole; if it is no token, it starts from its single bytes and
repeatedly joins the adjacent pair of parts whose *concatenation* has the lowest rank (the leftmost among equal
ranks), until no adjacent pair concatenates to a token. A token can therefore be reached through a part that ranks
above it (Llama 3's `.:.:`, rank 100,421, is `.:.` (rank 105,051) + `:`), and a token may be reachable by no joins at
all, only by the lookup.

Why one merge per token is exact. Tokens are never split, so at any moment the parts refine every later
segmentation: when two adjacent parts X and Y with XY = T exist, the bytes of T have been joined only among
themselves, and since each join was the lowest pair of the whole pre-token, it was the lowest among T's own bytes:
T's bytes went through the first steps of tiktoken's procedure run on T alone. That procedure is deterministic and
ends [X, Y] -> [T]. So of all splits of T into two tokens, only the one at the last step of tiktoken's procedure on
T's own bytes can ever be joined, in any text: the others are never adjacent. BPE with one merge per token, that
split, ranked as T, applied lowest rank first and leftmost first, takes exactly tiktoken's steps on every text (by
induction over the steps: the same parts, the same candidate pairs, the same ranks); and it never meets two
different pairs of one rank. A token whose procedure stops at three parts or more gets no merge: tiktoken produces
it only for a pre-token equal to it, which is what `tokenizers`' `ignore_merges` and `hf_bpe.Tokenizer(...,
ignore_merges=True)` do. transformers' `TikTokenConverter` lists every split of each token (in merged-token order,
as merges.txt): by the same argument the extra splits are never used, and give the same ids.

How (`derive_merges`), in numpy, about as long as tiktoken takes to read the file:

1. Every split of every token into two tokens: the substrings' polynomial hashes (mod 2^64) from one cumulative
   sum, looked up in a hash table of the tokens' hashes (`hf_bpe.common.int_table`), the hits checked byte by
   byte, so the splits are exact whatever the hashes do.
2. tiktoken's procedure on all tokens at once, stopped at two parts: the tokens of similar length as the rows of one
   matrix of part ids, padded at the end; each step joins, in every row, the leftmost lowest pair (one `argmin` per
   row) and drops one column, so the matrix stays rectangular.

>>> ranks = {bytes([byte]): byte for byte in range(256)}  # "a" 97, "b" 98, "c" 99, "d" 100
>>> derive_merges(ranks | {b"bc": 256, b"ab": 257, b"abc": 258, b"cab": 259})
RankMerges(merges=[(b'b', b'c'), (b'a', b'b'), (b'a', b'bc'), (b'c', b'ab')], unreachable=[])
>>> derive_merges(ranks | {b"bc": 256, b"ab": 257, b"cd": 258, b"abcd": 259}).unreachable  # a, bc, d: stuck
[b'abcd']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from hf_bpe.common.int_table import IntTable

# Substrings of at most this many bytes are keyed exactly: 257 ** 7 < 2 ** 57.
_EXACT_LENGTH = 7
# Odd multipliers of the substring hashes; the next is tried in the (never seen) case of two tokens with one hash.
_BASES = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93)
# Tokens of one length up to this share a matrix; longer ones are padded to one matrix per power of two (at most
# twice the work of exact lengths, with a few dozen numpy steps per band instead of per length).
_EXACT_BANDS = 16


class RankMerges(NamedTuple):
    """`derive_merges`' result: the merges in rank order of the merged tokens, and the tokens of more than one byte
    that tiktoken reaches only by looking a whole pre-token up (in rank order)."""

    merges: list[tuple[bytes, bytes]]
    unreachable: list[bytes]


def derive_merges(ranks: Mapping[bytes, int]) -> RankMerges:
    """The merges with which BPE encodes as tiktoken does with `ranks` (token bytes -> rank; the 256 single bytes
    among them, else ValueError): for each token of two bytes or more, the two parts that tiktoken's procedure on the
    token's own bytes joins last (see the module docstring), in the order of the tokens' ranks."""
    tokens = sorted(ranks, key=ranks.__getitem__)
    count = len(tokens)
    lengths = np.fromiter(map(len, tokens), dtype=np.int64, count=count)
    data = np.frombuffer(b"".join(tokens), dtype=np.uint8)
    starts = np.cumsum(lengths) - lengths
    byte_index = np.full(256, -1, dtype=np.int64)
    singles = np.flatnonzero(lengths == 1)
    byte_index[data[starts[singles]]] = singles
    if (byte_index < 0).any():
        raise ValueError("the ranks have no token for some single bytes (a tiktoken file has all 256)")
    table = _pair_table(data, starts, lengths)
    left, right = _last_joins(data, starts, lengths, byte_index, table)
    joined = np.flatnonzero(left >= 0)
    merges = list(zip(map(tokens.__getitem__, left[joined].tolist()), map(tokens.__getitem__, right[joined].tolist())))
    unreachable = np.flatnonzero((left < 0) & (lengths > 1)).tolist()
    return RankMerges(merges, list(map(tokens.__getitem__, unreachable)))


def _pair_table(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> IntTable:
    """(left index * (count + 1) + right index) -> index of their concatenation, for every split of every token into
    two tokens (indices in rank order); any other key gives `count`."""
    count = len(lengths)
    long_tokens = lengths > _EXACT_LENGTH
    for base in _BASES:
        keys = _SubstringKeys(data, starts, lengths, base)
        token_keys = keys.of(np.arange(count), 0, lengths)
        if np.unique(token_keys[long_tokens]).size == np.count_nonzero(long_tokens):
            break
    else:  # pragma: no cover - two tokens with one hash under every base
        raise ValueError("cannot hash the tokens apart")
    tokens = IntTable(token_keys, np.arange(count), missing=-1)
    # Candidates: every token of two bytes or more, cut after each of its bytes but the last.
    multi = np.flatnonzero(lengths > 1)
    cuts = lengths[multi] - 1
    owner = np.repeat(multi, cuts)
    cut = np.arange(cuts.sum()) - np.repeat(np.cumsum(cuts) - cuts, cuts) + 1
    left = tokens.lookup(keys.of(owner, 0, cut))
    hit = (left >= 0) & (lengths[left] == cut)
    owner, cut, left = owner[hit], cut[hit], left[hit]
    right = tokens.lookup(keys.of(owner, cut, lengths[owner]))
    hit = (right >= 0) & (lengths[right] == lengths[owner] - cut)
    owner, cut, left, right = owner[hit], cut[hit], left[hit], right[hit]
    # A key of at most _EXACT_LENGTH bytes is the string itself; check the hashed ones byte by byte.
    hashed = np.flatnonzero((cut > _EXACT_LENGTH) | (lengths[owner] - cut > _EXACT_LENGTH))
    wrong = hashed[~_same_bytes(data, starts, lengths, owner[hashed], cut[hashed], left[hashed], right[hashed])]
    if wrong.size:
        owner, left, right = np.delete(owner, wrong), np.delete(left, wrong), np.delete(right, wrong)
    return IntTable(left * (count + 1) + right, owner, missing=count,
                    dtype=np.int32 if count < 2**31 - 1 else np.int64)


class _SubstringKeys:
    """Keys of the tokens' substrings, from two cumulative sums over the tokens' bytes: a substring of at most
    `_EXACT_LENGTH` bytes is keyed by its value in base 257 (its bytes plus one as digits: distinct strings, distinct
    keys), a longer one by a polynomial hash mod 2^64 with an odd `base`, its top bit set to keep the two apart."""

    def __init__(self, data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, base: int) -> None:
        self.starts, self.lengths = starts, lengths
        longest = int(lengths.max()) + 1
        offsets = np.arange(data.size) - np.repeat(starts, lengths)
        digits = data + np.uint64(1)
        self.sums = []
        self.inverse_powers = []
        for multiplier in (257, base):
            sums = np.zeros(data.size + 1, dtype=np.uint64)  # sums[i]: the bytes before i, each times base ** offset
            np.cumsum(digits * _powers(multiplier, longest)[offsets], out=sums[1:])  # wraps mod 2^64
            self.sums.append(sums)
            self.inverse_powers.append(_powers(pow(multiplier, -1, 1 << 64), longest))

    def of(self, tokens: np.ndarray, begin: np.ndarray | int, end: np.ndarray) -> np.ndarray:
        """The keys (int64 >= 0) of tokens[i][begin[i]:end[i]]."""
        first, last = self.starts[tokens] + begin, self.starts[tokens] + end
        exact, hashed = ((sums[last] - sums[first]) * inverse[begin]
                         for sums, inverse in zip(self.sums, self.inverse_powers))
        size = (end - begin).astype(np.uint64)
        hashed = ((hashed ^ (size * np.uint64(0xFF51AFD7ED558CCD))) | np.uint64(1 << 62)) & np.uint64((1 << 63) - 1)
        return np.where(size <= _EXACT_LENGTH, exact, hashed).view(np.int64)


def _powers(base: int, count: int) -> np.ndarray:
    """base ** k mod 2^64 for k < count, as uint64."""
    powers = np.ones(count, dtype=np.uint64)
    np.cumprod(np.full(count - 1, base, dtype=np.uint64), out=powers[1:])  # wraps mod 2^64
    return powers


def _same_bytes(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, owner: np.ndarray, cut: np.ndarray,
                left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """For each candidate, whether token `left` followed by token `right` is token `owner` byte for byte."""
    sizes = lengths[owner]
    offset = np.arange(sizes.sum()) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    cuts = np.repeat(cut, sizes)
    parts = np.where(offset < cuts, np.repeat(starts[left], sizes) + offset,
                     np.repeat(starts[right] - cut, sizes) + offset)
    wrong = data[np.repeat(starts[owner], sizes) + offset] != data[parts]
    return np.bincount(np.repeat(np.arange(owner.size), sizes)[wrong], minlength=owner.size) == 0


def _last_joins(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, byte_index: np.ndarray, table: IntTable
                ) -> tuple[np.ndarray, np.ndarray]:
    """For each token, the two parts at which tiktoken's procedure on its own bytes arrives (-1, -1 where it stops
    at three parts or more, and for single bytes)."""
    count = len(lengths)
    left = np.full(count, -1, dtype=np.int64)
    right = np.full(count, -1, dtype=np.int64)
    low = 2
    while low <= lengths.max(initial=0):
        high = low + 1 if low < _EXACT_BANDS else 2 * low
        rows = np.flatnonzero((lengths >= low) & (lengths < high))
        if rows.size:
            done, first, second = _join_band(data, starts, lengths, rows, byte_index, table, count)
            left[done], right[done] = first, second
        low = high
    return left, right


def _join_band(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, rows: np.ndarray, byte_index: np.ndarray,
               table: IntTable, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """tiktoken's procedure on the tokens `rows`, all at once, each stopped when two parts are left: (the tokens that
    got there, their first parts, their second parts). A part id `count` pads the rows at the end: it is in no pair,
    and each step drops one column of every row, so the padding of a row stays at its end."""
    width = int(lengths[rows].max())
    offsets = np.arange(width)
    inside = offsets < lengths[rows, None]
    parts = np.full((rows.size, width), count, dtype=np.int32 if count < 2**31 - 1 else np.int64)
    parts[inside] = byte_index[data[(starts[rows, None] + offsets)[inside]]]
    pairs = table.lookup(parts[:, :-1].astype(np.int64) * (count + 1) + parts[:, 1:])
    live = lengths[rows].copy()  # parts left in each row
    tokens = rows
    finished: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    while tokens.size:
        two = live == 2
        if two.any():
            finished.append((tokens[two], parts[two, 0], parts[two, 1]))
        if not pairs.shape[1]:
            break
        at = pairs.argmin(axis=1)[:, None]  # the leftmost lowest pair of each row
        lowest = np.take_along_axis(pairs, at, axis=1)
        going = ~two & (lowest[:, 0] < count)  # the others are done, or stuck at three parts or more
        if not going.all():
            tokens, parts, pairs, live, lowest, at = (tokens[going], parts[going], pairs[going], live[going],
                                                      lowest[going], at[going])
            if not tokens.size:
                break
        columns = np.arange(parts.shape[1] - 1)
        # Join: the part at `at` becomes the joined token, the parts after it move one column to the left.
        parts = np.where(columns <= at, parts[:, :-1], parts[:, 1:])
        np.put_along_axis(parts, at, lowest, axis=1)
        pairs = np.where(columns[:-1] < at, pairs[:, :-1], pairs[:, 1:])
        at = at[:, 0]
        live -= 1
        # The pairs on either side of the joined part.
        before = np.flatnonzero(at > 0)
        pairs[before, at[before] - 1] = table.lookup(parts[before, at[before] - 1].astype(np.int64) * (count + 1)
                                                     + parts[before, at[before]])
        after = np.flatnonzero(at < pairs.shape[1])
        pairs[after, at[after]] = table.lookup(parts[after, at[after]].astype(np.int64) * (count + 1)
                                               + parts[after, at[after] + 1])
    if not finished:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    done, first, second = (np.concatenate(arrays) for arrays in zip(*finished))
    return done, first, second


__all__ = ["RankMerges", "derive_merges"]
