"""Counting pre-tokens of other patterns (`pattern=`): every path of hf_bpe.train.counting.count and piece_counter
against the plain reference (`hf_bpe.train._reference.reference_counts`, the `regex` module with the pattern's text).

The presets other than GPT-2 count pieces cut at their safe cuts; a custom pattern counts its pre-tokens directly and
cuts files only at special tokens; superword counts its pre-tokens directly and cuts files before digits. All are
checked on hypothesis text, split into documents, pieces, segments, file chunks and worker processes.
"""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import hf_bpe.pretokenize.patterns
import hf_bpe.train.counting.count
import hf_bpe.train.counting.piece_counter
from hf_bpe.common.errors import InputError
from hf_bpe.pretokenize import WHITESPACE_CHARS
from hf_bpe.train._reference import reference_counts
from hf_bpe.train.counting.count import (
    PieceCounter,
    count_pretokens,
    count_pretokens_in_files,
    count_pretokens_in_iterator,
    find_chunk_boundaries,
)
from tests.pretokenize.test_gpt2 import SPECIAL_TOKEN_SETS
from tests.pretokenize.test_patterns import CUSTOM, PRESETS, pattern_text

PATTERNS = PRESETS + CUSTOM + ["superword"]  # superword counts its pre-tokens, not its pieces
EOT = "<|endoftext|>"
differential = settings(max_examples=150, deadline=None,
                        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much])


@st.composite
def texts_and_special_tokens(draw: st.DrawFn) -> tuple[list[str], list[str]]:
    special_tokens = draw(st.sampled_from(SPECIAL_TOKEN_SETS))
    parts = st.lists(pattern_text | st.sampled_from(special_tokens or [""]), max_size=4).map("".join)
    return draw(st.lists(parts, min_size=1, max_size=4)), special_tokens


@differential
@given(case=texts_and_special_tokens(), pattern=st.sampled_from(PATTERNS))
@example(case=(["a\n\t b<|endoftext|> x\u3000 y", " 12345 I'M"], ["<|endoftext|>"]), pattern="cl100k")
def test_counts_equal_the_reference(case: tuple[list[str], list[str]], pattern: str) -> None:
    texts, special_tokens = case
    assert count_pretokens(texts, special_tokens, pattern=pattern) == reference_counts(texts, special_tokens, pattern)


@differential
@given(case=texts_and_special_tokens(), pattern=st.sampled_from(PATTERNS), max_pieces=st.integers(0, 8),
       segment=st.integers(1, 20))
def test_long_documents_and_small_piece_tables_count_alike(monkeypatch: pytest.MonkeyPatch,
                                                            case: tuple[list[str], list[str]], pattern: str,
                                                            max_pieces: int, segment: int) -> None:
    # Documents longer than SEGMENT_CHARS go through safe segments (presets) or batches of matches (custom).
    texts, special_tokens = case
    monkeypatch.setattr(hf_bpe.train.counting.piece_counter, "SEGMENT_CHARS", segment)
    monkeypatch.setattr(hf_bpe.pretokenize.patterns, "_BATCH", 2)
    counter = PieceCounter(special_tokens, max_pieces=max_pieces, pattern=pattern)
    for text in texts:
        counter.add_text(text)
        assert len(counter.pieces) <= max_pieces
    assert counter.pretoken_counts() == reference_counts(texts, special_tokens, pattern)


def test_a_counter_counts_with_one_pattern() -> None:
    counter = PieceCounter()
    counter.add_text("12345 ok", "cl100k")  # an engine's counter takes the task's pattern while it is empty
    assert counter.pattern == hf_bpe.pretokenize.patterns.PATTERNS["cl100k"]
    with pytest.raises(ValueError, match="one pattern"):
        counter.add_text("more", hf_bpe.pretokenize.patterns.PATTERNS["o200k"])
    assert counter.pretoken_counts() == reference_counts(["12345 ok"], (), "cl100k")


def as_files(texts: list[str]) -> list[str]:
    """Texts that make files hf_bpe reads: not empty, and not starting like a compressed file."""
    return ["." + text for text in texts]


def write_texts(directory: str, texts: list[str]) -> list[str]:
    paths = []
    for index, text in enumerate(texts):
        path = os.path.join(directory, f"{index}.txt")
        Path(path).write_bytes(text.encode("utf-8", "surrogatepass"))
        paths.append(path)
    return paths


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(case=texts_and_special_tokens(), pattern=st.sampled_from(PATTERNS), chunk_bytes=st.integers(1, 40))
@example(case=(["x\u3000 y z\xa0 w\t v", "a\n\t b c"], []), pattern="o200k", chunk_bytes=1)
def test_files_in_chunks_count_alike(case: tuple[list[str], list[str]], pattern: str, chunk_bytes: int) -> None:
    texts, special_tokens = as_files(case[0]), case[1]
    with tempfile.TemporaryDirectory() as directory:
        paths = write_texts(directory, texts)
        counts = count_pretokens_in_files(paths, special_tokens, num_workers=1, chunk_bytes=chunk_bytes,
                                          pattern=pattern)
    assert counts == reference_counts(texts, special_tokens, pattern)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_files_and_streams_count_alike_in_worker_processes(monkeypatch: pytest.MonkeyPatch, pattern: str) -> None:
    from tests.train.counting.test_count import generated_text

    texts = [generated_text(seed, 3000, [EOT]) + " 12345 I'M  \n\n\tx \u3000 y" for seed in range(6)]
    expected = reference_counts(texts, [EOT], pattern)
    with tempfile.TemporaryDirectory() as directory:
        paths = write_texts(directory, texts)
        assert count_pretokens_in_files(paths, [EOT], num_workers=2, chunk_bytes=500, progress=False,
                                        pattern=pattern) == expected
    monkeypatch.setattr(hf_bpe.train.counting.count, "SEGMENT_CHARS", 700)  # long texts go to the workers in parts
    monkeypatch.setattr(hf_bpe.train.counting.count, "BATCH_CHARS", 2000)
    assert count_pretokens_in_iterator(texts, [EOT], num_workers=2, progress=False, pattern=pattern) == expected


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(case=texts_and_special_tokens(), pattern=st.sampled_from(PATTERNS), chunk_bytes=st.integers(1, 30))
def test_file_cuts_are_safe_cuts_of_the_pattern(case: tuple[list[str], list[str]], pattern: str,
                                                chunk_bytes: int) -> None:
    regex = hf_bpe.pretokenize.patterns.resolve_pattern(pattern)
    text = "".join(case[0])
    data = text.encode("utf-8")
    special_tokens = case[1]
    starts = {match.start() for token in special_tokens for match in _occurrences(data, token.encode())}
    cuts = find_chunk_boundaries(io.BytesIO(data), len(data), chunk_bytes, [t.encode() for t in special_tokens],
                                 pattern=regex)
    whitespace = set(WHITESPACE_CHARS)
    for cut in cuts[1:-1]:
        if cut in starts:
            continue
        assert pattern in PRESETS + ["superword"], f"a custom pattern is cut only at special tokens, not at byte {cut}"
        before, after = data[:cut].decode("utf-8"), data[cut:].decode("utf-8")
        if pattern == "superword":  # before an ASCII digit that follows another ASCII character, not a digit
            assert after[0] in "0123456789" and before[-1] < "\x80" and before[-1] not in "0123456789", (before, after)
        else:
            assert after[0] == " " and after[1] not in whitespace and before[-1] not in whitespace, (before, after)
    # The chunks count as the whole text does.
    chunks = [data[start:end].decode("utf-8") for start, end in zip(cuts, cuts[1:])]
    assert count_pretokens(chunks, special_tokens, pattern=pattern) == count_pretokens([text], special_tokens,
                                                                                       pattern=pattern)


def _occurrences(data: bytes, token: bytes):  # type: ignore[no-untyped-def]
    import re

    return re.finditer(b"(?=" + re.escape(token) + b")", data)


def test_multibyte_whitespace_before_a_space_is_no_cut() -> None:
    data = "aaaa\u3000 bbbb\xa0 cccc\u2029 dddd e".encode()
    cuts = find_chunk_boundaries(io.BytesIO(data), len(data), 1, pattern=hf_bpe.pretokenize.patterns.PATTERNS["o200k"])
    assert [data[cut:cut + 2] for cut in cuts[1:-1]] == [b" e"]


def test_a_bad_pattern_is_refused_before_counting(tmp_path: Path) -> None:
    path = tmp_path / "corpus.txt"
    path.write_text("some text", encoding="utf-8")
    for count in (lambda: count_pretokens_in_files([path], pattern=r"\p{Han}"),
                  lambda: count_pretokens_in_iterator(iter(["x"]), pattern=r"\d"),
                  lambda: count_pretokens(["x"], pattern="(")):
        with pytest.raises(InputError, match="pattern"):
            count()


def test_ray_engine_counts_and_tokenizes_with_the_pattern(tmp_path: Path) -> None:
    # A real two-node cluster on this machine: the tasks and the pickled encoders carry the pattern to the actors.
    ray = pytest.importorskip("ray")
    import json

    import numpy as np

    from hf_bpe.cluster.local_cluster import LocalRayCluster
    from hf_bpe.data.load import load_tokens
    from hf_bpe.data.ray_tokenize import tokenize_dataset_ray
    from hf_bpe.encode.tokenizer import Tokenizer
    from hf_bpe.formats.hf_directory import save_tokenizer_directory
    from hf_bpe.train.api import train_bpe
    from hf_bpe.train.counting.ray_counting import RayCountingEngine
    from tests import FIXTURES

    corpora = [FIXTURES / "hf_corpora_sample.txt", FIXTURES / "corpus.en"]
    texts = [path.read_text(encoding="utf-8") for path in corpora]
    documents = [part for part in texts[0].split(EOT) if part]
    vocab, merges = train_bpe(corpora[0], 500, [EOT], num_workers=1, progress=False, pattern="cl100k")
    directory = save_tokenizer_directory(tmp_path / "tok", vocab, merges, [EOT], pattern="cl100k")
    data_file = tmp_path / "docs.jsonl"
    data_file.write_text("".join(json.dumps({"text": text}) + "\n" for text in documents), encoding="utf-8")
    with LocalRayCluster(num_nodes=2, cpus_per_node=1, object_store_memory=100 << 20) as cluster:
        saved = dict(os.environ)
        os.environ.update(cluster.environment())
        try:
            for pattern in ("cl100k", CUSTOM[0]):
                counts = count_pretokens_in_files(corpora, [EOT], chunk_bytes=8192, progress=False,
                                                  engine=RayCountingEngine(cluster.address), pattern=pattern)
                assert counts == reference_counts(texts, [EOT], pattern), pattern
            tokenize_dataset_ray(directory, "json", tmp_path / "out", data_files=[str(data_file)],
                                 ray_address=cluster.address, documents_per_shard=7, progress=False)
        finally:
            if ray.is_initialized():
                ray.shutdown()
            os.environ.clear()
            os.environ.update(saved)
    ordinary = Tokenizer(vocab, merges, pattern="cl100k")
    eot = next(token_id for token_id, token in vocab.items() if token == EOT.encode())
    expected = [token for text in documents for token in [*ordinary.encode(text), eot]]
    assert np.asarray(load_tokens(tmp_path / "out", "train")).tolist() == expected
