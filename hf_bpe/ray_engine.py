"""Training counts and token arrays on a Ray cluster, with the same results as on one machine.

Two entry points, both optional (`pip install "hf_bpe[ray]"`; ray is imported only when they run):

* `RayCountingEngine(address)` is a counting engine for `hf_bpe.count` (`count_pretokens_in_files(...,
  engine=RayCountingEngine(address))`, `train_bpe(..., engine="ray")`): the chunks the local engine would count
  (byte ranges cut at the same safe places) are counted by one Ray actor per cluster CPU, each keeping one
  `PieceCounter` and converting it to pre-token counts once, exactly like a local worker process. The actors then add
  their counts in a tree, level by level (actor a receives actor b's counter by ObjectRef, adds it to its own, and b
  ends), so no process ever holds more than two counters of distinct pre-tokens; only the final sum reaches the
  driver, which runs the merge loop.
* `tokenize_dataset_ray(...)` reads a dataset with Ray Data, cuts its rows into shards of consecutive documents and
  has actors encode each shard and write `OUT/SPLIT/part-NNNNN.bin` (layout in `hf_bpe.shards`); the concatenated
  shards equal the single-machine `.bin` of `hf_bpe.data.tokenize_dataset` exactly.

Ray workers must import the same hf_bpe as the driver: install it on every node (`pip install "hf_bpe[ray]"`, which
also installs its dependencies there), or ship the driver's package directory with the runtime environment,
`ray_session(address, runtime_env=project_runtime_env())` from Python or `ray job submit --runtime-env-json
'{"py_modules": ["/path/to/hf_bpe"]}' -- hf-bpe ...` (the dependencies must still be on the nodes). Workers compare a
hash of their hf_bpe sources with the driver's and refuse to run a different version, since results must match.

A Ray Dataset is counted for training in two lines (`text` being its text column):

    batches = (batch["text"].tolist() for batch in ds.iter_batches(batch_size=1000, batch_format="numpy"))
    counts = count_pretokens_in_iterator(chain.from_iterable(batches), specials, engine=RayCountingEngine())
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

import hf_bpe
from hf_bpe.count import PieceCounter
from hf_bpe.errors import InputError
from hf_bpe.files import write_text_atomically
from hf_bpe.shards import (LAYOUT, ShardManifest, ShardRecord, concatenate_shards, shard_directory, shard_is_intact,
                           shard_list, shard_name, write_shard)

# Tasks in flight per actor: one running, one waiting, so an actor never idles while the driver sends the next.
_IN_FLIGHT_PER_ACTOR = 2
RAY_INSTALL_HINT = "pip install 'hf_bpe[ray]' (or pip install ray)"
# Without documents_per_shard, a split is cut into about this many shards (at most MAX_DOCUMENTS_PER_SHARD each).
_TARGET_SHARDS = 64
MAX_DOCUMENTS_PER_SHARD = 100_000
_MANIFEST_SAVE_SECONDS = 2.0


# --- connecting --------------------------------------------------------------------------------------------------


def require_ray(what: str = "the ray engine") -> ModuleType:
    """The `ray` module; an InputError saying that `what` needs it, and how to install it, when it is missing.

    The one check behind `train_bpe(engine="ray")`, the CLI's `--engine ray` and `ray_session`: this module itself
    imports without ray, so that check can run before any work.
    """
    try:
        import ray
    except ImportError:
        raise InputError(f"{what} needs the ray package: {RAY_INSTALL_HINT}") from None
    return ray


def project_runtime_env() -> dict[str, Any]:
    """The runtime environment that lets Ray workers import this very hf_bpe: the package directory as a py_module."""
    return {"py_modules": [str(Path(hf_bpe.__file__).parent)], "excludes": ["__pycache__", "*.pyc"]}


@contextlib.contextmanager
def ray_session(address: str | None, runtime_env: dict[str, Any] | None = None) -> Iterator[Any]:
    """The `ray` module, connected to the cluster at `address`; a connection made here is closed on exit.

    With `address=None` Ray's own rules apply: RAY_ADDRESS, else the cluster last started on this machine with
    `ray start`, else a new local cluster. An existing connection (`ray.init` called earlier) is used as it is.
    `runtime_env` (e.g. `project_runtime_env()`) is passed to `ray.init`.
    """
    ray = require_ray()
    if ray.is_initialized():
        yield ray
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    check_reachable(address)
    try:
        ray.init(address=address, runtime_env=runtime_env, logging_level=logging.WARNING, log_to_driver=False)
    except (ConnectionError, ValueError, RuntimeError) as error:
        where = f"at {address}" if address else "(RAY_ADDRESS, or a new local cluster)"
        raise InputError(f"could not connect to the Ray cluster {where}: {' '.join(str(error).split())}") from None
    try:
        yield ray
    finally:
        ray.shutdown()


def check_reachable(address: str | None, timeout: float = 10.0) -> None:
    """InputError when nothing listens at a `host:port` (or `ray://host:port`) address: Ray itself would retry for
    minutes. Other forms (None, "auto", "local") are left to Ray.

    >>> check_reachable("127.0.0.1:1")
    Traceback (most recent call last):
    ...
    hf_bpe.errors.InputError: cannot reach the Ray cluster at 127.0.0.1:1 (Connection refused); start it with `ray start --head` or check --ray-address
    """
    import socket

    if not address or ":" not in address:
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not port.isdigit():
        raise InputError(f"--ray-address {address!r} is not host:port")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as error:
        reason = error.strerror or str(error) or type(error).__name__
        raise InputError(f"cannot reach the Ray cluster at {address} ({reason}); start it with `ray start --head` or "
                         f"check --ray-address") from None


def cluster_cpus(ray: Any) -> int:
    """The number of CPUs the connected cluster has (at least 1)."""
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


class LocalRayCluster:
    """A throwaway Ray cluster on this machine's loopback: a head node and `num_nodes - 1` worker nodes joining it
    with `ray start --address`, as on a real cluster (each `ray start --block` is our child process, so stopping the
    cluster ends exactly these processes). For tests and benchmarks; `address` is what `--ray-address` takes.

    >>> with LocalRayCluster(num_nodes=2, cpus_per_node=1) as cluster:  # doctest: +SKIP
    ...     counts = count_pretokens_in_files(paths, engine=RayCountingEngine(cluster.address))
    """

    def __init__(self, num_nodes: int = 2, cpus_per_node: int = 1, start_timeout: float = 120.0,
                 stop_timeout: float = 8.0) -> None:
        self.num_nodes, self.cpus_per_node, self.start_timeout = num_nodes, cpus_per_node, start_timeout
        self.stop_timeout = stop_timeout
        self.processes: list[Any] = []
        self.address = ""
        self.temp_dir = ""

    def environment(self) -> dict[str, str]:
        """Environment variables for the nodes and for drivers joining them: no usage stats; no token
        authentication, which keeps the cluster apart from the token file other clusters on this machine rewrite."""
        return {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}

    def __enter__(self) -> LocalRayCluster:
        import tempfile

        self.temp_dir = tempfile.mkdtemp(prefix="hfbpe-ray-")  # short: Ray's socket paths must fit in 107 bytes
        common = ["--block", "--disable-usage-stats", "--node-ip-address=127.0.0.1",
                  f"--num-cpus={self.cpus_per_node}", f"--temp-dir={self.temp_dir}"]
        try:
            self._start(["--head", "--port=0", "--include-dashboard=false", *common], "head")
            address_file = Path(self.temp_dir) / "ray_current_cluster"
            self.address = self._wait_for(lambda: address_file.is_file() and address_file.read_text().strip())
            for node in range(1, self.num_nodes):
                self._start([f"--address={self.address}", *common], f"worker{node}")
            self._wait_for(lambda: self._alive_nodes() >= self.num_nodes)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    def _start(self, arguments: list[str], name: str) -> None:
        import shutil
        import subprocess
        import sys

        ray_command = shutil.which("ray", path=os.path.dirname(sys.executable)) or shutil.which("ray") or "ray"
        log = open(Path(self.temp_dir) / f"{name}.log", "wb")
        self.processes.append(subprocess.Popen([ray_command, "start", *arguments], stdout=log,
                                               stderr=subprocess.STDOUT, env=self.environment()))
        log.close()

    def _wait_for(self, condition: Callable[[], Any]) -> Any:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if any(process.poll() is not None for process in self.processes):
                raise RuntimeError(f"a ray node failed to start; see the logs in {self.temp_dir}")
            value = condition()
            if value:
                return value
            time.sleep(0.5)
        raise RuntimeError(f"the local ray cluster did not start in {self.start_timeout:.0f} s ({self.temp_dir})")

    def _alive_nodes(self) -> int:
        import subprocess
        import sys

        script = ("import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR'); "
                  "print(sum(node['Alive'] for node in ray.nodes()))")
        result = subprocess.run([sys.executable, "-c", script, self.address], capture_output=True, text=True,
                                env=self.environment(), timeout=self.start_timeout)
        return int(result.stdout.split()[-1]) if result.returncode == 0 and result.stdout.split() else 0

    def _member_pids(self) -> list[int]:
        """The processes of this cluster: those with a file open in its temporary directory (Linux /proc)."""
        if not self.temp_dir or not os.path.isdir("/proc"):
            return []
        members = []
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != os.getpid():
                with contextlib.suppress(OSError):
                    fd_dir = f"/proc/{entry}/fd"
                    if any(os.readlink(f"{fd_dir}/{fd}").startswith(self.temp_dir) for fd in os.listdir(fd_dir)):
                        members.append(int(entry))
        return members

    def stop(self) -> None:
        """Stop the nodes and remove the temporary directory."""
        import shutil
        import signal
        import subprocess

        members = self._member_pids()
        for process in self.processes:  # all at once: each node shuts down on its own
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                # A node exits in 2-3 s, but waits 30 s for worker processes that Ray Data leaves behind; those
                # die with it anyway (each `ray start --block` runs a reaper that ends its node's processes).
                process.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.processes.clear()
        for pid in members:  # agents and workers a node left running (they hold files in our temporary directory)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if self.temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)


# --- counting ----------------------------------------------------------------------------------------------------


class RayCountingEngine:
    """The `hf_bpe.count.CountingEngine` that counts on a Ray cluster (see the module docstring).

    `num_workers` is the number of counting actors (default: one per CPU of the cluster). The result is the same
    Counter the local engine returns: each chunk is counted once by the same `run`, and counts add up exactly.
    """

    def __init__(self, address: str | None = None, *, num_workers: int | None = None) -> None:
        if num_workers is not None and num_workers < 1:
            raise ValueError(f"num_workers must be at least 1, got {num_workers}")
        self.address = address
        self.num_workers = num_workers

    def __repr__(self) -> str:
        return f"RayCountingEngine(address={self.address!r})"

    def count(self, tasks: Iterable[Any], run: Callable[[PieceCounter, Any], int], special_tokens: Sequence[str],
              bar: Any) -> Counter[bytes]:
        """Run `run(counter, task)` for every task on the cluster's actors and return the summed pre-token counts.

        An InputError in a task (say invalid UTF-8) is raised here after the tasks before it have finished, so the
        error reported is the one of the first failing task, as with the local engine.
        """
        with ray_session(self.address) as ray:
            workers = self.num_workers or cluster_cpus(ray)
            if hasattr(tasks, "__len__"):
                workers = min(workers, max(1, len(tasks)))  # type: ignore[arg-type]
            actor_class = ray.remote(num_cpus=1)(_CountingWorker)
            actors = [actor_class.remote(run, list(special_tokens), code_fingerprint()) for _ in range(workers)]
            try:
                errors = _dispatch(ray, actors, "add", ((index, task) for index, task in enumerate(tasks)),
                                   lambda result: bar.update(result[0]))
                if errors:
                    raise InputError(errors[min(errors)])
                for message in _get(ray, [actor.finish.remote() for actor in actors], "counting failed"):
                    if message is not None:
                        raise InputError(message)
                return _sum_in_tree(ray, actors)
            finally:
                for actor in actors:
                    ray.kill(actor)


class _CountingWorker:
    """A Ray actor: one `PieceCounter` fed with many tasks and converted to pre-token counts once (`finish`); then
    the actors add up their counts pairwise (`absorb` another actor's `take`)."""

    def __init__(self, run: Callable[[PieceCounter, Any], int], special_tokens: list[str], fingerprint: str) -> None:
        check_code_fingerprint(fingerprint)
        self.run = run
        self.counter = PieceCounter(special_tokens)
        self.counts: Counter[bytes] = Counter()

    def add(self, index: int, task: Any) -> tuple[int, str | None]:
        """(size for the progress bar, None), or (0, message) when the task's input is bad."""
        try:
            return self.run(self.counter, task), None
        except InputError as error:
            return 0, str(error)

    def finish(self) -> str | None:
        """Convert the pieces to pre-token counts (the counter hands them over and is empty after); an error
        message, or None."""
        try:
            self.counts = self.counter.pretoken_counts()
        except InputError as error:
            return str(error)
        return None

    def take(self) -> Counter[bytes]:
        counts, self.counts = self.counts, Counter()
        return counts

    def absorb(self, other: Counter[bytes]) -> int:
        """Add another actor's counts (passed by ObjectRef) to this one's; the number of distinct pre-tokens."""
        if len(other) > len(self.counts):  # add the smaller counter into the larger
            self.counts, other = other, self.counts
        self.counts.update(other)
        return len(self.counts)


def _sum_in_tree(ray: Any, actors: list[Any]) -> Counter[bytes]:
    """The sum of the actors' counts, added pairwise level by level (actor a absorbs actor b's counts, then b ends),
    so no process holds more than two counters and only the final sum reaches the driver."""
    actors = list(actors)
    while len(actors) > 1:
        pairs = list(zip(actors[::2], actors[1::2]))
        _get(ray, [kept.absorb.remote(given.take.remote()) for kept, given in pairs], "adding counts failed")
        for _, given in pairs:
            ray.kill(given)
        actors = actors[::2]
    return _get(ray, actors[0].take.remote(), "adding counts failed")


def code_fingerprint() -> str:
    """sha256 of hf_bpe's Python sources: workers check they run the same code as the driver (same results)."""
    import hashlib

    digest = hashlib.sha256()
    for path in sorted(Path(hf_bpe.__file__).parent.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def check_code_fingerprint(expected: str) -> None:
    """RuntimeError when this worker's hf_bpe differs from the driver's (`expected`)."""
    if code_fingerprint() != expected:
        raise RuntimeError(f"the hf_bpe on this Ray node ({Path(hf_bpe.__file__).parent}) differs from the "
                           f"driver's: install the same version on every node, or ship the driver's with "
                           f"runtime_env={{'py_modules': [hf_bpe]}}")


def _dispatch(ray: Any, actors: list[Any], method: str, calls: Iterable[tuple[Any, ...]],
              on_result: Callable[[Any], None]) -> dict[int, str]:
    """Call `actor.method(*call)` for every call, keeping each actor busy, and pass each result to `on_result`.

    Results are `(value, error message or None)`; the first element of each call is its index. After the first error,
    no new call is sent; the calls in flight finish. Returns the error messages by call index.
    """
    calls = iter(calls)
    pending: dict[Any, tuple[Any, int]] = {}
    errors: dict[int, str] = {}

    def send(actor: Any) -> None:
        call = next(calls, None)
        if call is not None:
            pending[getattr(actor, method).remote(*call)] = (actor, call[0])

    for actor in actors:
        for _ in range(_IN_FLIGHT_PER_ACTOR):
            send(actor)
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        actor, index = pending.pop(ready[0])
        result = _get(ray, ready[0], "a Ray worker failed")
        if result[1] is not None:
            errors[index] = result[1]
        else:
            on_result(result)
        if not errors:
            send(actor)
    return errors


def _get(ray: Any, ref: Any, what: str) -> Any:
    """`ray.get(ref)`, with a failure of the task or its worker reported as one RuntimeError."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayError as error:
        raise RuntimeError(f"{what}: {error}") from error


# --- token arrays ------------------------------------------------------------------------------------------------


def tokenize_dataset_ray(tokenizer_dir: str | os.PathLike[str], dataset: str, out_dir: str | os.PathLike[str], *,
                         split: str = "train", text_column: str = "text", data_files: Sequence[str] | None = None,
                         config: str | None = None, append_eot: bool = True, allow_special: bool = False,
                         batch_size: int = 1000, ray_address: str | None = None, resume: bool = False,
                         concatenate: bool = False, force: bool = False, progress: bool = True,
                         documents_per_shard: int | None = None) -> dict[str, Any]:
    """Encode `dataset`'s `text_column` on a Ray cluster into `out_dir/<split>/part-NNNNN.bin` + `out_dir/<split>.json`.

    The dataset is named as for `hf_bpe.data.tokenize_dataset`: Parquet and JSON-lines files (`--dataset parquet|json
    --data-files ...`, or one such file) are read by Ray Data on the workers; a `save_to_disk` directory, a Hub name or
    another builder is loaded with `datasets` and handed to Ray Data as Arrow tables (as `ray.data.from_huggingface`
    does), from the driver. The rows are read into the object store (spilled to disk past its memory) before encoding
    starts. Paths must be readable by every node (shared filesystem or URLs), and `out_dir` must be a shared
    directory: workers write the shards.

    Shard k holds documents [k * R, (k + 1) * R) with R = `documents_per_shard` (default: the split cut into about 64
    shards, at most 100,000 documents each), so the concatenated shards equal the single-machine `.bin`. Progress is
    recorded in `out_dir/<split>/manifest.json` as shards finish; with `resume`, shards whose file still has the
    recorded sha256 are kept. `concatenate` also writes `out_dir/<split>.bin`. Returns the metadata written.
    """
    from hf_bpe import __version__
    from hf_bpe.data import ArrayTokenizer, check_output_split
    from hf_bpe.dataset_args import DatasetSource

    if batch_size < 1:
        raise InputError(f"--batch-size must be at least 1, got {batch_size}")
    if documents_per_shard is not None and documents_per_shard < 1:
        raise InputError(f"documents_per_shard must be at least 1, got {documents_per_shard}")
    out_dir = Path(out_dir)
    check_output_split(out_dir, split, force=True)  # the split is a file name; what exists is checked below
    tokenizer = ArrayTokenizer.load(tokenizer_dir, append_eot, allow_special)
    tokenizer_dir, tokenizer_hash, vocab_size, dtype, eot_id, encoder = (
        tokenizer.directory, tokenizer.sha256, tokenizer.vocab_size, tokenizer.dtype, tokenizer.eot_id,
        tokenizer.encoder)
    source = DatasetSource(dataset, split=split, text_column=text_column, data_files=list(data_files or []),
                           config=config)
    job = {"tokenizer_sha256": tokenizer_hash, "dataset": dataset, "config": config,
           "data_files": list(data_files or []), "split": split, "text_column": text_column,
           "append_eot": append_eot, "allow_special": allow_special, "dtype": dtype.name}
    previous = _resumable_manifest(out_dir, split, job, documents_per_shard) if resume else None
    if previous is None:  # a new run (--resume with nothing to resume too) replaces a written split only with force
        check_output_split(out_dir, split, force)

    with ray_session(ray_address) as ray:
        blocks, block_rows = _read_blocks(ray, source)
        num_rows = sum(block_rows)
        if num_rows == 0:
            raise source.no_rows_error()
        manifest = _start_manifest(out_dir, split, job, previous, documents_per_shard, num_rows)
        rows_per_shard = manifest.job["documents_per_shard"]
        num_shards = math.ceil(num_rows / rows_per_shard)
        todo = [index for index in range(num_shards)
                if not _is_done(manifest, index, num_rows, dtype.itemsize)]
        for index in todo:
            manifest.shards.pop(index, None)
        _write_shards(ray, manifest, todo, blocks, block_rows, num_rows,
                      _ShardEncoder(encoder, text_column, eot_id if append_eot else None, dtype, batch_size), progress)

    records = [manifest.shards[index] for index in range(num_shards)]
    metadata = {
        "layout": LAYOUT, "dtype": dtype.name, "num_tokens": sum(record.num_tokens for record in records),
        "num_documents": sum(record.num_documents for record in records),
        "eot_id": eot_id, "append_eot": append_eot, "allow_special": allow_special, "vocab_size": vocab_size,
        "tokenizer": str(tokenizer_dir), "tokenizer_sha256": tokenizer_hash, "dataset": dataset, "config": config,
        "data_files": list(data_files or []), "split": split, "text_column": text_column,
        "hf_bpe_version": __version__, "documents_per_shard": rows_per_shard,
        "shards": shard_list(split, records), "concatenated": None,
    }
    if concatenate:
        metadata["concatenated"] = concatenate_shards(out_dir, split, metadata).name
    write_text_atomically(out_dir / f"{split}.json", json.dumps(metadata, indent=2) + "\n")
    return metadata


def _is_done(manifest: ShardManifest, index: int, num_rows: int, itemsize: int) -> bool:
    """Whether shard `index` is recorded for the rows it must hold and its file still has the recorded checksum."""
    record = manifest.shards.get(index)
    rows = manifest.job["documents_per_shard"]
    return (record is not None and record.first_row == index * rows
            and record.num_documents == min(num_rows, (index + 1) * rows) - index * rows
            and shard_is_intact(manifest.directory / shard_name(index), record, itemsize))


def _resumable_manifest(out_dir: Path, split: str, job: dict[str, Any], documents_per_shard: int | None
                        ) -> ShardManifest | None:
    """The manifest of an earlier run of the same job, or None when there is none; InputError when the recorded run
    was a different job (another tokenizer, dataset, option or shard size), checked before any work."""
    directory = shard_directory(out_dir, split)
    previous = ShardManifest.load(directory) if directory.is_dir() else None
    if previous is None:
        return None
    recorded = dict(previous.job)
    recorded_rows = recorded.pop("documents_per_shard", None)
    if recorded != job or (documents_per_shard is not None and documents_per_shard != recorded_rows):
        changed = sorted(key for key in set(job) | set(recorded) if job.get(key) != recorded.get(key))
        raise InputError(f"{previous.path}: --resume, but the recorded run differs "
                         f"({', '.join(changed) or 'documents_per_shard'}); use --force to start again")
    return previous


def _start_manifest(out_dir: Path, split: str, job: dict[str, Any], previous: ShardManifest | None,
                    documents_per_shard: int | None, num_rows: int) -> ShardManifest:
    """The manifest of this run: `previous` when resuming, else a new one over an emptied OUT/SPLIT.
    OUT/SPLIT.json and OUT/SPLIT.bin go first, so nothing looks finished until this run ends."""
    directory = shard_directory(out_dir, split)
    (out_dir / f"{split}.json").unlink(missing_ok=True)
    (out_dir / f"{split}.bin").unlink(missing_ok=True)
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.iterdir():  # shards being written when a run was killed; all shards unless resuming
        if stale.is_file() and (stale.name.startswith(".part-") or previous is None and (
                stale.name.startswith("part-") or stale.name == "manifest.json")):
            stale.unlink()
    if previous is not None:
        return previous
    rows = documents_per_shard or min(MAX_DOCUMENTS_PER_SHARD, max(1, math.ceil(num_rows / _TARGET_SHARDS)))
    manifest = ShardManifest(directory, {**job, "documents_per_shard": rows})
    manifest.save()
    return manifest


def _read_blocks(ray: Any, source: Any) -> tuple[list[Any], list[int]]:
    """The dataset's rows as ObjectRefs to Arrow tables in dataset order, and the number of rows of each.

    One execution of the dataset: the text column is checked on the blocks themselves (asking Ray Data for the schema
    first would read the data once more)."""
    import ray.data

    context = ray.data.DataContext.get_current()
    saved = context.execution_options.preserve_order, context.enable_progress_bars
    context.execution_options.preserve_order = True  # blocks in dataset order: the shards depend on it
    context.enable_progress_bars = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    try:
        blocks = _ray_dataset(ray, source).to_arrow_refs()
    finally:
        context.execution_options.preserve_order, context.enable_progress_bars = saved
    block_info = ray.remote(num_cpus=0.1)(_block_info)
    infos = ray.get([block_info.remote(block, source.text_column) for block in blocks])
    for _, columns in infos:
        if columns is not None:
            from hf_bpe.dataset_args import missing_column_error

            raise missing_column_error(source.text_column, columns)
    return blocks, [rows for rows, _ in infos]


def _block_info(table: Any, text_column: str) -> tuple[int, list[str] | None]:
    """(rows, None), or (rows, the block's columns) when it has rows but no `text_column`."""
    missing = table.num_rows and text_column not in table.column_names
    return table.num_rows, list(table.column_names) if missing else None


def _ray_dataset(ray: Any, source: Any) -> Any:
    """A Ray Dataset of the source: Parquet and JSON lines read by Ray Data itself, anything else through datasets."""
    import ray.data

    files = list(source.data_files)
    builder = source.name
    if not files and Path(source.name).is_file():
        builder, files = Path(source.name).suffix.lower().lstrip("."), [source.name]
        builder = {"jsonl": "json"}.get(builder, builder)
    readers = {"parquet": ray.data.read_parquet, "json": ray.data.read_json}
    # A split with a slice ("train[:10%]") or a configuration is a datasets feature: then datasets loads it.
    if builder in readers and files and source.config is None and "[" not in source.split:
        paths = _expand_data_files(files)
        try:
            return readers[builder](paths, file_extensions=None)
        except Exception as error:  # pyarrow and Ray raise many types for unreadable files
            raise InputError(f"could not read {source.describe()} with Ray Data: {' '.join(str(error).split())}"
                             ) from None
    # What ray.data.from_huggingface does with a local datasets.Dataset, without its first step: a Hub lookup of
    # the dataset's name (network access, and aiohttp, which ray[data] does not install).
    return ray.data.from_arrow(source.load().with_format("arrow")[:])


def _expand_data_files(files: list[str]) -> list[str]:
    """Local glob patterns expanded in sorted order (as `datasets` does), checked to exist; URLs unchanged."""
    import glob

    paths = []
    for file in files:
        if "://" in file:
            paths.append(file)
        elif any(char in file for char in "*?["):
            matches = sorted(glob.glob(file, recursive=True))
            if not matches:
                raise InputError(f"{file}: no data file matches")
            paths.extend(os.path.abspath(match) for match in matches)
        elif not Path(file).is_file():
            raise InputError(f"{file}: no such data file")
        else:
            paths.append(os.path.abspath(file))
    return paths


class _ShardEncoder:
    """Encodes rows of the text column into ids (eot after each document), in batches, as `data.tokenize_dataset`."""

    def __init__(self, encoder: Any, text_column: str, eot_id: int | None, dtype: np.dtype, batch_size: int) -> None:
        from hf_bpe.data import BatchFlattener

        self.flatten = BatchFlattener(encoder, text_column, eot_id, dtype)
        self.text_column, self.batch_size = text_column, batch_size

    def batches(self, tables: Iterable[Any], first_row: int) -> Iterator[np.ndarray]:
        row = first_row
        for table in tables:
            for start in range(0, table.num_rows, self.batch_size):
                texts = table.column(self.text_column).slice(start, self.batch_size).to_pylist()
                yield self.flatten.encode({self.text_column: texts}, row)
                row += len(texts)


class _EncodingWorker:
    """A Ray actor holding one encoder (its cache stays warm from shard to shard) that writes shards."""

    def __init__(self, shard_encoder: _ShardEncoder, fingerprint: str) -> None:
        check_code_fingerprint(fingerprint)
        self.shard_encoder = shard_encoder

    def write(self, index: int, path: str, first_row: int, slices: list[tuple[int, int]], *tables: Any
              ) -> tuple[ShardRecord | None, str | None]:
        """Encode rows `slices[i]` of `tables[i]` (documents first_row...) into the shard file at `path`."""
        parts = [table.slice(start, end - start) for table, (start, end) in zip(tables, slices)]
        try:
            record = write_shard(path, self.shard_encoder.batches(parts, first_row),
                                 num_documents=sum(end - start for start, end in slices), first_row=first_row)
            return record, None
        except InputError as error:
            return None, str(error)


def _shard_pieces(first_row: int, end_row: int, block_starts: list[int], block_rows: list[int]
                  ) -> list[tuple[int, int, int]]:
    """(block index, start, end) row ranges within blocks that make up rows [first_row, end_row) of the dataset.

    >>> _shard_pieces(3, 7, [0, 5, 5, 9], [5, 0, 4, 2])
    [(0, 3, 5), (2, 0, 2)]
    """
    pieces = []
    for block, (start, rows) in enumerate(zip(block_starts, block_rows)):
        low, high = max(first_row, start), min(end_row, start + rows)
        if low < high:
            pieces.append((block, low - start, high - start))
    return pieces


def _write_shards(ray: Any, manifest: ShardManifest, todo: list[int], blocks: list[Any], block_rows: list[int],
                  num_rows: int, shard_encoder: _ShardEncoder, progress: bool) -> None:
    """Have one encoding actor per cluster CPU write the shards in `todo`, recording each in the manifest."""
    from tqdm.auto import tqdm

    if not todo:
        return
    rows = manifest.job["documents_per_shard"]
    block_starts = np.concatenate([[0], np.cumsum(block_rows)[:-1]]).astype(int).tolist()
    actor_class = ray.remote(num_cpus=1)(_EncodingWorker)
    encoder_ref = ray.put(shard_encoder)
    actors = [actor_class.remote(encoder_ref, code_fingerprint()) for _ in range(min(cluster_cpus(ray), len(todo)))]

    def calls() -> Iterator[tuple[Any, ...]]:
        for index in todo:
            first, end = index * rows, min(num_rows, (index + 1) * rows)
            pieces = _shard_pieces(first, end, block_starts, block_rows)
            yield (index, str(manifest.directory / shard_name(index)), first,
                   [(start, stop) for _, start, stop in pieces], *(blocks[block] for block, _, _ in pieces))

    last_save = 0.0  # the first finished shard is recorded at once, later ones every _MANIFEST_SAVE_SECONDS
    with tqdm(total=num_rows, initial=num_rows - sum(min(num_rows, (i + 1) * rows) - i * rows for i in todo),
              desc=f"tokenizing {manifest.directory.name}", unit="doc", disable=not progress) as bar:

        def record(result: tuple[ShardRecord, None]) -> None:
            nonlocal last_save
            shard = result[0]
            manifest.record(shard.first_row // rows, shard)
            bar.update(shard.num_documents)
            if time.monotonic() - last_save > _MANIFEST_SAVE_SECONDS:
                manifest.save()
                last_save = 0.0  # the first finished shard is recorded at once, later ones every _MANIFEST_SAVE_SECONDS

        try:
            errors = _dispatch(ray, actors, "write", calls(), record)
        finally:
            manifest.save()  # even after Ctrl-C: the shards finished so far are kept by --resume
            for actor in actors:
                ray.kill(actor)
    if errors:
        raise InputError(errors[min(errors)])


__all__ = ["LocalRayCluster", "RayCountingEngine", "code_fingerprint", "project_runtime_env", "ray_session", "tokenize_dataset_ray"]
