"""`hf-bpe train`: end to end, --help, and every bad input giving exit code 2 with nothing written."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hf_bpe.cli import main, shipped_corpus
from hf_bpe.gpt2_format import load_gpt2
from hf_bpe.train import train_bpe

FIXTURES = Path(__file__).parent / "fixtures"


def leftovers(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir() if path.name.startswith("."))


def test_train_writes_a_complete_directory(tmp_path: Path) -> None:
    out = tmp_path / "tok"
    assert main(["train", str(FIXTURES / "corpus.en"), "--vocab-size", "500", "--out", str(out), "--no-progress"]) == 0
    names = {path.name for path in out.iterdir()}
    assert {"vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
            "README.md", "hf_bpe_training.json"} <= names
    vocab, merges = load_gpt2(out / "vocab.json", out / "merges.txt")
    assert (vocab, merges) == train_bpe(FIXTURES / "corpus.en", 500, ["<|endoftext|>"])
    info = json.loads((out / "hf_bpe_training.json").read_text())
    assert info["vocab_size"] == 500 and info["special_tokens"] == ["<|endoftext|>"]
    assert leftovers(tmp_path) == []


def test_console_script_trains_on_the_shipped_corpus_without_arguments(tmp_path: Path) -> None:
    assert shipped_corpus().stat().st_size > 100_000
    result = subprocess.run([sys.executable, "-m", "hf_bpe.cli", "train", "--out", str(tmp_path / "tok"),
                             "--vocab-size", "600"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "wrote" in result.stderr
    vocab, merges = load_gpt2(tmp_path / "tok" / "vocab.json", tmp_path / "tok" / "merges.txt")
    assert len(vocab) == 600 and len(merges) == 600 - 256 - 1


def test_help_explains_every_option() -> None:
    result = subprocess.run([sys.executable, "-m", "hf_bpe.cli", "train", "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    for option in ["--out", "--vocab-size", "--special-token", "--workers", "--errors", "--force", "INPUT"]:
        assert option in result.stdout


def run_failing(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    return capsys.readouterr().err


def test_missing_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = run_failing(["train", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "o")], capsys)
    assert "missing.txt" in err and "no such file" in err.lower()
    assert not (tmp_path / "o").exists() and leftovers(tmp_path) == []


def test_empty_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty.txt").write_text("")
    err = run_failing(["train", str(tmp_path / "empty.txt"), "--out", str(tmp_path / "o")], capsys)
    assert "empty.txt" in err and "empty" in err
    assert not (tmp_path / "o").exists()


def test_directory_as_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "d").mkdir()
    err = run_failing(["train", str(tmp_path / "d"), "--out", str(tmp_path / "o")], capsys)
    assert "directory" in err
    assert not (tmp_path / "o").exists()


def test_invalid_utf8_names_the_offset_and_replace_accepts_it(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"hello world " * 10 + b"\xff" + b" more text here" * 10)
    err = run_failing(["train", str(bad), "--vocab-size", "260", "--out", str(tmp_path / "o")], capsys)
    assert "bad.txt" in err and "120" in err and "replace" in err
    assert not (tmp_path / "o").exists() and leftovers(tmp_path) == []
    assert main(["train", str(bad), "--vocab-size", "260", "--out", str(tmp_path / "o"), "--errors", "replace",
                 "--no-progress"]) == 0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--vocab-size", "256"], "vocab"),
        (["--special-token", ""], "empty"),
        (["--special-token", "<a>", "--special-token", "<a>"], "duplicate"),
        (["--workers", "0"], "--workers"),
    ],
)
def test_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str) -> None:
    err = run_failing(["train", str(FIXTURES / "address.txt"), "--out", str(tmp_path / "o"), *extra], capsys)
    assert message in err
    assert not (tmp_path / "o").exists() and leftovers(tmp_path) == []


def test_existing_output_needs_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"
    out.mkdir()
    (out / "keep.txt").write_text("precious")
    argv = ["train", str(FIXTURES / "address.txt"), "--vocab-size", "300", "--out", str(out), "--no-progress"]
    err = run_failing(argv, capsys)
    assert "not empty" in err and "--force" in err
    assert (out / "keep.txt").read_text() == "precious"
    assert main([*argv, "--force"]) == 0
    assert not (out / "keep.txt").exists() and (out / "vocab.json").exists()
    assert leftovers(tmp_path) == []
