"""Merges derived from tiktoken ranks (`hf_bpe.formats.tiktoken_merges`) against tiktoken itself: random rank files
where tokens are reached only through higher-ranked parts, or not at all but by looking a pre-token up, and files
where every token is a plain merge; Llama 3's `.:.:`; and a perturbed cl100k_base on the shared corpora."""

from __future__ import annotations

import base64
import random
from pathlib import Path

import pytest
import tiktoken
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hf_bpe import Tokenizer, train_bpe_from_iterator
from hf_bpe.encode.cache import unpack_ids
from hf_bpe.encode.long_words import LONG_WORD_BYTES
from hf_bpe.encode.merge_kernels import MIN_BATCH_MERGE
from hf_bpe.formats.tiktoken_files import read_tiktoken_ranks
from hf_bpe.formats.tiktoken_merges import derive_merges
from tests import SHARED_CORPORA
from tests.formats.test_tiktoken_files import TRAINING_TEXT, cl100k_file

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Pre-tokens as long as a run of non-space characters: long words meet every kind of rank file.
PATTERN = r"\S+|\s+"
ALPHABET = b"ab.:"
BYTE_RANKS = {bytes([byte]): byte for byte in range(256)}


def write_ranks(path: Path, ranks: dict[bytes, int]) -> Path:
    path.write_text("".join(f"{base64.b64encode(token).decode()} {rank}\n"
                            for token, rank in sorted(ranks.items(), key=lambda item: item[1])))
    return path


def encoding_of(ranks: dict[bytes, int], pattern: str = PATTERN) -> tiktoken.Encoding:
    return tiktoken.Encoding("random", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})


@st.composite
def any_ranks(draw: st.DrawFn) -> dict[bytes, int]:
    """The 256 bytes and random strings over a small alphabet, all at random ranks: tokens whose parts rank above
    them, tokens no joins reach, tokens with several splits."""
    rng = draw(st.randoms(use_true_random=False))
    count = draw(st.integers(1, 60))
    tokens = {bytes(rng.choice(ALPHABET) for _ in range(rng.randint(2, 7))) for _ in range(count)}
    everything = list(BYTE_RANKS) + sorted(tokens)
    rng.shuffle(everything)
    return {token: rank for rank, token in enumerate(everything)}


@st.composite
def merged_ranks(draw: st.DrawFn) -> dict[bytes, int]:
    """Ranks as BPE training makes them: each token the concatenation of two earlier ones, ranked after them (though
    not always the pair that tiktoken's procedure meets: such tokens are found whole)."""
    rng = draw(st.randoms(use_true_random=False))
    ranks = dict(BYTE_RANKS)
    pool = [bytes([byte]) for byte in ALPHABET]
    for _ in range(draw(st.integers(0, 60))):
        token = rng.choice(pool) + rng.choice(pool)
        if token not in ranks and len(token) <= 12:
            ranks[token] = len(ranks)
            pool.append(token)
    return ranks


def text_over_alphabet(rng: random.Random, pieces: int) -> str:
    return " ".join("".join(rng.choice("ab.:") for _ in range(rng.randint(1, 12))) for _ in range(pieces))


def assert_encodes_like_tiktoken(ranks: dict[bytes, int], path: Path, texts: list[str]) -> None:
    tokenizer = Tokenizer.from_tiktoken(write_ranks(path, ranks), pattern=PATTERN)
    encoding = encoding_of(ranks)
    for text in texts:
        assert tokenizer.encode(text) == encoding.encode(text), text
    words = sorted({word.encode() for text in texts for word in text.split()})
    # The scalar kernels for a few words, the numpy batch for many (MIN_BATCH_MERGE), each as tiktoken's piece.
    for batch in (words[:3], words):
        expected = [encoding._core_bpe.encode_single_piece(word) for word in batch]
        fresh = Tokenizer.from_tiktoken(path, pattern=PATTERN)
        assert list(map(unpack_ids, fresh.merge_pretoken_bytes(batch))) == expected


@SETTINGS
@given(any_ranks(), st.randoms(use_true_random=False))
def test_any_rank_file_encodes_like_tiktoken(tmp_path_factory: pytest.TempPathFactory, ranks: dict[bytes, int],
                                             rng: random.Random) -> None:
    tokens = " ".join(token.decode() for token in ranks if len(token) > 1)  # each found whole
    texts = [text_over_alphabet(rng, 3), text_over_alphabet(rng, 2 * MIN_BATCH_MERGE), tokens]
    assert_encodes_like_tiktoken(ranks, tmp_path_factory.mktemp("any") / "any.tiktoken", texts)


@SETTINGS
@given(merged_ranks(), st.randoms(use_true_random=False))
def test_plain_merge_files_encode_like_tiktoken(tmp_path_factory: pytest.TempPathFactory, ranks: dict[bytes, int],
                                                rng: random.Random) -> None:
    texts = [text_over_alphabet(rng, 3), text_over_alphabet(rng, 2 * MIN_BATCH_MERGE)]
    assert_encodes_like_tiktoken(ranks, tmp_path_factory.mktemp("merged") / "merged.tiktoken", texts)


@st.composite
def long_ranks(draw: st.DrawFn) -> dict[bytes, int]:
    """Tokens of up to 40 bytes over two letters, joins of earlier ones, then some ranks swapped: they fill the bands
    of long tokens, where pairs of 16 bytes or more are found by their bytes, shorter ones by their parts' ids."""
    rng = draw(st.randoms(use_true_random=False))
    tokens = list(BYTE_RANKS)
    pool = [b"a", b"b"]
    for _ in range(draw(st.integers(0, 120))):
        token = rng.choice(pool) + rng.choice(pool)
        if token not in tokens and len(token) <= 40:
            tokens.append(token)
            pool.append(token)
    for _ in range(draw(st.integers(0, 20))):
        first, second = rng.randrange(256, len(tokens) + 1), rng.randrange(256, len(tokens) + 1)
        if max(first, second) < len(tokens):
            tokens[first], tokens[second] = tokens[second], tokens[first]
    return {token: rank for rank, token in enumerate(tokens)}


def plain_last_joins(ranks: dict[bytes, int]) -> tuple[list[tuple[bytes, bytes]], list[bytes]]:
    """The plain definition: tiktoken's procedure on each token's bytes, each step re-reading every pair's rank, and
    the step that makes the token is the merge (none if it never does)."""
    expected_merges, expected_unreachable = [], []
    for token in sorted(ranks, key=ranks.__getitem__):
        if len(token) == 1:
            continue
        parts = [token[index:index + 1] for index in range(len(token))]
        while len(parts) > 2:
            joined = [ranks.get(left + right) for left, right in zip(parts, parts[1:])]
            best = min((rank, index) for index, rank in enumerate(joined) if rank is not None) \
                if any(rank is not None for rank in joined) else None
            if best is None:
                break
            index = best[1]
            parts[index:index + 2] = [parts[index] + parts[index + 1]]
        if len(parts) == 2:
            expected_merges.append((parts[0], parts[1]))
        else:
            expected_unreachable.append(token)
    return expected_merges, expected_unreachable


@SETTINGS
@given(any_ranks() | merged_ranks() | long_ranks())
@example({**BYTE_RANKS, b":.": 256, b".:": 257, b".:.:": 258, b".:.": 259})
def test_each_token_gets_the_last_join_of_tiktokens_procedure(ranks: dict[bytes, int]) -> None:
    merges, unreachable = derive_merges(ranks)
    assert (merges, unreachable) == plain_last_joins(ranks)


def test_cl100k_and_its_perturbation_get_the_last_joins_of_tiktokens_procedure(
        perturbed_cl100k: tuple[Path, dict[bytes, int]]) -> None:
    """Every length and band of a real file (tokens up to 128 bytes), and thousands of higher-ranked parts."""
    for ranks in (read_tiktoken_ranks(cl100k_file()), perturbed_cl100k[1]):
        merges, unreachable = derive_merges(ranks)
        assert (merges, unreachable) == plain_last_joins(ranks)


def test_llama3_dot_colon_is_reached_through_a_higher_ranked_part(tmp_path: Path) -> None:
    # As in Meta's Llama 3 file: ".:.:" (rank 100,421 there) is ".:." (105,051) + ":", and ":." ranks below ".:".
    ranks = {**BYTE_RANKS, b":.": 256, b".:": 257, b".:.:": 258, b".:.": 259}
    assert derive_merges(ranks).merges[-2:] == [(b".:.", b":"), (b".", b":.")]
    tokenizer = Tokenizer.from_tiktoken(write_ranks(tmp_path / "llama3.tiktoken", ranks), pattern=PATTERN)
    text = "x.:.: .:.: .:.:. :.:.:"
    ids = tokenizer.encode(text)
    assert ids == encoding_of(ranks).encode(text) and ids.count(258) == 2  # ".:.:" made twice by joins


def test_a_token_no_joins_reach_is_found_whole(tmp_path: Path) -> None:
    # "abcd": tiktoken joins "bc" first and is stuck at a, bc, d; only a pre-token "abcd" is that token.
    ranks = {**BYTE_RANKS, b"bc": 256, b"ab": 257, b"cd": 258, b"abcd": 259}
    tokenizer = Tokenizer.from_tiktoken(write_ranks(tmp_path / "whole.tiktoken", ranks), pattern=PATTERN)
    text = "abcd xabcd abcdabcd"
    ids = tokenizer.encode(text)
    assert ids == encoding_of(ranks).encode(text) and ids.count(259) == 1  # only the first pre-token is "abcd"
    assert tokenizer.ignore_merges and 259 not in Tokenizer(tokenizer.vocab, tokenizer.merges).encode(text)


def test_a_giant_word_merges_like_the_scalar_kernels(tmp_path: Path) -> None:
    """Past LONG_WORD_BYTES, the long-word kernel (monotone merges) or the heap (others), as the scalar heap gives."""
    vocab, merges = train_bpe_from_iterator([TRAINING_TEXT], 600, [])  # trained merges are monotone
    trained = {token: token_id for token_id, token in vocab.items()}
    llama3_like = {**BYTE_RANKS, b":.": 256, b".:": 257, b".:.:": 258, b".:.": 259}
    rng = random.Random(26)
    for ranks, monotone, word in (
            (trained, True, ("".join(TRAINING_TEXT.split()).encode() * 30)[:LONG_WORD_BYTES + 1000]),
            (llama3_like, False, "".join(rng.choice(".:ab") for _ in range(LONG_WORD_BYTES + 1000)).encode())):
        tokenizer = Tokenizer.from_tiktoken(write_ranks(tmp_path / "giant.tiktoken", ranks), pattern=PATTERN)
        assert tokenizer._tables().monotone is monotone and len(word) > LONG_WORD_BYTES
        scalar = Tokenizer(tokenizer.vocab, tokenizer.merges)._merge_word(word)  # the heap kernel
        assert unpack_ids(tokenizer.merge_pretoken_bytes([word])[0]) == list(scalar)
        short = word[:3000].decode(errors="ignore")
        assert tokenizer.encode(short) == encoding_of(ranks).encode(short)


@pytest.fixture(scope="module")
def perturbed_cl100k(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[bytes, int]]:
    """cl100k_base with 3,000 random pairs of ranks swapped: thousands of tokens then need higher-ranked parts, or
    are found only whole."""
    ranks = read_tiktoken_ranks(cl100k_file())
    tokens = sorted(ranks, key=ranks.__getitem__)
    rng = random.Random(26)
    for _ in range(3000):
        first, second = rng.randrange(256, len(tokens)), rng.randrange(256, len(tokens))
        tokens[first], tokens[second] = tokens[second], tokens[first]
    ranks = {token: rank for rank, token in enumerate(tokens)}
    return write_ranks(tmp_path_factory.mktemp("perturbed") / "perturbed.tiktoken", ranks), ranks


def test_a_perturbed_cl100k_needs_what_plain_merges_lack(perturbed_cl100k: tuple[Path, dict[bytes, int]]) -> None:
    merges, unreachable = derive_merges(perturbed_cl100k[1])
    ranks = perturbed_cl100k[1]
    higher = [left + right for left, right in merges if max(ranks[left], ranks[right]) > ranks[left + right]]
    assert len(higher) > 100 and len(unreachable) > 100


@pytest.mark.parametrize("corpus", ["en_gcide.txt", "en_pydocs.txt", "multi_manpages.txt"])
def test_a_perturbed_cl100k_encodes_the_shared_corpora_like_tiktoken(
        perturbed_cl100k: tuple[Path, dict[bytes, int]], corpus: str) -> None:
    if not (SHARED_CORPORA / corpus).is_file():
        pytest.skip(f"{SHARED_CORPORA / corpus} is not here (it is beside the clone in CI)")
    path, ranks = perturbed_cl100k
    with open(SHARED_CORPORA / corpus, "rb") as file:
        text = file.read(1_000_000).decode("utf-8", errors="ignore")
    tokenizer = Tokenizer.from_tiktoken(path, pattern="cl100k")
    assert tokenizer.encode(text) == encoding_of(ranks, tokenizer.pattern).encode(text)
