"""Tests for hf_bpe.train.starts.extend: continuing training from a base tokenizer's merges, differential against the
reference (hf_bpe.train._reference.reference_extend_from_counts) with both queues, random and trained bases, the
trainer options, the speculative floor, and giant pre-tokens (the encoder's long-word kernel)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hf_bpe import Tokenizer, save_tokenizer_directory, train_bpe, train_bpe_from_counts
from hf_bpe.common.errors import InputError
from hf_bpe.encode.cache import ID_DTYPE
from hf_bpe.encode.long_words import LONG_WORD_BYTES
from hf_bpe.encode.merge_kernels import MIN_BATCH_MERGE
from hf_bpe.train._reference import reference_extend_from_counts
from hf_bpe.train.merging.merge_loop import QUEUES, _merge
from hf_bpe.train.starts.base_words import base_words
from hf_bpe.train.starts.extend import extend_bpe, extend_bpe_from_counts, extend_bpe_from_iterator, load_base
from tests import FIXTURES
from tests.train.merging.test_merge_loop import local_ray_cluster  # noqa: F401 (a fixture)

ENDOFTEXT = "<|endoftext|>"
differential = settings(max_examples=60, deadline=None)

letters = st.sampled_from(["a", "b", "c", "ab", "ba", "aa", "abc", "é", " "])
words = st.lists(letters, min_size=1, max_size=12).map(lambda parts: "".join(parts).encode())
corpus_counts = st.dictionaries(words, st.integers(1, 30), min_size=1, max_size=30)


@st.composite
def random_bases(draw: st.DrawFn) -> Tokenizer:
    """A base tokenizer whose merges join random earlier tokens (so some of its tokens are not what it encodes
    their bytes to), with shuffled byte ids, a gap in the ids and a special token in the middle."""
    multiplier = draw(st.sampled_from([1, 7, 131]))
    vocab = {(byte * multiplier) % 256: bytes([byte]) for byte in range(256)}
    tokens = [b"a", b"b", b"c", b" ", b"\xc3", b"\xa9"]
    merges: list[tuple[bytes, bytes]] = []
    for _ in range(draw(st.integers(0, 12))):
        left, right = draw(st.sampled_from(tokens)), draw(st.sampled_from(tokens))
        if left + right not in tokens:
            tokens.append(left + right)
            merges.append((left, right))
    next_id = 256 + draw(st.integers(0, 3))
    specials = draw(st.sampled_from([[], [ENDOFTEXT]]))
    for index, (left, right) in enumerate(merges):
        if specials and index == len(merges) // 2:
            vocab[next_id] = ENDOFTEXT.encode()
            next_id += 1
        vocab[next_id] = left + right
        next_id += 1
    return Tokenizer(vocab, merges, specials)


def fast_extend(base: Tokenizer, counts: Mapping[bytes, int], vocab_size: int, queue: str = "buckets",
                **options: int | None) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """The fast path with the queue chosen: the start state from `base_words`, then the one merge loop."""
    words = base_words(counts, base)
    first_new_id = words.first_new_id
    vocab, merges = dict(base.vocab), list(base.merges)
    for new_id, (left, right) in enumerate(_merge(words, vocab_size - len(vocab), False, queue=queue, **options),
                                           start=first_new_id):
        merges.append((vocab[left], vocab[right]))
        vocab[new_id] = vocab[left] + vocab[right]
    return vocab, merges


@differential
@given(random_bases(), corpus_counts, st.integers(0, 40), st.sampled_from(sorted(QUEUES)),
       st.sampled_from([0, 2, 5]), st.sampled_from([None, 1, 3, 4, 6]))
def test_extension_from_random_bases_equals_the_reference(base: Tokenizer, counts: dict[bytes, int], new: int,
                                                          queue: str, min_frequency: int,
                                                          max_token_length: int | None) -> None:
    vocab_size = len(base.vocab) + new
    options = {"min_frequency": min_frequency, "max_token_length": max_token_length}
    expected = reference_extend_from_counts(counts, base.vocab, base.merges, vocab_size, **options)
    assert fast_extend(base, counts, vocab_size, queue, **options) == expected


@differential
@given(corpus_counts, corpus_counts, st.integers(256, 300), st.integers(1, 60), st.sampled_from(sorted(QUEUES)))
def test_extension_of_a_trained_base_equals_the_reference(base_counts: dict[bytes, int], counts: dict[bytes, int],
                                                          base_size: int, new: int, queue: str) -> None:
    vocab, merges = train_bpe_from_counts(base_counts, base_size + 1, [ENDOFTEXT])
    base = Tokenizer(vocab, merges, [ENDOFTEXT])
    expected = reference_extend_from_counts(counts, vocab, merges, len(vocab) + new)
    assert fast_extend(base, counts, len(vocab) + new, queue) == expected
    # Continuing on the base's own corpus makes the merges that training it further would have made.
    longer_vocab, longer_merges = train_bpe_from_counts(base_counts, base_size + 1 + new, [ENDOFTEXT])
    extended_vocab, extended_merges = extend_bpe_from_counts(base, base_counts, len(vocab) + new)
    assert extended_merges == longer_merges
    assert sorted(extended_vocab.values()) == sorted(longer_vocab.values())


@differential
@given(random_bases(), corpus_counts, st.integers(0, 30))
def test_token_counts_are_the_extended_tokenizers_segmentation(base: Tokenizer, counts: dict[bytes, int],
                                                              new: int) -> None:
    token_counts = np.zeros(max(base.vocab) + 1 + new, dtype=np.uint64)
    vocab, merges = extend_bpe_from_counts(base, counts, len(base.vocab) + new, token_counts=token_counts)
    extended = Tokenizer(vocab, merges, base.special_tokens)
    expected = np.zeros(len(token_counts), dtype=np.uint64)
    for ids, count in zip(extended.merge_pretoken_bytes(list(counts)), counts.values()):
        np.add.at(expected, np.frombuffer(ids, dtype=ID_DTYPE), np.uint64(count))
    assert token_counts.tolist() == expected.tolist()


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.integers(20, 200), st.sampled_from(sorted(QUEUES)))
def test_extension_with_the_floor_and_numpy_merges_equals_the_reference(seed: int, new: int, queue: str) -> None:
    """Many distinct words with skewed counts: the speculative floor is set (and lowered), the encoder merges them
    in numpy batches, and the big merges run with numpy."""
    generator = np.random.default_rng(seed)
    alphabet = np.frombuffer(b"abcde ", dtype=np.uint8)
    counts: dict[bytes, int] = {}
    for _ in range(3 * MIN_BATCH_MERGE):
        word = generator.choice(alphabet, size=int(generator.integers(2, 9))).tobytes()
        counts[word] = counts.get(word, 0) + int(generator.zipf(1.5)) % 1000 + 1
    vocab, merges = train_bpe_from_counts(dict(list(counts.items())[:50]), 270)
    base = Tokenizer(vocab, merges)
    expected = reference_extend_from_counts(counts, vocab, merges, len(vocab) + new)
    assert fast_extend(base, counts, len(vocab) + new, queue) == expected


@settings(max_examples=4, deadline=None)
@given(st.integers(0, 2 ** 32 - 1))
def test_extension_with_a_giant_pretoken_equals_the_reference(seed: int) -> None:
    """A pre-token longer than LONG_WORD_BYTES goes through the encoder's long-word kernel. The base merges apply
    at a few places only (the reference encoder costs the word's length per merge); continuing then merges runs of
    thousands of occurrences in the giant word."""
    generator = np.random.default_rng(seed)
    giant = bytearray(b"xy" * (LONG_WORD_BYTES // 2 + 100))
    for piece in (b"aba", b"zx", b"ab", b"zx"):
        at = int(generator.integers(len(giant)))
        giant[at:at] = piece
    base = Tokenizer({byte: bytes([byte]) for byte in range(256)} | {256: b"ab", 257: b"aba", 258: b"zx"},
                     [(b"a", b"b"), (b"ab", b"a"), (b"z", b"x")])
    counts = {bytes(giant): 1, b"abab": 3, b"zxy": 2}
    expected = reference_extend_from_counts(counts, base.vocab, base.merges, len(base.vocab) + 6)
    assert fast_extend(base, counts, len(base.vocab) + 6) == expected


def test_new_ids_follow_the_base_and_a_saved_extension_encodes_as_trained(tmp_path) -> None:
    vocab, merges = train_bpe_from_counts({b"hello": 5, b" world": 3}, 262, [ENDOFTEXT])
    base = Tokenizer(vocab, merges, [ENDOFTEXT])
    texts = ["ünïcödé täxt " * 3, "ünï cödé"]
    new_vocab, new_merges = extend_bpe_from_iterator(base, texts, len(vocab) + 10)
    assert all(new_vocab[token_id] == token for token_id, token in vocab.items())
    assert new_merges[:len(merges)] == merges
    assert sorted(new_vocab)[len(vocab):] == list(range(max(vocab) + 1, max(vocab) + 11))
    path = save_tokenizer_directory(tmp_path / "extended", new_vocab, new_merges, [ENDOFTEXT])
    loaded = load_base(path)
    assert loaded.vocab == new_vocab and list(loaded.merges) == new_merges
    assert loaded.encode(texts[0]) == Tokenizer(new_vocab, new_merges, [ENDOFTEXT]).encode(texts[0])


def test_gpt2s_bare_files_are_a_base_with_its_end_of_text_token() -> None:
    from hf_bpe.evaluation.baselines import GPT2_FILES, gpt2_tokenizer

    base, gpt2 = load_base(GPT2_FILES), gpt2_tokenizer()
    assert list(base.special_tokens) == [ENDOFTEXT] and base.vocab == gpt2.vocab and base.merges == gpt2.merges
    text = "Extending GPT-2<|endoftext|> to Привет"
    assert base.encode(text) == gpt2.encode(text)


def test_bad_arguments_are_refused_before_any_work(tmp_path) -> None:
    base = Tokenizer({byte: bytes([byte]) for byte in range(256)}, [])
    with pytest.raises(ValueError, match="at least 256"):
        extend_bpe_from_counts(base, {b"ab": 1}, 255)
    with pytest.raises(ValueError, match="min_frequency"):
        extend_bpe_from_counts(base, {b"ab": 1}, 260, min_frequency=-1)
    with pytest.raises(InputError, match="no-such-dir"):
        extend_bpe_from_counts(tmp_path / "no-such-dir", {b"ab": 1}, 260)
    with pytest.raises(ValueError, match="store='flat'"):
        _merge(base_words({b"ab": 1}, base), 2, False, store="strings")


def test_ray_engine_extends_as_the_local_one(local_ray_cluster, tmp_path) -> None:  # noqa: F811 (the fixture)
    base = Tokenizer(*train_bpe(FIXTURES / "corpus.en", 400, [ENDOFTEXT], num_workers=1, progress=False), [ENDOFTEXT])
    paths = []
    for number, name in enumerate(("german.txt", "tinystories_sample.txt")):
        path = tmp_path / f"part{number}.txt"
        path.write_text((FIXTURES / name).read_text(encoding="utf-8") + ENDOFTEXT + "more", encoding="utf-8")
        paths.append(path)
    local = extend_bpe(base, paths, 700, num_workers=1, progress=False)
    assert extend_bpe(base, paths, 700, engine="ray", progress=False) == local
    assert len(local[0]) == 700 and local[1][:len(base.merges)] == list(base.merges)


def test_consume_counts_empties_them_and_changes_nothing_else() -> None:
    base = Tokenizer({byte: bytes([byte]) for byte in range(256)} | {256: b"ab"}, [(b"a", b"b")])
    counts = {b"abab": 2, b"abc": 1, b"cc": 4}
    kept = extend_bpe_from_counts(base, dict(counts), 260)
    assert extend_bpe_from_counts(base, counts, 260, consume_counts=True) == kept and counts == {}
    with pytest.raises(TypeError, match="mutable mapping"):
        extend_bpe_from_counts(base, MappingProxyType({b"ab": 1}), 260, consume_counts=True)
