"""The batch merge's ids as arrays (`merge_batch_arrays`, `Tokenizer.merge_pretoken_arrays`, what training's start
state for extending a tokenizer is made of) against the packed ids of `merge_batch_packed` and
`Tokenizer.merge_pretoken_bytes`, which tests/encode/test_merge_kernels.py checks against a plain reference."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hf_bpe import Tokenizer
from hf_bpe.encode.cache import ID_DTYPE
from hf_bpe.encode.long_words import LONG_WORD_BYTES
from hf_bpe.encode.merge_kernels import MIN_BATCH_MERGE, BatchTables, merge_batch_arrays, merge_batch_packed
from tests.encode.test_merge_kernels import FAST, UINT32, gpt2_tables, random_merges


@cache
def gpt2_batch_tables() -> BatchTables:
    return BatchTables(*gpt2_tables())


def as_lists(ids: np.ndarray, sizes: np.ndarray) -> list[list[int]]:
    ends = np.cumsum(sizes).tolist()
    return [ids[end - size:end].tolist() for end, size in zip(ends, sizes.tolist())]


def unpacked(packed: list[bytes], dtype: np.dtype = UINT32) -> list[list[int]]:
    return [np.frombuffer(ids, dtype=dtype).tolist() for ids in packed]


@FAST
@given(random_merges(), st.lists(st.lists(st.integers(0, 7), max_size=60), max_size=30))
def test_arrays_are_the_packed_ids_with_arbitrary_merges(merges: tuple[dict[tuple[int, int], int], list[int]],
                                                         words: list[list[int]]) -> None:
    """Non-monotone merges, empty words, words finishing at every step."""
    tables = BatchTables({byte: byte for byte in range(8)}, *merges)
    words_bytes = [bytes(word) for word in words]
    for dtype in (UINT32, np.dtype("<u2")):
        ids, sizes = merge_batch_arrays(words_bytes, tables, dtype)
        assert ids.dtype == dtype and as_lists(ids, sizes) == unpacked(merge_batch_packed(words_bytes, tables,
                                                                                          dtype), dtype)


@FAST
@given(st.lists(st.one_of(st.binary(max_size=12), st.text(max_size=20).map(str.encode),
                          st.builds(lambda byte, count: byte * count, st.sampled_from([b"a", b" ", b"\xe3"]),
                                    st.integers(0, 60))), max_size=200))
def test_gpt2_arrays_are_the_packed_ids(words: list[bytes]) -> None:
    tables = gpt2_batch_tables()
    assert as_lists(*merge_batch_arrays(words, tables, UINT32)) == unpacked(merge_batch_packed(words, tables, UINT32))


@pytest.mark.parametrize("ignore_merges", [False, True])
@pytest.mark.parametrize("case", ["batch", "few", "giant", "missing byte"])
def test_tokenizer_arrays_are_its_packed_ids(ignore_merges: bool, case: str) -> None:
    """Each path of `merge_pretoken_arrays`: the numpy batch, fewer words than a batch, a giant pre-token (the
    long-word kernel), a byte without a token (named as `merge_pretoken_bytes` names it), `ignore_merges`."""
    vocab = {byte: bytes([byte]) for byte in range(256) if case != "missing byte" or byte != 0xFF}
    vocab |= {300: b"ab", 301: b"abc", 302: b"ca"}
    tokenizer = Tokenizer(vocab, [(b"a", b"b"), (b"ab", b"c"), (b"c", b"a")], ignore_merges=ignore_merges)
    words = [bytes([97 + i % 3, 98, 99, 97 + i % 5]) * (1 + i % 4) for i in range(2 * MIN_BATCH_MERGE)]
    words += [b"", b"ca", b"abc"]
    if case == "few":
        words = words[:MIN_BATCH_MERGE - 1]
    elif case == "giant":
        words.append(b"abcab" * (LONG_WORD_BYTES // 4))
    elif case == "missing byte":
        words.append(b"ab\xff")
        with pytest.raises(ValueError, match="byte 0xff has no token"):
            tokenizer.merge_pretoken_bytes(words)
        with pytest.raises(ValueError, match="byte 0xff has no token"):
            tokenizer.merge_pretoken_arrays(words)
        return
    ids, sizes = tokenizer.merge_pretoken_arrays(words)
    assert ids.dtype == ID_DTYPE and len(sizes) == len(words)
    assert as_lists(ids, sizes) == unpacked(tokenizer.merge_pretoken_bytes(words))
