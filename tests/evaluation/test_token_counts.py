"""Token counts of the training corpus (hf_bpe.evaluation.token_counts): equal to encoding the corpus, stored by
`hf-bpe train`, and the under-trained tokens the card and the summary line report."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import hf_bpe.train.merging.flat_corpus
from hf_bpe.cli.main import main
from hf_bpe.common.errors import InputError
from hf_bpe.encode.tokenizer import Tokenizer
from hf_bpe.evaluation.card import render_model_card
from hf_bpe.evaluation.token_counts import (
    COUNT_DTYPE,
    TOKEN_COUNTS_FILE,
    count_tokens_of_pretokens,
    find_rare_tokens,
    load_token_counts,
    under_trained_section,
)
from hf_bpe.formats.hf_directory import load_tokenizer_directory
from hf_bpe.pretokenize import SpecialTokenSplitter
from hf_bpe.train.api import train_bpe_from_counts
from hf_bpe.train.counting.count import count_pretokens
from tests import FIXTURES

EOT, PAD = "<|endoftext|>", "<|pad|>"


def encoded_counts(tokenizer: Tokenizer, texts: list[str]) -> np.ndarray:
    """The reference: encode each text with the Tokenizer, count ids, special tokens set to 0."""
    counts = np.zeros(max(tokenizer.vocab) + 1, dtype=np.int64)
    for text in texts:
        counts += np.bincount(tokenizer.encode(text), minlength=len(counts))
    for token in tokenizer.special_tokens:
        counts[tokenizer.token_to_id(token)] = 0
    return counts.astype(COUNT_DTYPE)


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(st.lists(st.sampled_from([*"ab c\n\tédé€😀\ud800x<|>'s1", " ab", "  ", EOT]), max_size=60)
                      .map("".join), min_size=1, max_size=4),
       vocab_size=st.integers(257, 330), batch_words=st.sampled_from([1, 3, 1 << 16]))
@example(texts=["aaaa aaaa<|endoftext|>aaa"], vocab_size=300, batch_words=1)
def test_counts_equal_encoding_the_corpus(texts: list[str], vocab_size: int, batch_words: int) -> None:
    pretokens = count_pretokens(texts, [EOT])
    vocab, merges = train_bpe_from_counts(pretokens, vocab_size + 1, [EOT])
    tokenizer = Tokenizer(vocab, merges, [EOT])
    counts = count_tokens_of_pretokens(tokenizer, pretokens, batch_words=batch_words)
    assert counts.dtype == COUNT_DTYPE
    assert counts.tolist() == encoded_counts(tokenizer, texts).tolist()


@settings(max_examples=100, deadline=None)
@given(texts=st.lists(st.lists(st.sampled_from([*"ab c\n\tédé€😀\ud800x<|>'s1", " ab", "  ", "aaaa", EOT, PAD]),
                               max_size=80).map("".join), min_size=1, max_size=4),
       vocab_size=st.integers(258, 340), special_tokens=st.sampled_from([[EOT], [EOT, PAD], []]),
       block=st.sampled_from([1, 5, 1 << 20]))
@example(texts=["aaaa aaaa<|endoftext|>aaa a"], vocab_size=300, special_tokens=[EOT], block=1)
def test_counts_from_the_merge_loop_equal_encoding_the_corpus(texts: list[str], vocab_size: int,
                                                              special_tokens: list[str], block: int) -> None:
    # hf-bpe train takes the counts from the merge loop's final segmentation (in blocks of `block` positions) instead
    # of encoding each pre-token: the two must agree with encoding the corpus, single bytes and special tokens too.
    pretokens = count_pretokens(texts, special_tokens)
    vocab_size += len(special_tokens)
    from_merge_loop = np.zeros(vocab_size, dtype=COUNT_DTYPE)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hf_bpe.train.merging.flat_corpus, "INDEX_BLOCK", block)
        vocab, merges = train_bpe_from_counts(pretokens, vocab_size, special_tokens, token_counts=from_merge_loop)
    assert (vocab, merges) == train_bpe_from_counts(pretokens, vocab_size, special_tokens)
    assert not from_merge_loop[len(vocab):].any()
    tokenizer = Tokenizer(vocab, merges, special_tokens)
    expected = encoded_counts(tokenizer, texts).tolist()
    assert from_merge_loop[:len(vocab)].tolist() == expected
    assert count_tokens_of_pretokens(tokenizer, pretokens).tolist() == expected


def test_counts_from_the_merge_loop_refuse_a_wrong_array() -> None:
    with pytest.raises(ValueError, match="uint64 array of vocab_size"):
        train_bpe_from_counts({b"ab": 1}, 258, token_counts=np.zeros(258, dtype=np.int64))
    with pytest.raises(ValueError, match=r"vocab_size \(258\)"):
        train_bpe_from_counts({b"ab": 1}, 258, token_counts=np.zeros(257, dtype=COUNT_DTYPE))


def test_counts_past_two_to_the_53_are_exact() -> None:
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab"}
    tokenizer = Tokenizer(vocab, [(b"a", b"b")])
    counts = count_tokens_of_pretokens(tokenizer, {b"ab": 2**62 + 1, b"abab": 3, b"a": 2**60 + 7})
    assert int(counts[256]) == 2**62 + 1 + 6 and int(counts[97]) == 2**60 + 7  # float64 sums would lose the +1, +7
    from_merge_loop = np.zeros(257, dtype=COUNT_DTYPE)
    train_bpe_from_counts({b"ab": 2**60 + 1, b"abab": 3, b"a": 2**60 + 7}, 257, token_counts=from_merge_loop)
    assert int(from_merge_loop[256]) == 2**60 + 1 + 6 and int(from_merge_loop[97]) == 2**60 + 7


@pytest.mark.parametrize("special_tokens", [[EOT], [EOT, PAD], []])
def test_hf_bpe_train_stores_the_counts_of_its_corpus(tmp_path: Path, special_tokens: list[str],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    corpora = [FIXTURES / "tinystories_sample.txt", FIXTURES / "german.txt", FIXTURES / "corpus.en"]
    out = tmp_path / "tok"
    options = ["--no-special-tokens"] if not special_tokens else \
        [option for token in special_tokens for option in ("--special-token", token)]
    assert main(["train", *map(str, corpora), "--vocab-size", "700", "--out", str(out), "--no-progress",
                 *options]) == 0
    info = json.loads((out / "hf_bpe_training.json").read_text(encoding="utf-8"))
    assert info["token_counts"]["file"] == TOKEN_COUNTS_FILE
    stored = np.load(out / TOKEN_COUNTS_FILE, allow_pickle=False)
    vocab, merges, specials = load_tokenizer_directory(out)
    tokenizer = Tokenizer(vocab, merges, specials)
    texts = [path.read_text(encoding="utf-8") for path in corpora]
    assert EOT in texts[0]
    assert stored.dtype == COUNT_DTYPE and stored.tolist() == encoded_counts(tokenizer, texts).tolist()
    assert info["token_counts"]["total"] == int(stored.sum())
    assert load_token_counts(out, info, tokenizer.vocab_size).tolist() == stored.tolist()

    # The summary line states what find_rare_tokens finds.
    rare = find_rare_tokens(stored, vocab, {tokenizer.token_to_id(token) for token in specials})
    summary = capsys.readouterr().err
    assert (f"; {len(rare.never):,} of {len(merges):,} merged tokens never occur"
            f"{'s' if len(rare.never) == 1 else ''} in the training corpus and {len(rare.rare):,} occur 1-9 times"
            ) in summary.replace("never occurs", "never occur")
    # ... and so does the card.
    card = (out / "README.md").read_text(encoding="utf-8")
    assert f"- **{len(rare.never):,}** of the {len(merges):,} merged tokens never occur" in card
    assert "Fishing for Magikarp" in card
    # The card hf-bpe train writes from what it holds in memory is the one `hf-bpe card` makes from the directory.
    assert card == render_model_card(out)


def test_find_rare_tokens_against_a_plain_count() -> None:
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"abc", 258: b"\xe6\x97", 259: b"<s>"}
    counts = np.zeros(260, dtype=COUNT_DTYPE)
    counts[[97, 98, 256, 259]] = [5, 1, 3, 0]
    counts[258] = 10
    rare = find_rare_tokens(counts, vocab, {259}, threshold=10)
    assert (rare.num_merged, rare.never, rare.rare) == (3, [257], [256])
    assert rare.unused_bytes == [byte for byte in range(256) if byte not in (97, 98)]
    assert rare.examples(vocab, [258, 256, 257], limit=2) == "`<e6><97>`, `ab` and 1 more"


def test_the_card_section_shows_examples_readably() -> None:
    vocab = {i: bytes([i]) for i in range(256)} | {256: b" |x", 257: "é".encode()[:1] + b"a", 258: b"\n\n"}
    counts = np.ones(259, dtype=COUNT_DTYPE)
    counts[[256, 257, 258]] = 0
    section = under_trained_section(counts, vocab, set())
    assert "**3** of the 3 merged tokens never occur (the first in merge order: `␣\\|x`, `<c3>a`, `↵↵`)" in section
    assert re.search(r"Land and Bartolo 2024, \"Fishing for Magikarp", section)
    without = under_trained_section(None, vocab, set())
    assert "no token counts" in without and "hf-bpe eval" in without


def test_bad_counts_files(tmp_path: Path) -> None:
    info = {"token_counts": {"file": TOKEN_COUNTS_FILE}}
    assert load_token_counts(tmp_path, {}, 300) is None  # not recorded
    assert load_token_counts(tmp_path, info, 300) is None  # recorded, but the directory was copied without it
    np.save(tmp_path / TOKEN_COUNTS_FILE, np.zeros(300, dtype=np.float32))
    with pytest.raises(InputError, match=r"token_counts\.npy: expected one uint64 count per token id"):
        load_token_counts(tmp_path, info, 300)
    np.save(tmp_path / TOKEN_COUNTS_FILE, np.zeros(301, dtype=COUNT_DTYPE))
    with pytest.raises(InputError, match=r"at most 300\), got shape \(301,\)"):
        load_token_counts(tmp_path, info, 300)
    (tmp_path / TOKEN_COUNTS_FILE).write_bytes(b"not numpy")
    with pytest.raises(InputError, match=r"token_counts\.npy: not a token counts array"):
        load_token_counts(tmp_path, info, 300)


def test_special_tokens_are_never_counted_even_inside_pretokens() -> None:
    # A special token's text can only reach a pre-token when the special tokens do not split the text; the counts
    # follow the encoder, which splits first, so a special token is 0 even when the corpus is full of them.
    texts = [f"a{EOT}b{EOT}{EOT}"]
    pretokens = count_pretokens(texts, [EOT])
    vocab, merges = train_bpe_from_counts(pretokens, 260, [EOT])
    tokenizer = Tokenizer(vocab, merges, [EOT])
    counts = count_tokens_of_pretokens(tokenizer, pretokens)
    assert counts[tokenizer.token_to_id(EOT)] == 0
    assert counts.sum() == sum(len(part) for part in SpecialTokenSplitter([EOT]).split(texts[0]))
