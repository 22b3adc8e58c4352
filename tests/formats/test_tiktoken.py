"""The tiktoken twin of a tokenizer: same ids as hf_bpe, and a clear refusal when ids are not in merge order."""

import pytest

from hf_bpe import Tokenizer
from hf_bpe.formats.tiktoken import tiktoken_encoding
from hf_bpe.train.api import train_bpe_from_counts

TEXT = "the theme of these themes: then, there<|endoftext|>the end"


def test_a_trained_tokenizer_and_its_tiktoken_twin_agree() -> None:
    counts = {b"the": 9, b" theme": 5, b" these": 4, b" then": 3, b" there": 2, b"themes": 2}
    vocab, merges = train_bpe_from_counts(counts, 270, ["<|endoftext|>"])
    ids = Tokenizer(vocab, merges, ["<|endoftext|>"]).encode(TEXT)
    assert tiktoken_encoding(vocab, merges, ["<|endoftext|>"]).encode(TEXT, allowed_special="all") == ids
    assert len(ids) < len(TEXT.encode()) - 10  # the merges were used


def test_ids_out_of_merge_order_are_refused() -> None:
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"abc", 257: b"ab"}
    with pytest.raises(ValueError, match="not numbered in merge order"):
        tiktoken_encoding(vocab, [(b"a", b"b"), (b"ab", b"c")])
