"""A `tiktoken.Encoding` with the same vocab and ids as an hf_bpe tokenizer, for cross-checks and benchmarks.

tiktoken needs no merges list: it repeatedly merges the adjacent pair whose concatenation has the lowest rank. Using
the vocab ids as ranks therefore reproduces BPE exactly when merged tokens are numbered in merge order, as in GPT-2's
files and every vocab hf_bpe trains; `tiktoken_encoding` checks that and refuses other vocabs. tiktoken is a test
dependency, imported only when called.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from hf_bpe.pretokenize import resolve_pattern

if TYPE_CHECKING:
    import tiktoken


def tiktoken_encoding(vocab: Mapping[int, bytes], merges: Sequence[tuple[bytes, bytes]],
                      special_tokens: Sequence[str] | Mapping[str, int] = (), name: str = "hf_bpe", *,
                      pattern: str | None = None
                      ) -> tiktoken.Encoding:
    """Build the tiktoken equivalent of `Tokenizer(vocab, merges, special_tokens, pattern=pattern)`: same pattern
    (a preset name or regex text; None: GPT-2's), same ids.

    A custom pattern that leaves some characters unmatched does not encode alike: tiktoken drops them, hf_bpe and
    `tokenizers` keep them as pre-tokens of their own (every preset matches every character).

    Raises ValueError when merged tokens are not numbered in merge order (tiktoken could not follow the merges).

    >>> vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"<|endoftext|>"}
    >>> tiktoken_encoding(vocab, [(b"a", b"b")], ["<|endoftext|>"]).encode("abc<|endoftext|>", allowed_special="all")
    [256, 99, 257]
    """
    import tiktoken

    ids = {token: token_id for token_id, token in vocab.items()}
    merged_ids = list(dict.fromkeys(ids[left + right] for left, right in merges))
    if any(later <= earlier for earlier, later in zip(merged_ids, merged_ids[1:])):
        raise ValueError("merged tokens are not numbered in merge order, so tiktoken cannot use the ids as ranks")
    specials = (dict(special_tokens) if isinstance(special_tokens, Mapping)  # tiktoken's table, ids maybe shared
                else {token: ids[token.encode("utf-8")] for token in special_tokens})
    special_ids = set(specials.values())
    ranks = {token: token_id for token_id, token in vocab.items() if token_id not in special_ids}
    return tiktoken.Encoding(name=name, pat_str=resolve_pattern(pattern), mergeable_ranks=ranks,
                             special_tokens=specials)
