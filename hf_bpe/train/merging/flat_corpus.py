"""The merge loop's words laid end to end as linked positions, merged with numpy when a merge is big, else in Python.

`FlatCorpus` is the default store of `hf_bpe.train.merging.merge_loop` (`store="flat"`): it gives the same merges as
the `str` words of `string_corpus.StringCorpus` (`store="strings"`), faster, because the first few thousand merges of
real text touch tens of thousands of words each and are applied here as a few numpy operations over all their
occurrences.

* **Layout.** Every word's symbols (token ids) sit in one int32 array, each word preceded by a separator (-1, in no
  pair) and the last one followed by one. Merging a pair at position p writes the new token at p, marks the right
  position dead (-2), and unlinks it: `next_positions` links each live position to the next live one (as HF
  tokenizers' `Word` and `string_corpus._LongWord`), so a merge costs time in proportion to the occurrences it
  merges, whatever the words' lengths. A token of several positions names its head p at its last one (`HEAD - p`):
  a live position's left neighbour is the one before it or the head named there, with no array of backward links
  (a quarter of the store). `words` gives each position's word, for its frequency, in a byte a position
  (`store_arrays.WordPositions`).
* **Index.** `index` maps a pair (the merge loop's 2-character key) to the ascending positions where it may start:
  every live occurrence is listed (none is ever missing), and an entry goes stale when a neighbouring merge changes
  the pair; it is then skipped by comparing the symbols. A stale entry never becomes valid again (the symbols at a
  position only get newer), and a pair is created by one merge only (it holds that merge's new token), so a pair's
  entries are known, ascending, when its merge ends. Entries are an int32 numpy array (the byte pairs, and pairs
  made by a numpy merge), an `array('i')` (pairs made by a Python merge), or a bare int (a pair made at one
  position: most of them).
* **Two ways to merge, one result.** A pair listed at `MIN_NUMPY_MERGE` positions or more is merged with numpy: all
  its occurrences are checked, overlapping runs ("aaaa" with (a, a)) keep every other occurrence from the run's
  start, the neighbours' pair counts change by group sums of the frequencies (`np.add.reduceat` over int64, exact),
  and the new pairs' positions are grouped by a stable sort. Fewer positions are merged one by one in Python over
  the same arrays (`array('i')` objects, which numpy views without copying), left to right, as BPE must.
* **The floor.** Most pairs a merge makes sit in one rare word and will never be merged; indexing, counting and
  queueing each of them was most of the merge loop's memory. With a `floor` (a guess at the last merge's count,
  `speculative_floor`), a pair made counting less is left out of `pair_counts`, the index and the queue: its count
  can only fall, so it cannot be merged while the queue's best pair counts at least the floor. When the queue's
  best falls below the floor, the merge loop calls `lower_floor`, which lowers it, counts and indexes afresh from
  the arrays every pair at the new floor or above, and hands the queue those below the old one; the merges go on
  exactly as without a floor. The pairs of the words as counted (byte pairs) are all kept.
  Packed frequencies (parity-aware training's fields, `parity_selection`) have a floor per field instead: a power of
  two each, tested at once as a bit mask (`floor_mask`: a pair is kept when its count has one of the mask's bits, i.e.
  counts at least its floor in some field), lowered by `lower_floor(mask)`.
* The arrays are allocated once: ids are int32, so token ids must stay below 2 ** 31 (they are code points, at most
  `sys.maxunicode`), and new tokens must be the ids `first_new_id` (256 from bytes), and on, in order
  (`token_chars`). Memory is 9 bytes per position (a byte of a distinct pre-token, or a separator), plus 4 per
  entry of the index; the pairs are indexed in blocks (`INDEX_BLOCK`) so that indexing them adds little on top.
* Not handled: merging a pair that is not the most frequent while a floor is set (the store may have left out
  pairs that count less than the floor; `lower_floor` first); new tokens out of order.

>>> corpus = FlatCorpus(*words_of({b"abab": 2, b"ab": 1}))
>>> corpus.pair_counts
{'ab': 5, 'ba': 2}
>>> created = corpus.merge("ab", chr(256))
>>> created == {chr(256) * 2: 2} and corpus.pair_counts == {"ba": 0, chr(256) * 2: 2}
True
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping
from itertools import compress, repeat
from operator import add, eq, is_not, not_, sub

import numpy as np

from hf_bpe.encode.merge_kernels import every_other_in_runs
from hf_bpe.train.merging.pair_runs import PairRuns, distinct_codes, id_chars, pair_keys, pair_shift, sorted_pair_runs
from hf_bpe.train.merging.store_arrays import WORD_BLOCK_BITS, WordPositions, shared_array

SEPARATOR = -1  # the symbol before and after each word: in no pair
DEAD = -2  # the symbol of a position merged into its left neighbour
HEAD = -3  # the last position of a token of several positions from p holds HEAD - p
# A pair listed at this many positions or more is merged with numpy, below in Python (the two break even about here).
MIN_NUMPY_MERGE = 64
# The pairs are counted and indexed (`FlatCorpus._index_pairs`) in blocks of this many positions.
INDEX_BLOCK = 1 << 18


def words_of(counts: Mapping[bytes, int]) -> tuple[bytes, np.ndarray, np.ndarray]:
    """The pre-tokens of two or more bytes, end to end, with their lengths and frequencies (int64).

    >>> data, lengths, frequencies = words_of({b"ab": 3, b"a": 5, b"abc": 1})
    >>> data, lengths.tolist(), frequencies.tolist()
    (b'ababc', [2, 3], [3, 1])
    """
    words = [word for word in counts if len(word) > 1]  # a single byte never takes part in a pair
    if len(words) == len(counts):
        frequencies = list(counts.values())
    else:
        frequencies = [counts[word] for word in words]
    return (b"".join(words), np.fromiter(map(len, words), dtype=np.int64, count=len(words)),
            np.array(frequencies, dtype=np.int64) if words else np.zeros(0, dtype=np.int64))


def speculative_floor(frequencies: np.ndarray, num_merges: int) -> int:
    """A guess at a count that the last of `num_merges` merges will still reach: the frequency of the
    `num_merges`-th most frequent word (a merged pair usually sums many words: on the shared corpora the last merge
    counts 3-4 times that), and 0 (no floor) when that is 1.

    >>> speculative_floor(np.array([9, 40, 7, 3, 12]), 3), speculative_floor(np.array([9, 40, 7, 3, 12]), 4)
    (9, 7)
    >>> speculative_floor(np.array([1, 1, 2]), 2)
    0
    """
    if num_merges >= len(frequencies) or num_merges <= 0:
        return 0
    floor = int(np.partition(frequencies, len(frequencies) - num_merges)[len(frequencies) - num_merges])
    return floor if floor > 1 else 0


def lowered_floor(floor: int) -> int:
    """The floor after `FlatCorpus.lower_floor`: a quarter, or 0 below 8 (a power of two stays one).

    >>> lowered_floor(64), lowered_floor(4)
    (16, 0)
    """
    return floor // 4 if floor >= 8 else 0


def index_entries(keys: list[str], positions: np.ndarray, starts: list[int], stops: list[int]
                  ) -> dict[str, np.ndarray | int]:
    """The index entries of pairs `keys`: each one's `positions[start:stop]`, or that position alone when it has one.

    >>> index_entries(["ab", "cd"], np.array([4, 9, 2]), [0, 2], [2, 3])
    {'ab': array([4, 9]), 'cd': 2}
    """
    return {key: positions[start:stop] if stop - start > 1 else first
            for key, start, stop, first in zip(keys, starts, stops, positions[starts].tolist())}


class FlatCorpus:
    """The words as linked positions in flat arrays, with pair counts and an index pair -> positions (see module)."""

    def __init__(self, data: bytes | np.ndarray, lengths: np.ndarray, frequencies: np.ndarray, floor: int = 0,
                 first_new_id: int = 256, pair_runs: list[PairRuns] | None = None,
                 byte_pair_totals: np.ndarray | None = None, index: bool = True) -> None:
        """`data`: the words end to end, as bytes (each byte its token id) or as an int32 array of token ids below
        `first_new_id`, the id the first merge makes (`merge_loop._Words`, the start state). `pair_runs`: the words'
        pairs already sorted and counted (their positions here, codes with `pair_shift(first_new_id - 1)`, totals
        of `frequencies`), a block of ascending positions each, in order; used up (emptied). `frequencies` are
        int64, or Python ints in an object array (parity-aware training's packed per-language counts,
        `parity_selection`): every count is then a Python int, summed exactly whatever its size.
        `byte_pair_totals`: the byte pairs' totals of `frequencies` (indexed by left byte << 8 | right byte), when
        the caller has them (parity-aware training adds them up per language in int64), for words of bytes and no
        floor: the store then sums no frequency itself. `index=False` leaves the pairs to `index_words`, so that the
        caller can let go of `data` and `lengths` (copied here) before the counting, where the memory peaks."""
        size = len(data) + len(lengths) + 1
        separators = np.zeros(size, dtype=bool)
        separators[np.cumsum(lengths + 1)] = True
        separators[0] = True
        # Each array is filled in place (no full-size temporary): their building must not raise the peak memory.
        self.symbol_array, self.symbols = shared_array(size)
        self.symbols.fill(SEPARATOR)
        self.symbols[~separators] = data if isinstance(data, np.ndarray) else np.frombuffer(data, dtype=np.uint8)
        self.words = WordPositions(separators)
        del separators
        self.next_array, self.next_positions = shared_array(size)
        for start in range(0, size, INDEX_BLOCK):
            self.next_positions[start:start + INDEX_BLOCK] = np.arange(start + 1, min(start + INDEX_BLOCK, size) + 1,
                                                                       dtype=np.int32)
        # `_merge_in_python` reads a list (packed Python ints) or an array('q'), which the numpy merges view.
        if frequencies.dtype == object:
            self.frequencies, self.frequency_array = frequencies, frequencies.tolist()
        else:
            self.frequency_array = array("q")
            self.frequency_array.frombytes(np.ascontiguousarray(frequencies, dtype=np.int64).view(np.uint8))
            self.frequencies = np.frombuffer(self.frequency_array, dtype=np.int64)
        self.token_chars = list(map(chr, range(first_new_id)))  # chr(id) for every token so far
        self.floor = floor
        # With packed frequencies: the bits of each field's floor and above; a pair made is kept if it has one.
        self.floor_mask: int | None = None
        self.index: dict[str, np.ndarray | array | int] = {}
        self.pair_counts: dict[str, int] = {}
        if index:
            self.index_words(pair_runs, byte_pair_totals)

    def index_words(self, pair_runs: list[PairRuns] | None = None, byte_pair_totals: np.ndarray | None = None
                    ) -> None:
        """Count and index the words' pairs before the first merge (the arguments as the constructor's)."""
        self.pair_counts.update(zip(*self._index_pairs(given_runs=pair_runs, byte_pair_totals=byte_pair_totals)))

    def _pairs(self, start: int, shift: int) -> tuple[np.ndarray, np.ndarray]:
        """The pairs starting in the block of positions from `start`: their positions, and their codes (left symbol
        shifted by `shift`, or'ed with the right one)."""
        symbols = self.symbols
        left = symbols[start:start + INDEX_BLOCK]
        at = np.flatnonzero(left >= 0)
        right = symbols[self.next_positions[start:start + INDEX_BLOCK][at]]
        at = at[right >= 0]
        codes = (left[at].astype(np.int64) << shift) | right[right >= 0]
        return (at + start).astype(np.int32), codes

    def _index_pairs(self, floor: int = 0, given_runs: list[PairRuns] | None = None,
                     byte_pair_totals: np.ndarray | None = None) -> tuple[list[str], list[int]]:
        """Count and index every pair where it is now, counting `floor` or more (replacing `index`): before the
        first merge, and when a floor is lowered. Return those pairs and their counts.

        It goes over the positions a block at a time, twice, so that the temporary arrays stay small whatever the
        corpus: first each block's pairs are sorted by code (`stable_order`: one radix pass for byte pairs, one sort
        of code and index packed in a uint64 for pairs of larger ids) and reduced to its distinct pairs, their
        numbers of positions and their counts; then, the distinct pairs of all blocks known, each block's positions
        of the pairs kept are put in place, sorted again (a counting sort). The codes are the left id shifted by as
        many bits as the largest id needs, or'ed with the right one, so that token ids sort as cheaply as bytes.
        `given_runs`, the first pass made already (`hf_bpe.train.starts.base_words.base_words` sorts each batch of
        words as it arrives from the workers), also serve as the second's positions. `byte_pair_totals`, the byte
        pairs' counts known already (`__init__`), are taken as the totals when the byte pairs are counted later."""
        blocks = range(0, len(self.symbols), INDEX_BLOCK)
        shift = pair_shift(len(self.token_chars) - 1)  # the largest id any word may hold
        # Byte pairs all kept (no floor): counted by bincount, not sorted, here; their counts come with the placing.
        counts_later = shift == 8 and floor <= 1 and given_runs is None and self.floor_mask is None
        if counts_later:
            distinct = np.arange(1 << 16)
            runs_of_blocks = []
            for start in blocks:
                block_sizes = np.bincount(self._pairs(start, shift)[1], minlength=1 << 16)
                ids = block_sizes.nonzero()[0]
                runs_of_blocks.append((ids, block_sizes[ids], None))
        else:
            if given_runs is not None:
                runs_of_blocks = [(runs.codes, runs.sizes, runs.totals) for runs in given_runs]
                given_positions = [runs.positions for runs in reversed(given_runs)]  # popped in order, each let go
                given_runs.clear()
            else:
                runs_of_blocks = [self._sorted_pairs(start, shift, True)[1:] for start in blocks]
            distinct = distinct_codes([codes for codes, _, _ in runs_of_blocks], 2 * shift)
        sizes = np.zeros(len(distinct), dtype=np.int64)
        totals = np.zeros(len(distinct), dtype=self.frequencies.dtype)
        sum_later = counts_later and byte_pair_totals is None
        if counts_later and byte_pair_totals is not None:
            totals[:] = byte_pair_totals
        for block, (codes, block_sizes, block_totals) in enumerate(runs_of_blocks):
            ids = codes if counts_later else distinct.searchsorted(codes)  # distinct in a block: plain additions
            sizes[ids] += block_sizes
            if block_totals is not None:
                totals[ids] += block_totals
            runs_of_blocks[block] = (ids, block_sizes, None)
        if self.floor_mask is not None:
            kept = (totals & self.floor_mask) != 0
        else:
            kept = totals >= floor if floor > 1 else sizes > 0
        sizes[~kept] = 0  # only the kept pairs' positions are placed
        ends = np.cumsum(sizes)
        filled = ends - sizes  # where each pair's next positions go
        positions = np.empty(int(ends[-1]) if len(ends) else 0, dtype=np.int32)
        for block, (ids, block_sizes, _) in enumerate(runs_of_blocks):
            if given_runs is not None:
                at = given_positions.pop()
            else:
                at, _, _, block_totals = self._sorted_pairs(block * INDEX_BLOCK, shift, sum_later)
                if sum_later:
                    totals[ids] += block_totals
            run_starts = np.cumsum(block_sizes) - block_sizes
            destinations = np.repeat(filled[ids] - run_starts, block_sizes)
            destinations += np.arange(len(destinations))
            if np.count_nonzero(kept[ids]) < len(ids):
                placed = np.repeat(kept[ids], block_sizes)
                destinations, at = destinations[placed], at[placed]
            positions[destinations] = at
            filled[ids] += block_sizes
        del runs_of_blocks
        present = np.flatnonzero(kept)
        codes = distinct[present]
        keys = pair_keys(codes, shift)
        self.index = index_entries(keys, positions, (ends - sizes)[present].tolist(), ends[present].tolist())
        return keys, totals[present].tolist()

    def _sorted_pairs(self, start: int, shift: int, with_counts: bool) -> PairRuns:
        """The pairs starting in the block of positions from `start`, as `PairRuns` (their totals if `with_counts`)."""
        at, codes = self._pairs(start, shift)
        return sorted_pair_runs(at, codes, 2 * shift, self.frequencies[self.words.at(at)] if with_counts else None)

    def lower_floor(self, mask: int | None = None) -> dict[str, int]:
        """Lower the floor (to a quarter, or to 0 below 2) when no pair counting at least the floor is left: count
        and index afresh every pair at the new floor or above, and return those below the old floor, for the queue
        (the others are in it already: they counted at least the floor when made or counted, and only fell since).
        With packed frequencies, `mask` is the new `floor_mask`, whose bits must include the old one's, and nothing
        is returned: each field's queue files its own new range (`parity_selection.FieldQueue.add_counting`).
        """
        floor = self.floor
        if mask is None:
            self.floor = lowered_floor(floor)
        else:
            self.floor_mask = mask
        pair_counts = self.pair_counts
        pair_counts.clear()  # cleared and refilled, not replaced: the queue holds it
        pair_counts.update(zip(*self._index_pairs(self.floor)))
        if mask is not None:
            return {}
        return {pair: count for pair, count in pair_counts.items() if count < floor}

    def merge(self, pair: str, new_token: str) -> dict[str, int]:
        """Replace `pair` by `new_token` in every word; return the counts of the pairs this created (those at or
        above the floor: the others are left out of the counts and the index too).

        The counts of the neighbouring pairs change, the created pairs' counts and index entries are added, and the
        pair's own count and entries are dropped.
        """
        if len(self.token_chars) == ord(new_token):  # else another store sharing the list learned it
            self.token_chars.append(new_token)
        entry = self.index.pop(pair, ())
        if isinstance(entry, int):
            return self._merge_in_python((entry,), pair, new_token)
        if len(entry) < MIN_NUMPY_MERGE:
            return self._merge_in_python(entry.tolist() if isinstance(entry, np.ndarray) else entry, pair, new_token)
        if isinstance(entry, array):
            entry = np.frombuffer(entry, dtype=np.int32)
        return self._merge_with_numpy(entry, pair, new_token)

    def add_token_counts(self, counts: np.ndarray) -> None:
        """Add into `counts` (uint64, indexed by token id) how often each token occurs in the words as they are now,
        each word weighted by its frequency: after the last merge, the tokens of the counted corpus as the trained
        tokenizer encodes it (the encoder applies the merges in rank order, as the merge loop did). Exact: uint64
        additions, block by block (`INDEX_BLOCK` positions), so the temporary arrays stay small.

        >>> corpus = FlatCorpus(*words_of({b"abab": 2, b"ab": 1}))
        >>> _ = corpus.merge("ab", chr(256))
        >>> counts = np.zeros(257, dtype=np.uint64)
        >>> corpus.add_token_counts(counts)
        >>> int(counts[256]), int(counts.sum())
        (5, 5)
        """
        for start in range(0, len(self.symbols), INDEX_BLOCK):
            symbols = self.symbols[start:start + INDEX_BLOCK]
            live = np.flatnonzero(symbols >= 0)
            weights = self.frequencies[self.words.at(live + start)]
            np.add.at(counts, symbols[live], weights.astype(np.uint64))

    def _merge_in_python(self, candidates: Iterable[int], pair: str, new_token: str) -> dict[str, int]:
        """Merge the valid candidates one by one, left to right, updating counts from each one's neighbours."""
        symbols, next_positions = self.symbol_array, self.next_array
        word_bases, word_offsets = self.words.base_array, self.words.offset_array
        frequencies, token_chars = self.frequency_array, self.token_chars
        pair_counts = self.pair_counts
        counts_get = pair_counts.get
        left_char, right_char = pair
        left, right, new = ord(left_char), ord(right_char), ord(new_token)
        right_left = right_char + left_char
        # Each pair made: [its count, then the positions where it starts], one dict lookup per occurrence.
        made: dict[str, list[int]] = {}
        made_get = made.get
        for position in candidates:
            if symbols[position] != left:
                continue  # stale, or the second of two overlapping occurrences
            right_position = next_positions[position]
            if symbols[right_position] != right:
                continue
            frequency = frequencies[word_bases[position >> WORD_BLOCK_BITS] + word_offsets[position]]
            previous = position - 1
            before = symbols[previous]
            if before < DEAD:  # the last position of a token of several: its head
                previous = HEAD - before
                before = symbols[previous]
            if before >= 0:
                key = token_chars[before]
                if before != new:  # else merged just before: the pair between, (right, left), was counted off then
                    lost = key + left_char
                    count = counts_get(lost)
                    if count is not None:  # else it was made below the floor: not counted
                        pair_counts[lost] = count - frequency
                key += new_token
                entry = made_get(key)
                if entry is None:
                    made[key] = [frequency, previous]
                else:
                    entry[0] += frequency
                    entry.append(previous)
            following = next_positions[right_position]
            after = symbols[following]
            if after >= 0:
                if after == left and symbols[next_positions[following]] == right:
                    lost = right_left  # the next occurrence adds (new, new) from its side
                    key = None
                else:
                    key = token_chars[after]
                    lost = right_char + key
                count = counts_get(lost)
                if count is not None:
                    pair_counts[lost] = count - frequency
                if key is not None:
                    key = new_token + key
                    entry = made_get(key)
                    if entry is None:
                        made[key] = [frequency, position]
                    else:
                        entry[0] += frequency
                        entry.append(position)
            symbols[position] = new
            symbols[right_position] = DEAD
            symbols[following - 1] = HEAD - position  # the new token's last position (maybe `right_position`)
            next_positions[position] = following
        del pair_counts[pair]  # after the decrements, some of which (overlapping runs) may be of the pair itself
        index, floor, mask = self.index, self.floor, self.floor_mask
        created: dict[str, int] = {}
        for key, entry in made.items():
            count = entry[0]
            if count & mask if mask is not None else count >= floor:
                created[key] = count
                index[key] = entry[1] if len(entry) == 2 else array("i", entry[1:])
        pair_counts.update(created)
        return created

    def _merge_with_numpy(self, candidates: np.ndarray, pair: str, new_token: str) -> dict[str, int]:
        """Merge all valid candidates at once: the same result as `_merge_in_python`, by whole-array operations."""
        left_char, right_char = pair
        left, right, new = ord(left_char), ord(right_char), ord(new_token)
        symbols, next_positions = self.symbols, self.next_positions
        # Most numpy merges have a few hundred occurrences, where each numpy call's own cost is most of the time: so
        # take/put rather than fancy indexing, count_nonzero rather than .all()/.any(), methods rather than numpy's
        # Python-level wrappers (argsort, nonzero, searchsorted), and as few calls as the work allows.
        rights = next_positions.take(candidates)
        valid = (symbols.take(candidates) == left) & (symbols.take(rights) == right)
        if np.count_nonzero(valid) < len(valid):
            candidates, rights = candidates[valid], rights[valid]
            if not len(candidates):
                del self.pair_counts[pair]
                return {}
        if left == right and len(candidates) > 1:  # a run of n overlapping occurrences merges its 1st, 3rd, ...
            kept = every_other_in_runs(candidates, next_positions)
            if len(kept) < len(candidates):
                candidates, rights = kept, next_positions.take(kept)
        lefts = candidates - 1  # or, at the last position of a token of several, the head it holds
        marks = symbols.take(lefts)
        heads = marks < DEAD
        if np.count_nonzero(heads):
            lefts[heads] = HEAD - marks[heads]
        afters = next_positions.take(rights)
        # Packed frequencies are Python ints, whose take costs tens of an int one: taken once, as the sums need them.
        words = self.words.at(candidates)
        # Both sides' neighbours in one array, the left ones first, each with the position its new pair will have.
        neighbours = symbols.take(np.concatenate((lefts, afters)))
        positions = np.concatenate((lefts, candidates))
        symbols.put(candidates, new)
        symbols.put(rights, DEAD)
        symbols.put(afters - 1, HEAD - candidates)  # each new token's last position (maybe its right one)
        next_positions.put(candidates, afters)
        count = len(candidates)
        pair_counts, index = self.pair_counts, self.index
        created: dict[str, int] = {}
        if count > 1:
            adjacent = afters[:-1] == candidates[1:]  # occurrence i ends right before occurrence i + 1
            if np.count_nonzero(adjacent):
                # Between them, (right, left) is lost once and (new, new) made once, at occurrence i's position: the
                # two neighbours there are left out as separators are.
                neighbours[count:-1][adjacent] = SEPARATOR
                neighbours[1:count][adjacent] = SEPARATOR
                total = int(self.frequencies.take(words[:-1][adjacent]).sum())
                lost = right_char + left_char
                if lost in pair_counts:  # else it was made below the floor: not counted
                    pair_counts[lost] -= total
                if total & self.floor_mask if self.floor_mask is not None else total >= self.floor:
                    key = new_token + new_token
                    pair_counts[key] = created[key] = total
                    made = candidates[:-1][adjacent]
                    index[key] = made if len(made) > 1 else int(made[0])
        # Group the neighbours by side and symbol (the side in a high bit), with a stable sort: positions ascending.
        # Unsigned, a separator (-1, all bits set) sorts after every neighbour, so the groups are a prefix.
        side_bit = 1 << 15 if new < 1 << 15 else 1 << 21
        neighbours[count:] |= side_bit
        if side_bit == 1 << 15:
            codes, separator = neighbours.astype(np.uint16), 0xFFFF
        else:
            codes, separator = neighbours.view(np.uint32), 0xFFFFFFFF
        order = codes.argsort(kind="stable")
        codes = codes.take(order)
        live = int(codes.searchsorted(separator))
        if live:
            codes, order = codes[:live], order[:live]
            positions = positions.take(order)
            changes = np.empty(live, dtype=bool)
            changes[0] = True
            np.not_equal(codes[1:], codes[:-1], out=changes[1:])
            starts = changes.nonzero()[0]
            # Both sides: each occurrence's word twice.
            sums = np.add.reduceat(self.frequencies.take(words.take(order, mode="wrap")), starts)
            groups = codes.take(starts)
            on_left = int(groups.searchsorted(side_bit))
            chars = id_chars(groups & (side_bit - 1))
            # Keys and counts by C-level maps: a merge may have thousands of distinct neighbours. A side's lost pairs
            # are distinct, but the two sides may share one ((right, left)): each side is counted off in turn.
            totals = sums.tolist()
            for lost, lost_totals in ((list(map(add, chars[:on_left], repeat(left_char))), totals[:on_left]),
                                      (list(map(add, repeat(right_char), chars[on_left:])), totals[on_left:])):
                counts = list(map(pair_counts.get, lost))
                if None in counts:  # pairs made below the floor are not counted
                    counted = list(map(is_not, counts, repeat(None)))
                    pair_counts.update(zip(compress(lost, counted),
                                           map(sub, compress(counts, counted), compress(lost_totals, counted))))
                else:
                    pair_counts.update(zip(lost, map(sub, counts, lost_totals)))
            made_keys = [*map(add, chars[:on_left], repeat(new_token)), *map(add, repeat(new_token), chars[on_left:])]
            # The index entries too by C-level maps over lists: a numpy call costs more than these on a few hundred.
            firsts = positions.take(starts).tolist()
            starts = starts.tolist()
            stops = [*starts[1:], live]
            if self.floor or self.floor_mask is not None:
                at_floor = (sums & self.floor_mask) != 0 if self.floor_mask is not None else sums >= self.floor
                if np.count_nonzero(at_floor) < len(at_floor):
                    kept_keys = at_floor.tolist()
                    made_keys, totals = list(compress(made_keys, kept_keys)), list(compress(totals, kept_keys))
                    starts, stops = list(compress(starts, kept_keys)), list(compress(stops, kept_keys))
                    firsts = list(compress(firsts, kept_keys))
            pair_counts.update(zip(made_keys, totals))
            created.update(zip(made_keys, totals))
            alone = list(map(eq, map(sub, stops, starts), repeat(1)))
            if False in alone:
                index.update(zip(compress(made_keys, alone), compress(firsts, alone)))
                several = list(map(not_, alone))
                index.update(zip(compress(made_keys, several),
                                 map(positions.__getitem__, map(slice, compress(starts, several),
                                                                compress(stops, several)))))
            else:
                index.update(zip(made_keys, firsts))
        del pair_counts[pair]
        return created
