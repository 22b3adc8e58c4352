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

How (`derive_merges`): tiktoken's procedure on all tokens at once in numpy, each stopped when two parts are left.
The tokens of one length (of a band of lengths, for long ones, padded) are the rows of a matrix, shortest first; a
part stays in the column of its first byte, so a pair of parts is the substring from the left part's column to the
end of the right part. Each step joins, in every row, the leftmost lowest pair (one `argmin` over the matrix) and
looks up the two pairs beside it. Which token two adjacent parts X, Y make, if any, needs no look at their bytes: by
the argument above, if XY is a token Z, then (X, Y) is Z's merge, derived already since Z is shorter. So the pair is
looked up by its parts' ids among the merges found so far (`hf_bpe.common.int_table`, filled one length at a time).
Only in the bands of long tokens, where a pair may be a token of the same band still underway, pairs of 16 bytes or
more are found by their bytes: a substring's key is its value in base 257 up to 7 bytes, else a hash from a
cumulative sum over the long tokens' bytes, and every hit of a hash is checked byte by byte, so the result is exact
whatever the hashes do.

>>> ranks = {bytes([byte]): byte for byte in range(256)}  # "a" 97, "b" 98, "c" 99, "d" 100
>>> derive_merges(ranks | {b"bc": 256, b"ab": 257, b"abc": 258, b"cab": 259})
RankMerges(merges=[(b'b', b'c'), (b'a', b'b'), (b'a', b'bc'), (b'c', b'ab')], unreachable=[])
>>> derive_merges(ranks | {b"bc": 256, b"ab": 257, b"cd": 258, b"abcd": 259}).unreachable  # a, bc, d: stuck
[b'abcd']
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from operator import is_
from typing import Any, NamedTuple

import numpy as np

from hf_bpe.common.int_table import IntTable

# Substrings of at most this many bytes are keyed exactly: 257 ** 7 < 2 ** 57.
_EXACT_LENGTH = 7
# Odd multipliers of the substring hashes; the next is tried in the (never seen) case of two tokens with one hash.
_BASES = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93)
# Tokens of one length up to this share a matrix; longer ones are padded to one matrix per power of two (at most
# twice the work of exact lengths, with a few dozen numpy steps per band instead of per length).
_EXACT_BANDS = 16
# Fewer tokens than this, all longer than a band's start, share one matrix however long they are.
_FEW_ROWS = 4096


class _Derivation(NamedTuple):
    """What `_derive` finds: the tokens in rank order and their ranks (`ids`), the indices (in `tokens`) of the
    left and right part of each merge, the (left ids, right ids, merged ids) of the merges, the unreachable tokens."""

    tokens: list[bytes]
    ids: list[int]
    lefts: np.ndarray
    rights: np.ndarray
    merge_ids: tuple[list[int], list[int], list[int]]
    unreachable: list[bytes]

    def pairs(self) -> list[tuple[bytes, bytes]]:
        get = self.tokens.__getitem__
        return list(zip(map(get, self.lefts.tolist()), map(get, self.rights.tolist())))

    def known_ids(self, token_ids: Mapping[bytes, int]) -> tuple[list[int], list[int], list[int]] | None:
        """`merge_ids` if `token_ids` gives every token its rank, else None."""
        return self.merge_ids if list(map(token_ids.get, self.tokens)) == self.ids else None


class DerivedMerges(list):  # type: ignore[type-arg]
    """`derive_merges`' merges, a list of (bytes, bytes) that also keeps the ids (ranks) of each merge's parts and
    result, so that `hf_bpe.encode.merge_table` need not look 3 x 200,000 tokens up again: `known_ids`. A copy
    (`copy`) keeps them; a pickle is a plain list."""

    def __init__(self, derivation: _Derivation) -> None:
        super().__init__(derivation.pairs())
        self._pairs, self._derivation = tuple(self), derivation

    def copy(self) -> DerivedMerges:
        copied = DerivedMerges.__new__(DerivedMerges)
        list.extend(copied, self)
        copied._pairs, copied._derivation = self._pairs, self._derivation
        return copied

    def __reduce__(self) -> tuple[Any, ...]:
        return list, (list(self),)

    def known_ids(self, token_ids: Mapping[bytes, int]) -> tuple[list[int], list[int], list[int]] | None:
        """(left ids, right ids, merged ids) of the merges, if the list still holds the derived merges (the same
        objects: no edit since) and `token_ids` gives every token of the derivation its rank; else None."""
        if len(self) != len(self._pairs) or not all(map(is_, self, self._pairs)):
            return None
        return self._derivation.known_ids(token_ids)


class LazyMerges(Sequence[tuple[bytes, bytes]]):
    """`derive_merges`' merges as `hf_bpe.Tokenizer.from_tiktoken` keeps them: made into (bytes, bytes) pairs only
    when first read (the `merges` property, a pickle), since encoding needs only their ids (`known_ids`, as
    `DerivedMerges`'). Read-only; equal to the list of the same pairs; a pickle is a plain list.

    >>> merges = derive_lazy_merges({bytes([byte]): byte for byte in range(256)} | {b"ab": 256, b"abc": 257})
    >>> len(merges), merges == [(b"a", b"b"), (b"ab", b"c")], merges[1], merges
    (2, True, (b'ab', b'c'), [(b'a', b'b'), (b'ab', b'c')])
    """

    def __init__(self, derivation: _Derivation) -> None:
        self._derivation = derivation
        self._pairs: list[tuple[bytes, bytes]] | None = None

    def _list(self) -> list[tuple[bytes, bytes]]:
        if self._pairs is None:
            self._pairs = self._derivation.pairs()
        return self._pairs

    def __len__(self) -> int:
        return len(self._derivation.lefts)

    def __getitem__(self, index: Any) -> Any:
        return self._list()[index]

    def __iter__(self) -> Iterator[tuple[bytes, bytes]]:
        return iter(self._list())

    def __eq__(self, other: object) -> bool:
        return self._list() == (other._list() if isinstance(other, LazyMerges) else other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._list())

    def __reduce__(self) -> tuple[Any, ...]:
        return list, (self._list(),)

    def known_ids(self, token_ids: Mapping[bytes, int]) -> tuple[list[int], list[int], list[int]] | None:
        """(left ids, right ids, merged ids) of the merges if `token_ids` gives every token of the derivation its
        rank, else None."""
        return self._derivation.known_ids(token_ids)


class RankMerges(NamedTuple):
    """`derive_merges`' result: the merges in rank order of the merged tokens, and the tokens of more than one byte
    that tiktoken reaches only by looking a whole pre-token up (in rank order)."""

    merges: DerivedMerges
    unreachable: list[bytes]


def derive_merges(ranks: Mapping[bytes, int]) -> RankMerges:
    """The merges with which BPE encodes as tiktoken does with `ranks` (token bytes -> rank; the 256 single bytes
    among them, else ValueError): for each token of two bytes or more, the two parts that tiktoken's procedure on the
    token's own bytes joins last (see the module docstring), in the order of the tokens' ranks."""
    derivation = _derive(ranks)
    return RankMerges(DerivedMerges(derivation), derivation.unreachable)


def derive_lazy_merges(ranks: Mapping[bytes, int]) -> LazyMerges:
    """`derive_merges(ranks).merges`, made into pairs of bytes only when read (`LazyMerges`)."""
    return LazyMerges(_derive(ranks))


def _derive(ranks: Mapping[bytes, int]) -> _Derivation:
    values = np.fromiter(ranks.values(), dtype=np.int64, count=len(ranks))
    tokens = list(ranks) if (values[1:] > values[:-1]).all() else sorted(ranks, key=ranks.__getitem__)
    count = len(tokens)
    lengths = np.fromiter(map(len, tokens), dtype=np.int64, count=count)
    data = np.frombuffer(b"".join(tokens), dtype=np.uint8)
    starts = np.cumsum(lengths) - lengths
    byte_index = np.full(256, -1, dtype=np.int64)
    singles = np.flatnonzero(lengths == 1)
    byte_index[data[starts[singles]]] = singles
    if (byte_index < 0).any():
        raise ValueError("the ranks have no token for some single bytes (a tiktoken file has all 256)")
    left, right = _last_joins(data, starts, lengths, byte_index)
    joined = np.flatnonzero(left >= 0)
    lefts, rights = left[joined], right[joined]
    ids = np.sort(values)
    merge_ids = (ids[lefts].tolist(), ids[rights].tolist(), ids[joined].tolist())
    unreachable = list(map(tokens.__getitem__, np.flatnonzero((left < 0) & (lengths > 1)).tolist()))
    return _Derivation(tokens, ids.tolist(), lefts, rights, merge_ids, unreachable)


class _Substrings:
    """Which token, if any, each of many substrings of the tokens is: `find`.

    Keys come from two cumulative sums over the tokens' bytes: a substring of at most `_EXACT_LENGTH` bytes is keyed
    by its value in base 257 (its bytes plus one as digits: distinct strings, distinct keys), a longer one by a
    polynomial hash mod 2^64 with an odd base, its top bit set to keep the two kinds apart, and a hit of a hashed
    key is checked byte by byte. The base is one under which no two tokens share a key."""

    def __init__(self, data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> None:
        self.data, self.starts, self.lengths = data, starts, lengths
        count = len(lengths)
        self._offsets = np.arange(data.size) - np.repeat(starts, lengths)
        self._longest = int(lengths.max()) + 1
        exact = self._sums(257)
        for base in _BASES:
            self.sums = [exact, self._sums(base)]
            self.inverse_powers = [_powers(pow(multiplier, -1, 1 << 64), self._longest) for multiplier in (257, base)]
            token_keys = self._keys(np.arange(count), 0, lengths)
            self.table = IntTable(token_keys, np.arange(count), missing=-1)
            if np.array_equal(self.table.lookup(token_keys), np.arange(count)):
                return
        raise ValueError("cannot hash the tokens apart")  # pragma: no cover - never seen

    def _sums(self, base: int) -> np.ndarray:
        """sums[i]: the bytes before i, each plus one times base ** (its offset in its token), mod 2^64."""
        sums = np.zeros(self.data.size + 1, dtype=np.uint64)
        np.cumsum((self.data + np.uint64(1)) * _powers(base, self._longest)[self._offsets], out=sums[1:])
        return sums

    def _keys(self, tokens: np.ndarray, begin: np.ndarray | int, end: np.ndarray) -> np.ndarray:
        """The keys (int64 >= 0) of tokens[i][begin[i]:end[i]]."""
        first, last = self.starts[tokens] + begin, self.starts[tokens] + end
        size = end - begin
        hashed = np.flatnonzero(size > _EXACT_LENGTH)
        (exact_sums, hash_sums), (exact_inverse, hash_inverse) = self.sums, self.inverse_powers
        keys = (exact_sums[last] - exact_sums[first]) * exact_inverse[begin]
        if hashed.size:
            begin = begin if isinstance(begin, int) else begin[hashed]
            values = (hash_sums[last[hashed]] - hash_sums[first[hashed]]) * hash_inverse[begin]
            mixed = values ^ (size[hashed].astype(np.uint64) * np.uint64(0xFF51AFD7ED558CCD))
            keys[hashed] = (mixed | np.uint64(1 << 62)) & np.uint64((1 << 63) - 1)
        return keys.view(np.int64)

    def find(self, tokens: np.ndarray, begin: np.ndarray, end: np.ndarray, missing: int) -> np.ndarray:
        """The index of the token that is tokens[i][begin[i]:end[i]], else `missing`."""
        found = self.table.lookup(self._keys(tokens, begin, end))
        hashed = np.flatnonzero((found >= 0) & (end - begin > _EXACT_LENGTH))
        if hashed.size:
            size = end[hashed] - begin[hashed]
            wrong = (self.lengths[found[hashed]] != size) | ~_equal_bytes(
                self.data, self.starts[tokens[hashed]] + begin[hashed], self.starts[found[hashed]],
                np.minimum(size, self.lengths[found[hashed]]))
            found[hashed[wrong]] = -1
        found[found < 0] = missing
        return found


def _powers(base: int, count: int) -> np.ndarray:
    """base ** k mod 2^64 for k < count, as uint64."""
    powers = np.ones(count, dtype=np.uint64)
    np.cumprod(np.full(count - 1, base, dtype=np.uint64), out=powers[1:])  # wraps mod 2^64
    return powers


def _equal_bytes(data: np.ndarray, first: np.ndarray, second: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Whether data[first[i]:first[i] + sizes[i]] == data[second[i]:second[i] + sizes[i]], for each i."""
    offset = np.arange(sizes.sum()) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    wrong = data[np.repeat(first, sizes) + offset] != data[np.repeat(second, sizes) + offset]
    return np.bincount(np.repeat(np.arange(sizes.size), sizes)[wrong], minlength=sizes.size) == 0


def _last_joins(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, byte_index: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """For each token, the two parts at which tiktoken's procedure on its own bytes arrives (-1, -1 where it stops
    at three parts or more, and for single bytes). Bands of lengths go shortest first, so that the merges of all
    tokens shorter than `_EXACT_BANDS` are known when a longer one needs them (`_Pairs`)."""
    left = np.full(lengths.size, -1, dtype=np.int64)
    right = np.full(lengths.size, -1, dtype=np.int64)
    pairs = _Pairs(data, starts, lengths)
    low = 2
    while low <= lengths.max(initial=0):
        high = low + 1 if low < _EXACT_BANDS else 2 * low
        if low >= _EXACT_BANDS and np.count_nonzero(lengths >= low) < _FEW_ROWS:
            high = int(lengths.max()) + 1  # the few long ones: their steps cost more than their padding
        rows = np.flatnonzero((lengths >= low) & (lengths < high))
        if rows.size:
            _join_band(pairs, rows, byte_index, left, right)
            if low < _EXACT_BANDS:
                pairs.add(rows, left[rows], right[rows])
        low = high
    return left, right


class _Pairs:
    """Which token, if any, two adjacent parts of tiktoken's procedure make: `find`.

    By the module docstring's argument, when parts X and Y are adjacent in the procedure on a token and XY is a
    token Z, the procedure on Z's own bytes arrives at X, Y: (X, Y) is Z's merge. So a pair of parts shorter than
    the token is looked up by the ids of its parts among the merges of shorter tokens, known by then (an `IntTable`
    keyed left * count + right, filled one length at a time: `add`). Pairs of `_EXACT_BANDS` bytes or more, in the
    bands of long tokens where shorter tokens of the same band are still underway, are looked up by their bytes
    among the long tokens (`_Substrings`)."""

    def __init__(self, data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> None:
        self.data, self.starts, self.lengths = data, starts, lengths
        self.count = count = len(lengths)
        self.dtype = np.int32 if count < 2**31 - 1 else np.int64
        self.merges = IntTable(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), missing=count,
                               dtype=self.dtype, capacity=count)
        # The first pairs of each band, every two adjacent bytes: the two-byte tokens, by their two bytes.
        self.two_bytes = np.full(1 << 16, count, dtype=self.dtype)
        pair_starts = starts[lengths == 2]
        self.two_bytes[(data[pair_starts].astype(np.intp) << 8) | data[pair_starts + 1]] = np.flatnonzero(lengths == 2)
        self.long = np.flatnonzero(lengths >= _EXACT_BANDS)
        self._long_substrings: _Substrings | None = None

    def add(self, tokens: np.ndarray, left: np.ndarray, right: np.ndarray) -> None:
        """Take the merges (left[i], right[i]) of `tokens` (-1: none)."""
        merged = np.flatnonzero(left >= 0)
        self.merges.insert(left[merged] * self.count + right[merged], tokens[merged])

    def find(self, left: np.ndarray, right: np.ndarray,
             span: tuple[np.ndarray, np.ndarray, np.ndarray] | None) -> np.ndarray:
        """The index of the token that adjacent parts left[i] and right[i] of the procedure on a token make, else
        `count`. `span`: (tokens, begin, end), the pairs as tokens[i][begin[i]:end[i]], where some may be as long as
        `_EXACT_BANDS` (None: all are shorter)."""
        found = self.merges.lookup(left.astype(np.int64) * self.count + right)
        if span is None:
            return found
        tokens, begin, end = span
        wide = np.flatnonzero(end - begin >= _EXACT_BANDS)
        if wide.size:
            if self._long_substrings is None:
                offsets = np.arange(int(self.lengths[self.long].sum())) - np.repeat(
                    np.cumsum(self.lengths[self.long]) - self.lengths[self.long], self.lengths[self.long])
                self._long_substrings = _Substrings(
                    self.data[np.repeat(self.starts[self.long], self.lengths[self.long]) + offsets],
                    np.cumsum(self.lengths[self.long]) - self.lengths[self.long], self.lengths[self.long])
            hit = self._long_substrings.find(np.searchsorted(self.long, tokens[wide]), begin[wide], end[wide], -1)
            found[wide] = np.where(hit >= 0, self.long[hit], self.count)
        return found


def _join_band(lookup: _Pairs, tokens: np.ndarray, byte_index: np.ndarray, left: np.ndarray,
               right: np.ndarray) -> None:
    """tiktoken's procedure on `tokens`, all at once, one row of a matrix each: set left[t], right[t] to the parts of
    token t once two are left. A part stays in the column of its first byte, so a column is an offset in the token:
    a pair is the substring from its left part's column to the column after its right part. A joined pair leaves a
    hole at its right part; each part links to the next and the previous part. Rows of shorter tokens are padded;
    rows that are done (two parts, or stuck) are dropped once they are half of the matrix. Cells are read and
    written through flat indices (row * width + column), cheaper in numpy than pairs of index arrays."""
    count = len(lookup.lengths)
    sizes = lookup.lengths[tokens]
    width = int(sizes.max())
    wide = width > _EXACT_BANDS  # pairs of `_EXACT_BANDS` bytes or more are found by their bytes
    columns = np.arange(width)
    inside = columns < sizes[:, None]
    raw = np.zeros((tokens.size, width), dtype=np.intp)
    raw[inside] = lookup.data[(lookup.starts[tokens, None] + columns)[inside]]
    parts = np.where(inside, byte_index[raw], -1).astype(lookup.dtype)
    # pairs[r, c]: the pair whose left part is at c; at first the two-byte tokens.
    pairs = np.full((tokens.size, width), count, dtype=lookup.dtype)
    pairs[:, :-1] = np.where(columns[:-1] < sizes[:, None] - 1, lookup.two_bytes[(raw[:, :-1] << 8) | raw[:, 1:]],
                             count)
    following = np.tile(np.arange(1, width + 1, dtype=np.intp), (tokens.size, 1))
    preceding = np.tile(np.arange(-1, width - 1, dtype=np.intp), (tokens.size, 1))
    live = sizes.copy()
    # In a band of one length, the rows still going all have as many parts (`left_in_all`): no arrays for that.
    left_in_all = width if bool((sizes == width).all()) else 0
    going = np.ones(tokens.size, dtype=bool)
    starts = np.arange(0, tokens.size * width, width)  # of each row in the flat matrices
    while True:
        two = np.flatnonzero(going & (live == 2)) if not left_in_all else (
            np.flatnonzero(going) if left_in_all == 2 else None)
        if two is not None and two.size:  # column 0 is always a part's start
            left[tokens[two]] = parts[two, 0]
            right[tokens[two]] = parts.reshape(-1)[starts[two] + following[two, 0]]
            going[two] = False
        at = pairs.argmin(axis=1)
        cell = starts + at
        lowest = pairs.reshape(-1)[cell]
        going &= lowest < count  # the others are stuck at three parts or more: no merge
        if not going.any():
            return
        if going.all():
            row, row_starts = None, starts
        elif np.count_nonzero(going) * 2 < tokens.size:
            tokens, sizes, parts, pairs, following, preceding, live, at, lowest = (
                array[going] for array in (tokens, sizes, parts, pairs, following, preceding, live, at, lowest))
            going = np.ones(tokens.size, dtype=bool)
            row, starts = None, np.arange(0, tokens.size * width, width)
            row_starts, cell = starts, starts + at
        else:
            row = np.flatnonzero(going)
            at, lowest, cell, row_starts = at[row], lowest[row], cell[row], starts[row]
        row_tokens = tokens if row is None else tokens[row]
        flat_parts, flat_pairs = parts.reshape(-1), pairs.reshape(-1)
        flat_following, flat_preceding = following.reshape(-1), preceding.reshape(-1)
        gone = row_starts + flat_following[cell]
        flat_parts[cell] = lowest
        flat_pairs[gone] = count
        after = flat_following[gone]  # the joined part is the substring [at, after)
        flat_following[cell] = after
        if left_in_all:
            left_in_all -= 1
            ahead = np.flatnonzero(after < width)
            more: np.ndarray | bool = left_in_all > 2
        else:
            if row is None:
                live -= 1
            else:
                live[row] -= 1
            ahead = np.flatnonzero(after < (sizes if row is None else sizes[row]))
            more = (live if row is None else live[row]) > 2
        flat_preceding[row_starts[ahead] + after[ahead]] = at[ahead]
        # The pairs on either side of the joined part, unless two parts are left: their pair is the token itself.
        flat_pairs[cell] = count
        if more is False:
            continue
        if more is not True:
            ahead = ahead[more[ahead]]
        next_cell = row_starts[ahead] + after[ahead]
        flat_pairs[cell[ahead]] = lookup.find(
            lowest[ahead], flat_parts[next_cell], (row_tokens[ahead], at[ahead], flat_following[next_cell]) if wide
            else None)
        before = flat_preceding[cell]
        behind = np.flatnonzero((before >= 0) & more)
        before_cell = row_starts[behind] + before[behind]
        flat_pairs[before_cell] = lookup.find(
            flat_parts[before_cell], lowest[behind], (row_tokens[behind], before[behind], after[behind]) if wide
            else None)


__all__ = ["DerivedMerges", "LazyMerges", "RankMerges", "derive_lazy_merges", "derive_merges"]
