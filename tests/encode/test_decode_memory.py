"""Memory of decoding many ids and of encoding one giant pre-token (issue 20, case 8), measured with tracemalloc
(numpy's buffers included), and the giant pre-token kernel checked against the plain merge."""

from __future__ import annotations

import random
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hf_bpe.encode.long_words import LONG_WORD_BYTES, merge_long_word
from hf_bpe.encode.merge_kernels import BatchTables, merge_ids, merge_with_heap
from hf_bpe.encode.tokenizer import Tokenizer
from tests import FIXTURES


@pytest.fixture(scope="module")
def gpt2() -> Tokenizer:
    return Tokenizer.from_files(FIXTURES / "gpt2_vocab.json", FIXTURES / "gpt2_merges.txt", ["<|endoftext|>"])


@pytest.fixture(scope="module")
def tables(gpt2: Tokenizer) -> BatchTables:
    return BatchTables(gpt2._byte_ids, gpt2._pair_ranks, gpt2._merged_ids)


def peak_bytes(work: Callable[[], Any]) -> tuple[Any, int]:
    """work()'s result and the peak of memory allocated meanwhile."""
    tracemalloc.start()
    try:
        result = work()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def byte_ids(tokenizer: Tokenizer, word: bytes) -> list[int]:
    return [tokenizer._byte_ids[byte] for byte in word]


# -------------------------------------------------------------------------------------------------------- decode


@pytest.mark.parametrize("form", ["list", "numpy", "iterator"])
def test_decode_holds_the_text_once_not_a_piece_per_id(gpt2: Tokenizer, form: str) -> None:
    text = (FIXTURES / "corpus.en").read_text(encoding="utf-8")
    text = (text.encode("ascii", "ignore").decode() * 8)[:1_000_000]
    ids = gpt2.encode(text)
    given_ids = {"list": ids, "numpy": np.array(ids, dtype=np.uint32), "iterator": iter(ids)}[form]
    decoded, peak = peak_bytes(lambda: gpt2.decode(given_ids))
    assert decoded == text
    # The str (1 byte per ASCII character), a buffer of the text's bytes, which grows by up to an eighth, and one
    # chunk's join: one join of all ids would add about 90 bytes per id (4 bytes of text each here).
    assert peak < 2.5 * len(text) + (1 << 20), (peak / len(ids), len(text) / len(ids))


def test_decode_names_an_unknown_id_in_a_later_chunk(gpt2: Tokenizer) -> None:
    with pytest.raises(ValueError, match="unknown token id 10000000"):
        gpt2.decode([40] * 70_000 + [10_000_000])


# --------------------------------------------------------------------------------------------- giant pre-tokens


@pytest.mark.parametrize("character", ["a", "é"])
def test_a_giant_pre_token_needs_about_16_bytes_per_byte(gpt2: Tokenizer, character: str) -> None:
    text = character * (4_000_000 // len(character.encode()))
    ids, peak = peak_bytes(lambda: gpt2.encode_to_numpy(text))
    # Three int32 arrays over the word's bytes, and slices of fixed size beyond them (the heap kernel's lists took 140
    # bytes per byte).
    assert len(text.encode()) == 4_000_000 and peak < 16.5 * 4_000_000 + (12 << 20), peak / 4_000_000
    assert gpt2.decode(ids) == text  # exactness: test_a_long_word_merges_as_the_heap_kernel_does


@pytest.mark.parametrize("seed, alphabet", [(0, "ab"), (1, "abcdefghijklmnopqrstuvwxyz"), (2, "aaaaab"),
                                            (3, "xyz0123"), (4, "日本語")])
def test_a_long_word_merges_as_the_heap_kernel_does(gpt2: Tokenizer, tables: BatchTables, seed: int,
                                                     alphabet: str) -> None:
    rng = random.Random(seed)
    word = "".join(rng.choices(alphabet, k=(LONG_WORD_BYTES + 4096) // len(alphabet[0].encode()))).encode()
    expected = merge_with_heap(byte_ids(gpt2, word), gpt2._pair_ranks, gpt2._merged_ids)
    assert merge_long_word(word, tables).tolist() == expected
    assert merge_long_word(word, tables, band=97, slice_size=1000).tolist() == expected
    assert gpt2.encode_to_numpy(word.decode()).tolist() == expected  # the tokenizer sends it to this kernel


@settings(max_examples=300, deadline=None)
@given(word=st.text(alphabet="abé \n0", max_size=400).map(str.encode), band=st.integers(1, 64),
       slice_size=st.integers(1, 64))
@example(word=b"xxxxxxyy", band=1 << 16, slice_size=1 << 18)  # a pair between two merges of one step comes twice
def test_the_long_word_kernel_equals_the_plain_merge(gpt2: Tokenizer, tables: BatchTables, word: bytes, band: int,
                                                      slice_size: int) -> None:
    expected = merge_ids(byte_ids(gpt2, word), gpt2._pair_ranks, gpt2._merged_ids)
    assert merge_long_word(word, tables, band=band, slice_size=slice_size).tolist() == expected


def test_merges_that_are_not_monotone_keep_the_heap_kernel() -> None:
    # "ab" is made by merge 1 but used by merge 0: merging lowest rank first is not one rank at a time.
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"abc", 257: b"ab"}
    tokenizer = Tokenizer(vocab, [(b"ab", b"c"), (b"a", b"b")])
    assert not tokenizer._tables().monotone
    with pytest.raises(ValueError, match="monotone"):
        merge_long_word(b"abc", tokenizer._tables())
    text = "abc" * (LONG_WORD_BYTES // 3 + 10)
    assert tokenizer.encode(text) == merge_ids(byte_ids(tokenizer, text.encode()), tokenizer._pair_ranks,
                                               tokenizer._merged_ids)
