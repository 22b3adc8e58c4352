"""Faults of real `hf-bpe --engine ray` runs (issue 20, case 7): Ray worker processes killed while the command runs,
as the out-of-memory killer or a lost node would. Retrying the lost work is the cluster's business (the worker pool
of hf_bpe.cluster.workers); what is checked here is that whatever happens, the user gets a finished output (exit 0)
or one line and exit code 2, never a traceback, and that the driver leaves no process behind."""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from hf_bpe.cluster.local_cluster import LocalRayCluster  # noqa: E402
from hf_bpe.data.load import load_tokens  # noqa: E402
from hf_bpe.formats.gpt2 import load_gpt2  # noqa: E402
from hf_bpe.formats.hf_directory import save_tokenizer_directory  # noqa: E402
from tests import FIXTURES  # noqa: E402
from tests.cli.faults import (  # noqa: E402
    EOT,
    assert_no_process_left,
    children_of,
    finish,
    start,
    tokenize_arguments,
    write_documents,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="signals and /proc: Linux")


@pytest.fixture(scope="module")
def cluster():
    with LocalRayCluster(num_nodes=1, cpus_per_node=2) as running:
        yield running


def descendants(pids: list[int]) -> list[int]:
    found, todo = [], list(pids)
    while todo:
        children = children_of(todo.pop())
        found += children
        todo += children
    return found


# hf_bpe's actors (`ray::_EncodingWorker.write`...), not Ray's own processes (`ray::DashboardAgent`...).
HF_BPE_ACTOR = re.compile(r"ray::_?[A-Za-z]*Worker\b")


def kill_ray_workers(run, cluster: LocalRayCluster, keep_killing: bool) -> list[str]:
    """SIGKILL hf_bpe's actor processes in the cluster: the first one seen, or every one until `run` ends; the
    command lines of those killed."""
    killed: list[str] = []
    while run.poll() is None and (keep_killing or not killed):
        for pid in descendants([process.pid for process in cluster.processes.values()]):
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            except OSError:
                continue
            if HF_BPE_ACTOR.match(command):
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(command)
                except ProcessLookupError:
                    pass
                if not keep_killing:
                    break
        threading.Event().wait(0.02)
    return killed


def assert_no_traceback(run, stderr: str, command: str) -> None:
    """Exit 0, or exit 2 with the error on the last line; the lines before it are the worker pool's notes of each
    lost worker ("counting: worker 0 did not start (ActorDiedError); ..."), one line each."""
    assert "Traceback" not in stderr and not any(line[:1].isspace() for line in stderr.splitlines()), stderr
    if run.returncode != 0:
        assert run.returncode == 2, stderr
        assert stderr.strip().splitlines()[-1].startswith(f"hf-bpe {command}: error: "), stderr


def test_tokenize_dataset_when_a_ray_worker_is_killed(cluster, tmp_path):
    vocab, merges = load_gpt2(FIXTURES / "train-bpe-reference-vocab.json", FIXTURES / "train-bpe-reference-merges.txt")
    tokenizer_dir = save_tokenizer_directory(tmp_path / "tok", vocab, merges, [EOT])
    documents = write_documents(tmp_path / "docs.jsonl", 2_000)
    out = tmp_path / "out"
    arguments = tokenize_arguments(tokenizer_dir, documents, out, tmp_path / "cache", "--engine", "ray",
                                   "--ray-address", cluster.address)
    cache = arguments.index("--cache-dir")
    run = start(*arguments[:cache], *arguments[cache + 2:], env=cluster.environment())
    killed = kill_ray_workers(run, cluster, keep_killing=False)
    stderr = finish(run)
    assert killed, f"no Ray worker was running to be killed: {stderr}"
    assert_no_traceback(run, stderr, "tokenize-dataset")
    if run.returncode == 0:
        assert len(np.asarray(load_tokens(out, "train"))) > 0
    else:
        assert not (out / "train.json").exists()
    assert_no_process_left(run.pid)


def test_train_while_its_ray_workers_keep_being_killed(cluster, tmp_path):
    out = tmp_path / "tok"
    run = start("train", str(FIXTURES / "tinystories_sample.txt"), str(FIXTURES / "corpus.en"), "--vocab-size",
                "300", "--out", str(out), "--no-progress", "--engine", "ray", "--ray-address", cluster.address,
                env=cluster.environment())
    killed = kill_ray_workers(run, cluster, keep_killing=True)
    stderr = finish(run)
    assert killed, f"no Ray worker was running to be killed: {stderr}"
    assert_no_traceback(run, stderr, "train")
    assert sorted(path.name for path in tmp_path.iterdir()) == (["tok"] if run.returncode == 0 else [])
    assert_no_process_left(run.pid)


@pytest.mark.parametrize("command, advice", [("tokenize-dataset", "rerun the command with --resume: the shards "
                                                                  "already written are kept"),
                                             ("train", "rerun the command (a node that ran out of memory needs "
                                                       "fewer tasks at once, or more memory)")])
def test_a_lost_ray_worker_is_one_line_saying_what_to_do(command: str, advice: str, capsys) -> None:
    import argparse

    from hf_bpe.cli.main import run_reporting_errors

    def run(args: argparse.Namespace) -> int:
        try:
            raise ray.exceptions.WorkerCrashedError()
        except ray.exceptions.RayError as error:
            raise RuntimeError(f"a Ray worker failed: {error}") from error

    assert run_reporting_errors(f"hf-bpe {command}", run, argparse.Namespace(command=command)) == 2
    message = capsys.readouterr().err
    assert message.count("\n") == 1 and message.startswith(f"hf-bpe {command}: error: a Ray worker was lost "
                                                           f"(WorkerCrashedError: ")
    assert message.endswith(f"); {advice}\n")
