"""Tests for hf_bpe.train.counting.sources: per-source counts in one pass, against the plain reference per source, on
one and two local workers and on Ray; the NAME=PATH rule; sources with no text."""

from __future__ import annotations

import os
import pickle
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import hf_bpe.train.counting.piece_counter
from hf_bpe.common.errors import InputError
from hf_bpe.train._reference import reference_counts
from hf_bpe.train.counting.count import count_pretokens_in_files
from hf_bpe.train.counting.piece_counter import PieceCounter
from hf_bpe.train.counting.sources import (
    SourceCounts,
    add_to_source,
    count_sources_in_files,
    count_sources_in_iterators,
    parse_sources,
)
from tests import FIXTURES
from tests.pretokenize.test_gpt2 import ATOMS, SPECIAL_TOKEN_SETS, adversarial_text, characters

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


def test_a_source_is_converted_once_per_worker_however_many_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    conversions = []
    convert = PieceCounter._pretokens_of_pieces

    def counted_conversion(self: PieceCounter) -> Counter[str]:
        conversions.append(len(self.pieces))
        return convert(self)

    monkeypatch.setattr(PieceCounter, "_pretokens_of_pieces", counted_conversion)
    sources = {path.stem: path for path in PARALLEL[:3]}
    counted = count_sources_in_files(sources, [EOT], num_workers=1, chunk_bytes=32)
    assert len(conversions) == 3  # one piece table per source, kept over its ~20-30 chunks
    assert counted == {name: reference_counts([path.read_text(encoding="utf-8")], [EOT])
                       for name, path in sources.items()}


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
    assert tally.by_source() == expected
    again = pickle.loads(pickle.dumps(tally))  # as a worker hands it over
    again.update(tally)
    assert again.by_source() == {source: counts + counts for source, counts in expected.items()}
    assert len(again) == sum(map(len, expected.values()))


def test_source_counts_refuse_counts_of_no_source() -> None:
    tally = SourceCounts(0, current={b"a": 1})
    tally.update(Counter())  # an idle worker's
    with pytest.raises(TypeError, match="only SourceCounts"):
        tally.update(Counter({b"a": 1}))


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


@pytest.fixture(scope="module")
def local_ray_cluster():
    ray = pytest.importorskip("ray")
    from hf_bpe.cluster.session import project_runtime_env

    with pytest.MonkeyPatch.context() as patch:  # as tests/train/merging/test_merge_loop.py starts it
        patch.setenv("RAY_USAGE_STATS_ENABLED", "0")
        patch.setenv("RAY_AUTH_MODE", "disabled")
        ray.init(num_cpus=2, include_dashboard=False, runtime_env=project_runtime_env(), log_to_driver=False)
        yield ray
        ray.shutdown()


def test_ray_engine_counts_each_source_as_the_reference(local_ray_cluster, tmp_path: Path) -> None:
    from hf_bpe.train.counting.ray_counting import RayCountingEngine

    sources = {path.stem: [path, tmp_path / f"{path.stem}.twice.txt"] for path in PARALLEL}
    for path, twice in sources.values():
        twice.write_text((path.read_text(encoding="utf-8") + EOT) * 2, encoding="utf-8")
    expected = {name: reference_counts([path.read_text(encoding="utf-8") for path in paths], [EOT])
                for name, paths in sources.items()}
    counted = count_sources_in_files(sources, [EOT], engine=RayCountingEngine(), chunk_bytes=100)
    assert list(counted) == list(sources) and counted == expected
