"""Tests for hf_bpe.train.merging.merge_loop: the CS336 reference merges, and differential tests against the reference
trainer (hf_bpe.train._reference). Tests of the `strings` store's own parts (long words, byte-pair blocks) pass
`store="strings"`; the `flat` store's own tests are in test_flat_corpus.py."""

from __future__ import annotations

import re
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hf_bpe.train.merging.string_corpus
from hf_bpe.common.errors import InputError
from hf_bpe.formats.gpt2 import load_gpt2
from hf_bpe.train._reference import merge_word, reference_counts, reference_train, reference_train_from_counts
from hf_bpe.train.api import train_bpe, train_bpe_from_counts, train_bpe_from_iterator
from hf_bpe.train.merging.merge_loop import _reverse_order_key, merge_pairs
from hf_bpe.train.merging.string_corpus import LONG_WORD_LENGTH, _count_byte_pairs
from tests import FIXTURES

ENDOFTEXT = "<|endoftext|>"

# Text made to stress the merge loop: whitespace runs, repeated letters (overlapping pairs), multi-byte characters,
# digits and punctuation, contractions, and the special tokens (also partial ones) right next to text.
fragments = st.sampled_from([
    "a", "aa", "aaaaaaa", "ab", "ba", "b", " ", "  ", "\n", "\n\n", " \t", "\r\n", "é", "ée", "日本", "🙂", "1", "123",
    ".", "!?", "'s", "'ll", "<|", "|>", ENDOFTEXT, "<pad>", "the", " the", "hello", "\u00a0", "\u3000",
])
documents = st.lists(fragments, max_size=25).map("".join)
corpora = st.lists(documents, max_size=6)
special_token_lists = st.sampled_from([[], [ENDOFTEXT], ["<pad>", ENDOFTEXT], ["aa"], ["<|", ENDOFTEXT]])
small_vocab_sizes = st.integers(min_value=256, max_value=320)
# Long words (runs of few letters, repeated patterns) that go through the linked-positions path.
long_words = st.one_of(
    st.text(alphabet="ab", min_size=2, max_size=80),
    st.text(alphabet="abc", min_size=2, max_size=80),
    st.tuples(st.sampled_from(["a", "ab", "aab", "abc", "abab", "aaab"]),
              st.integers(1, 40)).map(lambda p: p[0] * p[1]),
    st.lists(st.sampled_from(["a", "aa", "ab", "ba", "b", "aaaa"]), min_size=1, max_size=40).map("".join),
).filter(lambda word: len(word) > 1).map(str.encode)
long_word_counts = st.dictionaries(long_words, st.integers(1, 4), min_size=1, max_size=5)
differential = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def test_cs336_reference_merges_and_vocab() -> None:
    reference_vocab, reference_merges = load_gpt2(FIXTURES / "train-bpe-reference-vocab.json",
                                                  FIXTURES / "train-bpe-reference-merges.txt")
    start = time.perf_counter()
    vocab, merges = train_bpe(FIXTURES / "corpus.en", 500, [ENDOFTEXT], num_workers=1)
    print(f"corpus.en, vocab 500: {time.perf_counter() - start:.3f} s")
    assert merges == reference_merges
    assert set(vocab.values()) == set(reference_vocab.values())
    assert vocab[499] == ENDOFTEXT.encode()
    assert all(vocab[byte] == bytes([byte]) for byte in range(256))


@differential
@given(corpus=corpora, special_tokens=special_token_lists, vocab_size=small_vocab_sizes)
def test_from_counts_matches_reference(corpus: list[str], special_tokens: list[str], vocab_size: int) -> None:
    vocab_size += len(special_tokens)
    counts = reference_counts(corpus, special_tokens)
    assert train_bpe_from_counts(counts, vocab_size, special_tokens) == \
        reference_train_from_counts(counts, vocab_size, special_tokens)


@differential
@given(corpus=corpora, special_tokens=special_token_lists, vocab_size=small_vocab_sizes)
def test_from_iterator_matches_reference(corpus: list[str], special_tokens: list[str], vocab_size: int) -> None:
    vocab_size += len(special_tokens)
    assert train_bpe_from_iterator(corpus, vocab_size, special_tokens, num_workers=1) == \
        reference_train(corpus, vocab_size, special_tokens)


@differential
@given(corpus=corpora, vocab_size=small_vocab_sizes)
def test_from_files_matches_reference(tmp_path_factory: pytest.TempPathFactory, corpus: list[str],
                                      vocab_size: int) -> None:
    directory = tmp_path_factory.mktemp("corpus")
    # Two files, so that a file boundary is a document boundary too.
    halves = [corpus[: len(corpus) // 2], corpus[len(corpus) // 2:]]
    paths = []
    for number, half in enumerate(halves):
        path = directory / f"part{number}.txt"
        path.write_bytes(ENDOFTEXT.join(half).encode("utf-8"))
        paths.append(path)
    if not any(path.stat().st_size for path in paths):
        with pytest.raises(InputError, match="file is empty"):
            train_bpe(paths, vocab_size + 1, [ENDOFTEXT], num_workers=1)
        return
    expected = reference_train([ENDOFTEXT.join(half) for half in halves], vocab_size + 1, [ENDOFTEXT])
    assert train_bpe(paths, vocab_size + 1, [ENDOFTEXT], num_workers=1) == expected


@settings(max_examples=40, deadline=None)
@given(counts=st.dictionaries(st.binary(min_size=1, max_size=12), st.integers(1, 5), max_size=12),
       vocab_size=st.integers(256, 300))
def test_arbitrary_bytes_and_tied_counts_match_reference(counts: dict[bytes, int], vocab_size: int) -> None:
    # Few distinct counts: almost every step is decided by the tie-break on the pair's bytes.
    assert train_bpe_from_counts(counts, vocab_size) == reference_train_from_counts(counts, vocab_size)


def test_overlapping_runs_merge_left_to_right() -> None:
    assert merge_word((b"a",) * 5, (b"a", b"a")) == (b"aa", b"aa", b"a")
    # After (a, a): "aa aa a" has (aa, aa) and (aa, a) once each; the tie goes to the greater pair (aa, aa).
    _, merges = train_bpe_from_counts({b"aaaaa": 1}, 258)
    assert merges == [(b"a", b"a"), (b"aa", b"aa")]


def test_ties_go_to_the_lexicographically_greater_pair() -> None:
    counts = {b"ab": 1, b"cd": 1, b"b\xff": 1, b"ba": 1}
    _, merges = train_bpe_from_counts(counts, 257)
    assert merges == [max(((b"a", b"b"), (b"c", b"d"), (b"b", b"\xff"), (b"b", b"a")))]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(max_size=6), min_size=2, max_size=8))
def test_reverse_order_key_reverses_bytes_order(tokens: list[bytes]) -> None:
    assert sorted(tokens, key=_reverse_order_key) == sorted(tokens, reverse=True)


def test_stops_early_when_no_pair_is_left() -> None:
    vocab, merges = train_bpe_from_counts({b"abc": 3, b"d": 9}, 1000, [ENDOFTEXT])
    assert merges == [(b"b", b"c"), (b"a", b"bc")]
    assert len(vocab) == 256 + 2 + 1
    assert vocab[258] == ENDOFTEXT.encode()


def test_empty_inputs_give_the_byte_vocab(tmp_path: Path) -> None:
    for vocab, merges in (train_bpe_from_iterator([], 300, [ENDOFTEXT]), train_bpe_from_iterator([""], 300),
                          train_bpe_from_counts({}, 300), train_bpe_from_counts({b"a": 5, b"b": 1}, 300)):
        assert merges == []
        assert [vocab[i] for i in range(256)] == [bytes([i]) for i in range(256)]
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match="empty.txt: file is empty"):
        train_bpe(empty, 300, [ENDOFTEXT], num_workers=1)


def test_special_tokens_get_the_last_ids_in_order() -> None:
    vocab, merges = train_bpe_from_iterator(["hello hello<pad>hello"], 260, ["<pad>", ENDOFTEXT], num_workers=1)
    assert len(merges) == 2
    assert vocab[258] == b"<pad>" and vocab[259] == ENDOFTEXT.encode()


def test_numpy_integer_counts_are_accepted() -> None:
    counts = {b"hello": np.int64(3), b"help": np.int32(2)}
    assert train_bpe_from_counts(counts, 260) == reference_train_from_counts({b"hello": 3, b"help": 2}, 260)


def test_merge_pairs_returns_ids() -> None:
    counts = Counter({b"abab": 2, b"ab": 1})
    id_merges = merge_pairs(counts, 10)
    _, merges = reference_train_from_counts(counts, 266)
    vocab = {byte: bytes([byte]) for byte in range(256)}
    for left, right in id_merges:
        vocab[len(vocab)] = vocab[left] + vocab[right]
    assert [(vocab[left], vocab[right]) for left, right in id_merges] == merges


def test_verbose_prints_a_summary(capsys: pytest.CaptureFixture[str]) -> None:
    train_bpe_from_iterator(["some text, some more text"], 270, [ENDOFTEXT], num_workers=1, verbose=True)
    summary = capsys.readouterr().err
    assert "merges in" in summary and "counted in" in summary and "peak memory" in summary


@pytest.mark.parametrize(("vocab_size", "special_tokens", "error", "message"), [
    (255, None, ValueError, "vocab_size 255 is too small: it must be at least 256"),
    (256, [ENDOFTEXT], ValueError, "it must be at least 257 (256 byte tokens + 1 special tokens)"),
    (300.0, None, TypeError, "vocab_size must be an int, got float"),
    (True, None, TypeError, "vocab_size must be an int, got bool"),
    (300, [ENDOFTEXT, ENDOFTEXT], ValueError, "duplicate special token '<|endoftext|>'"),
    (300, [""], ValueError, "special tokens must not be empty strings"),
    (300, ENDOFTEXT, TypeError, "special_tokens must be a sequence of str, not a str"),
])
def test_bad_arguments(vocab_size: int, special_tokens: list[str] | None, error: type[Exception], message: str,
                       tmp_path: Path) -> None:
    path = tmp_path / "corpus.txt"
    path.write_text("some text")
    with pytest.raises(error, match=re.escape(message)):
        train_bpe_from_counts({b"ab": 1}, vocab_size, special_tokens)
    with pytest.raises(error, match=re.escape(message)):
        train_bpe_from_iterator(["some text"], vocab_size, special_tokens)
    with pytest.raises(error, match=re.escape(message)):
        train_bpe(path, vocab_size, special_tokens, num_workers=1)


@pytest.mark.parametrize(("counts", "error", "message"), [
    ({b"ab": 0}, ValueError, r"count of pre-token b'ab' must be positive, got 0"),
    ({b"ab": -2}, ValueError, r"count of pre-token b'ab' must be positive, got -2"),
    ({"ab": 1}, TypeError, r"counts keys must be bytes, got str: 'ab'"),
    ({b"ab": 1.5}, TypeError, r"count of pre-token b'ab' must be an int, got float: 1.5"),
    ([(b"ab", 1)], TypeError, r"counts must be a mapping from pre-token bytes to counts, got list"),
    ({b"ab": 1 << 62, b"abc": 1 << 62}, ValueError, r"pre-token counts are too large"),
])
def test_bad_counts(counts: object, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        train_bpe_from_counts(counts, 300)  # type: ignore[arg-type]


@pytest.mark.parametrize(("special_token", "message"), [
    ("a", "special token 'a' is the single byte b'a', which is already token 97"),
    ("\n", "special token '\\n' is the single byte b'\\n', which is already token 10"),
    ("é", "special token 'é' reads as the byte-level token b'\\xe9' in vocab.json"),
    ("Ġt", "special token 'Ġt' reads as the byte-level token b' t' in vocab.json"),
    ("ĠĠ", "special token 'ĠĠ' reads as the byte-level token b'  ' in vocab.json"),
])
def test_special_token_colliding_with_a_byte_level_token_is_refused_before_counting(
        special_token: str, message: str, tmp_path: Path) -> None:
    def texts_that_must_not_be_read():
        raise AssertionError("the texts were read before the special tokens were checked")
        yield ""

    missing = tmp_path / "not-read.txt"  # a counting attempt would fail with "No such file" instead
    for train in (lambda specials: train_bpe(missing, 300, specials, num_workers=1),
                  lambda specials: train_bpe_from_iterator(texts_that_must_not_be_read(), 300, specials),
                  lambda specials: train_bpe_from_counts({b"ab": 1}, 300, specials)):
        with pytest.raises(InputError, match=re.escape(message)):
            train([ENDOFTEXT, special_token])


@pytest.mark.parametrize("special_token", ["ab", "<|endoftext|>", "日本", "é ", "🙂", "Ġ t"])
def test_multibyte_special_tokens_never_equal_a_learned_token(special_token: str) -> None:
    # Documents are split at every occurrence, so no merge rebuilds the special token's bytes, even in text full of it.
    text = f"{special_token}{special_token} x{special_token}y {special_token[:1]}{special_token[1:]} {special_token}"
    vocab, merges = train_bpe_from_iterator([text * 3], 400, [special_token], num_workers=1)
    assert list(vocab.values()).count(special_token.encode()) == 1
    assert vocab[len(vocab) - 1] == special_token.encode()
    assert (vocab, merges) == reference_train([text * 3], 400, [special_token])


def test_counts_holding_a_special_token_are_refused() -> None:
    with pytest.raises(InputError, match=re.escape("pre-token b' <|endoftext|>' contains the special token "
                                                   "'<|endoftext|>'")):
        train_bpe_from_counts({b"ab": 3, b" <|endoftext|>": 2}, 300, [ENDOFTEXT])


def merges_as_bytes(id_merges: list[tuple[int, int]]) -> list[tuple[bytes, bytes]]:
    tokens = [bytes([byte]) for byte in range(256)]
    merges = []
    for left, right in id_merges:
        merges.append((tokens[left], tokens[right]))
        tokens.append(tokens[left] + tokens[right])
    return merges


@settings(max_examples=150, deadline=None)
@given(counts=long_word_counts, long_word_length=st.sampled_from([2, 3, 5, 16]), num_merges=st.integers(1, 60))
def test_long_words_merge_as_the_reference(counts: dict[bytes, int], long_word_length: int, num_merges: int) -> None:
    # With a small threshold most words take the linked-positions path, the rest the str path, in the same run.
    expected = reference_train_from_counts(counts, 256 + num_merges)[1]
    assert merges_as_bytes(merge_pairs(counts, num_merges, long_word_length=long_word_length, store="strings")) \
        == expected


@differential
@given(corpus=corpora, special_tokens=special_token_lists, vocab_size=small_vocab_sizes)
def test_every_word_long_matches_reference(corpus: list[str], special_tokens: list[str], vocab_size: int) -> None:
    counts = reference_counts(corpus, special_tokens)
    expected = reference_train_from_counts(counts, vocab_size)[1]
    assert merges_as_bytes(merge_pairs(counts, vocab_size - 256, long_word_length=2, store="strings")) == expected


@pytest.mark.parametrize("word", [
    b"a" * 1001, b"ab" * 700, b"aab" * 400, (b"abc" * 50 + b"a") * 20,
    Path(FIXTURES / "corpus.en").read_bytes().replace(b" ", b"").replace(b"\n", b"")[:3000],
])
def test_words_longer_than_the_threshold_match_reference(word: bytes) -> None:
    assert len(word) >= LONG_WORD_LENGTH
    counts = {word: 2, word[:LONG_WORD_LENGTH - 1]: 3, b"ab": 5}
    assert train_bpe_from_counts(counts, 256 + 80) == reference_train_from_counts(counts, 256 + 80)
    expected = reference_train_from_counts(counts, 256 + 80)[1]
    assert merges_as_bytes(merge_pairs(counts, 80, store="strings")) == expected


def test_unknown_engine_or_stray_ray_address_is_refused_before_counting(tmp_path: Path) -> None:
    missing = tmp_path / "not-read.txt"
    with pytest.raises(ValueError, match=re.escape("engine must be one of 'local', 'ray', got 'spark'")):
        train_bpe(missing, 300, engine="spark")
    with pytest.raises(ValueError, match=re.escape("ray_address='10.0.0.1:6379' is only used with engine='ray'")):
        train_bpe(missing, 300, ray_address="10.0.0.1:6379")


def test_ray_engine_without_ray_installed_says_how_to_install_it(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # what an environment without the extra looks like to imports
    with pytest.raises(InputError, match=re.escape("pip install 'hf_bpe[ray]'")):
        train_bpe(tmp_path / "not-read.txt", 300, engine="ray")


@pytest.fixture(scope="module")
def local_ray_cluster():
    ray = pytest.importorskip("ray")
    from hf_bpe.cluster.session import project_runtime_env

    # Without token authentication, as on the other test clusters: a process that once joined a cluster with a token
    # keeps it, and the actors it later asks of a cluster without one are cancelled before they start.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_USAGE_STATS_ENABLED", "0")
        patch.setenv("RAY_AUTH_MODE", "disabled")
        ray.init(num_cpus=2, include_dashboard=False, runtime_env=project_runtime_env(), log_to_driver=False)
        yield ray
        ray.shutdown()


def test_ray_engine_trains_the_same_vocab_and_merges_as_local(local_ray_cluster, tmp_path: Path) -> None:
    text = (FIXTURES / "corpus.en").read_text(encoding="utf-8")
    paths = []
    for number in range(3):  # several files and several chunks per file: the same tasks on both engines
        path = tmp_path / f"part{number}.txt"
        path.write_text(text[number::3] + ENDOFTEXT + text, encoding="utf-8")
        paths.append(path)
    local = train_bpe(paths, 600, [ENDOFTEXT], num_workers=1)  # no worker processes beside a Ray connection
    assert train_bpe(paths, 600, [ENDOFTEXT], engine="ray") == local


@differential
@given(corpus=corpora, words=long_word_counts, queue=st.sampled_from(["buckets", "heap"]),
       store=st.sampled_from(["flat", "strings"]), long_word_length=st.sampled_from([2, 7, LONG_WORD_LENGTH]),
       num_merges=st.integers(1, 70))
def test_both_priority_queues_and_both_stores_match_reference(corpus: list[str], words: dict[bytes, int], queue: str,
                                                              store: str, long_word_length: int,
                                                              num_merges: int) -> None:
    counts = reference_counts(corpus, [ENDOFTEXT]) + Counter(words)
    expected = reference_train_from_counts(counts, 256 + num_merges)[1]
    assert merges_as_bytes(merge_pairs(counts, num_merges, long_word_length=long_word_length, queue=queue,
                                       store=store)) == expected


def pair_counts_of(words: dict[tuple[bytes, ...], int]) -> Counter[tuple[bytes, bytes]]:
    counts: Counter[tuple[bytes, bytes]] = Counter()
    for word, count in words.items():
        for pair in zip(word, word[1:]):
            counts[pair] += count
    return counts


@settings(max_examples=100, deadline=None)
@given(counts=st.one_of(long_word_counts, st.lists(documents, max_size=4).map(reference_counts)))
def test_a_created_pair_never_counts_more_than_the_merged_pair(counts: dict[bytes, int]) -> None:
    # The bucket queue's premise, checked on the plain algorithm: after merging the top pair (count c), every pair
    # holding the new token counts at most c, overlapping runs included, so the top count never rises.
    words = {tuple(bytes([byte]) for byte in word): count for word, count in counts.items()}
    previous_top = None
    for _ in range(40):
        pair_counts = pair_counts_of(words)
        if not pair_counts:
            break
        best = max(pair_counts, key=lambda pair: (pair_counts[pair], pair))
        top = pair_counts[best]
        assert previous_top is None or top <= previous_top
        merged: Counter[tuple[bytes, ...]] = Counter()
        for word, count in words.items():
            merged[merge_word(word, best)] += count
        words = dict(merged)
        new_token = best[0] + best[1]
        created = {pair: count for pair, count in pair_counts_of(words).items() if new_token in pair}
        assert all(count <= top for count in created.values())
        previous_top = top


def test_unknown_queue_or_store_is_refused() -> None:
    with pytest.raises(ValueError, match=re.escape("queue must be one of 'buckets', 'heap', got 'fibonacci'")):
        merge_pairs({b"ab": 1}, 3, queue="fibonacci")
    with pytest.raises(ValueError, match=re.escape("store must be one of 'flat', 'strings', got 'rope'")):
        merge_pairs({b"ab": 1}, 3, store="rope")


@settings(max_examples=200, deadline=None)
@given(counts=st.dictionaries(st.one_of(long_words, st.binary(min_size=2, max_size=9)), st.integers(1, 1 << 40),
                              max_size=30),
       long_word_length=st.sampled_from([2, 3, 5, LONG_WORD_LENGTH]),
       block_positions=st.sampled_from([1, 2, 7, 40, 1 << 20]))
def test_byte_pairs_are_counted_and_indexed_the_same_in_any_blocks(counts: dict[bytes, int], long_word_length: int,
                                                                   block_positions: int) -> None:
    words = [word.decode("latin-1") for word in counts]
    expected_counts: Counter[str] = Counter()
    expected_index: dict[str, list[int]] = {}
    for word_index, (word, count) in enumerate(zip(words, counts.values())):
        for pair in map("".join, zip(word, word[1:])):
            expected_counts[pair] += count
            if len(word) < long_word_length and word_index not in expected_index.setdefault(pair, []):
                expected_index[pair].append(word_index)
    pair_counts, pair_words = _count_byte_pairs(words, list(counts.values()), long_word_length, block_positions)
    assert pair_counts == expected_counts
    assert {pair: entries.tolist() for pair, entries in pair_words.items()} == expected_index
    assert all(entries.dtype == np.int32 for entries in pair_words.values())


@differential
@given(corpus=corpora, words=long_word_counts, block_positions=st.sampled_from([1, 3, 16]),
       num_merges=st.integers(1, 70))
def test_merges_do_not_depend_on_the_byte_pair_blocks(monkeypatch: pytest.MonkeyPatch, corpus: list[str],
                                                      words: dict[bytes, int], block_positions: int,
                                                      num_merges: int) -> None:
    counts = reference_counts(corpus, [ENDOFTEXT]) + Counter(words)
    monkeypatch.setattr(hf_bpe.train.merging.string_corpus, "BYTE_PAIR_BLOCK", block_positions)
    expected = reference_train_from_counts(counts, 256 + num_merges)[1]
    assert merges_as_bytes(merge_pairs(counts, num_merges, long_word_length=7, store="strings")) == expected


def test_any_integral_vocab_size_is_accepted_and_other_numbers_are_not() -> None:
    """numpy integers are vocab sizes (operator.index); bools, floats and strings are not (issue 20)."""
    import numpy as np

    from hf_bpe.train.api import train_bpe_from_iterator

    texts = ["low lower lowest newer wider"] * 3
    expected = train_bpe_from_iterator(texts, 262)
    for size in (np.int64(262), np.uint16(262), np.int32(262)):
        assert train_bpe_from_iterator(texts, size, num_workers=1) == expected
    for size in (262.0, True, np.bool_(True), "262", np.float64(262)):
        with pytest.raises(TypeError, match="vocab_size must be an int"):
            train_bpe_from_iterator(texts, size)
