"""Running another project's own tests against hf_bpe, taken from that project's source distribution at run time, never
copied into this repository: transformers' generic tokenizer tests (tests/hf/transformers_suite.py) and tiktoken's
tests (tests/encode/tiktoken_suite.py).

The distribution of the installed version is downloaded with `pip download --no-deps --no-binary :all:` into a cache
folder (`$HF_BPE_CACHE`, else `~/.cache/hf_bpe`) and reused by later runs; its top-level `tests/*.py` are unpacked as
a package of another name in a temporary folder; pytest writes a JUnit report, and `verdict` reads it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping
from pathlib import Path


def cache_folder() -> Path:
    """Where downloaded distributions are kept: `$HF_BPE_CACHE`, else `~/.cache/hf_bpe`."""
    return Path(os.environ.get("HF_BPE_CACHE") or Path.home() / ".cache" / "hf_bpe")


def source_distribution(project: str, version: str, cache: Path) -> Path:
    """The source distribution of `project` `version`, downloaded into `cache` unless it is there already."""
    target = cache / f"{project}-{version}.tar.gz"
    if target.is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as download:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                        f"{project}=={version}", "-d", download], check=True)
        found = sorted(Path(download).glob(f"{project}-*.tar.gz"))
        if len(found) != 1:
            raise RuntimeError(f"pip download gave {[path.name for path in Path(download).iterdir()]}, not one "
                               f"{project}-*.tar.gz")
        os.replace(found[0], target)  # whole or not at all
    return target


def unpack_top_level_tests(distribution: Path, package: Path) -> list[str]:
    """Write the distribution's top-level `tests/*.py` into the folder `package` (made here, with an `__init__.py`
    when the tests have none) and return their names."""
    package.mkdir(parents=True)
    names = []
    with tarfile.open(distribution) as archive:
        for member in archive.getmembers():
            parts = Path(member.name).parts
            if member.isfile() and len(parts) == 3 and parts[1] == "tests" and parts[2].endswith(".py"):
                source = archive.extractfile(member)
                assert source is not None
                (package / parts[2]).write_bytes(source.read())
                names.append(parts[2])
    (package / "__init__.py").touch()
    return sorted(names)


def verdict(report: Path, expected_failures: Mapping[str, str], min_tests: int) -> tuple[bool, str]:
    """Whether a JUnit report shows exactly the `expected_failures` (test name -> why) among at least `min_tests`
    tests, and a summary saying what differs."""
    try:
        cases = list(ElementTree.parse(report).getroot().iter("testcase"))
    except (OSError, ElementTree.ParseError) as error:
        return False, f"no test report ({error})"
    failed = {case.get("name", "?") for case in cases
              if any(child.tag in ("failure", "error") for child in case)}
    skipped = sum(1 for case in cases if any(child.tag == "skipped" for child in case))
    unexpected = sorted(failed - set(expected_failures))
    now_passing = sorted(set(expected_failures) - failed)
    summary = (f"{len(cases)} tests, {len(cases) - len(failed) - skipped} passed, {skipped} skipped, "
               f"{len(failed & set(expected_failures))} failed as documented")
    problems = []
    if len(cases) < min_tests:
        problems.append(f"only {len(cases)} tests ran (at least {min_tests} expected)")
    if unexpected:
        problems.append("unexpected failures: " + ", ".join(unexpected))
    if now_passing:
        problems.append("documented failures that now pass (update docs/hf-compat.md and EXPECTED_FAILURES): "
                        + ", ".join(now_passing))
    return not problems, "; ".join([summary, *problems])
