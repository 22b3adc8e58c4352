"""The merge kernels of `hf_bpe.encode.merge_kernels` against a plain reference merge."""

from __future__ import annotations

import random
from functools import cache

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hf_bpe.encode.merge_kernels import (
    MAX_SCAN_MERGE_LENGTH,
    BatchTables,
    MissingByteError,
    _lookup_ranks,
    merge_batch_packed,
    merge_by_scanning,
    merge_id_batch_arrays,
    merge_ids,
    merge_with_heap,
)
from hf_bpe.formats.gpt2 import load_gpt2
from hf_bpe.pretokenize import pretokenize
from tests import FIXTURES

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
UINT32 = np.dtype("<u4")


def packed(id_lists: list[tuple[int, ...]], dtype: str = "<u4") -> list[bytes]:
    """Lists of ids as `merge_batch_packed` gives them."""
    return [np.array(ids, dtype=dtype).tobytes() for ids in id_lists]


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
    assert merge_batch_packed([word.encode() for word in words], tables, UINT32) == packed(expected)


def test_batch_merge_takes_every_other_occurrence_of_a_repeated_pair() -> None:
    byte_ids = {97: 0, 98: 1}
    pair_ranks, merged_ids = {(0, 0): 0, (2, 2): 1}, [2, 3]
    tables = BatchTables(byte_ids, pair_ranks, merged_ids)
    assert tables.monotone
    words = [b"a" * length for length in range(12)] + [b"baaab"]
    assert merge_batch_packed(words, tables, UINT32) == packed([
        tuple(reference_merge([byte_ids[byte] for byte in word], pair_ranks, merged_ids)) for word in words])


def test_batch_merge_of_large_ids() -> None:
    big = 10**6
    tables = BatchTables({97: big, 98: big + 1}, {(big, big + 1): 0}, [big + 2])
    assert merge_batch_packed([b"ab", b"ba", b"ab"], tables, UINT32) == packed([(big + 2,), (big + 1, big), (big + 2,)])


def test_batch_merge_refuses_a_byte_without_a_token() -> None:
    tables = BatchTables({97: 0}, {}, [])
    with pytest.raises(MissingByteError):
        merge_batch_packed([b"a", b"b"], tables, UINT32)


def test_long_words_use_the_heap_and_finish_fast() -> None:
    pair_ranks, merged_ids = {(0, 0): 0, (1, 1): 1, (2, 2): 2}, [1, 2, 3]
    ids = [0] * 200_001
    assert len(ids) > MAX_SCAN_MERGE_LENGTH
    result = merge_ids(list(ids), pair_ranks, merged_ids)
    assert result == [3] * 25_000 + [0]
    assert merge_ids([0] * 101, pair_ranks, merged_ids) == reference_merge([0] * 101, pair_ranks, merged_ids)


def plain_monotone(pair_ranks: dict[tuple[int, int], int], merged_ids: list[int]) -> bool:
    """Every merge that uses a token ranks after every merge that makes it."""
    return all(rank < other for (left, right), other in pair_ranks.items()
               for rank, merged in enumerate(merged_ids) if merged in (left, right))


@FAST
@given(random_merges())
def test_monotone_flag_and_pair_lookup_equal_plain_definitions(merges: tuple[dict[tuple[int, int], int], list[int]]
                                                                ) -> None:
    pair_ranks, merged_ids = merges
    tables = BatchTables({byte: byte for byte in range(8)}, pair_ranks, merged_ids)
    assert tables.monotone == plain_monotone(pair_ranks, merged_ids)
    # Every pair over the ids and the separator, exhaustively.
    everything = np.arange(tables.separator + 1, dtype=tables.dtype)
    left, right = np.repeat(everything, everything.size), np.tile(everything, everything.size)
    expected = [pair_ranks.get(pair, tables.no_rank) for pair in zip(left.tolist(), right.tolist())]
    assert _lookup_ranks(left, right, tables).tolist() == expected


def test_pair_lookup_probes_past_colliding_keys() -> None:
    """Many keys: long probe runs happen, and every pair of the first 300 ids is looked up right."""
    rng = random.Random(3)
    pair_ranks: dict[tuple[int, int], int] = {}
    while len(pair_ranks) < 20_000:
        pair_ranks.setdefault((rng.randrange(300), rng.randrange(300)), len(pair_ranks))
    tables = BatchTables({byte: byte for byte in range(256)}, pair_ranks, [299] * len(pair_ranks))
    ids = np.arange(300, dtype=tables.dtype)
    left, right = np.repeat(ids, ids.size), np.tile(ids, ids.size)
    expected = [pair_ranks.get(pair, tables.no_rank) for pair in zip(left.tolist(), right.tolist())]
    assert _lookup_ranks(left, right, tables).tolist() == expected


@cache
def gpt2_tables() -> tuple[dict[int, int], dict[tuple[int, int], int], list[int]]:
    """byte ids, pair ranks and merged ids of the GPT-2 fixture, as the encoder builds them."""
    vocab, merges = load_gpt2(FIXTURES / "gpt2_vocab.json", FIXTURES / "gpt2_merges.txt")
    token_ids = {token: token_id for token_id, token in vocab.items()}
    pair_ranks: dict[tuple[int, int], int] = {}
    for rank, (left, right) in enumerate(merges):
        pair_ranks.setdefault((token_ids[left], token_ids[right]), rank)
    return ({byte: token_ids[bytes([byte])] for byte in range(256)}, pair_ranks,
            [token_ids[left + right] for left, right in merges])


def gpt2_reference(words: list[bytes]) -> list[tuple[int, ...]]:
    byte_ids, pair_ranks, merged_ids = gpt2_tables()
    return [tuple(reference_merge([byte_ids[byte] for byte in word], pair_ranks, merged_ids)) for word in words]


def test_gpt2_merges_are_monotone_and_batch_merge_equals_the_reference() -> None:
    """Pre-tokens of real text, with long ones, in batches of several sizes (the words finish at many steps, so
    finished words both stay in the arrays and leave them)."""
    tables = BatchTables(*gpt2_tables())
    assert tables.monotone
    text = "".join((FIXTURES / name).read_text(encoding="utf-8") for name in ("corpus.en", "german.txt"))
    words = list(map(str.encode, dict.fromkeys(pretokenize(text))))
    words += [b"x" * 300, "ñ".encode() * 70, b"-" * 257, b"\x00\xff" * 40, bytes(range(256))]
    expected = gpt2_reference(words)
    for size in (1, 7, 256, 4096):
        assert [ids for start in range(0, len(words), size)
                for ids in merge_batch_packed(words[start:start + size], tables, UINT32)] == packed(expected)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.binary(max_size=12), st.binary(min_size=40, max_size=300),
                          st.builds(lambda byte, count: byte * count, st.sampled_from([b"a", b"=", b" ", b"\xe3"]),
                                    st.integers(0, 200))), max_size=60))
def test_gpt2_batch_merge_of_random_bytes_equals_the_reference(words: list[bytes]) -> None:
    """Random bytes, runs of one byte, and very long words mixed with short and empty ones."""
    tables = BatchTables(*gpt2_tables())
    expected = gpt2_reference(words)
    assert merge_batch_packed(words, tables, UINT32) == packed(expected)


@FAST
@given(random_merges(), st.lists(st.lists(st.integers(0, 7), max_size=60), max_size=30))
def test_batch_merge_with_arbitrary_merges_equals_the_reference(merges: tuple[dict[tuple[int, int], int], list[int]],
                                                                words: list[list[int]]) -> None:
    """Merged ids drawn among the byte ids: cycles, repeated pairs, non-monotone and unreachable merges."""
    pair_ranks, merged_ids = merges
    byte_ids = {byte: byte for byte in range(8)}
    expected = [tuple(reference_merge(word, pair_ranks, merged_ids)) for word in words]
    tables = BatchTables(byte_ids, pair_ranks, merged_ids)
    assert merge_batch_packed([bytes(word) for word in words], tables, UINT32) == packed(expected)
    assert merge_batch_packed([bytes(word) for word in words], tables, np.dtype("<u2")) == packed(expected, "<u2")


@FAST
@given(random_merges(), st.lists(st.lists(st.integers(0, 7), min_size=1, max_size=60), max_size=30))
def test_batch_merge_of_ids_equals_the_reference(merges: tuple[dict[tuple[int, int], int], list[int]],
                                                 words: list[list[int]]) -> None:
    """Words given as ids: the same as the reference merge, word by word. The tables know of id 7 (so that every
    id is below their separator) and of no other byte."""
    pair_ranks, merged_ids = merges
    expected = [reference_merge(word, pair_ranks, merged_ids) for word in words]
    tables = BatchTables({0: 7}, pair_ranks, merged_ids)
    ids, sizes = merge_id_batch_arrays(np.array([token for word in words for token in word], dtype=np.uint16),
                                       np.array([len(word) for word in words]), tables, UINT32)
    assert ids.dtype == UINT32 and sizes.tolist() == [len(word) for word in expected]
    assert ids.tolist() == [token for word in expected for token in word]


def test_batch_merge_of_ids_refuses_an_id_the_tables_cannot_tell_from_a_separator() -> None:
    tables = BatchTables({}, {(1, 2): 0}, [3])
    assert merge_id_batch_arrays(np.array([1, 2, 2]), np.array([3]), tables, UINT32)[0].tolist() == [3, 2]
    with pytest.raises(ValueError, match="below 4"):
        merge_id_batch_arrays(np.array([1, 4]), np.array([2]), tables, UINT32)


def test_batch_merge_of_no_words_and_of_empty_words() -> None:
    tables = BatchTables({97: 0}, {(0, 0): 0}, [1])
    assert merge_batch_packed([], tables, UINT32) == []
    assert merge_batch_packed([b"", b"aaa", b""], tables, UINT32) == packed([(), (1, 0), ()])
    assert merge_batch_packed([b"", b"aaa", b""], tables, UINT32) == [b"", b"\1\0\0\0\0\0\0\0", b""]


@st.composite
def shared_rank_tables(draw: st.DrawFn) -> tuple[dict[int, int], dict[tuple[int, int], int], list[int], list[bytes]]:
    """tiktoken's own table: every split of every token into two tokens, its rank the merged token's, so different
    pairs share one rank (for "aba", (ab, a) and (a, ba)); the kernels must take the leftmost, as tiktoken does."""
    rng = draw(st.randoms(use_true_random=False))
    tokens = [b"a", b"b"] + sorted({bytes(rng.choice(b"ab") for _ in range(rng.randint(2, 6)))
                                    for _ in range(draw(st.integers(0, 25)))})
    rng.shuffle(tokens)
    ids = {token: token_id for token_id, token in enumerate(tokens)}
    pair_ranks = {(ids[token[:cut]], ids[token[cut:]]): ids[token] for token in tokens
                  for cut in range(1, len(token)) if token[:cut] in ids and token[cut:] in ids}
    return {97: ids[b"a"], 98: ids[b"b"]}, pair_ranks, list(range(len(tokens))), tokens


@FAST
@given(shared_rank_tables(), st.lists(st.text("ab", max_size=40).map(str.encode), max_size=30))
def test_kernels_take_the_leftmost_of_different_pairs_of_one_rank(
        table: tuple[dict[int, int], dict[tuple[int, int], int], list[int], list[bytes]], words: list[bytes]) -> None:
    from hf_bpe.encode.long_words import merge_long_word

    byte_ids, pair_ranks, merged_ids, tokens = table
    tables = BatchTables(byte_ids, pair_ranks, merged_ids)
    expected = [tuple(reference_merge([byte_ids[byte] for byte in word], pair_ranks, merged_ids)) for word in words]
    for word, ids in zip(words, expected):
        assert tuple(merge_by_scanning([byte_ids[byte] for byte in word], pair_ranks, merged_ids)) == ids
        assert tuple(merge_with_heap([byte_ids[byte] for byte in word], pair_ranks, merged_ids)) == ids
        if tables.monotone:
            assert tuple(merge_long_word(word, tables, band=2, slice_size=3).tolist()) == ids
    assert merge_batch_packed(words, tables, UINT32) == packed(expected)


def test_the_left_pair_of_one_rank_goes_first() -> None:
    # Parts ab, a, ba (ids 2, 0, 3) with the token aba (id 4): (ab, a) and (a, ba) both make it; the left one goes.
    pair_ranks = {(0, 1): 2, (1, 0): 3, (2, 0): 4, (0, 3): 4}
    assert reference_merge([2, 0, 3], pair_ranks, [0, 1, 2, 3, 4]) == [4, 3] != [2, 4]
    for kernel in (merge_by_scanning, merge_with_heap):
        assert kernel([2, 0, 3], pair_ranks, [0, 1, 2, 3, 4]) == [4, 3]
