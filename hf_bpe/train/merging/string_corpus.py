"""The merge loop's plain store (`store="strings"`): one `str` per word, whose characters are token ids, so a merge in
a word is one C-level `str.replace`; words of `LONG_WORD_LENGTH` bytes or more as linked positions (`_LongWord`).
`hf_bpe.train.merging.merge_loop` describes it; the flat store (`flat_corpus.FlatCorpus`) is the default, and this one
is kept as the plain alternative the tests compare it with.
"""

from __future__ import annotations

from array import array
from collections import defaultdict
from collections.abc import Iterable, Sequence

import numpy as np

# Words at least this long are merged through linked positions (`_LongWord`) rather than `str.replace`.
LONG_WORD_LENGTH = 256
# The index entries of one pair in `_Corpus.pair_words` (the three forms are described there).
PairIndexEntry = np.ndarray | array | int
# `_count_byte_pairs` handles the words in blocks of about this many bytes.
BYTE_PAIR_BLOCK = 1 << 20


class StringCorpus:
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
    and updates the neighbours' pairs exactly as `StringCorpus._merge_in_words` does for short words. A position's list
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
    `StringCorpus._merge_in_words`.

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
    totals = np.zeros(1 << 16, dtype=np.int64)  # exact: `StringCorpus` refused counts whose pair totals could overflow
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
