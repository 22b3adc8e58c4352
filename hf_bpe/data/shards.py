"""The sharded token-array layout written by the distributed tokenizer
(`hf_bpe.data.ray_tokenize.tokenize_dataset_ray`).

    OUT/SPLIT/part-00000.bin, part-00001.bin, ...   ids of consecutive documents, in dataset order
    OUT/SPLIT/manifest.json                         progress of a run: the shards finished so far, with checksums
    OUT/SPLIT.json                                  written last: "layout": "shards", the shard list, per-shard
                                                    token counts and sha256, and the single-machine metadata fields
    OUT/SPLIT.bin                                   optional (--concatenate): all shards back to back

Concatenating the shards in order gives exactly the `.bin` that `hf_bpe.data.pipeline.tokenize_dataset` writes on one
machine. Every file is written under a temporary name and renamed when complete, so a shard named `part-NNNNN.bin`
is always whole; it counts as done only once the manifest records its checksum. This module holds no Ray code: it
only reads and writes files, so `load_sharded_tokens` works wherever numpy does.

>>> import tempfile
>>> directory = Path(tempfile.mkdtemp())
>>> record = write_shard(directory / "part-00000.bin", [np.array([1, 2, 3], dtype=np.uint16)])
>>> record.num_tokens, record.sha256 == file_sha256(directory / "part-00000.bin")
(3, True)
"""

from __future__ import annotations

import hashlib
import json
import operator
import os
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hf_bpe.common.errors import InputError
from hf_bpe.common.files import PathArg, write_text_atomically

LAYOUT = "shards"
MANIFEST_NAME = "manifest.json"
_HASH_BLOCK = 1 << 22


@dataclass(frozen=True)
class ShardRecord:
    """What is known of one finished shard: its size, content hash and which rows (documents) it holds."""

    num_tokens: int
    sha256: str
    num_documents: int = 0
    first_row: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def shard_name(index: int) -> str:
    """The file name of shard `index`.

    >>> shard_name(7)
    'part-00007.bin'
    """
    return f"part-{index:05d}.bin"


def shard_directory(out_dir: PathArg, split: str) -> Path:
    """OUT/SPLIT: the directory holding a split's shards and its manifest."""
    return Path(out_dir) / split


def write_shard(path: PathArg, arrays: Iterable[np.ndarray], num_documents: int = 0, first_row: int = 0
                ) -> ShardRecord:
    """Write the arrays back to back to `path` (temporary name, then rename) and return the shard's record.

    The sha256 is computed while writing, so the data is read once. Arrays must share one dtype.
    """
    path = Path(path)
    temporary = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:12]}")
    digest = hashlib.sha256()
    num_tokens = 0
    try:
        with open(temporary, "wb") as file:
            for array in arrays:
                data = memoryview(np.ascontiguousarray(array)).cast("B")
                digest.update(data)
                file.write(data)
                num_tokens += len(array)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return ShardRecord(num_tokens, digest.hexdigest(), num_documents, first_row)


def file_sha256(path: PathArg) -> str:
    """The hex sha256 of a file's bytes, read in 4 MB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while block := file.read(_HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def shard_is_intact(path: PathArg, record: ShardRecord, itemsize: int) -> bool:
    """True when the file at `path` has the size and sha256 the record says (a shard that need not be redone)."""
    try:
        if os.stat(path).st_size != record.num_tokens * itemsize:
            return False
    except OSError:
        return False
    return file_sha256(path) == record.sha256


class ShardManifest:
    """OUT/SPLIT/manifest.json: the job a run belongs to and the shards it has finished, rewritten atomically.

    `job` identifies the work (tokenizer hash, dataset, options, rows per shard): `--resume` reuses the shards only
    when the job is the same.

    >>> import tempfile
    >>> manifest = ShardManifest(Path(tempfile.mkdtemp()), {"dataset": "d"})
    >>> manifest.record(0, ShardRecord(3, "ab" * 32, 1, 0)); manifest.save()
    >>> ShardManifest.load(manifest.directory).shards[0].num_tokens
    3
    """

    def __init__(self, directory: PathArg, job: dict[str, Any], shards: dict[int, ShardRecord] | None = None) -> None:
        self.directory = Path(directory)
        self.job = job
        self.shards: dict[int, ShardRecord] = dict(shards or {})

    @property
    def path(self) -> Path:
        return self.directory / MANIFEST_NAME

    @classmethod
    def load(cls, directory: PathArg) -> ShardManifest | None:
        """The manifest in `directory`, or None when there is none (a run that never finished a shard)."""
        path = Path(directory) / MANIFEST_NAME
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            shards = {int(index): ShardRecord(**record) for index, record in data["shards"].items()}
            return cls(directory, data["job"], shards)
        except (ValueError, KeyError, TypeError) as error:
            raise InputError(f"{path}: not a manifest written by hf_bpe ({error}); remove it or pass --force") from None

    def record(self, index: int, shard: ShardRecord) -> None:
        self.shards[index] = shard

    def save(self) -> None:
        data = {"job": self.job, "shards": {str(index): self.shards[index].to_json() for index in sorted(self.shards)}}
        write_text_atomically(self.path, json.dumps(data, indent=1) + "\n")


def shard_list(split: str, records: Sequence[ShardRecord]) -> list[dict[str, Any]]:
    """The "shards" entry of OUT/SPLIT.json: each shard's file (relative to OUT), token count, documents, sha256."""
    return [{"file": f"{split}/{shard_name(index)}", **record.to_json()} for index, record in enumerate(records)]


def concatenate_shards(out_dir: PathArg, split: str, metadata: dict[str, Any]) -> Path:
    """Write OUT/SPLIT.bin, all shards back to back (temporary name, then rename), checking each shard's sha256."""
    out_dir = Path(out_dir)
    target = out_dir / f"{split}.bin"
    temporary = target.with_name(f".{target.name}.tmp-{uuid.uuid4().hex[:12]}")
    try:
        with open(temporary, "wb") as output:
            for shard in metadata["shards"]:
                digest = hashlib.sha256()
                with open(out_dir / shard["file"], "rb") as file:
                    while block := file.read(_HASH_BLOCK):
                        digest.update(block)
                        output.write(block)
                if digest.hexdigest() != shard["sha256"]:
                    raise InputError(f"{out_dir / shard['file']}: sha256 differs from {split}.json; the shard changed "
                                     f"after it was written (rerun with --force)")
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)
    return target


def load_sharded_tokens(out_dir: PathArg, split: str, metadata: dict[str, Any], *, verify: bool = True
                        ) -> np.ndarray | ShardedTokens:
    """The token ids of a sharded split as one array-like, checked against `metadata` (OUT/SPLIT.json).

    Returns an `np.memmap` over OUT/SPLIT.bin when the run wrote one (`--concatenate`), else a `ShardedTokens` that
    memory-maps each shard and concatenates them lazily. Raises InputError naming the metadata file and the entry for
    a malformed shard entry or a file name outside `out_dir`, and naming the file for a missing shard, a size that
    differs from the metadata, or (with `verify`, see `hf_bpe.data.load.load_tokens`) bytes whose sha256 differs.
    """
    out_dir = Path(out_dir)
    meta_path = out_dir / f"{split}.json"
    dtype = np.dtype(metadata["dtype"])
    shards = metadata.get("shards")
    if metadata.get("layout") != LAYOUT or not isinstance(shards, list):
        raise InputError(f"{meta_path}: not a sharded layout (no \"layout\": \"shards\" and shard list)")
    entries = [_checked_entry(out_dir, meta_path, index, shard) for index, shard in enumerate(shards)]
    total = sum(num_tokens for _, num_tokens, _ in entries)
    if total != metadata["num_tokens"]:
        raise InputError(f"{meta_path}: the shards hold {total} tokens but num_tokens is "
                         f"{metadata['num_tokens']}; rerun the tokenization")
    concatenated = metadata.get("concatenated")
    if concatenated:
        path = path_inside(out_dir, concatenated, meta_path, "concatenated")
        whole = _checked_memmap(path, dtype, total, meta_path.name)
        if verify:
            _verify_spans(path, [(num_tokens * dtype.itemsize, sha256) for _, num_tokens, sha256 in entries],
                          meta_path.name)
        return whole
    arrays = []
    for path, num_tokens, sha256 in entries:
        arrays.append(_checked_memmap(path, dtype, num_tokens, meta_path.name))
        if verify:
            _verify_spans(path, [(num_tokens * dtype.itemsize, sha256)], meta_path.name)
    return ShardedTokens(arrays, dtype)


def is_count(value: Any) -> bool:
    """Whether a JSON value is a number of things: a non-negative integer (not a bool).

    >>> is_count(3), is_count(-1), is_count(True), is_count(2.0)
    (True, False, False, False)
    """
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def path_inside(out_dir: Path, name: Any, described_by: Path, entry: str) -> Path:
    """`out_dir / name` for a file name read from `described_by`, refused unless it stays inside `out_dir`.

    >>> path_inside(Path("out"), "train/part-00000.bin", Path("out/train.json"), "shard 0").as_posix()
    'out/train/part-00000.bin'
    >>> path_inside(Path("out"), "../../etc/passwd", Path("out/train.json"), "shard 0")
    Traceback (most recent call last):
    ...
    hf_bpe.common.errors.InputError: out/train.json: shard 0: '../../etc/passwd' is not a file name inside out; \
only files inside the directory are read
    """
    if not isinstance(name, str) or not name:
        raise InputError(f"{described_by}: {entry}: the file name must be a non-empty string, got {name!r}")
    relative = Path(name)
    path = out_dir / relative
    if relative.is_absolute() or ".." in relative.parts \
            or not path.resolve().is_relative_to(out_dir.resolve()):  # a symlink leading out counts too
        raise InputError(f"{described_by}: {entry}: {name!r} is not a file name inside {out_dir}; only files inside "
                         f"the directory are read")
    return path


def _checked_entry(out_dir: Path, meta_path: Path, index: int, shard: Any) -> tuple[Path, int, str]:
    """(path, number of tokens, sha256) of the metadata's shard entry `index`, or an InputError naming it."""
    if not isinstance(shard, dict):
        preview = repr(shard)
        raise InputError(f"{meta_path}: shard entry {index} is {type(shard).__name__} "
                         f"{preview if len(preview) <= 60 else preview[:57] + '...'}, not an object")
    name = f"shard entry {index}" + (f" ({shard['file']})" if isinstance(shard.get("file"), str) else "")
    for key, valid, expected in (("file", lambda value: isinstance(value, str), "a file name"),
                                 ("num_tokens", is_count, "a non-negative integer"),
                                 ("sha256", _is_sha256, "64 hexadecimal digits")):
        if key not in shard:
            raise InputError(f"{meta_path}: {name} has no {key!r}")
        if not valid(shard[key]):
            raise InputError(f"{meta_path}: {name}: {key!r} must be {expected}, got {shard[key]!r}")
    return path_inside(out_dir, shard["file"], meta_path, name), shard["num_tokens"], shard["sha256"]


def _is_sha256(value: Any) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(char in "0123456789abcdef" for char in value.lower())


def _verify_spans(path: Path, spans: list[tuple[int, str]], described_by: str) -> None:
    """Check that `path` is the concatenation of spans (byte length, sha256), reading it once in 4 MB blocks."""
    with open(path, "rb") as file:
        for length, expected in spans:
            digest = hashlib.sha256()
            remaining = length
            while remaining:
                block = file.read(min(_HASH_BLOCK, remaining))
                if not block:
                    break
                digest.update(block)
                remaining -= len(block)
            if digest.hexdigest() != expected.lower():
                raise InputError(f"{path}: sha256 differs from the one {described_by} records: the file changed "
                                 f"after it was written (rerun the tokenization with --force, or load it with "
                                 f"verify=False to read it as it is)")


def _checked_memmap(path: Path, dtype: np.dtype, num_tokens: int, described_by: str) -> np.ndarray:
    try:
        actual = path.stat().st_size
    except FileNotFoundError:
        raise InputError(f"{path}: no such file, but {described_by} lists it (rerun the tokenization)") from None
    expected = num_tokens * dtype.itemsize
    if actual != expected:
        raise InputError(f"{path}: {actual} bytes, but {described_by} says {num_tokens} {dtype.name} tokens "
                         f"({expected} bytes); rerun the tokenization")
    if num_tokens == 0:
        return np.zeros(0, dtype=dtype)  # an empty file cannot be mapped
    return np.memmap(path, dtype=dtype, mode="r")


class ShardedTokens:
    """Several 1-D arrays seen as their concatenation, without copying: length, dtype, integer and slice indexing
    across array boundaries, index arrays, and `np.asarray` (which does copy everything into one array).

    >>> tokens = ShardedTokens([np.array([1, 2, 3]), np.array([], dtype=int), np.array([4, 5])])
    >>> len(tokens), int(tokens[3]), int(tokens[-1]), tokens[2:4].tolist(), tokens[::2].tolist()
    (5, 4, 5, [3, 4], [1, 3, 5])
    >>> tokens[np.array([4, 0])].tolist(), np.asarray(tokens).tolist()
    ([5, 1], [1, 2, 3, 4, 5])
    """

    def __init__(self, arrays: Sequence[np.ndarray], dtype: np.dtype | None = None) -> None:
        self.arrays = [array for array in arrays if len(array)]
        self.dtype = np.dtype(dtype if dtype is not None else (arrays[0].dtype if arrays else np.uint16))
        # offsets[i] is the position of arrays[i][0]; the last entry is the total length.
        self.offsets = np.cumsum([0] + [len(array) for array in self.arrays], dtype=np.int64)

    def __len__(self) -> int:
        return int(self.offsets[-1])

    @property
    def shape(self) -> tuple[int]:
        return (len(self),)

    @property
    def ndim(self) -> int:
        return 1

    @property
    def size(self) -> int:
        return len(self)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            return self._slice(key)
        if isinstance(key, (list, tuple, np.ndarray)):
            return self._take(np.asarray(key))
        index = operator.index(key)
        length = len(self)
        if index < 0:
            index += length
        if not 0 <= index < length:
            raise IndexError(f"index {key} is out of bounds for {length} tokens")
        shard = int(np.searchsorted(self.offsets, index, side="right")) - 1
        return self.arrays[shard][index - self.offsets[shard]]

    def _slice(self, key: slice) -> np.ndarray:
        start, stop, step = key.indices(len(self))
        if step != 1:
            return self._take(np.arange(start, stop, step, dtype=np.int64))
        if stop <= start:
            return np.zeros(0, dtype=self.dtype)
        first = int(np.searchsorted(self.offsets, start, side="right")) - 1
        last = int(np.searchsorted(self.offsets, stop - 1, side="right")) - 1
        if first == last:  # the usual case (a training window inside one shard): a view, no copy
            return self.arrays[first][start - self.offsets[first]:stop - self.offsets[first]]
        parts = [self.arrays[first][start - self.offsets[first]:]]
        parts.extend(self.arrays[first + 1:last])
        parts.append(self.arrays[last][:stop - self.offsets[last]])
        return np.concatenate(parts)

    def _take(self, indices: np.ndarray) -> np.ndarray:
        if indices.dtype == bool:
            raise IndexError("boolean masks are not supported; use np.asarray(tokens)[mask]")
        indices = indices.astype(np.int64, copy=True)
        length = len(self)
        indices[indices < 0] += length
        if indices.size and (indices.min() < 0 or indices.max() >= length):
            raise IndexError(f"index out of bounds for {length} tokens")
        result = np.empty(indices.shape, dtype=self.dtype)
        shards = np.searchsorted(self.offsets, indices, side="right") - 1
        for shard in np.unique(shards):
            chosen = shards == shard
            result[chosen] = self.arrays[shard][indices[chosen] - self.offsets[shard]]
        return result

    def __iter__(self) -> Any:
        for array in self.arrays:
            yield from array

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        whole = np.concatenate(self.arrays) if self.arrays else np.zeros(0, dtype=self.dtype)
        return whole.astype(dtype, copy=False) if dtype is not None else whole

    def __repr__(self) -> str:
        return f"ShardedTokens({len(self)} {self.dtype.name} tokens in {len(self.arrays)} shards)"


__all__ = ["LAYOUT", "ShardManifest", "ShardRecord", "ShardedTokens", "concatenate_shards", "file_sha256",
           "load_sharded_tokens", "shard_directory", "shard_is_intact", "shard_list", "shard_name", "write_shard"]
