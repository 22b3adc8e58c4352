"""Baselines from a tiktoken rank file (`cl100k=PATH`, `o200k=PATH`), encoded by tiktoken itself: `TiktokenEngine`.

A rank file is tiktoken's format, so tiktoken encodes it (the house rule for other models' tokenizers): hf_bpe reads
the file (`hf_bpe.formats.tiktoken_files.read_tiktoken_ranks`, which names the line of a fault and reads every file
tiktoken reads, to the same ranks) and hands the ranks, tiktoken's pattern and special tokens to
`tiktoken.Encoding`. Special tokens in the text count as one token each, as hf_bpe's encoder counts them. tiktoken is
not a dependency of hf_bpe: without it, naming such a baseline is a one-line InputError.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from hf_bpe.common.errors import InputError
from hf_bpe.evaluation.token_counts import COUNT_DTYPE
from hf_bpe.formats.tiktoken_files import read_tiktoken_ranks
from hf_bpe.pretokenize import PATTERNS

ENGINE = "tiktoken"


def require_tiktoken() -> Any:
    """The tiktoken module, or an InputError saying how to install it."""
    try:
        import tiktoken
    except ImportError:
        raise InputError("tiktoken file baselines (cl100k=PATH, o200k=PATH) are encoded by tiktoken, which is not "
                         "installed: pip install tiktoken") from None
    return tiktoken


class TiktokenEngine:
    """A rank file encoded by `tiktoken.Encoding`, with what `hf_bpe.evaluation` asks of a tokenizer: `vocab` (id ->
    bytes), `special_tokens`, `token_to_id`, `id_to_token`, `encode`, `encode_to_numpy` and `count_tokens`."""

    engine = ENGINE
    pattern = None  # no hf_bpe pattern: tiktoken encodes each file whole (`count_tokens`)

    def __init__(self, name: str, path: Path, special_tokens: Mapping[str, int]) -> None:
        tiktoken = require_tiktoken()
        self.name, self.path, self._special_ids = name, path, dict(special_tokens)
        ranks = read_tiktoken_ranks(path)
        self._encoding = tiktoken.Encoding(name, pat_str=PATTERNS[name], mergeable_ranks=ranks,
                                           special_tokens=self._special_ids)
        self.special_tokens = sorted(self._special_ids, key=self._special_ids.__getitem__)
        self.vocab: dict[int, bytes] = dict(zip(ranks.values(), ranks))
        for special in self.special_tokens:
            self.vocab.setdefault(self._special_ids[special], special.encode("utf-8"))
        self._ids = {token: token_id for token_id, token in self.vocab.items()}
        self.vocab_size = len(self.vocab)

    def token_to_id(self, token: bytes | str) -> int | None:
        return self._ids.get(token.encode("utf-8") if isinstance(token, str) else token)

    def id_to_token(self, token_id: int) -> bytes:
        return self.vocab[token_id]

    def encode(self, text: str) -> list[int]:
        return self._encoding.encode(text, allowed_special="all")

    def encode_to_numpy(self, text: str) -> np.ndarray:
        return np.asarray(self._encoding.encode_to_numpy(text, allowed_special="all"), dtype=np.uint32)

    def count_tokens(self, text: str) -> np.ndarray:
        """How often each id occurs in tiktoken's encoding of `text`, by id."""
        ids = self.encode_to_numpy(text)
        return np.bincount(ids, minlength=max(self.vocab) + 1).astype(COUNT_DTYPE)

    def __reduce__(self) -> tuple[Any, tuple[str, Path, dict[str, int]]]:
        return TiktokenEngine, (self.name, self.path, self._special_ids)

    def __repr__(self) -> str:
        return f"TiktokenEngine({self.name!r}, {str(self.path)!r})"


__all__ = ["ENGINE", "TiktokenEngine", "require_tiktoken"]
