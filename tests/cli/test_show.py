"""`hf-bpe show`: coloured tokens on a terminal (a real pseudo-terminal), plain tokens through a pipe, the HTML page,
and bad input, each in a real process."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hf_bpe.evaluation.baselines import gpt2_tokenizer
from hf_bpe.evaluation.viewer import describe_counts, render_ansi, render_html, render_plain, token_spans
from tests import FIXTURES, REPO

TEXT = "Hello, wörld! 東京\n\tnext line"
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
ENV.pop("NO_COLOR", None)


def hf_bpe(*arguments: str, stdin: str | None = None, env: dict[str, str] | None = None
           ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hf_bpe.cli", *arguments], input=stdin, capture_output=True,
                          text=True, timeout=300, env=env or ENV)


def on_a_terminal(*arguments: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run hf-bpe with its stdin and stdout on a pseudo-terminal: (exit code, what it wrote there)."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "hf_bpe.cli", *arguments], stdin=terminal, stdout=terminal,
                               stderr=subprocess.DEVNULL, env={**(env or ENV), "TERM": "xterm-256color"})
    os.close(terminal)
    chunks = []
    while True:
        try:
            data = os.read(controller, 1 << 16)
        except OSError:  # EIO: the process closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(controller)
    return process.wait(timeout=300), b"".join(chunks).decode().replace("\r\n", "\n")


def test_a_pipe_gets_plain_tokens_and_the_counts_go_to_stderr() -> None:
    spans = token_spans(gpt2_tokenizer(), TEXT)
    done = hf_bpe("show", "gpt2", TEXT)
    assert done.returncode == 0, done.stderr
    assert done.stdout == render_plain(spans) + "\n"
    assert done.stderr == f"gpt2 (encoded by hf_bpe): {describe_counts(spans, TEXT)}\n"
    done = hf_bpe("show", "gpt2", "--ids", stdin=TEXT)
    assert done.stdout == render_plain(spans, show_ids=True) + "\n"
    assert "\x1b[" not in done.stdout


def test_a_terminal_gets_coloured_tokens() -> None:
    spans = token_spans(gpt2_tokenizer(), "Hello wörld 東京")
    code, shown = on_a_terminal("show", "gpt2", "Hello", "wörld", "東京")  # words joined by single spaces
    assert code == 0
    assert shown == render_ansi(spans) + "\n"
    code, shown = on_a_terminal("show", "gpt2", "Hello", env={**ENV, "NO_COLOR": "1"})
    assert (code, shown) == (0, "Hello\n")
    done = hf_bpe("show", "gpt2", "--color", "always", "Hello")
    assert done.stdout == render_ansi(token_spans(gpt2_tokenizer(), "Hello")) + "\n"


def test_a_trained_directory_and_a_file(tmp_path: Path) -> None:
    out = tmp_path / "tok"
    assert hf_bpe("train", str(FIXTURES / "corpus.en"), "--vocab-size", "400", "--out", str(out),
                  "--no-progress").returncode == 0
    text = (FIXTURES / "german.txt").read_text(encoding="utf-8")
    done = hf_bpe("show", str(out), "--file", str(FIXTURES / "german.txt"), "--ids")
    assert done.returncode == 0, done.stderr
    ids = [int(number) for number in re.findall(r"\[(\d+)\](?=\||\n|$)", done.stdout)]
    from hf_bpe.evaluation.baselines import load_directory_tokenizer

    assert ids == load_directory_tokenizer(out).encode(text)


def test_html_page(tmp_path: Path) -> None:
    page = tmp_path / "tokens.html"
    done = hf_bpe("show", "gpt2", "--html", str(page), TEXT)
    assert done.returncode == 0, done.stderr
    spans = token_spans(gpt2_tokenizer(), TEXT)
    assert page.read_text(encoding="utf-8") == render_html(spans, TEXT, "text in tokens of gpt2")
    assert done.stdout == "" and done.stderr == f"wrote {page}: {describe_counts(spans, TEXT)} (encoded by hf_bpe)\n"
    done = hf_bpe("show", "gpt2", "--html", str(page), "other")
    assert done.returncode == 2
    assert done.stderr == f"hf-bpe show: error: --html {page}: exists; pass --force to replace it\n"
    assert hf_bpe("show", "gpt2", "--html", str(page), "--force", "other").returncode == 0
    assert "other" in page.read_text(encoding="utf-8")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["tokens.html"]


@pytest.mark.parametrize("arguments, message", [
    (["gpt2", "text", "--file", "{german}"], "give TEXT or --file, not both"),
    (["gpt2", "--file", "{tmp}/missing.txt"], "{tmp}/missing.txt: no such file"),
    (["{tmp}/nothing", "hi"], "{tmp}/nothing: not a tokenizer directory, nor a baseline"),
    (["gpt2", "--file", "{latin1}"], "{latin1}: invalid UTF-8 at byte offset 3"),
])
def test_bad_input_is_one_line(tmp_path: Path, arguments: list[str], message: str) -> None:
    (tmp_path / "latin1.txt").write_bytes(b"caf\xe9")
    names = {"tmp": str(tmp_path), "german": str(FIXTURES / "german.txt"), "latin1": str(tmp_path / "latin1.txt")}
    done = hf_bpe("show", *(argument.format(**names) for argument in arguments))
    assert (done.returncode, done.stdout) == (2, "")
    assert len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith(f"hf-bpe show: error: {message.format(**names)}")


def test_no_text_on_a_terminal_is_an_error() -> None:
    code, shown = on_a_terminal("show", "gpt2")
    assert code == 2 and shown == ""


def test_another_models_directory_is_shown_as_tokenizers_encodes_it(tmp_path: Path) -> None:
    import tokenizers

    from hf_bpe.evaluation.hf_tokenizers import load_tokenizer_json
    from tests.evaluation.test_hf_tokenizers import build

    other = build(tmp_path / "qwen_like", "qwen_like")
    done = hf_bpe("show", str(other), "--ids", TEXT)
    assert done.returncode == 0, done.stderr
    ids = tokenizers.Tokenizer.from_file(str(other / "tokenizer.json")).encode(TEXT, add_special_tokens=False).ids
    assert [int(found) for found in re.findall(r"\[(\d+)\](?:\||\n|$)", done.stdout)] == ids
    spans = token_spans(load_tokenizer_json(other), TEXT)
    assert done.stdout == render_plain(spans, show_ids=True) + "\n"
    assert done.stderr == f"{other} (encoded by tokenizers): {describe_counts(spans, TEXT)}\n"
