"""SuperBPE's stage 2 in counting passes, so that no process holds the corpus's stage-1 ids: what the counting
workers (local processes or Ray actors) send back are small tables, and the merge loop runs over distinct parts of
documents, the way plain training runs over distinct pre-tokens.

A stage-2 pre-token is a document between numbers, which the corpus rarely holds twice. Each counting worker splits
the pre-tokens of the chunk it counts into stage-1 tokens (`StageOneTokenizer.segmented_arrays`) and makes of them
(`StageTwoPass`), as `StageTwoCounts`:

- the counts of the distinct adjacent pairs of stage-1 tokens (`PairTally`: sorted codes and their totals);
- the chunk cut between two stage-1 tokens wherever their pair is not in a set of frequent pairs
  (`superword_words.cut_at_rare_pairs`), the parts counted as distinct sequences of stage-1 ids.

`train_superwords` runs the passes:

1. **A sample.** The pairs of about one byte in `SAMPLE_EVERY` of the stage-2 pre-tokens, spread over the whole
   corpus (windows of a few KB, `hf_bpe.train.counting.sampling`: the rest of files is not read, the rest of other
   texts not counted), to guess which pairs matter: the last merge will count more than half the n-th largest
   pair count, for n merges (`guess_last_count`), and the pairs the sample counts at a third of it
   (`SAMPLE_DIVISOR`) less four standard deviations (of a count sampled at that rate) or more are kept whole (not
   cut) in the next pass.
   When the sample is too small for that (a guess below `MIN_SAMPLED_GUESS` in its counts), every pair is counted
   in a pass of its own instead; given a directory (`keep_segmentation_in`), that pass keeps what it segmented
   there, and the next passes read it instead of the corpus (`segmentation_files`). A corpus known to be at most
   `KEEP_FIRST_BYTES` has no sample: the pass counting every pair, its segmentation kept, comes first.
2. **The parts, and every pair counted exactly.** With the exact counts, the cut is set to the guess made again, or
   higher: above every pair that was cut, so that no merge counting the cut or more ever joins across a cut place
   (the lemma of `cut_at_rare_pairs`); the parts the sample kept whole where their pair counts less than the cut
   are cut again in the parent (`PartTally.recut`). After a pass that counted every pair, this one counts the parts
   only (`count_pairs=False`), as do the passes of step 3. The merge loop then runs over the distinct parts down to
   the cut: its merges and final segmentation are those of merging the whole documents. A cut more than
   `FAR_ABOVE_GUESS` times the guess (the sample missed a pair frequent in a few places only) would stop merging far
   short of `vocab_size`: the parts are then counted again at the guess (as in step 3) before any merge.
3. **Lower cuts, rarely.** Were the cut too high for `vocab_size` (merging ran out of pairs counting it or more:
   the sample missed a pair that the exact counts put above the guess), the cut is lowered, the parts are counted
   again at it (from the segmentation the parts pass kept, given a directory: a pass over the corpus costs a few
   times as much), and merging goes on from the merges made so far: each part's stage-1 ids are split by the
   stage-2 merges made, in rank order (`merge_id_batch_arrays`, in `PartTally.words`), which is the segmentation
   that making them in turn reached, and merging goes on from there (the extension's start state,
   `base_words.continue_words`). At a cut of 1 no pair is cut: only a corpus too small for the vocabulary asked of
   it gets there.

The merges are exactly those of merging the documents whole (`hf_bpe.train._reference.reference_superword_train`).
Memory: each worker holds one chunk's pre-tokens, its piece cache (`superword.PIECE_CACHE`) and the tables it has
not handed over yet (`StageTwoCounts.full`); the parent, the distinct parts and the pair table (a few bytes per
distinct part id and per distinct pair), and sorting them when they are added up. Measured in docs/benchmarks.md.

>>> from hf_bpe import train_bpe_from_iterator
>>> texts = ["the cat sat on the mat. the cat sat."] * 3
>>> vocab, merges = train_bpe_from_iterator(texts, 268, superword_from=262)
>>> [vocab[token_id] for token_id in range(262, 268)]
[b'cat ', b'cat sat', b' the ', b'the ', b'the cat sat', b'the cat sat ']
"""

from __future__ import annotations

import copy
import math
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hf_bpe.common.errors import InputError
from hf_bpe.common.files import PathArg, open_binary
from hf_bpe.common.parallel import large_allocations_mapped, release_free_memory
from hf_bpe.encode.merge_kernels import BatchTables
from hf_bpe.encode.tokenizer import Tokenizer
from hf_bpe.pretokenize import preset_name
from hf_bpe.pretokenize.superword import SUPERWORD_NAME
from hf_bpe.train.checks import report_training
from hf_bpe.train.counting.count import find_chunk_boundaries
from hf_bpe.train.merging.merge_loop import Merges, Vocab, _merge
from hf_bpe.train.starts.base_words import continue_words
from hf_bpe.train.starts.segmentation_files import (
    count_segmentation_files,
    room_for,
    save_segmentation,
    segmentation_files,
)
from hf_bpe.train.starts.superword import StageOneTokenizer, ordinary_vocab, stage_one_tokenizer
from hf_bpe.train.starts.superword_words import (
    PairCounts,
    arrays_words,
    guess_last_count,
    segment_dtype,
)
from hf_bpe.train.starts.tallies import PairTally, PartTally

# The first pass counts the pairs of about one byte of the corpus in this many: a window of a few KB in every
# SAMPLE_EVERY (`hf_bpe.train.counting.sampling`: a document's text is sampled throughout, so that pairs frequent in
# one part of the corpus only are seen too).
SAMPLE_EVERY = 16
# A guess from the sample below this (in the sample's counts) leaves pairs at the cut too few occurrences to be told
# apart from rare ones: the pairs are then counted in full, in a pass of their own (a corpus of a few hundred MB).
MIN_SAMPLED_GUESS = 16
# A corpus of at most this many bytes, when its segmentation can be kept, is counted whole at once, with no sample
# before: the sample of a corpus of a few hundred MB or less is too small to use (MIN_SAMPLED_GUESS) at the usual
# vocab sizes, and reading it for nothing costs more than counting the parts from kept files when it would have done.
KEEP_FIRST_BYTES = 1 << 28
# The longest stretch of text with no place the superword pattern may be cut (a number, a special token) that stage 2
# takes: the workers segment each stage-2 pre-token whole, in tens of times its bytes (`check_stage_two_files`, and
# `StageTwoPass` for texts that are not files).
MAX_STRETCH_BYTES = 1 << 22
# A worker hands its tables to the parent once they hold this many distinct parts or pairs (tens of MB).
HANDOVER_PARTS = 1 << 18
HANDOVER_PAIRS = 1 << 21
# The sample keeps whole the pairs it counts at the n-th largest count over this (less four standard deviations), for n
# merges: the cut is then set above every pair it left out (`train_superwords`), and a windowed sample's counts spread
# far more than a binomial's, so it keeps a margin below the half that the exact counts' guess takes.
SAMPLE_DIVISOR = 3
# A cut more than this many times the guess at the last merge's count (`guess_last_count`) is far above it: the parts
# are counted again at the guess before any merge (`train_superwords`).
FAR_ABOVE_GUESS = 2


class StageTwoCounts:
    """What a stage-2 pass counts (`StageTwoPass`): the distinct `parts` of documents (`PartTally`: sequences of
    stage-1 ids) and the `pairs` of stage-1 tokens (`PairTally`). They add up like pre-token counts, in the counting
    engines (`hf_bpe.train.counting.piece_counter.add_counts`)."""

    def __init__(self, parts: PartTally | None = None, pairs: PairTally | None = None) -> None:
        self.parts = PartTally(np.uint16) if parts is None else parts
        self.pairs = PairTally() if pairs is None else pairs

    def __len__(self) -> int:
        return len(self.parts) + len(self.pairs)

    def update(self, other: StageTwoCounts) -> None:
        self.parts.update(other.parts)
        self.pairs.update(other.pairs)
        # Adding up sorts the tables into new arrays and frees the old ones, which glibc would keep in the heap: given
        # back at once, the parent's memory is the tables' own (docs/benchmarks.md), not the sum of its sorts.
        release_free_memory()

    def full(self) -> bool:
        """Whether a worker should hand these over now (they hold `HANDOVER_PARTS` parts or `HANDOVER_PAIRS`
        pairs), rather than add the next tasks' to them."""
        return len(self.parts) >= HANDOVER_PARTS or len(self.pairs) >= HANDOVER_PAIRS


class StageTwoPass:
    """The counting workers' conversion of one task's stage-2 pre-token counts (`count_pretokens_in_files(...,
    convert=)`) into `StageTwoCounts`: the pairs of their stage-1 tokens, and with `cut`, their parts cut between
    two tokens wherever the pair's code is not in `kept` (ascending codes; None: cut nowhere, the pre-tokens whole).
    With `sample` > 1, the pass asks the counting for about one byte in `sample` of the corpus, which it converts
    with `counting_all()` (`hf_bpe.train.counting.sampling`). With `keep_in`, a directory, each conversion's
    segmentation is also written there (`segmentation_files`). With `count_pairs=False`, the parts only, their pairs
    being known from a pass before (its `pairs` are empty). Picklable, for Ray."""

    def __init__(self, tokenizer: Tokenizer, cut: bool = True, kept: np.ndarray | None = None, sample: int = 1,
                 keep_in: str | None = None, count_pairs: bool = True) -> None:
        self.tokenizer = tokenizer if isinstance(tokenizer, StageOneTokenizer) else StageOneTokenizer(
            tokenizer.vocab, tokenizer.merges)
        self.cut, self.kept, self.sample, self.keep_in = cut, kept, sample, keep_in
        self.count_pairs = count_pairs
        self.num_ids = max(self.tokenizer.vocab) + 1
        self.dtype = segment_dtype(self.num_ids)

    def counting_all(self) -> StageTwoPass:
        """This pass, counting all it is given: what converts the windows that the counting reads or takes for a
        pass with `sample` > 1 (`hf_bpe.train.counting.sampling`)."""
        whole = copy.copy(self)
        whole.sample = 1
        return whole

    def __call__(self, counts: Counter[bytes]) -> StageTwoCounts:
        longest = max(map(len, counts), default=0)
        if longest > 2 * MAX_STRETCH_BYTES:
            raise InputError(f"a text holds {longest:,} bytes with no number and no special token: SuperBPE's stage 2 "
                             f"merges the text between two numbers whole, and takes at most "
                             f"{2 * MAX_STRETCH_BYTES:,} bytes of it; cut the documents with a special token")
        arrays = self.tokenizer.segmented_arrays(counts)
        if self.keep_in is not None:  # for the next passes (`segmentation_files`)
            save_segmentation(self.keep_in, arrays)
        counted = self.count_segmented(*arrays)
        del arrays
        # The segmentation's temporaries are tens of MB, which glibc keeps in the heap once its threshold for
        # mapping arrays of their own has risen: given back, the workers' memory stays near one task's.
        release_free_memory()
        return counted

    def count_segmented(self, data: np.ndarray, lengths: np.ndarray, counts: np.ndarray) -> StageTwoCounts:
        """What this pass counts of segmented pre-tokens (`segmented_arrays`), whether segmented now or kept."""
        single = np.zeros(self.num_ids, dtype=np.uint64) if self.cut else None
        words = arrays_words(data, lengths, counts, [None] * self.num_ids, single)
        pairs = PairCounts(words, count=self.count_pairs, frequent=self.kept if self.cut else None)
        parts = PartTally(self.dtype) if single is None else PartTally.of_words(words, pairs, self.kept, single)
        return StageTwoCounts(parts, PairTally(pairs.distinct, pairs.totals, distinct=True))


# Runs one counting pass over the corpus with the stage-2 pattern, each task's counts converted by the pass given;
# returns the sum.
CountPass = Callable[[StageTwoPass], StageTwoCounts]


@large_allocations_mapped()
def train_superwords(stage_one: tuple[Vocab, Merges], count_pass: CountPass, vocab_size: int,
                     special_tokens: Sequence[str], *, progress: bool | None = None, verbose: bool = False,
                     counting_seconds: float = 0.0, token_counts: np.ndarray | None = None, min_frequency: int = 0,
                     max_token_length: int | None = None, num_workers: int | None = None,
                     keep_segmentation_in: str | None = None, corpus_bytes: int | None = None,
                     on_kept_pass: Callable[[float, StageTwoCounts], Any] | None = None) -> tuple[Vocab, Merges]:
    """SuperBPE's stage 2 from stage 1's vocab and merges (special tokens last, as training returns them), up to
    `vocab_size` tokens with the special tokens, which take the last ids again; the corpus is read through
    `count_pass` (see the module docstring). `token_counts` (uint64, `vocab_size` entries) receives how often each id
    occurs in the final segmentation of the corpus's stage-2 pre-tokens. `keep_segmentation_in`, a directory the
    counting workers can write to (local ones), lets the pass that counts every pair keep what it segmented there for
    the next passes (`segmentation_files`); the caller removes it. With it, a corpus of `corpus_bytes` (when known)
    up to `KEEP_FIRST_BYTES` skips the sample. `on_kept_pass(seconds, counted)` is told of each pass over the kept
    segmentation, as `count_pass`'s caller knows of the others. While it runs, glibc maps each array of 1 MiB or more
    on its own (`large_allocations_mapped`), in this process and the workers forked from it, so that what the tables'
    sorts and the merge loop free goes back at once."""
    kept_files: list[Path] = []  # the segmentation kept, once a pass has kept it

    def count(stage_two_pass: StageTwoPass) -> StageTwoCounts:
        if stage_two_pass.cut and kept_files:
            pass_start = time.perf_counter()
            total = StageTwoCounts()
            count_segmentation_files(kept_files, stage_two_pass.count_segmented, total.update, num_workers)
            if on_kept_pass is not None:
                on_kept_pass(time.perf_counter() - pass_start, total)
            return total
        counted = count_pass(stage_two_pass)
        return counted if isinstance(counted, StageTwoCounts) else StageTwoCounts()  # no text: an empty Counter

    # Stage 1's store is freed by now, and glibc would keep its heap for good: the passes' workers fork from this
    # process, and the parts' merge loop peaks on top of what it holds.
    release_free_memory()
    start = time.perf_counter()
    ordinary = ordinary_vocab(stage_one)
    num_merges = vocab_size - len(special_tokens) - len(ordinary)
    tokenizer = stage_one_tokenizer(stage_one)
    kept = None
    keep_parts = False  # whether the parts pass keeps its segmentation, for the passes at lower cuts
    if num_merges > 0:
        every_pair = StageTwoPass(tokenizer, cut=False)
        id_bytes = every_pair.dtype.itemsize
        # A small corpus is counted whole at once, its segmentation kept: its sample would be too small to use.
        keep = (keep_segmentation_in is not None and corpus_bytes is not None and corpus_bytes <= KEEP_FIRST_BYTES
                and room_for(keep_segmentation_in, corpus_bytes, id_bytes))
        if not keep:
            sampled = count(StageTwoPass(tokenizer, cut=False, sample=SAMPLE_EVERY)).pairs
            guess = guess_last_count(sampled.totals, num_merges, divisor=SAMPLE_DIVISOR)
            room = keep_segmentation_in is not None and room_for(
                keep_segmentation_in, SAMPLE_EVERY * int(sampled.totals.sum()), id_bytes)
            if guess >= MIN_SAMPLED_GUESS:  # a pair counting the guess is sampled less than 4 sigma below it rarely
                kept = sampled.frequent(max(guess - 4 * math.isqrt(guess), 1))
                keep_parts = room
            else:  # too few occurrences sampled to tell the pairs that matter: all of them counted
                keep = room
            del sampled
    exact = None  # the pairs, once a pass has counted them all
    if num_merges > 0 and kept is None:
        if keep:
            every_pair.keep_in = keep_segmentation_in
        exact = count(every_pair).pairs
        if keep:
            kept_files[:] = segmentation_files(every_pair.keep_in)
        kept = exact.frequent(max(guess_last_count(exact.totals, num_merges), 1))
    counted = count(StageTwoPass(tokenizer, cut=True, kept=kept, count_pairs=exact is None,
                                 keep_in=keep_segmentation_in if keep_parts else None))
    if keep_parts:
        kept_files[:] = segmentation_files(keep_segmentation_in)  # type: ignore[arg-type]
    pairs, parts = counted.pairs if exact is None else exact, counted.parts
    del counted, exact
    guess = guess_last_count(pairs.totals, num_merges)  # now of the exact counts
    cut = 0 if kept is None else max(guess, pairs.most_outside(kept) + 1)
    # The sample missed a pair counting far more than the guess (one frequent in a few places only): merging down to
    # this cut would stop far short of `vocab_size`, and each part would then be split again as those merges encode
    # it. The parts are counted again at the guess instead, before any merge.
    far = cut > FAR_ABOVE_GUESS * max(guess, min_frequency, 1)
    if kept is not None and not far and len(pairs.frequent(cut)) < len(kept):  # the sample kept more than needed
        parts = parts.recut(pairs.frequent(cut), len(ordinary))
    distinct = parts.distinct()
    counting_seconds += time.perf_counter() - start
    if verbose:
        _report_pass(f"{len(pairs.keys):,} distinct pairs of stage-1 tokens, "
                     f"{'none' if kept is None else f'{len(kept):,}'} kept whole", distinct, cut, start)
    # Past this point the pairs only choose what a lowered cut keeps whole, and a cut of 1 keeps no pair (`kept=None`):
    # those counting 1, often half of them, go before the merge loop, where the memory peaks.
    pairs = pairs.at_least(2)
    merging_start = time.perf_counter()
    vocab, merges = dict(ordinary), list(stage_one[1])
    while True:
        final = cut <= max(min_frequency, 1)
        wanted = num_merges - (len(merges) - len(stage_one[1]))
        counted_now = None if token_counts is None else np.zeros(len(ordinary) + num_merges, dtype=np.uint64)
        added = 0 if far else _merge_parts(parts, vocab, merges, wanted, len(ordinary), progress,
                                           token_counts=counted_now, min_frequency=max(cut, min_frequency),
                                           max_token_length=max_token_length)
        del parts
        if final or added == wanted:
            break
        # Down to the guess when the sample raised the cut above it, else lower: each is a pass over the corpus.
        cut = max(guess if cut > guess else cut // 2, min_frequency, 1)
        again_start = time.perf_counter()
        parts = count(StageTwoPass(tokenizer, cut=True, kept=pairs.frequent(cut) if cut > 1 else None,
                                   count_pairs=False)).parts
        counting_seconds += time.perf_counter() - again_start
        if verbose:
            _report_pass("the cut before far above the guess, no merge" if far
                         else f"{added:,} merges at the cut before, too few", parts.distinct(), cut, again_start)
        far = False
        merging_start += time.perf_counter() - again_start
    if token_counts is not None and counted_now is not None:
        token_counts[:len(counted_now)] = counted_now[:len(token_counts)]
    for token in special_tokens:
        vocab[len(vocab)] = token.encode("utf-8")
    if verbose:
        report_training(distinct, counting_seconds, len(merges) - len(stage_one[1]),
                        time.perf_counter() - merging_start)
    return vocab, merges


def check_stage_two_files(paths: Sequence[PathArg], special_tokens: Sequence[str], pattern: str) -> None:
    """Refuse, before any work, local files that hold more than `MAX_STRETCH_BYTES` without a place where the
    superword `pattern` may be cut (a special token, or the start of a run of digits): such a stretch is one stage-2
    pre-token, which the workers would segment whole. InputError naming the file and the bytes. Other stage-2
    patterns have no such cut (their files are cut at special tokens only, as for plain training), and URLs are not
    read here: nothing is checked for them.
    """
    if preset_name(pattern) != SUPERWORD_NAME:
        return
    special_bytes = [token.encode("utf-8") for token in special_tokens]
    for path in paths:
        if not os.path.isfile(path):
            continue
        with open_binary(path) as file:
            bounds = find_chunk_boundaries(file, os.path.getsize(path), MAX_STRETCH_BYTES, special_bytes,
                                           pattern=pattern)
        for start, end in zip(bounds, bounds[1:]):
            if end - start > 2 * MAX_STRETCH_BYTES:  # a chunk runs to the first cut after its target
                raise InputError(f"{os.fspath(path)}: between bytes {start:,} and {end:,}, more than "
                                 f"{MAX_STRETCH_BYTES:,} bytes with no number and no special token: SuperBPE's "
                                 f"stage 2 merges the text between two numbers whole, and takes at most that much "
                                 f"of it; cut the documents with a special token (--special-token)")


def _report_pass(what: str, parts: int, cut: int, start: float) -> None:
    """A `verbose=True` line for a counting pass of stage 2, on stderr."""
    print(f"hf_bpe: stage 2: {what}; {parts:,} distinct parts cut below {cut:,}, counted in "
          f"{time.perf_counter() - start:.2f} s", file=sys.stderr)


def continue_with_superwords(stage_one: tuple[Vocab, Merges], counts: Mapping[bytes, int], vocab_size: int,
                             special_tokens: Sequence[str], **options: Any) -> tuple[Vocab, Merges]:
    """`train_superwords` on the stage-2 pre-token counts of a corpus, made already ({pre-token bytes: count}, as
    `count_pretokens(..., pattern="superword")` makes them); the options as `train_superwords` takes them."""
    return train_superwords(stage_one, lambda stage_two_pass: stage_two_pass(Counter(counts)), vocab_size,
                            special_tokens, **options)


def _merge_parts(parts: PartTally, vocab: Vocab, merges: Merges, wanted: int, stage_one_size: int,
                 progress: bool | None, *, token_counts: np.ndarray | None, min_frequency: int,
                 max_token_length: int | None) -> int:
    """Merge the distinct parts (of stage-1 ids; stage 1 has `stage_one_size` ids) up to `wanted` merges counting
    `min_frequency` or more, adding them to `vocab` and `merges` (in place); the number made. Right after stage 1 the
    parts are the merge loop's words as they are; later, each is split by the stage-2 merges made so far (the
    extension's start state, `base_words.continue_words`). The parts are used up."""
    if len(vocab) == stage_one_size:
        words = parts.words([vocab[token_id] for token_id in range(len(vocab))], token_counts)
        release_free_memory()
        id_merges = _merge(words, wanted, progress, token_counts=token_counts, min_frequency=min_frequency,
                           max_token_length=max_token_length)
        del words
        for new_id, (left, right) in enumerate(id_merges, start=len(vocab)):
            merges.append((vocab[left], vocab[right]))
            vocab[new_id] = vocab[left] + vocab[right]
        return len(id_merges)
    # Later, the stage-2 merges made so far split each part's stage-1 ids: the segmentation that making them in turn
    # reached (not the tokenizer's encoding of the part's bytes, which need not start from the stage-1 ids).
    id_of = {token: token_id for token_id, token in vocab.items()}
    made = merges[len(merges) - (len(vocab) - stage_one_size):]
    merged = BatchTables({}, {(id_of[left], id_of[right]): rank for rank, (left, right) in enumerate(made)},
                         range(stage_one_size, len(vocab)))
    del id_of
    before = len(merges)
    # The words passed on unnamed: `continue_words` renumbers them, and the words before that are let go.
    extended_vocab, extended_merges = continue_words(
        parts.words([vocab[token_id] for token_id in range(len(vocab))], token_counts, merged), vocab, merges,
        len(vocab) + wanted, progress, min_frequency, max_token_length, token_counts)
    vocab.update(extended_vocab)
    merges[:] = extended_merges
    return len(merges) - before


__all__ = ["HANDOVER_PAIRS", "HANDOVER_PARTS", "MAX_STRETCH_BYTES", "SAMPLE_EVERY", "CountPass",
           "StageTwoCounts", "StageTwoPass", "check_stage_two_files", "continue_with_superwords", "train_superwords"]
