"""`hf-bpe train NAME=PATH ...`: named sources, weights and parity-aware training, run as a user runs them (real
subprocesses); every bad input a one-line error and exit code 2 before any work, with nothing written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hf_bpe.formats.gpt2 import load_gpt2
from hf_bpe.train._reference import reference_counts, reference_parity_train
from hf_bpe.train.api import train_bpe
from tests import FIXTURES

EOT = "<|endoftext|>"
PARALLEL = FIXTURES / "parallel"
NAMES = ["en", "hi", "el"]


def hf_bpe_train(*arguments: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hf_bpe.cli", "train", *map(str, arguments), "--no-progress"],
                          capture_output=True, text=True, timeout=300, cwd=cwd)


def trained(out: Path) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    return load_gpt2(out / "vocab.json", out / "merges.txt")


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """en/hi/el training text (the first six lines of each parallel fixture), dev sets (the last four), an empty
    file and one of special tokens only, in `tmp_path`."""
    for name in NAMES:
        lines = (PARALLEL / f"{name}.txt").read_text(encoding="utf-8").splitlines(keepends=True)
        (tmp_path / f"{name}.txt").write_text("".join(lines[:6]), encoding="utf-8")
        (tmp_path / f"{name}.dev").write_text("".join(lines[6:]), encoding="utf-8")
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "eot.txt").write_text(EOT * 2)
    return tmp_path


def test_named_sources_without_weights_train_as_the_files_together(corpus: Path) -> None:
    result = hf_bpe_train(*(f"{name}={name}.txt" for name in NAMES), "--vocab-size", "450", "--out", "tok",
                          cwd=corpus)
    assert result.returncode == 0, result.stderr
    assert trained(corpus / "tok") == train_bpe([corpus / f"{name}.txt" for name in NAMES], 450, [EOT])
    info = json.loads((corpus / "tok" / "hf_bpe_training.json").read_text())
    assert list(info["sources"]) == NAMES and info["parity"] is None
    assert info["sources"]["hi"]["bytes"] == (corpus / "hi.txt").stat().st_size
    assert {entry["integer_weight"] for entry in info["weights"]["sources"].values()} == {1}
    card = (corpus / "tok" / "README.md").read_text()
    assert "| Sources | `en` (" in card and "| Source weights | none:" in card


def test_weights_and_globs(corpus: Path) -> None:
    (corpus / "more").mkdir()
    for part in ("a", "b"):
        (corpus / "more" / f"el.{part}").write_text((corpus / "el.txt").read_text(encoding="utf-8"), encoding="utf-8")
    result = hf_bpe_train("en=en.txt", "hi=hi.txt", "el=more/el.*", "--weight", "hi=2.5", "--weight", "el=0.5",
                          "--vocab-size", "450", "--out", "tok", cwd=corpus)
    assert result.returncode == 0, result.stderr
    sources = {"en": corpus / "en.txt", "hi": corpus / "hi.txt", "el": sorted((corpus / "more").iterdir())}
    assert trained(corpus / "tok") == train_bpe(sources, 450, [EOT], weights={"hi": 2.5, "el": 0.5})
    info = json.loads((corpus / "tok" / "hf_bpe_training.json").read_text())
    assert {name: entry["integer_weight"] for name, entry in info["weights"]["sources"].items()} == {
        "en": 2, "hi": 5, "el": 1}
    assert [file["path"] for file in info["sources"]["el"]["files"]] == ["more/el.a", "more/el.b"]
    assert "`hi` 2.5 (counts times 5)" in (corpus / "tok" / "README.md").read_text()


def test_sampling_temperature_is_recorded(corpus: Path) -> None:
    result = hf_bpe_train(*(f"{name}={name}.txt" for name in NAMES), "--sampling-temperature", "3.3",
                          "--vocab-size", "400", "--out", "tok", cwd=corpus)
    assert result.returncode == 0, result.stderr
    weights = json.loads((corpus / "tok" / "hf_bpe_training.json").read_text())["weights"]
    assert weights["sampling_temperature"] == 3.3 and weights["resolution"] == 100
    sizes = {name: (corpus / f"{name}.txt").stat().st_size for name in NAMES}
    assert train_bpe({name: corpus / f"{name}.txt" for name in NAMES}, 400, [EOT], sampling_temperature=3.3) == \
        trained(corpus / "tok")
    smallest = min(sizes, key=sizes.__getitem__)  # temperature > 1 weighs the smallest source most
    assert max(weights["sources"], key=lambda name: weights["sources"][name]["integer_weight"]) == smallest


@pytest.mark.parametrize("options", [
    ["--dev", "en=en.dev", "--dev", "hi=hi.dev", "--dev", "el=el.dev"],
    ["--ratio", "en=1", "--ratio", "hi=1.5", "--ratio", "el=1.2", "--parity-variant", "window", "--window-size", "4",
     "--alpha", "1.5", "--global-merges", "6", "--weight", "hi=2"],
])
def test_parity_trains_as_the_reference(corpus: Path, options: list[str]) -> None:
    result = hf_bpe_train(*(f"{name}={name}.txt" for name in NAMES), "--parity", *options, "--vocab-size", "420",
                          "--out", "tok", cwd=corpus)
    assert result.returncode == 0, result.stderr
    counts = {name: reference_counts([(corpus / f"{name}.txt").read_text(encoding="utf-8")], [EOT]) for name in NAMES}
    if "--dev" in options:
        dev = {name: reference_counts([(corpus / f"{name}.dev").read_text(encoding="utf-8")], [EOT]) for name in NAMES}
        expected = reference_parity_train(counts, 420, [EOT], dev=dev)
    else:
        expected = reference_parity_train(counts, 420, [EOT], ratios={"en": 1, "hi": 1.5, "el": 1.2}, variant="window",
                                          window_size=4, alpha=1.5, global_merges=6, weights={"hi": 2})
    assert trained(corpus / "tok") == expected
    info = json.loads((corpus / "tok" / "hf_bpe_training.json").read_text())
    assert info["parity"]["chooses_by"] == ("dev sets" if "--dev" in options else "ratios")
    assert "| Parity-aware training |" in (corpus / "tok" / "README.md").read_text()


BAD_INPUTS = [
    (["en=en.txt", "en=hi.txt"], "INPUT en=hi.txt: the name en is given twice"),
    (["en=en.txt", "hi.txt"], "INPUT hi.txt has no NAME= while en=en.txt has"),
    (["en=en.txt", "hi=hi.txt", "--weight", "xx=1"], "--weight xx=1: no source is named xx"),
    (["en=en.txt", "hi=hi.txt", "--weight", "en=1", "--weight", "en=2"], "--weight en=2: the name en is given twice"),
    (["en=en.txt", "hi=hi.txt", "--weight", "en=abc"], "--weight en=abc: the weight must be a non-negative number"),
    (["en=en.txt", "hi=hi.txt", "--weight", "en=-1"], "--weight en=-1: the weight must be a non-negative number"),
    (["en=en.txt", "hi=hi.txt", "--weight", "en=nan"], "--weight en=nan: the weight must be a non-negative number"),
    (["en=en.txt", "hi=hi.txt", "--weight", "en=0", "--weight", "hi=0"], "every --weight is 0"),
    (["en=en.txt", "hi=hi.txt", "--weight", "en=2", "--sampling-temperature", "2"], "not both"),
    (["en=en.txt", "hi=hi.txt", "--sampling-temperature", "0"], "--sampling-temperature must be a positive number"),
    (["en.txt", "--weight", "en=2"], "--weight needs named sources"),
    (["en.txt", "--parity"], "--parity needs named sources"),
    (["en=en.txt", "hi=hi.txt", "--dev", "en=en.dev", "--dev", "hi=hi.dev"], "--dev needs --parity"),
    (["en=en.txt", "hi=hi.txt", "--ratio", "en=1"], "--ratio needs --parity"),
    (["en=en.txt", "hi=hi.txt", "--global-merges", "3"], "--global-merges needs --parity"),
    (["en=en.txt", "hi=hi.txt", "--parity", "--dev", "en=en.dev"], "--dev: none for source hi"),
    (["en=en.txt", "hi=hi.txt", "--parity", "--dev", "xx=en.dev"], "--dev xx=en.dev: no source is named xx"),
    (["en=en.txt", "hi=hi.txt", "--parity", "--dev", "en=en.dev", "--dev", "hi=hi.dev", "--ratio", "en=1",
      "--ratio", "hi=1"], "give --dev or --ratio, not both"),
    (["en=en.txt", "hi=hi.txt", "--parity", "--ratio", "en=1", "--ratio", "hi=0"],
     "--ratio hi=0: the ratio must be a positive number"),
    (["en=en.txt", "hi=hi.txt", "--parity", "--window-size", "5"], "--window-size needs --parity-variant window"),
    (["en=en.txt", "hi=empty.txt"], "source hi has no text: empty.txt is empty"),
    (["en=en.txt", "hi=eot.txt"], "source hi has no text: nothing but special tokens"),
    (["en=en.txt", "hi=hi.txt", "--parity", "--dev", "en=en.dev", "--dev", "hi=empty.txt"],
     "dev set hi has no text"),
    (["en=en.txt", "hi=missing*.txt"], "INPUT hi=missing*.txt: no file matches missing*.txt"),
    (["en=en.txt", "hi=hi.txt", "--superword-from", "300"], "--superword-from trains on one pooled corpus"),
]


@pytest.mark.parametrize(("arguments", "message"), BAD_INPUTS)
def test_bad_input_is_one_line_and_exit_2(corpus: Path, arguments: list[str], message: str) -> None:
    result = hf_bpe_train(*arguments, "--vocab-size", "400", "--out", "tok", cwd=corpus)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith("hf-bpe train: ") and message in result.stderr, result.stderr
    assert not (corpus / "tok").exists() and not [path for path in corpus.iterdir() if path.name.startswith(".")]


def test_replaced_bytes_of_a_dev_set_are_recorded(corpus: Path) -> None:
    """The dev sets are counted in the sources' pass: with --errors replace, their invalid UTF-8 is counted and
    named in the record like the training text's."""
    (corpus / "hi.dev").write_bytes((corpus / "hi.dev").read_bytes() + b"\xff\xfe")
    result = hf_bpe_train(*(f"{name}={name}.txt" for name in NAMES), "--parity",
                          *(f"--dev={name}={name}.dev" for name in NAMES), "--errors", "replace",
                          "--vocab-size", "400", "--out", "tok", cwd=corpus)
    assert result.returncode == 0, result.stderr
    info = json.loads((corpus / "tok" / "hf_bpe_training.json").read_text())
    assert info["replaced_bytes"] == 2
    assert info["first_replacement"]["path"].endswith("hi.dev")
