"""Tests of hf_bpe.data.pipeline: datasets tokenized into flat token arrays (.bin + .json), read back with
load_tokens."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hf_bpe.common.errors import InputError
from hf_bpe.data import encoders as encoders_module
from hf_bpe.data import pipeline as pipeline_module
from hf_bpe.data.encoders import tokenizer_directory_hash
from hf_bpe.data.load import load_tokens
from hf_bpe.data.pipeline import tokenize_dataset
from hf_bpe.data.sources import DatasetSource
from hf_bpe.encode import tokenizer as encode_module
from hf_bpe.encode.tokenizer import Tokenizer
from hf_bpe.formats.gpt2 import load_gpt2
from hf_bpe.formats.hf_directory import save_tokenizer_directory
from tests import FIXTURES, REPO
from tests.cli.faults import finish
from tests.cli.faults import start as start_cli

EOT = "<|endoftext|>"

# Tiny, but with the cases that break naive pipelines: empty and whitespace-only documents, non-ASCII text, a
# literal special-token string inside a document (must stay text, not become an eot id), newlines.
DOCUMENTS = [
    "Hello, world!",
    "",
    "The quick brown fox\n\njumps over the lazy dog.",
    "héllo wörld 日本語のテキスト 😀",
    "   ",
    f"text with {EOT} inside it",
    "x",
    "",
    "def f(x):\n    return x + 1\n",
    "Ünïcödé and numbers 12345 and 'quotes' it's",
    "last",
]


@pytest.fixture(scope="module")
def reference() -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """A real 500-token vocab (id 0 is <|endoftext|>) and its merges."""
    return load_gpt2(FIXTURES / "train-bpe-reference-vocab.json", FIXTURES / "train-bpe-reference-merges.txt")


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory, reference) -> Path:
    vocab, merges = reference
    return save_tokenizer_directory(tmp_path_factory.mktemp("tokenizer") / "tok", vocab, merges, [EOT])


@pytest.fixture(scope="module")
def encoder(reference) -> Tokenizer:
    """An independent encoder of the documents: ordinary text, no special-token parsing."""
    return Tokenizer(*reference)


def expected_tokens(documents: list[str], encoder: Tokenizer, eot_id: int | None) -> np.ndarray:
    ids: list[int] = []
    for document in documents:
        ids.extend(encoder.encode(document))
        if eot_id is not None:
            ids.append(eot_id)
    return np.array(ids, dtype=np.int64)


def split_documents(tokens: np.ndarray, eot_id: int, encoder: Tokenizer) -> list[str]:
    assert tokens[-1] == eot_id
    pieces = np.split(np.asarray(tokens), np.flatnonzero(np.asarray(tokens) == eot_id) + 1)[:-1]
    return [encoder.decode(piece[:-1].tolist()) for piece in pieces]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def run(tokenizer_dir: Path, dataset: str, out: Path, tmp_path: Path, **options) -> dict:
    return tokenize_dataset(tokenizer_dir, dataset, out, cache_dir=str(tmp_path / "hf-cache"), progress=False,
                            **options)


def assert_clean(out: Path) -> None:
    """No output, no temporary leftovers, and not even the --out directory (the run created it)."""
    assert not out.exists()
    assert [path.name for path in out.parent.iterdir() if path.name.startswith(".")] == []


# --------------------------------------------------------------------------------------------------- round trips


def test_jsonl_with_two_processes_gives_back_the_documents(tokenizer_dir, encoder, tmp_path):
    rows = [{"id": index, "text": text} for index, text in enumerate(DOCUMENTS)]
    data_file = write_jsonl(tmp_path / "docs.jsonl", rows)
    out = tmp_path / "out"
    metadata = run(tokenizer_dir, "json", out, tmp_path, data_files=[str(data_file)], num_proc=2, batch_size=3)

    tokens = load_tokens(out, "train")
    assert isinstance(tokens, np.memmap) and tokens.dtype == np.uint16
    assert split_documents(tokens, 0, encoder) == DOCUMENTS
    np.testing.assert_array_equal(tokens, expected_tokens(DOCUMENTS, encoder, eot_id=0))
    assert metadata == json.loads((out / "train.json").read_text())
    assert metadata["num_tokens"] == len(tokens)
    assert metadata["num_documents"] == len(DOCUMENTS)
    assert (metadata["eot_id"], metadata["vocab_size"], metadata["dtype"]) == (0, 500, "uint16")
    assert (metadata["dataset"], metadata["split"], metadata["text_column"]) == ("json", "train", "text")
    assert metadata["tokenizer_sha256"] == tokenizer_directory_hash(tokenizer_dir)
    assert sorted(path.name for path in out.iterdir()) == ["train.bin", "train.json"]


@pytest.mark.parametrize("source", ["parquet", "save_to_disk_dict", "save_to_disk_dataset", "text", "data_file"])
def test_other_sources(source, tokenizer_dir, encoder, tmp_path):
    import datasets

    documents = [doc for doc in DOCUMENTS if "\n" not in doc] if source == "text" else DOCUMENTS
    table = datasets.Dataset.from_dict({"body": documents, "n": list(range(len(documents)))})
    split, column, options = "train", "body", {}
    if source == "parquet":
        table.to_parquet(str(tmp_path / "docs.parquet"))
        dataset, options = "parquet", {"data_files": [str(tmp_path / "docs.parquet")]}
    elif source == "save_to_disk_dict":
        datasets.DatasetDict({"train": table.select([0]), "validation": table}).save_to_disk(str(tmp_path / "dd"))
        dataset, split = str(tmp_path / "dd"), "validation"
    elif source == "save_to_disk_dataset":
        table.save_to_disk(str(tmp_path / "ds"))
        dataset = str(tmp_path / "ds")
    elif source == "text":
        (tmp_path / "docs.txt").write_text("\n".join(documents) + "\n", encoding="utf-8")
        dataset, column, options = "text", "text", {"data_files": [str(tmp_path / "docs.txt")]}
    else:  # a single file, its format told by the suffix
        write_jsonl(tmp_path / "docs.jsonl", [{"body": doc} for doc in documents])
        dataset = str(tmp_path / "docs.jsonl")

    out = tmp_path / "out"
    metadata = run(tokenizer_dir, dataset, out, tmp_path, split=split, text_column=column, **options)
    tokens = load_tokens(out, split)
    np.testing.assert_array_equal(tokens, expected_tokens(documents, encoder, eot_id=0))
    assert split_documents(tokens, 0, encoder) == documents
    assert metadata["num_documents"] == len(documents) and metadata["split"] == split


def test_streaming_writes_the_same_bytes(tokenizer_dir, tmp_path):
    data_file = write_jsonl(tmp_path / "docs.jsonl", [{"text": doc} for doc in DOCUMENTS * 3])
    outputs = {}
    for streaming, num_proc in [(False, 1), (True, 1), (True, 2)]:
        out = tmp_path / f"out-{streaming}-{num_proc}"
        metadata = run(tokenizer_dir, "json", out, tmp_path, data_files=[str(data_file)], streaming=streaming,
                       num_proc=num_proc, batch_size=4)
        outputs[(streaming, num_proc)] = ((out / "train.bin").read_bytes(), metadata["num_documents"])
    assert outputs[(False, 1)][1] == len(DOCUMENTS) * 3
    assert outputs[(True, 1)] == outputs[(False, 1)]
    assert outputs[(True, 2)] == outputs[(False, 1)]


def test_streaming_a_saved_dataset(tokenizer_dir, encoder, tmp_path):
    import datasets

    datasets.Dataset.from_dict({"text": DOCUMENTS}).save_to_disk(str(tmp_path / "saved"))
    run(tokenizer_dir, str(tmp_path / "saved"), tmp_path / "out", tmp_path, streaming=True, num_proc=2, batch_size=2)
    np.testing.assert_array_equal(load_tokens(tmp_path / "out", "train"), expected_tokens(DOCUMENTS, encoder, 0))


def test_a_sliced_split(tokenizer_dir, encoder, tmp_path):
    data_file = write_jsonl(tmp_path / "docs.jsonl", [{"text": doc} for doc in DOCUMENTS])
    metadata = run(tokenizer_dir, "json", tmp_path / "out", tmp_path, data_files=[str(data_file)], split="train[:3]")
    assert split_documents(load_tokens(tmp_path / "out", "train[:3]"), 0, encoder) == DOCUMENTS[:3]
    assert metadata["num_documents"] == 3


def test_no_append_eot_and_only_empty_documents(tokenizer_dir, encoder, tmp_path):
    data_file = write_jsonl(tmp_path / "docs.jsonl", [{"text": doc} for doc in DOCUMENTS])
    metadata = run(tokenizer_dir, "json", tmp_path / "out", tmp_path, data_files=[str(data_file)], append_eot=False)
    np.testing.assert_array_equal(load_tokens(tmp_path / "out", "train"), expected_tokens(DOCUMENTS, encoder, None))
    assert metadata["append_eot"] is False and metadata["num_documents"] == len(DOCUMENTS)

    empty_file = write_jsonl(tmp_path / "empty.jsonl", [{"text": ""}] * 3)
    run(tokenizer_dir, "json", tmp_path / "eot-only", tmp_path, data_files=[str(empty_file)])
    assert load_tokens(tmp_path / "eot-only", "train").tolist() == [0, 0, 0]
    metadata = run(tokenizer_dir, "json", tmp_path / "nothing", tmp_path, data_files=[str(empty_file)],
                   append_eot=False)
    tokens = load_tokens(tmp_path / "nothing", "train")
    assert metadata["num_tokens"] == 0 and len(tokens) == 0 and tokens.dtype == np.uint16


def test_uint32_when_the_vocab_does_not_fit_in_16_bits(reference, encoder, tmp_path):
    vocab, merges = reference
    vocab = {token_id: token for token_id, token in vocab.items() if token_id != 0} | {70_000: EOT.encode()}
    tokenizer_dir = save_tokenizer_directory(tmp_path / "big", vocab, merges, [EOT])
    data_file = write_jsonl(tmp_path / "docs.jsonl", [{"text": doc} for doc in DOCUMENTS])
    metadata = run(tokenizer_dir, "json", tmp_path / "out", tmp_path, data_files=[str(data_file)], num_proc=2)
    tokens = load_tokens(tmp_path / "out", "train")
    assert tokens.dtype == np.uint32 and metadata["dtype"] == "uint32"
    assert (metadata["eot_id"], metadata["vocab_size"]) == (70_000, 70_001)
    assert split_documents(tokens, 70_000, encoder) == DOCUMENTS


def test_rerun_needs_force_and_other_splits_may_join(tokenizer_dir, encoder, tmp_path):
    out = tmp_path / "out"
    first = write_jsonl(tmp_path / "first.jsonl", [{"text": doc} for doc in DOCUMENTS])
    second = write_jsonl(tmp_path / "second.jsonl", [{"text": "short"}, {"text": "and another"}])
    run(tokenizer_dir, "json", out, tmp_path, data_files=[str(first)])
    before = {path.name: path.read_bytes() for path in out.iterdir()}
    with pytest.raises(InputError, match=r"out/train\.bin: split 'train' was already written to .*out \(use --force "
                                         r"to replace it, or another --split or --out\)"):
        run(tokenizer_dir, "json", out, tmp_path, data_files=[str(second)], num_proc=2)
    assert {path.name: path.read_bytes() for path in out.iterdir()} == before

    run(tokenizer_dir, "json", out, tmp_path, data_files=[str(second)], split="validation")
    assert split_documents(load_tokens(out, "validation"), 0, encoder) == ["short", "and another"]
    assert split_documents(load_tokens(out, "train"), 0, encoder) == DOCUMENTS

    metadata = run(tokenizer_dir, "json", out, tmp_path, data_files=[str(second)], num_proc=2, force=True)
    assert split_documents(load_tokens(out, "train"), 0, encoder) == ["short", "and another"]
    assert metadata["num_documents"] == 2 and metadata["data_files"] == [str(second)]
    assert sorted(path.name for path in out.iterdir()) == ["train.bin", "train.json", "validation.bin",
                                                           "validation.json"]


def test_tokenizer_hash_covers_the_tokenizer_files(tokenizer_dir, tmp_path):
    import shutil

    copy = Path(shutil.copytree(tokenizer_dir, tmp_path / "copy"))
    (copy / "README.md").write_text("a different card")
    assert tokenizer_directory_hash(copy) == tokenizer_directory_hash(tokenizer_dir)
    merges = copy / "merges.txt"
    merges.write_text(merges.read_text() + "\n")
    assert tokenizer_directory_hash(copy) != tokenizer_directory_hash(tokenizer_dir)
    assert tokenizer_directory_hash(tokenizer_dir) != hashlib.sha256(b"").hexdigest()


# ------------------------------------------------------------------------------------------------------- failures


class FailingEncoder:
    """Encodes like hf_bpe, but raises on its `fail_on`-th batch: a crash in the middle of a run."""

    def __init__(self, tokenizer_dir: Path, fail_on: int) -> None:
        self.inner, self.fail_on, self.calls = encoders_module.HFBPEEncoder.from_directory(tokenizer_dir), fail_on, 0

    def __call__(self, texts):
        self.calls += 1
        if self.calls == self.fail_on:
            raise RuntimeError("injected failure")
        return self.inner(texts)


@pytest.mark.parametrize("streaming", [False, True])
def test_a_failure_midway_leaves_no_bin(streaming, tokenizer_dir, tmp_path):
    data_file = write_jsonl(tmp_path / "docs.jsonl", [{"text": doc} for doc in DOCUMENTS * 4])
    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match="injected failure"):
        run(tokenizer_dir, "json", out, tmp_path, data_files=[str(data_file)], batch_size=5, streaming=streaming,
            encoder=FailingEncoder(tokenizer_dir, fail_on=3))
    assert_clean(out)


def test_a_failed_rerun_keeps_the_previous_output(tokenizer_dir, encoder, tmp_path):
    data_file = write_jsonl(tmp_path / "docs.jsonl", [{"text": doc} for doc in DOCUMENTS])
    out = tmp_path / "out"
    run(tokenizer_dir, "json", out, tmp_path, data_files=[str(data_file)])
    before = (out / "train.bin").read_bytes()
    with pytest.raises(RuntimeError, match="injected failure"):
        run(tokenizer_dir, "json", out, tmp_path, data_files=[str(data_file)], batch_size=2, force=True,
            encoder=FailingEncoder(tokenizer_dir, fail_on=2))
    assert (out / "train.bin").read_bytes() == before
    assert split_documents(load_tokens(out, "train"), 0, encoder) == DOCUMENTS
    assert sorted(path.name for path in out.iterdir()) == ["train.bin", "train.json"]


@pytest.mark.parametrize("streaming", [False, True])
def test_missing_text_column_names_the_columns(streaming, tokenizer_dir, tmp_path):
    data_file = write_jsonl(tmp_path / "docs.jsonl", [{"body": "a", "id": 1}])
    with pytest.raises(InputError, match=r"no column 'text' in the dataset; its columns are: body, id"):
        run(tokenizer_dir, "json", tmp_path / "out", tmp_path, data_files=[str(data_file)], streaming=streaming)
    assert_clean(tmp_path / "out")


@pytest.mark.parametrize("streaming,num_proc", [(False, 1), (False, 2), (True, 2)])
def test_a_non_string_value_names_its_row(streaming, num_proc, tokenizer_dir, tmp_path):
    rows = [{"text": f"document {index}"} for index in range(12)]
    rows[9] = {"text": None}
    data_file = write_jsonl(tmp_path / "docs.jsonl", rows)
    with pytest.raises(InputError, match=r"row 9 of column 'text' is NoneType None, not a string"):
        run(tokenizer_dir, "json", tmp_path / "out", tmp_path, data_files=[str(data_file)], streaming=streaming,
            num_proc=num_proc, batch_size=4)
    assert_clean(tmp_path / "out")


def test_a_numeric_column_is_rejected(tokenizer_dir, tmp_path):
    data_file = write_jsonl(tmp_path / "docs.jsonl", [{"text": 3}, {"text": 4}])
    with pytest.raises(InputError, match=r"row 0 of column 'text' is int 3, not a string"):
        run(tokenizer_dir, "json", tmp_path / "out", tmp_path, data_files=[str(data_file)])


def test_bad_sources(tokenizer_dir, tmp_path):
    import datasets

    out = tmp_path / "out"
    with pytest.raises(InputError, match=r"missing\.jsonl: no such data file"):
        run(tokenizer_dir, "json", out, tmp_path, data_files=[str(tmp_path / "missing.jsonl")])
    with pytest.raises(InputError, match=r"--dataset json needs --data-files"):
        run(tokenizer_dir, "json", out, tmp_path)
    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": ["a"]})}).save_to_disk(str(tmp_path / "dd"))
    with pytest.raises(InputError, match=r"dd: no split 'test'; the saved DatasetDict has: train"):
        run(tokenizer_dir, str(tmp_path / "dd"), out, tmp_path, split="test")
    (tmp_path / "broken.jsonl").write_text('{"text": "a"}\n{"text": \n', encoding="utf-8")
    with pytest.raises(InputError, match=r"broken\.jsonl: line 2: not valid JSON \(Expecting value at column 10\)$"):
        run(tokenizer_dir, "json", out, tmp_path, data_files=[str(tmp_path / "broken.jsonl")])
    with pytest.raises(InputError, match=r"nowhere/vocab\.json: no such file"):
        run(tmp_path / "nowhere", "json", out, tmp_path, data_files=[str(tmp_path / "broken.jsonl")])
    (tmp_path / "a-file").write_text("")
    with pytest.raises(InputError, match=r"a-file: exists and is not a directory"):
        run(tokenizer_dir, "json", tmp_path / "a-file", tmp_path, data_files=[str(tmp_path / "broken.jsonl")])
    with pytest.raises(InputError, match=r"--num-proc must be at least 1, got 0"):
        run(tokenizer_dir, "json", out, tmp_path, data_files=[str(tmp_path / "broken.jsonl")], num_proc=0)
    assert_clean(out)


def test_no_eot_to_append(reference, encoder, tmp_path):
    vocab, merges = reference
    vocab = {token_id: token for token_id, token in vocab.items() if token_id != 0}
    tokenizer_dir = save_tokenizer_directory(tmp_path / "plain", vocab, merges, [])
    data_file = write_jsonl(tmp_path / "docs.jsonl", [{"text": doc} for doc in DOCUMENTS])
    with pytest.raises(InputError, match=r"plain: the tokenizer has no special tokens, so there is no end-of-text "
                                         r"id to append \(pass --no-append-eot"):
        run(tokenizer_dir, "json", tmp_path / "out", tmp_path, data_files=[str(data_file)])
    metadata = run(tokenizer_dir, "json", tmp_path / "out", tmp_path, data_files=[str(data_file)], append_eot=False)
    assert metadata["eot_id"] is None
    np.testing.assert_array_equal(load_tokens(tmp_path / "out", "train"), expected_tokens(DOCUMENTS, encoder, None))


def test_load_tokens_errors(tokenizer_dir, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(InputError, match=r"out/train\.json: no such file; without it train\.bin is incomplete"):
        load_tokens(out, "train")
    data_file = write_jsonl(tmp_path / "docs.jsonl", [{"text": doc} for doc in DOCUMENTS])
    metadata = run(tokenizer_dir, "json", out, tmp_path, data_files=[str(data_file)])
    with open(out / "train.bin", "r+b") as file:
        file.truncate(2 * metadata["num_tokens"] - 2)
    with pytest.raises(InputError, match=rf"train\.bin: {2 * metadata['num_tokens'] - 2} bytes, but train\.json "
                                         rf"says {metadata['num_tokens']} uint16 tokens"):
        load_tokens(out, "train")
    (out / "train.bin").unlink()
    with pytest.raises(InputError, match=r"train\.bin: no such file"):
        load_tokens(out, "train")
    (out / "train.json").write_text("{not json")
    with pytest.raises(InputError, match=r"train\.json: not valid JSON"):
        load_tokens(out, "train")


# ------------------------------------------------------------------------------------------------------------ CLI


def test_script(tokenizer_dir, encoder, tmp_path):
    data_file = write_jsonl(tmp_path / "docs.jsonl", [{"text": doc} for doc in DOCUMENTS])
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_DATASETS_CACHE": str(tmp_path / "hf-cache")}

    def script(column: str, out: Path) -> subprocess.CompletedProcess:
        command = [sys.executable, str(REPO / "scripts" / "tokenize_dataset.py"), "--tokenizer", str(tokenizer_dir),
                   "--dataset", "json", "--data-files", str(data_file), "--split", "validation", "--text-column",
                   column, "--num-proc", "2", "--out", str(out), "--no-progress"]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)

    done = script("text", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert split_documents(load_tokens(tmp_path / "out", "validation"), 0, encoder) == DOCUMENTS

    done = script("body", tmp_path / "out2")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "tokenize_dataset.py: error: no column 'body' in the dataset; its columns are: text"]
    assert_clean(tmp_path / "out2")


def test_hf_bpe_tokenize_dataset_command(tokenizer_dir, encoder, tmp_path, capsys):
    from hf_bpe.cli.main import main

    data_file = write_jsonl(tmp_path / "docs.jsonl", [{"text": doc} for doc in DOCUMENTS])
    arguments = ["tokenize-dataset", "--tokenizer", str(tokenizer_dir), "--dataset", str(data_file),
                 "--cache-dir", str(tmp_path / "hf-cache"), "--no-progress", "--out"]
    assert main([*arguments, str(tmp_path / "out")]) == 0
    assert split_documents(load_tokens(tmp_path / "out", "train"), 0, encoder) == DOCUMENTS
    capsys.readouterr()
    assert main([*arguments, str(tmp_path / "out2"), "--text-column", "body"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "hf-bpe tokenize-dataset: error: no column 'body' in the dataset; its columns are: text"]


# ------------------------------------------------------------------------------- special tokens, empty datasets


def test_allow_special_gives_the_ids_of_tok_document(tokenizer_dir, encoder, tmp_path):
    from transformers import AutoTokenizer

    documents = [*DOCUMENTS, f"{EOT}", f"a{EOT}{EOT}b", f"<|endoftext|x {EOT[:-1]}"]
    data_file = write_jsonl(tmp_path / "docs.jsonl", [{"text": doc} for doc in documents])
    hf_tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    expected = [id for doc in documents for id in [*hf_tokenizer(doc)["input_ids"], 0]]
    assert expected != expected_tokens(documents, encoder, eot_id=0).tolist()  # the literal strings do differ
    for streaming, num_proc in [(False, 1), (False, 2), (True, 2)]:
        out = tmp_path / f"out-{streaming}-{num_proc}"
        metadata = run(tokenizer_dir, "json", out, tmp_path, data_files=[str(data_file)], allow_special=True,
                       streaming=streaming, num_proc=num_proc, batch_size=3)
        assert load_tokens(out, "train").tolist() == expected
        assert metadata["allow_special"] is True and metadata["num_documents"] == len(documents)
    # The default: a literal <|endoftext|> is text, so every eot id in the array is a document boundary.
    metadata = run(tokenizer_dir, "json", tmp_path / "ordinary", tmp_path, data_files=[str(data_file)])
    np.testing.assert_array_equal(load_tokens(tmp_path / "ordinary", "train"),
                                  expected_tokens(documents, encoder, eot_id=0))
    assert metadata["allow_special"] is False


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("source", ["empty_jsonl", "blank_jsonl", "header_only_csv", "empty_saved_dataset",
                                    "empty_saved_split"])
def test_a_dataset_without_rows_says_so(source, streaming, tokenizer_dir, tmp_path):
    import datasets

    options: dict = {}
    if source in ("empty_jsonl", "blank_jsonl"):
        (tmp_path / "docs.jsonl").write_text("" if source == "empty_jsonl" else "\n\n", encoding="utf-8")
        dataset, options = "json", {"data_files": [str(tmp_path / "docs.jsonl")]}
        message = rf"dataset 'json' \({re.escape(str(tmp_path / 'docs.jsonl'))}\) split 'train' has no rows"
    elif source == "header_only_csv":
        (tmp_path / "docs.csv").write_text("text,id\n", encoding="utf-8")
        dataset = str(tmp_path / "docs.csv")
        message = rf"dataset '{re.escape(dataset)}' split 'train' has no rows"
    elif source == "empty_saved_dataset":
        datasets.Dataset.from_dict({"text": []}).save_to_disk(str(tmp_path / "saved"))
        dataset = str(tmp_path / "saved")
        message = rf"dataset '{re.escape(dataset)}' split 'train' has no rows"
    else:
        datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": ["a"]}),
                              "test": datasets.Dataset.from_dict({"text": ["a"]}).select([])}).save_to_disk(
            str(tmp_path / "saved"))
        dataset, options = str(tmp_path / "saved"), {"split": "test"}
        message = r"split 'test' has no rows"
    with pytest.raises(InputError, match=message):
        run(tokenizer_dir, dataset, tmp_path / "out", tmp_path, streaming=streaming, **options)
    assert_clean(tmp_path / "out")


# ----------------------------------------------------------------------------------- shards, engines, the command


def test_load_tokens_reads_the_sharded_layout(tokenizer_dir, encoder, tmp_path):
    from hf_bpe.data.shards import LAYOUT, shard_list, write_shard

    data_file = write_jsonl(tmp_path / "docs.jsonl", [{"text": doc} for doc in DOCUMENTS])
    out = tmp_path / "out"
    metadata = run(tokenizer_dir, "json", out, tmp_path, data_files=[str(data_file)])
    whole = np.fromfile(out / "train.bin", dtype=np.uint16)
    (out / "train").mkdir()
    parts = np.array_split(whole, 3)
    records = [write_shard(out / "train" / f"part-{index:05d}.bin", [part]) for index, part in enumerate(parts)]
    (out / "train.bin").unlink()
    sharded = {**metadata, "layout": LAYOUT, "shards": shard_list("train", records), "concatenated": None}
    (out / "train.json").write_text(json.dumps(sharded), encoding="utf-8")
    tokens = load_tokens(out, "train")
    assert len(tokens) == len(whole) and tokens.dtype == np.uint16
    np.testing.assert_array_equal(np.asarray(tokens), whole)
    assert split_documents(np.asarray(tokens), 0, encoder) == DOCUMENTS


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--resume"], "--resume needs --engine ray"),
        (["--concatenate"], "--concatenate needs --engine ray"),
        (["--ray-address", "127.0.0.1:6379"], "--ray-address needs --engine ray"),
        (["--engine", "ray", "--streaming"], "--streaming is for --engine local"),
        (["--engine", "ray", "--num-proc", "2"], "--num-proc is for --engine local"),
    ],
)
def test_engine_options_are_checked(extra, message, tokenizer_dir, tmp_path, capsys):
    from hf_bpe.cli.main import main

    data_file = write_jsonl(tmp_path / "docs.jsonl", [{"text": doc} for doc in DOCUMENTS])
    assert main(["tokenize-dataset", "--tokenizer", str(tokenizer_dir), "--dataset", str(data_file), "--out",
                 str(tmp_path / "out"), "--no-progress", *extra]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"hf-bpe tokenize-dataset: error: {message}"), lines
    assert_clean(tmp_path / "out")


# ------------------------------------------------------------------------------- interrupts and full disks, as run


def random_documents(count: int, seed: int = 0) -> list[str]:
    """Documents of random words: few repeats, so encoding takes a while (few cache hits) and the output is large."""
    import random

    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyzéü"
    words = ["".join(rng.choices(letters, k=rng.randint(1, 9))) for _ in range(50_000)]
    return [" ".join(rng.choices(words, k=rng.randint(20, 200))) for _ in range(count)]


@pytest.fixture(scope="module")
def random_jsonl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About 7 MB of JSON lines: a few seconds of encoding with two processes."""
    return write_jsonl(tmp_path_factory.mktemp("random") / "docs.jsonl",
                       [{"text": doc} for doc in random_documents(12_000)])


def command(tokenizer_dir: Path, data_file: Path, out: Path, tmp_path: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "hf_bpe.cli", "tokenize-dataset", "--tokenizer", str(tokenizer_dir), "--dataset",
            "json", "--data-files", str(data_file), "--out", str(out), "--cache-dir", str(tmp_path / "hf-cache"),
            "--no-progress", *extra]


@pytest.mark.parametrize("streaming", [False, True])
def test_ctrl_c_with_two_processes(streaming, tokenizer_dir, random_jsonl, tmp_path):
    data_file = random_jsonl
    out = tmp_path / "out"
    extra = ["--num-proc", "2", "--batch-size", "200", *(["--streaming"] if streaming else [])]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # A new session, so the signal goes to the command and its workers, as Ctrl-C in a terminal does.
    process = subprocess.Popen(command(tokenizer_dir, data_file, out, tmp_path, *extra), env=env,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not any(path.stat().st_size for path in out.glob(".train.tmp-*/*") if path.is_file()):
            assert process.poll() is None and time.monotonic() < deadline, "finished before it could be interrupted"
            time.sleep(0.02)
        os.killpg(process.pid, signal.SIGINT)
        err = process.communicate(timeout=120)[1]
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == 130, err
    assert err.strip().splitlines() == ["hf-bpe tokenize-dataset: interrupted; nothing was written"], err
    assert_clean(out)


ROOT = hasattr(os, "geteuid") and os.geteuid() == 0 and sys.platform.startswith("linux")


@pytest.mark.skipif(not ROOT, reason="mounting a small tmpfs needs root on Linux")
@pytest.mark.parametrize("extra", [[], ["--streaming"], ["--num-proc", "2"], ["--streaming", "--num-proc", "2"]])
def test_a_full_disk(extra, tokenizer_dir, tmp_path):
    """About 1 MB of token ids (and a map cache as big) on a 200 KB tmpfs: into a new --out and an existing one."""
    data_file = write_jsonl(tmp_path / "docs.jsonl", [{"text": doc} for doc in random_documents(1_000)])
    mount = tmp_path / "mnt"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(mount)], check=True)
    try:
        (mount / "existing").mkdir()
        out = mount / ("existing" if "--streaming" in extra else "out")
        # Started as the fault tests start a run: on a hang, the failure shows every process's Python stacks.
        run = start_cli(*command(tokenizer_dir, data_file, out, tmp_path, "--batch-size", "100", *extra)[3:])
        stderr = finish(run, timeout=300)
        assert run.returncode == 2, stderr
        assert stderr.strip().splitlines() == [
            f"hf-bpe tokenize-dataset: error: {out / 'train.bin'}: cannot write: No space left on device "
            "(nothing was written)"], stderr
        assert sorted(path.name for path in mount.iterdir()) == ["existing"]
        assert list((mount / "existing").iterdir()) == []
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_help_states_the_special_token_and_overwrite_rules():
    done = subprocess.run([sys.executable, "-m", "hf_bpe.cli", "tokenize-dataset", "--help"], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}, timeout=60)
    assert done.returncode == 0
    help_text = " ".join(done.stdout.split())
    assert "is encoded as text, like nanoGPT's encode_ordinary" in help_text
    assert "--allow-special encodes it as its id, as tok(document) does" in help_text
    assert "An existing OUT/SPLIT.bin is replaced only with --force; other splits may share OUT" in help_text
    assert "--force replace OUT/S.bin if it exists (default: refuse)" in help_text


@pytest.mark.parametrize("allow_special", [False, True])
@pytest.mark.parametrize("streaming,num_proc", [(False, 1), (False, 2), (True, 2)])
def test_texts_go_to_the_encoder_in_groups_with_the_same_result(streaming, num_proc, allow_special, tokenizer_dir,
                                                                  encoder, tmp_path, monkeypatch):
    # Groups of one to three documents, and documents longer than a group streamed through encode_iterable in
    # pieces of 5 bytes (cutting multi-byte characters) whose ids come back per window of 8 characters (the workers
    # are forked, so they see the patched values).
    set_group_chars(monkeypatch, 12)
    monkeypatch.setattr(encoders_module, "LONG_PIECE_CHARS", 5)
    monkeypatch.setattr(encode_module, "_STREAM_WINDOW", 8)
    long_documents = [" ".join(DOCUMENTS) * 3, f"x{EOT}y " * 40 + "tail", "日本語 😀é" * 9]
    documents = DOCUMENTS * 2 + long_documents
    data_file = write_jsonl(tmp_path / "docs.jsonl", [{"text": doc} for doc in documents])
    run(tokenizer_dir, "json", tmp_path / "out", tmp_path, data_files=[str(data_file)], batch_size=7,
        streaming=streaming, num_proc=num_proc, allow_special=allow_special)
    reference = Tokenizer(*load_gpt2(FIXTURES / "train-bpe-reference-vocab.json",
                                     FIXTURES / "train-bpe-reference-merges.txt"), [EOT] if allow_special else [])
    np.testing.assert_array_equal(load_tokens(tmp_path / "out", "train"),
                                  expected_tokens(documents, reference, eot_id=0))


class RecordingEncoder:
    """The hf_bpe encoder, recording the characters of each call and of each piece of a long document."""

    def __init__(self, tokenizer_dir: Path) -> None:
        self.inner = encoders_module.HFBPEEncoder.from_directory(tokenizer_dir)
        self.group_chars: list[int] = []
        self.piece_chars: list[int] = []

    def __call__(self, texts):
        self.group_chars.append(sum(map(len, texts)))
        return self.inner(texts)

    def encode_to_arrays(self, pieces, dtype):
        def recorded():
            for piece in pieces:
                self.piece_chars.append(len(piece))
                yield piece
        return self.inner.encode_to_arrays(recorded(), dtype)


def test_the_encoder_never_gets_more_than_a_group(tokenizer_dir, encoder, tmp_path, monkeypatch):
    """One map batch of 40 documents: the encoder sees groups of at most GROUP_CHARS characters, and a longer
    document only in pieces of at most LONG_PIECE_CHARS, whatever the batch holds."""
    set_group_chars(monkeypatch, 2000)  # random_documents are 20-200 words: 0.1-1.5k bytes
    monkeypatch.setattr(encoders_module, "LONG_PIECE_CHARS", 100)
    documents = random_documents(40, seed=3)
    documents[7] = documents[7] * 20  # over 2,000 characters
    data_file = write_jsonl(tmp_path / "docs.jsonl", [{"text": doc} for doc in documents])
    recording = RecordingEncoder(tokenizer_dir)
    run(tokenizer_dir, "json", tmp_path / "out", tmp_path, data_files=[str(data_file)], batch_size=40, num_proc=1,
        encoder=recording)
    assert max(recording.group_chars) <= 2000 and len(recording.group_chars) > 5
    assert sum(recording.group_chars) + sum(recording.piece_chars) == sum(map(len, documents))
    assert sum(recording.piece_chars) == len(documents[7]) and max(recording.piece_chars) <= 100
    np.testing.assert_array_equal(load_tokens(tmp_path / "out", "train"), expected_tokens(documents, encoder, 0))


def ids_to_files(tokenizer_dir: Path, tmp_path: Path, documents: list[str]) -> Any:
    """The map function of tokenize-dataset (hf_bpe encoder, uint16, eot 0) over `documents` as a json dataset."""
    import datasets

    data_file = write_jsonl(tmp_path / "docs.jsonl", [{"text": doc} for doc in documents])
    dataset = datasets.load_dataset("json", data_files=[str(data_file)], split="train",
                                    cache_dir=str(tmp_path / "hf-cache"))
    flatten = encoders_module.BatchFlattener(encoders_module.HFBPEEncoder.from_directory(tokenizer_dir), "text", 0,
                                         np.dtype(np.uint16))
    return pipeline_module.IdsToFiles(flatten, tmp_path, dataset)


def test_a_map_batch_never_holds_its_texts_or_ids_whole(tokenizer_dir, encoder, tmp_path, monkeypatch):
    """The map function on one range of rows holding 6 MB of text allocates in Python a bounded amount (one group of
    32 KB here, and the encoder's window), not a multiple of the batch, and returns a row of a few numbers: before,
    the batch's texts became Python strings and its ids were concatenated and copied into arrow (a 409 MB batch of
    the Linux corpus took a map worker to 1.9 GB). Measured: 2.4 MB; with groups as large as the batch, 52 MB."""
    import tracemalloc

    set_group_chars(monkeypatch, 1 << 15)
    paragraph = " ".join(random_documents(100, seed=5))  # ~70 KB
    documents = [paragraph * (1 + index % 3) for index in range(40)]  # each longer than a group
    documents += [paragraph[:3000]] * 300  # and groups of short ones
    text_bytes = sum(len(document.encode()) for document in documents)
    write_ids = ids_to_files(tokenizer_dir, tmp_path, documents)
    try:
        warm_up = write_ids({"start": [0], "stop": [3]})  # the encoder's caches and window: ~1.5 MB
        tracemalloc.start()
        try:
            row = write_ids({"start": [0], "stop": [len(documents)]})
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    finally:
        write_ids.close()
    assert peak < text_bytes / 2.5, (peak, text_bytes)
    assert row == {"first_row": [0], "ids_file": [f"ids-{os.getpid()}.bin"], "start": warm_up["stop"],
                   "stop": [row["stop"][0]],
                   "num_documents": [len(documents)]}
    ids = np.fromfile(tmp_path / row["ids_file"][0], dtype=np.uint16, offset=row["start"][0])
    np.testing.assert_array_equal(ids, expected_tokens(documents, encoder, 0))


@pytest.mark.parametrize("kernel_copy", [True, False])
def test_the_ids_files_are_joined_in_dataset_order(kernel_copy, tokenizer_dir, encoder, random_jsonl, tmp_path,
                                                   monkeypatch):
    """Two map workers, each appending many batches to its own file: the .bin is the documents in order, whether
    the spans are copied by copy_file_range or through Python."""
    if not kernel_copy:
        monkeypatch.delattr(os, "copy_file_range", raising=False)
    run(tokenizer_dir, "json", tmp_path / "out", tmp_path, data_files=[str(random_jsonl)], batch_size=700,
        num_proc=2)
    documents = [json.loads(line)["text"] for line in random_jsonl.read_text(encoding="utf-8").splitlines()]
    np.testing.assert_array_equal(load_tokens(tmp_path / "out", "train"), expected_tokens(documents, encoder, 0))


@given(st.text(max_size=60), st.integers(1, 9))
def test_utf8_pieces_join_to_the_text(text, piece_bytes):
    text = text.encode("utf-8", "replace").decode("utf-8")  # no lone surrogates: arrow strings are valid UTF-8
    pieces = list(encoders_module.utf8_pieces(text.encode("utf-8"), piece_bytes))
    assert "".join(pieces) == text
    assert all(len(piece.encode("utf-8")) <= piece_bytes + 3 for piece in pieces)


def test_a_stream_is_cut_into_batches_of_bounded_text(tmp_path, monkeypatch):
    """--streaming: the rows go to the workers in batches of at most --batch-size documents and 8 x GROUP_CHARS
    bytes (a longer document alone), numbered by their first row, all rows in order."""
    import datasets

    set_group_chars(monkeypatch, 100)
    documents = random_documents(60, seed=7)
    documents[10] = "é" * 2000  # longer than a batch's bytes
    data_file = write_jsonl(tmp_path / "docs.jsonl", [{"text": doc, "id": index} for index, doc in
                                                      enumerate(documents)])
    stream = datasets.load_dataset("json", data_files=[str(data_file)], split="train", streaming=True)
    source = DatasetSource("json", data_files=[str(data_file)], streaming=True)
    batches = list(pipeline_module._numbered_batches(stream, source, "text", batch_size=25))
    assert [row for _, row in batches] == list(np.cumsum([0] + [len(batch["text"]) for batch, _ in batches[:-1]]))
    assert [text for batch, _ in batches for text in batch["text"]] == documents
    for batch, first_row in batches:
        assert list(batch) == ["text"] and len(batch["text"]) <= 25
        assert sum(len(text.encode()) for text in batch["text"]) <= 800 or batch["text"] == [documents[first_row]]
    assert len(batches) > 30  # cut by bytes (~40 KB of text), not only by 25 documents


@given(st.lists(st.integers(0, 50), max_size=40), st.integers(1, 4), st.integers(1, 5), st.integers(1, 60),
       st.integers(1, 4))
def test_balanced_row_ranges(sizes, num_proc, max_rows, max_bytes, stripes):
    sizes = np.array(sizes, dtype=np.int64)
    ranges = pipeline_module.balanced_row_ranges(sizes, num_proc, max_rows, max_bytes, stripes)
    rows = sorted(span for span in ranges if span[1] > span[0])
    assert [start for start, _ in rows] == [0, *(stop for _, stop in rows[:-1])][:len(rows)]  # all rows, once
    assert (rows[-1][1] if rows else 0) == len(sizes)
    assert len(ranges) % num_proc == 0
    for start, stop in ranges:
        assert stop - start <= max_rows and (sum(sizes[start:stop]) <= max_bytes or stop - start == 1)
    # map's contiguous shards of equal counts: each holds its share of the bytes, give or take a row per stripe,
    # with its ranges in dataset order
    share = len(ranges) // num_proc
    for process in range(num_proc):
        shard = [span for span in ranges[process * share:(process + 1) * share] if span[1] > span[0]]
        assert shard == sorted(shard)
        shard_bytes = sum(sum(sizes[start:stop]) for start, stop in shard)
        assert abs(shard_bytes - sum(sizes) / num_proc) <= stripes * max(sizes, default=0)


def test_map_shards_the_ranges_as_balanced_row_ranges_expects():
    """Dataset.map(num_proc=N) gives process i the i-th of N contiguous shards of equal counts (datasets'
    `shard(contiguous=True)`): with the padded ranges, that is equal bytes, from all over the corpus."""
    import datasets

    sizes = np.array([10] * 97 + [300, 300, 300], dtype=np.int64)  # a third of the text in the last rows
    ranges = pipeline_module.balanced_row_ranges(sizes, 3, max_rows=7, max_bytes=100, stripes=4)
    table = datasets.Dataset.from_dict({"start": [start for start, _ in ranges], "stop": [stop for _, stop in ranges]})
    shard_bytes, shard_rows = [], []
    for index in range(3):
        shard = table.shard(num_shards=3, index=index, contiguous=True)
        shard_rows.append([row for start, stop in zip(shard["start"], shard["stop"]) for row in range(start, stop)])
        shard_bytes.append(int(sizes[shard_rows[-1]].sum()))
    assert sorted(row for rows in shard_rows for row in rows) == list(range(len(sizes)))
    assert max(shard_bytes) - min(shard_bytes) <= 4 * 300, shard_bytes
    assert all(min(rows) < len(sizes) / 2 < max(rows) for rows in shard_rows)  # stripes from all over


class ListEncoder:
    """The hf_bpe encoder returning lists of Python ints, as `tok(texts)["input_ids"]` or tiktoken's batch do."""

    def __init__(self, tokenizer_dir: Path) -> None:
        self.inner = encoders_module.HFBPEEncoder.from_directory(tokenizer_dir)

    def __call__(self, texts):
        return [ids.tolist() for ids in self.inner(texts)]


@pytest.mark.parametrize("append_eot", [True, False])
def test_an_encoder_returning_lists_gives_the_same_bin(append_eot, tokenizer_dir, encoder, tmp_path, monkeypatch):
    set_group_chars(monkeypatch, 30)
    documents = DOCUMENTS * 3 + [" ".join(DOCUMENTS)]
    data_file = write_jsonl(tmp_path / "docs.jsonl", [{"text": doc} for doc in documents])
    for name, text_encoder in (("arrays", None), ("lists", ListEncoder(tokenizer_dir))):
        run(tokenizer_dir, "json", tmp_path / name, tmp_path, data_files=[str(data_file)], batch_size=4,
            append_eot=append_eot, encoder=text_encoder)
    np.testing.assert_array_equal(load_tokens(tmp_path / "lists", "train"), load_tokens(tmp_path / "arrays", "train"))
    np.testing.assert_array_equal(load_tokens(tmp_path / "arrays", "train"),
                                  expected_tokens(documents, encoder, 0 if append_eot else None))


def resident_kb_mapped_from(directory: Path) -> int:
    """Kilobytes of this process's resident pages mapped from files under `directory` (Linux /proc/self/smaps)."""
    total, counting = 0, False
    with open("/proc/self/smaps", encoding="utf-8") as smaps:
        for line in smaps:
            fields = line.split()
            if re.fullmatch(r"[0-9a-f]+-[0-9a-f]+", fields[0]):
                counting = len(fields) >= 6 and fields[5].startswith(str(directory))
            elif counting and fields[0] == "Rss:":
                total += int(fields[1])
    return total


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps")
def test_the_pages_a_range_read_leave_the_worker(tokenizer_dir, encoder, tmp_path):
    """A map worker reads each range through a fresh memory map of the arrow files, closed when the range is done:
    its resident file pages do not pile up with the corpus (through one long-lived map they grew by the 4 MB read)."""
    paragraph = " ".join(random_documents(20, seed=9))
    documents = [paragraph] * (4_000_000 // len(paragraph))
    write_ids = ids_to_files(tokenizer_dir, tmp_path, documents)
    before = resident_kb_mapped_from(tmp_path / "hf-cache")
    try:
        row = write_ids({"start": [0], "stop": [len(documents)]})
    finally:
        write_ids.close()
    assert resident_kb_mapped_from(tmp_path / "hf-cache") - before < 1000
    ids = np.fromfile(tmp_path / row["ids_file"][0], dtype=np.uint16)
    np.testing.assert_array_equal(ids, expected_tokens(documents, encoder, 0))


def set_group_chars(monkeypatch: pytest.MonkeyPatch, group_chars: int) -> None:
    """GROUP_CHARS bounds the groups a BatchFlattener encodes (encoders) and the pipeline's streamed batches."""
    monkeypatch.setattr(encoders_module, "GROUP_CHARS", group_chars)
    monkeypatch.setattr(pipeline_module, "GROUP_CHARS", group_chars)
