"""tokenize-dataset on a Ray cluster: the same `.bin` as the local pipeline, written in shards, streaming.

`tokenize_dataset_ray(...)` reads the dataset on the driver with `datasets`, as the local pipeline does (streamed:
a JSON-lines, Parquet, CSV or text file is parsed a chunk at a time, a `save_to_disk` directory memory-mapped), cuts
its rows into shards of consecutive documents (`hf_bpe.data.shard_cuts`), puts each shard's text into Ray's object
store, and has actors encode it and write `OUT/SPLIT/part-NNNNN.bin` (layout in `hf_bpe.data.shards`); the
concatenated shards equal the single-machine `.bin` of `hf_bpe.data.pipeline.tokenize_dataset` exactly.

Nothing holds the whole dataset: the driver reads a shard only when an actor is free for it, so the object store
holds at most two shards per actor (each at most `shard_bytes` of text, or one longer document), and the actors'
copies of them. Why not Ray Data's readers: its JSON reader parses each file whole in one worker (pyarrow's JSON
reader does not stream), which put a 300 MB file into a 100 MB object store as one block; and reading with
`datasets` gives the local engine's rows by construction. The cost: one process parses the input (pyarrow's JSON
parser, hundreds of MB/s), which limits a cluster to the cores that encode that fast.

Lost workers: a shard whose actor dies (its process killed, its node gone) is written again by another actor from
the same object, which lives on the driver's node (`hf_bpe.cluster.workers`). A killed driver leaves the shards
recorded in `OUT/SPLIT/manifest.json`, which `resume` keeps.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from hf_bpe.cluster.session import cluster_cpus, code_fingerprint, ray_session
from hf_bpe.cluster.workers import IN_FLIGHT_PER_ACTOR, ClusterWorker, WorkerPool
from hf_bpe.common.errors import InputError
from hf_bpe.common.files import write_text_atomically
from hf_bpe.common.locks import output_lock
from hf_bpe.common.outputs import created_directories
from hf_bpe.common.parallel import progress_bar
from hf_bpe.data.encoders import ArrayTokenizer, BatchFlattener
from hf_bpe.data.load import check_output_split
from hf_bpe.data.shard_cuts import ShardCutter, ShardRows
from hf_bpe.data.shards import (
    LAYOUT,
    ShardManifest,
    ShardRecord,
    concatenate_shards,
    shard_directory,
    shard_is_intact,
    shard_list,
    shard_name,
    write_shard,
)
from hf_bpe.data.sources import DatasetSource, is_saved_dataset, missing_column_error

MAX_DOCUMENTS_PER_SHARD = 100_000
# Without shard_bytes, a shard holds at most this much text, less when the driver's object store is small: the
# shards in flight (IN_FLIGHT_PER_ACTOR per actor) may fill half of it.
MAX_SHARD_BYTES = 32 << 20
MIN_SHARD_BYTES = 1 << 20
# The manifest is rewritten at most this often while shards finish (and always at the end).
_MANIFEST_SAVE_SECONDS = 2.0
# Rows read from the dataset at a time on the driver.
_READ_ROWS = 1000


def tokenize_dataset_ray(tokenizer_dir: str | os.PathLike[str], dataset: str, out_dir: str | os.PathLike[str], *,
                         split: str = "train", text_column: str = "text", data_files: Sequence[str] | None = None,
                         config: str | None = None, append_eot: bool = True, allow_special: bool = False,
                         batch_size: int = 1000, ray_address: str | None = None, resume: bool = False,
                         concatenate: bool = False, force: bool = False, progress: bool = True,
                         documents_per_shard: int | None = None, shard_bytes: int | None = None) -> dict[str, Any]:
    """Encode `dataset`'s `text_column` on a Ray cluster into `out_dir/<split>/part-NNNNN.bin` + `out_dir/<split>.json`.

    The dataset is named as for `hf_bpe.data.pipeline.tokenize_dataset` and read on the driver (see the module
    docstring); `out_dir` must be a directory every node can write (shared filesystem): actors write the shards.

    A shard holds consecutive documents: as many as fit in `shard_bytes` of UTF-8 text (at least one) and at most
    `documents_per_shard` (default 100,000), so the concatenated shards equal the single-machine `.bin`; the cuts
    depend only on the rows, and are recorded. Progress is recorded in `out_dir/<split>/manifest.json` as shards
    finish; with `resume`, shards whose file still has the recorded sha256 are kept (the dataset is read again,
    the kept shards are not encoded again). `concatenate` also writes `out_dir/<split>.bin`. `batch_size` is
    accepted for the local engine's sake: the actors encode in groups of text (`BatchFlattener.encode_table`).
    Returns the metadata written.
    """

    if batch_size < 1:
        raise InputError(f"--batch-size must be at least 1, got {batch_size}")
    for name, value in (("documents_per_shard", documents_per_shard), ("shard_bytes", shard_bytes)):
        if value is not None and value < 1:
            raise InputError(f"{name} must be at least 1, got {value}")
    out_dir = Path(out_dir)
    check_output_split(out_dir, split, force=True)  # the split is a file name; what exists is checked below
    # One run per split at a time, from before anything is read to the metadata (as the local engine does);
    # directories made here are removed again if the run fails.
    with created_directories(out_dir), output_lock(out_dir, split, f"split {split!r} of {out_dir}"):
        tokenizer = ArrayTokenizer.load(tokenizer_dir, append_eot, allow_special)
        source = DatasetSource(dataset, split=split, text_column=text_column, data_files=list(data_files or []),
                               config=config, streaming=_can_stream(dataset, split))
        job = {"tokenizer_sha256": tokenizer.sha256, "dataset": dataset, "config": config,
               "data_files": list(data_files or []), "split": split, "text_column": text_column,
               "append_eot": append_eot, "allow_special": allow_special, "dtype": tokenizer.dtype.name}
        previous = _resumable_manifest(out_dir, split, job, documents_per_shard, shard_bytes) if resume else None
        if previous is None:  # a new run (--resume with nothing to resume too) replaces a written split only with force
            check_output_split(out_dir, split, force)
        data = source.load()  # checked before the cluster is reached; a streamed dataset is only opened here

        with ray_session(ray_address) as ray:
            workers = cluster_cpus(ray)
            manifest = _start_manifest(out_dir, split, job, previous, documents_per_shard,
                                       shard_bytes or _default_shard_bytes(ray, workers))
            flatten = BatchFlattener(tokenizer.encoder, text_column, tokenizer.eot_id if append_eot else None,
                                     tokenizer.dtype)
            num_shards = _write_shards(ray, manifest, _text_tables(data, source), flatten, workers, progress)
        if num_shards == 0:
            raise source.no_rows_error()
        _drop_shards_from(manifest, num_shards)

        records = [manifest.shards[index] for index in range(num_shards)]
        metadata = {
            "layout": LAYOUT, "dtype": tokenizer.dtype.name, "num_tokens": sum(record.num_tokens for record in records),
            "num_documents": sum(record.num_documents for record in records),
            **tokenizer.made_from(source, append_eot, allow_special),
            "documents_per_shard": manifest.job["documents_per_shard"],
            "shard_bytes": manifest.job["shard_bytes"], "shards": shard_list(split, records), "concatenated": None,
        }
        if concatenate:
            metadata["concatenated"] = concatenate_shards(out_dir, split, metadata).name
        write_text_atomically(out_dir / f"{split}.json", json.dumps(metadata, indent=2) + "\n")
        return metadata


def _can_stream(dataset: str, split: str) -> bool:
    """Whether `datasets` can stream this dataset (read it a chunk at a time): everything but a `save_to_disk`
    directory (memory-mapped, which is as good) and a sliced split such as "train[:10%]" (not streamable)."""
    return not is_saved_dataset(Path(dataset)) and "[" not in split


def _text_tables(data: Any, source: Any) -> Iterator[Any]:
    """The text column of the dataset as Arrow tables of up to `_READ_ROWS` rows, in dataset order."""
    for table in data.with_format("arrow").iter(batch_size=_READ_ROWS):
        if source.text_column not in table.column_names:
            raise missing_column_error(source.text_column, table.column_names)
        yield table.select([source.text_column])


def _default_shard_bytes(ray: Any, workers: int) -> int:
    """MAX_SHARD_BYTES, or less so that the shards in flight fill at most half the driver node's object store."""
    node_id = ray.get_runtime_context().get_node_id()
    store = next((node["Resources"].get("object_store_memory", 0) for node in ray.nodes()
                  if node["NodeID"] == node_id), 0) or ray.cluster_resources().get("object_store_memory", 0)
    fitting = int(store / 2 / (IN_FLIGHT_PER_ACTOR * workers + 1))
    return max(MIN_SHARD_BYTES, min(MAX_SHARD_BYTES, fitting))


def _resumable_manifest(out_dir: Path, split: str, job: dict[str, Any], documents_per_shard: int | None,
                        shard_bytes: int | None) -> ShardManifest | None:
    """The manifest of an earlier run of the same job, or None when there is none; InputError when the recorded run
    was a different job (another tokenizer, dataset, option or shard size), checked before any work."""
    directory = shard_directory(out_dir, split)
    previous = ShardManifest.load(directory) if directory.is_dir() else None
    if previous is None:
        return None
    recorded = dict(previous.job)
    recorded_sizes = {name: recorded.pop(name, None) for name in ("documents_per_shard", "shard_bytes")}
    asked = {"documents_per_shard": documents_per_shard, "shard_bytes": shard_bytes}
    changed = sorted(key for key in set(job) | set(recorded) if job.get(key) != recorded.get(key))
    changed += [name for name, value in asked.items() if value is not None and value != recorded_sizes[name]]
    if changed or None in recorded_sizes.values():
        raise InputError(f"{previous.path}: --resume, but the recorded run differs "
                         f"({', '.join(changed) or 'shard sizes'}); use --force to start again")
    return previous


def _start_manifest(out_dir: Path, split: str, job: dict[str, Any], previous: ShardManifest | None,
                    documents_per_shard: int | None, shard_bytes: int) -> ShardManifest:
    """The manifest of this run: `previous` when resuming, else a new one over an emptied OUT/SPLIT.
    OUT/SPLIT.json and OUT/SPLIT.bin go first, so nothing looks finished until this run ends."""
    directory = shard_directory(out_dir, split)
    (out_dir / f"{split}.json").unlink(missing_ok=True)
    (out_dir / f"{split}.bin").unlink(missing_ok=True)
    directory.mkdir(parents=True, exist_ok=True)
    _remove_partial_files(directory, all_shards=previous is None)
    if previous is not None:
        return previous
    manifest = ShardManifest(directory, {**job, "documents_per_shard": documents_per_shard or MAX_DOCUMENTS_PER_SHARD,
                                         "shard_bytes": shard_bytes})
    manifest.save()
    return manifest


def _remove_partial_files(directory: Path, all_shards: bool) -> None:
    """Remove the temporary files of shards being written when a run (or a worker) was killed; with `all_shards`,
    the shards and manifest of an earlier run too."""
    for stale in directory.iterdir():
        if stale.is_file() and (stale.name.startswith(".part-") or all_shards and (
                stale.name.startswith("part-") or stale.name == "manifest.json")):
            stale.unlink(missing_ok=True)


def _drop_shards_from(manifest: ShardManifest, num_shards: int) -> None:
    """Forget the shards numbered `num_shards` and up (an earlier run of a longer dataset), and remove their files
    and the temporary files lost workers left."""
    for index in [index for index in manifest.shards if index >= num_shards]:
        del manifest.shards[index]
        (manifest.directory / shard_name(index)).unlink(missing_ok=True)
    manifest.save()
    _remove_partial_files(manifest.directory, all_shards=False)


def _is_done(manifest: ShardManifest, shard: ShardRows, itemsize: int) -> bool:
    """Whether `shard` is recorded for the same rows and its file still has the recorded checksum."""
    record = manifest.shards.get(shard.index)
    return (record is not None and record.first_row == shard.first_row and record.num_documents == shard.num_rows
            and shard_is_intact(manifest.directory / shard_name(shard.index), record, itemsize))


class _EncodingWorker(ClusterWorker):
    """A Ray actor holding one encoder (its cache stays warm from shard to shard) that writes shards."""

    def __init__(self, flatten: Any, fingerprint: str) -> None:
        super().__init__(fingerprint)
        self.flatten = flatten

    def write(self, path: str, first_row: int, table: Any) -> tuple[ShardRecord | None, str | None]:
        """Encode the rows of `table` (documents first_row...) into the shard file at `path`."""
        try:
            record = write_shard(path, self.flatten.encode_table(table, first_row), num_documents=table.num_rows,
                                 first_row=first_row)
            return record, None
        except InputError as error:
            return None, str(error)


def _write_shards(ray: Any, manifest: ShardManifest, tables: Iterator[Any], flatten: Any, workers: int,
                  progress: bool) -> int:
    """Cut the rows into shards and have the actors write those not done yet, recording each in the manifest.
    Returns the number of shards of the dataset."""
    cutter = ShardCutter(manifest.job["documents_per_shard"], manifest.job["shard_bytes"])
    itemsize = int(flatten.dtype.itemsize)
    kept = 0
    shard_sizes: dict[int, int] = {}

    def calls() -> Iterator[tuple[int, tuple[Any, ...]]]:
        nonlocal kept
        for shard in cutter.shards(tables):
            if _is_done(manifest, shard, itemsize):
                kept += 1
                continue
            manifest.shards.pop(shard.index, None)
            shard_sizes[shard.index] = shard.num_bytes
            yield shard.index, (str(manifest.directory / shard_name(shard.index)), shard.first_row,
                                ray.put(shard.table))

    last_save = 0.0  # the first finished shard is recorded at once, later ones every _MANIFEST_SAVE_SECONDS
    pool = WorkerPool(ray, _EncodingWorker, (ray.put(flatten), code_fingerprint()), workers,
                      what="tokenize-dataset", rerun="rerun with --resume: the finished shards are kept",
                      call_name="shard")
    with progress_bar(progress, desc=f"tokenizing {manifest.directory.name}", unit="B", unit_scale=True) as bar:

        def record(index: int, shard: ShardRecord) -> None:
            nonlocal last_save
            manifest.record(index, shard)
            bar.update(shard_sizes.pop(index))
            bar.set_postfix_str(f"{len(manifest.shards)} shards ({kept} kept), {cutter.rows:,} documents read",
                                refresh=False)
            if time.monotonic() - last_save > _MANIFEST_SAVE_SECONDS:
                manifest.save()
                last_save = time.monotonic()

        try:
            errors = pool.run(calls(), "write", record)
        finally:
            manifest.save()  # even after Ctrl-C: the shards finished so far are kept by --resume
            pool.close()
    if errors:
        raise InputError(errors[min(errors)])
    return cutter.num_shards


__all__ = ["MAX_DOCUMENTS_PER_SHARD", "MAX_SHARD_BYTES", "tokenize_dataset_ray"]
