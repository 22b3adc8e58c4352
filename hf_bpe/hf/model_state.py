"""A compact, picklable form of a byte-level BPE model (vocab + merges), for `HFBPETokenizer`'s pickles.

`datasets` hashes a tokenizer by pickling it on every `map` call, and worker processes receive it pickled, so the
pickle's size is paid often. Most tokens are the result of a merge, so the vocab need not be stored: each merge is
stored as three ids (left, right, merged), compressed, and only the other tokens (bytes, special tokens) as bytes.

>>> vocab = {0: b"a", 1: b"b", 2: b"ab", 3: b"<|endoftext|>"}
>>> state = compact_model(vocab, [(b"a", b"b")])
>>> expand_model(state) == (vocab, [(b"a", b"b")])
True
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np


def compact_model(vocab: dict[int, bytes], merges: Sequence[tuple[bytes, bytes]]) -> tuple[Any, ...]:
    """(compressed merge id triples, their dtype, the tokens no merge makes); `expand_model` inverts it.

    Falls back to storing every token when the vocab cannot be rebuilt from the merges (a merge whose parts only a
    later merge makes).
    """
    token_ids = {token: token_id for token_id, token in vocab.items()}
    dtype = np.uint16 if max(vocab, default=0) < 1 << 16 else np.uint32
    try:
        triples = np.array([(token_ids[left], token_ids[right], token_ids[left + right]) for left, right in merges],
                           dtype=dtype).reshape(-1, 3)
    except KeyError:
        return None, None, dict(vocab), list(merges)
    merged = set(triples[:, 2].tolist())
    others = {token_id: token for token_id, token in vocab.items() if token_id not in merged}
    state = (zlib.compress(triples.tobytes(), 1), np.dtype(dtype).str, others, None)
    try:
        if expand_model(state)[0] == vocab:
            return state
    except KeyError:
        pass
    return None, None, dict(vocab), list(merges)


def expand_model(state: tuple[Any, ...]) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """The (vocab, merges) of a `compact_model` state."""
    packed, dtype, others, merges = state
    if packed is None:
        return dict(others), list(merges)
    triples = np.frombuffer(zlib.decompress(packed), dtype=np.dtype(dtype)).reshape(-1, 3).tolist()
    vocab = dict(others)
    merge_list = []
    for left, right, merged in triples:
        left_token, right_token = vocab[left], vocab[right]
        vocab[merged] = left_token + right_token
        merge_list.append((left_token, right_token))
    return dict(sorted(vocab.items())), merge_list




class ModelTables:
    """The lookup tables of a tokenizer's model, pickled as `compact_model`'s state.

    `HFBPETokenizer` keeps every table built from vocab and merges here, so its `__dict__` (which `datasets` pickles
    to fingerprint a tokenizer on every `map` call) holds one small object instead of four vocab-sized tables.
    """

    def __init__(self, encoder: dict[str, int], ordinary: Any, added_tokens: Sequence[tuple[int, str]] = ()) -> None:
        self.encoder = encoder
        self.decoder = {token_id: token for token, token_id in encoder.items()}
        self.ordinary = ordinary
        self.base_vocab: dict[int, bytes] = dict(ordinary.vocab)
        self.merges: list[tuple[bytes, bytes]] = list(ordinary.merges)
        self._state: tuple[Any, ...] | None = None
        self._token_lengths: np.ndarray | None = None
        self.set_added_tokens(added_tokens)

    @property
    def token_lengths(self) -> np.ndarray:
        """The byte length of each base-vocabulary token, indexed by id (for offsets); built on first use."""
        if self._token_lengths is None:
            lengths = np.zeros(max(self.base_vocab, default=-1) + 1, dtype=np.int64)
            for token_id, token in self.base_vocab.items():
                lengths[token_id] = len(token)
            self._token_lengths = lengths
        return self._token_lengths

    def set_added_tokens(self, added_tokens: Sequence[tuple[int, str]]) -> None:
        """Rebuild the encoder that also matches the added tokens (id, text), longest first."""
        self.added_tokens = sorted(added_tokens)
        if not self.added_tokens:
            self.with_added = self.ordinary
            return
        vocab = dict(self.base_vocab)
        for token_id, content in self.added_tokens:
            vocab[token_id] = content.encode("utf-8")
        self.with_added = type(self.ordinary)(vocab, self.merges, [content for _, content in self.added_tokens],
                                              pattern=self.ordinary.pattern, ignore_merges=self.ordinary.ignore_merges)

    def __reduce__(self) -> tuple[Any, ...]:
        if self._state is None:
            from hf_bpe.formats.gpt2 import token_to_str

            literal = {token_id: token for token, token_id in self.encoder.items()
                       if token != token_to_str(self.base_vocab[token_id])}
            self._state = (compact_model(self.base_vocab, self.merges), literal)
        from hf_bpe.pretokenize import GPT2_PATTERN

        pattern = self.ordinary.pattern  # GPT-2's is left out: pickles of GPT-2 tokenizers stay as they were
        ignore_merges = self.ordinary.ignore_merges
        return _restore_tables, (*self._state, type(self.ordinary), self.added_tokens,
                                 *(() if pattern == GPT2_PATTERN and not ignore_merges else (pattern,)),
                                 *((True,) if ignore_merges else ()))


def _restore_tables(model: tuple[Any, ...], literal: dict[int, str], tokenizer_class: Any,
                    added_tokens: Sequence[tuple[int, str]], pattern: str | None = None,
                    ignore_merges: bool = False) -> ModelTables:
    from hf_bpe.formats.gpt2 import token_to_str

    base_vocab, merges = expand_model(model)
    encoder = {literal.get(token_id) or token_to_str(token): token_id for token_id, token in base_vocab.items()}
    tables = ModelTables(encoder, tokenizer_class(base_vocab, merges, pattern=pattern, ignore_merges=ignore_merges),
                         added_tokens)
    tables._state = (model, literal)
    return tables


__all__ = ["ModelTables", "compact_model", "expand_model"]
