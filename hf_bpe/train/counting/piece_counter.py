"""`PieceCounter`: pre-token counts of text, through a table of distinct pieces.

No pre-token crosses a piece (`hf_bpe.pretokenize.gpt2.split_into_pieces`), so pieces are counted in C with
`collections.Counter`, and the slow pattern runs once per distinct piece; a pre-token's count is the sum of its
pieces' counts. When the piece table passes `max_pieces` entries it is converted (`flush`), so memory is bounded by
the distinct pre-tokens, not the corpus.

Other patterns (`hf_bpe.pretokenize.patterns`): the presets' pieces are the text between their safe cuts, pre-tokenized
the same way; a custom pattern has no safe cut, so its pieces are the pre-tokens themselves, one `findall` per
document (in batches of matches for a document longer than SEGMENT_CHARS), and so are superword's
(`CompiledPattern.counts_pretokens`: its pieces, the text between numbers, rarely repeat).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Protocol, TypeVar

from hf_bpe.pretokenize import (
    GPT2_ASCII_REGEX,
    GPT2_REGEX,
    WHITESPACE_CHARS,
    CompiledPattern,
    SpecialTokenSplitter,
    compile_pattern,
    resolve_pattern,
)

# A piece table with more entries than this is converted to pre-token counts (about 60 MB of pieces per worker).
MAX_PIECES = 1 << 19
# A document longer than this many characters is cut into pieces one segment at a time (`safe_segments`).
SEGMENT_CHARS = 1 << 20
_WHITESPACE = frozenset(WHITESPACE_CHARS)
# A unit of counting work: a file chunk `(path, start, end)` or a batch of texts (`hf_bpe.train.counting.count`).
Task = TypeVar("Task")


class Tally(Protocol):
    """What a counting task's conversion may make instead of pre-token counts (`count_pretokens_in_files(...,
    convert=)`; SuperBPE's stage-2 tables, `hf_bpe.train.starts.superword_passes.StageTwoCounts`): tables that add up
    like a Counter, in the workers and in the parent (`add_counts`), and say when a worker should hand them over
    (`full`; pre-token counts are handed over as soon as there are any). One may also convert piece tables itself
    (`PieceCounter.flush`'s `add_pieces`)."""

    def __len__(self) -> int: ...

    def update(self, other: Tally) -> None: ...

    def full(self) -> bool: ...


class PieceCounter:
    """Counts the pieces (`split_into_pieces`) of texts, and turns them into pre-token counts.

    The piece table is converted to pre-token counts (`flush`) when it passes `max_pieces` entries (default
    `MAX_PIECES`), and at the end. `pattern` is a preset name or regex text (None: GPT-2's).

    >>> counter = PieceCounter(["<s>"])
    >>> counter.add_text("a cat<s> a cat")
    >>> counter.pieces
    Counter({' cat': 2, 'a': 1, ' a': 1})
    >>> sorted(counter.pretoken_counts().items())
    [(b' a', 1), (b' cat', 2), (b'a', 1)]
    """

    def __init__(self, special_tokens: Sequence[str] = (), max_pieces: int | None = None, *,
                 pattern: str | None = None) -> None:
        self.pieces: Counter[str] = Counter()
        self.pretokens: Counter[bytes] = Counter()  # of the pieces converted so far
        self.max_pieces = MAX_PIECES if max_pieces is None else max_pieces
        self._splitter = SpecialTokenSplitter(special_tokens)
        self._pattern: CompiledPattern = compile_pattern(resolve_pattern(pattern))

    @property
    def pattern(self) -> str:
        """The regex text the counter pre-tokenizes with."""
        return self._pattern.pattern

    @property
    def compiled(self) -> CompiledPattern:
        """The compiled pattern the counter pre-tokenizes with."""
        return self._pattern

    def add_text(self, text: str, pattern: str | None = None) -> None:
        """Count the pieces of one text (its special tokens split it into documents and are dropped).

        `pattern` (regex text), if given, is the pattern to count with: the counting engines make counters with the
        default pattern and the counting task names its own. A counter with pieces or pre-tokens of another pattern
        refuses it (ValueError), as their pieces would not be comparable.
        """
        if pattern is not None and pattern != self._pattern.pattern:
            if self.pieces or self.pretokens:
                raise ValueError("a PieceCounter counts with one pattern: this one holds counts of another")
            self._pattern = compile_pattern(pattern)
        compiled = self._pattern
        for document in self._splitter.split(text) if self._splitter else (text,):
            if len(document) <= SEGMENT_CHARS:
                self.pieces.update(compiled.counted(document))
            else:
                parts = (compiled.pretoken_batches(document, SEGMENT_CHARS) if compiled.counts_pretokens
                         else map(compiled.pieces, compiled.segments(document, SEGMENT_CHARS)))
                for pieces in parts:  # never the list of all the document's pieces
                    self.pieces.update(pieces)
                    if len(self.pieces) > self.max_pieces:
                        self.flush()  # a new piece table
        if len(self.pieces) > self.max_pieces:
            self.flush()

    def flush(self) -> None:
        """Convert the piece table into pre-token counts (added to `pretokens`) and empty it. A `Tally` with an
        `add_pieces(pieces, compiled pattern)` method converts the table itself (per-source counts,
        `hf_bpe.train.counting.source_counts`: one table holds all the sources a worker meets)."""
        if not self.pieces:
            return
        add_pieces = getattr(self.pretokens, "add_pieces", None)
        if add_pieces is not None:
            pieces, self.pieces = self.pieces, Counter()
            add_pieces(pieces, self._pattern)
            return
        converted = self._pretokens_of_pieces()
        self.pieces = Counter()
        if not self.pretokens:
            self.pretokens = Counter({pretoken.encode(): count for pretoken, count in converted.items()})
            return
        pretokens = self.pretokens
        get = pretokens.get
        for pretoken, count in converted.items():
            key = pretoken.encode()
            pretokens[key] = get(key, 0) + count

    def ready(self) -> bool:
        """Whether counts wait to be handed over (to a local engine's parent): pre-token counts as soon as a piece
        table is converted, a `Tally` once it is full."""
        full = getattr(self.pretokens, "full", None)
        return bool(self.pretokens) if full is None else full()

    def pretoken_counts(self) -> Counter[bytes]:
        """The pre-token counts of everything added so far, keyed by UTF-8 bytes. The counter is empty afterwards
        (its memory goes with the result), ready for more text."""
        self.flush()
        counts, self.pretokens = self.pretokens, Counter()
        return counts

    def _pretokens_of_pieces(self) -> Counter[str]:
        """The pre-token counts of the piece table: each distinct piece pre-tokenized once, with stdlib `re` when ASCII.

        One route for every piece. Rejected: grouping pieces by count and pre-tokenizing each group with one regex
        call on its concatenation (joined with "\\n" separators whose counts were subtracted again) measured no
        faster, and its long lists of pre-tokens doubled the memory a conversion needs.
        """
        counts: Counter[str] = Counter()
        compiled = self._pattern
        if compiled.counts_pretokens:
            return self.pieces
        if not compiled.is_gpt2:
            ascii_findall, findall = compiled.findall_ascii, compiled.findall
            for piece, count in self.pieces.items():
                for pretoken in ascii_findall(piece) if piece.isascii() else findall(piece):
                    counts[pretoken] += count
            return counts
        ascii_findall, findall = GPT2_ASCII_REGEX.findall, GPT2_REGEX.findall
        for piece, count in self.pieces.items():
            if piece[-1] in _WHITESPACE:  # a run of whitespace: one pre-token (a piece ends in whitespace only then)
                counts[piece] += count
                continue
            for pretoken in ascii_findall(piece) if piece.isascii() else findall(piece):
                counts[pretoken] += count
        return counts


def add_counts(total: Tally, counts: Tally) -> Tally:
    """`total` plus `counts`, summed into the larger of the two (which is returned): the smaller one is added. Either
    may be pre-token counts or another `Tally` (an empty one is no tally of any kind, so either may be an empty
    Counter).

    >>> add_counts(Counter({b"a": 1}), Counter({b"a": 2, b"b": 1})) == Counter({b"a": 3, b"b": 1})
    True
    """
    if not counts:
        return total
    if not total:
        return counts
    if len(counts) > len(total):
        total, counts = counts, total
    total.update(counts)
    return total
