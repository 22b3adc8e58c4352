"""Tests for SuperBPE training (hf_bpe.train.starts.superword, `superword_from=` of train_bpe and
train_bpe_from_iterator):
the merges against the plain reference (hf_bpe.train._reference.reference_superword_train) with hypothesis, both
counting paths and engines (local processes, Ray), the saved directory's ids against the final segmentation of
training, and the errors."""

from __future__ import annotations

import re
import tempfile
from collections import Counter
from collections.abc import Mapping
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import tokenizers
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hf_bpe import Tokenizer, save_tokenizer_directory, train_bpe, train_bpe_from_iterator
from hf_bpe.common.errors import InputError
from hf_bpe.encode.cache import unpack_ids
from hf_bpe.pretokenize import compile_pattern
from hf_bpe.train._reference import reference_superword_train
from hf_bpe.train.counting import count, sampling
from hf_bpe.train.counting.count import count_pretokens, count_pretokens_in_files, count_pretokens_in_iterator
from hf_bpe.train.counting.piece_counter import add_counts
from hf_bpe.train.merging.merge_loop import _Words
from hf_bpe.train.starts import superword, superword_passes, superword_words
from hf_bpe.train.starts.superword import StageOneTokenizer, SuperwordStages, stage_one_tokenizer
from hf_bpe.train.starts.superword_passes import continue_with_superwords
from tests import FIXTURES
from tests.pretokenize.test_patterns import QWEN2, pattern_text
from tests.train.merging.test_merge_loop import local_ray_cluster  # noqa: F401 (the module's Ray cluster fixture)
from tests.train.starts.test_extend import random_bases

ENDOFTEXT = "<|endoftext|>"
# Text where numbers, spaces and repeated phrases meet; the characters are those on which the `regex` module's tables
# (the reference's) agree with the pinned ones.
PHRASES = ["the cat", " sat on", " the mat", ". ", "\n\n", " by the way", "1234567", " 12", "½3", "\u0661\u0662",
           "x", " ", ENDOFTEXT, "\xa0", "\u3000"]
superword_corpus = st.lists(st.lists(st.sampled_from(PHRASES), max_size=25).map("".join) | pattern_text,
                            min_size=1, max_size=5)


@settings(max_examples=60, deadline=None)
@given(texts=superword_corpus, merges=st.integers(0, 40), stage_one=st.integers(0, 30),
       pattern=st.sampled_from([None, "cl100k", QWEN2]), superword_pattern=st.sampled_from([None, r"\S+|\s+"]))
@example(texts=["the cat sat on the mat. the cat sat on 1234567 mats\n\nby the way"] * 3, merges=40, stage_one=10,
         pattern=None, superword_pattern=None)
def test_superword_merges_equal_the_reference(texts: list[str], merges: int, stage_one: int, pattern: str | None,
                                              superword_pattern: str | None) -> None:
    transition, vocab_size = 257 + stage_one, 257 + stage_one + merges
    expected = reference_superword_train(texts, vocab_size, transition, [ENDOFTEXT], pattern, superword_pattern)
    assert train_bpe_from_iterator(texts, vocab_size, [ENDOFTEXT], num_workers=1, pattern=pattern,
                                   superword_from=transition, superword_pattern=superword_pattern) == expected


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(base=random_bases(), words=st.lists(st.lists(st.sampled_from(["a", "b", "c", " ", "é", "ab", "  "]), max_size=30)
                                          .map(lambda parts: "".join(parts).encode()), max_size=8),
       cache=st.sampled_from([0, 3, 1 << 17]))
def test_stage_one_merges_in_pieces_as_the_encoder_merges_whole(base: Tokenizer, words: list[bytes], cache: int,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(superword, "PIECE_CACHE", cache)  # pieces known, forgotten again, or all kept
    pieces = StageOneTokenizer(base.vocab, base.merges, base.special_tokens)
    expected = [unpack_ids(ids) for ids in base.merge_pretoken_bytes(words)]
    for _ in range(2):  # the second time, every piece is known
        assert segmented(pieces, words) == expected


def segmented(tokenizer: StageOneTokenizer, words: list[bytes]) -> list[list[int]]:
    """Each word's ids, as `segment_arrays` gives them end to end."""
    ids, lengths = tokenizer.segment_arrays(words)
    assert ids.dtype == tokenizer.segment_dtype and len(lengths) == len(words) and int(lengths.sum()) == len(ids)
    ends = np.cumsum(lengths).tolist()
    return [ids[end - length:end].tolist() for end, length in zip(ends, lengths.tolist())]


@settings(max_examples=100, deadline=None)
@given(words=st.lists(st.lists(st.sampled_from([b"\x00", b"a", b"\x00a", b" ", b"aaaaaaa"]), max_size=20)
                      .map(b"".join), max_size=12))
def test_pieces_of_every_length_are_told_apart(words: list[bytes]) -> None:
    # Every two of "a" and NUL are held by a token: a run of them is one piece, of any length; pieces that differ
    # only by trailing NULs, or by their length, must not share ids (the keys of pieces of up to 7 bytes).
    merges = [(b"a", b"a"), (b"a", b"\x00"), (b"\x00", b"a"), (b"\x00", b"\x00")]
    vocab = {byte: bytes([byte]) for byte in range(256)} | {256 + index: left + right
                                                           for index, (left, right) in enumerate(merges)}
    base = Tokenizer(vocab, merges)
    expected = [unpack_ids(ids) for ids in base.merge_pretoken_bytes(words)]
    pieces = StageOneTokenizer(vocab, merges)
    assert segmented(pieces, words) == expected
    assert segmented(pieces, words[::-1]) == expected[::-1]  # the pieces known now


class _TextPasses:
    """A stage-2 `CountPass` over texts, a task per text, added up as the counting engines add them; a sample reads
    windows of 8 characters, as the counting of texts samples them. It records each pass: whether it cut parts
    (`passes`) and, for those, whether a pass before counted every pair (`pairs_known`)."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.each_text = [count_pretokens([text], [ENDOFTEXT], pattern="superword") for text in texts]
        self.passes: list[bool] = []
        self.pairs_known: list[bool] = []

    def __call__(self, stage_two_pass: superword_passes.StageTwoPass) -> object:
        self.passes.append(stage_two_pass.cut)
        if stage_two_pass.cut:
            self.pairs_known.append(not stage_two_pass.count_pairs)
        tasks, convert = self.each_text, stage_two_pass
        if stage_two_pass.sample > 1:
            tasks = [count_pretokens([window], [ENDOFTEXT], pattern="superword")
                     for window in sampling.sample_texts(self.texts, stage_two_pass.sample, window=8)]
            convert = stage_two_pass.counting_all()
        total: object = Counter()
        for counts in tasks:
            total = add_counts(total, convert(counts))  # type: ignore[arg-type]
        return total


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=superword_corpus, merges=st.integers(1, 60), guess=st.integers(2, 12), every=st.integers(1, 3),
       workers=st.sampled_from([1, 2]))
@example(texts=["the cat sat on the mat. the cat sat on 1234567 mats\n\nby the way"] * 5, merges=30, guess=3,
         every=1, workers=2)
@example(texts=["the cat sat on the mat. the cat sat on 1234567 mats\n\nby the way", "a rare line",
                "the cat sat on the mat"] * 5, merges=4, guess=6, every=2, workers=1)  # the cut parts give every merge
def test_cuts_and_samples_change_no_merge_and_no_token_count(texts: list[str], merges: int, guess: int, every: int,
                                                             workers: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Too high a guess stops merging short: the parts are counted again at lower cuts and merging goes on from the
    # merges made. A sample that misses pairs raises the cut above them. A guess of 0 cuts nothing: the documents
    # merged whole. The merges and the final segmentation are the same every way.
    stage_one = train_bpe_from_iterator(texts, 270, [ENDOFTEXT], num_workers=1)
    count_pass = _TextPasses(texts)
    passes, pairs_known = count_pass.passes, count_pass.pairs_known
    results, kept_passes = [], []
    # Ways 3 and 4 count every pair in a pass of its own, which keeps its segmentation in files for the parts pass
    # and the passes at lower cuts (`segmentation_files`), read in this process or in a pool of 2: after a sample
    # too small to use, or with no sample (a small corpus's size given). Way 5 uses the sample, and its parts pass
    # keeps its segmentation for the passes at lower cuts.
    ways = ((0, 1, None, None, False), (guess, every, None, None, True), (guess, 1, workers, None, False),
            (guess, every, workers, 100, False), (guess, every, workers, None, True))
    for cut, sample, keep_in_workers, corpus_bytes, sample_used in ways:
        monkeypatch.setattr(superword_passes, "guess_last_count", lambda totals, num_merges, divisor=2, cut=cut: cut)
        monkeypatch.setattr(superword_passes, "SAMPLE_EVERY", sample)
        # 16: every pair counted in a pass of its own; 0: the sample is used.
        monkeypatch.setattr(superword_passes, "MIN_SAMPLED_GUESS", 0 if sample_used else 16)
        token_counts = np.zeros(270 + merges, dtype=np.uint64)
        passes.clear()
        pairs_known.clear()
        with tempfile.TemporaryDirectory() as directory:
            trained = superword_passes.train_superwords(
                stage_one, count_pass, 270 + merges, [ENDOFTEXT], token_counts=token_counts,
                num_workers=keep_in_workers or 1, keep_segmentation_in=directory if keep_in_workers else None,
                corpus_bytes=corpus_bytes,
                on_kept_pass=lambda seconds, counted, way=(corpus_bytes, sample_used): kept_passes.append(way))
        results.append((trained, token_counts.tolist()))
        if keep_in_workers and sample_used:  # the sample, then the parts kept; no text read again
            assert passes == [False, True] and pairs_known == [False]
        elif keep_in_workers:  # every pair counted, after a sample unless the size was given; no text read again
            assert passes == [False] * (2 if corpus_bytes is None else 1)
        elif sample_used:  # the parts counted with every pair, then alone at lower cuts
            assert pairs_known[:1] == [False] and all(pairs_known[1:])
        else:  # every pair counted in a pass of its own: the parts passes count no pair again
            assert all(pairs_known)
    assert all(result == results[0] for result in results)
    assert (None, False) in kept_passes and (100, False) in kept_passes  # ways 3 and 4 read the files


def test_a_cut_far_above_the_guess_counts_the_parts_again_before_any_merge(monkeypatch: pytest.MonkeyPatch,
                                                                              capsys: pytest.CaptureFixture[str]
                                                                              ) -> None:
    # The sample reads 8 characters in every 400: it misses the pairs of the text in the middle, which the exact
    # counts then put far above the guess. The parts are counted again at the guess before any merge (no merging
    # down to the cut, no splitting the parts again as those merges encode them), and the merges and the final
    # segmentation are those of merging the documents whole.
    texts = ["the cat sat on the mat. " * 16, "by the way, " * 20 + "9", " sat on the mat, by the way" * 16]
    stage_one = train_bpe_from_iterator(texts, 270, [ENDOFTEXT], num_workers=1)
    results = []
    for guess, every in ((0, 1), (3, 50)):
        monkeypatch.setattr(superword_passes, "guess_last_count",
                            lambda totals, num_merges, divisor=2, guess=guess: guess)
        monkeypatch.setattr(superword_passes, "SAMPLE_EVERY", every)
        monkeypatch.setattr(superword_passes, "MIN_SAMPLED_GUESS", 0)  # the sample used
        count_pass = _TextPasses(texts)
        token_counts = np.zeros(300, dtype=np.uint64)
        trained = superword_passes.train_superwords(stage_one, count_pass, 300, [ENDOFTEXT], verbose=True,
                                                    token_counts=token_counts)
        results.append((trained, token_counts.tolist()))
    assert results[1] == results[0]
    assert "the cut before far above the guess, no merge" in capsys.readouterr().err
    assert count_pass.passes[:3] == [False, True, True]  # the sample, the parts pass, the parts at the guess


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.lists(st.tuples(st.lists(st.integers(0, 4), min_size=2, max_size=9), st.integers(1, 3)), min_size=1,
                      max_size=30), block=st.integers(1, 20))
def test_pair_counts_in_blocks_are_the_pair_counts(words: list[tuple[list[int], int]], block: int,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(superword_words, "PAIR_BLOCK", block)
    expected: Counter[tuple[int, int]] = Counter()
    for tokens, frequency in words:
        for pair in zip(tokens, tokens[1:]):
            expected[pair] += frequency
    start_state = _Words(np.array([token for tokens, _ in words for token in tokens], dtype=np.int32),
                         np.array([len(tokens) for tokens, _ in words]), np.array([count for _, count in words]),
                         len(words), [bytes([byte]) for byte in range(256)])
    pairs = superword_words.PairCounts(start_state)
    assert {divmod(code, 256): int(total) for code, total in zip(pairs.distinct.tolist(), pairs.totals)
            } == expected
    positions = np.cumsum([0] + [len(tokens) for tokens, _ in words])
    rare = {(int(np.searchsorted(positions, at, side="right")) - 1, int(at)) for at in pairs.rare(pairs.frequent(3))}
    assert rare == {(index, positions[index] + offset) for index, (tokens, _) in enumerate(words)
                    for offset, pair in enumerate(zip(tokens, tokens[1:])) if expected[pair] < 3}


@pytest.mark.parametrize("workers", [1, 2])
def test_the_sample_of_files_reads_windows_and_changes_no_merge(workers: int, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # A large corpus's sample reads windows of its bytes (`sampling`), not the whole corpus; whatever it guesses,
    # the merges are those of the documents merged whole.
    texts = (FIXTURES / "hf_corpora_sample.txt").read_text(encoding="utf-8").split(ENDOFTEXT)
    path = tmp_path / "corpus.txt"
    path.write_text(ENDOFTEXT.join(texts), encoding="utf-8")
    expected = train_bpe_from_iterator(texts, 600, [ENDOFTEXT], num_workers=1, superword_from=450)
    monkeypatch.setattr(superword_passes, "KEEP_FIRST_BYTES", 0)  # as if the corpus were large
    monkeypatch.setattr(superword_passes, "MIN_SAMPLED_GUESS", 0)  # and its sample used
    monkeypatch.setattr(sampling, "SAMPLE_WINDOW_BYTES", 256)
    sampled: list[tuple[int, int]] = []  # (bytes read, corpus bytes) of each sample

    def spied(paths: list[str], sizes: list[int], every: int) -> list[sampling.SampleTask]:
        tasks = sampling.sample_tasks(paths, sizes, every)
        sampled.append((sum(end - start for _, windows in tasks for _, start, end in windows), sum(sizes)))
        return tasks

    monkeypatch.setattr(count, "sample_tasks", spied)
    assert train_bpe(path, 600, [ENDOFTEXT], num_workers=workers, superword_from=450, progress=False) == expected
    (read, total), = sampled
    assert total / superword_passes.SAMPLE_EVERY - 256 <= read <= total / superword_passes.SAMPLE_EVERY + 256


def test_files_and_worker_processes_train_the_same_superwords(tmp_path: Path) -> None:
    texts = (FIXTURES / "hf_corpora_sample.txt").read_text(encoding="utf-8").split(ENDOFTEXT)
    path = tmp_path / "corpus.txt"
    path.write_text(ENDOFTEXT.join(texts), encoding="utf-8")
    expected = reference_superword_train(texts[:8], 420, 330, [ENDOFTEXT])
    assert train_bpe_from_iterator(texts[:8], 420, [ENDOFTEXT], superword_from=330) == expected
    from_files = train_bpe(path, 600, [ENDOFTEXT], num_workers=2, superword_from=450, progress=False)
    assert from_files == train_bpe_from_iterator(texts, 600, [ENDOFTEXT], num_workers=1, superword_from=450)
    vocab, merges = from_files
    assert vocab[599] == ENDOFTEXT.encode() and len(merges) == 600 - 257
    # Stage 1 is plain training up to the transition; stage 2 adds tokens across spaces.
    assert merges[:450 - 257] == train_bpe(path, 450, [ENDOFTEXT], num_workers=1, progress=False)[1]
    stages = SuperwordStages.of(450 - 257, len(merges))

    def bridges_a_space(token_id: int) -> bool:
        return re.search(rb"[^\s] ", vocab[token_id]) is not None

    assert any(map(bridges_a_space, stages.stage_two)) and not any(map(bridges_a_space, stages.stage_one))


@pytest.mark.parametrize(("workers", "chunk_bytes", "cache"), [(1, 1 << 20, 1 << 17), (2, 1000, 3), (3, 257, 0)])
def test_workers_segment_what_they_count_as_the_counts_are_segmented(tmp_path: Path, workers: int, chunk_bytes: int,
                                                                     cache: int, monkeypatch: pytest.MonkeyPatch
                                                                     ) -> None:
    # Stage 2 segments each chunk's pre-tokens in the worker that counts it (`convert=`): whatever the chunks, the
    # workers and how many pieces each keeps known, the sum is the segmentation of the whole counts.
    monkeypatch.setattr(superword, "PIECE_CACHE", cache)
    monkeypatch.setattr(count, "BATCH_CHARS", chunk_bytes)  # texts to the workers in batches too
    texts = (FIXTURES / "hf_corpora_sample.txt").read_text(encoding="utf-8").split(ENDOFTEXT)
    texts.append("It costs 1234567 dollars, by the way. " * 50)
    path = tmp_path / "corpus.txt"
    path.write_text(ENDOFTEXT.join(texts), encoding="utf-8")
    tokenizer = stage_one_tokenizer(train_bpe_from_iterator(texts, 400, [ENDOFTEXT], num_workers=1))
    counts = count_pretokens_in_iterator(texts, [ENDOFTEXT], num_workers=1, pattern="superword")
    expected = segmented_counts(StageOneTokenizer(tokenizer.vocab, tokenizer.merges), counts)
    assert len(expected) == len(counts) and sum(expected.values()) == sum(counts.values())
    convert = partial(segmented_counts, tokenizer)
    assert count_pretokens_in_files(path, [ENDOFTEXT], num_workers=workers, chunk_bytes=chunk_bytes,
                                    pattern="superword", convert=convert) == expected
    assert count_pretokens_in_iterator(texts, [ENDOFTEXT], num_workers=workers, pattern="superword",
                                       convert=convert) == expected


def segmented_counts(tokenizer: StageOneTokenizer, counts: Mapping[bytes, int]) -> Counter[bytes]:
    """The counts keyed by each pre-token's stage-1 ids (`segmented_arrays`) packed as bytes, instead of its bytes
    (the encoding is one-to-one): a conversion the counting engines add up as they add up pre-token counts."""
    ids, lengths, frequencies = tokenizer.segmented_arrays(counts)
    packed, size = ids.tobytes(), ids.dtype.itemsize
    ends = (np.cumsum(lengths) * size).tolist()
    return Counter(dict(zip([packed[begin:stop] for begin, stop in zip([0, *ends], ends)], frequencies.tolist())))


def test_the_saved_directory_encodes_as_training_ended(tmp_path: Path) -> None:
    # The final segmentation of the stage-2 pre-tokens (token_counts, from the merge loop) is what every loader gives:
    # tokenizers (the published Digits + Split spelling of tokenizer.json) and hf_bpe's Tokenizer encode the corpus
    # to exactly these counts. tests/hf/test_loading.py compares all six loaders on a SuperBPE directory.
    texts = (FIXTURES / "hf_corpora_sample.txt").read_text(encoding="utf-8").split(ENDOFTEXT)[:20]
    texts.append("It costs 1234567 dollars, by the way. " * 5)
    stage_one = train_bpe_from_iterator(texts, 500, [ENDOFTEXT])
    counts = count_pretokens_in_iterator(texts, [ENDOFTEXT], num_workers=1, pattern="superword")
    token_counts = np.zeros(700, dtype=np.uint64)
    vocab, merges = continue_with_superwords(stage_one, counts, 700, [ENDOFTEXT], token_counts=token_counts)
    directory = save_tokenizer_directory(tmp_path / "superword", vocab, merges, [ENDOFTEXT], pattern="superword")
    theirs = tokenizers.Tokenizer.from_file(str(directory / "tokenizer.json"))
    ours = Tokenizer(vocab, merges, [ENDOFTEXT], pattern="superword")
    expected = Counter({token_id: int(count) for token_id, count in enumerate(token_counts) if count})
    assert Counter(token_id for text in texts for token_id in theirs.encode(text).ids) == expected
    assert Counter(token_id for text in texts for token_id in ours.encode(text)) == expected
    assert " dollars, by the way. It costs " in compile_pattern("superword").findall(texts[-1])


def test_bad_options_are_refused_before_any_work(tmp_path: Path) -> None:
    missing = tmp_path / "not-read.txt"
    with pytest.raises(ValueError, match=re.escape("superword_from 1000 must be at most vocab_size (500)")):
        train_bpe(missing, 500, superword_from=1000)
    with pytest.raises(ValueError, match="it must be at least 257"):
        train_bpe(missing, 500, [ENDOFTEXT], superword_from=256)
    with pytest.raises(TypeError, match="superword_from must be an int"):
        train_bpe(missing, 500, superword_from=300.0)
    with pytest.raises(ValueError, match="needs superword_from"):
        train_bpe(missing, 500, superword_pattern="superword")
    with pytest.raises(TypeError, match="not an iterator"):
        train_bpe_from_iterator(iter(["a b"]), 300, superword_from=280)


@pytest.mark.usefixtures("local_ray_cluster")
def test_the_ray_engine_counts_both_stages_as_the_local_one(tmp_path: Path) -> None:
    text = (FIXTURES / "hf_corpora_sample.txt").read_text(encoding="utf-8")
    paths = []
    for number in range(2):  # several files and several chunks per file, cut at special tokens only in stage 2
        path = tmp_path / f"part{number}.txt"
        path.write_text(text[number::2] + ENDOFTEXT + text, encoding="utf-8")
        paths.append(path)
    local = train_bpe(paths, 700, [ENDOFTEXT], num_workers=1, superword_from=500)
    assert train_bpe(paths, 700, [ENDOFTEXT], engine="ray", superword_from=500) == local


def test_long_stretches_without_a_cut_are_refused_before_stage_one(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(superword_passes, "MAX_STRETCH_BYTES", 64)
    path = tmp_path / "corpus.txt"
    path.write_text("a b 1 " + "word " * 40 + ENDOFTEXT + "x 2 " * 40, encoding="utf-8")
    with pytest.raises(InputError, match=r"corpus.txt: between bytes 0 and 206, more than 64 bytes with no number"):
        train_bpe(path, 300, [ENDOFTEXT], superword_from=280, num_workers=1)
    superword_passes.check_stage_two_files([path], [ENDOFTEXT], r"\S+|\s+")  # a custom pattern: cut at specials
    with pytest.raises(InputError, match="a text holds 206 bytes with no number and no special token"):
        train_bpe_from_iterator(["word " * 41 + "x"], 300, superword_from=280, num_workers=1)  # not a file
    path.write_text("a b 1 " + "word 3 " * 40, encoding="utf-8")  # numbers cut it
    texts = [path.read_text(encoding="utf-8")]
    assert train_bpe(path, 300, superword_from=270, num_workers=1) == reference_superword_train(texts, 300, 270)

