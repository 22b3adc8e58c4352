"""Tests for superwords on top of an existing tokenizer (hf_bpe.train.starts.superword_extend, `superword_from=` of
extend_bpe and extend_bpe_from_iterator): the merges and ids against the plain reference
(hf_bpe.train._reference.reference_superword_extend) with hypothesis over random bases, GPT-2 plus superwords (every
GPT-2 id and merge unchanged), the token counts against what the saved directory encodes, the Ray engine, and the
bases and options refused."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import tokenizers
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hf_bpe import Tokenizer, extend_bpe, extend_bpe_from_iterator, save_tokenizer_directory
from hf_bpe.common.errors import InputError
from hf_bpe.evaluation.baselines import gpt2_tokenizer
from hf_bpe.train._reference import reference_superword_extend
from hf_bpe.train.counting.count import count_pretokens_in_iterator
from hf_bpe.train.starts.superword_extend import check_superwords_on_base
from tests import FIXTURES
from tests.train.merging.test_merge_loop import local_ray_cluster  # noqa: F401 (the module's Ray cluster fixture)
from tests.train.starts.test_extend import random_bases

ENDOFTEXT = "<|endoftext|>"
# SuperBPE's authors' stage-2 pattern for extending an existing tokenizer (scripts/extend_existing_tokenizer.sh).
AUTHORS_PATTERN = r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]{2,}[\r\n/]*| +(?!\S)"
STAGE_TWO_PATTERNS = [None, r"\S+|\s+", AUTHORS_PATTERN]
# Text of the random bases' tokens (a, b, c, space, é), with numbers, punctuation, newlines and the special token.
PIECES = ["a", "b", "c", " ", "é", "ab", "  ", "cab ", "1234567", "!!", ".", "\n", ENDOFTEXT, "a b", " c"]
texts_of_pieces = st.lists(st.lists(st.sampled_from(PIECES), max_size=20).map("".join), min_size=1, max_size=5)


@st.composite
def bases_and_sizes(draw: st.DrawFn) -> tuple[Tokenizer, int, int]:
    """A random base, the tokens it keeps (256 + its special tokens up to its size) and the final vocab size."""
    base = draw(random_bases())
    keep = draw(st.integers(256 + len(base.special_tokens), len(base.vocab)) | st.just(len(base.vocab)))
    return base, keep, keep + draw(st.integers(0, 30))


@settings(max_examples=80, deadline=None)
@given(bases_and_sizes(), texts_of_pieces, st.sampled_from(STAGE_TWO_PATTERNS))
@example((Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"ab", 257: ENDOFTEXT.encode(), 258: b"ab "},
                    [(b"a", b"b"), (b"ab", b" ")], [ENDOFTEXT]), 259, 270),
         ["ab ab cab 1234567 ab ab" + ENDOFTEXT + "ab ab"] * 3, None)
def test_superwords_on_a_base_equal_the_reference(base_and_sizes: tuple[Tokenizer, int, int], texts: list[str],
                                                  superword_pattern: str | None) -> None:
    base, keep, vocab_size = base_and_sizes
    expected = reference_superword_extend(texts, base.vocab, base.merges, base.special_tokens, keep, vocab_size,
                                          superword_pattern)
    assert extend_bpe_from_iterator(base, texts, vocab_size, num_workers=1, superword_from=keep,
                                    superword_pattern=superword_pattern) == expected


@settings(max_examples=40, deadline=None)
@given(bases_and_sizes(), texts_of_pieces, st.sampled_from(STAGE_TWO_PATTERNS))
def test_token_counts_are_what_the_result_encodes(base_and_sizes: tuple[Tokenizer, int, int], texts: list[str],
                                                  superword_pattern: str | None) -> None:
    # The final segmentation of the stage-2 pre-tokens is what the tokenizer saved with the stage-2 pattern gives:
    # stage-2 pre-tokens merged by rank (a base's `ignore_merges` is not kept).
    base, keep, vocab_size = base_and_sizes
    superwords = check_superwords_on_base(base, keep, superword_pattern, vocab_size)
    assert superwords is not None
    counts = count_pretokens_in_iterator(texts, base.special_tokens, num_workers=1, pattern=superwords.regex)
    token_counts = np.zeros(superwords.num_ids(vocab_size), dtype=np.uint64)
    vocab, merges = superwords.train(lambda stage_two_pass: stage_two_pass(Counter(counts)), vocab_size,
                                     token_counts=token_counts, num_workers=1)
    assert max(vocab) < len(token_counts)
    encoded = Tokenizer(vocab, merges, base.special_tokens, pattern=superwords.regex)
    expected = Counter(token_id for text in texts for token_id in encoded.encode(text))
    for special in base.special_tokens:
        del expected[encoded.token_to_id(special)]
    assert {token_id: int(count) for token_id, count in enumerate(token_counts) if count} == expected


GPT2_TEXT = ("It costs 1234567 dollars, by the way. The cat sat on the mat, by the way.\n\nBy the way, the cat "
             "sat on the mat again.") * 3


@pytest.mark.parametrize("keep", [50257, 1000, 257])
def test_gpt2_plus_superwords_equal_the_reference(keep: int) -> None:
    gpt2 = gpt2_tokenizer()
    vocab_size = keep + 20
    texts = [GPT2_TEXT, "the cat sat" + ENDOFTEXT + "on the mat"]
    expected = reference_superword_extend(texts, gpt2.vocab, gpt2.merges, gpt2.special_tokens, keep, vocab_size)
    vocab, merges = extend_bpe_from_iterator(gpt2, texts, vocab_size, num_workers=1, superword_from=keep)
    assert (vocab, merges) == expected
    assert len(vocab) == vocab_size and any(re.search(rb"[^\s] [^\s]", token) for token in vocab.values())
    if keep == 50257:  # every GPT-2 id and merge unchanged, the superwords after <|endoftext|>
        assert {token_id: vocab[token_id] for token_id in gpt2.vocab} == dict(gpt2.vocab)
        assert vocab[50256] == ENDOFTEXT.encode() and merges[:50000] == list(gpt2.merges)
        assert sorted(set(vocab) - set(gpt2.vocab)) == list(range(50257, vocab_size))
    else:  # as SuperBPE from scratch: GPT-2's bytes and first merges keep their ids, <|endoftext|> last
        assert {token_id: vocab[token_id] for token_id in range(keep - 1)} == {
            token_id: gpt2.vocab[token_id] for token_id in range(keep - 1)}
        assert vocab[vocab_size - 1] == ENDOFTEXT.encode() and merges[:keep - 257] == list(gpt2.merges[:keep - 257])


def test_gpt2_plus_superwords_saved_encodes_as_training_ended(tmp_path: Path) -> None:
    """GPT-2 kept whole plus superwords on a fixture text: saved with the superword pattern, the directory encodes
    the training corpus (in `tokenizers` and in hf_bpe) to the counts of the final segmentation of training."""
    gpt2 = gpt2_tokenizer()
    texts = (FIXTURES / "hf_corpora_sample.txt").read_text(encoding="utf-8").split(ENDOFTEXT)[:20]
    texts.append("It costs 1234567 dollars, by the way. " * 5)
    superwords = check_superwords_on_base(gpt2, 50257, None, 50257 + 300)
    assert superwords is not None
    counts = count_pretokens_in_iterator(texts, [ENDOFTEXT], num_workers=1, pattern="superword")
    token_counts = np.zeros(superwords.num_ids(50257 + 300), dtype=np.uint64)
    vocab, merges = superwords.train(lambda stage_two_pass: stage_two_pass(Counter(counts)), 50257 + 300,
                                     token_counts=token_counts)
    assert vocab[50256] == ENDOFTEXT.encode() and token_counts[50257:].sum() > 0
    assert all(vocab[token_id] == token for token_id, token in gpt2.vocab.items())
    directory = save_tokenizer_directory(tmp_path / "gpt2-superwords", vocab, merges, [ENDOFTEXT],
                                         pattern="superword")
    theirs = tokenizers.Tokenizer.from_file(str(directory / "tokenizer.json"))
    ours = Tokenizer(vocab, merges, [ENDOFTEXT], pattern="superword")
    expected = Counter({token_id: int(count) for token_id, count in enumerate(token_counts) if count})
    assert Counter(token_id for text in texts for token_id in theirs.encode(text).ids) == expected
    assert Counter(token_id for text in texts for token_id in ours.encode(text)) == expected


def test_files_and_worker_processes_give_the_same_superwords(tmp_path: Path) -> None:
    texts = (FIXTURES / "hf_corpora_sample.txt").read_text(encoding="utf-8").split(ENDOFTEXT)
    path = tmp_path / "corpus.txt"
    path.write_text(ENDOFTEXT.join(texts), encoding="utf-8")
    base = gpt2_tokenizer()
    for keep in (50257, 5000):
        expected = extend_bpe_from_iterator(base, texts, keep + 200, num_workers=1, superword_from=keep,
                                            superword_pattern=AUTHORS_PATTERN)
        assert extend_bpe(base, path, keep + 200, num_workers=2, progress=False, superword_from=keep,
                          superword_pattern=AUTHORS_PATTERN) == expected


@pytest.mark.usefixtures("local_ray_cluster")
def test_the_ray_engine_counts_as_the_local_one(tmp_path: Path) -> None:
    path = tmp_path / "corpus.txt"
    path.write_text((FIXTURES / "hf_corpora_sample.txt").read_text(encoding="utf-8"), encoding="utf-8")
    local = extend_bpe(gpt2_tokenizer(), path, 50457, num_workers=1, progress=False, superword_from=50257)
    assert extend_bpe(gpt2_tokenizer(), path, 50457, engine="ray", progress=False, superword_from=50257) == local


def converted_base() -> Tokenizer:
    """A base as a converted tiktoken file has it: ranks as ids, tokens that no merge makes (b"xyz"), lookups."""
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"th", 257: b"xyz", 258: b" th", 259: b" xyz",
                                                   300: ENDOFTEXT.encode()}
    return Tokenizer(vocab, [(b"t", b"h"), (b" ", b"th"), (b" ", b"xyz")], [ENDOFTEXT], ignore_merges=True)


def test_bases_and_options_refused_before_any_counting() -> None:
    gpt2 = gpt2_tokenizer()
    never_read = ["never counted"]

    def refused(error: type[Exception], message: str, base: Tokenizer, superword_from: int | None,
                vocab_size: int = 60000, **options: str) -> None:
        with pytest.raises(error, match=re.escape(message)):
            extend_bpe_from_iterator(base, iter(never_read), vocab_size, superword_from=superword_from, **options)

    refused(ValueError, "superword_from 50258 is more than the 50,257 tokens of the base tokenizer", gpt2, 50258)
    refused(ValueError, "superword_from 256 is too small: it counts the 256 byte tokens and the 1 special tokens "
                        "too, so it must be at least 257", gpt2, 256)
    refused(ValueError, "superword_from 50257 must be at most vocab_size (50000)", gpt2, 50257, 50000)
    refused(ValueError, "superword_pattern is the pattern of SuperBPE's stage 2: it needs superword_from", gpt2,
            None, superword_pattern="superword")
    refused(ValueError, "pattern: with superword_from, stage 1 is the base tokenizer's", gpt2, 50257,
            pattern="cl100k")
    refused(TypeError, "not an iterator", gpt2, 50257)
    refused(InputError, "superword_from 261 keeps token b'xyz' (id 257) of the base tokenizer, which none of its "
                        "merges makes, so it cannot be a stage-1 token: it keeps at most 260 tokens", converted_base(),
            261)
    refused(InputError, "merge 2 (b' ', b'xyz') of the base tokenizer joins b'xyz', which is neither a byte nor made "
                        "by an earlier merge", converted_base(), 260)
    no_byte = Tokenizer({i: bytes([i]) for i in range(1, 256)} | {256: b"ab"}, [(b"a", b"b")])
    refused(InputError, "the base tokenizer has no token for the byte 0x00", no_byte, 256)
    twice = Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"bc", 258: b"abc", 259: b"xyz"},
                      [(b"a", b"b"), (b"b", b"c"), (b"ab", b"c"), (b"a", b"bc")])
    assert check_superwords_on_base(twice, 259, None, 300) is not None  # (b"a", b"bc") is not kept
    refused(InputError, "merges 2 and 3 of the base tokenizer both make b'abc'", twice, 260)


def test_a_converted_base_keeps_what_its_merges_make() -> None:
    """A converted rank file whose tokens no merge makes: its first tokens up to them are kept, merged by rank (its
    lookups of whole pre-tokens are not kept), as the reference has it."""
    base = converted_base()
    texts = ["th the xyz th" + ENDOFTEXT + "the the xyz"] * 3
    keep = 256 + 1 + 2  # the bytes, <|endoftext|>, b"th" and b" th"
    expected = reference_superword_extend(texts, base.vocab, base.merges, base.special_tokens, keep, keep + 10)
    assert extend_bpe_from_iterator(base, texts, keep + 10, num_workers=1, superword_from=keep) == expected
    vocab = expected[0]
    assert vocab[max(vocab)] == ENDOFTEXT.encode() and len(vocab) > keep and b"th" in vocab.values()
