"""`tiktoken.Encoding` on an `hf_bpe.Tokenizer`: the same constructor and methods, each a call of hf_bpe's.

The tokenizer is what `Tokenizer.from_tiktoken` makes of a rank file, made from the ranks themselves: ids are the
ranks, merges derived from them, a pre-token that is a token is that token (`ignore_merges`), and the special tokens
at their ids. Where tiktoken's API names differ from hf_bpe's, the arguments are passed on as they are meant: its
default `allowed_special=set()` and `disallowed_special="all"`, and a `KeyError` for an unknown token.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Literal

import numpy as np

from hf_bpe import Tokenizer
from hf_bpe.formats.tiktoken_merges import derive_lazy_merges

Special = Literal["all"] | Collection[str]


class Encoding:
    def __init__(self, name: str, *, pat_str: str, mergeable_ranks: dict[bytes, int], special_tokens: dict[str, int],
                 explicit_n_vocab: int | None = None) -> None:
        self.name = name
        self._pat_str = pat_str
        self._mergeable_ranks = mergeable_ranks
        self._special_tokens = special_tokens
        vocab = {rank: token for token, rank in mergeable_ranks.items()}
        self._tokenizer = Tokenizer(vocab, derive_lazy_merges(mergeable_ranks), special_tokens, pattern=pat_str,
                                    ignore_merges=True)
        self.max_token_value = max(self._tokenizer.vocab)
        if explicit_n_vocab:
            assert self._tokenizer.vocab_size == explicit_n_vocab
            assert self.max_token_value == explicit_n_vocab - 1

    def __repr__(self) -> str:
        return f"<Encoding {self.name!r} on {self._tokenizer!r}>"

    # ----------------------------------------------------------------------------------------------------- encoding

    def encode_ordinary(self, text: str) -> list[int]:
        return self._tokenizer.encode(text, allowed_special=set(), disallowed_special=())

    def encode(self, text: str, *, allowed_special: Special = frozenset(), disallowed_special: Special = "all"
               ) -> list[int]:
        return self._tokenizer.encode(text, allowed_special=allowed_special, disallowed_special=disallowed_special)

    def encode_to_numpy(self, text: str, *, allowed_special: Special = frozenset(), disallowed_special: Special = "all"
                        ) -> np.ndarray:
        return self._tokenizer.encode_to_numpy(text, allowed_special=allowed_special,
                                               disallowed_special=disallowed_special)

    def encode_ordinary_batch(self, text: list[str], *, num_threads: int = 8) -> list[list[int]]:
        return self._tokenizer.encode_batch(text, 1, allowed_special=set(), disallowed_special=())

    def encode_batch(self, text: list[str], *, num_threads: int = 8, allowed_special: Special = frozenset(),
                     disallowed_special: Special = "all") -> list[list[int]]:
        return self._tokenizer.encode_batch(text, 1, allowed_special=allowed_special,
                                            disallowed_special=disallowed_special)

    def encode_single_token(self, text_or_bytes: str | bytes) -> int:
        token = text_or_bytes.encode("utf-8") if isinstance(text_or_bytes, str) else text_or_bytes
        token_id = self._tokenizer.token_to_id(token)
        if token_id is None:
            raise KeyError(text_or_bytes)
        return token_id

    def _encode_bytes(self, text: bytes) -> list[int]:
        return self._tokenizer.encode_bytes(text)

    # ----------------------------------------------------------------------------------------------------- decoding

    def decode_single_token_bytes(self, token: int) -> bytes:
        try:
            return self._tokenizer.id_to_token(token)
        except ValueError:
            raise KeyError(token) from None

    def decode_tokens_bytes(self, tokens: Sequence[int]) -> list[bytes]:
        return [self.decode_single_token_bytes(token) for token in tokens]

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        return b"".join(self.decode_tokens_bytes(tokens))

    def decode(self, tokens: Sequence[int], errors: str = "replace") -> str:
        if errors == "replace":
            return self._tokenizer.decode(tokens)
        return self.decode_bytes(tokens).decode("utf-8", errors=errors)

    def decode_with_offsets(self, tokens: Sequence[int]) -> tuple[str, list[int]]:
        return self._tokenizer.decode_with_offsets(tokens)

    def decode_batch(self, batch: Sequence[Sequence[int]], *, errors: str = "replace", num_threads: int = 8
                     ) -> list[str]:
        return [self.decode(tokens, errors=errors) for tokens in batch]

    def decode_bytes_batch(self, batch: Sequence[Sequence[int]], *, num_threads: int = 8) -> list[bytes]:
        return [self.decode_bytes(tokens) for tokens in batch]

    # -------------------------------------------------------------------------------------------------- properties

    @property
    def eot_token(self) -> int:
        return self._special_tokens["<|endoftext|>"]

    @property
    def special_tokens_set(self) -> set[str]:
        return set(self._special_tokens)

    def is_special_token(self, token: int) -> bool:
        return token in self._special_tokens.values()

    @property
    def n_vocab(self) -> int:
        return self.max_token_value + 1

    # ---------------------------------------------------------------------------------------------------- pickling

    def __getstate__(self) -> object:
        from . import registry

        # As tiktoken does: an encoding of the registry by its name, any other by its arguments.
        if self is registry.ENCODINGS.get(self.name):
            return self.name
        return {"name": self.name, "pat_str": self._pat_str, "mergeable_ranks": self._mergeable_ranks,
                "special_tokens": self._special_tokens}

    def __setstate__(self, value: object) -> None:
        from . import registry

        if isinstance(value, str):
            self.__dict__ = registry.get_encoding(value).__dict__
            return
        assert isinstance(value, dict)
        self.__init__(**value)  # type: ignore[misc]
