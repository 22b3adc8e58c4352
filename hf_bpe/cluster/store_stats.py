"""How much of a Ray cluster's object store a job uses, from Ray's own figures: the bytes in the object stores of all
nodes, and the bytes spilled to disk.

For tests and benchmarks: `ObjectStoreMonitor` samples while a job runs and keeps the peaks.

>>> with ObjectStoreMonitor(spill_root=cluster.temp_dir) as monitor:  # doctest: +SKIP
...     tokenize_dataset_ray(...)
>>> monitor.peak_used_bytes, monitor.peak_spilled_bytes  # doctest: +SKIP
(41943040, 0)

The bytes in use are Ray's `object_store_memory` resource: its total minus what is available, which every raylet
reports to the cluster as its store fills (what `ray status` shows as "object_store_memory" usage). Spilled bytes
are the sizes of the files in the nodes' spill directories (`ray_spilled_objects_<node>` in the session directory),
which Ray writes as it spills and deletes as the spilled objects are freed. (`ray memory --stats-only` gives the
same figures through Ray's gRPC client, which the `ray[data]` extra does not install.)

What is not measured: the memory of the worker processes themselves (their heaps, where Ray Data's readers parse
files), and a peak shorter than the sampling interval (the objects of a streaming job live for seconds).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StoreStats:
    """The object stores of all nodes at one moment: bytes in use, their capacity, and bytes in spill files."""

    used_bytes: int
    capacity_bytes: int
    spilled_bytes: int


def store_stats(spill_root: str | os.PathLike[str] | None = None) -> StoreStats:
    """The object-store use of the cluster this process is connected to (`ray.init`), and the bytes in the spill
    files under `spill_root` (a node's `--temp-dir`; 0 without it)."""
    import ray

    capacity = int(ray.cluster_resources().get("object_store_memory", 0))
    available = int(ray.available_resources().get("object_store_memory", 0))
    return StoreStats(max(0, capacity - available), capacity, spilled_bytes(spill_root) if spill_root else 0)


def spilled_bytes(spill_root: str | os.PathLike[str]) -> int:
    """The bytes in Ray's spill files under `spill_root`: in its sessions' (`session_*`, each once: the
    `session_latest` link is not followed) `ray_spilled_objects_*` directories."""
    total = 0
    for session in _directories(spill_root, "session_"):
        for directory in _directories(session, "ray_spilled_objects_"):
            for entry in _entries(directory):
                try:
                    total += entry.stat().st_size
                except OSError:  # deleted while we looked: the object was freed
                    continue
    return total


def _directories(parent: str | os.PathLike[str], prefix: str) -> list[str]:
    """The directories (not links) in `parent` whose names start with `prefix`."""
    return [entry.path for entry in _entries(parent) if entry.name.startswith(prefix)
            and entry.is_dir(follow_symlinks=False)]


def _entries(directory: str | os.PathLike[str]) -> list[os.DirEntry[str]]:
    """The entries of `directory`, or none once it is gone: Ray removes spill directories, and sessions, while a
    monitor looks."""
    try:
        with os.scandir(directory) as entries:
            return list(entries)
    except FileNotFoundError:
        return []


class ObjectStoreMonitor:
    """Samples `store_stats` every `interval` seconds in a thread while the block runs (the process must be connected
    to the cluster). `peak_used_bytes` is the largest object-store use seen, `peak_spilled_bytes` the most bytes seen
    in spill files; `samples` counts the samples taken and `failed_samples` those that failed (a node stopping)."""

    def __init__(self, spill_root: str | os.PathLike[str] | None = None, interval: float = 0.1) -> None:
        self.spill_root, self.interval = spill_root, interval
        self.peak_used_bytes = self.peak_spilled_bytes = self.capacity_bytes = 0
        self.samples = self.failed_samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="object-store-monitor", daemon=True)

    def __enter__(self) -> ObjectStoreMonitor:
        self._record()
        self._thread.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._stop.set()
        self._thread.join()
        self._record()

    def _record(self) -> None:
        try:
            stats = store_stats(self.spill_root)
        except Exception:  # Ray raises many types while a node leaves
            self.failed_samples += 1
            return
        self.samples += 1
        self.peak_used_bytes = max(self.peak_used_bytes, stats.used_bytes)
        self.peak_spilled_bytes = max(self.peak_spilled_bytes, stats.spilled_bytes)
        self.capacity_bytes = stats.capacity_bytes

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._record()


__all__ = ["ObjectStoreMonitor", "StoreStats", "spilled_bytes", "store_stats"]
