"""The compact pickled form of a BPE model (hf_bpe.hf.model_state)."""

from __future__ import annotations

import pickle

from hf_bpe.encode.tokenizer import Tokenizer
from hf_bpe.formats.gpt2 import load_gpt2, token_to_str
from hf_bpe.hf.model_state import ModelTables, compact_model, expand_model
from tests import FIXTURES


def test_gpt2_round_trips_and_is_much_smaller_than_its_tables() -> None:
    vocab, merges = load_gpt2(FIXTURES / "gpt2_vocab.json", FIXTURES / "gpt2_merges.txt")
    state = compact_model(vocab, merges)
    assert state[0] is not None  # the compact form, not the fallback
    assert expand_model(state) == (dict(sorted(vocab.items())), merges)
    assert len(pickle.dumps(state)) * 4 < len(pickle.dumps((vocab, merges)))


def test_a_vocab_the_merges_do_not_rebuild_falls_back_to_storing_every_token() -> None:
    vocab = {0: b"a", 1: b"b", 2: b"ab", 3: b"abb"}
    merges = [(b"ab", b"b"), (b"a", b"b")]  # the first merge's part is made only by the second
    state = compact_model(vocab, merges)
    assert state[0] is None
    assert expand_model(state) == (vocab, merges)


def test_tables_pickle_to_the_compact_state_and_back() -> None:
    vocab = {i: bytes([i]) for i in range(256)} | {256: b" t", 257: b"<|endoftext|>"}
    tables = ModelTables({token_to_str(token) if i != 257 else "<|endoftext|>": i for i, token in vocab.items()},
                         Tokenizer(vocab, [(b" ", b"t")]), [(258, "<new>")])
    copy = pickle.loads(pickle.dumps(tables))
    assert copy.encoder == tables.encoder and copy.merges == tables.merges and copy.base_vocab == tables.base_vocab
    assert copy.with_added.encode("a t<new>") == tables.with_added.encode("a t<new>") == [97, 256, 258]
