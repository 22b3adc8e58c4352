"""Running transformers' own generic tokenizer tests against `HFBPETokenizer`: `python -m tests.hf.transformers_suite`.

The tests (`TokenizerTesterMixin` in transformers' tests/test_tokenization_common.py, and the mixins it imports) come
from the source distribution of the installed transformers (downloaded and cached by tests/sdist_suites.py), never
from this repository. They are unpacked into a temporary folder as a package `transformers_tests` (the name ends in
"tests", where transformers' `get_tests_dir` looks; its `fixtures/sample_text.txt`, which the distribution lacks,
is one of our fixtures), and pytest runs tests/hf/test_transformers_suite.py over them, writing a JUnit report. The
run passes when exactly the documented checks fail (`EXPECTED_FAILURES`, docs/hf-compat.md): any other failure, a
documented one that now passes, or too few tests run, fails it (exit 1). `.ci/transformers_suite.sh` runs this in CI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests import FIXTURES, REPO
from tests.sdist_suites import cache_folder, source_distribution, unpack_top_level_tests
from tests.sdist_suites import verdict as junit_verdict

PACKAGE = "transformers_tests"
# Both expect a slow class to return the slow format of overflowing windows (`overflowing_tokens` inside one
# encoding); HFBPETokenizer returns the fast format (a row per window, with `overflow_to_sample_mapping`).
EXPECTED_FAILURES = {
    "test_maximum_encoding_length_pair_input": "overflowing windows in the fast format, not the slow one",
    "test_maximum_encoding_length_single_input": "overflowing windows in the fast format, not the slow one",
}
# Fewer test cases than this in a report means the suite was not really run (an import failed, say).
MIN_TESTS = 40


def unpack_tests(distribution: Path, folder: Path) -> Path:
    """The top-level tests/*.py of the distribution, as the package `folder/transformers_tests`."""
    package = folder / PACKAGE
    unpack_top_level_tests(distribution, package)
    if not (package / "test_tokenization_common.py").is_file():
        raise RuntimeError(f"{distribution}: no tests/test_tokenization_common.py")
    (package / "fixtures").mkdir()
    shutil.copyfile(FIXTURES / "tinystories_sample.txt", package / "fixtures" / "sample_text.txt")
    return package


def verdict(report: Path) -> tuple[bool, str]:
    """Whether a JUnit report shows exactly the documented failures, and a summary saying what differs."""
    return junit_verdict(report, EXPECTED_FAILURES, MIN_TESTS)


def main() -> int:
    import transformers

    version = transformers.__version__
    distribution = source_distribution("transformers", version, cache_folder())
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
