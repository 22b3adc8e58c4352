"""Plots (hf_bpe.evaluation.plots) and how the card shows them: valid PNGs of a plausible size, embedded as the Hub
shows images; without matplotlib the card keeps its tables and says how to get the plots."""

from __future__ import annotations

import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hf_bpe.cli.main import main
from hf_bpe.evaluation.baselines import resolve_baseline, resolve_directory
from hf_bpe.evaluation.card import PLOT_FILES, write_model_card
from hf_bpe.evaluation.evaluate import evaluate
from hf_bpe.evaluation.plots import PLOTS_HINT, plot_bytes_per_token, plot_coverage, plot_token_lengths
from tests import FIXTURES, REPO

pytest.importorskip("matplotlib")  # the `plots` extra; the test extra installs it, so CI runs these
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from the IHDR chunk, after checking the signature and the chunk's CRC."""
    import zlib

    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13
    body = data[16:16 + length]
    assert struct.unpack(">I", data[16 + length:20 + length])[0] == zlib.crc32(kind + body)
    assert data.endswith(b"IEND\xaeB`\x82")
    return struct.unpack(">II", body[:8])


def check_png(path: Path) -> None:
    from PIL import Image

    width, height = png_size(path)
    assert 300 <= width <= 3000 and 200 <= height <= 2000, (width, height)
    with Image.open(path) as image:
        image.load()  # decodes every pixel: a truncated or corrupt file fails here
        assert image.size == (width, height)
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 10  # something is drawn, not a blank canvas


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("plots") / "tok"
    assert main(["train", str(FIXTURES / "tinystories_sample.txt"), str(FIXTURES / "corpus.en"), "--vocab-size",
                 "600", "--out", str(out), "--no-progress"]) == 0
    return out


def test_each_plot_is_a_valid_png(trained: Path, tmp_path: Path) -> None:
    results = evaluate([resolve_directory(str(trained)), resolve_baseline("gpt2")],
                       [FIXTURES / "german.txt", FIXTURES / "corpus.en"], num_workers=1)
    tokenizer = results[0].tokenizer.tokenizer
    paths = [plot_bytes_per_token(results, tmp_path / "bpt.png"),
             plot_token_lengths(tokenizer.vocab, [tokenizer.token_to_id("<|endoftext|>")], tmp_path / "len.png"),
             plot_coverage({"a": results[0].token_counts, "b": np.zeros(3, dtype=np.uint64)}, tmp_path / "cov.png")]
    for path in paths:
        check_png(path)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["bpt.png", "cov.png", "len.png"]  # no temporaries


def test_the_card_embeds_its_plots(trained: Path) -> None:
    train_card = (trained / "README.md").read_text(encoding="utf-8")
    assert "No plots yet: `hf-bpe card DIR --eval-corpus FILE` draws" in train_card  # hf-bpe train draws none
    assert not list(trained.glob("*.png"))
    assert main(["card", str(trained), "--eval-corpus", str(FIXTURES / "german.txt"), "--no-progress"]) == 0
    card = (trained / "README.md").read_text(encoding="utf-8")
    images = re.findall(r"^!\[[^\]]+\]\(([^)]+)\)$", card, re.MULTILINE)
    assert images == [PLOT_FILES["compression"], PLOT_FILES["lengths"], PLOT_FILES["coverage"]]
    for name in images:
        check_png(trained / name)
    # A bytes-per-token column for the default baseline, gpt2.
    assert "| Corpus | Bytes | Tokens | Bytes per token | gpt2 bytes per token | Tokens per word | Vocabulary used |" \
        in card
    assert main(["card", str(trained), "--eval-corpus", str(FIXTURES / "german.txt"), "--baseline", "none",
                 "--no-plots", "--no-progress"]) == 0
    card = (trained / "README.md").read_text(encoding="utf-8")
    assert "gpt2 bytes per token" not in card and "![" not in card


def test_without_matplotlib_the_card_says_how_to_get_plots(trained: Path, tmp_path: Path) -> None:
    # A real interpreter in which `import matplotlib` fails, as it does when the extra is not installed.
    code = ("import sys; sys.modules['matplotlib'] = None\n"
            "from hf_bpe.cli.main import main\n"
            f"sys.exit(main(['card', {str(trained)!r}, '--eval-corpus', {str(FIXTURES / 'german.txt')!r}, "
            "'--no-progress']))")
    for png in trained.glob("*.png"):
        png.unlink()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    card = (trained / "README.md").read_text(encoding="utf-8")
    assert f"Plots need matplotlib, which was not installed when this card was written: `{PLOTS_HINT}`" in card
    assert "| `german.txt` |" in card and "## Under-trained tokens" in card
    assert not list(trained.glob("*.png"))
    code = code.replace("'card', ", "'eval', ").replace("'--eval-corpus'", "'--corpus'").replace(
        "'--no-progress'", f"'--plot', {str(tmp_path / 'x.png')!r}")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert (done.returncode, done.stderr.strip(), done.stdout) == (
        2, f"hf-bpe eval: error: --plot needs matplotlib, which is not installed: {PLOTS_HINT}", "")


def test_write_model_card_draws_only_what_it_shows(trained: Path) -> None:
    for png in trained.glob("*.png"):
        png.unlink()
    card = write_model_card(trained).read_text(encoding="utf-8")  # no eval corpus: no bytes-per-token plot
    assert sorted(path.name for path in trained.glob("*.png")) == sorted([PLOT_FILES["lengths"],
                                                                          PLOT_FILES["coverage"]])
    assert f"]({PLOT_FILES['compression']})" not in card
