"""Superwords on top of an existing tokenizer, as SuperBPE's authors do it (`scripts/extend_existing_tokenizer.sh`):
a base tokenizer's first N tokens are stage 1, and SuperBPE's stage 2 learns superword merges on a corpus up to
`vocab_size` (`hf_bpe.train.starts.superword_passes.train_superwords`, in the same counting passes as training from
scratch: every engine, worker count and dataset works the same).

N counts tokens as `vocab_size` does: the 256 bytes, the base's first N - 256 - S merges and its S special tokens.
The ids:

- **N = the base's size** keeps every base id: the base's vocab and merges, then the new tokens at the ids after
  the base's largest (special tokens included), as `hf-bpe train --extend` numbers them. GPT-2 plus superwords keeps
  `<|endoftext|>` at 50256 and numbers the superwords from 50257.
- **A smaller N** lays the tokenizer out as SuperBPE from scratch does: the bytes at 0-255 (in the order of their ids
  in the base), the kept merges' tokens at 256 + rank, the superwords, then the special tokens (in the base's order).
  A base laid out that way itself (GPT-2, cl100k, every tokenizer hf_bpe trains) keeps the ids of the bytes and kept
  merges.

The stage-2 pre-tokens are split into the kept tokens by merging by rank, as SuperBPE's stage 2 splits them: a base
converted from a tiktoken file, which looks whole pre-tokens up (`ignore_merges`), is saved without that lookup, so
that its directory encodes as training ended. A base must have a token for each byte and its kept merges must each
make a new token from earlier ones; with N = its size, every ordinary token must be a byte or made by a merge (a
converted rank file whose tokens no merge reaches must keep fewer). Others are refused with one line naming what is
wrong. Plain definition: `hf_bpe.train._reference.reference_superword_extend`.

>>> from hf_bpe import Tokenizer, extend_bpe_from_iterator
>>> base = Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"<s>", 257: b"at", 258: b"cat"},
...                  [(b"a", b"t"), (b"c", b"at")], ["<s>"])
>>> vocab, merges = extend_bpe_from_iterator(base, ["the cat sat"] * 3, 264, superword_from=259)
>>> vocab[256], [vocab[token_id] for token_id in range(259, 264)]  # every base id kept, superwords after
(b'<s>', [b'th', b'the', b'the ', b'the cat', b'the cat '])
>>> vocab, merges = extend_bpe_from_iterator(base, ["the cat sat"] * 3, 264, superword_from=258)  # not "cat"
>>> [vocab[token_id] for token_id in range(256, 264)]  # as SuperBPE from scratch: special tokens last
[b'at', b'th', b'the', b'the ', b'the c', b'the cat', b'the cat ', b'<s>']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hf_bpe.common.errors import InputError
from hf_bpe.encode.tokenizer import Tokenizer
from hf_bpe.train.merging.merge_loop import Merges, Vocab
from hf_bpe.train.starts.superword import check_superword_options
from hf_bpe.train.starts.superword_passes import CountPass, train_superwords


@dataclass(frozen=True)
class SuperwordsOnBase:
    """A base tokenizer's first `keep` tokens as SuperBPE's stage 1 (checked by `check_superwords_on_base`):
    `stage_one` as training returns it (the bytes at 0-255 in the base's order, the kept merges' tokens at 256 +
    rank, the special tokens after), `base_ids` the base's id of each of its ordinary ids, and `regex` the stage-2
    pattern."""

    base: Tokenizer
    keep: int
    regex: str
    stage_one: tuple[Vocab, Merges]
    base_ids: np.ndarray

    @property
    def keeps_all(self) -> bool:
        """Whether every base token is kept, and so every base id."""
        return self.keep == len(self.base.vocab)

    def num_ids(self, vocab_size: int) -> int:
        """One more than the largest id the result may have: the length of `train`'s `token_counts`."""
        return max(self.base.vocab) + 1 + vocab_size - self.keep if self.keeps_all else vocab_size

    def train(self, count_pass: CountPass, vocab_size: int, *, token_counts: np.ndarray | None = None,
              **options: Any) -> tuple[Vocab, Merges]:
        """Stage 2 up to `vocab_size` on the corpus `count_pass` counts with `regex` (`train_superwords`, whose
        options these are), laid out as the module docstring says; `token_counts` (`num_ids` entries) receives how
        often each id occurs in the final segmentation of the stage-2 pre-tokens."""
        specials = list(self.base.special_tokens)
        counted = None if token_counts is None else np.zeros(vocab_size, dtype=token_counts.dtype)
        vocab, merges = train_superwords(self.stage_one, count_pass, vocab_size, specials, token_counts=counted,
                                         **options)
        if not self.keeps_all:  # train_superwords' own layout
            if token_counts is not None and counted is not None:
                token_counts[:vocab_size] += counted
            return vocab, merges
        # Every base id kept: the stage-2 tokens move from after the kept ones to after the base's largest id.
        ordinary, first_new = len(self.base_ids), max(self.base.vocab) + 1
        new = len(merges) - len(self.stage_one[1])
        ids = np.concatenate([self.base_ids, np.arange(first_new, first_new + new)])
        if token_counts is not None and counted is not None:
            token_counts[ids] += counted[:len(ids)]
        return dict(self.base.vocab) | {first_new + index: vocab[ordinary + index] for index in range(new)}, merges


def check_superwords_on_base(base: Tokenizer, superword_from: int | None, superword_pattern: str | None,
                             vocab_size: int, pattern: str | None = None) -> SuperwordsOnBase | None:
    """The base's first `superword_from` tokens as stage 1, or None without `superword_from`; checked before any
    counting: `superword_from` and `superword_pattern` as `check_superword_options` checks them (with the base's
    special tokens), at most the base's size, and the base's kept tokens as the module docstring says (InputError
    naming the token or merge otherwise). `pattern` must be None: the corpus is counted with the stage-2 pattern
    only.

    >>> base = Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"ab"}, [(b"a", b"b")])
    >>> check_superwords_on_base(base, 300, None, 400)
    Traceback (most recent call last):
    ...
    ValueError: superword_from 300 is more than the 257 tokens of the base tokenizer: it counts the base's tokens kept
    """
    checked = check_superword_options(superword_from, superword_pattern, vocab_size, base.special_tokens)
    if checked is None:
        return None
    keep, regex = checked
    if pattern is not None:
        raise ValueError("pattern: with superword_from, stage 1 is the base tokenizer's (its pattern) and the corpus "
                         "is counted with superword_pattern only")
    if keep > len(base.vocab):
        raise ValueError(f"superword_from {keep} is more than the {len(base.vocab):,} tokens of the base tokenizer: "
                         f"it counts the base's tokens kept")
    special_ids = set(base.special_token_ids.values())
    if len(special_ids) < len(base.special_tokens):
        raise InputError("the base tokenizer has special tokens that share an id: superword_from cannot count them "
                         "as tokens")
    ids = {token: token_id for token_id, token in base.vocab.items() if token_id not in special_ids}
    missing = [byte for byte in range(256) if bytes([byte]) not in ids]
    if missing:
        raise InputError(f"the base tokenizer has no token for the byte {missing[0]:#04x}: superwords on top of it "
                         f"need all 256 bytes")
    merges = list(base.merges[:keep - 256 - len(base.special_tokens)])
    if keep - 256 - len(base.special_tokens) > len(merges):  # only tokens no merge makes are left to keep
        made = {left + right for left, right in merges}
        unmade = next(token for token in ids if len(token) > 1 and token not in made)
        raise InputError(f"superword_from {keep} keeps token {unmade!r} (id {ids[unmade]}) of the base tokenizer, "
                         f"which none of its merges makes, so it cannot be a stage-1 token: it keeps at most "
                         f"{256 + len(base.special_tokens) + len(merges):,} tokens (its bytes, merges and special "
                         f"tokens)")
    _check_kept_merges(merges)
    byte_ids = sorted(ids[bytes([byte])] for byte in range(256))
    base_ids = np.array(byte_ids + [ids[left + right] for left, right in merges], dtype=np.int64)
    vocab = dict(enumerate(map(base.vocab.__getitem__, base_ids.tolist())))
    vocab |= {len(vocab) + index: token.encode("utf-8") for index, token in enumerate(base.special_tokens)}
    return SuperwordsOnBase(base, keep, regex, (vocab, merges), base_ids)


def _check_kept_merges(merges: Sequence[tuple[bytes, bytes]]) -> None:
    """InputError unless each merge joins two tokens that are bytes or made by earlier merges, into a new token: so
    they are stage-1 merges, one token each.

    >>> _check_kept_merges([(b"a", b"b"), (b"ab", b"c"), (b"a", b"bc")])
    Traceback (most recent call last):
    ...
    hf_bpe.common.errors.InputError: merge 2 (b'a', b'bc') of the base tokenizer joins b'bc', which is neither a \
byte nor made by an earlier merge: superwords on top of it need merges that build on each other
    """
    made: dict[bytes, int] = {}
    for rank, (left, right) in enumerate(merges):
        for part in (left, right):
            if len(part) > 1 and part not in made:
                raise InputError(f"merge {rank} {(left, right)!r} of the base tokenizer joins {part!r}, which is "
                                 f"neither a byte nor made by an earlier merge: superwords on top of it need merges "
                                 f"that build on each other")
        if left + right in made:
            raise InputError(f"merges {made[left + right]} and {rank} of the base tokenizer both make "
                             f"{left + right!r}: superwords on top of it need one token per merge")
        made[left + right] = rank


__all__ = ["SuperwordsOnBase", "check_superwords_on_base"]
