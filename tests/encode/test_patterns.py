"""Encoding with other patterns: `Tokenizer(..., pattern=...)` gives the ids of tiktoken (the twin, running the
owner's text) and of `tokenizers` (the saved tokenizer.json), for every preset and custom patterns, on fixtures and
hypothesis text, through every path: long texts in segments or batches, streams, worker processes, pickles.
"""

from __future__ import annotations

import pickle
from functools import cache
from pathlib import Path

import pytest
import tiktoken
import tokenizers
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import hf_bpe.encode.tokenizer as encode_module
import hf_bpe.pretokenize.patterns
from hf_bpe import PATTERNS
from hf_bpe.encode.tokenizer import Tokenizer
from hf_bpe.formats.hf_directory import save_tokenizer_directory
from hf_bpe.formats.tiktoken import tiktoken_encoding
from hf_bpe.pretokenize import preset_name
from hf_bpe.train.api import train_bpe
from tests import FIXTURES
from tests.pretokenize.test_patterns import CUSTOM, GAPS, PRESETS, pattern_text

EOT = "<|endoftext|>"
SPECIALS = [EOT, "<pad>"]
ALL = [*PRESETS, *CUSTOM]
IDS = [*PRESETS, "qwen2", "oniguruma_traps", "look_behind", "astral", "gaps"]
TEXT_FIXTURES = ["corpus.en", "tinystories_sample.txt", "german.txt", "address.txt", "hf_corpora_sample.txt"]
differential = settings(max_examples=100, deadline=None,
                        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much])


@cache
def trained(pattern: str, directory: Path) -> tuple[Tokenizer, tiktoken.Encoding, tokenizers.Tokenizer]:
    """hf_bpe's encoder, the tiktoken twin and the saved tokenizer.json of a tokenizer trained with `pattern`."""
    vocab, merges = train_bpe(FIXTURES / "hf_corpora_sample.txt", 700, SPECIALS, num_workers=1, progress=False,
                              pattern=pattern)
    saved = save_tokenizer_directory(directory / f"tok{ALL.index(pattern)}", vocab, merges, SPECIALS,
                                     pattern=pattern)
    return (Tokenizer(vocab, merges, SPECIALS, pattern=pattern),
            tiktoken_encoding(vocab, merges, SPECIALS, pattern=pattern),
            tokenizers.Tokenizer.from_file(str(saved / "tokenizer.json")))


@pytest.fixture(scope="module")
def directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("patterns")


def assert_same_ids(libraries: tuple[Tokenizer, tiktoken.Encoding, tokenizers.Tokenizer], pattern: str,
                    text: str) -> None:
    ours, twin, saved = libraries
    ids = ours.encode(text)
    assert ids == saved.encode(text).ids
    if pattern != GAPS:  # tiktoken drops the text a pattern leaves unmatched; hf_bpe and tokenizers keep it
        assert ids == twin.encode(text, allowed_special="all")
    assert ours.decode(ids) == text


@pytest.mark.parametrize("pattern", ALL, ids=IDS)
@pytest.mark.parametrize("name", TEXT_FIXTURES)
def test_fixture_ids_equal_tiktoken_and_tokenizers(directory: Path, pattern: str, name: str) -> None:
    text = (FIXTURES / name).read_text(encoding="utf-8")
    assert_same_ids(trained(pattern, directory), pattern, text + " 1234567 I'M  \n\n\t" + EOT + "x")


@differential
@given(parts=st.lists(pattern_text | st.sampled_from(SPECIALS), max_size=6).map("".join),
       pattern=st.sampled_from(ALL))
@example(parts="a\n\t b<pad>12345'S\U0001f600\U0001f600x", pattern="cl100k")
def test_ids_equal_tiktoken_and_tokenizers(directory: Path, parts: str, pattern: str) -> None:
    assert_same_ids(trained(pattern, directory), pattern, parts)


@differential
@given(text=pattern_text, pattern=st.sampled_from(ALL), segment=st.integers(1, 16), window=st.integers(1, 24))
def test_long_texts_and_streams_encode_alike(monkeypatch: pytest.MonkeyPatch, directory: Path, text: str,
                                              pattern: str, segment: int, window: int) -> None:
    ours, _, saved = trained(pattern, directory)
    expected = saved.encode(text).ids
    monkeypatch.setattr(encode_module, "_SEGMENT_CHARS", segment)  # safe segments, or batches of matches
    monkeypatch.setattr(hf_bpe.pretokenize.patterns, "_BATCH", 2)
    assert ours.encode(text) == expected
    monkeypatch.setattr(encode_module, "_STREAM_WINDOW", window)  # windows cut at safe cuts (none: one window)
    assert list(ours.encode_iterable(iter(text))) == expected
    assert list(ours.encode_iterable([text, EOT, text])) == saved.encode(text + EOT + text).ids


@pytest.mark.parametrize("pattern", ["cl100k", CUSTOM[0]], ids=["cl100k", "qwen2"])
def test_worker_processes_and_pickles_keep_the_pattern(monkeypatch: pytest.MonkeyPatch, directory: Path,
                                                       pattern: str) -> None:
    ours, twin, _ = trained(pattern, directory)
    texts = [(FIXTURES / name).read_text(encoding="utf-8") + " 123456789" for name in TEXT_FIXTURES] * 3
    monkeypatch.setattr(encode_module, "_MIN_PARALLEL_LENGTH", 1)
    assert ours.encode_batch(texts, num_workers=2) == twin.encode_batch(texts, allowed_special="all")
    copy = pickle.loads(pickle.dumps(ours))
    assert copy.pattern == ours.pattern == PATTERNS.get(pattern, pattern)
    assert copy.encode(texts[0]) == ours.encode(texts[0])


def test_from_files_takes_the_pattern_and_repr_names_it(directory: Path) -> None:
    ours, _, _ = trained("o200k", directory)
    saved = directory / f"tok{ALL.index('o200k')}"
    loaded = Tokenizer.from_files(saved / "vocab.json", saved / "merges.txt", SPECIALS, pattern="o200k")
    text = (FIXTURES / "german.txt").read_text(encoding="utf-8")
    assert loaded.encode(text) == ours.encode(text)
    assert preset_name(loaded.pattern) == "o200k" and repr(loaded).endswith(", pattern='o200k')")
    assert "pattern" not in repr(Tokenizer({i: bytes([i]) for i in range(256)}, []))
    # vocab.json and merges.txt alone do not hold the pattern: without `pattern` they are read as GPT-2's.
    assert Tokenizer.from_files(saved / "vocab.json", saved / "merges.txt", SPECIALS).pattern == PATTERNS["gpt2"]


def test_unpickling_a_tokenizer_pickled_before_patterns_gives_gpt2() -> None:
    tokenizer = Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"12"}, [(b"1", b"2")], pattern="cl100k")
    state = tokenizer.__getstate__()
    del state["pattern"]
    old = Tokenizer.__new__(Tokenizer)
    old.__setstate__(state)
    assert old.pattern == PATTERNS["gpt2"] and old.encode("1234") == [256, 51, 52]
