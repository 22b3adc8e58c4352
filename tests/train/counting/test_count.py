"""Tests for hf_bpe.train.counting.count: every fast path against the plain reference, chunking, workers and bad
input."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import hf_bpe.pretokenize.special_tokens
import hf_bpe.train.counting.count
import hf_bpe.train.counting.local_engine
import hf_bpe.train.counting.piece_counter
from hf_bpe.common.errors import InputError
from hf_bpe.pretokenize import GPT2_REGEX, SAFE_SPACE_REGEX, safe_segments
from hf_bpe.train.counting.count import (
    CountStats,
    LocalCountingEngine,
    PieceCounter,
    count_pretokens,
    count_pretokens_in_files,
    count_pretokens_in_iterator,
    find_chunk_boundaries,
)
from hf_bpe.train.counting.local_engine import _WorkerProcesses as WorkerProcesses
from tests import FIXTURES
from tests.common.test_files import plain_replacements
from tests.pretokenize.test_gpt2 import ATOMS, SPECIAL_TOKEN_SETS, adversarial_text, text_and_special_tokens

EOT = "<|endoftext|>"



def split_documents(text: str, special_tokens: list[str]) -> list[str]:
    """Plain splitting at special tokens: the leftmost occurrence, the longest token where several start there."""
    documents, start = [], 0
    while True:
        found = [(at, -len(token)) for token in special_tokens if (at := text.find(token, start)) >= 0]
        if not found:
            documents.append(text[start:])
            return documents
        at, minus_length = min(found)
        documents.append(text[start:at])
        start = at - minus_length


def reference_counts(texts: list[str], special_tokens: list[str]) -> Counter[bytes]:
    """The plain definition: GPT-2 regex matches in each document between special tokens, as UTF-8 bytes."""
    counts: Counter[bytes] = Counter()
    for text in texts:
        for document in split_documents(text, special_tokens):
            counts.update(pretoken.encode() for pretoken in GPT2_REGEX.findall(document))
    return counts


def write(directory: str | Path, name: str, data: bytes) -> str:
    path = os.path.join(directory, name)
    with open(path, "wb") as file:
        file.write(data)
    return path


def generated_text(seed: int, length: int, special_tokens: list[str]) -> str:
    """Adversarial text made of ATOMS, words and special tokens, about `length` characters."""
    rng = random.Random(seed)
    atoms = ATOMS + special_tokens + ["the", " the", " cat", "Hello", " world", "\n\n", "    "]
    parts: list[str] = []
    size = 0
    while size < length:
        parts.append(rng.choice(atoms))
        size += len(parts[-1])
    return "".join(parts)


# --- in-process counting --------------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(text_and_special_tokens())
def test_count_pretokens_matches_reference(case: tuple[str, list[str]]) -> None:
    text, special_tokens = case
    assert count_pretokens([text], special_tokens) == reference_counts([text], special_tokens)


@settings(max_examples=100, deadline=None)
@given(st.lists(adversarial_text, max_size=6), st.sampled_from(SPECIAL_TOKEN_SETS))
def test_each_text_is_counted_on_its_own(texts: list[str], special_tokens: list[str]) -> None:
    assert count_pretokens(texts, special_tokens) == reference_counts(texts, special_tokens)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(adversarial_text, max_size=4), st.sampled_from(SPECIAL_TOKEN_SETS), st.integers(1, 12))
def test_long_documents_count_alike_in_segments(monkeypatch: pytest.MonkeyPatch, texts: list[str],
                                               special_tokens: list[str], segment_chars: int) -> None:
    set_segment_chars(monkeypatch, segment_chars)
    segments = [list(safe_segments(text, segment_chars)) for text in texts]
    assert ["".join(parts) for parts in segments] == texts
    assert all(len(part) >= segment_chars for parts in segments for part in parts[:-1])
    assert count_pretokens(texts, special_tokens) == reference_counts(texts, special_tokens)
    # Piece tables converted between segments too.
    monkeypatch.setattr(hf_bpe.train.counting.piece_counter, "MAX_PIECES", 3)
    assert count_pretokens(texts, special_tokens) == reference_counts(texts, special_tokens)


def test_pieces_seen_often_and_rarely_are_counted_alike() -> None:
    # Counts of pieces from 1 to hundreds, ASCII and not, whitespace runs among them.
    texts = [f" it's{i % 40} x'S{i % 3}\u00e9\u200d!" * (i % 20) + "\n\n a" for i in range(300)]
    assert count_pretokens(texts, [EOT]) == reference_counts(texts, [EOT])


def test_special_tokens_are_not_counted_and_split_documents() -> None:
    counts = count_pretokens([f"a{EOT}{EOT} b{EOT}"], [EOT])
    assert counts == Counter({b"a": 1, b" b": 1})


def test_fixture_corpora_match_reference() -> None:
    for name in ["corpus.en", "tinystories_sample.txt", "german.txt", "address.txt"]:
        text = (FIXTURES / name).read_text(encoding="utf-8")
        assert count_pretokens([text], [EOT]) == reference_counts([text], [EOT]), name


SURROGATE_TEXTS = ["ab \ud800", "\udfff", "x\ud835\udc00y \ud83d\ude00!", "\ude00\ud83d z", "caf\u00e9\udc80\udc81s"]


def test_surrogates_are_replaced_as_tiktoken_replaces_them() -> None:
    # Pairs are joined ("x\ud835\udc00y" is one letter run "x𝐀y"), lone ones become U+FFFD.
    fixed = [text.encode("utf-16", "surrogatepass").decode("utf-16", "replace") for text in SURROGATE_TEXTS]
    assert fixed[2] == "x\U0001d400y \U0001f600!" and fixed[0] == "ab \ufffd"
    expected = reference_counts(fixed, [EOT])
    assert count_pretokens(SURROGATE_TEXTS, [EOT]) == expected
    assert count_pretokens_in_iterator(SURROGATE_TEXTS, [EOT], num_workers=1) == expected


def test_non_str_text_is_an_input_error() -> None:
    with pytest.raises(InputError, match="text #1 of the input is NoneType, not str"):
        count_pretokens(["ok", None])  # type: ignore[list-item]
    with pytest.raises(InputError, match="text #2 of the input is bytes, not str"):
        count_pretokens_in_iterator(["a", "b", b"c"], num_workers=1)  # type: ignore[list-item]


# --- chunk boundaries -----------------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(text_and_special_tokens(), st.integers(1, 8) | st.integers(9, 64))
def test_chunk_boundaries_are_safe_and_chunks_count_like_the_whole(case: tuple[str, list[str]],
                                                                   chunk_bytes: int) -> None:
    import io

    text, special_tokens = case
    data = text.encode()
    specials = [token.encode() for token in special_tokens]
    boundaries = find_chunk_boundaries(io.BytesIO(data), len(data), chunk_bytes, specials)
    assert boundaries[0] == 0 and boundaries[-1] == len(data)
    assert all(a < b for a, b in zip(boundaries, boundaries[1:])) or data == b""
    for cut in boundaries[1:-1]:
        for token in specials:
            assert all(not start < cut < start + len(token)
                       for start in range(max(0, cut - len(token) + 1), cut) if data.startswith(token, start))
    chunks = [data[a:b].decode() for a, b in zip(boundaries, boundaries[1:])]
    counter = PieceCounter(special_tokens)
    for chunk in chunks:
        counter.add_text(chunk)
    assert counter.pretoken_counts() == reference_counts([text], special_tokens)


DENSE_ATOMS = [" ", "  ", "\n", "\t", "\xa0", "\u3000", "a", "'s", "é", "<|", "|>", EOT, " " + EOT, "<|e n|>"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(DENSE_ATOMS), max_size=25).map("".join), st.integers(1, 6))
def test_chunks_of_dense_whitespace_and_special_tokens_count_like_the_whole(text: str, chunk_bytes: int) -> None:
    import io

    special_tokens = [EOT, "<|e n|>", "|><|"]
    data = text.encode()
    boundaries = find_chunk_boundaries(io.BytesIO(data), len(data), chunk_bytes, [t.encode() for t in special_tokens])
    counter = PieceCounter(special_tokens)
    for start, end in zip(boundaries, boundaries[1:]):
        counter.add_text(data[start:end].decode())
    assert counter.pretoken_counts() == reference_counts([text], special_tokens)


def test_chunks_cut_at_spaces_and_special_tokens_near_multiples_of_chunk_bytes() -> None:
    import io

    data = "one two\u3000three\xa0four <|e n d|>five".encode()
    assert (data.index(b"two"), data.index(b" <"), data.index(b"<"), len(data)) == (4, 21, 22, 35)
    special = [b"<|e n d|>"]
    # A space before U+3000 or NBSP is no cut (both are whitespace), nor is a space before or inside a special token.
    assert find_chunk_boundaries(io.BytesIO(data), len(data), 1, special) == [0, 3, 22, 35]
    assert find_chunk_boundaries(io.BytesIO(data), len(data), 4, special) == [0, 22, 35]
    assert find_chunk_boundaries(io.BytesIO(data), len(data), 22, special) == [0, 22, 35]
    assert find_chunk_boundaries(io.BytesIO(data), len(data), 23, special) == [0, 35]
    assert find_chunk_boundaries(io.BytesIO(b"a"), 1, 1) == [0, 1]


def test_space_before_a_special_token_is_no_cut() -> None:
    import io

    # The space ends the first document, so "\n\n " is one pre-token: the cut must come after it.
    data = f"a\n\n {EOT}b".encode()
    assert find_chunk_boundaries(io.BytesIO(data), len(data), 1, [EOT.encode()]) == [0, 4, len(data)]


def test_single_line_of_megabytes_is_split_into_many_chunks(tmp_path: Path) -> None:
    rng = random.Random(0)
    words = ["alpha", "beta", "gamma,", "delta.", "42", "it's", "«quoted»", "naïve", "\u3000x", "  y"]
    text = " ".join(rng.choice(words) for _ in range(500_000))  # about 3 MB, no newline, no special token
    data = text.encode()
    assert b"\n" not in data and len(data) > 2_900_000
    path = write(tmp_path, "line.txt", data)
    chunk_bytes = 1 << 16
    with open(path, "rb") as file:
        boundaries = find_chunk_boundaries(file, len(data), chunk_bytes, [EOT.encode()])
    sizes = [b - a for a, b in zip(boundaries, boundaries[1:])]
    assert len(sizes) > len(data) // chunk_bytes - 2
    assert max(sizes) < chunk_bytes + 100
    expected = reference_counts([text], [EOT])
    assert count_pretokens_in_files([path], [EOT], num_workers=1, chunk_bytes=chunk_bytes) == expected


def test_text_without_any_safe_cut_makes_one_growing_chunk(tmp_path: Path) -> None:
    data = ("x" * 50_000 + "\n" * 50_000 + "y" * 1000).encode()
    path = write(tmp_path, "nospace.txt", data)
    with open(path, "rb") as file:
        assert find_chunk_boundaries(file, len(data), 1000) == [0, len(data)]
    assert count_pretokens_in_files(path, num_workers=1, chunk_bytes=1000) == reference_counts([data.decode()], [])


# --- files ----------------------------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(text_and_special_tokens(), min_size=1, max_size=3), st.integers(1, 8) | st.integers(9, 64))
def test_files_in_tiny_chunks_match_reference(cases: list[tuple[str, list[str]]], chunk_bytes: int) -> None:
    special_tokens = cases[0][1]
    texts = [text.encode("utf-8", "replace").decode() for text, _ in cases]
    with tempfile.TemporaryDirectory() as directory:
        paths = [write(directory, f"{i}.txt", text.encode()) for i, text in enumerate(texts)]
        if not any(texts):
            return
        counts = count_pretokens_in_files(paths, special_tokens, num_workers=1, chunk_bytes=chunk_bytes)
    assert counts == reference_counts(texts, special_tokens)


@pytest.mark.parametrize("special_tokens", [[EOT], SPECIAL_TOKEN_SETS[3], SPECIAL_TOKEN_SETS[4]])
def test_two_workers_many_files_tiny_chunks_match_reference(tmp_path: Path, special_tokens: list[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [generated_text(seed, 20_000, special_tokens) for seed in range(3)]
    paths = [write(tmp_path, f"{i}.txt", text.encode()) for i, text in enumerate(texts)]
    expected = reference_counts(texts, special_tokens)
    pools = []
    monkeypatch.setattr(hf_bpe.train.counting.local_engine, "_WorkerProcesses",
                        lambda *args: pools.append(args) or WorkerProcesses(*args))
    threads = threading.active_count()
    assert count_pretokens_in_files(paths, special_tokens, num_workers=2, chunk_bytes=61) == expected
    assert [num_workers for _, _, num_workers in pools] == [2]
    assert threading.active_count() == threads  # no queue thread left behind: the next pool can fork
    assert count_pretokens_in_files(paths, special_tokens, num_workers=1, chunk_bytes=16) == expected


def test_default_workers_count_small_input_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    path = Path(hf_bpe.__file__).parent / "corpora" / "python_docs_sample.txt"
    text = path.read_text(encoding="utf-8")
    assert len(text.encode()) < hf_bpe.train.counting.count.MIN_PARALLEL_BYTES
    monkeypatch.setattr(hf_bpe.train.counting.local_engine, "_WorkerProcesses", None)  # calling it would fail
    assert count_pretokens_in_files([path], [EOT], chunk_bytes=50_000) == reference_counts([text], [EOT])


def test_empty_file_among_others_is_skipped_but_all_empty_is_an_error(tmp_path: Path) -> None:
    empty = write(tmp_path, "empty.txt", b"")
    full = write(tmp_path, "full.txt", b"some text")
    assert count_pretokens_in_files([empty, full], num_workers=1) == Counter({b"some": 1, b" text": 1})
    with pytest.raises(InputError, match=f"^{empty}: file is empty$"):
        count_pretokens_in_files(empty)
    with pytest.raises(InputError, match=f"^{empty}: file is empty \\(as are all 2 input files\\)$"):
        count_pretokens_in_files([empty, empty])


def test_missing_file_directory_and_no_files_are_input_errors(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.txt")
    with pytest.raises(InputError, match=f"^{missing}: no such file$"):
        count_pretokens_in_files([missing])
    with pytest.raises(InputError, match=f"^{tmp_path}: is a directory, not a text file$"):
        count_pretokens_in_files([tmp_path])
    with pytest.raises(InputError, match="^no input files given$"):
        count_pretokens_in_files([])


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_non_regular_file_is_an_input_error(tmp_path: Path) -> None:
    fifo = str(tmp_path / "pipe")
    os.mkfifo(fifo)
    with pytest.raises(InputError, match=f"^{fifo}: is not a regular file$"):
        count_pretokens_in_files([fifo])


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root can read any file")
def test_unreadable_file_is_an_input_error(tmp_path: Path) -> None:
    path = write(tmp_path, "secret.txt", b"text")
    os.chmod(path, 0)
    with pytest.raises(InputError, match=f"^{path}: cannot read file: Permission denied$"):
        count_pretokens_in_files([path])


def test_bad_arguments_are_value_errors(tmp_path: Path) -> None:
    path = write(tmp_path, "a.txt", b"text")
    with pytest.raises(ValueError, match="errors must be 'strict' or 'replace', got 'ignore'"):
        count_pretokens_in_files(path, errors="ignore")
    with pytest.raises(ValueError, match="chunk_bytes must be positive, got 0"):
        count_pretokens_in_files(path, chunk_bytes=0)
    with pytest.raises(ValueError, match="num_workers must be at least 1, got 0"):
        count_pretokens_in_files(path, num_workers=0)


# --- invalid UTF-8 --------------------------------------------------------------------------------------------------


def invalid_utf8_message(path: str, offset: int) -> str:
    return (f"^{path}: invalid UTF-8 at byte offset {offset} \\(.*\\); to replace bad bytes with U\\+FFFD, pass "
            f"errors=\"replace\" \\(CLI: --errors replace\\)$")


@pytest.mark.parametrize("num_workers", [1, 2])
def test_invalid_utf8_reports_the_absolute_offset_of_the_first_bad_byte(tmp_path: Path, num_workers: int) -> None:
    good = "word é€😀 ".encode() * 2000  # about 28 KB, so the bad bytes are many chunks in
    bad_at = len(good) + 3
    data = good + b"abc\xff\xfe more " + good + b"\xc3(" + good + b" truncated \xe2\x82"
    paths = [write(tmp_path, "ok.txt", b"fine"), write(tmp_path, "bad.txt", data)]
    with pytest.raises(InputError, match=invalid_utf8_message(paths[1], bad_at)):
        count_pretokens_in_files(paths, num_workers=num_workers, chunk_bytes=1000)


def test_truncated_character_at_end_of_file_is_reported(tmp_path: Path) -> None:
    path = write(tmp_path, "cut.txt", "a b €".encode()[:-1])
    with pytest.raises(InputError, match=invalid_utf8_message(path, 4)):
        count_pretokens_in_files(path, num_workers=1, chunk_bytes=2)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.binary(max_size=4) | adversarial_text.map(lambda text: text.encode("utf-8", "replace")),
                max_size=30).map(b"".join), st.integers(1, 32), st.sampled_from(SPECIAL_TOKEN_SETS))
def test_errors_replace_matches_decoding_the_whole_file_with_replace(data: bytes, chunk_bytes: int,
                                                                     special_tokens: list[str]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = write(directory, "mixed.bin", data + b"!")
        counts = count_pretokens_in_files(path, special_tokens, num_workers=1, errors="replace",
                                          chunk_bytes=chunk_bytes)
    assert counts == reference_counts([(data + b"!").decode("utf-8", "replace")], special_tokens)


# --- iterators, progress, imports -----------------------------------------------------------------------------------


def test_iterator_small_input_is_counted_in_process() -> None:
    texts = [generated_text(seed, 300, [EOT]) for seed in range(20)]
    assert count_pretokens_in_iterator(iter(texts), [EOT], num_workers=2) == reference_counts(texts, [EOT])


def test_iterator_in_batches_with_two_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hf_bpe.train.counting.count, "BATCH_CHARS", 5000)
    texts = [generated_text(seed, 1000, [EOT, "<|end|>"]) for seed in range(60)]
    expected = reference_counts(texts, [EOT, "<|end|>"])
    pools = []
    monkeypatch.setattr(hf_bpe.train.counting.local_engine, "_WorkerProcesses",
                        lambda *args: pools.append(args) or WorkerProcesses(*args))
    assert count_pretokens_in_iterator((text for text in texts), [EOT, "<|end|>"], num_workers=2) == expected
    assert [num_workers for _, _, num_workers in pools] == [2]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(adversarial_text, max_size=5), st.sampled_from(SPECIAL_TOKEN_SETS), st.integers(1, 12),
       st.integers(1, 30))
# A random run found such a text: 53 characters without a safe space stay one part, longer than an old fixed bound.
@example(texts=["            \t" + "שלום" * 10], special_tokens=[], segment_chars=1, batch_chars=1)
def test_long_texts_are_sent_as_parts_that_count_alike(monkeypatch: pytest.MonkeyPatch, texts: list[str],
                                                      special_tokens: list[str], segment_chars: int,
                                                      batch_chars: int) -> None:
    set_segment_chars(monkeypatch, segment_chars)
    monkeypatch.setattr(hf_bpe.train.counting.count, "BATCH_CHARS", batch_chars)
    batches = list(hf_bpe.train.counting.count.text_batches(texts, special_tokens))
    assert sum(batch.texts for batch in batches) == len(texts)  # the progress bar counts texts, not parts
    # A batch closes once it holds batch_chars: all but its last part fit under that. A part is a short text or a
    # segment, and a segment runs past segment_chars only up to its first safe space (none in a long word).
    assert all(sum(map(len, batch)) - max(map(len, batch), default=0) < batch_chars for batch in batches)
    assert all(len(part) <= segment_chars or SAFE_SPACE_REGEX.search(part, segment_chars) is None
               for batch in batches for part in batch)
    engine = ReversedEngine()
    assert count_pretokens_in_iterator(iter(texts), special_tokens, engine=engine) == \
        reference_counts(texts, special_tokens)


def test_a_long_text_is_cut_after_its_surrogates_are_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    # A lone surrogate becomes U+FFFD before the special tokens are looked for, so "x \ud800" holds the special
    # token "x \ufffd"; cutting the text before " \ud800" first would have counted it as text.
    text = "ab x \ud800 cd " * 50
    expected = count_pretokens([text], ["x \ufffd"])
    assert b"x" not in expected and b" \xef\xbf\xbd" not in expected
    set_segment_chars(monkeypatch, 4)
    monkeypatch.setattr(hf_bpe.train.counting.count, "BATCH_CHARS", 16)
    assert count_pretokens_in_iterator([text, text], ["x \ufffd"], engine=ReversedEngine()) == expected + expected


def test_nothing_is_printed_by_default_and_progress_goes_to_stderr(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "a.txt", b"hello world " * 100)
    count_pretokens_in_files(path, num_workers=1, chunk_bytes=100)
    assert capsys.readouterr() == ("", "")
    count_pretokens_in_files(path, num_workers=1, chunk_bytes=100, progress=True)
    captured = capsys.readouterr()
    assert captured.out == "" and "counting pre-tokens" in captured.err and "1.20k" in captured.err


def test_counting_does_not_import_transformers() -> None:
    code = ("import sys, hf_bpe.train.counting.count; "
            "print(sorted(m for m in ('transformers', 'datasets') if m in sys.modules))")
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.strip() == "[]"


# --- bounded memory -------------------------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(st.lists(text_and_special_tokens(), min_size=1, max_size=5), st.integers(0, 20))
def test_piece_table_converted_whenever_it_grows_past_max_pieces_counts_alike(cases: list[tuple[str, list[str]]],
                                                                             max_pieces: int) -> None:
    special_tokens = cases[0][1]
    texts = [text for text, _ in cases]
    counter = PieceCounter(special_tokens, max_pieces=max_pieces)
    for text in texts:
        counter.add_text(text)
        assert len(counter.pieces) <= max_pieces
    assert counter.pretoken_counts() == reference_counts(texts, special_tokens)


def test_pieces_are_converted_in_batches_and_the_counter_empties_when_read() -> None:
    texts = [generated_text(seed, 2000, [EOT]) for seed in range(20)]
    counter = PieceCounter([EOT], max_pieces=100)
    conversions = 0
    for text in texts:
        counter.add_text(text)
        conversions += not counter.pieces
    assert conversions >= 5 and counter.pretokens
    assert counter.pretoken_counts() == reference_counts(texts, [EOT])
    assert not counter.pieces and not counter.pretokens and counter.pretoken_counts() == Counter()
    counter.add_text(texts[0])
    assert counter.pretoken_counts() == reference_counts(texts[:1], [EOT])


def test_workers_hand_over_converted_counts_as_they_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Forked workers see the smaller MAX_PIECES, so each converts its piece table many times: the parent receives
    # counts all along (more additions than workers), and their sum is still exact.
    texts = [generated_text(seed, 30_000, [EOT]) for seed in range(3)]
    paths = [write(tmp_path, f"{i}.txt", text.encode()) for i, text in enumerate(texts)]
    monkeypatch.setattr(hf_bpe.train.counting.piece_counter, "MAX_PIECES", 200)
    sizes: list[int] = []
    add = WorkerProcesses._add
    monkeypatch.setattr(WorkerProcesses, "_add", lambda self, counts: sizes.append(len(counts)) or add(self, counts))
    assert count_pretokens_in_files(paths, [EOT], num_workers=2, chunk_bytes=2000) == reference_counts(texts, [EOT])
    assert len(sizes) > 6


class RecordingBar:
    """Stands in for the tqdm bar: records the sizes reported."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def update(self, size: int) -> None:
        self.sizes.append(size)


class StartCountingTask(hf_bpe.train.counting.count._BatchTask):
    """Counts batches like the real task, and counts (across processes) how many tasks the workers have started."""

    def __init__(self) -> None:
        import multiprocessing

        super().__init__()
        self.started = multiprocessing.Value("i", 0)

    def __call__(self, counter: PieceCounter, batch: list[str]) -> int:
        with self.started.get_lock():
            self.started.value += 1
        return super().__call__(counter, batch)


def test_local_engine_pulls_a_stream_of_tasks_a_few_at_a_time() -> None:
    run = StartCountingTask()
    ahead = []

    def tasks() -> Iterator[list[str]]:
        for index in range(300):
            ahead.append(index - run.started.value)  # tasks pulled from the stream that no worker has started
            yield [f"text {index} it's"]

    counts = LocalCountingEngine(2).count(tasks(), run, [], RecordingBar())
    assert counts == reference_counts([f"text {index} it's" for index in range(300)], [])
    # The task queue holds 2 per worker, and each worker may have taken one it has not started yet.
    assert run.started.value == 300 and max(ahead) <= 2 * 2 + 2


def test_streaming_iterable_dataset_is_counted_exactly() -> None:
    datasets = pytest.importorskip("datasets")
    texts = [generated_text(seed, 2000, [EOT]) for seed in range(50)]
    stream = datasets.IterableDataset.from_generator(lambda: ({"text": text} for text in texts))
    assert isinstance(stream, datasets.IterableDataset)
    counts = count_pretokens_in_iterator((row["text"] for row in stream), [EOT], num_workers=2)
    assert counts == reference_counts(texts, [EOT])


# --- engines --------------------------------------------------------------------------------------------------------


class ReversedEngine:
    """A CountingEngine that runs the tasks in reverse order, each on a counter of its own, in this process."""

    def __init__(self) -> None:
        self.tasks: list[Any] = []

    def count(self, tasks: Iterable[Any], run: Any, special_tokens: Sequence[str], bar: Any) -> Counter[bytes]:
        self.tasks = list(tasks)
        total: Counter[bytes] = Counter()
        for task in reversed(self.tasks):
            counter = PieceCounter(special_tokens)
            bar.update(run(counter, task))
            total.update(counter.pretoken_counts())
        return total


def test_another_engine_counts_the_same_file_chunks(tmp_path: Path) -> None:
    texts = [generated_text(seed, 5000, [EOT, "<|end|>"]) for seed in range(3)]
    paths = [write(tmp_path, f"{i}.txt", text.encode()) for i, text in enumerate(texts)]
    engine = ReversedEngine()
    counts = count_pretokens_in_files(paths, [EOT, "<|end|>"], chunk_bytes=1000, engine=engine)
    assert counts == reference_counts(texts, [EOT, "<|end|>"])
    chunks = []
    for path, text in zip(paths, texts):
        with open(path, "rb") as file:
            cuts = find_chunk_boundaries(file, len(text.encode()), 1000, [EOT.encode(), b"<|end|>"])
        chunks.extend((path, start, end) for start, end in zip(cuts, cuts[1:]))
    assert engine.tasks == chunks and len(chunks) >= 15


def test_another_engine_counts_the_same_batches() -> None:
    texts = [generated_text(seed, 500, [EOT]) for seed in range(10)]
    engine = ReversedEngine()
    assert count_pretokens_in_iterator(texts, [EOT], engine=engine) == reference_counts(texts, [EOT])
    assert engine.tasks == [texts]  # one batch, given to the engine because it was asked for


# --- encodings and replaced bytes -----------------------------------------------------------------------------------


@pytest.mark.parametrize("encoding, name", [("utf-16", "UTF-16LE"), ("utf-16-be", None), ("utf-32", "UTF-32LE")])
@pytest.mark.parametrize("errors", ["strict", "replace"])
def test_utf16_and_utf32_files_are_refused_before_counting_naming_the_byte_order_mark(
        tmp_path: Path, encoding: str, name: str | None, errors: str) -> None:
    data = "hello world".encode(encoding)
    if name is None:  # utf-16-be writes no mark: add it
        data, name = b"\xfe\xff" + data, "UTF-16BE"
    path = write(tmp_path, "wide.txt", data)
    family = name[:6]
    expected = (f"^{path}: starts with a {name} byte order mark: the file is {family}, not UTF-8; convert it first, "
                f"e.g. `iconv -f {family} -t UTF-8 {path} > converted.txt`$")
    engine = ReversedEngine()
    with pytest.raises(InputError, match=expected.replace("(", "\\(").replace(")", "\\)")):
        count_pretokens_in_files([write(tmp_path, "fine.txt", b"fine"), path], errors=errors, engine=engine)
    assert engine.tasks == []  # nothing was counted


def test_utf8_byte_order_mark_is_kept_as_text_like_the_utf8_codec(tmp_path: Path) -> None:
    path = write(tmp_path, "bom.txt", b"\xef\xbb\xbfhello world")
    expected = reference_counts(["\ufeffhello world"], [])
    assert count_pretokens_in_files(path, num_workers=1) == expected
    assert expected[b"\xef\xbb\xbfhello"] == 0 and expected["\ufeff".encode()] == 1


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.binary(max_size=4) | st.sampled_from([b"ok ", "é€😀 ".encode(), b" "]), max_size=20)
                .map(b"".join), min_size=1, max_size=3), st.integers(1, 16))
def test_errors_replace_reports_replaced_bytes_and_the_first_offset(files: list[bytes], chunk_bytes: int) -> None:
    files = [data + b"!" for data in files]
    with tempfile.TemporaryDirectory() as directory:
        paths = [write(directory, f"{i}.bin", data) for i, data in enumerate(files)]
        stats = CountStats()
        count_pretokens_in_files(paths, num_workers=1, errors="replace", chunk_bytes=chunk_bytes, stats=stats)
    plain = [plain_replacements(data) for data in files]
    assert stats.replaced_bytes == sum(replaced for replaced, _ in plain)
    firsts = [(path, first) for path, (_, first) in zip(paths, plain) if first is not None]
    assert stats.first_replacement == (firsts[0] if firsts else None)


def test_strict_counting_leaves_stats_at_zero(tmp_path: Path) -> None:
    stats = CountStats()
    count_pretokens_in_files(write(tmp_path, "a.txt", b"fine text"), num_workers=1, stats=stats)
    assert stats == CountStats(0, None)


class DyingTask:
    """A task runner whose process dies without a word on its second task, as one killed for lack of memory."""

    def __call__(self, counter: PieceCounter, batch: list[str]) -> int:
        if batch == ["die"]:
            os._exit(3)
        return len(batch)


class FailingTask:
    """A task runner that raises an unexpected error (a bug, not bad input)."""

    def __call__(self, counter: PieceCounter, batch: list[str]) -> int:
        raise ZeroDivisionError("boom")


def test_a_worker_that_dies_is_reported_and_the_others_are_stopped() -> None:
    with pytest.raises(RuntimeError, match="a pre-token counting worker process died.*num_workers=1 counts in this"):
        LocalCountingEngine(2).count(iter([["a"], ["die"]] + [["b"]] * 50), DyingTask(), [], RecordingBar())


def test_an_unexpected_error_in_a_worker_is_reported_with_its_traceback() -> None:
    with pytest.raises(RuntimeError, match="(?s)a pre-token counting worker failed:.*ZeroDivisionError: boom"):
        LocalCountingEngine(2).count([["a"], ["b"]], FailingTask(), [], RecordingBar())


def test_surrogates_become_what_the_encoder_makes_of_them() -> None:
    from hf_bpe.encode.tokenizer import Tokenizer

    tokenizer = Tokenizer({i: bytes([i]) for i in range(256)}, [])
    for text in SURROGATE_TEXTS:
        assert tokenizer.decode(tokenizer.encode(text)) == hf_bpe.pretokenize.special_tokens.replace_surrogates(text)


def test_files_given_as_urls_count_like_local_paths(tmp_path: Path) -> None:
    path = tmp_path / "corpus.txt"
    path.write_text("one two<|endoftext|>three four five " * 200, encoding="utf-8")
    expected = count_pretokens_in_files([path], ["<|endoftext|>"], num_workers=1, chunk_bytes=64, progress=False)
    for workers in (1, 2):
        assert count_pretokens_in_files([path.as_uri()], ["<|endoftext|>"], num_workers=workers, chunk_bytes=64,
                                        progress=False) == expected


def set_segment_chars(monkeypatch: pytest.MonkeyPatch, segment_chars: int) -> None:
    """SEGMENT_CHARS bounds both the texts sent to workers (count) and the documents a PieceCounter takes whole."""
    monkeypatch.setattr(hf_bpe.train.counting.count, "SEGMENT_CHARS", segment_chars)
    monkeypatch.setattr(hf_bpe.train.counting.piece_counter, "SEGMENT_CHARS", segment_chars)


INTERRUPTED_PUT = """
import signal, sys, threading
from hf_bpe.train.counting.count import _BatchTask
from hf_bpe.train.counting.local_engine import LocalCountingEngine

class Bar:
    def update(self, size):
        pass

puts = 0

def in_put(frame, event, arg):
    if event == "return" and puts == 3:  # the lock is taken, and put's `with` block not entered yet
        sys.settrace(None)
        signal.raise_signal(signal.SIGINT)
    return in_put

def calls(frame, event, arg):
    global puts
    caller = frame.f_back
    if (frame.f_code is threading.Condition.__enter__.__code__ and caller.f_code.co_name == "put"
            and caller.f_code.co_filename.endswith("queues.py")):
        puts += 1  # after the first, put has started the queue's feeder thread, which close() stops
        return in_put
    return None

sys.settrace(calls)
try:
    LocalCountingEngine(2).count(([f"text {index}"] for index in range(1000)), _BatchTask(), [], Bar())
except KeyboardInterrupt:
    print("interrupted")
"""


def test_ctrl_c_inside_a_put_to_the_task_queue_stops_the_count_without_hanging() -> None:
    # CI once caught SIGTERM at this moment: the task queue's lock was left taken, and the clean-up's close() waited
    # for it forever. The real signal is sent at that moment (the return from the lock's __enter__ in put); the count
    # must end with KeyboardInterrupt.
    try:
        run = subprocess.run([sys.executable, "-c", INTERRUPTED_PUT], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("the count hung after Ctrl-C inside a put to its task queue")
    assert (run.returncode, run.stdout, run.stderr) == (0, "interrupted\n", "")
