"""Encoding text with a trained byte-level BPE: the `Tokenizer`.

>>> vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"abc"}
>>> tokenizer = Tokenizer(vocab, [(b"a", b"b"), (b"ab", b"c")], special_tokens=["<|endoftext|>"])
>>> tokenizer.encode("abc abcd<|endoftext|>")
[257, 32, 257, 100, 258]
>>> tokenizer.decode([257, 32, 257, 100, 258])
'abc abcd<|endoftext|>'

How it is fast: text is cut into pre-tokens (GPT-2's pattern by default) by one C-level `re.findall` (stdlib `re`, with
the pinned character classes; about twice as fast as `regex`), and they map to their ids through a cache with C-level
`map` (ids packed as bytes, joined in C), so text whose pre-tokens were seen before costs a few C calls per document.
Pre-tokens missing from the cache wait, with a marker in the ids, until enough of them have gathered to be merged in one
numpy batch (`hf_bpe.encode.merge_kernels`); the markers are then replaced. The cache is bounded in bytes
(`cache_bytes`); see `hf_bpe.encode.cache`.
"""

from __future__ import annotations

import gc
import operator
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import partial
from itertools import compress, repeat
from types import MappingProxyType
from typing import Any

import numpy as np

from hf_bpe.encode.batches import batches_by_length, encode_in_worker
from hf_bpe.encode.byte_encoding import decode_with_offsets, encode_bytes
from hf_bpe.encode.cache import (
    DEFAULT_CACHE_BYTES,
    ID_DTYPE,
    MAX_ID,
    PretokenCache,
    pack_ids,
    replace_markers,
    unpack_ids,
)
from hf_bpe.encode.decoding import join_tokens
from hf_bpe.encode.file_constructors import FileConstructors
from hf_bpe.encode.long_words import LONG_WORD_BYTES, merge_long_word_packed
from hf_bpe.encode.merge_kernels import (
    MIN_BATCH_MERGE,
    BatchTables,
    MissingByteError,
    merge_batch_arrays,
    merge_batch_packed,
    merge_ids,
)
from hf_bpe.encode.merge_table import as_byte_pairs, merge_table, vocab_index
from hf_bpe.encode.stream_cuts import stream_windows
from hf_bpe.pretokenize import (
    GPT2_PATTERN,
    SpecialChoice,
    SpecialTokenSplitter,
    allowed_and_disallowed,
    check_disallowed,
    check_stream,
    compile_pattern,
    place_special_tokens,
    preset_name,
    replace_surrogates,
    resolve_pattern,
    splitter_of,
    validate_special_tokens,
)

# New pre-tokens are merged once this many misses have gathered (or at the end of a call): numpy's batch merge pays
# its per-call cost once per batch (see hf_bpe.encode.merge_kernels), and the ids held back meanwhile are the call's
# own, which it returns anyway.
_PENDING_BATCH = 16384
# encode_iterable encodes the buffered text once it holds this many characters.
_STREAM_WINDOW = 1 << 16
# A text longer than this is pre-tokenized one segment at a time (`CompiledPattern.pretoken_batches`).
_SEGMENT_CHARS = 1 << 20
# encode_batch uses processes only for at least this many characters of text: below it, starting them costs more.
_MIN_PARALLEL_LENGTH = 1 << 20


class Tokenizer(FileConstructors):
    """Byte-level BPE encoder and decoder: pre-tokenization (GPT-2's pattern unless `pattern` names a preset of
    `hf_bpe.PATTERNS` or gives regex text), then merges applied lowest rank first.

    `cache_bytes` bounds the memory of the encoder's cache (default 256 MiB); encoding speed does not depend on it
    as long as the distinct pre-tokens of the text at hand fit (about 1.3 million at the default). A custom pattern
    has no safe cut (`hf_bpe.pretokenize.patterns`): `encode_iterable` then holds each document (text between special
    tokens) whole before encoding it.

    `special_tokens` are strings (one in the vocab keeps its id, the others take the next ids) or, as tiktoken's
    `special_tokens=`, {token: id}, where several tokens may share one id (`place_special_tokens`).

    `ignore_merges` (`tokenizers`' BPE option of that name, tiktoken's way): a pre-token that is an ordinary token of
    the vocab is that token, merged or not; `from_tiktoken` sets it. Several merges may make one token: each keeps
    its own rank, as in `tokenizers` (`hf_bpe.encode.merge_table`).
    """

    def __init__(self, vocab: Mapping[int, bytes], merges: Sequence[tuple[bytes, bytes]],
                 special_tokens: Sequence[str] | Mapping[str, int] | None = None, *, pattern: str | None = None,
                 cache_bytes: int = DEFAULT_CACHE_BYTES, ignore_merges: bool = False) -> None:
        self._vocab: dict[int, bytes] = dict(vocab)
        self._merges: list[tuple[bytes, bytes]] = as_byte_pairs(merges)
        self._ignore_merges = bool(ignore_merges)
        self._special_tokens: list[str] = validate_special_tokens(special_tokens)
        self._given_ids = dict(special_tokens) if isinstance(special_tokens, Mapping) else None
        self._pattern = resolve_pattern(pattern)
        if not isinstance(cache_bytes, int) or cache_bytes < 0:
            raise ValueError(f"cache_bytes must be a non-negative int, got {cache_bytes!r}")
        self.cache_bytes = cache_bytes
        self._build()

    # ----------------------------------------------------------------------------------------------- construction

    def _build(self) -> None:
        """Derive every lookup table from vocab, merges and special tokens (also run after unpickling)."""
        self._token_ids: dict[bytes, int] = vocab_index(self._vocab, MAX_ID)
        self._special_ids = place_special_tokens(self._vocab, self._token_ids, self._special_tokens, self._given_ids)
        if max(self._special_ids.values(), default=0) > MAX_ID:
            raise ValueError(f"token ids must be ints from 0 to {MAX_ID}, got {max(self._special_ids.values())}")
        self._special_id_bytes = {special: pack_ids([(token_id,)])[0]
                                  for special, token_id in self._special_ids.items()}
        self._special_id_set = set(self._special_ids.values())
        self._splitter = SpecialTokenSplitter(self._special_tokens)
        self._pretokenizer = compile_pattern(self._pattern)
        self._byte_ids: dict[int, int] = {byte: self._token_ids[bytes([byte])] for byte in range(256)
                                          if bytes([byte]) in self._token_ids}
        # (left id, right id) -> rank, and rank -> id of the merged token.
        self._pair_ranks, self._merged_ids = merge_table(self._token_ids, self._merges)
        self._batch_tables: BatchTables | None = None  # built on the first large batch of new pre-tokens
        self._cache = PretokenCache(self._merge_pretokens, self.cache_bytes)

    # ------------------------------------------------------------------------------------------------- properties

    @property
    def pattern(self) -> str:
        """The pre-tokenization pattern's regex text (`hf_bpe.pretokenize.preset_name` gives a preset's name).

        >>> preset_name(Tokenizer({i: bytes([i]) for i in range(256)}, [], pattern="gpt4").pattern)
        'cl100k'
        """
        return self._pattern

    @property
    def ignore_merges(self) -> bool:
        """Whether a pre-token that is a token of the vocab is encoded as that token without merging."""
        return self._ignore_merges

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
    def special_token_ids(self) -> Mapping[str, int]:
        """special token -> id, as tiktoken's `special_tokens` (read-only)."""
        return MappingProxyType(self._special_ids)

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

    def encode(self, text: str, *, allowed_special: SpecialChoice = "all",
               disallowed_special: SpecialChoice = "all") -> list[int]:
        """Encode text: special tokens first (longest first), the pre-tokens of the text between them merged.

        `allowed_special` and `disallowed_special` are tiktoken's (`allowed_and_disallowed`), with every special token
        allowed by default: text holding a disallowed one raises InputError (a ValueError) naming it and its offset,
        and special tokens neither allowed nor disallowed are encoded as ordinary text (`disallowed_special=()` with
        `allowed_special=set()` encodes all of them so). Lone surrogates (possible in Python strings, not in UTF-8)
        become U+FFFD, as in tiktoken.

        >>> tokenizer = Tokenizer({i: bytes([i]) for i in range(256)} | {256: b" a"}, [(b" ", b"a")])
        >>> tokenizer.encode("a a"), tokenizer.encode("a\\ud800")
        ([97, 256], [97, 239, 191, 189])
        """
        if not isinstance(text, str):
            raise TypeError(f"encode expects str, got {type(text).__name__}")
        if allowed_special == "all" and disallowed_special == "all":
            return unpack_ids(self._encode_texts([text])[0])
        return unpack_ids(self._encode_texts([text], self._allowed(allowed_special, disallowed_special, [text]))[0])

    def encode_to_numpy(self, text: str, *, allowed_special: SpecialChoice = "all",
                        disallowed_special: SpecialChoice = "all") -> np.ndarray:
        """`encode(text, ...)` as a read-only uint32 array, made without Python ints (faster for token arrays).

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, []).encode_to_numpy("ab")
        array([97, 98], dtype=uint32)
        """
        if not isinstance(text, str):
            raise TypeError(f"encode_to_numpy expects str, got {type(text).__name__}")
        splitter = (None if allowed_special == "all" and disallowed_special == "all"
                    else self._allowed(allowed_special, disallowed_special, [text]))
        return np.frombuffer(self._encode_texts([text], splitter)[0], dtype=ID_DTYPE)

    def encode_batch(self, texts: Sequence[str], num_workers: int | None = None, *,
                     allowed_special: SpecialChoice = "all", disallowed_special: SpecialChoice = "all"
                     ) -> list[list[int]]:
        """Encode many texts, in `num_workers` processes (default: one per usable CPU) when there is enough text;
        `allowed_special` and `disallowed_special` as in `encode` (every text is checked before any is encoded).

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, []).encode_batch(["a", "bc"])
        [[97], [98, 99]]
        """
        return list(map(unpack_ids, self._encode_batch(texts, num_workers, allowed_special, disallowed_special)))

    def encode_batch_to_numpy(self, texts: Sequence[str], num_workers: int | None = None, *,
                              allowed_special: SpecialChoice = "all", disallowed_special: SpecialChoice = "all"
                              ) -> list[np.ndarray]:
        """`encode_batch` as read-only uint32 arrays, made without Python ints (faster for token arrays).

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, []).encode_batch_to_numpy(["a", "bc"])[1]
        array([98, 99], dtype=uint32)
        """
        return [np.frombuffer(ids, dtype=ID_DTYPE)
                for ids in self._encode_batch(texts, num_workers, allowed_special, disallowed_special)]

    def encode_bytes(self, data: bytes) -> list[int]:
        """Encode bytes that may not be UTF-8 as tiktoken's `Encoding._encode_bytes` does: UTF-8 as its text with
        special tokens as ordinary text, else as `hf_bpe.encode.byte_encoding` says; `decode` of the ids gives them
        back.

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, []).encode_bytes(b"a\\xff")
        [97, 255]
        """
        return encode_bytes(self, data)

    def _encode_batch(self, texts: Sequence[str], num_workers: int | None, allowed_special: SpecialChoice,
                      disallowed_special: SpecialChoice) -> list[bytes]:
        texts = list(texts)
        for text in texts:
            if not isinstance(text, str):
                raise TypeError(f"encode_batch expects str texts, got {type(text).__name__}")
        splitter = (None if allowed_special == "all" and disallowed_special == "all"
                    else self._allowed(allowed_special, disallowed_special, texts))
        from hf_bpe.common.parallel import default_num_workers, process_pool

        if num_workers is None:
            num_workers = default_num_workers()
        if num_workers <= 1 or len(texts) < 2 or sum(map(len, texts)) < _MIN_PARALLEL_LENGTH:
            return self._encode_texts(texts, splitter)
        with process_pool(num_workers, self) as pool:  # workers send bytes back: they pickle far faster than lists
            batches = batches_by_length(texts, num_workers * 4)
            results = pool.map(partial(encode_in_worker, splitter=splitter), batches)
        return [ids for batch in results for ids in batch]

    def encode_iterable(self, iterable: Iterable[str], *, allowed_special: SpecialChoice = "all",
                        disallowed_special: SpecialChoice = "all") -> Iterator[int]:
        """Yield the ids of "".join(iterable), holding only a bounded window of the text.

        With a preset pattern, memory stays bounded whatever the length of the text: the text window (64K
        characters, more only while one pre-token is longer) plus the cache, at most `cache_bytes` (default
        256 MiB). A custom pattern has no safe cut: each document (text between special tokens) is held whole.

        Buffered text is encoded up to its last safe cut: a position where cutting provably does not change the
        result (the pattern's safe cut, `CompiledPattern.safe_cut`, or a special token's edge), far enough from the
        end that any special token or pre-token across it is already complete. `allowed_special` and
        `disallowed_special` as in `encode`; a disallowed token raises when the stream reaches it.

        >>> list(Tokenizer({i: bytes([i]) for i in range(256)}, []).encode_iterable(["a", "b"]))
        [97, 98]
        """
        for ids in self._encode_stream(iterable, "encode_iterable", allowed_special, disallowed_special):
            yield from unpack_ids(ids)

    def encode_iterable_to_numpy(self, iterable: Iterable[str], *, allowed_special: SpecialChoice = "all",
                                 disallowed_special: SpecialChoice = "all") -> Iterator[np.ndarray]:
        """`encode_iterable` as read-only uint32 arrays, one per window of text (the ids never become Python ints).

        >>> tokenizer = Tokenizer({i: bytes([i]) for i in range(256)}, [])
        >>> [array.tolist() for array in tokenizer.encode_iterable_to_numpy(["a", "b"])]
        [[97, 98]]
        """
        # No name holds a window's ids here: the caller's array is their only reference, and frees them.
        yield from map(partial(np.frombuffer, dtype=ID_DTYPE),
                       self._encode_stream(iterable, "encode_iterable_to_numpy", allowed_special, disallowed_special))

    def _encode_stream(self, iterable: Iterable[str], caller: str, allowed_special: SpecialChoice,
                       disallowed_special: SpecialChoice) -> Iterator[bytes]:
        """The packed ids of each window of the text (`stream_windows`: cut at the allowed special tokens' edges),
        each checked for disallowed ones before it is encoded."""
        splitter = self._allowed(allowed_special, disallowed_special, [])
        disallowed = allowed_and_disallowed(self._special_tokens, allowed_special, disallowed_special)[1]
        windows = stream_windows(iterable, caller, splitter, self._pretokenizer.safe_cut, _STREAM_WINDOW)
        for window in check_stream(windows, disallowed) if disallowed else windows:
            yield self._encode_texts([window], splitter)[0]

    def _allowed(self, allowed_special: SpecialChoice, disallowed_special: SpecialChoice,
                 texts: list[str]) -> SpecialTokenSplitter:
        """The splitter of the allowed special tokens, once `texts` are checked for disallowed ones."""
        allowed, disallowed = allowed_and_disallowed(self._special_tokens, allowed_special, disallowed_special)
        check_disallowed(texts, disallowed)
        return self._splitter if len(allowed) == len(self._special_tokens) else splitter_of(allowed)

    def _encode_texts(self, texts: list[str], splitter: SpecialTokenSplitter | None = None) -> list[bytes]:
        """Encode texts (ids as bytes, see `hf_bpe.encode.cache`): special tokens first (longest first; those of
        `splitter`, by default all), then the pre-tokens of the text between them.

        Each segment's ids are looked up in one call. A segment with pre-tokens missing from the cache holds markers;
        once enough missing pre-tokens have gathered (and at the end), they are merged in one batch and the markers
        replaced.
        """
        # Encoding allocates millions of small objects (the cache's keys and values) and no reference cycles: with the
        # cyclic garbage collector paused, a first pass over text runs faster (it would otherwise traverse the
        # growing cache again and again). It resumes, and catches up, when the call returns.
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._encode_segments(texts, self._splitter if splitter is None else splitter)
        finally:
            if collecting:
                gc.enable()

    def _encode_segments(self, texts: list[str], splitter: SpecialTokenSplitter) -> list[bytes]:
        """The packed ids of each text, built from *parts*: a special token's id, or a segment's pre-tokens' ids.

        The invariant: a part holds one marker (`PENDING_IDS`) per pre-token that was missing from the cache when the
        part was looked up, in text order, and those pre-tokens are `cache.waiting[first:]` from the `first` recorded
        with the part in `marked`, up to the next marked part's `first`. `_fill_marked` merges every waiting
        pre-token and replaces each part's markers with their ids, so no marker survives past this method: it runs
        whenever `_PENDING_BATCH` pre-tokens wait, and once at the end.
        """
        cache = self._cache
        lookup, waiting = cache.__getitem__, cache.waiting
        pretokenizer = self._pretokenizer
        findall_ascii, findall = pretokenizer.findall_ascii, pretokenizer.findall
        split_keeping = splitter.split_keeping if splitter else None
        results: list[list[bytes]] = []  # per text, the ids of its segments and special tokens
        marked: list[tuple[list[bytes], int, int]] = []  # (segments' ids, index, its first marker in `waiting`)
        for text in texts:
            text = replace_surrogates(text)
            parts: list[bytes] = []
            for index, part in enumerate([text] if split_keeping is None else split_keeping(text)):
                if index % 2:
                    parts.append(self._special_id_bytes[part])
                    continue
                batches = (((findall_ascii if part.isascii() else findall)(part),) if len(part) <= _SEGMENT_CHARS
                           else pretokenizer.pretoken_batches(part, _SEGMENT_CHARS))
                for pretokens in batches:
                    before = len(waiting)
                    parts.append(b"".join(map(lookup, pretokens)))
                    if len(waiting) != before:
                        marked.append((parts, len(parts) - 1, before))
                        if len(waiting) >= _PENDING_BATCH:
                            _fill_marked(cache, marked)
            results.append(parts)
        if marked:
            _fill_marked(cache, marked)
        return [parts[0] if len(parts) == 1 else b"".join(parts) for parts in results]

    def _merge_pretokens(self, pretokens: list[str]) -> list[bytes]:
        return self.merge_pretoken_bytes(list(map(str.encode, pretokens)))

    def merge_pretoken_bytes(self, words: Sequence[bytes]) -> list[bytes]:
        """The ids of each pre-token given as its bytes, packed as `hf_bpe.encode.cache.pack_ids` packs them (read
        them with `np.frombuffer(..., ID_DTYPE)`): one numpy batch for many (hf_bpe.encode.merge_kernels), else one at
        a time. The words are not pre-tokenized again and not cached (e.g. the distinct pre-tokens of training counts).

        >>> tokenizer = Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"ab"}, [(b"a", b"b")])
        >>> [unpack_ids(ids) for ids in tokenizer.merge_pretoken_bytes([b"abc", b"\\xff"])]
        [[256, 99], [255]]
        """
        return self._merge_or_look_up(words) if self._ignore_merges else self._merge_all(words)

    def merge_pretoken_arrays(self, words: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """`merge_pretoken_bytes` as two arrays, every word's ids end to end (`ID_DTYPE`) and how many each has: a
        batch straight from the numpy kernel's arrays (`merge_batch_arrays`), with no bytes object per word."""
        if (len(words) >= MIN_BATCH_MERGE and not self._ignore_merges
                and type(self).merge_pretoken_bytes is Tokenizer.merge_pretoken_bytes  # not overridden
                and max(map(len, words)) <= LONG_WORD_BYTES):
            try:
                return merge_batch_arrays(words, self._tables(), ID_DTYPE)
            except MissingByteError:
                pass  # the path below names the pre-token
        packed = self.merge_pretoken_bytes(words)
        sizes = np.fromiter(map(len, packed), dtype=np.intp, count=len(packed)) // ID_DTYPE.itemsize
        return np.frombuffer(b"".join(packed), dtype=ID_DTYPE), sizes

    def _merge_all(self, words: Sequence[bytes]) -> list[bytes]:
        """`merge_pretoken_bytes` without looking words up whole."""
        if max(map(len, words), default=0) > LONG_WORD_BYTES:  # giant pre-tokens: in bounded memory
            short = iter(self._merge_all([word for word in words if len(word) <= LONG_WORD_BYTES]))
            return [self._merge_long_word(word) if len(word) > LONG_WORD_BYTES else next(short) for word in words]
        if len(words) >= MIN_BATCH_MERGE:
            try:
                return merge_batch_packed(words, self._tables(), ID_DTYPE)
            except MissingByteError:
                pass  # the scalar path below names the pre-token
        return pack_ids(list(map(self._merge_word, words)))

    def _merge_or_look_up(self, words: Sequence[bytes]) -> list[bytes]:
        """`merge_pretoken_bytes` with `ignore_merges`: a word that is an ordinary token is that token, as tiktoken and
        `tokenizers` look a pre-token up before merging (see `hf_bpe.formats.tiktoken_merges`)."""
        found = list(map(self._token_ids.get, words))
        if not self._special_id_set.isdisjoint(found):
            found = [None if token_id in self._special_id_set else token_id for token_id in found]
        merged = iter(self._merge_all(list(compress(words, map(operator.is_, found, repeat(None))))))
        return [next(merged) if token_id is None else token_id.to_bytes(4, "little") for token_id in found]

    def _tables(self) -> BatchTables:
        if self._batch_tables is None:
            self._batch_tables = BatchTables(self._byte_ids, self._pair_ranks, self._merged_ids)
        return self._batch_tables

    def _merge_long_word(self, word: bytes) -> bytes:
        """One giant pre-token's packed ids: `hf_bpe.encode.long_words` (about 16 bytes per byte of it), else (merges
        that are not monotone, a byte without a token: named there) the heap kernel (over 100 bytes per byte)."""
        packed = merge_long_word_packed(word, self._tables(), ID_DTYPE)
        return packed if packed is not None else pack_ids([self._merge_word(word)])[0]

    def _merge_word(self, word: bytes) -> tuple[int, ...]:
        """Merge the bytes of one pre-token."""
        if len(word) == 1 and word in self._token_ids:
            return (self._token_ids[word],)
        try:
            ids = list(map(self._byte_ids.__getitem__, word))
        except KeyError as error:
            raise ValueError(f"byte {error.args[0]:#04x} has no token in the vocab, so "
                             f"{word.decode('utf-8', 'replace')!r} cannot be encoded") from None
        return tuple(merge_ids(ids, self._pair_ranks, self._merged_ids))

    def cache_size(self) -> int:
        """The bytes the encoder's cache holds now, as counted against `cache_bytes`."""
        return self._cache.size()

    # --------------------------------------------------------------------------------------------------- decoding

    def decode(self, ids: Iterable[int]) -> str:
        """Decode ids (a list, a numpy array, any iterable of ints) to text; byte sequences that are not valid UTF-8
        become U+FFFD.

        Memory (`hf_bpe.encode.decoding`): besides the ids and the returned str, the text's UTF-8 bytes once and what
        `bytes.decode` needs to build the str: about 3.5 bytes per id for ASCII English with GPT-2's vocab (3 bytes
        of text per id), up to 10 when the str takes 4 bytes per character; one join of all ids took 77-91.

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, []).decode(np.array([104, 105], dtype=np.uint32))
        'hi'
        """
        return join_tokens(ids, self._vocab.__getitem__, self.id_to_token).decode("utf-8", errors="replace")

    def decode_with_offsets(self, ids: Iterable[int]) -> tuple[str, list[int]]:
        """The text of `ids` and the character offset of each token in it, as tiktoken's `decode_with_offsets` gives
        them (`hf_bpe.encode.byte_encoding`); UnicodeDecodeError when the bytes are not UTF-8.

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, []).decode_with_offsets([104, 0xC3, 0xA9])
        ('hé', [0, 1, 1])
        """
        return decode_with_offsets(self, ids)

    # --------------------------------------------------------------------------------------------------- pickling

    def __getstate__(self) -> dict[str, Any]:
        return {"vocab": self._vocab, "merges": self._merges, "special_tokens": self._given_ids or self._special_tokens,
                "cache_bytes": self.cache_bytes, "pattern": self._pattern, "ignore_merges": self._ignore_merges}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._vocab = dict(state["vocab"])
        self._merges = list(state["merges"])
        self._special_tokens = list(state["special_tokens"])
        self._given_ids = dict(state["special_tokens"]) if isinstance(state["special_tokens"], dict) else None
        self.cache_bytes = state.get("cache_bytes", DEFAULT_CACHE_BYTES)
        self._pattern = state.get("pattern", GPT2_PATTERN)
        self._ignore_merges = state.get("ignore_merges", False)
        self._build()

    def __repr__(self) -> str:
        pattern = "" if self._pattern == GPT2_PATTERN else f", pattern={preset_name(self._pattern) or self._pattern!r}"
        return (f"Tokenizer(vocab_size={self.vocab_size}, merges={len(self._merges)}, "
                f"special_tokens={self._special_tokens!r}{pattern})")


def _fill_marked(cache: PretokenCache, marked: list[tuple[list[bytes], int, int]]) -> None:
    """Merge the pre-tokens waiting in the cache and replace the markers in the marked parts' ids (the invariant is
    stated on `Tokenizer._encode_segments`)."""
    waiting = cache.waiting[:]
    values = cache.resolve()
    ends = [start for _, _, start in marked[1:]] + [len(waiting)]
    for (parts, index, start), end in zip(marked, ends):
        parts[index] = replace_markers(parts[index], list(map(values.__getitem__, waiting[start:end])))
    marked.clear()
