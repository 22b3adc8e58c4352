"""`hf-bpe train`: end to end, --help, and every bad input giving exit code 2 with nothing written."""

import argparse
import errno
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from hf_bpe.cli.main import build_parser, main, run_reporting_errors
from hf_bpe.cli.train import shipped_corpus
from hf_bpe.formats.gpt2 import load_gpt2
from hf_bpe.train.api import train_bpe, train_bpe_from_iterator
from tests import FIXTURES


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


def test_train_imports_only_what_it_needs(tmp_path: Path) -> None:
    # Start-up counts in every run: training on files without a terminal loads no progress bars, no datasets, no
    # transformers, plots or Ray, and builds the options of no other command.
    heavy = ["tqdm", "datasets", "transformers", "matplotlib", "ray", "pyarrow", "regex", "huggingface_hub", "yaml",
             "hf_bpe.evaluation.evaluate", "hf_bpe.cli.tokenize_dataset", "hf_bpe.cli.eval"]
    arguments = ["train", str(FIXTURES / "german.txt"), "--vocab-size", "300", "--out", str(tmp_path / "tok")]
    script = "\n".join(["import sys", "from hf_bpe.cli.main import main", f"assert main({arguments!r}) == 0",
                        f"print([name for name in {heavy!r} if name in sys.modules])"])
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_verbose_prints_the_phases(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", str(FIXTURES / "german.txt"), "--vocab-size", "400", "--out", str(tmp_path / "tok"),
                 "--verbose"]) == 0
    line, = [line for line in capsys.readouterr().err.splitlines() if line.startswith("hf-bpe train: phases ")]
    phases = json.loads(line.removeprefix("hf-bpe train: phases "))
    assert list(phases) == ["startup", "counting", "merging", "writing", "card", "total"]
    assert all(seconds >= 0 for seconds in phases.values())
    assert phases["total"] >= sum(seconds for name, seconds in phases.items() if name != "total") - 0.02


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
        (["--special-token", "a"], "special token 'a' is the single byte"),
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


# ------------------------------------------------------------------------------- outputs that cannot be written


ROOT = os.geteuid() == 0 if hasattr(os, "geteuid") else False
needs_root = pytest.mark.skipif(not ROOT or not sys.platform.startswith("linux"),
                                reason="mounting a small tmpfs needs root on Linux")


@contextmanager
def tmpfs(directory: Path, size: str, read_only: bool = False) -> Iterator[Path]:
    """A small tmpfs mounted on `directory` (made read-only after `prepare` if asked), unmounted afterwards."""
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)], check=True)
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False)


def remount_read_only(directory: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(directory)], check=True)


def train_argv(out: Path, vocab_size: int = 2000) -> list[str]:
    return ["train", str(FIXTURES / "corpus.en"), "--vocab-size", str(vocab_size), "--out", str(out), "--no-progress"]


def assert_failed_before_counting(err: str) -> None:
    """The one-line error came before any counting: training prints its summary only after counting."""
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err and "pre-tokens" not in err


def test_out_under_proc(capsys: pytest.CaptureFixture[str]) -> None:
    if not Path("/proc").is_dir():
        pytest.skip("no /proc")
    err = run_failing(train_argv(Path("/proc/hf_bpe_test_x")), capsys)
    assert "/proc/hf_bpe_test_x: cannot create the directory" in err
    assert_failed_before_counting(err)
    assert not Path("/proc/hf_bpe_test_x").exists()


def test_out_under_a_regular_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "afile").write_text("not a directory")
    err = run_failing(train_argv(tmp_path / "afile" / "sub"), capsys)
    assert f"{tmp_path / 'afile' / 'sub'}: cannot create the directory: {tmp_path / 'afile'} exists and is not a " \
           "directory" in err
    assert_failed_before_counting(err)
    assert (tmp_path / "afile").read_text() == "not a directory"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["afile"]


def test_missing_parents_are_created_and_removed_again_on_failure(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "a" / "b" / "tok"
    err = run_failing(["train", str(tmp_path / "missing.txt"), "--out", str(out)], capsys)
    assert "missing.txt: no such file" in err
    assert list(tmp_path.iterdir()) == []
    assert main(train_argv(out, 300)) == 0
    assert (out / "vocab.json").is_file() and leftovers(out.parent) == []


@needs_root
def test_out_on_a_read_only_mount(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with tmpfs(tmp_path / "mnt", "1m") as mount:
        (mount / "existing").mkdir()
        remount_read_only(mount)
        for out in (mount / "tok", mount / "existing" / "tok", mount / "new" / "tok"):
            err = run_failing(train_argv(out), capsys)
            assert f"{out}: cannot create the directory: " in err and "Read-only file system" in err, err
            assert_failed_before_counting(err)
        assert sorted(path.name for path in mount.iterdir()) == ["existing"]


@needs_root
def test_out_on_a_full_disk(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with tmpfs(tmp_path / "mnt", "100k") as mount:
        # Too little room for even the smallest directory of this vocab size: refused before counting.
        err = run_failing(train_argv(mount / "tok", vocab_size=20_000), capsys)
        assert f"{mount / 'tok'}: only " in err and "bytes free there, and the output needs about 656,384" in err
        assert_failed_before_counting(err)
        assert list(mount.iterdir()) == []
        # Room for the check but not for the files (about 170 KB): the write fails, one line, nothing left.
        err = run_failing(train_argv(mount / "tok", vocab_size=2000), capsys)
        assert err.strip().splitlines()[-1] == (f"hf-bpe train: error: {mount / 'tok'}: cannot write the tokenizer: "
                                                "No space left on device (nothing was written)")
        assert "Traceback" not in err
        assert list(mount.iterdir()) == []


def test_os_errors_are_one_line_with_exit_code_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def fails(args: argparse.Namespace) -> int:
        raise OSError(errno.EIO, os.strerror(errno.EIO), str(tmp_path / "x.bin"))

    assert run_reporting_errors("hf-bpe test", fails, argparse.Namespace()) == 2
    assert capsys.readouterr().err == f"hf-bpe test: error: {tmp_path / 'x.bin'}: {os.strerror(errno.EIO)}\n"


def test_an_error_raised_while_interrupted_counts_as_the_interrupt(capsys: pytest.CaptureFixture[str]) -> None:
    def fails(args: argparse.Namespace) -> int:
        try:
            raise KeyboardInterrupt
        finally:
            raise TimeoutError("a pool shutting down")  # what multiprocess raises after Ctrl-C

    assert run_reporting_errors("hf-bpe test", fails, argparse.Namespace()) == 130
    assert capsys.readouterr().err == "hf-bpe test: interrupted; nothing was written\n"


def test_a_sigterm_swallowed_where_python_cannot_raise_is_raised_again(capsys: pytest.CaptureFixture[str]) -> None:
    """SIGTERM while a `__del__` (or an at-fork hook) runs: Python prints "Exception ignored" and drops the
    exception there; the run must still stop, with its one line and exit code 143 (issue 20)."""
    import signal
    import time

    class SignalledWhileDeleted:
        def __del__(self) -> None:
            os.kill(os.getpid(), signal.SIGTERM)
            sum(range(1000))  # the handler runs here, inside __del__

    def runs(args: argparse.Namespace) -> int:
        SignalledWhileDeleted()
        time.sleep(30)
        return 0

    handlers = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGALRM), sys.unraisablehook
    start = time.monotonic()
    assert run_reporting_errors("hf-bpe test", runs, argparse.Namespace()) == 143
    assert time.monotonic() - start < 10
    assert capsys.readouterr().err == "hf-bpe test: terminated (SIGTERM); nothing was written\n"
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGALRM), sys.unraisablehook) == handlers


def test_a_bug_is_one_line_and_hf_bpe_debug_shows_its_traceback(capsys: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    def fails(args: argparse.Namespace) -> int:
        raise KeyError("a bug")

    monkeypatch.delenv("HF_BPE_DEBUG", raising=False)
    assert run_reporting_errors("hf-bpe test", fails, argparse.Namespace()) == 2
    assert capsys.readouterr().err == ("hf-bpe test: internal error: KeyError: 'a bug' (a bug in hf_bpe: please "
                                       "report it with the traceback HF_BPE_DEBUG=1 shows)\n")
    monkeypatch.setenv("HF_BPE_DEBUG", "1")
    with pytest.raises(KeyError):
        run_reporting_errors("hf-bpe test", fails, argparse.Namespace())


# ------------------------------------------------------------------------------------------- --errors replace


def test_errors_replace_reports_how_many_bytes_and_where(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"hello world " * 10 + b"\xff\xfe" + b" more text here" * 10 + b"\xc3")
    clean = tmp_path / "clean.txt"
    clean.write_text("nothing wrong here " * 5)
    out = tmp_path / "o"
    assert main(["train", str(clean), str(bad), "--vocab-size", "260", "--out", str(out), "--errors", "replace",
                 "--no-progress"]) == 0
    summary = capsys.readouterr().err.strip().splitlines()[-1]
    assert summary.endswith(f"; replaced 3 bytes of invalid UTF-8 with U+FFFD, the first at {bad} byte offset 120")
    info = json.loads((out / "hf_bpe_training.json").read_text())
    assert (info["errors"], info["replaced_bytes"]) == ("replace", 3)
    assert info["first_replacement"] == {"path": str(bad), "byte_offset": 120}
    assert "3 bytes replaced with U+FFFD (--errors replace), the first at `bad.txt` byte offset 120" in \
           (out / "README.md").read_text()

    assert main(["train", str(clean), "--vocab-size", "260", "--out", str(tmp_path / "o2"), "--errors", "replace",
                 "--no-progress"]) == 0
    assert capsys.readouterr().err.strip().endswith("; no invalid UTF-8 to replace")
    info = json.loads((tmp_path / "o2" / "hf_bpe_training.json").read_text())
    assert (info["replaced_bytes"], info["first_replacement"]) == (0, None)


# ------------------------------------------------------------------------------------------------- pad token


def test_pad_token_is_added_as_a_special_token_unless_it_is_one(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    out = tmp_path / "tok"
    assert main(["train", str(FIXTURES / "address.txt"), "--vocab-size", "300", "--pad-token", "<pad>",
                 "--out", str(out), "--no-progress"]) == 0
    vocab, merges = load_gpt2(out / "vocab.json", out / "merges.txt")
    assert (vocab, merges) == train_bpe(FIXTURES / "address.txt", 300, ["<|endoftext|>", "<pad>"])
    tokenizer = AutoTokenizer.from_pretrained(str(out))
    assert (tokenizer.pad_token, tokenizer.pad_token_id) == ("<pad>", 299)
    assert (tokenizer.eos_token, tokenizer.eos_token_id) == ("<|endoftext|>", 298)
    assert tokenizer(["a", "a b c"], padding=True)["input_ids"][0][-1] == 299
    assert json.loads((out / "hf_bpe_training.json").read_text())["pad_token"] == "<pad>"

    out = tmp_path / "tok2"
    assert main(["train", str(FIXTURES / "address.txt"), "--vocab-size", "300", "--pad-token", "<|endoftext|>",
                 "--out", str(out), "--no-progress"]) == 0
    tokenizer = AutoTokenizer.from_pretrained(str(out))
    assert tokenizer.pad_token_id == tokenizer.eos_token_id == 299 and len(tokenizer) == 300

    out = tmp_path / "tok3"
    assert main(["train", str(FIXTURES / "address.txt"), "--vocab-size", "300", "--out", str(out),
                 "--no-progress"]) == 0
    assert AutoTokenizer.from_pretrained(str(out)).pad_token is None


def test_pad_token_without_special_tokens_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = run_failing(["train", str(FIXTURES / "address.txt"), "--no-special-tokens", "--pad-token", "<pad>",
                       "--out", str(tmp_path / "o")], capsys)
    assert "--pad-token is a special token, so it cannot be combined with --no-special-tokens" in err
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------------------- training on datasets


DOCUMENTS = [line for line in (FIXTURES / "corpus.en").read_text(encoding="utf-8").split("\n\n") if line.strip()]


def write_jsonl(path: Path, texts: list[str], column: str = "text") -> Path:
    path.write_text("".join(json.dumps({column: text, "n": index}) + "\n" for index, text in enumerate(texts)),
                    encoding="utf-8")
    return path


@pytest.mark.parametrize("streaming", [False, True])
def test_train_on_a_dataset_equals_training_on_its_rows(tmp_path: Path, streaming: bool) -> None:
    data_file = write_jsonl(tmp_path / "docs.jsonl", DOCUMENTS, column="body")
    out = tmp_path / "tok"
    argv = ["train", "--dataset", "json", "--data-files", str(data_file), "--text-column", "body", "--vocab-size",
            "400", "--out", str(out), "--cache-dir", str(tmp_path / "cache"), "--no-progress"]
    assert main([*argv, *(["--streaming"] if streaming else [])]) == 0
    vocab, merges = load_gpt2(out / "vocab.json", out / "merges.txt")
    assert (vocab, merges) == train_bpe_from_iterator(DOCUMENTS, 400, ["<|endoftext|>"])
    info = json.loads((out / "hf_bpe_training.json").read_text())
    assert info["dataset"] == {"name": "json", "config": None, "data_files": [str(data_file)], "split": "train",
                               "text_column": "body", "num_rows": len(DOCUMENTS)}
    assert info["corpus_bytes"] == sum(len(text.encode()) for text in DOCUMENTS)
    card = (out / "README.md").read_text()
    assert (f"| Training corpus | dataset `json` (files `docs.jsonl`), split `train`, column `body`: "
            f"{len(DOCUMENTS):,} rows, one document each |") in card


def test_train_on_a_saved_dataset_split_with_card_metadata(tmp_path: Path) -> None:
    import datasets
    import yaml

    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": ["x"]}),
                          "validation": datasets.Dataset.from_dict({"text": DOCUMENTS})}).save_to_disk(
        str(tmp_path / "saved"))
    out = tmp_path / "tok"
    assert main(["train", "--dataset", str(tmp_path / "saved"), "--split", "validation", "--vocab-size", "350",
                 "--license", "apache-2.0", "--dataset-name", "user/corpus", "--out", str(out),
                 "--no-progress"]) == 0
    assert load_gpt2(out / "vocab.json", out / "merges.txt") == train_bpe_from_iterator(DOCUMENTS, 350,
                                                                                        ["<|endoftext|>"])
    card = (out / "README.md").read_text()
    header = yaml.safe_load(card.split("---\n")[1])
    assert (header["license"], header["datasets"]) == ("apache-2.0", ["user/corpus"])
    # hf-bpe card keeps what hf-bpe train recorded, and its own options win.
    assert main(["card", str(out)]) == 0
    header = yaml.safe_load((out / "README.md").read_text().split("---\n")[1])
    assert (header["license"], header["datasets"]) == ("apache-2.0", ["user/corpus"])
    assert main(["card", str(out), "--license", "mit", "--dataset-name", "a/b", "--dataset-name", "c"]) == 0
    header = yaml.safe_load((out / "README.md").read_text().split("---\n")[1])
    assert (header["license"], header["datasets"]) == ("mit", ["a/b", "c"])


def test_a_hub_dataset_name_becomes_the_card_metadata() -> None:
    from hf_bpe.cli.train import card_dataset_names
    from hf_bpe.data.sources import DatasetSource

    args = argparse.Namespace(dataset_names=None)
    assert card_dataset_names(args, DatasetSource("wikitext", config="wikitext-2-raw-v1")) == ["wikitext"]
    assert card_dataset_names(args, DatasetSource("json", data_files=["a.jsonl"])) == []
    assert card_dataset_names(args, DatasetSource(str(FIXTURES))) == []
    assert card_dataset_names(args, None) == []


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([str(FIXTURES / "address.txt"), "--dataset", "json", "--data-files", "x.jsonl"],
         "give INPUT files or --dataset, not both"),
        (["--data-files", "x.jsonl"], "--data-files needs --dataset"),
        (["--streaming"], "--streaming needs --dataset"),
        (["--dataset", "json", "--data-files", "DOCS", "--errors", "replace"], "--errors applies to INPUT files"),
        (["--dataset", "json", "--data-files", "DOCS", "--text-column", "body"],
         "no column 'body' in the dataset; its columns are: text, n"),
        (["--dataset", "json", "--data-files", "EMPTY"], "has no rows"),
        (["--dataset", "json", "--data-files", "EMPTY", "--streaming"], "has no rows"),
        (["--dataset", "json", "--data-files", "NONSTRING", "--streaming"], "row 1 of column 'text' is int 7"),
        (["--license", "Apache 2"], "--license 'Apache 2' is not a Hub license id"),
        (["--dataset-name", "not a name"], "--dataset-name 'not a name' is not a Hub dataset id"),
        (["--ray-address", "127.0.0.1:6379"], "--ray-address needs --engine ray"),
        (["--vocab-size", "100"], "vocab_size 100 is too small"),
    ],
)
def test_bad_train_options_are_refused_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       extra: list[str], message: str) -> None:
    files = {"DOCS": write_jsonl(tmp_path / "docs.jsonl", ["a", "b"]),
             "EMPTY": tmp_path / "empty.jsonl",
             "NONSTRING": tmp_path / "nonstring.jsonl"}
    files["EMPTY"].write_text("")
    files["NONSTRING"].write_text('{"text": "a"}\n{"text": 7}\n')
    extra = [str(files.get(arg, arg)) for arg in extra]
    cache = ["--cache-dir", str(tmp_path / "cache")] if "--dataset" in extra else []
    err = run_failing(["train", "--out", str(tmp_path / "o"), *cache, "--no-progress", *extra], capsys)
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o").exists() and leftovers(tmp_path) == []


def test_engine_ray_without_ray_installed(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` sees when ray is not installed
    err = run_failing(train_argv(tmp_path / "o") + ["--engine", "ray"], capsys)
    assert "--engine ray needs the ray package: pip install 'hf_bpe[ray]'" in err
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------------------------------ records and --help


def test_training_record_names_the_unicode_version(tmp_path: Path) -> None:
    from hf_bpe.pretokenize import UNICODE_VERSION

    out = tmp_path / "tok"
    assert main(train_argv(out, 300)) == 0
    info = json.loads((out / "hf_bpe_training.json").read_text())
    assert info["unicode_version"] == UNICODE_VERSION and UNICODE_VERSION.count(".") == 2
    assert info["engine"] == "local" and info["license"] is None and info["dataset_names"] == []
    assert f"| Unicode version of the pre-tokenizer | {UNICODE_VERSION} |" in (out / "README.md").read_text()


# Options whose absence (None) means something the help must state, e.g. "all CPUs" or "none".
NONE_MEANS_SOMETHING = {"workers", "num_proc", "ray_address", "cache_dir", "pad_token", "license", "dataset_names",
                        "config", "special_tokens"}


@pytest.mark.parametrize("command", ["train", "tokenize-dataset", "card"])
def test_help_states_every_default(command: str) -> None:
    parser = build_parser()
    subparsers = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    for action in subparsers.choices[command]._actions:
        if not action.option_strings or action.required or action.dest == "help":
            continue
        if action.default not in (None, False, []) or action.dest in NONE_MEANS_SOMETHING:
            assert "default" in action.help.lower(), f"{command} {action.option_strings[0]}: {action.help}"


def test_train_reads_inputs_given_as_urls(tmp_path: Path) -> None:
    """An fsspec URL (file:// here, s3:// on a cluster) trains the same tokenizer as the local path."""
    corpus = FIXTURES / "tinystories_sample.txt"
    assert main(["train", str(corpus), "--out", str(tmp_path / "local"), "--vocab-size", "400", "--no-progress"]) == 0
    assert main(["train", corpus.resolve().as_uri(), "--out", str(tmp_path / "url"), "--vocab-size", "400",
                 "--no-progress"]) == 0
    for name in ("vocab.json", "merges.txt", "tokenizer.json"):
        assert (tmp_path / "url" / name).read_bytes() == (tmp_path / "local" / name).read_bytes()
    record = json.loads((tmp_path / "url" / "hf_bpe_training.json").read_text(encoding="utf-8"))
    assert record["corpus_files"] == [{"path": corpus.resolve().as_uri(), "bytes": corpus.stat().st_size}]
