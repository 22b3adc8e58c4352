"""The `Tokenizer`'s lookup tables from a vocab and merges, built with C-level calls (`map`, `dict`, `zip`).

A 200,000-token vocab has 200,000 merges: a Python loop over them costs more than tiktoken takes to build its whole
`Encoding` from the same file, so every table here is made by builtins over whole lists, and the loops that name a
bad entry run only once something is known to be wrong.

Ranks: merge i has rank i. Where one pair is listed twice, its first rank counts. Several merges may make one token
(transformers' TikTokenConverter lists every split of a token): each keeps its own rank, as `tokenizers` ranks them
by their place in the list, and the merged id of each is that token's.

>>> token_ids = vocab_index({0: b"a", 1: b"b", 2: b"ab"})
>>> merge_table(token_ids, [(b"a", b"b"), (b"a", b"b")])
({(0, 1): 0}, [2, 2])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain
from operator import itemgetter

from hf_bpe.encode.merge_kernels import PairRanks
from hf_bpe.formats.tiktoken_merges import DerivedMerges, LazyMerges


class MergeTableError(ValueError):
    """A merge that does not fit the vocab; `rank` is its place in the merges."""

    def __init__(self, rank: int, message: str) -> None:
        super().__init__(message)
        self.rank = rank


def vocab_index(vocab: Mapping[int, bytes], max_id: int = 2**32 - 2) -> dict[bytes, int]:
    """token bytes -> id. Raises ValueError for an id that is not an int from 0 to `max_id`, or a token given twice.

    >>> vocab_index({0: b"a", 1: b"a"})
    Traceback (most recent call last):
    ...
    ValueError: vocab has the token b'a' twice (ids 0 and 1)
    """
    token_ids = dict(zip(vocab.values(), vocab))
    if not vocab or (len(token_ids) == len(vocab) and not set(map(type, vocab)) - {int}
                     and 0 <= min(vocab) and max(vocab) <= max_id):
        return token_ids
    seen: dict[bytes, int] = {}
    for token_id, token in vocab.items():  # something is wrong: name the first culprit
        if not isinstance(token_id, int) or not 0 <= token_id <= max_id:
            raise ValueError(f"token ids must be ints from 0 to {max_id}, got {token_id!r}")
        if token in seen:
            raise ValueError(f"vocab has the token {token!r} twice (ids {seen[token]} and {token_id})")
        seen[token] = token_id
    return seen


def as_byte_pairs(merges: Sequence[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The merges as a new list of (bytes, bytes) (bytearrays and memoryviews are copied, bytes kept as they are); a
    `LazyMerges`, read-only, is kept as it is.

    >>> as_byte_pairs([(bytearray(b"a"), b"b")])
    [(b'a', b'b')]
    """
    if type(merges) is DerivedMerges:
        return merges.copy()  # checked when derived, and keeps their ids
    if type(merges) is LazyMerges:
        return merges  # type: ignore[return-value]  # read-only: kept as it is, its pairs made only when read
    pairs = list(merges)
    if {tuple} >= set(map(type, pairs)) and {2} >= set(map(len, pairs)) \
            and {bytes} >= set(map(type, chain.from_iterable(pairs))):
        return pairs  # the usual case, checked in C
    return list(zip(map(bytes, map(itemgetter(0), pairs)), map(bytes, map(itemgetter(1), pairs))))


def merge_table(token_ids: Mapping[bytes, int], merges: Sequence[tuple[bytes, bytes]]) -> tuple[PairRanks, list[int]]:
    """((left id, right id) -> rank, rank -> id of the merged token) of `merges` (byte pairs) over a vocab's
    `token_ids`. Raises MergeTableError for the first merge whose parts or result are not in the vocab."""
    known = merges.known_ids(token_ids) if type(merges) in (DerivedMerges, LazyMerges) else None  # type: ignore[attr-defined]
    if known is not None:
        return _pair_ranks(list(zip(known[0], known[1]))), known[2]
    get = token_ids.get
    lefts, rights = list(map(itemgetter(0), merges)), list(map(itemgetter(1), merges))
    left_ids, right_ids = list(map(get, lefts)), list(map(get, rights))
    merged_ids = list(map(get, map(bytes.__add__, lefts, rights)))
    if None in left_ids or None in right_ids or None in merged_ids:
        for rank, (left, right) in enumerate(merges):
            missing = [token for token in (left, right, left + right) if token not in token_ids]
            if missing:
                raise MergeTableError(rank, f"merge {rank} ({left!r}, {right!r}): {missing[0]!r} is not in the vocab")
    return _pair_ranks(list(zip(left_ids, right_ids))), merged_ids  # type: ignore[arg-type]


def _pair_ranks(pairs: list[tuple[int, int]]) -> PairRanks:
    """pair -> rank, where a pair listed twice keeps its first rank."""
    pair_ranks = dict(zip(pairs, range(len(pairs))))
    if len(pair_ranks) < len(pairs):
        pair_ranks = {}
        for rank, pair in enumerate(pairs):
            pair_ranks.setdefault(pair, rank)
    return pair_ranks  # type: ignore[return-value]


__all__ = ["MergeTableError", "as_byte_pairs", "merge_table", "vocab_index"]
