"""Byte-level BPE training: count pre-tokens, then repeatedly merge the most frequent adjacent pair.

The merge loop follows the classic incremental algorithm (as in HF tokenizers' BpeTrainer), tuned for CPython:

* Pre-tokens are deduplicated and kept as `words` with a `frequency` each. A word is a `str` whose characters are
  token ids (`chr(id)`), so replacing a pair everywhere in a word is one C-level `str.replace`, which merges
  overlapping runs left to right exactly as BPE must ("aaaaa" with (a, a) gives "aa", "aa", "a"). A pair is the
  2-character string of its ids, so the pairs around a position are slices of the word.
* `pair_counts` holds the weighted count of every adjacent pair. A merge only changes the pairs next to each merged
  occurrence, so counts are updated from that neighbourhood alone, never by rescanning.
* `pair_words` is an inverted index pair -> words that may contain it. Entries are never removed: a word whose pair
  has since been merged away is skipped by a cheap `str.find`.
* Memory is what bounds training on big corpora (issue 9): the merge loop holds every distinct pair ever made, about
  one per distinct pre-token. So the counts are freed once the words are made (`_Words`), the byte pairs are counted
  in blocks (`_count_byte_pairs`), a pair's index entries are int32 arrays, an `array('i')`, or a bare int when the
  pair is in one word, and the buckets hold bare pairs (see `_BucketQueue`).
* Long words (`LONG_WORD_LENGTH` bytes or more: minified code, base64, text without spaces) would make each merge cost
  their whole length in `str.find`/`str.replace`. They are kept as doubly linked positions with their own index
  pair -> positions (as HF tokenizers' `Word`), so a merge costs them time in proportion to the occurrences it merges
  and training stays linear in their length (24 MB of letters without a space, vocab 300: 23 s).
* The best pair comes from frequency buckets (`_BucketQueue`): count -> the pairs with that count, visited from the
  highest count down, which works because the top count never rises (a pair created by a merge never counts more
  than the merged pair). Only the top bucket is kept in order. A lazy max-heap over all pairs (`_LazyHeap`) is the
  alternative (`merge_pairs(..., queue="heap")`); both give the same merges, scripts/bench_train.py times both.

Ties go to the lexicographically greater pair of byte strings, as Python's `max(counts, key=(count, (left, right)))`.
Both queues pop the smallest entry of a min-heap, so each token carries a sort key that orders byte strings in
reverse: each byte b becomes the character 255 - b, and a trailing U+0100 (greater than every such character) makes a
prefix sort after the longer strings it starts. All comparisons then run in C on (key, pair) or (-count, key, pair).

>>> vocab, merges = train_bpe_from_counts({b"low": 5, b"lower": 2, b"newest": 6, b"widest": 3}, 262)
>>> merges
[(b's', b't'), (b'e', b'st'), (b'o', b'w'), (b'l', b'ow'), (b'w', b'est'), (b'n', b'e')]
>>> vocab[256], len(vocab)
(b'st', 262)
"""

from __future__ import annotations

import gc
import heapq
import os
import resource
import sys
import time
from array import array
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
import numpy as np

from hf_bpe.count import CountingEngine, count_pretokens_in_files, count_pretokens_in_iterator
from hf_bpe.errors import InputError
from hf_bpe.files import PathArg
from hf_bpe.gpt2_format import str_to_token, unicode_to_bytes
from hf_bpe.parallel import progress_bar
from hf_bpe.pretokenize import validate_special_tokens

Vocab = dict[int, bytes]
Merges = list[tuple[bytes, bytes]]

# Token ids are stored as characters, so the largest id is the largest code point.
MAX_TOKEN_ID = sys.maxunicode
_REVERSE_BYTES = bytes(range(255, -1, -1))
DEFAULT_QUEUE = "buckets"  # the merge loop's priority structure, see QUEUES
MAX_PAIR_COUNT = (1 << 63) - 1  # `_Corpus` refuses counts that could reach it
# Words at least this long are merged through linked positions (`_LongWord`) rather than `str.replace`.
LONG_WORD_LENGTH = 256
# `_count_byte_pairs` handles the words in blocks of about this many bytes.
BYTE_PAIR_BLOCK = 1 << 20


def train_bpe(input_path: PathArg | Sequence[PathArg], vocab_size: int, special_tokens: Sequence[str] | None = None,
              *, num_workers: int | None = None, errors: str = "strict", progress: bool | None = None,
              verbose: bool = False, engine: str = "local", ray_address: str | None = None) -> tuple[Vocab, Merges]:
    """Train a byte-level BPE tokenizer on one or more UTF-8 text files.

    Special tokens split the text into documents (no merge crosses them) and get the last ids of the vocab.
    `vocab_size` counts the 256 byte tokens, the merges and the special tokens; training stops early when no pair
    is left to merge. `errors` is how undecodable bytes are treated ("strict" raises InputError naming the file and
    byte offset, "replace" decodes them as U+FFFD). `progress=None` shows progress bars only on a terminal.

    `engine="local"` counts pre-tokens in `num_workers` processes on this machine; `engine="ray"` counts them on the
    Ray cluster at `ray_address` (None: a running cluster found by Ray, else a local one; the inputs must be paths
    every node can read) and needs `pip install 'hf_bpe[ray]'`. Both give the same vocab and merges: the merge loop
    always runs here.

    >>> vocab, merges = train_bpe("corpus.txt", 1000, ["<|endoftext|>"])  # doctest: +SKIP
    >>> vocab, merges = train_bpe("corpus.txt", 1000, engine="ray", ray_address="10.0.0.1:6379")  # doctest: +SKIP
    """
    specials = _check_arguments(vocab_size, special_tokens)
    counting_engine = _counting_engine(engine, ray_address)
    paths = [input_path] if isinstance(input_path, (str, os.PathLike)) else list(input_path)
    start = time.perf_counter()
    # The counts are never bound to a name here: they are freed as soon as the words are made from them.
    words = _Words.of_counts(count_pretokens_in_files(paths, specials, num_workers=num_workers, errors=errors,
                                                      progress=progress, engine=counting_engine))
    return _train(words, vocab_size, specials, progress, verbose, counting_seconds=time.perf_counter() - start)


ENGINES = ("local", "ray")


def _counting_engine(engine: str, ray_address: str | None) -> CountingEngine | None:
    """The counting engine named `engine` (None: the local worker processes), checked before any counting.

    >>> _counting_engine("spark", None)
    Traceback (most recent call last):
    ...
    ValueError: engine must be one of 'local', 'ray', got 'spark'
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(map(repr, ENGINES))}, got {engine!r}")
    if engine == "local":
        if ray_address is not None:
            raise ValueError(f"ray_address={ray_address!r} is only used with engine='ray'")
        return None
    from hf_bpe.ray_engine import RayCountingEngine, require_ray  # ray itself is imported only if installed

    require_ray("engine='ray'")
    return RayCountingEngine(ray_address)


def train_bpe_from_iterator(texts: Iterable[str], vocab_size: int, special_tokens: Sequence[str] | None = None, *,
                            num_workers: int | None = None, progress: bool | None = None, verbose: bool = False
                            ) -> tuple[Vocab, Merges]:
    """Train on an iterable of texts (e.g. a `datasets` column); each text is a separate document.

    >>> vocab, merges = train_bpe_from_iterator(["low lower", "newest widest"], 258)
    >>> merges
    [(b'w', b'e'), (b's', b't')]
    """
    specials = _check_arguments(vocab_size, special_tokens)
    start = time.perf_counter()
    words = _Words.of_counts(count_pretokens_in_iterator(texts, specials, num_workers=num_workers, progress=progress))
    return _train(words, vocab_size, specials, progress, verbose, counting_seconds=time.perf_counter() - start)


def train_bpe_from_counts(counts: Mapping[bytes, int], vocab_size: int, special_tokens: Sequence[str] | None = None,
                          *, progress: bool | None = None, verbose: bool = False) -> tuple[Vocab, Merges]:
    """Train on pre-token counts, e.g. from `hf_bpe.count.count_pretokens`: {pre-token bytes: occurrences}.

    >>> train_bpe_from_counts({b"aaaa": 2, b"ab": 1}, 258)[1]
    [(b'a', b'a'), (b'aa', b'aa')]
    """
    specials = _check_arguments(vocab_size, special_tokens)
    _check_counts(counts, specials)
    return _train(_Words.of_counts(counts), vocab_size, specials, progress, verbose, counting_seconds=0.0)


def merge_pairs(counts: Mapping[bytes, int], num_merges: int, progress: bool | None = None, *,
                long_word_length: int = LONG_WORD_LENGTH, queue: str = DEFAULT_QUEUE) -> list[tuple[int, int]]:
    """Run up to `num_merges` BPE merges over weighted words; return them as (left id, right id) in merge order.

    Ids 0-255 are the bytes and merge i creates id 256 + i. Stops early when no adjacent pair is left.
    Words of at least `long_word_length` bytes are merged through linked positions, and `queue` ("buckets" or
    "heap") picks the priority structure; neither changes the result, only the speed.

    >>> merge_pairs({b"abab": 1}, 5)
    [(97, 98), (256, 256)]
    """
    return _merge(_Words.of_counts(counts), num_merges, progress, long_word_length=long_word_length, queue=queue)


class _Words:
    """The distinct pre-tokens of two or more bytes as the merge loop's words (`str`, one character per byte) and
    their frequencies: all the merge loop needs of the counts, so the counts can be freed before it starts.

    >>> words = _Words.of_counts({b"ab": 3, b"a": 5, b"abc": 1})
    >>> words.words, list(words.frequencies), words.distinct
    (['ab', 'abc'], [3, 1], 3)
    """

    def __init__(self, words: list[str], frequencies: array, distinct: int) -> None:
        self.words, self.frequencies, self.distinct = words, frequencies, distinct

    @classmethod
    def of_counts(cls, counts: Mapping[bytes, int]) -> _Words:
        words: list[str] = []
        frequencies = array("q")
        for word, frequency in counts.items():
            if len(word) > 1:  # a single byte never takes part in a pair
                words.append(word.decode("latin-1"))
                frequency = int(frequency)
                if frequency > MAX_PAIR_COUNT:
                    raise ValueError("pre-token counts are too large: pair counts would overflow 64 bits")
                frequencies.append(frequency)
        return cls(words, frequencies, len(counts))


def _merge(words: _Words, num_merges: int, progress: bool | None, *, long_word_length: int = LONG_WORD_LENGTH,
           queue: str = DEFAULT_QUEUE) -> list[tuple[int, int]]:
    """`merge_pairs` on words made by `_Words.of_counts`; the corpus's structures take over `words`'s lists."""
    if queue not in QUEUES:
        raise ValueError(f"queue must be one of {', '.join(map(repr, QUEUES))}, got {queue!r}")
    num_merges = min(num_merges, MAX_TOKEN_ID + 1 - 256)
    corpus = _Corpus(words, long_word_length)
    del words
    pair_counts = corpus.pair_counts
    token_keys = [_reverse_order_key(bytes([byte])) for byte in range(256)]
    best_pairs = QUEUES[queue](pair_counts, token_keys)
    token_bytes = [bytes([byte]) for byte in range(256)]
    merges: list[tuple[int, int]] = []

    gc_was_enabled = gc.isenabled()
    gc.disable()  # the loop allocates millions of tuples and lists, none in cycles: collections would only cost time
    try:
        with progress_bar(progress, total=num_merges, desc="merging", unit=" merges") as bar:
            while len(merges) < num_merges:
                pair = best_pairs.pop()
                if pair is None:
                    break
                left, right = pair
                new_token = chr(256 + len(merges))
                merges.append((ord(left), ord(right)))
                token_bytes.append(token_bytes[ord(left)] + token_bytes[ord(right)])
                token_keys.append(_reverse_order_key(token_bytes[-1]))
                best_pairs.add(corpus.merge(pair, new_token))
                bar.update()
    finally:
        if gc_was_enabled:
            gc.enable()
    return merges


class _LazyHeap:
    """The most frequent pair first, from a max-heap with lazy updates.

    A pair's count only grows during the merge that creates it (every new pair contains the new token) and only
    shrinks afterwards, so a heap entry's count is never below the true count: an entry whose count is out of date
    is pushed back with the true count when it reaches the top. Entries are (-count, order key, pair), compared in C.
    """

    def __init__(self, pair_counts: dict[str, int], token_keys: list[str]) -> None:
        self.pair_counts, self.token_keys = pair_counts, token_keys
        self.heap = [(-count, token_keys[ord(pair[0])] + token_keys[ord(pair[1])], pair)
                     for pair, count in pair_counts.items()]
        heapq.heapify(self.heap)

    def pop(self) -> str | None:
        """Remove and return the pair with the highest count (ties: the greater bytes), or None when none is left."""
        heap, pair_counts, heappop = self.heap, self.pair_counts, heapq.heappop
        while heap:
            negative_count, key, pair = heappop(heap)
            count = pair_counts.get(pair, 0)
            if count == -negative_count:
                return pair
            if count:
                heapq.heappush(heap, (-count, key, pair))
        return None

    def add(self, created: dict[str, int]) -> None:
        """Add the pairs a merge created, with their counts."""
        token_keys, heap, heappush = self.token_keys, self.heap, heapq.heappush
        for pair, count in created.items():
            heappush(heap, (-count, token_keys[ord(pair[0])] + token_keys[ord(pair[1])], pair))


class _BucketQueue:
    """The most frequent pair first, from frequency buckets: count -> the pairs with (at most) that count.

    Only the top bucket is ordered (a heap of (order key, pair), smallest key = greatest pair first). The top count
    never rises: a pair created by a merge never counts more than the merged pair (each occurrence of it holds one
    occurrence of the new token, and there are at most as many of those as the merged pair's count), and every other
    count only falls. So buckets are visited once each, from the highest count down. Entries are lazy like the heap's:
    a pair whose count fell since it was filed is moved down to its true bucket when its bucket is reached.

    The other buckets hold bare pairs: a pair's order key is made only when its bucket becomes the top. Most pairs
    (created in a single rare word) never get there, and a (key, pair) entry for each would cost about 150 bytes per
    pair, the largest part of the merge loop's memory (887k pairs on the 1.2 GB Linux corpus).
    """

    def __init__(self, pair_counts: dict[str, int], token_keys: list[str]) -> None:
        self.pair_counts, self.token_keys = pair_counts, token_keys
        self.buckets: dict[int, list[str]] = defaultdict(list)
        for pair, count in pair_counts.items():
            self.buckets[count].append(pair)
        self.bucket_counts = [-count for count in self.buckets]  # a max-heap of the counts with a bucket
        heapq.heapify(self.bucket_counts)
        self.top_count = MAX_PAIR_COUNT  # the count of `top`, the bucket being drained
        self.top: list[tuple[str, str]] = []

    def pop(self) -> str | None:
        """Remove and return the pair with the highest count (ties: the greater bytes), or None when none is left."""
        pair_counts, heappop = self.pair_counts, heapq.heappop
        while True:
            top, top_count = self.top, self.top_count
            while top:
                _, pair = heappop(top)
                count = pair_counts.get(pair, 0)
                if count == top_count:
                    return pair
                if count:
                    self._file(count, pair)
            if not self.bucket_counts:
                return None
            self.top_count = -heappop(self.bucket_counts)
            token_keys = self.token_keys
            self.top = [(token_keys[ord(pair[0])] + token_keys[ord(pair[1])], pair)
                        for pair in self.buckets.pop(self.top_count)]
            heapq.heapify(self.top)

    def add(self, created: dict[str, int]) -> None:
        """Add the pairs a merge created, with their counts."""
        for pair, count in created.items():
            self._file(count, pair)

    def _file(self, count: int, pair: str) -> None:
        if count < self.top_count:
            bucket = self.buckets.get(count)
            if bucket is None:
                self.buckets[count] = [pair]
                heapq.heappush(self.bucket_counts, -count)
            else:
                bucket.append(pair)
        elif count == self.top_count:
            heapq.heappush(self.top, (self.token_keys[ord(pair[0])] + self.token_keys[ord(pair[1])], pair))
        else:
            raise AssertionError(f"pair {pair!r} counts {count}, more than the top bucket's {self.top_count}")


QUEUES = {"buckets": _BucketQueue, "heap": _LazyHeap}


class _Corpus:
    """The distinct words with their frequencies, the pair counts, and the inverted index pair -> words.

    Words of at least `long_word_length` bytes are kept apart as `_LongWord`s (linked positions), so that a merge
    costs them time in proportion to the occurrences it merges, not to their length.
    """

    def __init__(self, words: _Words, long_word_length: int = LONG_WORD_LENGTH) -> None:
        self.words, self.frequencies = words.words, words.frequencies
        if sum(self.frequencies) * max(map(len, self.words), default=0) >= 1 << 63:
            raise ValueError("pre-token counts are too large: pair counts would overflow 64 bits")
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


def _train(words: _Words, vocab_size: int, special_tokens: list[str], progress: bool | None,
           verbose: bool, counting_seconds: float) -> tuple[Vocab, Merges]:
    start = time.perf_counter()
    distinct = words.distinct
    id_merges = _merge(words, vocab_size - 256 - len(special_tokens), progress)
    vocab: Vocab = {byte: bytes([byte]) for byte in range(256)}
    merges: Merges = []
    for left, right in id_merges:
        merges.append((vocab[left], vocab[right]))
        vocab[len(vocab)] = vocab[left] + vocab[right]
    for token in special_tokens:
        vocab[len(vocab)] = token.encode("utf-8")
    if verbose:
        print(f"hf_bpe: {distinct:,} distinct pre-tokens counted in {counting_seconds:.2f} s, "
              f"{len(merges):,} merges in {time.perf_counter() - start:.2f} s, "
              f"peak memory {_peak_memory_mb():,.0f} MB", file=sys.stderr)
    return vocab, merges


def _check_arguments(vocab_size: int, special_tokens: Sequence[str] | None) -> list[str]:
    if isinstance(special_tokens, str):
        raise TypeError(f"special_tokens must be a sequence of str, not a str: use [{special_tokens!r}]")
    specials = validate_special_tokens(special_tokens)
    if not isinstance(vocab_size, int) or isinstance(vocab_size, bool):
        raise TypeError(f"vocab_size must be an int, got {type(vocab_size).__name__}: {vocab_size!r}")
    minimum = 256 + len(specials)
    if vocab_size < minimum:
        raise ValueError(f"vocab_size {vocab_size} is too small: it must be at least {minimum} "
                         f"(256 byte tokens + {len(specials)} special tokens)")
    for token in specials:
        _check_special_token_is_new(token)
    return specials


def _check_special_token_is_new(token: str) -> None:
    """Refuse a special token that would share its bytes or its vocab.json text with a byte-level token.

    A special token of several bytes can never equal a merged token: documents are split at every occurrence of
    every special token, so no pre-token contains its bytes (UTF-8 is self-synchronizing: the bytes of a whole
    character string occur in UTF-8 text only where the string itself occurs). Two cases remain:

    >>> _check_special_token_is_new("a")
    Traceback (most recent call last):
    ...
    hf_bpe.errors.InputError: special token 'a' is the single byte b'a', which is already token 97
    >>> _check_special_token_is_new("Ġt")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    hf_bpe.errors.InputError: special token 'Ġt' reads as the byte-level token b' t' in vocab.json ...
    >>> _check_special_token_is_new("<|endoftext|>")
    """
    encoded = token.encode("utf-8")
    if len(encoded) == 1:
        raise InputError(f"special token {token!r} is the single byte {encoded!r}, which is already token "
                         f"{encoded[0]}")
    if all(char in unicode_to_bytes() for char in token) and str_to_token(token) != encoded:
        raise InputError(f"special token {token!r} reads as the byte-level token {str_to_token(token)!r} in "
                         f"vocab.json (GPT-2's byte-to-character mapping), so the two could not be told apart: "
                         f"choose another special token")


def _check_counts(counts: Mapping[bytes, int], special_tokens: list[str]) -> None:
    if not isinstance(counts, Mapping):
        raise TypeError(f"counts must be a mapping from pre-token bytes to counts, got {type(counts).__name__}")
    special_bytes = [token.encode("utf-8") for token in special_tokens]
    for token, count in counts.items():
        if not isinstance(token, bytes):
            raise TypeError(f"counts keys must be bytes, got {type(token).__name__}: {token!r}")
        for special in special_bytes:
            if special in token:  # counting splits documents at special tokens: these counts were made otherwise
                raise InputError(f"pre-token {token!r} contains the special token {special.decode()!r}: merges could "
                                 f"rebuild the special token's bytes (count with the same special tokens)")
        if not isinstance(count, (int, np.integer)) or isinstance(count, bool):
            raise TypeError(f"count of pre-token {token!r} must be an int, got {type(count).__name__}: {count!r}")
        if count <= 0:
            raise ValueError(f"count of pre-token {token!r} must be positive, got {count}")


def _peak_memory_mb() -> float:
    """Peak resident memory of this process and of its finished children (counting workers), in MB."""
    peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    return peak / (1 << 20) if sys.platform == "darwin" else peak / 1024  # bytes on macOS, kilobytes elsewhere
