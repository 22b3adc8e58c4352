"""Faults on a real Ray cluster (`ray start` processes on this machine): a worker process killed with SIGKILL, a
node that leaves, a driver killed with SIGKILL, a node running other hf_bpe sources. Each run ends with output
identical to the local engine, or with a one-line error and a `--resume` that finishes it.

One cluster serves the module (two nodes of one CPU); the tests that need a third node add it and stop it. The
faults are timed by polling what the run writes (its manifest, its progress), never by fixed sleeps.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from hf_bpe.cluster.local_cluster import LocalRayCluster
from hf_bpe.common.errors import InputError
from hf_bpe.data.load import load_tokens
from hf_bpe.data.pipeline import tokenize_dataset
from hf_bpe.data.ray_tokenize import tokenize_dataset_ray
from hf_bpe.data.shards import ShardManifest, shard_name
from hf_bpe.formats.gpt2 import load_gpt2
from hf_bpe.formats.hf_directory import save_tokenizer_directory
from hf_bpe.train.counting.count import count_pretokens_in_files
from hf_bpe.train.counting.ray_counting import RayCountingEngine
from tests import FIXTURES, REPO
from tests.cluster import connected_cluster

ray = pytest.importorskip("ray")  # hf_bpe imports ray only when a Ray engine runs

EOT = "<|endoftext|>"
# Shards of this many documents: about 40 shards, so that a fault lands with most of them still to do.
DOCUMENTS_PER_SHARD = 150
POLL_SECONDS = 0.02
DEADLINE_SECONDS = 300


@pytest.fixture(scope="module")
def cluster():
    with connected_cluster(100 << 20) as running:
        yield running


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    vocab, merges = load_gpt2(FIXTURES / "train-bpe-reference-vocab.json", FIXTURES / "train-bpe-reference-merges.txt")
    return save_tokenizer_directory(tmp_path_factory.mktemp("tokenizer") / "tok", vocab, merges, [EOT])


def varied_documents(count: int, seed: int = 0) -> list[str]:
    """Documents of words with numbers glued on, so that the encoders' caches rarely help and a run takes a while."""
    words = (FIXTURES / "corpus.en").read_text(encoding="utf-8").split()
    rng = random.Random(seed)
    return [" ".join(rng.choice(words) + str(rng.randrange(10**6)) for _ in range(rng.randrange(100, 600)))
            for _ in range(count)]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path) -> tuple[Path, bytes]:
    """A JSON-lines dataset of about 40 shards, and the local engine's .bin of it."""
    directory = tmp_path_factory.mktemp("dataset")
    source = directory / "docs.jsonl"
    documents = varied_documents(40 * DOCUMENTS_PER_SHARD)
    source.write_text("".join(json.dumps({"text": text}) + "\n" for text in documents), encoding="utf-8")
    tokenize_dataset(tokenizer_dir, "json", directory / "local", data_files=[str(source)], num_proc=2, progress=False)
    return source, (directory / "local" / "train.bin").read_bytes()


def wait_for(condition, what: str, process: subprocess.Popen | None = None, thread: threading.Thread | None = None):
    """Poll `condition` until it is true; fail if the run ended first (too fast to fault) or after the deadline."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if process is not None and process.poll() is not None or thread is not None and not thread.is_alive():
            pytest.fail(f"the run ended before {what}")
        time.sleep(POLL_SECONDS)
    pytest.fail(f"timed out waiting for {what}")


def recorded_shards(out: Path) -> dict:
    try:
        manifest = ShardManifest.load(out / "train")
    except (InputError, OSError):  # being replaced at this moment
        return {}
    return manifest.shards if manifest is not None else {}


def tokenize_in_thread(cluster, tokenizer_dir, source: Path, out: Path) -> tuple[threading.Thread, dict]:
    """`tokenize_dataset_ray` of `source` into `out` on `cluster`, running in a thread while the test harms the job;
    `finished` gives its result or raises its error."""
    outcome: dict = {}

    def target() -> None:
        try:
            outcome["value"] = tokenize_dataset_ray(tokenizer_dir, "json", out, data_files=[str(source)],
                                                    ray_address=cluster.address,
                                                    documents_per_shard=DOCUMENTS_PER_SHARD, progress=False)
        except BaseException as error:  # reported by the test
            outcome["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, outcome


def finished(thread: threading.Thread, outcome: dict):
    thread.join(DEADLINE_SECONDS)
    assert not thread.is_alive(), "the run did not finish"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def run_cli(*arguments: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hf_bpe.cli", *arguments], capture_output=True, text=True,
                          cwd=cwd, timeout=DEADLINE_SECONDS)


# --- a worker process killed ---------------------------------------------------------------------------------------


def test_ray_tokenize_survives_a_worker_killed_mid_job(cluster, tokenizer_dir, dataset, tmp_path, caplog):
    source, expected = dataset
    out = tmp_path / "out"
    thread, outcome = tokenize_in_thread(cluster, tokenizer_dir, source, out)
    with caplog.at_level(logging.WARNING, logger="hf_bpe.cluster"):
        wait_for(lambda: recorded_shards(out), "a shard was written", thread=thread)
        [victim, *_] = wait_for(lambda: cluster.worker_pids("ray::_EncodingWorker"), "an encoding actor", thread=thread)
        os.kill(victim, signal.SIGKILL)
        metadata = finished(thread, outcome)
    assert np.asarray(load_tokens(out, "train")).tobytes() == expected
    assert len(metadata["shards"]) == 40
    assert any(f"pid {victim}" in record.getMessage() for record in caplog.records), caplog.text
    assert not [path for path in (out / "train").iterdir() if path.name.startswith(".")]


class KillAWorkerAfter:
    """A progress bar for `RayCountingEngine.count` that SIGKILLs a counting actor's process once `chunks` chunks
    are counted: mid-job, whatever the machine's speed."""

    def __init__(self, cluster: LocalRayCluster, chunks: int) -> None:
        self.cluster, self.chunks, self.updates, self.killed = cluster, chunks, 0, 0

    def update(self, size: int) -> None:
        self.updates += 1
        if self.updates == self.chunks:
            [self.killed, *_] = self.cluster.worker_pids("ray::_CountingWorker")
            os.kill(self.killed, signal.SIGKILL)


def test_ray_counting_survives_a_worker_killed_mid_job(cluster, dataset):
    from hf_bpe.train.counting.count import _FileTask, find_chunk_boundaries

    source, _ = dataset
    size = source.stat().st_size
    with open(source, "rb") as file:
        cuts = find_chunk_boundaries(file, size, 1 << 18, [EOT.encode()])
    tasks = [(str(source), start, end) for start, end in zip(cuts, cuts[1:])]
    engine = RayCountingEngine(cluster.address)
    bar = KillAWorkerAfter(cluster, chunks=len(tasks) // 3)
    counts = engine.count(tasks, _FileTask("strict"), [EOT], bar)
    assert counts == count_pretokens_in_files([source], [EOT], chunk_bytes=1 << 18, num_workers=1, progress=False)
    assert bar.killed and any(f"pid {bar.killed}" in message for message in engine.lost), engine.lost
    assert bar.updates > len(tasks)  # the chunks of the killed worker were counted again


# --- the driver killed -------------------------------------------------------------------------------------------


def test_ray_resume_after_the_driver_is_killed_keeps_the_finished_shards(cluster, tokenizer_dir, dataset, tmp_path):
    source, expected = dataset
    out = tmp_path / "out"
    script = ("import sys; from hf_bpe.data.ray_tokenize import tokenize_dataset_ray; "
              "tokenize_dataset_ray(sys.argv[1], 'json', sys.argv[2], data_files=[sys.argv[3]], "
              f"ray_address=sys.argv[4], documents_per_shard={DOCUMENTS_PER_SHARD}, progress=False)")
    driver = subprocess.Popen([sys.executable, "-c", script, str(tokenizer_dir), str(out), str(source),
                               cluster.address], cwd=REPO, env=cluster.environment())
    try:
        wait_for(lambda: recorded_shards(out), "a shard was recorded", process=driver)
        driver.send_signal(signal.SIGKILL)
        driver.wait(DEADLINE_SECONDS)
    finally:
        if driver.poll() is None:
            driver.kill()
    recorded = recorded_shards(out)
    assert 1 <= len(recorded) < 40
    # Nothing looks finished: no split metadata, and every shard the manifest names is whole.
    assert not (out / "train.json").exists() and not (out / "train.bin").exists()
    kept = {index: (out / "train" / shard_name(index)).stat().st_ino for index in recorded}

    result = run_cli("tokenize-dataset", "--tokenizer", str(tokenizer_dir), "--dataset", "json", "--data-files",
                     str(source), "--out", str(out), "--engine", "ray", "--ray-address", cluster.address,
                     "--resume", "--no-progress")
    assert result.returncode == 0, result.stderr
    assert np.asarray(load_tokens(out, "train")).tobytes() == expected
    assert {index: (out / "train" / shard_name(index)).stat().st_ino for index in kept} == kept
    assert not [path for path in (out / "train").iterdir() if path.name.startswith(".")]


# --- another version on a node -----------------------------------------------------------------------------------


def test_ray_refuses_a_node_with_other_hf_bpe_sources(cluster, dataset, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(REPO / "hf_bpe", other / "hf_bpe", ignore=shutil.ignore_patterns("__pycache__"))
    with open(other / "hf_bpe" / "train" / "piece_counter.py", "a", encoding="utf-8") as file:
        file.write("\n# a change on this node only\n")
    cluster.add_node("other-version", env={"PYTHONPATH": str(other)})
    try:
        # One actor per CPU and one CPU per node (and more 1 MB chunks than CPUs): an actor runs on the node with
        # the other sources. The driver runs from elsewhere than the repository, whose directory Ray would put on
        # the workers' path.
        result = run_cli("train", str(dataset[0]), "--vocab-size", "300", "--engine", "ray",
                         "--ray-address", cluster.address, "--out", str(tmp_path / "tok"), "--no-progress",
                         cwd=tmp_path)
    finally:
        cluster.stop_node("other-version")
    assert result.returncode == 2, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert "differs from the driver's" in last and str(other / "hf_bpe") in last, result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "tok").exists()


# --- a node that leaves (last: the cluster notices a killed node only after its health checks) ---------------


def test_ray_tokenize_finishes_when_a_node_leaves_mid_job(cluster, tokenizer_dir, dataset, tmp_path, caplog):
    source, expected = dataset
    cluster.add_node("leaving")
    out = tmp_path / "out"
    thread, outcome = tokenize_in_thread(cluster, tokenizer_dir, source, out)
    with caplog.at_level(logging.WARNING, logger="hf_bpe.cluster"):
        wait_for(lambda: recorded_shards(out), "a shard was written", thread=thread)
        wait_for(lambda: cluster.worker_pids("ray::_EncodingWorker.write", node="leaving"),
                 "the third node writing a shard", thread=thread)
        cluster.stop_node("leaving", kill=True)  # every process of the node, in one instant
        finished(thread, outcome)
    assert np.asarray(load_tokens(out, "train")).tobytes() == expected
    assert "lost worker" in caplog.text  # the third node's actor, whose shards the others wrote
