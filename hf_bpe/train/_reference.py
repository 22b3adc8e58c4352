"""A slow, obviously correct BPE trainer: the definition that `hf_bpe.train.merge_loop` must match exactly.

Every step counts all adjacent pairs from scratch, takes the max by (count, (left bytes, right bytes)), and merges it
left to right in every word. Only for tests on small inputs.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from hf_bpe.pretokenize import pretokenize


def reference_counts(texts: Iterable[str], special_tokens: Sequence[str] = ()) -> Counter[bytes]:
    """Pre-token counts with the plain GPT-2 regex, each text split into documents at the special tokens.

    A special token splits where it occurs leftmost, the longest one first when several start at the same place.
    """
    longest_first = sorted(special_tokens, key=lambda token: (-len(token), token))
    special_regex = re.compile("|".join(map(re.escape, longest_first))) if special_tokens else None
    counts: Counter[bytes] = Counter()
    for text in texts:
        for document in special_regex.split(text) if special_regex else [text]:
            counts.update(token.encode("utf-8") for token in pretokenize(document))
    return counts


def merge_word(word: tuple[bytes, ...], pair: tuple[bytes, bytes]) -> tuple[bytes, ...]:
    """Replace each occurrence of `pair` in `word`, scanning left to right.

    >>> merge_word((b"a",) * 5, (b"a", b"a"))
    (b'aa', b'aa', b'a')
    """
    merged: list[bytes] = []
    position = 0
    while position < len(word):
        if position + 1 < len(word) and (word[position], word[position + 1]) == pair:
            merged.append(pair[0] + pair[1])
            position += 2
        else:
            merged.append(word[position])
            position += 1
    return tuple(merged)


def reference_train_from_counts(counts: Mapping[bytes, int], vocab_size: int, special_tokens: Sequence[str] = ()
                                ) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Train by brute force: recount every pair before each merge."""
    vocab = {byte: bytes([byte]) for byte in range(256)}
    merges: list[tuple[bytes, bytes]] = []
    words = {tuple(bytes([byte]) for byte in token): count for token, count in counts.items()}
    while len(vocab) + len(special_tokens) < vocab_size:
        pair_counts: Counter[tuple[bytes, bytes]] = Counter()
        for word, count in words.items():
            for pair in zip(word, word[1:]):
                pair_counts[pair] += count
        if not pair_counts:
            break
        best = max(pair_counts, key=lambda pair: (pair_counts[pair], pair))
        merges.append(best)
        vocab[len(vocab)] = best[0] + best[1]
        merged_words: Counter[tuple[bytes, ...]] = Counter()
        for word, count in words.items():
            merged_words[merge_word(word, best)] += count
        words = dict(merged_words)
    for token in special_tokens:
        vocab[len(vocab)] = token.encode("utf-8")
    return vocab, merges


def reference_train(texts: Iterable[str], vocab_size: int, special_tokens: Sequence[str] = ()
                    ) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Train by brute force on texts (each a separate document, further split at the special tokens)."""
    return reference_train_from_counts(reference_counts(texts, special_tokens), vocab_size, special_tokens)
