"""load_tokens on metadata from someone else (issue 20): shard checksums verified on load, no file outside the
directory read, and every malformed entry an InputError naming the metadata file and the entry."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hf_bpe.common.errors import InputError
from hf_bpe.data.load import load_tokens
from hf_bpe.data.shards import LAYOUT, ShardedTokens, shard_list, shard_name, write_shard

SHARDS = [np.array([1, 2, 3], dtype=np.uint16), np.array([], dtype=np.uint16), np.array([4, 5], dtype=np.uint16)]


def write_sharded(out: Path, concatenate: bool = False) -> dict[str, Any]:
    """A split in the layout `--engine ray` writes: OUT/train/part-NNNNN.bin and OUT/train.json."""
    (out / "train").mkdir(parents=True)
    records = [write_shard(out / "train" / shard_name(index), [array], 1, index)
               for index, array in enumerate(SHARDS)]
    metadata = {"layout": LAYOUT, "dtype": "uint16", "num_tokens": 5, "shards": shard_list("train", records),
                "concatenated": None}
    if concatenate:
        (out / "train.bin").write_bytes(np.concatenate(SHARDS).tobytes())
        metadata["concatenated"] = "train.bin"
    write_metadata(out, metadata)
    return metadata


def write_metadata(out: Path, metadata: dict[str, Any]) -> None:
    (out / "train.json").write_text(json.dumps(metadata), encoding="utf-8")


@pytest.mark.parametrize("concatenate", [False, True])
def test_a_shard_that_changed_after_it_was_written_is_refused(tmp_path: Path, concatenate: bool) -> None:
    write_sharded(tmp_path, concatenate)
    assert np.asarray(load_tokens(tmp_path, "train")).tolist() == [1, 2, 3, 4, 5]
    changed = tmp_path / ("train.bin" if concatenate else "train/part-00002.bin")
    data = bytearray(changed.read_bytes())
    data[-1] ^= 1  # same size, other bytes
    changed.write_bytes(bytes(data))
    with pytest.raises(InputError, match=rf"^{changed}: sha256 differs from the one train.json records: the file "
                                         r"changed after it was written"):
        load_tokens(tmp_path, "train")
    assert np.asarray(load_tokens(tmp_path, "train", verify=False)).tolist()[-1] == 5 ^ (1 << 8)


def test_sharded_tokens_are_read_lazily_after_verification(tmp_path: Path) -> None:
    write_sharded(tmp_path)
    tokens = load_tokens(tmp_path, "train")
    assert isinstance(tokens, ShardedTokens) and tokens[2:4].tolist() == [3, 4]


@pytest.mark.parametrize("name", ["../outside.bin", "train/../../outside.bin", "/tmp/outside.bin", "link.bin"])
def test_a_shard_name_leading_out_of_the_directory_is_refused(tmp_path: Path, name: str) -> None:
    out = tmp_path / "out"
    metadata = write_sharded(out)
    secret = tmp_path / "outside.bin"
    secret.write_bytes(np.array([7, 7, 7], dtype=np.uint16).tobytes())
    os.symlink(secret, out / "link.bin")
    metadata["shards"][0]["file"] = name
    write_metadata(out, metadata)
    with pytest.raises(InputError, match=rf"^{out / 'train.json'}: shard entry 0 \({name}\): '{name}' is not a file "
                                         rf"name inside {out}; only files inside the directory are read$"):
        load_tokens(out, "train")
    metadata["shards"][0]["file"] = "train/part-00000.bin"
    metadata["concatenated"] = name
    write_metadata(out, metadata)
    with pytest.raises(InputError, match=rf"^{out / 'train.json'}: concatenated: '{name}' is not a file name inside"):
        load_tokens(out, "train")


@pytest.mark.parametrize("change, message", [
    (lambda shards: shards[1].pop("num_tokens"), "shard entry 1 (train/part-00001.bin) has no 'num_tokens'"),
    (lambda shards: shards[1].update(num_tokens="0"),
     "shard entry 1 (train/part-00001.bin): 'num_tokens' must be a non-negative integer, got '0'"),
    (lambda shards: shards[0].update(num_tokens=True),
     "shard entry 0 (train/part-00000.bin): 'num_tokens' must be a non-negative integer, got True"),
    (lambda shards: shards[0].update(num_tokens=-3),
     "shard entry 0 (train/part-00000.bin): 'num_tokens' must be a non-negative integer, got -3"),
    (lambda shards: shards[2].update(sha256="abc"),
     "shard entry 2 (train/part-00002.bin): 'sha256' must be 64 hexadecimal digits, got 'abc'"),
    (lambda shards: shards[2].pop("file"), "shard entry 2 has no 'file'"),
    (lambda shards: shards[2].update(file=7), "shard entry 2: 'file' must be a file name, got 7"),
    (lambda shards: shards.__setitem__(0, ["train/part-00000.bin", 3]),
     "shard entry 0 is list ['train/part-00000.bin', 3], not an object"),
])
def test_malformed_shard_entries_name_the_file_and_the_entry(tmp_path: Path, change: Any, message: str) -> None:
    metadata = write_sharded(tmp_path)
    change(metadata["shards"])
    write_metadata(tmp_path, metadata)
    with pytest.raises(InputError) as raised:
        load_tokens(tmp_path, "train")
    assert str(raised.value) == f"{tmp_path / 'train.json'}: {message}"


@pytest.mark.parametrize("metadata", [{"dtype": "uint16", "num_tokens": "5"}, {"dtype": "uint16", "num_tokens": -1},
                                      {"dtype": "uint16", "num_tokens": True}, {"dtype": "int8", "num_tokens": 1},
                                      ["uint16", 5]])
def test_malformed_metadata_is_refused(tmp_path: Path, metadata: Any) -> None:
    (tmp_path / "train.bin").write_bytes(b"\0\0")
    (tmp_path / "train.json").write_text(json.dumps(metadata))
    with pytest.raises(InputError, match=rf"^{tmp_path / 'train.json'}: expected an object with 'dtype' \(uint16 or "
                                         r"uint32\) and 'num_tokens' \(a non-negative integer\)$"):
        load_tokens(tmp_path, "train")


def test_a_shard_list_that_is_not_a_list_is_refused(tmp_path: Path) -> None:
    metadata = write_sharded(tmp_path)
    metadata["shards"] = {"0": metadata["shards"][0]}
    write_metadata(tmp_path, metadata)
    with pytest.raises(InputError, match="not a sharded layout"):
        load_tokens(tmp_path, "train")
