"""Tests of hf_bpe.data.shards: shard files and checksums, the manifest, and the sharded array read back as one array
(checked against np.concatenate, exhaustively on small shapes and with hypothesis on random ones). No Ray here."""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hf_bpe.common.errors import InputError
from hf_bpe.data.shards import (
    ShardedTokens,
    ShardManifest,
    ShardRecord,
    concatenate_shards,
    file_sha256,
    load_sharded_tokens,
    shard_is_intact,
    shard_list,
    shard_name,
    write_shard,
)


def make_split(out: Path, shard_arrays: list[np.ndarray], split: str = "train") -> dict:
    """Shards written with write_shard plus the metadata tokenize_dataset_ray would write for them."""
    (out / split).mkdir(parents=True)
    records = [write_shard(out / split / shard_name(index), [array], num_documents=1)
               for index, array in enumerate(shard_arrays)]
    return {"layout": "shards", "dtype": "uint16", "num_tokens": sum(len(array) for array in shard_arrays),
            "shards": shard_list(split, records), "concatenated": None}


def test_write_shard_hashes_what_it_writes_and_leaves_no_temporary_file(tmp_path):
    arrays = [np.array([1, 2, 3], dtype=np.uint16), np.array([], dtype=np.uint16), np.array([65535], np.uint16)]
    record = write_shard(tmp_path / "part-00000.bin", arrays, num_documents=2, first_row=10)
    data = (tmp_path / "part-00000.bin").read_bytes()
    assert data == np.concatenate(arrays).tobytes()
    assert record == ShardRecord(4, hashlib.sha256(data).hexdigest(), 2, 10)
    assert file_sha256(tmp_path / "part-00000.bin") == record.sha256
    assert [path.name for path in tmp_path.iterdir()] == ["part-00000.bin"]
    assert shard_is_intact(tmp_path / "part-00000.bin", record, 2)
    assert not shard_is_intact(tmp_path / "part-00001.bin", record, 2)


def test_an_interrupted_shard_write_leaves_nothing_that_looks_finished(tmp_path):
    def arrays():
        yield np.array([1, 2], dtype=np.uint16)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_shard(tmp_path / "part-00000.bin", arrays())
    assert list(tmp_path.iterdir()) == []


def test_a_changed_shard_is_not_intact(tmp_path):
    record = write_shard(tmp_path / "part.bin", [np.array([1, 2], dtype=np.uint16)])
    (tmp_path / "part.bin").write_bytes(np.array([1, 3], dtype=np.uint16).tobytes())  # same size, other bytes
    assert not shard_is_intact(tmp_path / "part.bin", record, 2)


def test_the_manifest_round_trips_and_is_replaced_atomically(tmp_path):
    manifest = ShardManifest(tmp_path, {"dataset": "d", "documents_per_shard": 5})
    manifest.save()
    assert ShardManifest.load(tmp_path).shards == {}
    manifest.record(3, ShardRecord(7, "0" * 64, 5, 15))
    manifest.record(0, ShardRecord(2, "1" * 64, 5, 0))
    manifest.save()
    loaded = ShardManifest.load(tmp_path)
    assert loaded.job == manifest.job and loaded.shards == manifest.shards
    assert sorted(path.name for path in tmp_path.iterdir()) == ["manifest.json"]
    assert ShardManifest.load(tmp_path / "absent") is None
    (tmp_path / "manifest.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(InputError, match="manifest.json: not a manifest"):
        ShardManifest.load(tmp_path)


def test_load_sharded_tokens_reads_the_shards_as_one_array(tmp_path):
    shards = [np.arange(5, dtype=np.uint16), np.zeros(0, dtype=np.uint16), np.arange(100, 103, dtype=np.uint16)]
    metadata = make_split(tmp_path, shards)
    tokens = load_sharded_tokens(tmp_path, "train", metadata)
    assert isinstance(tokens, ShardedTokens) and tokens.dtype == np.uint16 and len(tokens) == 8
    assert np.asarray(tokens).tolist() == np.concatenate(shards).tolist()
    assert tokens[4:6].tolist() == [4, 100]  # across a shard boundary (and the empty shard)

    metadata["concatenated"] = concatenate_shards(tmp_path, "train", metadata).name
    whole = load_sharded_tokens(tmp_path, "train", metadata)
    assert isinstance(whole, np.memmap) and whole.tolist() == np.concatenate(shards).tolist()


def test_sizes_that_differ_from_the_metadata_are_refused(tmp_path):
    metadata = make_split(tmp_path, [np.arange(4, dtype=np.uint16), np.arange(3, dtype=np.uint16)])
    wrong_total = dict(metadata, num_tokens=8)
    with pytest.raises(InputError, match="the shards hold 7 tokens but num_tokens is 8"):
        load_sharded_tokens(tmp_path, "train", wrong_total)
    (tmp_path / "train" / shard_name(1)).write_bytes(b"\0\0")
    with pytest.raises(InputError, match=r"part-00001.bin: 2 bytes, but train.json says 3 uint16 tokens \(6 bytes\)"):
        load_sharded_tokens(tmp_path, "train", metadata)
    (tmp_path / "train" / shard_name(1)).unlink()
    with pytest.raises(InputError, match="part-00001.bin: no such file"):
        load_sharded_tokens(tmp_path, "train", metadata)
    with pytest.raises(InputError, match="not a sharded layout"):
        load_sharded_tokens(tmp_path, "train", {"dtype": "uint16", "num_tokens": 7})


def test_concatenation_checks_every_shard_checksum(tmp_path):
    metadata = make_split(tmp_path, [np.arange(4, dtype=np.uint16), np.arange(3, dtype=np.uint16)])
    (tmp_path / "train" / shard_name(0)).write_bytes(np.arange(1, 5, dtype=np.uint16).tobytes())
    with pytest.raises(InputError, match="part-00000.bin: sha256 differs"):
        concatenate_shards(tmp_path, "train", metadata)
    assert not (tmp_path / "train.bin").exists()
    assert not [path for path in tmp_path.iterdir() if ".tmp-" in path.name]


def test_shard_list_names_files_relative_to_the_output_directory():
    listed = shard_list("val", [ShardRecord(3, "a" * 64, 2, 0), ShardRecord(1, "b" * 64, 1, 2)])
    assert [entry["file"] for entry in listed] == ["val/part-00000.bin", "val/part-00001.bin"]
    assert json.loads(json.dumps(listed)) == listed


# --- ShardedTokens against np.concatenate ------------------------------------------------------------------------


def check_like_concatenation(arrays: list[np.ndarray]) -> None:
    tokens = ShardedTokens(arrays, np.dtype(np.int64))
    whole = np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)
    assert len(tokens) == len(whole) and tokens.shape == whole.shape
    assert np.asarray(tokens).tolist() == whole.tolist() and list(tokens) == whole.tolist()
    for index in range(-len(whole), len(whole)):
        assert tokens[index] == whole[index]
        assert tokens[np.int64(index)] == whole[index]
    for bad in (len(whole), -len(whole) - 1):
        with pytest.raises(IndexError):
            tokens[bad]
    bounds = [None, *range(-len(whole) - 1, len(whole) + 2)]
    for start, stop, step in itertools.product(bounds, bounds, (None, 1, 2, 3, -1, -2)):
        assert tokens[start:stop:step].tolist() == whole[start:stop:step].tolist(), (start, stop, step)
    if len(whole):
        picks = np.array([0, len(whole) - 1, -1, len(whole) // 2, 0])
        assert tokens[picks].tolist() == whole[picks].tolist()


def test_sharded_tokens_index_exactly_like_the_concatenation_on_every_small_layout():
    # Every way of cutting 0..5 tokens into up to 3 shards (empty shards included).
    for total in range(6):
        for cuts in itertools.combinations_with_replacement(range(total + 1), 2):
            edges = [0, *cuts, total]
            arrays = [np.arange(10 + low, 10 + high, dtype=np.int64) for low, high in zip(edges, edges[1:])]
            check_like_concatenation(arrays)
    check_like_concatenation([])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 65535), max_size=6), max_size=5))
def test_sharded_tokens_match_the_concatenation_on_random_layouts(shards):
    check_like_concatenation([np.array(shard, dtype=np.int64) for shard in shards])


def test_a_training_window_inside_one_shard_is_a_view_not_a_copy():
    first, second = np.arange(10), np.arange(10, 20)
    window = ShardedTokens([first, second])[12:18]
    assert window.base is not None and np.shares_memory(window, second)
