"""`hf-bpe eval --corpus NAME=FILE` and `hf-bpe card --eval-corpus NAME=FILE`, in real processes, on the parallel
fixtures (tests/fixtures/parallel): the per-language report after the usual one, JSON, plot, and bad input refused in
one line before any work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hf_bpe.evaluation.baselines import resolve_baseline, resolve_directory
from hf_bpe.evaluation.evaluate import evaluate, markdown_report
from hf_bpe.evaluation.languages import language_report
from hf_bpe.formats.gpt2 import load_gpt2
from hf_bpe.formats.hf_directory import save_tokenizer_directory
from tests import FIXTURES, REPO

PARALLEL = FIXTURES / "parallel"
LANGUAGES = ["en", "hi", "ja", "th"]


@pytest.fixture(scope="module")
def small_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    vocab, merges = load_gpt2(FIXTURES / "train-bpe-reference-vocab.json", FIXTURES / "train-bpe-reference-merges.txt")
    return save_tokenizer_directory(tmp_path_factory.mktemp("languages") / "small", vocab, merges, ["<|endoftext|>"])


def hf_bpe(*arguments: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "hf_bpe.cli", *arguments]
    return subprocess.run(command, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def named(*languages: str) -> list[str]:
    return [f"{language}={PARALLEL / f'{language}.txt'}" for language in languages]


def test_named_corpora_add_the_per_language_report(small_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from tests.evaluation.test_plots import check_png

    json_path, plot = tmp_path / "eval.json", tmp_path / "languages.png"
    done = hf_bpe("eval", str(small_dir), "--corpus", *named(*LANGUAGES), "--baseline", "gpt2", "--parity-reference",
                  "hi", "--json", str(json_path), "--plot", str(plot), "--no-progress")
    assert done.returncode == 0, done.stderr
    bare = hf_bpe("eval", str(small_dir), "--corpus", *(str(PARALLEL / f"{language}.txt") for language in LANGUAGES),
                  "--baseline", "gpt2", "--no-progress")
    assert bare.returncode == 0, bare.stderr
    results = evaluate([resolve_directory(str(small_dir)), resolve_baseline("gpt2")],
                       [PARALLEL / f"{language}.txt" for language in LANGUAGES])
    report = language_report(results, LANGUAGES, "hi")
    assert report is not None
    assert bare.stdout == markdown_report(results)
    assert done.stdout == bare.stdout + "\n" + report.markdown()
    assert "| `th` | gpt2 (baseline) |" in done.stdout and "- gpt2: " in done.stdout
    document = json.loads(json_path.read_text(encoding="utf-8"))
    assert document["languages"] == json.loads(json.dumps(report.as_json()))
    assert [entry["name"] for entry in document["languages"]["corpora"]] == LANGUAGES
    check_png(plot)
    assert done.stderr.splitlines() == [f"wrote {json_path}", f"wrote {plot}"]


def test_bare_corpora_keep_their_json(small_dir: Path, tmp_path: Path) -> None:
    json_path = tmp_path / "eval.json"
    done = hf_bpe("eval", str(small_dir), "--corpus", str(PARALLEL / "en.txt"), "--json", str(json_path),
                  "--no-progress")
    assert done.returncode == 0, done.stderr
    assert sorted(json.loads(json_path.read_text(encoding="utf-8"))) == ["corpora", "never_used_in_any_corpus",
                                                                         "results"]
    assert "Per language" not in done.stdout


@pytest.mark.parametrize("arguments, message", [
    (["--corpus", "en={en}", "en={ja}"], "--corpus en={ja}: the name en is given twice"),
    (["--corpus", "en={en}", "de={tmp}/de.txt"], "{tmp}/de.txt: no such eval corpus"),
    (["--corpus", "en={en}", "ja={ja}", "--parity-reference", "de"],
     "--parity-reference de: no --corpus is named de (the names: en, ja)"),
    (["--corpus", "{en}", "--parity-reference", "en"],
     "--parity-reference en: no --corpus is named en (name them: --corpus NAME=PATH)"),
])
def test_bad_input_is_one_line_before_any_work(small_dir: Path, tmp_path: Path, arguments: list[str],
                                               message: str) -> None:
    names = {"en": PARALLEL / "en.txt", "ja": PARALLEL / "ja.txt", "tmp": tmp_path}
    json_path = tmp_path / "eval.json"
    done = hf_bpe("eval", str(small_dir), *(argument.format(**names) for argument in arguments), "--json",
                  str(json_path))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"hf-bpe eval: error: {message.format(**names)}\n"
    assert not json_path.exists()


def test_the_card_command(small_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    directory = tmp_path / "tok"
    directory.mkdir()
    for path in small_dir.iterdir():
        (directory / path.name).write_bytes(path.read_bytes())
    done = hf_bpe("card", str(directory), *(f"--eval-corpus={argument}" for argument in named("en", "zh")),
                  "--baseline", "none", "--no-progress")
    assert done.returncode == 0, done.stderr
    card = (directory / "README.md").read_text(encoding="utf-8")
    assert "## Languages\n\nPer language, on parallel text (premium: the language's tokens over those of `en`" in card
    assert "| `zh` | this tokenizer |" in card and "(languages.png)" in card
    assert (directory / "languages.png").is_file()
    done = hf_bpe("card", str(directory), "--eval-corpus", named("en")[0], "--parity-reference", "zh")
    assert (done.returncode, done.stderr) == (2, "hf-bpe card: error: --parity-reference zh: no --eval-corpus is "
                                                 "named zh (the names: en)\n")
