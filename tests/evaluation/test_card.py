"""Tests of hf_bpe.evaluation.card: model cards of saved tokenizer directories."""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hf_bpe.cli.card import add_card_arguments, run_card
from hf_bpe.common.errors import InputError
from hf_bpe.encode.tokenizer import Tokenizer
from hf_bpe.evaluation.card import SAMPLE_TEXT, write_model_card
from hf_bpe.formats.gpt2 import load_gpt2
from hf_bpe.formats.hf_directory import save_tokenizer_directory
from tests import FIXTURES, REPO

EOT = "<|endoftext|>"
TRAINING_INFO = {
    "corpus_files": [{"path": "/data/corpora/corpus.en", "bytes": 133027}],
    "corpus_bytes": 133027,
    "vocab_size": 500,
    "special_tokens": [EOT],
    "training_seconds": 12.345,
    "num_workers": 2,
    "hardware": "Test CPU 9000, 2 cores, 8 GiB RAM",
    "python": "3.11.7",
    "hf_bpe_version": "0.1.0",
    "date": "2025-01-31",
}


@pytest.fixture()
def tokenizer_dir(tmp_path: Path) -> Path:
    vocab, merges = load_gpt2(FIXTURES / "train-bpe-reference-vocab.json", FIXTURES / "train-bpe-reference-merges.txt")
    directory = save_tokenizer_directory(tmp_path / "tok", vocab, merges, [EOT])
    (directory / "hf_bpe_training.json").write_text(json.dumps(TRAINING_INFO), encoding="utf-8")
    return directory


@pytest.fixture()
def encoder(tokenizer_dir: Path) -> Tokenizer:
    return Tokenizer.from_files(tokenizer_dir / "vocab.json", tokenizer_dir / "merges.txt", [EOT])


def yaml_header(card: str) -> dict:
    match = re.match(r"---\n(.*?)\n---\n", card, re.DOTALL)
    assert match, card[:200]
    return yaml.safe_load(match.group(1))


def table_value(card: str, name: str) -> str:
    match = re.search(rf"^\| {re.escape(name)} \| (.*) \|$", card, re.MULTILINE)
    assert match, f"no row {name!r}"
    return match.group(1)


def test_header_and_training_numbers(tokenizer_dir):
    path = write_model_card(tokenizer_dir, language=["en", "de"])
    card = path.read_text(encoding="utf-8")
    assert path == tokenizer_dir / "README.md"
    header = yaml_header(card)
    assert header["library_name"] == "transformers"
    assert {"tokenizer", "bpe"} <= set(header["tags"])
    assert header["language"] == ["en", "de"]
    from huggingface_hub import ModelCard

    assert ModelCard.load(path).data.library_name == "transformers"

    assert table_value(card, "Vocabulary size") == "500"
    assert table_value(card, "Special tokens") == r"`<\|endoftext\|>` (id 0, end of text / eos)"
    assert table_value(card, "Training corpus") == "`corpus.en`"
    assert table_value(card, "Corpus size") == "133.0 KB (133,027 bytes)"
    assert table_value(card, "Training time") == "12.3 s with 2 worker processes"
    assert table_value(card, "Hardware") == TRAINING_INFO["hardware"]
    assert table_value(card, "Date") == "2025-01-31"
    assert "256 byte tokens, 243 merges and 1 special token" in card
    assert list(tokenizer_dir.glob(".README*")) == []


@pytest.mark.parametrize("language, license, datasets", [
    ([], None, []),
    (["en", "de", "zh-Hans"], "apache-2.0", ["wikitext", "HuggingFaceFW/fineweb-edu"]),
    (["no", "on", "yes"], "cc-by-4.0", ["123", "null", "1e5", "a.b", "True"]),
    ([], "1.0", ["y", "n", "off", "-x"]),
])
def test_header_is_what_huggingface_hub_writes(language, license, datasets):
    from huggingface_hub import ModelCardData

    from hf_bpe.evaluation.card import LIBRARY_NAME, TAGS, _yaml_header

    hub = ModelCardData(language=language or None, license=license, datasets=datasets or None,
                        library_name=LIBRARY_NAME, tags=list(TAGS)).to_yaml()
    ours = _yaml_header(language, license, datasets)
    assert yaml.safe_load(ours.strip("-\n")) == yaml.safe_load(hub)
    if not any(value in ("no", "on", "yes", "y", "n", "off", "null", "True") or value[0].isdigit() or value[0] == "-"
               for value in [*language, *datasets, license or "x"]):
        assert ours == f"---\n{hub}\n---"  # the same text where no value needs quoting


def test_training_info_argument_wins_and_missing_values_are_unknown(tokenizer_dir):
    card = write_model_card(tokenizer_dir, training_info={}).read_text(encoding="utf-8")
    for row in ("Training corpus", "Corpus size", "Training time", "Hardware", "hf_bpe version"):
        assert table_value(card, row) == "unknown"
    assert "language" not in yaml_header(card)
    (tokenizer_dir / "hf_bpe_training.json").unlink()
    card = write_model_card(tokenizer_dir).read_text(encoding="utf-8")
    assert table_value(card, "Training time") == "unknown"
    assert table_value(card, "Vocabulary size") == "500"


def test_compression_matches_an_independent_count(tokenizer_dir, tmp_path):
    from tokenizers import Tokenizer as FastTokenizer

    documents = tmp_path / "documents.txt"
    documents.write_text(f"First document, with ünïcode.{EOT}Second one\n\n  spaced   out{EOT}", encoding="utf-8")
    corpora = [FIXTURES / "corpus.en", FIXTURES / "german.txt", documents]
    card = write_model_card(tokenizer_dir, eval_corpora=corpora).read_text(encoding="utf-8")
    fast = FastTokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    for corpus in corpora:
        data = corpus.read_bytes()
        num_tokens = len(fast.encode(data.decode("utf-8")).ids)
        suffix = " (training corpus)" if corpus.name == "corpus.en" else ""
        row = f"| `{corpus.name}`{suffix} | {len(data):,} | {num_tokens:,} | {len(data) / num_tokens:.3f} |"
        assert row in card


def test_examples_are_the_encoder_output(tokenizer_dir, encoder):
    card = write_model_card(tokenizer_dir, language=["ja"]).read_text(encoding="utf-8")
    examples = card.split("## Example tokenizations", 1)[1].split("```text\n", 1)[1].split("\n```", 1)[0]
    blocks = examples.split("\n\n")
    assert len(blocks) == 3  # English, code, Japanese
    for block in blocks:
        quoted, shown, ids = block.split("\n")
        text = json.loads(quoted.rsplit("  (", 1)[0])
        assert json.loads(ids) == encoder.encode(text)
        assert quoted.endswith(f"({len(encoder.encode(text))} tokens)")
        assert shown.count("|") == len(encoder.encode(text)) - 1
        if text.isascii():  # every token is whole characters: the view reads back as the text
            assert shown.replace("|", "").replace("␣", " ").replace("↵", "\n") == text


def test_usage_snippets_run(tokenizer_dir, encoder):
    card = write_model_card(tokenizer_dir).read_text(encoding="utf-8")
    snippets = re.findall(r"```python\n(.*?)```", card, re.DOTALL)
    assert len(snippets) == 2
    expected = encoder.encode(SAMPLE_TEXT)
    env = {**os.environ, "PYTHONPATH": str(REPO), "TRANSFORMERS_VERBOSITY": "error"}
    printed = []
    for snippet in snippets:
        done = subprocess.run([sys.executable, "-c", snippet], cwd=tokenizer_dir, env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        printed.append([ast.literal_eval(line) for line in done.stdout.splitlines()])
    assert printed == [[expected], [expected, expected]]


def test_run_card(tokenizer_dir, tmp_path):
    corpus = tmp_path / "eval.txt"
    corpus.write_text("hello world " * 10, encoding="utf-8")
    parser = argparse.ArgumentParser()
    add_card_arguments(parser)
    args = parser.parse_args([str(tokenizer_dir), "--eval-corpus", str(corpus), "--language", "en",
                              "--title", "Tiny test tokenizer"])
    assert run_card(args) == 0
    card = (tokenizer_dir / "README.md").read_text(encoding="utf-8")
    assert card.split("\n---\n", 1)[1].lstrip().startswith("# Tiny test tokenizer\n")
    assert "| `eval.txt` | 120 |" in card
    assert yaml_header(card)["language"] == ["en"]


def test_bad_input_leaves_the_card_alone(tokenizer_dir, tmp_path):
    before = (tokenizer_dir / "README.md").read_text(encoding="utf-8")
    with pytest.raises(InputError, match=r"missing\.txt: no such eval corpus"):
        write_model_card(tokenizer_dir, eval_corpora=[tmp_path / "missing.txt"])
    (tmp_path / "latin1.txt").write_bytes(b"caf\xe9 ok")
    with pytest.raises(InputError, match=r"latin1\.txt: invalid UTF-8 at byte offset 3"):
        write_model_card(tokenizer_dir, eval_corpora=[tmp_path / "latin1.txt"])
    with pytest.raises(InputError, match=r"--language 'English' is not a language code"):
        write_model_card(tokenizer_dir, language=["English"])
    (tmp_path / "empty.txt").write_bytes(b"")
    with pytest.raises(InputError, match=r"empty\.txt: the eval corpus is empty, so there is no compression to "
                                         r"report"):
        write_model_card(tokenizer_dir, eval_corpora=[FIXTURES / "german.txt", tmp_path / "empty.txt"])
    with pytest.raises(InputError, match=r"--license 'GPL v3' is not a Hub license id"):
        write_model_card(tokenizer_dir, license="GPL v3")
    with pytest.raises(InputError, match=r"--dataset-name 'a/b/c' is not a Hub dataset id"):
        write_model_card(tokenizer_dir, datasets=["a/b/c"])
    (tokenizer_dir / "hf_bpe_training.json").write_text("{oops", encoding="utf-8")
    with pytest.raises(InputError, match=r"hf_bpe_training\.json: not valid JSON"):
        write_model_card(tokenizer_dir)
    with pytest.raises(InputError, match=r"nowhere: not a directory"):
        write_model_card(tmp_path / "nowhere")
    assert (tokenizer_dir / "README.md").read_text(encoding="utf-8") == before
    assert list(tokenizer_dir.glob(".README*")) == []


def test_hf_bpe_card_command(tokenizer_dir, tmp_path, capsys):
    from hf_bpe.cli.main import main

    corpus = tmp_path / "eval.txt"
    corpus.write_text("hello world " * 10, encoding="utf-8")
    assert main(["card", str(tokenizer_dir), "--eval-corpus", str(corpus), "--language", "de"]) == 0
    card = (tokenizer_dir / "README.md").read_text(encoding="utf-8")
    assert "| `eval.txt` | 120 |" in card and yaml_header(card)["language"] == ["de"]

    capsys.readouterr()
    assert main(["card", str(tokenizer_dir), "--eval-corpus", str(tmp_path / "nope.txt")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"hf-bpe card: error: {tmp_path / 'nope.txt'}: no such eval corpus"]


def test_license_and_datasets_metadata(tokenizer_dir):
    from huggingface_hub import ModelCard

    card = write_model_card(tokenizer_dir, license="cc-by-4.0", datasets=["wikitext", "user/corpus"])
    data = ModelCard.load(card).data
    assert (data.license, data.datasets) == ("cc-by-4.0", ["wikitext", "user/corpus"])
    header = yaml_header(card.read_text(encoding="utf-8"))
    assert "license" in header and header["datasets"] == ["wikitext", "user/corpus"]
    # Without them the header has neither key; the training record supplies defaults.
    header = yaml_header(write_model_card(tokenizer_dir).read_text(encoding="utf-8"))
    assert "license" not in header and "datasets" not in header
    info = {**TRAINING_INFO, "license": "mit", "dataset_names": ["wikitext"]}
    header = yaml_header(write_model_card(tokenizer_dir, training_info=info).read_text(encoding="utf-8"))
    assert (header["license"], header["datasets"]) == ("mit", ["wikitext"])
    header = yaml_header(write_model_card(tokenizer_dir, training_info=info, license="apache-2.0", datasets=[]
                                          ).read_text(encoding="utf-8"))
    assert header["license"] == "apache-2.0" and "datasets" not in header


def test_dataset_replacements_and_unicode_rows(tokenizer_dir):
    info = {**TRAINING_INFO, "corpus_files": [], "unicode_version": "15.0.0", "replaced_bytes": 1234,
            "first_replacement": {"path": "/data/bad.txt", "byte_offset": 77},
            "dataset": {"name": "wikitext", "config": "wikitext-2-raw-v1", "data_files": [], "split": "train",
                        "text_column": "text", "num_rows": 36718}}
    card = write_model_card(tokenizer_dir, training_info=info).read_text(encoding="utf-8")
    assert table_value(card, "Training corpus") == ("dataset `wikitext` (config `wikitext-2-raw-v1`), split `train`, "
                                                    "column `text`: 36,718 rows, one document each")
    assert table_value(card, "Invalid UTF-8") == ("1,234 bytes replaced with U+FFFD (--errors replace), the first at "
                                                  "`bad.txt` byte offset 77")
    assert table_value(card, "Unicode version of the pre-tokenizer") == "15.0.0"
    card = write_model_card(tokenizer_dir).read_text(encoding="utf-8")
    assert "Invalid UTF-8" not in card
    assert table_value(card, "Unicode version of the pre-tokenizer") == "unknown"
