"""How often each token occurs in the training corpus, and the under-trained tokens that follow from it.

BPE creates a token each time it merges a pair, but a later merge can take every occurrence of that token into a
longer one: such a token is in the vocabulary and yet (almost) never in the encoded training text. A language model
trained on similar text barely sees it, so its embedding stays near its random start, and a prompt that contains it
can derail the model: the "glitch tokens" such as ` SolidGoldMagikarp` (Land and Bartolo 2024, "Fishing for
Magikarp: Automatically Detecting Under-trained Tokens in Large Language Models", arXiv:2405.05417).

The exact count of every token in the final segmentation of the training corpus is each distinct pre-token's tokens,
times its count. The merge loop ends holding that segmentation, so `hf-bpe train` takes the counts from it
(`train_bpe_from_counts(..., token_counts=...)`); for any tokenizer and pre-token counts, `count_tokens_of_pretokens`
encodes the distinct pre-tokens in one batch merge, with the same result. Special tokens split documents and are not
part of any pre-token: their counts are 0 (not counted). `hf-bpe train` stores the counts as `token_counts.npy`
(uint64, indexed by token id) and names the file in `hf_bpe_training.json`.

>>> from hf_bpe.encode.tokenizer import Tokenizer
>>> tokenizer = Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"abc"}, [(b"a", b"b"),
...                       (b"ab", b"c")])
>>> counts = count_tokens_of_pretokens(tokenizer, {b"abc": 3, b"ab": 1, b"c": 2})
>>> counts[[99, 256, 257]].tolist()
[2, 1, 3]
>>> rare = find_rare_tokens(counts, tokenizer.vocab, threshold=2)
>>> rare.never, rare.rare
([], [256])
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hf_bpe.common.errors import InputError
from hf_bpe.encode.cache import ID_DTYPE
from hf_bpe.evaluation.viewer import readable_token

#: The file next to the tokenizer, and its dtype.
TOKEN_COUNTS_FILE = "token_counts.npy"
COUNT_DTYPE = np.dtype("<u8")
#: Tokens seen fewer times than this in the training corpus count as rare (under-trained): a model trained on a
#: corpus of the same kind would see each of them only a handful of times.
RARE_THRESHOLD = 10
# Distinct pre-tokens merged per batch: large enough for the numpy batch merge, small enough to bound memory.
_BATCH_WORDS = 1 << 16
# What the training record says about special tokens in the counts.
SPECIAL_TOKENS_NOTE = "special tokens are not counted (their counts are 0)"
LAND_BARTOLO = ('Land and Bartolo 2024, "Fishing for Magikarp: Automatically Detecting Under-trained Tokens in Large '
                'Language Models", https://arxiv.org/abs/2405.05417')


def count_tokens_of_pretokens(tokenizer: Any, pretoken_counts: Mapping[bytes, int], batch_words: int = _BATCH_WORDS
                              ) -> np.ndarray:
    """How often each token id occurs when every pre-token of `pretoken_counts` (bytes -> count) is encoded with
    `tokenizer` (an `hf_bpe.Tokenizer`): uint64, one entry per id up to the largest; special tokens get 0.

    This equals the token counts of encoding the corpus the pre-tokens were counted in, since the encoder cuts text
    the same way (special tokens, then the pre-tokenization pattern) and merges each pre-token alone. Exact: the sums
    are numpy uint64 additions (`np.add.at`), not float weights.
    """
    counts = np.zeros(max(tokenizer.vocab, default=-1) + 1, dtype=COUNT_DTYPE)
    words = list(pretoken_counts)
    for start in range(0, len(words), batch_words):
        batch = words[start:start + batch_words]
        packed = tokenizer.merge_pretoken_bytes(batch)
        lengths = np.fromiter(map(len, packed), dtype=np.int64, count=len(packed)) // ID_DTYPE.itemsize
        ids = np.frombuffer(b"".join(packed), dtype=ID_DTYPE)
        weights = np.fromiter(map(pretoken_counts.__getitem__, batch), dtype=COUNT_DTYPE, count=len(batch))
        np.add.at(counts, ids, np.repeat(weights, lengths))
    return counts


def count_training_tokens(vocab: Mapping[int, bytes], merges: Sequence[tuple[bytes, bytes]],
                          special_tokens: Sequence[str], pretoken_counts: Mapping[bytes, int]) -> np.ndarray:
    """`count_tokens_of_pretokens` for a trained vocab and merges (what `hf-bpe train` stores)."""
    from hf_bpe.encode.tokenizer import Tokenizer

    return count_tokens_of_pretokens(Tokenizer(vocab, merges, special_tokens, cache_bytes=0), pretoken_counts)


def special_ids_of(vocab: Mapping[int, bytes], special_tokens: Sequence[str]) -> set[int]:
    """The ids of the special tokens in `vocab`.

    >>> special_ids_of({0: b"a", 1: b"<|endoftext|>"}, ["<|endoftext|>"])
    {1}
    """
    specials = {token.encode("utf-8") for token in special_tokens}
    return {token_id for token_id, token in vocab.items() if token in specials}


def save_token_counts(directory: str | os.PathLike[str], counts: np.ndarray) -> Path:
    """Write `directory/token_counts.npy` (the caller writes into a staging directory, so it appears whole)."""
    path = Path(directory) / TOKEN_COUNTS_FILE
    np.save(path, np.ascontiguousarray(counts, dtype=COUNT_DTYPE), allow_pickle=False)
    return path


def token_counts_record(counts: np.ndarray) -> dict[str, Any]:
    """What the training record (`hf_bpe_training.json`) says about the token counts.

    >>> token_counts_record(np.array([3, 0, 2], dtype=np.uint64))["total"]
    5
    """
    return {"file": TOKEN_COUNTS_FILE, "dtype": COUNT_DTYPE.str, "total": int(counts.sum()),
            "special_tokens": SPECIAL_TOKENS_NOTE}


def load_token_counts(directory: str | os.PathLike[str], info: Mapping[str, Any], vocab_size: int
                      ) -> np.ndarray | None:
    """The token counts the training record names, or None when it names none (a directory not trained by
    `hf-bpe train`, or by an older version) or the file is gone (a copy of the directory without it). InputError for
    a file that is unreadable or of the wrong shape.
    """
    record = info.get("token_counts")
    if not isinstance(record, dict) or not record.get("file"):
        return None
    path = Path(directory) / Path(str(record["file"])).name
    try:
        counts = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise InputError(f"{path}: not a token counts array ({error})") from None
    if counts.ndim != 1 or counts.dtype != COUNT_DTYPE or len(counts) > vocab_size or len(counts) == 0:
        raise InputError(f"{path}: expected one uint64 count per token id (at most {vocab_size}), got shape "
                         f"{counts.shape} and dtype {counts.dtype}")
    return counts


@dataclass(frozen=True)
class RareTokens:
    """The non-special tokens a corpus rarely or never uses, by id: merged tokens and byte tokens apart."""

    num_merged: int  # merged tokens in the vocabulary (not bytes, not special)
    never: list[int]  # merged tokens that occur 0 times, by id
    rare: list[int]  # merged tokens that occur at least once and fewer than `threshold` times, by id
    unused_bytes: list[int]  # byte tokens that occur 0 times (13 byte values never occur in UTF-8 text)
    threshold: int

    def examples(self, vocab: Mapping[int, bytes], ids: list[int], limit: int = 8) -> str:
        """'`␣wor`, `<e6><97>`, ...': the first `limit` of `ids` shown readably, each in a code span."""
        shown = ", ".join(f"`{readable_token(vocab[token_id])}`".replace("|", "\\|") for token_id in ids[:limit])
        return shown + (f" and {len(ids) - limit:,} more" if len(ids) > limit else "")


def find_rare_tokens(counts: np.ndarray, vocab: Mapping[int, bytes], special_ids: Collection[int] = (),
                     threshold: int = RARE_THRESHOLD) -> RareTokens:
    """Split the non-special tokens of `vocab` by their `counts` (indexed by id; ids past its end count 0)."""
    padded = np.zeros(max(vocab, default=-1) + 1, dtype=COUNT_DTYPE)
    padded[:len(counts)] = counts[:len(padded)]
    merged = [token_id for token_id, token in sorted(vocab.items()) if len(token) > 1 and token_id not in special_ids]
    merged_counts = padded[merged]
    never = [token_id for token_id, count in zip(merged, merged_counts.tolist()) if count == 0]
    rare = [token_id for token_id, count in zip(merged, merged_counts.tolist()) if 0 < count < threshold]
    unused_bytes = [token_id for token_id, token in sorted(vocab.items())
                    if len(token) == 1 and token_id not in special_ids and padded[token_id] == 0]
    return RareTokens(len(merged), never, rare, unused_bytes, threshold)


def new_token_ids(vocab: Mapping[int, bytes], merges: Sequence[tuple[bytes, bytes]], base_merges: int) -> list[int]:
    """The ids of the tokens an extension learned (`hf-bpe train --extend`): those made by the merges after the
    base's first `base_merges`, in merge order.

    >>> new_token_ids({i: bytes([i]) for i in range(256)} | {256: b"ab", 300: b"abc"}, [(b"a", b"b"), (b"ab", b"c")], 1)
    [300]
    """
    token_ids = {token: token_id for token_id, token in vocab.items()}
    return [token_ids[left + right] for left, right in merges[base_merges:]]


def summary_note(counts: np.ndarray, vocab: Mapping[int, bytes], special_tokens: Sequence[str],
                 new_ids: Sequence[int] | None = None) -> str:
    """The train summary's part on under-trained tokens: of the merged tokens, or, for an extension, of the `new_ids`
    it learned first (most of the base's tokens may never occur in the new text: they are not what it asks about).

    >>> vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"abc"}
    >>> summary_note(np.array([1] * 256 + [0, 12], dtype=np.uint64), vocab, [])
    '; 1 of 2 merged tokens never occurs in the training corpus and 0 occur 1-9 times (under-trained: see README.md)'
    >>> note = summary_note(np.array([1] * 256 + [0, 3], dtype=np.uint64), vocab, [], new_ids=[257])
    >>> note.split(": ")  # doctest: +NORMALIZE_WHITESPACE
    ['; 1 new token learned', '0 never occur in the training corpus and 1 occurs 1-9 times (under-trained',
     'see README.md; 1 of all 2 merged tokens never occurs in it)']
    """
    rare = find_rare_tokens(counts, vocab, special_ids_of(vocab, special_tokens))
    if new_ids is None:
        return (f"; {len(rare.never):,} of {rare.num_merged:,} merged tokens never {_occur(rare.never)} in the "
                f"training corpus and {len(rare.rare):,} occur 1-{rare.threshold - 1} times (under-trained: see "
                f"README.md)")
    new = find_rare_tokens(counts, {token_id: vocab[token_id] for token_id in new_ids})
    return (f"; {len(new_ids):,} new token{'' if len(new_ids) == 1 else 's'} learned: {len(new.never):,} never "
            f"{_occur(new.never)} in the training corpus and {len(new.rare):,} {_occur(new.rare)} "
            f"1-{new.threshold - 1} times (under-trained: see README.md; {len(rare.never):,} of all "
            f"{rare.num_merged:,} merged tokens never {_occur(rare.never)} in it)")


def _occur(ids: Sequence[int]) -> str:
    return "occurs" if len(ids) == 1 else "occur"


def under_trained_section(counts: np.ndarray | None, vocab: Mapping[int, bytes], special_ids: Collection[int],
                          new_ids: Sequence[int] | None = None) -> str:
    """The model card's section on under-trained tokens (or how to get it, without counts); for an extension, the
    `new_ids` it learned come first."""
    heading = "## Under-trained tokens"
    if counts is None:
        return (f"{heading}\n\nThis directory has no token counts (`{TOKEN_COUNTS_FILE}`, which `hf-bpe train` "
                "writes), so the card cannot say which tokens the training corpus (almost) never uses. "
                "`hf-bpe eval DIR --corpus FILE` reports the tokens that never occur in any corpus.")
    rare = find_rare_tokens(counts, vocab, special_ids)
    total = int(counts.sum())
    lines = [
        f"{heading}\n\nEach token's count in the training corpus as this tokenizer encodes it "
        f"({total:,} tokens; the counts are in `{TOKEN_COUNTS_FILE}`, by id; special tokens are not counted):\n",
    ]
    if new_ids is not None:
        new = find_rare_tokens(counts, {token_id: vocab[token_id] for token_id in new_ids})
        lines += [
            f"- of the **{len(new_ids):,}** new tokens this extension learned, **{len(new.never):,}** never occur"
            + (f" (the first in merge order: {new.examples(vocab, new.never)})" if new.never else "")
            + f" and **{len(new.rare):,}** occur fewer than {new.threshold} times"
            + (f" ({new.examples(vocab, new.rare)})" if new.rare else "") + ";",
        ]
    lines += [
        f"- **{len(rare.never):,}** of the {rare.num_merged:,} merged tokens"
        + (" (the base's included)" if new_ids is not None else "") + " never occur"
        + (f" (the first in merge order: {rare.examples(vocab, rare.never)})" if rare.never else "") + ";",
        f"- **{len(rare.rare):,}** occur fewer than {rare.threshold} times"
        + (f" (the first in merge order: {rare.examples(vocab, rare.rare)})" if rare.rare else "") + ";",
        f"- {len(rare.unused_bytes)} of the 256 byte tokens never occur (13 byte values, such as `<c0>` and `<ff>`, "
        "never occur in UTF-8 text, and control characters rarely do).",
        "",
        "BPE adds a token each time it merges a pair, and later merges can turn almost every occurrence of it into "
        "longer tokens: the tokens above exist mostly as steps towards longer ones. A model trained on text like "
        "this corpus will see them rarely or never, so their embeddings stay close to their random initialisation "
        "(weight decay may even shrink them towards zero), and a prompt that contains one can make the model behave "
        "erratically: the \"glitch tokens\" such as ` SolidGoldMagikarp` found in many released models ("
        f"{LAND_BARTOLO}). These counts are what a model sees when its training data is like this corpus; for "
        "other data, `hf-bpe eval DIR --corpus FILE` lists the tokens that never occur in it. "
        "Remedies are to train the tokenizer on data like the model's, to use a smaller vocabulary, or to keep "
        "these tokens out of generation (for example by masking their logits).",
    ]
    return "\n".join(lines)
