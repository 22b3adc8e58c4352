"""Faults of real `hf-bpe` processes (issue 20): runs started together on one output, SIGKILL and SIGTERM of the
command and of its workers, running out of memory. Each test checks the message and exit code, what is left on disk
and that no process is left behind."""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from hf_bpe.data.load import load_tokens
from hf_bpe.formats.gpt2 import load_gpt2
from hf_bpe.formats.hf_directory import save_tokenizer_directory
from tests import FIXTURES, REPO, SHARED_CORPORA
from tests.cli.faults import (
    EOT,
    assert_no_process_left,
    children_of,
    finish,
    hidden,
    one_line,
    session_processes,
    start,
    tokenize_arguments,
    wait_for,
    write_documents,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="signals and /proc: Linux")

# Long enough that counting it with two workers is still going when the test acts on it.
LARGE_CORPUS = SHARED_CORPORA / "en_pydocs.txt"
# Long enough that encoding it for a model card takes many seconds.
EVAL_CORPUS = SHARED_CORPORA / "en_gcide.txt"
needs_corpora = pytest.mark.skipif(not LARGE_CORPUS.is_file() or not EVAL_CORPUS.is_file(),
                                   reason="needs the shared corpora")


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    vocab, merges = load_gpt2(FIXTURES / "train-bpe-reference-vocab.json", FIXTURES / "train-bpe-reference-merges.txt")
    return save_tokenizer_directory(tmp_path_factory.mktemp("tokenizer") / "tok", vocab, merges, [EOT])


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About 2.5 MB of JSON lines: a second or two of encoding with two processes."""
    return write_documents(tmp_path_factory.mktemp("documents") / "docs.jsonl", DOCUMENTS)


@pytest.fixture(scope="module")
def few_documents(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_documents(tmp_path_factory.mktemp("few") / "docs.jsonl", 50, seed=1)


DOCUMENTS = 4_000


def train_arguments(corpus: Path | str, out: Path, *extra: str) -> list[str]:
    return ["train", str(corpus), "--vocab-size", "300", "--out", str(out), "--no-progress", *extra]


def train_with_two_workers_started(out: Path) -> subprocess.Popen:
    """`hf-bpe train` of the large corpus into `out` with 2 counting workers, once both have started."""
    run = start(*train_arguments(LARGE_CORPUS, out, "--workers", "2"))
    wait_for(lambda: len(children_of(run.pid)) >= 2, 60, "the counting workers started", run)
    return run


def ids_written(out: Path) -> bool:
    return any(path.stat().st_size for path in out.glob(".train.tmp-*/ids-*.bin"))


# --------------------------------------------------------------------------------------- 1: runs started together


def test_two_tokenize_runs_on_one_split_started_together(tokenizer_dir, documents, tmp_path):
    out = tmp_path / "out"
    runs = [start(*tokenize_arguments(tokenizer_dir, documents, out, tmp_path / f"cache{index}"))
            for index in range(2)]
    errors = [finish(run) for run in runs]
    codes = sorted(run.returncode for run in runs)
    assert codes == [0, 2], errors
    loser = runs[[run.returncode for run in runs].index(2)]
    message = one_line(errors[runs.index(loser)])
    other = next(run for run in runs if run is not loser).pid
    assert message in (f"hf-bpe tokenize-dataset: error: another hf-bpe run (process {other}) is writing split "
                       f"'train' of {out}; wait for it to finish, or choose another output",
                       f"hf-bpe tokenize-dataset: error: {out / 'train.bin'}: split 'train' was already written to "
                       f"{out} (use --force to replace it, or another --split or --out)"), message
    assert sorted(path.name for path in out.iterdir()) == ["train.bin", "train.json"]
    metadata = json.loads((out / "train.json").read_text())
    assert len(load_tokens(out, "train")) == metadata["num_tokens"] and metadata["num_documents"] == DOCUMENTS
    for run in runs:
        assert_no_process_left(run.pid)


def test_two_train_runs_on_one_out_started_together(tmp_path):
    out = tmp_path / "tok"
    runs = [start(*train_arguments(FIXTURES / "corpus.en", out)) for _ in range(2)]
    errors = [finish(run) for run in runs]
    assert sorted(run.returncode for run in runs) == [0, 2], errors
    loser = [run.returncode for run in runs].index(2)
    message = one_line(errors[loser])
    assert message in (f"hf-bpe train: error: another hf-bpe run (process {runs[1 - loser].pid}) is writing {out}; "
                       f"wait for it to finish, or choose another output",
                       f"hf-bpe train: error: {out}: directory exists and is not empty (use --force to replace "
                       f"it)"), message
    assert sorted(path.name for path in tmp_path.iterdir()) == ["tok"]  # no .tok.tmp-PID, .tok.old-PID, lock
    assert (out / "vocab.json").is_file() and (out / "tokenizer.json").is_file()
    for run in runs:
        assert_no_process_left(run.pid)


# ---------------------------------------------------------------------------- 4, 5: SIGKILL leaves no process


def test_sigkill_of_tokenize_dataset_kills_its_workers_and_the_next_run_removes_the_leftovers(
        tokenizer_dir, documents, few_documents, tmp_path):
    out = tmp_path / "out"
    run = start(*tokenize_arguments(tokenizer_dir, documents, out, tmp_path / "cache", "--num-proc", "2"))
    wait_for(lambda: ids_written(out), 120, "ids were written", run)
    assert len(session_processes(run.pid)) >= 3  # the command, datasets' manager and its two pool workers
    run.send_signal(signal.SIGKILL)  # the command only, as the out-of-memory killer would
    run.wait()
    assert_no_process_left(run.pid)
    # What a killed run leaves: its run directory (with the ids written so far) and its free lock file.
    assert hidden(out) == [".train.lock", f".train.tmp-{run.pid}"]
    assert not (out / "train.bin").exists() and not (out / "train.json").exists()

    rerun = start(*tokenize_arguments(tokenizer_dir, few_documents, out, tmp_path / "cache"))
    assert "wrote" in finish(rerun) and rerun.returncode == 0
    assert sorted(path.name for path in out.iterdir()) == ["train.bin", "train.json"]
    assert_no_process_left(rerun.pid)


@needs_corpora
def test_sigkill_of_train_while_counting_kills_its_workers_and_the_next_run_removes_the_leftovers(tmp_path):
    out = tmp_path / "tok"
    run = train_with_two_workers_started(out)
    run.send_signal(signal.SIGKILL)
    run.wait()
    assert_no_process_left(run.pid)
    assert hidden(tmp_path) == [".tok.lock", f".tok.tmp-{run.pid}"] and not out.exists()

    rerun = start(*train_arguments(FIXTURES / "corpus.en", out))
    assert "wrote" in finish(rerun) and rerun.returncode == 0
    assert sorted(path.name for path in tmp_path.iterdir()) == ["tok"]
    assert_no_process_left(rerun.pid)


# ------------------------------------------------------------------------------------ 6: SIGTERM is like Ctrl-C


@needs_corpora
@pytest.mark.parametrize("to_group", [True, False], ids=["to the group, as timeout and Slurm send it",
                                                         "to the command only, as Kubernetes sends it"])
def test_sigterm_while_train_counts(to_group, tmp_path):
    out = tmp_path / "tok"
    run = train_with_two_workers_started(out)
    (os.killpg if to_group else os.kill)(run.pid, signal.SIGTERM)
    assert one_line(finish(run)) == "hf-bpe train: terminated (SIGTERM); nothing was written"
    assert run.returncode == 143
    assert list(tmp_path.iterdir()) == []
    assert_no_process_left(run.pid)


@pytest.mark.parametrize("extra", [["--num-proc", "2"], ["--streaming", "--num-proc", "2"]],
                         ids=["map", "streaming"])
def test_sigterm_while_tokenize_dataset_encodes(extra, tokenizer_dir, documents, tmp_path):
    out = tmp_path / "out"
    run = start(*tokenize_arguments(tokenizer_dir, documents, out, tmp_path / "cache", *extra))
    wait_for(lambda: any(path.stat().st_size for path in out.glob(".train.tmp-*/*.bin")), 120, "ids were written",
             run)
    os.kill(run.pid, signal.SIGTERM)
    assert one_line(finish(run)) == "hf-bpe tokenize-dataset: terminated (SIGTERM); nothing was written"
    assert run.returncode == 143
    assert not out.exists()  # the run created it: removed with everything in it
    assert_no_process_left(run.pid)


@needs_corpora
def test_sigterm_while_card_evaluates(tmp_path):
    directory = tmp_path / "tok"
    assert subprocess.run([sys.executable, "-m", "hf_bpe.cli", *train_arguments(FIXTURES / "corpus.en", directory)],
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True).returncode == 0
    before = {path.name: path.read_bytes() for path in directory.iterdir()}
    run = start("card", str(directory), "--eval-corpus", str(EVAL_CORPUS))
    time.sleep(3)  # it is encoding the evaluation corpus
    os.kill(run.pid, signal.SIGTERM)
    stderr = finish(run)
    if run.returncode == 0:
        pytest.skip("the card was written before the signal came")
    assert one_line(stderr) == "hf-bpe card: terminated (SIGTERM); nothing was written" and run.returncode == 143
    assert {path.name: path.read_bytes() for path in directory.iterdir()} == before
    assert_no_process_left(run.pid)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("outcome", ["finished", "failed"])
def test_a_signal_while_the_interpreter_exits_keeps_the_exit_code(tmp_path, signum, outcome):
    # The signal comes from an atexit hook: after the run has decided its exit code, as Python exits.
    corpus = FIXTURES / "corpus.en" if outcome == "finished" else tmp_path / "missing.txt"
    program = ("import atexit, os, sys, time\n"
               "from hf_bpe.cli.main import main\n"
               f"atexit.register(lambda: (os.kill(os.getpid(), {int(signum)}), time.sleep(0.5)))\n"
               "sys.exit(main())\n")
    run = subprocess.run([sys.executable, "-c", program, *train_arguments(corpus, tmp_path / "tok")],
                         env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120)
    assert run.returncode == (0 if outcome == "finished" else 2), run.stderr
    assert len(run.stderr.splitlines()) == 1 and "Traceback" not in run.stderr, run.stderr


# --------------------------------------------------------------------------- 7: the unexpected is one line too


@needs_corpora
def test_a_counting_worker_killed_by_the_oom_killer_is_one_line(tmp_path):
    out = tmp_path / "tok"
    run = train_with_two_workers_started(out)
    os.kill(children_of(run.pid)[0], signal.SIGKILL)  # what the out-of-memory killer sends
    message = one_line(finish(run))
    assert re.fullmatch(r"hf-bpe train: error: a pre-token counting worker process died \(killed by SIGKILL, which "
                        r"the out-of-memory killer sends\); fewer workers \(num_workers, --workers\) need less "
                        r"memory, and num_workers=1 counts in this process", message), message
    assert run.returncode == 2
    assert list(tmp_path.iterdir()) == []
    assert_no_process_left(run.pid)



@pytest.mark.parametrize("extra, victim", [([], min), ([], max), (["--streaming"], min)],
                         ids=["map-worker", "map-manager", "streaming"])
def test_a_tokenize_dataset_worker_killed_by_the_oom_killer_is_one_line(extra, victim, tokenizer_dir, tmp_path):
    # Enough documents that the workers are still encoding when the first ids are out (several seconds of work).
    documents = write_documents(tmp_path / "docs.jsonl", 5 * DOCUMENTS)
    out = tmp_path / "out"
    run = start(*tokenize_arguments(tokenizer_dir, documents, out, tmp_path / "cache", "--num-proc", "2", *extra))
    wait_for(lambda: any(path.stat().st_size for path in out.glob(".train.tmp-*/*.bin")), 120, "ids were written",
             run)
    # The first child is a pool worker; with datasets.map, the last one its manager, forked after the pool.
    os.kill(victim(children_of(run.pid)), signal.SIGKILL)
    message = one_line(finish(run))
    how = ("a process of Dataset.map(num_proc=...) died" if not extra else
           "a worker process died (killed by SIGKILL, which the out-of-memory killer sends)")
    assert message == (f"hf-bpe tokenize-dataset: error: {how}; if it ran out of memory, try fewer --num-proc, a "
                       "smaller --batch-size or a machine with more memory")
    assert run.returncode == 2
    assert not out.exists()
    assert_no_process_left(run.pid)

def test_a_memory_error_is_one_line(tmp_path):
    """A corpus of one 30 MB word under an address-space limit a few hundred MB above what a small run needs."""
    probe = subprocess.run(
        [sys.executable, "-c", "import sys; from hf_bpe.cli.main import main; code = main(sys.argv[1:]); "
                               "print(open('/proc/self/status').read().split('VmPeak:')[1].split()[0]); sys.exit(code)",
         *train_arguments(FIXTURES / "corpus.en", tmp_path / "small")],
        env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True)
    assert probe.returncode == 0, probe.stderr
    limit = (int(probe.stdout.split()[-1]) << 10) + (400 << 20)
    corpus = tmp_path / "one-word.txt"
    corpus.write_text("a" * 30_000_000)
    out = tmp_path / "tok"

    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    run = start(*train_arguments(corpus, out, "--workers", "1"), preexec_fn=limit_memory)
    message = finish(run).strip().splitlines()[-1]
    assert message == "hf-bpe train: error: out of memory; try fewer --workers or a machine with more memory"
    assert run.returncode == 2
    assert sorted(path.name for path in tmp_path.iterdir()) == ["one-word.txt", "small"]
    assert_no_process_left(run.pid)


# ------------------------------------------------------------------------------- 10: checks before long work


def test_out_under_a_regular_file_is_refused_before_the_dataset_is_converted(tokenizer_dir, documents, tmp_path):
    (tmp_path / "afile").write_text("not a directory")
    out = tmp_path / "afile" / "out"
    run = start(*tokenize_arguments(tokenizer_dir, documents, out, tmp_path / "cache"))
    assert one_line(finish(run)) == (f"hf-bpe tokenize-dataset: error: {out}: cannot create the directory: "
                                     f"{tmp_path / 'afile'} exists and is not a directory")
    assert run.returncode == 2
    assert sorted(path.name for path in tmp_path.iterdir()) == ["afile"]  # no datasets cache: nothing converted


@pytest.mark.parametrize("command", ["tokenize-dataset", "tokenize-dataset --streaming", "train --streaming"])
def test_a_malformed_json_lines_row_is_named_by_file_and_line(command, tokenizer_dir, tmp_path):
    # A streamed split is read only as it is iterated: there datasets' error names a row of a chunk, and logs a line.
    data = tmp_path / "docs.jsonl"
    data.write_text('{"text": "one"}\n{"text": "two"}\n{"text": "three" "x"}\n', encoding="utf-8")
    name, *extra = command.split()
    out = tmp_path / "out"
    run = start(*(tokenize_arguments(tokenizer_dir, data, out, tmp_path / "cache", *extra) if name != "train" else
                  ["train", "--dataset", "json", "--data-files", str(data), "--vocab-size", "300", "--out", str(out),
                   "--no-progress", *extra]))
    assert one_line(finish(run)) == (f"hf-bpe {name}: error: {data}: line 3: not valid JSON (Expecting "
                                     f"',' delimiter at column 18)")
    assert run.returncode == 2 and not out.exists()


def test_a_compressed_corpus_is_refused_before_counting(tmp_path):
    import gzip

    corpus = tmp_path / "corpus.txt.gz"
    corpus.write_bytes(gzip.compress((FIXTURES / "corpus.en").read_bytes()))
    run = start(*train_arguments(corpus, tmp_path / "tok"))
    assert one_line(finish(run)) == (f"hf-bpe train: error: {corpus}: is gzip-compressed, not UTF-8 text: decompress "
                                     f"it first (e.g. `gunzip -k {corpus}`) and train on the text")
    assert run.returncode == 2 and sorted(path.name for path in tmp_path.iterdir()) == ["corpus.txt.gz"]


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_huge_vocab_size_on_a_small_corpus_fits_a_small_disk(tmp_path):
    """32 bytes per token of a 1,000,000-token vocabulary would need 32 MB, but 2 KB of text make at most 2,300
    tokens: the 1 MB tmpfs is enough, and the run says how many tokens it made."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], check=True)
    try:
        corpus = tmp_path / "small.txt"
        corpus.write_text((FIXTURES / "corpus.en").read_text(encoding="utf-8")[:2000], encoding="utf-8")
        run = start("train", str(corpus), "--vocab-size", "1000000", "--out", str(mount / "tok"), "--no-progress")
        stderr = finish(run)
        assert run.returncode == 0, stderr
        assert "no pairs left to merge, so the vocabulary has" in stderr and "Traceback" not in stderr
        assert sorted(path.name for path in mount.iterdir()) == ["tok"]
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


# ----------------------------------------------------------------------------------------------- also seen


def test_the_progress_bar_counts_documents(tokenizer_dir, few_documents, tmp_path):
    arguments = [argument for argument in tokenize_arguments(tokenizer_dir, few_documents, tmp_path / "out",
                                                             tmp_path / "cache", "--num-proc", "2")
                 if argument != "--no-progress"]
    run = start(*arguments)
    stderr = finish(run)
    assert run.returncode == 0, stderr
    assert re.search(r"tokenizing train: 100%\S* *\S* 50/50 ", stderr), stderr
    # Not datasets' bar of the map, which counted the row ranges it runs over ("7/7 [00:01, 5.0 examples/s]").
    assert "row ranges" not in stderr and not re.search(r"\d+/\d+ \[[^]]*examples/s\]", stderr), stderr
    tokens = np.asarray(load_tokens(tmp_path / "out", "train"))
    assert int((tokens == 0).sum()) == 50  # one end-of-text id (0 in this vocab) per document


# ------------------------------------------------------------------- 7: SuperBPE's stage-2 passes, interrupted


# Each stage-2 pass of `hf-bpe train --superword-from` on the large corpus, as (the corpus given, which pass): given
# as a path, a small corpus's size is known and its first pass counts every pair, its segmentation kept in files, and
# the second counts the parts from the files; given as a file:// URL, its size is not known and a sample comes first,
# then the parts pass, which keeps its segmentation in files (for passes at lower cuts).
STAGE_TWO_PASSES = {"every pair": ("path", 1), "the kept parts": ("path", 2), "the sample": ("url", 1),
                    "the parts after the sample": ("url", 2)}


def superword_run_in_pass(out: Path, given: str, passes: int) -> subprocess.Popen:
    """`hf-bpe train --superword-from` of the large corpus with 2 workers, once the workers of the `passes`-th
    stage-2 pass have started (`STAGE_TWO_PASSES`): each pass forks workers anew."""
    corpus = str(LARGE_CORPUS) if given == "path" else LARGE_CORPUS.resolve().as_uri()
    run = start(*train_arguments(corpus, out, "--workers", "2", "--vocab-size", "2400", "--superword-from", "2000"))
    seen: set[int] = set()
    for _ in range(passes + 1):  # stage 1's counting, then each stage-2 pass
        wait_for(lambda known=frozenset(seen): len(set(children_of(run.pid)) - known) >= 2, 120,
                 "a pass's workers started", run)
        seen |= set(children_of(run.pid))
    return run


@needs_corpora
@pytest.mark.parametrize("stage_two_pass", list(STAGE_TWO_PASSES))
@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "SIGKILL"])
def test_superbpe_interrupted_in_a_stage_two_pass_leaves_nothing(stage_two_pass, how, tmp_path):
    out = tmp_path / "tok"
    run = superword_run_in_pass(out, *STAGE_TWO_PASSES[stage_two_pass])
    run.send_signal(getattr(signal, how))
    if how == "SIGKILL":
        run.wait()
        assert_no_process_left(run.pid)
        rerun = start(*train_arguments(FIXTURES / "corpus.en", out, "--superword-from", "280"))
        assert "wrote" in finish(rerun) and rerun.returncode == 0  # and it clears what the killed run left
        assert sorted(path.name for path in tmp_path.iterdir()) == ["tok"]
        assert_no_process_left(rerun.pid)
        return
    stderr = finish(run)
    expected = {"SIGTERM": ("terminated (SIGTERM)", 143), "SIGINT": ("interrupted", 130)}[how]
    assert expected[0] in one_line(stderr) and run.returncode == expected[1], stderr
    assert list(tmp_path.iterdir()) == []
    assert_no_process_left(run.pid)
