"""Tests for hf_bpe.train.counting.sources and source_counts: per-source counts in one pass, against the plain
reference per source, on one and two local workers and on Ray, and of a worker's counter fed source by source with
every pattern; the tallies' numbering and adding up; the NAME=PATH rule; sources with no text."""

from __future__ import annotations

import os
import pickle
import tempfile
from collections import Counter
from functools import reduce
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import hf_bpe.train.counting.piece_counter
from hf_bpe.common.errors import InputError
from hf_bpe.pretokenize import resolve_pattern
from hf_bpe.train._reference import reference_counts
from hf_bpe.train.counting import source_counts
from hf_bpe.train.counting.count import count_pretokens_in_files
from hf_bpe.train.counting.piece_counter import PieceCounter, add_counts
from hf_bpe.train.counting.source_counts import number_pretokens, summed
from hf_bpe.train.counting.sources import (
    SourceCounts,
    add_to_source,
    count_source_groups_in_files,
    count_sources_in_files,
    count_sources_in_iterators,
    parse_sources,
)
from tests import FIXTURES
from tests.pretokenize.test_gpt2 import ATOMS, SPECIAL_TOKEN_SETS, adversarial_text, characters
from tests.pretokenize.test_patterns import CUSTOM, PRESETS, pattern_text
from tests.train.merging.test_merge_loop import local_ray_cluster  # noqa: F401 (the module's Ray cluster fixture)

EOT = "<|endoftext|>"
PARALLEL = sorted((FIXTURES / "parallel").glob("*.txt"))
NAMES = st.sampled_from(["en", "de", "zh-Hans", "pt_BR", "x.1"])
# Up to three sources, each of one to three texts (files): the same name drawn twice is one source. Texts are seldom
# empty (a source of empty files is refused before counting).
TEXTS = st.lists(st.sampled_from(ATOMS) | characters | st.text(characters, max_size=3), min_size=1, max_size=40).map(
    "".join) | st.just("")
SOURCES = st.dictionaries(NAMES, st.lists(TEXTS, min_size=1, max_size=3), min_size=1, max_size=3)
fixture_settings = [HealthCheck.function_scoped_fixture]


def write_sources(folder: str, sources: dict[str, list[str]]) -> dict[str, list[str]]:
    paths: dict[str, list[str]] = {}
    for name, texts in sources.items():
        paths[name] = []
        for number, text in enumerate(texts):
            path = os.path.join(folder, f"{name}.{number}.txt")
            Path(path).write_bytes(text.encode())
            paths[name].append(path)
    return paths


def check_against_reference(sources: dict[str, list[str]], special_tokens: list[str], **options: object) -> None:
    """count_sources_in_files equals reference_counts of each source's texts, or names the first source without
    pre-tokens."""
    expected = {name: reference_counts(texts, special_tokens) for name, texts in sources.items()}
    with tempfile.TemporaryDirectory() as folder:
        paths = write_sources(folder, sources)
        # Sources of empty files are refused before counting, so they are named first; then those with nothing but
        # special tokens, found by counting.
        empty = ([name for name, texts in sources.items() if not "".join(texts)]
                 + [name for name, counts in expected.items() if not counts])
        if empty:
            with pytest.raises(InputError, match=f"source {empty[0]} has no text"):
                count_sources_in_files(paths, special_tokens, **options)  # type: ignore[arg-type]
            return
        counted = count_sources_in_files(paths, special_tokens, **options)  # type: ignore[arg-type]
    event("counted")
    assert list(counted) == list(sources)
    assert counted == expected


@settings(max_examples=150, deadline=None, suppress_health_check=fixture_settings)
@given(SOURCES, st.sampled_from(SPECIAL_TOKEN_SETS), st.integers(1, 24), st.sampled_from([3, 1 << 19]))
def test_each_source_counts_as_the_reference_in_this_process(monkeypatch: pytest.MonkeyPatch,
                                                             sources: dict[str, list[str]], special_tokens: list[str],
                                                             chunk_bytes: int, max_pieces: int) -> None:
    # Small chunks: a source's chunks run one after another on one piece table; tiny piece tables: converted often.
    monkeypatch.setattr(hf_bpe.train.counting.piece_counter, "MAX_PIECES", max_pieces)
    check_against_reference(sources, special_tokens, num_workers=1, chunk_bytes=chunk_bytes)


@settings(max_examples=30, deadline=None, suppress_health_check=fixture_settings)
@given(SOURCES, st.sampled_from(SPECIAL_TOKEN_SETS), st.integers(1, 24), st.sampled_from([3, 1 << 19]))
def test_each_source_counts_as_the_reference_on_two_workers(monkeypatch: pytest.MonkeyPatch,
                                                            sources: dict[str, list[str]], special_tokens: list[str],
                                                            chunk_bytes: int, max_pieces: int) -> None:
    monkeypatch.setattr(hf_bpe.train.counting.piece_counter, "MAX_PIECES", max_pieces)  # forked: the workers' too
    check_against_reference(sources, special_tokens, num_workers=2, chunk_bytes=chunk_bytes)


def test_parallel_corpus_on_two_workers_adds_up_to_plain_counting(monkeypatch: pytest.MonkeyPatch) -> None:
    sources = {path.stem: [path] for path in PARALLEL}
    monkeypatch.setattr(hf_bpe.train.counting.piece_counter, "MAX_PIECES", 50)  # hand-overs mid-source
    counted = count_sources_in_files(sources, [EOT], num_workers=2, chunk_bytes=64)
    assert counted == {name: reference_counts([paths[0].read_text(encoding="utf-8")], [EOT])
                       for name, paths in sources.items()}
    assert sum(counted.values(), Counter()) == count_pretokens_in_files(PARALLEL, [EOT], num_workers=1)


def test_a_worker_pre_tokenizes_each_distinct_piece_once_whatever_its_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    pre_tokenized: list[str] = []
    split = source_counts._split

    def recorded(pieces: list[str], pattern: object) -> tuple[list[str], list[int]]:
        pre_tokenized.extend(pieces)
        return split(pieces, pattern)  # type: ignore[arg-type]

    monkeypatch.setattr(source_counts, "_split", recorded)
    monkeypatch.setattr(source_counts, "SNAPSHOT_CHARS", 0)  # the tiny sources would be converted one by one
    sources = {path.stem: path for path in PARALLEL} | {"en2": FIXTURES / "parallel" / "en.txt"}  # en's pieces twice
    counted = count_sources_in_files(sources, [EOT], num_workers=1, chunk_bytes=32)
    assert counted == {name: reference_counts([path.read_text(encoding="utf-8")], [EOT])
                       for name, path in sources.items()}
    counter = PieceCounter([EOT])
    for path in sources.values():
        counter.add_text(path.read_text(encoding="utf-8"))
    assert sorted(pre_tokenized) == sorted(counter.pieces)  # one piece table, converted once


def test_a_large_table_is_converted_at_the_next_source(monkeypatch: pytest.MonkeyPatch) -> None:
    conversions = []
    number_pretokens = source_counts.number_pretokens
    monkeypatch.setattr(source_counts, "number_pretokens",
                        lambda pieces, pattern: conversions.append(len(pieces)) or number_pretokens(pieces, pattern))
    monkeypatch.setattr(source_counts, "SNAPSHOT_CHARS", 0)
    sources = {path.stem: path for path in PARALLEL[:3]}
    assert count_sources_in_files(sources, [EOT], num_workers=1, chunk_bytes=64) == {
        name: reference_counts([path.read_text(encoding="utf-8")], [EOT]) for name, path in sources.items()}
    assert len(conversions) == 1  # small: one table for the three
    monkeypatch.setattr(source_counts, "LARGE_TABLE", 1 << 30)  # every table is large
    conversions.clear()
    assert count_sources_in_files(sources, [EOT], num_workers=1, chunk_bytes=64) == {
        name: reference_counts([path.read_text(encoding="utf-8")], [EOT]) for name, path in sources.items()}
    assert len(conversions) == 3


def test_sources_too_small_to_snapshot_are_converted_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    conversions = []
    number_pretokens = source_counts.number_pretokens
    monkeypatch.setattr(source_counts, "number_pretokens",
                        lambda pieces, pattern: conversions.append(len(pieces)) or number_pretokens(pieces, pattern))
    sources = {path.stem: path for path in PARALLEL[:4]}
    counted = count_sources_in_files(sources, [EOT], num_workers=1, chunk_bytes=64)  # SNAPSHOT_CHARS: ~500 bytes each
    assert len(conversions) == 4
    assert counted == {name: reference_counts([path.read_text(encoding="utf-8")], [EOT])
                       for name, path in sources.items()}


@settings(max_examples=150, deadline=None, suppress_health_check=fixture_settings)
@given(st.lists(st.tuples(st.integers(0, 2), pattern_text), min_size=1, max_size=10),
       st.sampled_from([None, *PRESETS, *CUSTOM]), st.sampled_from(SPECIAL_TOKEN_SETS),
       st.sampled_from([0, 2, 7, 1 << 19]), st.sampled_from([0, 8, 1 << 30]), st.sampled_from([1, 4, 1 << 30]))
def test_add_to_source_counts_each_source_as_the_reference(monkeypatch: pytest.MonkeyPatch,
                                                          parts: list[tuple[int, str]], pattern: str | None,
                                                          special_tokens: list[str], max_pieces: int,
                                                          snapshot_chars: int, large_table: int) -> None:
    # A worker's counter fed source by source (and back), its tallies handed over whenever ready, as pickles, and
    # added up in any order: small tables convert often, and the snapshots may be refused every time or never.
    # (`pattern_text`: the characters on which the reference's `regex` agrees with the pinned classes.)
    monkeypatch.setattr(source_counts, "SNAPSHOT_CHARS", snapshot_chars)
    monkeypatch.setattr(source_counts, "LARGE_TABLE", large_table)
    counter = PieceCounter(special_tokens, max_pieces=max_pieces)
    regex = None if pattern is None else resolve_pattern(pattern)
    tallies = []
    for source, text in parts:
        add_to_source(counter, source, text, regex)
        if counter.ready():
            tallies.append(pickle.loads(pickle.dumps(counter.pretoken_counts())))
    tallies.append(counter.pretoken_counts())
    total = reduce(add_counts, reversed(tallies), Counter())
    counted = total.by_source() if isinstance(total, SourceCounts) else {}
    expected = {source: reference_counts([text for index, text in parts if index == source], special_tokens, regex)
                for source in range(3)}
    assert counted == {source: counts for source, counts in expected.items() if counts}


@settings(max_examples=100, deadline=None, suppress_health_check=fixture_settings)
@given(st.lists(pattern_text, max_size=12), st.sampled_from([None, *PRESETS, *CUSTOM]),
       st.integers(1, 4))
def test_number_pretokens_gives_each_piece_its_pretokens(monkeypatch: pytest.MonkeyPatch, texts: list[str],
                                                         pattern: str | None, batch: int) -> None:
    monkeypatch.setattr(source_counts, "_BATCH_PIECES", batch)
    counter = PieceCounter(pattern=pattern)
    for text in texts:
        counter.add_text(text)
    pieces = list(counter.pieces)
    keys, offsets, lengths, numbers = number_pretokens(list(pieces), counter.compiled)
    assert len(set(keys)) == len(keys)
    for piece, offset, length in zip(pieces, offsets.tolist(), lengths.tolist(), strict=True):
        pretokens = [keys[number] for number in numbers[offset:offset + length]]
        assert pretokens == counter.compiled.pretokens_of_piece(piece)
    firsts = [key for piece in pieces for key in counter.compiled.pretokens_of_piece(piece)]
    assert keys == list(dict.fromkeys(firsts))  # numbered in the order they first come: no run-to-run difference


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(1, 1 << 56)), max_size=40), st.booleans())
def test_summed_adds_the_counts_of_each_number(pairs: list[tuple[int, int]], small: bool) -> None:
    # Counts add up in int64: beyond 2**53 (float64's exact integers) and up to 2**63, more than any corpus holds.
    if small:  # the bincount route
        pairs = [(number, count % 1000 + 1) for number, count in pairs]
    numbers, counts = summed(np.array([number for number, _ in pairs], np.int64),
                             np.array([count for _, count in pairs], np.int64), 31)
    expected: Counter[int] = Counter()
    for number, count in pairs:
        expected[number] += count
    assert dict(zip(numbers.tolist(), counts.tolist(), strict=True)) == expected
    assert numbers.tolist() == sorted(expected)


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(NAMES, st.lists(adversarial_text, max_size=4), min_size=1, max_size=3),
       st.sampled_from(SPECIAL_TOKEN_SETS))
def test_iterators_count_as_the_reference(sources: dict[str, list[str]], special_tokens: list[str]) -> None:
    expected = {name: reference_counts(texts, special_tokens) for name, texts in sources.items()}
    empty = [name for name, counts in expected.items() if not counts]
    if empty:
        with pytest.raises(InputError, match=f"source {empty[0]} has no text"):
            count_sources_in_iterators(sources, special_tokens, num_workers=1)
        return
    assert count_sources_in_iterators(sources, special_tokens, num_workers=1) == expected


def test_iterators_on_two_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("hf_bpe.train.counting.count.BATCH_CHARS", 100)  # several batches per source
    texts = {path.stem: path.read_text(encoding="utf-8").splitlines() for path in PARALLEL}
    counted = count_sources_in_iterators({name: iter(lines) for name, lines in texts.items()}, num_workers=2)
    assert counted == {name: reference_counts(lines) for name, lines in texts.items()}


def test_another_pattern_counts_per_source(tmp_path: Path) -> None:
    path = tmp_path / "n.txt"
    path.write_text("12345 abc" * 20)
    counted = count_sources_in_files({"a": path, "b": [path, path]}, pattern="cl100k", num_workers=1, chunk_bytes=16)
    expected = reference_counts([path.read_text()], [], "cl100k")
    assert counted == {"a": expected, "b": Counter({key: 2 * count for key, count in expected.items()})}


# --- sources without text ---------------------------------------------------------------------------------------


def test_a_source_of_empty_files_is_named_before_counting(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(InputError, match=r"^source fr has no text: .*empty\.txt is empty$"):
        count_sources_in_files({"en": FIXTURES / "german.txt", "fr": tmp_path / "empty.txt"})
    with pytest.raises(InputError, match=r"^dev set fr has no text: its 2 files are empty$"):
        count_sources_in_files({"fr": [tmp_path / "empty.txt"] * 2}, what="dev set")


def test_a_source_of_special_tokens_only_is_named(tmp_path: Path) -> None:
    (tmp_path / "eot.txt").write_text(EOT * 3)
    with pytest.raises(InputError, match=r"^source de has no text: nothing but special tokens$"):
        count_sources_in_files({"en": FIXTURES / "german.txt", "de": tmp_path / "eot.txt"}, [EOT])
    with pytest.raises(InputError, match=r"^source de has no text$"):
        count_sources_in_iterators({"en": ["a"], "de": []}, num_workers=1)


@pytest.mark.parametrize("workers", [1, 2])
def test_groups_counted_in_one_pass_count_as_each_alone(tmp_path: Path, workers: int) -> None:
    """Parity-aware training counts its sources and dev sets in one pass: the same counts as a pass for each, and a
    dev set with no text named as one, after the sources' counts (the tally handed over once)."""
    (tmp_path / "dev.en").write_text("a dev set" + EOT + "for en")
    (tmp_path / "eot.txt").write_text(EOT * 3)
    sources = {"en": FIXTURES / "german.txt", "de": [FIXTURES / "german.txt", tmp_path / "dev.en"]}
    dev = {"en": tmp_path / "dev.en", "de": FIXTURES / "german.txt"}
    counted = count_source_groups_in_files({"source": sources, "dev set": dev}, [EOT], num_workers=workers)
    assert counted == {"source": count_sources_in_files(sources, [EOT], num_workers=workers),
                       "dev set": count_sources_in_files(dev, [EOT], num_workers=workers, what="dev set")}
    with pytest.raises(InputError, match=r"^dev set de has no text: nothing but special tokens$"):
        count_source_groups_in_files({"source": sources, "dev set": {"en": dev["en"], "de": tmp_path / "eot.txt"}},
                                     [EOT], num_workers=workers)


def test_bad_sources_arguments(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no sources given"):
        count_sources_in_files({})
    with pytest.raises(InputError, match="source en has no files"):
        count_sources_in_files({"en": []})
    with pytest.raises(InputError, match="missing.txt: no such file"):
        count_sources_in_files({"en": tmp_path / "missing.txt"})
    with pytest.raises(TypeError, match="mapping"):
        count_sources_in_files([FIXTURES / "german.txt"])  # type: ignore[arg-type]


# --- the tally ----------------------------------------------------------------------------------------------------


def test_source_counts_add_up_whatever_the_order_of_sources() -> None:
    counter = PieceCounter([EOT], max_pieces=2)
    parts = [(0, "a b c"), (1, "x y"), (0, " b a"), (2, EOT), (1, "y z z z"), (0, "c")]
    for source, text in parts:
        add_to_source(counter, source, text)
    tally = counter.pretoken_counts()
    assert isinstance(tally, SourceCounts)
    expected = {source: reference_counts([text for index, text in parts if index == source], [EOT])
                for source in (0, 1)}
    again = pickle.loads(pickle.dumps(tally))  # as a worker hands it over
    again.update(pickle.loads(pickle.dumps(tally)))
    assert len(again) == len(tally) == sum(map(len, expected.values()))
    assert tally.by_source() == expected
    assert again.by_source() == {source: counts + counts for source, counts in expected.items()}
    assert len(tally) == len(again) == 0  # read out


def test_a_received_tally_is_made_counters_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(source_counts, "SNAPSHOT_CHARS", 0)  # one conversion, at the end
    counter = PieceCounter()
    add_to_source(counter, 0, "a b's")
    add_to_source(counter, 1, " b")
    tally = counter.pretoken_counts()
    assert tally.tables and not tally.counters  # a worker's: arrays and keys
    received = pickle.loads(pickle.dumps(tally))
    assert received.counters and not received.tables  # made while the parent waits for the other workers
    assert len(received) == len(tally) == 4
    assert received.by_source() == tally.by_source() == {0: Counter({b"a": 1, b" b": 1, b"'s": 1}),
                                                          1: Counter({b" b": 1})}


def test_tallies_handed_over_midway_wait_compact_until_a_last_one_comes() -> None:
    counter = PieceCounter(max_pieces=3)
    add_to_source(counter, 0, "a b c d e")  # the table passes max_pieces: converted while the worker counts on
    assert counter.ready()
    midway = counter.pretoken_counts()
    add_to_source(counter, 1, "f g")
    last = counter.pretoken_counts()
    assert midway.midway and not last.midway
    total = pickle.loads(pickle.dumps(midway))
    assert total.tables and total.key_count() == 5 and not total.counters  # arrays and encoded keys
    total.update(pickle.loads(pickle.dumps(midway)))
    assert len(total.pending) == 1 and not total.counters
    larger = PieceCounter(max_pieces=3)
    add_to_source(larger, 2, "k l m n o p q r s t u v w x")
    larger_tally = pickle.loads(pickle.dumps(larger.pretoken_counts()))
    larger_tally.max_pieces = 100  # its pending tallies may hold 200 keys before it makes any counters
    total = add_counts(total, larger_tally)  # the larger takes the total in, and its pending tallies along
    assert total is larger_tally and len(total.pending) == 2 and not total.counters
    total.update(pickle.loads(pickle.dumps(last)))  # a worker is done: now counters, all of them
    assert not total.pending and not total.tables and total.counters
    once = reference_counts(["a b c d e"])
    assert total.by_source() == {0: once + once, 1: reference_counts(["f g"]),
                                 2: reference_counts(["k l m n o p q r s t u v w x"])}


def test_a_tally_converted_twice_adds_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(source_counts, "SNAPSHOT_CHARS", 1 << 30)  # every move to another source converts
    counter = PieceCounter()
    parts = [(0, "a b"), (1, "b c"), (0, "a"), (1, "c c d")]
    for source, text in parts:
        add_to_source(counter, source, text)  # one process: the tally is never handed over
    assert counter.pretoken_counts().by_source() == {
        source: reference_counts([text for index, text in parts if index == source]) for source in (0, 1)}


def test_counts_beyond_int32_and_float64_stay_exact() -> None:
    tally = SourceCounts(0)
    tally.add_pieces(Counter({"a": 1 << 40, " b's": (1 << 60) + 1}), PieceCounter().compiled)
    other = pickle.loads(pickle.dumps(tally))
    other.update(tally)
    assert other.by_source() == {0: Counter({b"a": 1 << 41, b" b": (1 << 61) + 2, b"'s": (1 << 61) + 2})}


@pytest.mark.parametrize("largest", [255, 256, (1 << 16) - 1, 1 << 16, (1 << 31) - 1, 1 << 31])
def test_counts_are_kept_in_types_that_hold_them(largest: int) -> None:
    tally = SourceCounts(0)
    tally.add_pieces(Counter({"a": largest, "b": 1}), PieceCounter().compiled)
    assert pickle.loads(pickle.dumps(tally)).by_source() == {0: Counter({b"a": largest, b"b": 1})}


def test_source_counts_refuse_counts_of_no_source() -> None:
    tally = SourceCounts(0)
    tally.update(Counter())  # an idle worker's
    with pytest.raises(TypeError, match="only SourceCounts"):
        tally.update(Counter({b"a": 1}))
    counter = PieceCounter()
    counter.add_text("a")
    counter.flush()
    with pytest.raises(TypeError, match="counts of no source"):
        add_to_source(counter, 0, "b")


# --- NAME=PATH ------------------------------------------------------------------------------------------------------


def test_the_name_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("a=b.txt").write_text("a file whose name holds =")
    for name in ["x.txt", "y.txt"]:
        Path(name).write_text("text")
    assert parse_sources(["a=b.txt", "x.txt"]) is None  # an existing file wins over NAME=PATH
    assert parse_sources(["/abs=1/x.txt", "./en=x"]) is None  # no name before the "=": bare paths
    assert parse_sources(["en=*.txt", "de=x.txt", "s3=s3://bucket/a=*.txt"]) == {
        "en": ["a=b.txt", "x.txt", "y.txt"], "de": ["x.txt"], "s3": ["s3://bucket/a=*.txt"]}
    assert parse_sources([Path("fr=a=b.txt")]) == {"fr": ["a=b.txt"]}


@pytest.mark.parametrize(("inputs", "message"), [
    (["en=a.txt", "en=b.txt"], "INPUT en=b.txt: the name en is given twice"),
    (["en="], "INPUT en=: no path after en="),
    (["en=nothing*.txt"], "INPUT en=nothing*.txt: no file matches nothing*.txt"),
    (["plain.txt", "en=a.txt"], "INPUT plain.txt has no NAME= while en=a.txt has: name every input or none"),
])
def test_bad_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inputs: list[str], message: str) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as error:
        parse_sources(inputs)
    assert str(error.value).startswith(message)


def test_the_rule_is_the_one_of_eval_corpora() -> None:
    from hf_bpe.evaluation import languages
    from hf_bpe.train.counting import sources

    assert sources.NAME_REGEX.pattern == languages.NAME_REGEX.pattern


# --- Ray --------------------------------------------------------------------------------------------------------------


def test_ray_engine_counts_each_source_as_the_reference(local_ray_cluster, tmp_path: Path) -> None:  # noqa: F811
    from hf_bpe.train.counting.ray_counting import RayCountingEngine

    sources = {path.stem: [path, tmp_path / f"{path.stem}.twice.txt"] for path in PARALLEL}
    for path, twice in sources.values():
        twice.write_text((path.read_text(encoding="utf-8") + EOT) * 2, encoding="utf-8")
    expected = {name: reference_counts([path.read_text(encoding="utf-8") for path in paths], [EOT])
                for name, paths in sources.items()}
    counted = count_sources_in_files(sources, [EOT], engine=RayCountingEngine(), chunk_bytes=100)
    assert list(counted) == list(sources) and counted == expected
