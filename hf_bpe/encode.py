"""Encoding text with a trained byte-level BPE: the `Tokenizer`.

>>> vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"abc"}
>>> tokenizer = Tokenizer(vocab, [(b"a", b"b"), (b"ab", b"c")], special_tokens=["<|endoftext|>"])
>>> tokenizer.encode("abc abcd<|endoftext|>")
[257, 32, 257, 100, 258]
>>> tokenizer.decode([257, 32, 257, 100, 258])
'abc abcd<|endoftext|>'
"""

from __future__ import annotations

import heapq
import multiprocessing
import operator
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain, compress, filterfalse, repeat
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import regex

from hf_bpe.errors import InputError
from hf_bpe.gpt2_format import load_gpt2_merges, load_gpt2_vocab
from hf_bpe.pretokenize import (
    GPT2_ASCII_REGEX,
    GPT2_REGEX,
    SAFE_SPACE_REGEX,
    special_tokens_regex,
    split_at_safe_spaces,
    validate_special_tokens,
)


# Pieces longer than this are encoded but not cached, so one huge piece cannot pin memory.
_MAX_CACHED_PIECE_LENGTH = 256
# Pre-tokens with at most this many bytes are merged by repeated scans, longer ones with the heap.
_MAX_SCAN_MERGE_LENGTH = 24
# At least this many new pre-tokens are merged by `_merge_batch` (numpy), fewer one at a time.
_MIN_BATCH_MERGE = 256
# encode_iterable encodes the buffered text once it holds this many characters.
_STREAM_WINDOW = 1 << 16
_NO_RANK = sys.maxsize


class Tokenizer:
    """Byte-level BPE encoder and decoder: GPT-2 pre-tokenization, then merges applied lowest rank first."""

    #: Each of the two caches (piece -> ids, pre-token -> ids) is emptied when it reaches this many entries.
    max_cache_entries: int = 1 << 19

    def __init__(self, vocab: Mapping[int, bytes], merges: Sequence[tuple[bytes, bytes]],
                 special_tokens: Sequence[str] | None = None) -> None:
        self._vocab: dict[int, bytes] = dict(vocab)
        self._merges: list[tuple[bytes, bytes]] = [(bytes(left), bytes(right)) for left, right in merges]
        self._special_tokens: list[str] = validate_special_tokens(special_tokens)
        self._build()

    # ----------------------------------------------------------------------------------------------- construction

    def _build(self) -> None:
        """Derive every lookup table from vocab, merges and special tokens (also run after unpickling)."""
        self._token_ids: dict[bytes, int] = {}
        for token_id, token in self._vocab.items():
            if token in self._token_ids:
                raise ValueError(f"vocab has the token {token!r} twice (ids {self._token_ids[token]} and {token_id})")
            self._token_ids[token] = token_id
        next_id = max(self._vocab, default=-1) + 1
        self._special_ids: dict[str, int] = {}
        for special in self._special_tokens:
            encoded = special.encode("utf-8")
            if encoded not in self._token_ids:
                self._vocab[next_id] = encoded
                self._token_ids[encoded] = next_id
                next_id += 1
            self._special_ids[special] = self._token_ids[encoded]
        self._special_regex = special_tokens_regex(self._special_tokens)
        self._special_split = (None if self._special_regex is None
                               else regex.compile(f"({self._special_regex.pattern})").split)
        self._longest_special = max(map(len, self._special_tokens), default=0)
        self._byte_ids: dict[int, int] = {byte: self._token_ids[bytes([byte])] for byte in range(256)
                                          if bytes([byte]) in self._token_ids}
        # (left id, right id) -> rank, and rank -> id of the merged token.
        self._pair_ranks: dict[tuple[int, int], int] = {}
        self._merged_ids: list[int] = []
        for rank, (left, right) in enumerate(self._merges):
            left_id, right_id, merged_id = (self._token_ids.get(left), self._token_ids.get(right),
                                            self._token_ids.get(left + right))
            missing = [token for token, token_id in ((left, left_id), (right, right_id), (left + right, merged_id))
                       if token_id is None]
            if missing:
                raise _MergeError(rank, f"merge {rank} ({left!r}, {right!r}): {missing[0]!r} is not in the vocab")
            self._pair_ranks.setdefault((left_id, right_id), rank)
            self._merged_ids.append(merged_id)  # type: ignore[arg-type]
        self._pretoken_cache: dict[str, tuple[int, ...]] = {}
        self._piece_cache: dict[str, tuple[int, ...]] = {}
        self._batch_tables: _BatchTables | None = None  # built on the first large batch of new pre-tokens

    @classmethod
    def from_files(cls, vocab_json: str | os.PathLike[str], merges_txt: str | os.PathLike[str],
                   special_tokens: Sequence[str] | None = None) -> Tokenizer:
        """Load GPT-2 `vocab.json` and `merges.txt`; token ids are the ones in the file.

        Raises InputError naming the file and line for a corrupt file or a merge that does not fit the vocab.
        """
        vocab = load_gpt2_vocab(vocab_json)
        merges = load_gpt2_merges(merges_txt)
        try:
            return cls(vocab, merges, special_tokens)
        except _MergeError as error:
            line = _merge_line_number(Path(merges_txt), error.rank)
            raise InputError(f"{merges_txt}: line {line}: {error.args[0]}") from None
        except ValueError as error:
            raise InputError(f"{vocab_json}: {error}") from None

    # ------------------------------------------------------------------------------------------------- properties

    @property
    def vocab(self) -> Mapping[int, bytes]:
        """id -> token bytes, including special tokens (read-only)."""
        return MappingProxyType(self._vocab)

    @property
    def merges(self) -> Sequence[tuple[bytes, bytes]]:
        """The merges in rank order (read-only)."""
        return tuple(self._merges)

    @property
    def special_tokens(self) -> Sequence[str]:
        return tuple(self._special_tokens)

    @property
    def vocab_size(self) -> int:
        """Number of tokens, special tokens included."""
        return len(self._vocab)

    def token_to_id(self, token: bytes | str) -> int | None:
        """The id of a token given as bytes or as text (UTF-8), or None.

        >>> Tokenizer({0: b"a", 1: b"b"}, []).token_to_id("b")
        1
        """
        if isinstance(token, str):
            token = token.encode("utf-8")
        return self._token_ids.get(token)

    def id_to_token(self, id: int) -> bytes:
        """The bytes of token `id`; ValueError for an unknown id."""
        try:
            return self._vocab[id]
        except (KeyError, TypeError):
            raise ValueError(f"unknown token id {id!r}") from None

    # --------------------------------------------------------------------------------------------------- encoding

    def encode(self, text: str) -> list[int]:
        """Encode text: special tokens first (longest first), the GPT-2 pre-tokens of the text between them merged.

        >>> tokenizer = Tokenizer({i: bytes([i]) for i in range(256)} | {256: b" a"}, [(b" ", b"a")])
        >>> tokenizer.encode("a a")
        [97, 256]
        """
        if not isinstance(text, str):
            raise TypeError(f"encode expects str, got {type(text).__name__}")
        return self._encode_texts([text])[0]

    def encode_batch(self, texts: Sequence[str], num_workers: int | None = None) -> list[list[int]]:
        """Encode many texts, in `num_workers` processes (default: one per CPU) when there is enough text.

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, []).encode_batch(["a", "bc"])
        [[97], [98, 99]]
        """
        texts = list(texts)
        for text in texts:
            if not isinstance(text, str):
                raise TypeError(f"encode_batch expects str texts, got {type(text).__name__}")
        if num_workers is None:
            num_workers = os.cpu_count() or 1
        total_length = sum(map(len, texts))
        if num_workers <= 1 or len(texts) < 2 or total_length < _MIN_PARALLEL_LENGTH:
            return self._encode_texts(texts)
        batches = _batches_by_length(texts, num_workers * 4)
        with _process_pool(num_workers, self) as pool:
            results = pool.map(_encode_in_worker, batches)
        return [ids for batch in results for ids in batch]

    def encode_iterable(self, iterable: Iterable[str]) -> Iterator[int]:
        """Yield the ids of "".join(iterable), holding only a bounded window of the text.

        Buffered text is encoded up to its last safe cut: a position where cutting provably does not change the
        result (before a space followed by non-whitespace, or at a special token's edge), far enough from the end
        that any special token or pre-token across it is already complete.

        >>> list(Tokenizer({i: bytes([i]) for i in range(256)}, []).encode_iterable(["a", "b"]))
        [97, 98]
        """
        pending: list[str] = []
        pending_length = 0
        buffer = ""
        threshold = _STREAM_WINDOW
        for chunk in iterable:
            if not isinstance(chunk, str):
                raise TypeError(f"encode_iterable expects an iterable of str, got {type(chunk).__name__}")
            pending.append(chunk)
            pending_length += len(chunk)
            if len(buffer) + pending_length < threshold:
                continue
            buffer += "".join(pending)
            pending.clear()
            pending_length = 0
            start = 0
            while len(buffer) - start >= _STREAM_WINDOW:
                cut = self._last_safe_cut(buffer, start, start + _STREAM_WINDOW)
                if cut == start:
                    cut = self._last_safe_cut(buffer, start, len(buffer))
                    if cut == start:
                        break
                yield from self.encode(buffer[start:cut])
                start = cut
            buffer = buffer[start:]
            # Text with no safe cut (one huge pre-token) waits until the buffer doubles: linear time overall.
            threshold = max(_STREAM_WINDOW, 2 * len(buffer))
        buffer += "".join(pending)
        yield from self.encode(buffer)

    def _last_safe_cut(self, text: str, start: int, limit: int) -> int:
        """The largest safe cut p with start <= p <= limit in `text` (a buffer whose text may continue), or start.

        `limit` is lowered so that every special token or pre-token boundary decided before p is decided by text
        that is already in the buffer.
        """
        limit = min(limit, len(text) - self._longest_special - 2)
        if limit <= start:
            return start
        segment_start, segment_end = start, len(text)
        if self._special_regex is not None:
            for match in self._special_regex.finditer(text, start):
                if match.start() > limit:
                    segment_end = match.start()
                    break
                if match.end() > limit:
                    return match.start() if match.start() > start else match.end()
                segment_start = match.end()
        # A safe space at p needs its following non-whitespace character inside the same segment.
        space = _last_safe_space(text, segment_start, min(limit, segment_end - 2))
        return max(space, segment_start)

    def _encode_texts(self, texts: list[str]) -> list[list[int]]:
        """Encode texts: special tokens first (longest first), then the GPT-2 pre-tokens of the text between them.

        The text between special tokens is cut at safe spaces into pieces, which map to their ids through the piece
        cache, all in C when every piece is cached. Otherwise the pieces missing from it, across all `texts`, are
        encoded in one batch first.
        """
        special_split = self._special_split
        parts_per_text = [[text] for text in texts] if special_split is None else list(map(special_split, texts))
        lookup = self._piece_cache.__getitem__
        ordinary_ids: list[list[int]] = []
        missed: dict[int, list[str]] = {}  # index in ordinary_ids -> pieces, where a piece is not cached
        for part in chain.from_iterable(parts[::2] for parts in parts_per_text):
            pieces = split_at_safe_spaces(part)
            try:
                ordinary_ids.append(list(chain.from_iterable(map(lookup, pieces))))
            except KeyError:
                missed[len(ordinary_ids)] = pieces
                ordinary_ids.append([])
        if missed:
            # In order of first occurrence (see _cache_pieces).
            uncacheable = self._cache_pieces(dict.fromkeys(chain.from_iterable(missed.values())),
                                             {pieces[0] for pieces in missed.values()})
            for index, pieces in missed.items():
                ordinary_ids[index] = list(chain.from_iterable(map(lookup, pieces)))
            for piece in uncacheable:
                del self._piece_cache[piece]
        results: list[list[int]] = []
        next_ordinary = iter(ordinary_ids).__next__
        special_ids = self._special_ids
        for parts in parts_per_text:
            if len(parts) == 1:
                results.append(next_ordinary())
                continue
            ids = next_ordinary()
            for index in range(1, len(parts), 2):
                ids.append(special_ids[parts[index]])
                ids += next_ordinary()
            results.append(ids)
        return results

    def _cache_pieces(self, distinct: Iterable[str], firsts: set[str]) -> list[str]:
        """Put the pieces of `distinct` into the piece cache; return the new ones too long to stay cached.

        Only the pieces in `firsts` (the first of each text) may not start with a safe space, so the other missing
        pieces can be joined and pre-tokenized by one C-level `findall` per regex (ASCII or not), and the pre-token
        ids regrouped into pieces by offsets, without a Python-level loop over pieces. New pre-tokens are merged in
        one batch. A cache that would outgrow `max_cache_entries` is emptied first (it may exceed the bound while
        one call alone has more distinct pieces).

        New entries keep the order of `distinct` (text order): then the warm path, which looks pieces up in text
        order, finds nearby pieces' entries, keys and ids close together in memory (about 15% faster than set
        order).
        """
        cache = self._piece_cache
        missing = list(filterfalse(cache.__contains__, distinct))
        if len(cache) + len(missing) > self.max_cache_entries:
            cache.clear()
            missing = list(distinct)
        is_first = list(map(firsts.__contains__, missing))
        first_pieces = list(compress(missing, is_first))
        pieces = list(compress(missing, map(operator.not_, is_first)))
        is_ascii = list(map(str.isascii, pieces))
        groups = [list(compress(pieces, is_ascii)), list(compress(pieces, map(operator.not_, is_ascii)))]
        pretoken_lists = [GPT2_ASCII_REGEX.findall("".join(groups[0])), GPT2_REGEX.findall("".join(groups[1]))]
        first_pretoken_lists = [(GPT2_ASCII_REGEX if piece.isascii() else GPT2_REGEX).findall(piece)
                                for piece in first_pieces]
        pretoken_cache = self._pretoken_cache
        pretokens = set(chain(*pretoken_lists, *first_pretoken_lists))
        new = list(pretokens.difference(pretoken_cache))
        if len(pretoken_cache) + len(new) > self.max_cache_entries:
            pretoken_cache.clear()
            new = list(pretokens)
        pretoken_cache.update(zip(new, self._bpe_many(new)))
        for group, group_pretokens in zip(groups, pretoken_lists):
            cache.update(zip(group, _regroup(group, group_pretokens, pretoken_cache)))
        for piece, piece_pretokens in zip(first_pieces, first_pretoken_lists):
            cache[piece] = tuple(chain.from_iterable(map(pretoken_cache.__getitem__, piece_pretokens)))
        for pretoken in new:
            if len(pretoken) > _MAX_CACHED_PIECE_LENGTH:
                del pretoken_cache[pretoken]
        return [piece for piece in missing if len(piece) > _MAX_CACHED_PIECE_LENGTH]

    def _bpe_many(self, pretokens: list[str]) -> list[tuple[int, ...]]:
        """`_bpe` of each pre-token; vectorised over all of them at once when there are many."""
        if len(pretokens) < _MIN_BATCH_MERGE:
            return list(map(self._bpe, pretokens))
        if self._batch_tables is None:
            self._batch_tables = _BatchTables(self._byte_ids, self._pair_ranks, self._merged_ids)
        words = [pretoken.encode("utf-8") for pretoken in pretokens]
        try:
            return _merge_batch(words, self._batch_tables)
        except _MissingByteError:
            return list(map(self._bpe, pretokens))  # raises the error naming the pre-token

    def _bpe(self, pretoken: str) -> tuple[int, ...]:
        """Merge the bytes of one pre-token by rank: lowest rank first, leftmost first among equal ranks."""
        data = pretoken.encode("utf-8")
        whole = self._token_ids.get(data)
        if whole is not None and len(data) == 1:
            return (whole,)
        try:
            ids = list(map(self._byte_ids.__getitem__, data))
        except KeyError as error:
            raise ValueError(f"byte {error.args[0]:#04x} has no token in the vocab, so {pretoken!r} cannot be "
                             f"encoded") from None
        if len(ids) <= _MAX_SCAN_MERGE_LENGTH:
            return tuple(_merge_by_scanning(ids, self._pair_ranks, self._merged_ids))
        return tuple(_merge_with_heap(ids, self._pair_ranks, self._merged_ids))

    # --------------------------------------------------------------------------------------------------- decoding

    def decode(self, ids: Iterable[int]) -> str:
        """Decode ids to text; byte sequences that are not valid UTF-8 become U+FFFD."""
        if not isinstance(ids, (list, tuple)):
            ids = list(ids)
        try:
            data = b"".join(map(self._vocab.__getitem__, ids))
        except (KeyError, TypeError):
            for token_id in ids:
                self.id_to_token(token_id)
            raise
        return data.decode("utf-8", errors="replace")

    # --------------------------------------------------------------------------------------------------- pickling

    def __getstate__(self) -> dict[str, Any]:
        return {"vocab": self._vocab, "merges": self._merges, "special_tokens": self._special_tokens}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._vocab = dict(state["vocab"])
        self._merges = list(state["merges"])
        self._special_tokens = list(state["special_tokens"])
        self._build()

    def __repr__(self) -> str:
        return (f"Tokenizer(vocab_size={self.vocab_size}, merges={len(self._merges)}, "
                f"special_tokens={self._special_tokens!r})")


def _last_safe_space(text: str, low: int, high: int) -> int:
    """The largest p with low <= p <= high, text[p] == " " and text[p + 1] not whitespace, or -1.

    Searches backwards from `high` in growing windows so that the cost is proportional to the distance scanned.

    >>> _last_safe_space("a b c  d", 0, 6), _last_safe_space("a b", 0, 0)
    (6, -1)
    """
    width = 256
    while high >= low:
        window_start = max(low, high - width)
        last = -1
        for match in SAFE_SPACE_REGEX.finditer(text, window_start, high + 2):
            last = match.start()
        if last >= 0 or window_start == low:
            return last
        high = window_start
        width *= 4
    return -1


def _merge_by_scanning(ids: list[int], pair_ranks: dict[tuple[int, int], int], merged_ids: list[int]) -> list[int]:
    """Apply merges to a short `ids` lowest rank first, leftmost first: each step scans the pair ranks for the
    minimum (O(n^2), but in C and fast for the few bytes of a typical pre-token).

    >>> _merge_by_scanning([0, 0, 0], {(0, 0): 0, (1, 0): 1}, [1, 2])
    [2]
    """
    get = pair_ranks.get
    ranks = list(map(get, zip(ids, ids[1:]), repeat(_NO_RANK)))
    while ranks:
        best = min(ranks)
        if best == _NO_RANK:
            break
        position = ranks.index(best)
        merged = merged_ids[best]
        ids[position:position + 2] = (merged,)
        # Only the pairs on either side of the merged token change.
        del ranks[position]
        if position < len(ranks):
            ranks[position] = get((merged, ids[position + 1]), _NO_RANK)
        if position:
            ranks[position - 1] = get((ids[position - 1], merged), _NO_RANK)
    return ids


def _merge_with_heap(ids: list[int], pair_ranks: dict[tuple[int, int], int], merged_ids: list[int]) -> list[int]:
    """Apply merges to `ids` lowest rank first, leftmost first among equal ranks, in O(n log n).

    Positions form a linked list; a heap holds (rank, position) for adjacent pairs, and entries made stale by an
    earlier merge are skipped when popped.

    >>> _merge_with_heap([0, 0, 0], {(0, 0): 0, (1, 0): 1}, [1, 2])
    [2]
    """
    count = len(ids)
    if count < 2:
        return ids
    next_position = list(range(1, count + 1))
    previous_position = list(range(-1, count - 1))
    heap = [rank * count + position
            for position, rank in enumerate(map(pair_ranks.get, zip(ids, ids[1:]))) if rank is not None]
    heapq.heapify(heap)
    alive = [True] * count
    while heap:
        rank, position = divmod(heapq.heappop(heap), count)
        if not alive[position]:
            continue
        right = next_position[position]
        if right >= count or pair_ranks.get((ids[position], ids[right])) != rank:
            continue
        ids[position] = merged_ids[rank]
        alive[right] = False
        after = next_position[right]
        next_position[position] = after
        if after < count:
            previous_position[after] = position
            after_rank = pair_ranks.get((ids[position], ids[after]))
            if after_rank is not None:
                heapq.heappush(heap, after_rank * count + position)
        before = previous_position[position]
        if before >= 0:
            before_rank = pair_ranks.get((ids[before], ids[position]))
            if before_rank is not None:
                heapq.heappush(heap, before_rank * count + before)
    return [token_id for token_id, is_alive in zip(ids, alive) if is_alive]


def _regroup(pieces: list[str], pretokens: list[str], pretoken_ids: Mapping[str, tuple[int, ...]]
             ) -> Iterator[tuple[int, ...]]:
    """The ids of each piece, given the pre-tokens of "".join(pieces), which no pre-token crosses.

    >>> list(_regroup(["a,", " b"], ["a", ",", " b"], {"a": (1,), ",": (2,), " b": (3, 4)}))
    [(1, 2), (3, 4)]
    """
    ids_of = list(map(pretoken_ids.__getitem__, pretokens))
    flat_ids = tuple(chain.from_iterable(ids_of))
    # Pieces end where pre-tokens end: find each piece's end among the pre-tokens' ends (in characters), and take
    # that pre-token's end in flat_ids.
    char_ends = np.cumsum(np.fromiter(map(len, pretokens), dtype=np.int64, count=len(pretokens)))
    id_ends = np.cumsum(np.fromiter(map(len, ids_of), dtype=np.int64, count=len(ids_of)))
    piece_ends = np.cumsum(np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces)))
    # An empty piece (only ever a text's first) ends at 0, before the first pre-token: prepend that end.
    ends = np.append(0, id_ends)[np.searchsorted(char_ends, piece_ends, side="right")].tolist()
    return map(flat_ids.__getitem__, map(slice, [0, *ends], ends))


class _MissingByteError(Exception):
    """A pre-token has a byte without a token; the scalar path reports which."""


class _BatchTables:
    """The merge tables as numpy arrays, for `_merge_batch`."""

    def __init__(self, byte_ids: dict[int, int], pair_ranks: dict[tuple[int, int], int], merged_ids: list[int]):
        self.byte_ids = np.full(256, -1, dtype=np.int64)
        self.byte_ids[list(byte_ids)] = list(byte_ids.values())
        pairs = np.array(list(pair_ranks), dtype=np.int64).reshape(-1, 2)
        ranks = np.fromiter(pair_ranks.values(), dtype=np.int64, count=len(pair_ranks))
        self.merged_ids = np.array(merged_ids, dtype=np.int64)
        # id -> the int object the scalar path uses for it. `.tolist()` makes a new int per id; sharing one object
        # per token keeps the ids the warm path touches (refcounts) in a few cache lines instead of millions.
        self.id_objects: list[int] = [0] * (max(chain(byte_ids.values(), merged_ids), default=0) + 1)
        for token_id in chain(byte_ids.values(), merged_ids):
            self.id_objects[token_id] = token_id
        self.key_base = max(int(pairs.max(initial=0)), int(self.merged_ids.max(initial=0))) + 1
        keys = pairs[:, 0] * self.key_base + pairs[:, 1]
        order = np.argsort(keys)
        # A sentinel key above every real one keeps searchsorted positions in range.
        self.keys = np.append(keys[order], np.iinfo(np.int64).max)
        self.ranks = np.append(ranks[order], _NO_RANK)
        # Monotone: every merge using a token ranks after every merge producing it (true of trained merges). Then
        # merging the lowest-rank pair never creates a pair of lower or equal rank, so all non-overlapping
        # occurrences of it in a word can be merged in one step.
        first_use = np.full(self.key_base, _NO_RANK, dtype=np.int64)
        np.minimum.at(first_use, pairs[:, 0], ranks)
        np.minimum.at(first_use, pairs[:, 1], ranks)
        self.monotone = bool(np.all(first_use[self.merged_ids[ranks]] > ranks))


def _merge_batch(words: list[bytes], tables: _BatchTables) -> list[tuple[int, ...]]:
    """Merge many words at once with numpy, lowest rank first and leftmost first within each word.

    Each step finds every unfinished word's lowest pair rank and merges its leftmost occurrence (for monotone
    merges: all its non-overlapping occurrences, leftmost first); finished words leave the arrays, and only the
    pair ranks next to a merge are looked up again.
    """
    lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
    ids = tables.byte_ids[np.frombuffer(b"".join(words), dtype=np.uint8)]
    if ids.size and ids.min() < 0:
        raise _MissingByteError
    word = np.repeat(np.arange(len(words), dtype=np.int64), lengths)
    rank = _pair_ranks_at(np.arange(ids.size), ids, word, tables)  # rank[i]: the pair (ids[i], ids[i + 1])
    finished_ids: list[np.ndarray] = []
    finished_words: list[np.ndarray] = []
    while ids.size:
        count = ids.size
        starts = np.flatnonzero(np.concatenate(([True], word[1:] != word[:-1])))
        word_lengths = np.diff(np.append(starts, count))
        word_min = np.minimum.reduceat(rank, starts)
        candidate = rank == np.repeat(word_min, word_lengths)
        keep = np.ones(count, dtype=bool)
        finished_word = word_min == _NO_RANK
        if finished_word.any():
            finished = np.repeat(finished_word, word_lengths)
            finished_ids.append(ids[finished])
            finished_words.append(word[finished])
            candidate &= ~finished
            keep &= ~finished
        if not tables.monotone:
            first = np.minimum.reduceat(np.where(candidate, np.arange(count), count), starts)
            candidate[:] = False
            candidate[first[first < count]] = True
        elif (candidate[1:] & candidate[:-1]).any():
            # A run of candidates is a repeated pair (x, x): take every other one from the left.
            positions = np.arange(count)
            run_start = np.where(candidate & ~np.concatenate(([False], candidate[:-1])), positions, 0)
            np.maximum.accumulate(run_start, out=run_start)
            candidate &= (positions - run_start) % 2 == 0
        take = np.flatnonzero(candidate)
        ids[take] = tables.merged_ids[rank[take]]
        keep[take + 1] = False
        merged_at = (np.cumsum(keep) - 1)[take]
        ids, word, rank = ids[keep], word[keep], rank[keep]
        changed = np.concatenate((merged_at[merged_at > 0] - 1, merged_at))
        rank[changed] = _pair_ranks_at(changed, ids, word, tables)
    all_words = np.concatenate(finished_words) if finished_words else np.zeros(0, dtype=np.int64)
    order = np.argsort(all_words, kind="stable")
    flat_ids = tuple(map(tables.id_objects.__getitem__,
                         (np.concatenate(finished_ids)[order] if finished_ids else all_words).tolist()))
    ends = np.cumsum(np.bincount(all_words, minlength=len(words))).tolist()
    return list(map(flat_ids.__getitem__, map(slice, [0, *ends], ends)))


def _pair_ranks_at(positions: np.ndarray, ids: np.ndarray, word: np.ndarray, tables: _BatchTables) -> np.ndarray:
    """The rank of the pair (ids[p], ids[p + 1]) for each p in `positions`; _NO_RANK at a word's end or no merge."""
    right = np.minimum(positions + 1, ids.size - 1)
    keys = ids[positions] * tables.key_base + ids[right]
    found = np.searchsorted(tables.keys, keys)
    valid = (tables.keys[found] == keys) & (word[right] == word[positions]) & (right > positions)
    return np.where(valid, tables.ranks[found], _NO_RANK)


class _MergeError(ValueError):
    """A merge that does not fit the vocab; `from_files` turns it into an InputError naming the merges.txt line."""

    def __init__(self, rank: int, message: str) -> None:
        super().__init__(message)
        self.rank = rank


def _merge_line_number(merges_path: Path, rank: int) -> int:
    """The 1-based line of merges.txt holding merge number `rank` (header and blank lines are skipped)."""
    seen = -1
    with merges_path.open(encoding="utf-8") as file:
        for line_number, line in enumerate(file, start=1):
            line = line.rstrip("\r\n")
            if not line or (line_number == 1 and line.startswith("#version")):
                continue
            seen += 1
            if seen == rank:
                return line_number
    return 0


# encode_batch uses processes only for at least this many characters of text: below it, starting them costs more.
_MIN_PARALLEL_LENGTH = 1 << 20
_worker_tokenizer: Tokenizer | None = None


def _batches_by_length(texts: list[str], count: int) -> list[list[str]]:
    """Cut `texts` into at most `count` consecutive batches of about equal total length."""
    target = max(1, sum(map(len, texts)) // count)
    batches: list[list[str]] = [[]]
    batch_length = 0
    for text in texts:
        if batch_length >= target:
            batches.append([])
            batch_length = 0
        batches[-1].append(text)
        batch_length += len(text)
    return batches


def _process_pool(num_workers: int, tokenizer: Tokenizer) -> Any:
    # fork (where available) hands each worker the tokenizer without pickling and rebuilding its tables.
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    return context.Pool(num_workers, initializer=_init_worker, initargs=(tokenizer,))


def _init_worker(tokenizer: Tokenizer) -> None:
    global _worker_tokenizer
    _worker_tokenizer = tokenizer


def _encode_in_worker(texts: list[str]) -> list[list[int]]:
    assert _worker_tokenizer is not None
    return _worker_tokenizer._encode_texts(texts)
