"""The README's code runs: its `bash` and `python` blocks, in order, in one directory and one Python namespace.

As `tokenizers` tests its quicktour, so that the guide cannot go stale. The directory holds what the README's
readers are assumed to have: `corpus.txt` (text with `<|endoftext|>` between documents), `docs.jsonl` (one
document per row, column `text`), and text in three languages with parallel dev sets (`en.txt`, `dev/en.txt`,
...). The sections "Install" (it installs the package) and "On a cluster" (it starts Ray nodes) are not run,
nor `text` blocks (commands that need files a reader has, such as OpenAI's cl100k_base file); those commands are
tested elsewhere (`.ci/run` runs the install commands as written, `tests/cluster/` the Ray
commands, `tests/cli/test_convert.py` the conversion of cl100k_base).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import FIXTURES, REPO

NOT_RUN = {"Install", "On a cluster"}
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)


def readme_blocks() -> list[tuple[str, str, str]]:
    """(section heading, language, code) of every fenced block, in order."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = []
    for section in re.split(r"^## ", text, flags=re.M)[1:]:
        heading = section.splitlines()[0].strip()
        blocks += [(heading, language, code) for language, code in BLOCK.findall(section)]
    return blocks


def test_the_readme_has_the_blocks_this_test_runs() -> None:
    blocks = readme_blocks()
    run = [(heading, language) for heading, language, _ in blocks if heading not in NOT_RUN]
    assert ("Quick start", "bash") in run and ("Quick start", "python") in run
    assert {language for _, language in run} <= {"bash", "python", "text"}  # text: shown, not run
    install = [code for heading, language, code in blocks if heading == "Install"]
    assert install == ["pip install -e . && hf-bpe train --out my-tokenizer\n",
                       'pip install -e ".[test]" && pytest\n']  # the two set-up commands, exactly two


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    corpus = "<|endoftext|>".join([(FIXTURES / "tinystories_sample.txt").read_text(encoding="utf-8"),
                                   (FIXTURES / "corpus.en").read_text(encoding="utf-8")])
    (tmp_path / "corpus.txt").write_text(corpus, encoding="utf-8")
    documents = [part for part in (FIXTURES / "corpus.en").read_text(encoding="utf-8").split("\n\n") if part.strip()]
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps({"text": doc}) + "\n" for doc in documents[:200]),
                                         encoding="utf-8")
    (tmp_path / "dev").mkdir()
    for language in ("en", "hi", "el"):
        lines = (FIXTURES / "parallel" / f"{language}.txt").read_text(encoding="utf-8").splitlines(keepends=True)
        (tmp_path / f"{language}.txt").write_text("".join(lines[1:]) * 3, encoding="utf-8")
        (tmp_path / "dev" / f"{language}.txt").write_text(lines[0], encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))  # remote code is copied into the HF modules cache
    # `hf-bpe` from this interpreter's environment, for the bash blocks and the Python blocks' subprocesses alike,
    # whether or not that environment is activated.
    monkeypatch.setenv("PATH", os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
    return tmp_path


def test_the_readme_runs(workdir: Path) -> None:
    namespace: dict[str, object] = {"__name__": "readme"}
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for heading, language, code in readme_blocks():
        if heading in NOT_RUN or language == "text":
            continue
        if language == "bash":
            result = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=workdir, env=env,
                                    capture_output=True, text=True, timeout=300)
            assert result.returncode == 0, f"README section {heading!r}:\n{code}\n{result.stderr}"
        else:
            exec(compile(code, f"README.md ({heading})", "exec"), namespace)
    assert (workdir / "data" / "train.bin").stat().st_size > 0
