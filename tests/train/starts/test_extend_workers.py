"""Tests for the fast paths of hf_bpe.train.starts.extend: the pre-tokens split into base tokens in worker processes
(the batch boundaries, one worker against two, an error in a worker, SIGTERM and Ctrl-C of real `hf-bpe train --extend`
processes while the workers split), the pairs sorted as the batches arrive, and the base's ids renumbered for the
merge loop (`compact_ids`), differential against the reference and the flat store's own indexing."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hf_bpe import Tokenizer, train_bpe_from_counts
from hf_bpe.common.errors import InputError
from hf_bpe.train._reference import reference_extend_from_counts
from hf_bpe.train.merging.flat_corpus import FlatCorpus
from hf_bpe.train.starts import base_words as extend_start
from hf_bpe.train.starts.base_words import base_words, compact_ids
from hf_bpe.train.starts.extend import extend_bpe_from_counts
from tests.cli.faults import assert_no_process_left, children_of, finish, one_line, start, wait_for
from tests.train.starts.test_extend import corpus_counts, random_bases

differential = settings(max_examples=60, deadline=None)


@differential
@given(random_bases(), corpus_counts, st.integers(0, 40), st.sampled_from([0, 2, 5]),
       st.sampled_from([None, 1, 3, 4, 6]))
def test_the_whole_extension_with_compact_ids_equals_the_reference(base: Tokenizer, counts: dict[bytes, int],
                                                                   new: int, min_frequency: int,
                                                                   max_token_length: int | None) -> None:
    """`extend_bpe_from_counts` renumbers the base ids its words hold: the random bases have tokens that no word
    holds and that the merges could make again (they are not what the base encodes their bytes to)."""
    vocab_size = len(base.vocab) + new
    options = {"min_frequency": min_frequency, "max_token_length": max_token_length}
    expected = reference_extend_from_counts(counts, base.vocab, base.merges, vocab_size, **options)
    assert extend_bpe_from_counts(base, counts, vocab_size, num_workers=1, **options) == expected


@differential
@given(random_bases(), corpus_counts, st.sampled_from([0, 2, 9]), st.sampled_from([1, 3, 1 << 20]))
def test_the_pairs_sorted_while_splitting_index_the_store_as_it_indexes_itself(base: Tokenizer,
                                                                                 counts: dict[bytes, int], floor: int,
                                                                                 batch: int) -> None:
    """`base_words` sorts each batch's pairs as it arrives (`PairRuns`), and `compact_ids` renumbers their codes:
    the flat store built from them has the counts and index of one built from the words alone."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(extend_start, "SEGMENT_BYTES", batch)
        words, _ = compact_ids(base_words(counts, base))
        batches = extend_start._batches(np.sort(np.fromiter(map(len, counts), dtype=np.int64)))
    assert words.pair_runs is not None and len(words.pair_runs) == len(batches)
    given_runs = FlatCorpus(words.data, words.lengths, words.frequencies, floor, words.first_new_id, words.pair_runs)
    alone = FlatCorpus(words.data, words.lengths, words.frequencies, floor, words.first_new_id)
    assert words.pair_runs == []  # used up
    assert given_runs.pair_counts == alone.pair_counts
    assert given_runs.index.keys() == alone.index.keys()
    for pair, entry in alone.index.items():
        assert np.array_equal(given_runs.index[pair], entry)


def gpt2_like_counts(count: int, seed: int) -> dict[bytes, int]:
    """Distinct pre-tokens of random lengths (one byte to a few dozen), some of them one base token."""
    rng = random.Random(seed)
    alphabet = "abcdeéü th"
    counts = {b" the": 7, b"a": 3}
    while len(counts) < count:
        counts["".join(rng.choices(alphabet, k=rng.choice([1, 2, 3, 5, 8, 13, 40]))).encode()] = rng.randint(1, 50)
    return counts


@pytest.fixture(scope="module")
def trained_base() -> Tokenizer:
    vocab, merges = train_bpe_from_counts(gpt2_like_counts(400, 1), 330)
    return Tokenizer(vocab, merges)


def words_state(counts: dict[bytes, int], base: Tokenizer, workers: int) -> tuple[list, ...]:
    token_counts = np.zeros(max(base.vocab) + 1, dtype=np.uint64)
    words = base_words(counts, base, token_counts, workers)
    return (words.data.tolist(), words.lengths.tolist(), words.frequencies.tolist(), token_counts.tolist(),
            words.first_new_id)


@pytest.mark.parametrize("batch", [1, 40, 1500, -1, 0, 1 << 20])
def test_workers_split_as_this_process_at_every_batch_boundary(trained_base, monkeypatch, batch: int) -> None:
    """Batches (`SEGMENT_BYTES`) of one pre-token, of a few (the encoder's scalar path), of more than
    `MIN_BATCH_MERGE` (its numpy batch), one byte short of all of them, all of them, more than all: two workers give
    what one does, which is what the base encodes each pre-token to."""
    counts = gpt2_like_counts(300, batch % 1000)
    monkeypatch.setattr(extend_start, "SEGMENT_BYTES", batch if batch > 0 else sum(map(len, counts)) + batch)
    monkeypatch.setattr(extend_start, "MIN_PARALLEL_BATCHES", 1)
    alone = words_state(counts, trained_base, 1)
    assert words_state(counts, trained_base, 2) == alone
    assert words_state(counts, trained_base, 3) == alone
    data, lengths, frequencies, token_counts, _ = alone
    encoded = {word: np.frombuffer(ids, dtype="<u4").tolist()
               for word, ids in zip(counts, trained_base.merge_pretoken_bytes(list(counts)))}
    expected_words = sorted((ids, counts[word]) for word, ids in encoded.items() if len(ids) > 1)
    ends = np.cumsum(lengths).tolist()
    assert sorted((data[end - length:end], frequency)
                  for end, length, frequency in zip(ends, lengths, frequencies)) == expected_words
    byte_lengths = [sum(len(trained_base.vocab[token]) for token in data[end - length:end])
                    for end, length in zip(ends, lengths)]
    assert byte_lengths == sorted(byte_lengths)  # shortest first
    assert sum(token_counts) == sum(counts[word] for word, ids in encoded.items() if len(ids) == 1)


def test_two_workers_extend_as_one(trained_base, monkeypatch) -> None:
    counts = gpt2_like_counts(2000, 5)
    monkeypatch.setattr(extend_start, "SEGMENT_BYTES", 1300)
    results = []
    for workers in (1, 2):
        token_counts = np.zeros(max(trained_base.vocab) + 1 + 60, dtype=np.uint64)
        results.append((extend_bpe_from_counts(trained_base, counts, len(trained_base.vocab) + 60,
                                               token_counts=token_counts, num_workers=workers), token_counts.tolist()))
    assert results[0] == results[1]
    assert results[0][0] == reference_extend_from_counts(counts, trained_base.vocab, trained_base.merges,
                                                         len(trained_base.vocab) + 60)


def test_with_a_thread_running_the_pre_tokens_are_split_here(trained_base, monkeypatch) -> None:
    """Workers could not be forked (as after `ray.init`), and spawning them would cost more than splitting: this
    process splits, with the same result."""
    counts = gpt2_like_counts(300, 2)
    monkeypatch.setattr(extend_start, "SEGMENT_BYTES", 70)
    pools: list[int] = []
    real_pool = extend_start.process_pool
    monkeypatch.setattr(extend_start, "process_pool", lambda workers, state: pools.append(workers) or real_pool(workers,
                                                                                                         state))
    expected = words_state(counts, trained_base, 1)
    assert words_state(counts, trained_base, 2) == expected and pools == [2]
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert words_state(counts, trained_base, 2) == expected and pools == [2]
    finally:
        stop.set()
        thread.join()


def extension_in_a_pool_worker(workers: int) -> tuple:
    base = Tokenizer(*train_bpe_from_counts(gpt2_like_counts(400, 1), 330))
    counts = gpt2_like_counts(20_000, 6)  # with 4 KB batches, more than MIN_PARALLEL_BATCHES batches
    return extend_bpe_from_counts(base, counts, len(base.vocab) + 20, num_workers=workers)


def test_a_pool_worker_extends_in_its_own_process(monkeypatch) -> None:
    """A daemonic process (a worker of the caller's own pool) may not start processes: it splits the pre-tokens
    itself."""
    monkeypatch.setattr(extend_start, "SEGMENT_BYTES", 1 << 12)  # set before the pool forks: its worker has it too
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.apply(extension_in_a_pool_worker, (2,)) == extension_in_a_pool_worker(1)


def test_an_error_in_a_worker_reaches_the_caller_and_stops_the_workers(monkeypatch) -> None:
    """A byte the base has no token for, in the last batch: the worker's error is the caller's one-line InputError,
    and no worker is left."""
    base = Tokenizer({byte: bytes([byte]) for byte in range(256) if byte != 0xFF} | {300: b"ab"}, [(b"a", b"b")])
    counts = {f"ab{number}".encode(): 1 for number in range(500)} | {b"\xffabcdefghijklmnop": 1}
    monkeypatch.setattr(extend_start, "SEGMENT_BYTES", 250)
    # Children from earlier tests (multiprocessing's resource tracker, a Ray cluster) may live on: only new ones count.
    before = set(children_of(os.getpid()))
    with pytest.raises(InputError, match="byte 0xff has no token"):
        extend_bpe_from_counts(base, counts, len(base.vocab) + 5, num_workers=2)
    assert set(children_of(os.getpid())) - before == set()
    with pytest.raises(ValueError, match="num_workers must be at least 1"):
        extend_bpe_from_counts(base, {b"ab": 1}, len(base.vocab) + 5, num_workers=0)


# ---------------------------------------------------------------------------------- faults of real processes


@pytest.fixture(scope="module")
def many_pretokens(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About 600,000 distinct pre-tokens (7 MB): counting takes a second or two, splitting them into GPT-2 tokens
    with two workers several."""
    rng = random.Random(3)
    letters = "abcdefghijklmnopqrstuvwxyzéüßøå"
    path = tmp_path_factory.mktemp("corpus") / "many_pretokens.txt"
    with open(path, "w", encoding="utf-8") as file:
        for _ in range(6000):
            file.write(" ".join("".join(rng.choices(letters, k=rng.randint(5, 14))) for _ in range(100)) + "\n")
    return path


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="signals and /proc: Linux")
@pytest.mark.parametrize("how", ["SIGTERM", "Ctrl-C"])
def test_a_signal_while_the_workers_split_stops_them_and_writes_nothing(how: str, many_pretokens: Path,
                                                                       tmp_path: Path) -> None:
    out = tmp_path / "extended"
    run = start("train", str(many_pretokens), "--extend", "gpt2", "--vocab-size", "50300", "--out", str(out),
                "--no-progress", "--workers", "2")
    wait_for(lambda: len(children_of(run.pid)) >= 2, 120, "the counting workers started", run)
    counting = set(children_of(run.pid))
    wait_for(lambda: len(set(children_of(run.pid)) - counting) >= 2, 120, "the splitting workers started", run)
    if how == "SIGTERM":
        os.kill(run.pid, signal.SIGTERM)
    else:  # a terminal sends Ctrl-C to the whole process group
        os.killpg(run.pid, signal.SIGINT)
    message = one_line(finish(run))
    if how == "SIGTERM":
        assert message == "hf-bpe train: terminated (SIGTERM); nothing was written" and run.returncode == 143
    else:
        assert message == "hf-bpe train: interrupted; nothing was written" and run.returncode == 130
    assert list(tmp_path.iterdir()) == []
    assert_no_process_left(run.pid)
