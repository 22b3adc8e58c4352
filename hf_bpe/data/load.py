"""Reading token arrays back: `load_tokens(out_dir, split)` memory-maps what tokenize-dataset wrote.

>>> tokens = load_tokens("data", "train")  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from hf_bpe.common.errors import InputError
from hf_bpe.common.files import PathArg
from hf_bpe.data.shards import is_count, load_sharded_tokens


def check_output_split(out_dir: Path, split: str, force: bool) -> tuple[Path, Path]:
    """`out_dir/<split>.bin` and `.json`, after checking the split is a file name and, unless `force`, not written yet.

    Other splits may already be in `out_dir`: `train` and `validation` arrays usually live side by side.
    """
    if not split or "/" in split or os.sep in split or split.startswith("."):
        raise InputError(f"--split {split!r} cannot be used as a file name")
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"{out_dir}: exists and is not a directory (--out must be a directory)")
    bin_path, meta_path = out_dir / f"{split}.bin", out_dir / f"{split}.json"
    if not force:
        for path in (bin_path, meta_path, out_dir / split):
            if path.exists():
                raise InputError(f"{path}: split {split!r} was already written to {out_dir} (use --force to replace "
                                 f"it, or another --split or --out)")
    return bin_path, meta_path


def load_tokens(out_dir: PathArg, split: str, *, verify: bool = True) -> np.ndarray:
    """Memory-map `out_dir/<split>.bin` with the dtype recorded in `out_dir/<split>.json`.

    Returns an `np.memmap` (a plain empty array when there are no tokens: an empty file cannot be mapped). Raises
    InputError when a file is missing, the metadata is malformed, or a size does not match the recorded number of
    tokens. A split written in shards by `--engine ray` (metadata `"layout": "shards"`) is read by
    `hf_bpe.data.shards.load_sharded_tokens` as one array.

    The metadata may come from someone else: only files inside `out_dir` are read (a shard name with `..`, an
    absolute path or a symlink leading out of `out_dir` is refused). With `verify` (the default), each shard's sha256
    is checked against the metadata, which reads every byte once (about a second per GB): a corrupted or replaced
    shard is an InputError rather than wrong training data. It is on by default because a check that must be asked
    for protects no one; pass `verify=False` to skip it when loading files already checked (say, in each process of
    a job). Not handled: the single `.bin` of the local engine records no checksum, so only its size is checked.

    >>> tokens = load_tokens("data", "train")  # doctest: +SKIP
    >>> tokens.dtype, len(tokens)  # doctest: +SKIP
    (dtype('uint16'), 1048576)
    """
    metadata = read_metadata(out_dir, split)
    if metadata.get("layout") == "shards":
        return load_sharded_tokens(out_dir, split, metadata, verify=verify)
    bin_path = Path(out_dir) / f"{split}.bin"
    if not bin_path.is_file():
        raise InputError(f"{bin_path}: no such file (tokenize the split first)")
    dtype = np.dtype(metadata["dtype"])
    expected = metadata["num_tokens"] * dtype.itemsize
    actual = bin_path.stat().st_size
    if actual != expected:
        raise InputError(f"{bin_path}: {actual} bytes, but {bin_path.with_suffix('.json').name} says "
                         f"{metadata['num_tokens']} {dtype.name} tokens ({expected} bytes); rerun the tokenization")
    if expected == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(bin_path, dtype=dtype, mode="r")


def read_metadata(out_dir: PathArg, split: str) -> dict[str, Any]:
    """The `out_dir/<split>.json` written next to the token array, checked for the keys `load_tokens` needs."""
    meta_path = Path(out_dir) / f"{split}.json"
    if not meta_path.is_file():
        raise InputError(f"{meta_path}: no such file; without it {split}.bin is incomplete or was not written by "
                         f"hf_bpe (rerun the tokenization)")
    try:
        metadata = json.loads(meta_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InputError(f"{meta_path}: not valid JSON ({error})") from None
    if not isinstance(metadata, dict) or metadata.get("dtype") not in ("uint16", "uint32") \
            or not is_count(metadata.get("num_tokens")):
        raise InputError(f"{meta_path}: expected an object with 'dtype' (uint16 or uint32) and 'num_tokens' (a "
                         f"non-negative integer)")
    return metadata
