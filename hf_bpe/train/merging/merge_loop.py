"""Byte-level BPE training's merge loop: from pre-token counts, repeatedly merge the most frequent adjacent pair.

The merge loop follows the classic incremental algorithm (as in HF tokenizers' BpeTrainer), tuned for CPython. It
holds the words in one of two stores that give the same merges: `hf_bpe.train.merging.flat_corpus.FlatCorpus` (the
default, `store="flat"`: all words as linked positions in flat arrays, the big merges applied with numpy, the small
ones in Python, pairs made below a speculative floor left out) and `string_corpus.StringCorpus` (`store="strings"`,
described here: one `str` per word, kept as the plain alternative the tests compare with):

* Pre-tokens are deduplicated and kept as `words` with a `frequency` each. A word is a `str` whose characters are
  token ids (`chr(id)`), so replacing a pair everywhere in a word is one C-level `str.replace`, which merges
  overlapping runs left to right exactly as BPE must ("aaaaa" with (a, a) gives "aa", "aa", "a"). A pair is the
  2-character string of its ids, so the pairs around a position are slices of the word.
* `pair_counts` holds the weighted count of every adjacent pair. A merge only changes the pairs next to each merged
  occurrence, so counts are updated from that neighbourhood alone, never by rescanning.
* `pair_words` is an inverted index pair -> words that may contain it. Entries are never removed: a word whose pair
  has since been merged away is skipped by a cheap `str.find`.
* Memory is what bounds training on big corpora: the merge loop holds every distinct pair ever made, about one per
  distinct pre-token. So the counts are freed once the words are made (`_Words`), the byte pairs are counted in blocks
  (`_count_byte_pairs`), a pair's index entries take one of three compact forms (`PairIndexEntry`, see `StringCorpus`),
  and the buckets hold bare pairs (see `_BucketQueue`).
* Long words (`LONG_WORD_LENGTH` bytes or more: minified code, base64, text without spaces) would make each merge cost
  their whole length in `str.find`/`str.replace`. They are kept as doubly linked positions with their own index
  pair -> positions (as HF tokenizers' `Word`), so a merge costs them time in proportion to the occurrences it merges
  and training stays linear in their length.
* The best pair comes from frequency buckets (`_BucketQueue`): count -> the pairs with that count, visited from the
  highest count down, which works because the top count never rises (a pair created by a merge never counts more
  than the merged pair). Only the top bucket is kept in order. A lazy max-heap over all pairs (`_LazyHeap`) is the
  alternative (`merge_pairs(..., queue="heap")`); both give the same merges, scripts/bench_train.py times both.

Ties go to the lexicographically greater pair of byte strings, as Python's `max(counts, key=(count, (left, right)))`.
Both queues pop the smallest entry of a min-heap, so each token carries a sort key that orders byte strings in
reverse: each byte b becomes the character 255 - b, and a trailing U+0100 (greater than every such character) makes a
prefix sort after the longer strings it starts. All comparisons then run in C on (key, pair) or (-count, key, pair).

>>> from hf_bpe import train_bpe_from_counts
>>> vocab, merges = train_bpe_from_counts({b"low": 5, b"lower": 2, b"newest": 6, b"widest": 3}, 262)
>>> merges
[(b's', b't'), (b'e', b'st'), (b'o', b'w'), (b'l', b'ow'), (b'w', b'est'), (b'n', b'e')]
>>> vocab[256], len(vocab)
(b'st', 262)
"""

from __future__ import annotations

import gc
import sys
from array import array
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

import numpy as np

from hf_bpe.common.parallel import progress_bar
from hf_bpe.train.merging.flat_corpus import FlatCorpus, speculative_floor, words_of
from hf_bpe.train.merging.pair_runs import PairRuns
from hf_bpe.train.merging.queues import QUEUES
from hf_bpe.train.merging.string_corpus import LONG_WORD_LENGTH, StringCorpus

Vocab = dict[int, bytes]
Merges = list[tuple[bytes, bytes]]

# Token ids are stored as characters, so the largest id is the largest code point.
MAX_TOKEN_ID = sys.maxunicode
_REVERSE_BYTES = bytes(range(255, -1, -1))
DEFAULT_QUEUE = "buckets"  # the merge loop's priority structure, see QUEUES
STORES = ("flat", "strings")  # how the merge loop holds the words: `FlatCorpus`, or `StringCorpus`
DEFAULT_STORE = "flat"


def merge_pairs(counts: Mapping[bytes, int], num_merges: int, progress: bool | None = None, *,
                long_word_length: int = LONG_WORD_LENGTH, queue: str = DEFAULT_QUEUE,
                store: str = DEFAULT_STORE, min_frequency: int = 0, max_token_length: int | None = None
                ) -> list[tuple[int, int]]:
    """Run up to `num_merges` BPE merges over weighted words; return them as (left id, right id) in merge order.

    Ids 0-255 are the bytes and merge i creates id 256 + i. Stops early when no adjacent pair is left, or none
    counts `min_frequency` or more; `max_token_length` as `_merge` takes it.
    `store` picks how the words are held ("flat": `FlatCorpus`, all words as linked positions in flat arrays, the
    big merges done with numpy; "strings": `StringCorpus`, one `str` per word, where words of at least
    `long_word_length` bytes are linked positions), and `queue` ("buckets" or "heap") the priority structure; none
    of them changes the result, only the speed.

    >>> merge_pairs({b"abab": 1}, 5)
    [(97, 98), (256, 256)]
    >>> merge_pairs({b"abab": 1}, 5, store="strings", queue="heap")
    [(97, 98), (256, 256)]
    """
    return _merge(_Words.of_counts(counts), num_merges, progress, long_word_length=long_word_length, queue=queue,
                  store=store, min_frequency=min_frequency, max_token_length=max_token_length)


class _Words:
    """The merge loop's start state: the distinct pre-tokens of two or more tokens end to end (`data`), with their
    `lengths` and `frequencies` (int64), all the merge loop needs of the counts, so the counts can be freed before
    it starts; and the tokens they are made of.

    - Plain training (`of_counts`): `data` is the words' bytes, each byte its own token id; `token_bytes` is None,
      meaning the 256 bytes, and the first new token is 256.
    - Continuing from a base tokenizer (`hf_bpe.train.starts.base_words.base_words`): `data` is an int32 array of
      the base's token ids, the words as the base encodes them; `token_bytes[id]` is each base id's bytes (None for an
      id the base does not use, and for its special tokens, which are in no word), so the first new token is
      `len(token_bytes)`, the id after the base's largest. Every id must be at most `MAX_TOKEN_ID`.

    >>> words = _Words.of_counts({b"ab": 3, b"a": 5, b"abc": 1})
    >>> words.strings(), words.frequencies.tolist(), words.distinct, words.first_new_id
    (['ab', 'abc'], [3, 1], 3, 256)
    """

    def __init__(self, data: bytes | np.ndarray, lengths: np.ndarray, frequencies: np.ndarray, distinct: int,
                 token_bytes: list[bytes | None] | None = None) -> None:
        self.data, self.lengths, self.frequencies, self.distinct = data, lengths, frequencies, distinct
        self.token_bytes: list[bytes | None] = ([bytes([byte]) for byte in range(256)] if token_bytes is None
                                                else token_bytes)
        self.first_new_id = len(self.token_bytes)
        # Tokens that no id of `token_bytes` stands for and that a merge must not make either (the base's tokens that
        # `hf_bpe.train.starts.base_words.compact_ids` leaves out).
        self.other_tokens: frozenset[bytes] = frozenset()
        # The words' pairs sorted by blocks of the flat store's positions (`hf_bpe.train.starts.base_words.base_words`);
        # used up.
        self.pair_runs: list[PairRuns] | None = None

    @classmethod
    def of_counts(cls, counts: Mapping[bytes, int]) -> _Words:
        try:
            data, lengths, frequencies = words_of(counts)
        except OverflowError:
            raise ValueError("pre-token counts are too large: pair counts would overflow 64 bits") from None
        return cls(data, lengths, frequencies, len(counts))

    def strings(self) -> list[str]:
        """The words as `str`, one character per byte (plain training only)."""
        if not isinstance(self.data, bytes):
            raise ValueError("store='strings' trains from bytes only: continuing from a base tokenizer needs "
                             "store='flat'")
        text = self.data.decode("latin-1")
        ends = np.cumsum(self.lengths).tolist()
        return [text[start:end] for start, end in zip([0, *ends], ends)]

    def check_totals(self) -> None:
        """Refuse counts whose pair counts could overflow 64 bits (the stores count them in int64 arrays)."""
        longest = int(self.lengths.max()) if len(self.lengths) else 0
        if sum(self.frequencies.tolist()) * longest >= 1 << 63:
            raise ValueError("pre-token counts are too large: pair counts would overflow 64 bits")


def _merge(words: _Words, num_merges: int, progress: bool | None, *, long_word_length: int = LONG_WORD_LENGTH,
           queue: str = DEFAULT_QUEUE, store: str = DEFAULT_STORE, token_counts: np.ndarray | None = None,
           min_frequency: int = 0, max_token_length: int | None = None) -> list[tuple[int, int]]:
    """`merge_pairs` on a start state (`_Words`): merge i creates the id `words.first_new_id + i`; return the merges
    as (left id, right id). `words` is used up: the store takes over its frequencies, and its tokens are dropped
    once the store is built (the caller may still hold `words`).

    The best pair is passed over, and the next one taken, when its token is already a token (only a base token the
    base merges do not make from its bytes can be: a token has one id) or, with `max_token_length`, has that many
    bytes or more unless it is two single bytes (HF BpeTrainer's rule, see `hf_bpe.train._reference.
    reference_continue`). A passed-over pair stays in the store and may be popped again; it is passed over again.
    Merging stops when the best pair counts less than `min_frequency`, which is also the least floor (created pairs
    counting less could never be merged). With `token_counts`
    (uint64, one entry per token id; the flat store only), each token's count in the final segmentation of the words
    is added into it (`FlatCorpus.add_token_counts`)."""
    if token_counts is not None and store != "flat":
        raise ValueError("token_counts come from the flat store only")
    if queue not in QUEUES:
        raise ValueError(f"queue must be one of {', '.join(map(repr, QUEUES))}, got {queue!r}")
    if store not in STORES:
        raise ValueError(f"store must be one of {', '.join(map(repr, STORES))}, got {store!r}")
    first_new_id, token_bytes, other_tokens = words.first_new_id, words.token_bytes, words.other_tokens
    num_merges = min(num_merges, MAX_TOKEN_ID + 1 - first_new_id)
    words.check_totals()
    if store == "flat":
        floor = max(speculative_floor(words.frequencies, num_merges), min_frequency if min_frequency > 1 else 0)
        corpus: StringCorpus | FlatCorpus = FlatCorpus(words.data, words.lengths, words.frequencies, floor,
                                                       first_new_id, index=False)
        pair_runs = words.pair_runs
    else:
        corpus = StringCorpus(words.strings(), array("q", words.frequencies.tobytes()), long_word_length)
    # The words' arrays let go before the pairs are counted, where the store's memory peaks.
    words.data, words.lengths, words.pair_runs = b"", np.zeros(0, dtype=np.int64), None
    words.frequencies = np.zeros(0, dtype=np.int64)  # the store holds its own copy
    del words
    if isinstance(corpus, FlatCorpus):
        corpus.index_words(pair_runs)
    token_keys = token_order_keys(token_bytes)
    ranked = RankedStore(corpus, QUEUES[queue](corpus.pair_counts, token_keys, corpus.floor), min_frequency)
    merges = run_merge_loop(ranked, num_merges, token_bytes, token_keys, progress, other_tokens=other_tokens,
                            max_token_length=max_token_length)
    if token_counts is not None and isinstance(corpus, FlatCorpus):
        corpus.add_token_counts(token_counts)
    return merges


class Selection(Protocol):
    """Where the merge loop's pairs come from, and where its merges go: one store and its queue for plain training
    (`RankedStore`); one per language, chosen anew each step, for parity-aware training
    (`hf_bpe.train.merging.parity_selection`)."""

    def pop(self) -> str | None:
        """The next candidate pair (2 characters, the ids), or None when merging stops."""

    def merge(self, pair: str, new_token: str) -> None:
        """Merge `pair` into `new_token` wherever the words are held."""


class RankedStore:
    """A store of words (`FlatCorpus` or `StringCorpus`) and its queue: pairs come best first, and the store's
    speculative floor is lowered when the queue runs dry above it. `pop` gives None once no pair is left, or the best
    counts less than `min_frequency`."""

    def __init__(self, corpus: FlatCorpus | StringCorpus, queue: Any, min_frequency: int = 0) -> None:
        self.corpus, self.queue, self.min_frequency = corpus, queue, min_frequency

    def pop(self) -> str | None:
        queue, corpus, min_frequency = self.queue, self.corpus, self.min_frequency
        while True:
            pair = queue.pop()
            if pair is not None:
                return None if min_frequency > 1 and corpus.pair_counts[pair] < min_frequency else pair
            if not queue.floor or queue.floor <= min_frequency:
                return None  # every pair left counts less than the floor
            new_pairs = corpus.lower_floor()  # the guess was too high: pairs below it are needed now
            queue.floor = corpus.floor
            queue.add(new_pairs)

    def merge(self, pair: str, new_token: str) -> None:
        self.queue.add(self.corpus.merge(pair, new_token))


def token_order_keys(token_bytes: Sequence[bytes | None]) -> list[str]:
    """Each token's sort key for the queues (`_reverse_order_key`; an id no token stands for gets the empty one)."""
    return [_reverse_order_key(token or b"") for token in token_bytes]


def run_merge_loop(selection: Selection, num_merges: int, token_bytes: list[bytes | None], token_keys: list[str],
                   progress: bool | None, *, other_tokens: frozenset[bytes] = frozenset(),
                   max_token_length: int | None = None) -> list[tuple[int, int]]:
    """The merge loop: up to `num_merges` merges of the pairs `selection` gives, each making the id after the last of
    `token_bytes` (whose bytes are appended to it, and their sort key to `token_keys`, which the selection's queues
    share). A pair whose token is a token already (`token_bytes`, `other_tokens`) or has `max_token_length` bytes or
    more (unless it is two single bytes) is passed over (see `_merge`). Return the merges as (left id, right id)."""
    first_new_id = len(token_bytes)
    known = {token for token in token_bytes if token is not None} | other_tokens  # a merge makes a new token
    shortest_refused = sys.maxsize if max_token_length is None else max(max_token_length, 3)
    merges: list[tuple[int, int]] = []
    with gc_paused(), progress_bar(progress, total=num_merges, desc="merging", unit=" merges") as bar:
        while len(merges) < num_merges:
            pair = selection.pop()
            if pair is None:
                break
            left, right = pair
            token = token_bytes[ord(left)] + token_bytes[ord(right)]  # type: ignore[operator]
            if token in known or len(token) >= shortest_refused:
                continue
            known.add(token)
            new_token = chr(first_new_id + len(merges))
            merges.append((ord(left), ord(right)))
            token_bytes.append(token)
            token_keys.append(_reverse_order_key(token))
            selection.merge(pair, new_token)
            bar.update()
    return merges


@contextmanager
def gc_paused() -> Iterator[None]:
    """No garbage collection inside: the merge loop and its stores allocate millions of tuples, lists and ints, none
    in cycles, so collections would only cost time."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def vocab_of_merges(id_merges: Sequence[tuple[int, int]], special_tokens: Sequence[str] = ()
                    ) -> tuple[Vocab, Merges]:
    """The vocab and merges of training from the bytes: ids 0-255 the bytes, one id per merge, then the special tokens.

    >>> vocab, merges = vocab_of_merges([(97, 98), (256, 256)], ["<s>"])
    >>> merges, vocab[257], vocab[258], len(vocab)
    ([(b'a', b'b'), (b'ab', b'ab')], b'abab', b'<s>', 259)
    """
    vocab: Vocab = {byte: bytes([byte]) for byte in range(256)}
    merges: Merges = []
    for left, right in id_merges:
        merges.append((vocab[left], vocab[right]))
        vocab[len(vocab)] = vocab[left] + vocab[right]
    for token in special_tokens:
        vocab[len(vocab)] = token.encode("utf-8")
    return vocab, merges


def _reverse_order_key(token: bytes) -> str:
    """A string that sorts in the reverse order of the byte strings, prefixes included.

    >>> sorted([b"a", b"ab", b"b", b""], key=_reverse_order_key)
    [b'b', b'ab', b'a', b'']
    """
    return token.translate(_REVERSE_BYTES).decode("latin-1") + "\u0100"


