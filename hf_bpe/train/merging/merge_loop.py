"""Byte-level BPE training's merge loop: from pre-token counts, repeatedly merge the most frequent adjacent pair.

The merge loop follows the classic incremental algorithm (as in HF tokenizers' BpeTrainer), tuned for CPython. It
holds the words in one of two stores that give the same merges: `hf_bpe.train.merging.flat_corpus.FlatCorpus` (the
default, `store="flat"`: all words as linked positions in flat arrays, the big merges applied with numpy, the small
ones in Python, pairs made below a speculative floor left out) and `_Corpus` (`store="strings"`, described here: one
`str` per word, kept as the plain alternative the tests compare with):

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
  (`_count_byte_pairs`), a pair's index entries take one of three compact forms (`PairIndexEntry`, see `_Corpus`),
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
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from hf_bpe.common.parallel import progress_bar
from hf_bpe.train.merging.flat_corpus import FlatCorpus, speculative_floor, words_of
from hf_bpe.train.merging.pair_runs import PairRuns
from hf_bpe.train.merging.queues import QUEUES

Vocab = dict[int, bytes]
Merges = list[tuple[bytes, bytes]]

# Token ids are stored as characters, so the largest id is the largest code point.
MAX_TOKEN_ID = sys.maxunicode
_REVERSE_BYTES = bytes(range(255, -1, -1))
DEFAULT_QUEUE = "buckets"  # the merge loop's priority structure, see QUEUES
STORES = ("flat", "strings")  # how the merge loop holds the words: `FlatCorpus`, or `_Corpus`
DEFAULT_STORE = "flat"
# Words at least this long are merged through linked positions (`_LongWord`) rather than `str.replace`.
LONG_WORD_LENGTH = 256
# The index entries of one pair in `_Corpus.pair_words` (the three forms are described there).
PairIndexEntry = np.ndarray | array | int
# `_count_byte_pairs` handles the words in blocks of about this many bytes.
BYTE_PAIR_BLOCK = 1 << 20


def merge_pairs(counts: Mapping[bytes, int], num_merges: int, progress: bool | None = None, *,
                long_word_length: int = LONG_WORD_LENGTH, queue: str = DEFAULT_QUEUE,
                store: str = DEFAULT_STORE, min_frequency: int = 0, max_token_length: int | None = None
                ) -> list[tuple[int, int]]:
    """Run up to `num_merges` BPE merges over weighted words; return them as (left id, right id) in merge order.

    Ids 0-255 are the bytes and merge i creates id 256 + i. Stops early when no adjacent pair is left, or none
    counts `min_frequency` or more; `max_token_length` as `_merge` takes it.
    `store` picks how the words are held ("flat": `FlatCorpus`, all words as linked positions in flat arrays, the
    big merges done with numpy; "strings": `_Corpus`, one `str` per word, where words of at least
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
        corpus: _Corpus | FlatCorpus = FlatCorpus(words.data, words.lengths, words.frequencies, floor, first_new_id,
                                                  words.pair_runs)
    else:
        corpus = _Corpus(words.strings(), array("q", words.frequencies.tobytes()), long_word_length)
    words.data, words.lengths, words.pair_runs = b"", np.zeros(0, dtype=np.int64), None
    del words
    pair_counts = corpus.pair_counts
    token_keys = [_reverse_order_key(token or b"") for token in token_bytes]
    best_pairs = QUEUES[queue](pair_counts, token_keys, corpus.floor)
    known = {token for token in token_bytes if token is not None} | other_tokens  # a merge makes a new token
    shortest_refused = sys.maxsize if max_token_length is None else max(max_token_length, 3)
    merges: list[tuple[int, int]] = []

    gc_was_enabled = gc.isenabled()
    gc.disable()  # the loop allocates millions of tuples and lists, none in cycles: collections would only cost time
    try:
        with progress_bar(progress, total=num_merges, desc="merging", unit=" merges") as bar:
            while len(merges) < num_merges:
                pair = best_pairs.pop()
                if pair is None:
                    if not best_pairs.floor or best_pairs.floor <= min_frequency:
                        break  # every pair left counts less than the floor
                    new_pairs = corpus.lower_floor()  # the guess was too high: pairs below it are needed now
                    best_pairs.floor = corpus.floor
                    best_pairs.add(new_pairs)
                    continue
                if min_frequency > 1 and pair_counts[pair] < min_frequency:
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
                best_pairs.add(corpus.merge(pair, new_token))
                bar.update()
    finally:
        if gc_was_enabled:
            gc.enable()
    if token_counts is not None and isinstance(corpus, FlatCorpus):
        corpus.add_token_counts(token_counts)
    return merges


class _Corpus:
    """The distinct words with their frequencies, the pair counts, and the inverted index pair -> words.

    The index `pair_words` maps a pair to the indices of the (short) words that may contain it, ascending, in one of
    three forms (`PairIndexEntry`), chosen to keep the ~one pair per distinct pre-token small:

    - an int32 numpy array, for the byte pairs counted at the start (`_count_byte_pairs`);
    - an `array('i')`, for a pair a merge created in several words;
    - a bare int, for a pair a merge created in one word (most of them).

    The invariant: every short word that contains a pair is listed under it (an entry may be stale, its word having
    lost the pair since, and is then skipped by `str.find`; but none is ever missing). `merge` pops the pair's entry,
    so a merged pair is never visited again. Words of at least `long_word_length` bytes are kept apart as
    `_LongWord`s (linked positions, with their own index), so a merge costs them time in proportion to the
    occurrences it merges, not to their length.
    """

    pair_words: dict[str, PairIndexEntry]
    floor = 0  # every created pair is indexed and filed (see `FlatCorpus.floor`)

    def __init__(self, words: list[str], frequencies: array, long_word_length: int = LONG_WORD_LENGTH) -> None:
        self.words, self.frequencies = words, frequencies
        self.pair_counts, self.pair_words = _count_byte_pairs(self.words, self.frequencies, long_word_length)
        self.pair_long_words: defaultdict[str, list[_LongWord]] = defaultdict(list)
        for word_index, word in enumerate(self.words):
            if len(word) >= long_word_length:
                long_word = _LongWord(word, self.frequencies[word_index])
                for pair in long_word.pair_positions:
                    self.pair_long_words[pair].append(long_word)
                self.words[word_index] = ""  # its text now lives in the _LongWord only

    def merge(self, pair: str, new_token: str) -> dict[str, int]:
        """Replace `pair` by `new_token` in every word; return the counts of the pairs this created.

        The created pairs all contain `new_token`. Their counts and index entries are added here too.
        """
        candidates = self.pair_words.pop(pair, ())
        if isinstance(candidates, np.ndarray):  # the byte pairs' index entries
            candidates = candidates.tolist()
        elif isinstance(candidates, int):  # a pair created in one word
            candidates = (candidates,)
        created = self._merge_in_words(pair, new_token, candidates)
        for long_word in self.pair_long_words.pop(pair, ()):
            long_word.merge(pair, new_token, self.pair_counts, created, self.pair_long_words)
        del self.pair_counts[pair]
        self.pair_counts.update(created)
        return created

    def _merge_in_words(self, pair: str, new_token: str, candidates: Iterable[int]) -> dict[str, int]:
        """Merge in each candidate word in turn, updating the counts from each occurrence's neighbours.

        Decrements of `pair` itself (from overlapping runs) are harmless: the caller deletes its count.
        """
        words, frequencies, pair_counts = self.words, self.frequencies, self.pair_counts
        # The words of each created pair. A pair is created by one merge only (it holds that merge's new token), so
        # its index entries are all known at the end of this call, and are stored compactly then.
        pair_words: defaultdict[str, list[int]] = defaultdict(list)
        left, right = pair
        right_left = right + left
        created: dict[str, int] = {}
        created_get = created.get
        for word_index in candidates:
            word = words[word_index]
            position = word.find(pair)
            if position < 0:
                continue  # a stale index entry, or a duplicate already handled
            frequency = frequencies[word_index]
            merged = word.replace(pair, new_token)
            words[word_index] = merged
            if len(merged) == len(word) - 1:
                # One occurrence, the common case: the old and new pairs around it are slices of the two words.
                if position:
                    pair_counts[word[position - 1:position + 1]] -= frequency
                    new_pair = merged[position - 1:position + 1]
                    created[new_pair] = created_get(new_pair, 0) + frequency
                    pair_words[new_pair].append(word_index)
                if position < len(merged) - 1:
                    pair_counts[word[position + 1:position + 3]] -= frequency
                    new_pair = merged[position:position + 2]
                    created[new_pair] = created_get(new_pair, 0) + frequency
                    pair_words[new_pair].append(word_index)
                continue
            last = len(merged) - 1
            position = merged.find(new_token)
            while position >= 0:
                if position:
                    before = merged[position - 1]
                    # The pair that ended here: (before, left), or (right, left) between two merged occurrences.
                    pair_counts[right_left if before == new_token else before + left] -= frequency
                    new_pair = merged[position - 1:position + 1]
                    created[new_pair] = created_get(new_pair, 0) + frequency
                    pair_words[new_pair].append(word_index)
                if position < last:
                    after = merged[position + 1]
                    if after != new_token:  # else the next occurrence accounts for the pair between them
                        pair_counts[right + after] -= frequency
                        new_pair = new_token + after
                        created[new_pair] = created_get(new_pair, 0) + frequency
                        pair_words[new_pair].append(word_index)
                position = merged.find(new_token, position + 1)
        index = self.pair_words
        for new_pair, entries in pair_words.items():
            index[new_pair] = entries[0] if len(entries) == 1 else array("i", entries)
        return created


class _LongWord:
    """A long word as doubly linked positions, with an index pair -> positions where it may occur.

    Merging a pair visits only the positions listed for it, left to right (so overlapping runs merge as BPE must),
    and updates the neighbours' pairs exactly as `_Corpus._merge_in_words` does for short words. A position's list
    entry goes stale when a neighbouring merge changes its pair; it is then skipped by comparing the symbols. The pair
    at a position never returns once changed (its tokens only get newer), so a stale entry cannot become valid again.
    """

    __slots__ = ("frequency", "symbols", "next_positions", "previous_positions", "pair_positions")

    def __init__(self, word: str, frequency: int) -> None:
        self.frequency = frequency
        self.symbols = list(word)  # "" at positions merged into their left neighbour
        self.next_positions = array("i", range(1, len(word) + 1))  # len(word) after the last symbol
        self.previous_positions = array("i", range(-1, len(word) - 1))
        self.pair_positions: dict[str, list[int] | np.ndarray] = _pair_positions(word)

    def merge(self, pair: str, new_token: str, pair_counts: dict[str, int], created: dict[str, int],
              pair_long_words: defaultdict[str, list[_LongWord]]) -> None:
        """Merge every occurrence of `pair`, adding the created pairs' counts to `created`."""
        positions = self.pair_positions.pop(pair, None)
        if positions is None:
            return
        if not isinstance(positions, list):
            positions = positions.tolist()  # the byte pairs' positions, ascending
        # Merging must run left to right. Lists are ascending already: a pair is created by one merge only (it holds
        # that merge's new token), and that merge's pass appends its positions left to right.
        symbols, next_positions, previous_positions = self.symbols, self.next_positions, self.previous_positions
        pair_positions, frequency, end = self.pair_positions, self.frequency, len(symbols)
        left, right = pair
        created_get = created.get

        def add(new_pair: str, position: int) -> None:
            created[new_pair] = created_get(new_pair, 0) + frequency
            listed = pair_positions.get(new_pair)
            if listed is None:
                pair_positions[new_pair] = [position]
                pair_long_words[new_pair].append(self)
            else:
                listed.append(position)

        for position in positions:
            if symbols[position] != left:
                continue  # merged away, or changed by an earlier merge
            right_position = next_positions[position]
            if right_position == end or symbols[right_position] != right:
                continue
            previous = previous_positions[position]
            if previous >= 0:
                before = symbols[previous]
                if before == new_token:  # merged just before: the pair between, (right, left), was counted off then
                    add(new_token + new_token, previous)
                else:
                    pair_counts[before + left] -= frequency
                    add(before + new_token, previous)
            following = next_positions[right_position]
            if following != end:
                after = symbols[following]
                after_next = next_positions[following]
                if after == left and after_next != end and symbols[after_next] == right:
                    pair_counts[right + left] -= frequency  # the next occurrence adds (new, new) from its side
                else:
                    pair_counts[right + after] -= frequency
                    add(new_token + after, position)
                previous_positions[following] = position
            symbols[position] = new_token
            symbols[right_position] = ""
            next_positions[position] = following


def _pair_positions(word: str) -> dict[str, np.ndarray]:
    """For each adjacent byte pair of `word`, the ascending positions where it starts.

    >>> {pair: positions.tolist() for pair, positions in _pair_positions("abab").items()}
    {'ab': [0, 2], 'ba': [1]}
    """
    codes = np.frombuffer(word.encode("latin-1"), dtype=np.uint8).astype(np.uint16)
    pair_codes = (codes[:-1] << 8) | codes[1:]
    order = np.argsort(pair_codes, kind="stable").astype(np.int32)
    sorted_codes = pair_codes[order]
    starts = np.flatnonzero(np.diff(sorted_codes, prepend=-1)).tolist()
    return {chr(code >> 8) + chr(code & 255): order[start:stop]
            for code, start, stop in zip(sorted_codes[starts].tolist(), starts, starts[1:] + [len(order)])}


def _count_byte_pairs(words: list[str], frequencies: Sequence[int], long_word_length: int = LONG_WORD_LENGTH,
                      block_positions: int | None = None) -> tuple[dict[str, int], dict[str, np.ndarray]]:
    """Weighted counts of all adjacent byte pairs, and for each pair the ascending indices of the words shorter than
    `long_word_length` that hold it (long words have their own index).

    Done with numpy, this is the only pass that touches every position of every word. It runs over blocks of words
    of about `block_positions` bytes (default `BYTE_PAIR_BLOCK`), so its temporary arrays (about 40 bytes per
    position) stay small whatever the corpus; each block leaves only its distinct (pair, word) entries as int32. The
    index values are int32 arrays (converted to lists when a pair is merged); pairs made by merges get theirs in
    `_Corpus._merge_in_words`.

    >>> counts, index = _count_byte_pairs(["abab", "ba", "aab"], [3, 1, 2], block_positions=4)
    >>> counts, {pair: words.tolist() for pair, words in index.items()}
    ({'aa': 2, 'ab': 8, 'ba': 4}, {'aa': [2], 'ab': [0, 2], 'ba': [0, 1]})
    """
    pair_words: dict[str, np.ndarray] = {}
    if not words:
        return {}, pair_words
    block_positions = BYTE_PAIR_BLOCK if block_positions is None else block_positions
    lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
    ends = np.cumsum(lengths)
    word_frequencies = np.asarray(frequencies, dtype=np.int64)
    totals = np.zeros(1 << 16, dtype=np.int64)  # exact: `_Corpus` refused counts whose pair totals could overflow
    blocks: list[tuple[list[int], np.ndarray]] = []  # per block: where each pair code's entries start, word indices
    first = 0
    while first < len(words):
        block_start = int(ends[first - 1]) if first else 0
        last = min(len(words), max(first + 1, int(np.searchsorted(ends, block_start + block_positions, "right"))))
        block_lengths = lengths[first:last]
        flat = np.frombuffer("".join(words[first:last]).encode("latin-1"), dtype=np.uint8)
        pair_codes = (flat[:-1].astype(np.uint16) << 8) | flat[1:]
        within_word = np.ones(len(pair_codes), dtype=bool)
        within_word[np.cumsum(block_lengths)[:-1] - 1] = False  # drop the pairs spanning two words
        pair_codes = pair_codes[within_word]
        del flat, within_word
        word_of_pair = np.repeat(np.arange(first, last, dtype=np.int32), block_lengths - 1)
        np.add.at(totals, pair_codes, word_frequencies[word_of_pair])
        in_index = (block_lengths < long_word_length)[word_of_pair - first]
        # One sorted key per distinct (pair, word): pair code in the high bits, word index in the low ones.
        keys = (pair_codes[in_index].astype(np.int64) << 32) | word_of_pair[in_index]
        keys.sort()
        keys = keys[np.diff(keys, prepend=-1) != 0]
        del pair_codes, word_of_pair, in_index
        starts = np.searchsorted(keys >> 32, np.arange((1 << 16) + 1)).tolist()
        blocks.append((starts, (keys & 0xFFFFFFFF).astype(np.int32)))
        del keys
        first = last

    codes = np.flatnonzero(totals).tolist()
    pair_counts = {chr(code >> 8) + chr(code & 255): total for code, total in zip(codes, totals[codes].tolist())}
    if len(blocks) == 1:
        (starts, block_words), = blocks
        for code in codes:
            if starts[code] < starts[code + 1]:
                pair_words[chr(code >> 8) + chr(code & 255)] = block_words[starts[code]:starts[code + 1]]
        return pair_counts, pair_words
    # Several blocks: gather each pair's entries into one array, pair after pair, freeing each block once copied.
    sizes = np.zeros(1 << 16, dtype=np.int64)
    for starts, _ in blocks:
        sizes += np.diff(starts)
    offsets = np.concatenate(([0], np.cumsum(sizes))).tolist()
    index = np.empty(offsets[-1], dtype=np.int32)
    filled = offsets[:-1]  # where each pair's next entries go
    while blocks:
        starts, block_words = blocks.pop(0)
        for code in codes:
            start, stop = starts[code], starts[code + 1]
            if start < stop:
                index[filled[code]:filled[code] + stop - start] = block_words[start:stop]
                filled[code] += stop - start
        del starts, block_words
    for code in codes:
        if offsets[code] < offsets[code + 1]:
            pair_words[chr(code >> 8) + chr(code & 255)] = index[offsets[code]:offsets[code + 1]]
    return pair_counts, pair_words


def _reverse_order_key(token: bytes) -> str:
    """A string that sorts in the reverse order of the byte strings, prefixes included.

    >>> sorted([b"a", b"ab", b"b", b""], key=_reverse_order_key)
    [b'b', b'ab', b'a', b'']
    """
    return token.translate(_REVERSE_BYTES).decode("latin-1") + "\u0100"


