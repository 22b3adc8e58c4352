"""Running transformers' own generic tokenizer tests against `HFBPETokenizer`: `python -m tests.hf.transformers_suite`.

The tests (`TokenizerTesterMixin` in transformers' tests/test_tokenization_common.py, and the mixins it imports) come
from the source distribution of the installed transformers, downloaded with `pip download --no-binary :all:` and
kept in a cache folder (`$HF_BPE_CACHE`, else `~/.cache/hf_bpe`), never from this repository. They are unpacked into
a temporary folder as a package `transformers_tests` (the name ends in "tests", where transformers' `get_tests_dir`
looks; its `fixtures/sample_text.txt`, which the distribution lacks, is one of our fixtures), and pytest runs
tests/hf/test_transformers_suite.py over them, writing a JUnit report. The run passes when exactly the documented
checks fail (`EXPECTED_FAILURES`, docs/hf-compat.md): any other failure, a documented one that now passes, or too
few tests run, fails it (exit 1). `.ci/transformers_suite.sh` runs this in CI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from tests import FIXTURES, REPO

PACKAGE = "transformers_tests"
# Both expect a slow class to return the slow format of overflowing windows (`overflowing_tokens` inside one
# encoding); HFBPETokenizer returns the fast format (a row per window, with `overflow_to_sample_mapping`).
EXPECTED_FAILURES = {
    "test_maximum_encoding_length_pair_input": "overflowing windows in the fast format, not the slow one",
    "test_maximum_encoding_length_single_input": "overflowing windows in the fast format, not the slow one",
}
# Fewer test cases than this in a report means the suite was not really run (an import failed, say).
MIN_TESTS = 40


def source_distribution(version: str, cache: Path) -> Path:
    """transformers' source distribution of `version`, downloaded into `cache` unless it is there already."""
    target = cache / f"transformers-{version}.tar.gz"
    if target.is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as download:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                        f"transformers=={version}", "-d", download], check=True)
        found = sorted(Path(download).glob("transformers-*.tar.gz"))
        if len(found) != 1:
            raise RuntimeError(f"pip download gave {[path.name for path in Path(download).iterdir()]}, not one "
                               f"transformers-*.tar.gz")
        os.replace(found[0], target)  # whole or not at all
    return target


def unpack_tests(distribution: Path, folder: Path) -> Path:
    """The top-level tests/*.py of the distribution, as the package `folder/transformers_tests`."""
    package = folder / PACKAGE
    (package / "fixtures").mkdir(parents=True)
    with tarfile.open(distribution) as archive:
        for member in archive.getmembers():
            parts = Path(member.name).parts
            if member.isfile() and len(parts) == 3 and parts[1] == "tests" and parts[2].endswith(".py"):
                source = archive.extractfile(member)
                assert source is not None
                (package / parts[2]).write_bytes(source.read())
    if not (package / "test_tokenization_common.py").is_file():
        raise RuntimeError(f"{distribution}: no tests/test_tokenization_common.py")
    (package / "__init__.py").touch()
    shutil.copyfile(FIXTURES / "tinystories_sample.txt", package / "fixtures" / "sample_text.txt")
    return package


def verdict(report: Path) -> tuple[bool, str]:
    """Whether a JUnit report shows exactly the documented failures, and a summary saying what differs."""
    try:
        cases = list(ElementTree.parse(report).getroot().iter("testcase"))
    except (OSError, ElementTree.ParseError) as error:
        return False, f"no test report ({error})"
    failed = {case.get("name", "?") for case in cases
              if any(child.tag in ("failure", "error") for child in case)}
    skipped = sum(1 for case in cases if any(child.tag == "skipped" for child in case))
    unexpected = sorted(failed - set(EXPECTED_FAILURES))
    now_passing = sorted(set(EXPECTED_FAILURES) - failed)
    summary = (f"{len(cases)} tests, {len(cases) - len(failed) - skipped} passed, {skipped} skipped, "
               f"{len(failed & set(EXPECTED_FAILURES))} failed as documented")
    problems = []
    if len(cases) < MIN_TESTS:
        problems.append(f"only {len(cases)} tests ran (at least {MIN_TESTS} expected)")
    if unexpected:
        problems.append("unexpected failures: " + ", ".join(unexpected))
    if now_passing:
        problems.append("documented failures that now pass (update docs/hf-compat.md and EXPECTED_FAILURES): "
                        + ", ".join(now_passing))
    return not problems, "; ".join([summary, *problems])


def main() -> int:
    import transformers

    version = transformers.__version__
    cache = Path(os.environ.get("HF_BPE_CACHE") or Path.home() / ".cache" / "hf_bpe")
    distribution = source_distribution(version, cache)
    with tempfile.TemporaryDirectory(prefix="hf_bpe_transformers_suite_") as folder:
        unpack_tests(distribution, Path(folder))
        report = Path(folder) / "report.xml"
        env = {**os.environ, "HF_BPE_TRANSFORMERS_TESTS": folder, "HF_HUB_OFFLINE": "1",
               "TRANSFORMERS_VERBOSITY": "error", "TOKENIZERS_PARALLELISM": "false"}
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                        "-W", "ignore::pytest.PytestUnknownMarkWarning", f"--junitxml={report}",
                        "tests/hf/test_transformers_suite.py"], cwd=REPO, env=env, check=False)
        passed, summary = verdict(report)
    print(f"transformers {version} TokenizerTesterMixin on HFBPETokenizer: {summary}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
