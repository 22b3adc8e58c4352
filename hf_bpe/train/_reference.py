"""A slow, obviously correct BPE trainer: the definition that `hf_bpe.train.merge_loop` must match exactly.

Every step counts all adjacent pairs from scratch, takes the max by (count, (left bytes, right bytes)), and merges it
left to right in every word. Only for tests on small inputs.

Pre-tokens: GPT-2's with hf_bpe's pinned pattern, as always; any other pattern (`pattern=`, a preset name or regex
text) runs as plain `regex` module text, independent of hf_bpe's own pattern machinery. The `regex` module has its
own Unicode tables, so the tests keep to characters on which those agree with the pinned ones.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import regex

from hf_bpe.pretokenize import GPT2_PATTERN, pretokenize, resolve_pattern


def reference_pretokenize(text: str, pattern: str | None = None) -> list[str]:
    r"""The pre-tokens of a document: GPT-2's (None), or the matches of `pattern` run by the `regex` module, with the
    text between matches kept as pre-tokens of its own (as `tokenizers`' Split pre-tokenizer keeps it).

    >>> reference_pretokenize("ab12345", "cl100k"), reference_pretokenize("ab!", r"\p{L}")
    (['ab', '123', '45'], ['a', 'b', '!'])
    """
    regex_text = resolve_pattern(pattern)
    if regex_text == GPT2_PATTERN:
        return pretokenize(text)
    pretokens, position = [], 0
    for match in regex.finditer(_end_of_text_anchors(regex_text), text):
        if match.start() > position:
            pretokens.append(text[position:match.start()])
        pretokens.append(match.group())
        position = match.end()
    if position < len(text):
        pretokens.append(text[position:])
    return pretokens


def _end_of_text_anchors(pattern: str) -> str:
    r"""The pattern with each `$` outside a class written `\Z`: tiktoken's `$` is the end of the text, the `regex`
    module's also matches before a newline that ends it.

    >>> _end_of_text_anchors(r"a$|[$]|\$|\\$")
    'a\\Z|[$]|\\$|\\\\\\Z'
    """
    result, in_class, index = [], False, 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            result.append(pattern[index:index + 2])
            index += 2
            continue
        if char == "[" and not in_class:
            in_class = True
            result.append(char)
            index += 1
            for opening in ("^", "]"):  # "]" first in a class, after an optional "^", is a literal
                if pattern.startswith(opening, index):
                    result.append(opening)
                    index += 1
            continue
        if char == "]" and in_class:
            in_class = False
        result.append("\\Z" if char == "$" and not in_class else char)
        index += 1
    return "".join(result)


def reference_counts(texts: Iterable[str], special_tokens: Sequence[str] = (), pattern: str | None = None
                     ) -> Counter[bytes]:
    """Pre-token counts with the plain regex, each text split into documents at the special tokens.

    A special token splits where it occurs leftmost, the longest one first when several start at the same place.
    """
    longest_first = sorted(special_tokens, key=lambda token: (-len(token), token))
    special_regex = re.compile("|".join(map(re.escape, longest_first))) if special_tokens else None
    counts: Counter[bytes] = Counter()
    for text in texts:
        for document in special_regex.split(text) if special_regex else [text]:
            counts.update(token.encode("utf-8") for token in reference_pretokenize(document, pattern))
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


def reference_train(texts: Iterable[str], vocab_size: int, special_tokens: Sequence[str] = (),
                    pattern: str | None = None) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Train by brute force on texts (each a separate document, further split at the special tokens)."""
    return reference_train_from_counts(reference_counts(texts, special_tokens, pattern), vocab_size, special_tokens)
