"""tiktoken's loaders of rank files, offline: each URL is a file of the folder `$HF_BPE_TIKTOKEN_FILES` (built by
tests/encode/tiktoken_suite.py) with the URL's file name, checked against the sha256 tiktoken expects, as tiktoken
checks the file it downloads; hf_bpe reads it."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from hf_bpe.formats.gpt2 import load_gpt2
from hf_bpe.formats.tiktoken_files import read_tiktoken_ranks, tiktoken_ranks


def offline_file(url: str, expected_hash: str | None) -> Path:
    folder = os.environ.get("HF_BPE_TIKTOKEN_FILES")
    if not folder:
        raise RuntimeError("HF_BPE_TIKTOKEN_FILES names no folder of rank files: run tests/encode/tiktoken_suite.py")
    path = Path(folder) / url.rsplit("/", 1)[-1]
    if expected_hash is not None and hashlib.sha256(path.read_bytes()).hexdigest() != expected_hash:
        raise ValueError(f"{path} is not the file tiktoken downloads from {url} (its sha256 is not {expected_hash})")
    return path


def load_tiktoken_bpe(tiktoken_bpe_file: str, expected_hash: str | None = None) -> dict[bytes, int]:
    return read_tiktoken_ranks(offline_file(tiktoken_bpe_file, expected_hash))


def data_gym_to_mergeable_bpe_ranks(vocab_bpe_file: str, encoder_json_file: str, vocab_bpe_hash: str | None = None,
                                    encoder_json_hash: str | None = None) -> dict[bytes, int]:
    """GPT-2's encoder.json and vocab.bpe as ranks: every token but `<|endoftext|>`, its id as its rank."""
    vocab, merges = load_gpt2(offline_file(encoder_json_file, encoder_json_hash),
                              offline_file(vocab_bpe_file, vocab_bpe_hash))
    return tiktoken_ranks(vocab, merges, ["<|endoftext|>"])
