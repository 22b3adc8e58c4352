"""The merge kernels of `hf_bpe.merge` against a plain reference merge."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hf_bpe.merge import (
    MAX_SCAN_MERGE_LENGTH,
    BatchTables,
    MissingByteError,
    merge_batch,
    merge_by_scanning,
    merge_ids,
    merge_with_heap,
)

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def reference_merge(ids: list[int], pair_ranks: dict[tuple[int, int], int], merged_ids: list[int]) -> list[int]:
    """Plain BPE: merge the adjacent pair of lowest rank, the leftmost among equal ranks, until none has a rank."""
    ids = list(ids)
    while True:
        ranks = [pair_ranks.get(pair) for pair in zip(ids, ids[1:])]
        candidates = [(rank, position) for position, rank in enumerate(ranks) if rank is not None]
        if not candidates:
            return ids
        rank, position = min(candidates)
        ids[position:position + 2] = [merged_ids[rank]]


@st.composite
def random_merges(draw: st.DrawFn, alphabet: int = 8) -> tuple[dict[tuple[int, int], int], list[int]]:
    """Random pair ranks over a few ids, merged ids drawn among them: repeated pairs, cycles, unreachable tokens."""
    rng = draw(st.randoms(use_true_random=False))
    pairs = [(left, right) for left in range(alphabet) for right in range(alphabet)]
    rng.shuffle(pairs)
    count = draw(st.integers(0, 30))
    return {pair: rank for rank, pair in enumerate(pairs[:count])}, [rng.randrange(alphabet) for _ in range(count)]


@FAST
@given(random_merges(), st.lists(st.integers(0, 7), max_size=80))
def test_scanning_heap_and_dispatch_equal_the_reference(merges: tuple[dict[tuple[int, int], int], list[int]],
                                                        ids: list[int]) -> None:
    pair_ranks, merged_ids = merges
    expected = reference_merge(ids, pair_ranks, merged_ids)
    assert merge_by_scanning(list(ids), pair_ranks, merged_ids) == expected
    assert merge_with_heap(list(ids), pair_ranks, merged_ids) == expected
    assert merge_ids(list(ids), pair_ranks, merged_ids) == expected


def trained_like_merges(tokens: int, rng: random.Random) -> tuple[dict[int, int], dict[tuple[int, int], int],
                                                                    list[int]]:
    """Merges over bytes "a".."d" where each merge makes a new id (as trained merges do): monotone or not."""
    byte_ids = {byte: byte - 97 for byte in range(97, 101)}
    pair_ranks: dict[tuple[int, int], int] = {}
    merged_ids: list[int] = []
    next_id = 4
    while len(merged_ids) < tokens:
        pair = (rng.randrange(next_id), rng.randrange(next_id))
        if pair in pair_ranks:
            continue
        pair_ranks[pair] = len(merged_ids)
        merged_ids.append(next_id)
        next_id += 1
    return byte_ids, pair_ranks, merged_ids


@FAST
@given(st.integers(0, 40), st.randoms(use_true_random=False),
       st.lists(st.text(alphabet="abcd", max_size=40), max_size=40))
def test_batch_merge_equals_the_reference(tokens: int, rng: random.Random, words: list[str]) -> None:
    byte_ids, pair_ranks, merged_ids = trained_like_merges(tokens, rng)
    if rng.random() < 0.5 and merged_ids:  # a merge that uses a token made by a later merge: not monotone
        pair_ranks[(merged_ids[-1], 0)] = 0
    tables = BatchTables(byte_ids, pair_ranks, merged_ids)
    expected = [tuple(reference_merge([byte_ids[byte] for byte in word.encode()], pair_ranks, merged_ids))
                for word in words]
    assert merge_batch([word.encode() for word in words], tables) == expected


def test_batch_merge_takes_every_other_occurrence_of_a_repeated_pair() -> None:
    byte_ids = {97: 0, 98: 1}
    pair_ranks, merged_ids = {(0, 0): 0, (2, 2): 1}, [2, 3]
    tables = BatchTables(byte_ids, pair_ranks, merged_ids)
    assert tables.monotone
    words = [b"a" * length for length in range(12)] + [b"baaab"]
    assert merge_batch(words, tables) == [
        tuple(reference_merge([byte_ids[byte] for byte in word], pair_ranks, merged_ids)) for word in words]


def test_batch_merge_shares_the_id_objects() -> None:
    big = 10**6  # ints this large are separate objects unless shared on purpose
    tables = BatchTables({97: big, 98: big + 1}, {(big, big + 1): 0}, [big + 2])
    merged = merge_batch([b"ab", b"ba", b"ab"], tables)
    assert merged == [(big + 2,), (big + 1, big), (big + 2,)]
    assert merged[0][0] is merged[2][0] is tables.id_objects[big + 2]


def test_batch_merge_refuses_a_byte_without_a_token() -> None:
    tables = BatchTables({97: 0}, {}, [])
    with pytest.raises(MissingByteError):
        merge_batch([b"a", b"b"], tables)


def test_long_words_use_the_heap_and_finish_fast() -> None:
    pair_ranks, merged_ids = {(0, 0): 0, (1, 1): 1, (2, 2): 2}, [1, 2, 3]
    ids = [0] * 200_001
    assert len(ids) > MAX_SCAN_MERGE_LENGTH
    result = merge_ids(list(ids), pair_ranks, merged_ids)
    assert result == [3] * 25_000 + [0]
    assert merge_ids([0] * 101, pair_ranks, merged_ids) == reference_merge([0] * 101, pair_ranks, merged_ids)
