"""What transformers' generic tokenizer tests ask of `HFBPETokenizer`, checked without them, and the verdict that CI's
run of those tests (tests/hf/transformers_suite.py) draws from its report."""

from __future__ import annotations

import inspect
import io
import json
import tarfile
from pathlib import Path

import pytest

from hf_bpe import PATTERNS
from hf_bpe.formats.gpt2 import load_gpt2
from hf_bpe.formats.hf_directory import save_tokenizer_directory
from hf_bpe.hf.tokenizer import HFBPETokenizer
from tests import FIXTURES
from tests.hf.transformers_suite import EXPECTED_FAILURES, MIN_TESTS, PACKAGE, unpack_tests, verdict

# The arguments transformers' test_tokenizer_store_full_signature leaves out: they name the files or objects.
_NOT_CHECKED = {"vocab_file", "merges_file", "tokenizer_file", "vocab", "merges"}


@pytest.fixture(scope="module")
def directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    vocab, merges = load_gpt2(FIXTURES / "train-bpe-reference-vocab.json", FIXTURES / "train-bpe-reference-merges.txt")
    return save_tokenizer_directory(tmp_path_factory.mktemp("conformance") / "tok", vocab, merges,
                                    ["<|endoftext|>"], pattern="cl100k")


def test_every_init_argument_with_a_default_is_in_init_kwargs(directory: Path) -> None:
    loaded = HFBPETokenizer.from_pretrained(directory)
    built = HFBPETokenizer(vocab=loaded.get_vocab(), merges=[(left, right) for left, right in
                                                              _string_merges(directory)], pattern="o200k")
    for tokenizer in (loaded, built):
        for name, parameter in inspect.signature(HFBPETokenizer.__init__).parameters.items():
            if parameter.default is not inspect.Parameter.empty and name not in _NOT_CHECKED:
                assert name in tokenizer.init_kwargs, name
    assert loaded.init_kwargs["pattern"] == PATTERNS["cl100k"] and built.init_kwargs["pattern"] == PATTERNS["o200k"]


def test_the_pattern_is_saved_in_tokenizer_json_only(directory: Path, tmp_path: Path) -> None:
    HFBPETokenizer.from_pretrained(directory).save_pretrained(tmp_path)
    assert "pattern" not in json.loads((tmp_path / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert HFBPETokenizer.from_pretrained(tmp_path).pattern == PATTERNS["cl100k"]


def _string_merges(directory: Path) -> list[tuple[str, str]]:
    lines = (directory / "merges.txt").read_text(encoding="utf-8").splitlines()[1:]
    return [tuple(line.split(" ")) for line in lines if line]  # type: ignore[misc]


# --- the verdict on a run of transformers' tests -------------------------------------------------------------------


def junit_report(path: Path, failed: list[str], passed: int, skipped: int = 0) -> Path:
    cases = [f'<testcase classname="S" name="{name}"><failure message="x"/></testcase>' for name in failed]
    cases += [f'<testcase classname="S" name="test_ok_{index}"/>' for index in range(passed)]
    cases += [f'<testcase classname="S" name="test_skip_{index}"><skipped/></testcase>' for index in range(skipped)]
    path.write_text(f'<testsuites><testsuite name="pytest">{"".join(cases)}</testsuite></testsuites>',
                    encoding="utf-8")
    return path


def test_the_run_passes_with_exactly_the_documented_failures(tmp_path: Path) -> None:
    passed, summary = verdict(junit_report(tmp_path / "r.xml", list(EXPECTED_FAILURES), MIN_TESTS, skipped=3))
    assert passed, summary
    assert summary == f"{MIN_TESTS + 5} tests, {MIN_TESTS} passed, 3 skipped, 2 failed as documented"


@pytest.mark.parametrize("failed, passed_tests, problem", [
    ([*EXPECTED_FAILURES, "test_tokenizer_store_full_signature"], MIN_TESTS,
     "unexpected failures: test_tokenizer_store_full_signature"),
    ([next(iter(EXPECTED_FAILURES))], MIN_TESTS, "documented failures that now pass"),
    (list(EXPECTED_FAILURES), 3, "only 5 tests ran"),
])
def test_the_run_fails_on_anything_else(tmp_path: Path, failed: list[str], passed_tests: int, problem: str) -> None:
    passed, summary = verdict(junit_report(tmp_path / "r.xml", failed, passed_tests))
    assert not passed and problem in summary


def test_the_run_fails_without_a_report(tmp_path: Path) -> None:
    passed, summary = verdict(tmp_path / "missing.xml")
    assert not passed and summary.startswith("no test report")


def test_only_the_distributions_top_level_tests_are_unpacked(tmp_path: Path) -> None:
    distribution = tmp_path / "transformers-9.9.tar.gz"
    with tarfile.open(distribution, "w:gz") as archive:
        for name in ("tests/test_tokenization_common.py", "tests/test_x_mixin.py", "tests/models/gpt2/test_y.py",
                     "src/transformers/__init__.py"):
            data = f"# {name}\n".encode()
            info = tarfile.TarInfo(f"transformers-9.9/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    package = unpack_tests(distribution, tmp_path / "unpacked")
    assert package.name == PACKAGE and package.parent.name == "unpacked"
    assert sorted(path.name for path in package.iterdir()) == ["__init__.py", "fixtures", "test_tokenization_common.py",
                                                               "test_x_mixin.py"]
    assert (package / "fixtures" / "sample_text.txt").stat().st_size > 0
    with tarfile.open(tmp_path / "empty.tar.gz", "w:gz"):
        pass
    with pytest.raises(RuntimeError, match="no tests/test_tokenization_common.py"):
        unpack_tests(tmp_path / "empty.tar.gz", tmp_path / "again")
