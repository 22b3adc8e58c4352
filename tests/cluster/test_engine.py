"""Tests of the Ray engines on a real Ray cluster: a head node and a worker node started with `ray start` on this
machine (the worker joins with `ray start --address`), reached through the address as `--ray-address` would be.

Every result is compared with the single-machine engine: pre-token counts, trained merges and vocab, token arrays
(byte for byte), for the Python API and the CLI. One cluster serves the whole module.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from itertools import chain
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from hf_bpe.cluster.session import ray_session
from hf_bpe.common.errors import InputError
from hf_bpe.data.load import load_tokens
from hf_bpe.data.pipeline import tokenize_dataset
from hf_bpe.data.ray_tokenize import tokenize_dataset_ray
from hf_bpe.data.shards import ShardManifest, file_sha256, load_sharded_tokens, shard_is_intact, shard_name
from hf_bpe.formats.gpt2 import load_gpt2
from hf_bpe.formats.hf_directory import save_tokenizer_directory
from hf_bpe.train.api import train_bpe, train_bpe_from_counts
from hf_bpe.train.counting.count import count_pretokens, count_pretokens_in_files, count_pretokens_in_iterator
from hf_bpe.train.counting.ray_counting import RayCountingEngine
from tests import FIXTURES, REPO
from tests.cluster import connected_cluster

EOT = "<|endoftext|>"
SPECIALS = [EOT, "<|pad|>"]
CORPORA = [FIXTURES / "corpus.en", FIXTURES / "tinystories_sample.txt", FIXTURES / "hf_corpora_sample.txt"]
# Small chunks make many tasks, spread over both nodes, with cuts at spaces and at special tokens.
CHUNK_BYTES = 8192
# Every node of the test cluster has a small object store, so that a test can show that a job stays within it.
STORE_BYTES = 80 << 20  # Ray's least is 75 MB
# The large dataset: more than the cluster's two object stores together.
LARGE_BYTES = 2 * STORE_BYTES + (16 << 20)

# The documents of the token-array tests: empty and whitespace-only ones, non-ASCII text, a special-token string
# inside a document (ordinary text unless allow_special), and enough of them for several shards and blocks.
DOCUMENTS = [
    "Hello, world!", "", "The quick brown fox\n\njumps over the lazy dog.", "héllo wörld 日本語のテキスト 😀", "   ",
    f"text with {EOT} inside it", "x", "def f(x):\n    return x + 1\n", "Ünïcödé and numbers 12345 it's",
] + [f"document {index}: " + "the cat sat on the mat " * (index % 7) for index in range(150)]


@pytest.fixture(scope="module")
def cluster():
    """A two-node Ray cluster on this machine with small object stores, this process connected to it."""
    with connected_cluster(STORE_BYTES) as running:
        yield running


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The fixture corpora plus a file with special tokens (one of them straddling where a chunk would be cut),
    multi-byte whitespace and long runs of spaces."""
    extra = tmp_path_factory.mktemp("corpus") / "specials.txt"
    parts = []
    for index in range(400):
        parts.append(f"doc {index} with  spaces\u00a0and\u3000ideographic space{EOT}")
        parts.append("     " * (index % 5) + f"café {index}<|pad|>naïve")
    extra.write_text("".join(parts), encoding="utf-8")
    return [*CORPORA, extra]


# --- counting and training ---------------------------------------------------------------------------------------


def test_counts_equal_the_local_engine_and_the_reference(cluster, corpus):
    engine = RayCountingEngine(cluster.address)
    counted = count_pretokens_in_files(corpus, SPECIALS, chunk_bytes=CHUNK_BYTES, engine=engine, progress=False)
    local = count_pretokens_in_files(corpus, SPECIALS, chunk_bytes=CHUNK_BYTES, num_workers=2, progress=False)
    reference = count_pretokens([path.read_text(encoding="utf-8") for path in corpus], SPECIALS)
    assert counted == local == reference


def test_inputs_given_as_fsspec_urls_count_the_same_on_the_cluster(cluster, corpus):
    urls = [path.resolve().as_uri() for path in corpus]  # file:///... goes through fsspec, as s3:// would
    engine = RayCountingEngine(cluster.address)
    counted = count_pretokens_in_files(urls, SPECIALS, chunk_bytes=CHUNK_BYTES, engine=engine, progress=False)
    assert counted == count_pretokens_in_files(corpus, SPECIALS, chunk_bytes=CHUNK_BYTES, num_workers=1,
                                               progress=False)


def test_training_on_the_cluster_gives_the_local_merges_and_vocab(cluster, corpus):
    local_vocab, local_merges = train_bpe(corpus, 600, SPECIALS, num_workers=1, progress=False)
    vocab, merges = train_bpe(corpus, 600, SPECIALS, engine="ray", ray_address=cluster.address, progress=False)
    assert merges == local_merges and vocab == local_vocab
    assert len(merges) == 600 - 256 - len(SPECIALS)


def test_invalid_utf8_reports_the_first_bad_byte_like_the_local_engine(cluster, tmp_path):
    good = ("plain text with spaces " * 2000).encode()
    path = tmp_path / "bad.txt"
    path.write_bytes(good + b"\xff" + good + b"\xc3(" + good)
    with pytest.raises(InputError) as local:
        count_pretokens_in_files([path], chunk_bytes=4096, num_workers=2, progress=False)
    with pytest.raises(InputError) as remote:
        count_pretokens_in_files([path], chunk_bytes=4096, engine=RayCountingEngine(cluster.address), progress=False)
    assert str(remote.value) == str(local.value)
    assert f"byte offset {len(good)}" in str(remote.value)


def test_iterator_counts_and_the_documented_ray_dataset_recipe(cluster):
    texts = DOCUMENTS * 3
    engine = RayCountingEngine(cluster.address)
    assert count_pretokens_in_iterator(texts, [EOT], engine=engine, progress=False) == count_pretokens(texts, [EOT])
    # The two lines of the module docstring, on a Ray Dataset.
    with ray_session(cluster.address):
        ds = ray.data.from_items([{"text": text} for text in texts])
        batches = (batch["text"].tolist() for batch in ds.iter_batches(batch_size=50, batch_format="numpy"))
        counts = count_pretokens_in_iterator(chain.from_iterable(batches), [EOT], engine=engine, progress=False)
    assert counts == count_pretokens(texts, [EOT])
    assert train_bpe_from_counts(counts, 300, [EOT]) == train_bpe_from_counts(count_pretokens(texts, [EOT]), 300,
                                                                               [EOT])


# --- token arrays ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    vocab, merges = load_gpt2(FIXTURES / "train-bpe-reference-vocab.json", FIXTURES / "train-bpe-reference-merges.txt")
    return save_tokenizer_directory(tmp_path_factory.mktemp("tokenizer") / "tok", vocab, merges, [EOT])


def write_jsonl(path: Path, documents: list) -> Path:
    path.write_text("".join(json.dumps({"text": text, "id": index}) + "\n" for index, text in enumerate(documents)),
                    encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def local_arrays(tokenizer_dir, tmp_path_factory) -> dict[bool, tuple[bytes, dict]]:
    """The single-machine .bin (bytes) and metadata of DOCUMENTS, without and with allow_special."""
    directory = tmp_path_factory.mktemp("local")
    source = write_jsonl(directory / "docs.jsonl", DOCUMENTS)
    arrays = {}
    for allow in (False, True):
        out = directory / f"out-{allow}"
        metadata = tokenize_dataset(tokenizer_dir, "json", out, data_files=[str(source)], allow_special=allow,
                                    progress=False)
        arrays[allow] = (out / "train.bin").read_bytes(), metadata
    return arrays


@pytest.fixture(scope="module")
def local_array(local_arrays) -> tuple[bytes, dict]:
    return local_arrays[False]


@pytest.mark.parametrize("form, allow_special", [("jsonl", False), ("parquet", True), ("save_to_disk", False)])
def test_shards_concatenate_to_the_single_machine_array(cluster, tokenizer_dir, local_arrays, tmp_path, form,
                                                        allow_special):
    import datasets

    expected_bytes, local_metadata = local_arrays[allow_special]
    if form == "jsonl":  # named by a file:// URL, read by Ray Data (fsspec/pyarrow) on the workers
        dataset, files = "json", [write_jsonl(tmp_path / "docs.jsonl", DOCUMENTS).as_uri()]
    elif form == "parquet":
        datasets.Dataset.from_dict({"text": DOCUMENTS}).to_parquet(tmp_path / "docs.parquet")
        dataset, files = str(tmp_path / "docs.parquet"), []
    else:
        datasets.Dataset.from_dict({"text": DOCUMENTS}).save_to_disk(tmp_path / "saved")
        dataset, files = str(tmp_path / "saved"), []
    out = tmp_path / "out"
    metadata = tokenize_dataset_ray(tokenizer_dir, dataset, out, data_files=files, ray_address=cluster.address,
                                    allow_special=allow_special, documents_per_shard=23, progress=False,
                                    concatenate=form == "jsonl")
    assert metadata["layout"] == "shards" and len(metadata["shards"]) == -(-len(DOCUMENTS) // 23)
    for key in ("dtype", "num_tokens", "num_documents", "eot_id", "append_eot", "allow_special", "vocab_size",
                "tokenizer_sha256"):
        assert metadata[key] == local_metadata[key], key
    for shard in metadata["shards"]:
        assert file_sha256(out / shard["file"]) == shard["sha256"]
    assert json.loads((out / "train.json").read_text()) == metadata
    tokens = load_tokens(out, "train")  # through hf_bpe.data.pipeline, as a user reads it
    assert np.asarray(tokens).tobytes() == expected_bytes
    # A special-token string inside a document is text, unless allowed: then it is one more eot id.
    eot_ids = np.count_nonzero(np.asarray(tokens) == metadata["eot_id"])
    assert eot_ids == len(DOCUMENTS) + (1 if allow_special else 0)
    if form == "jsonl":
        assert (out / "train.bin").read_bytes() == expected_bytes
        assert isinstance(tokens, np.memmap)
    else:
        assert not (out / "train.bin").exists()
        sharded = load_sharded_tokens(out, "train", metadata)
        assert len(sharded) == len(expected_bytes) // 2 and sharded[-1] == metadata["eot_id"]


def test_a_failed_run_leaves_nothing_finished_and_resume_redoes_only_missing_shards(cluster, tokenizer_dir, tmp_path,
                                                                                      local_array):
    expected_bytes, _ = local_array
    bad = list(DOCUMENTS)
    bad[100] = None  # not a string: the run fails at row 100, after the shards before it
    source = write_jsonl(tmp_path / "docs.jsonl", bad)
    out = tmp_path / "out"
    options = dict(data_files=[str(source)], ray_address=cluster.address, documents_per_shard=20, progress=False)
    with pytest.raises(InputError, match="row 100 of column 'text'"):
        tokenize_dataset_ray(tokenizer_dir, "json", out, **options)
    assert not (out / "train.json").exists() and not (out / "train.bin").exists()
    assert not [path for path in (out / "train").iterdir() if ".tmp-" in path.name]
    recorded = ShardManifest.load(out / "train").shards
    assert 5 not in recorded and {0, 1, 2, 3} <= set(recorded)  # rows 100-119 are shard 5
    with pytest.raises(InputError, match="already written|--force|--resume"):
        tokenize_dataset_ray(tokenizer_dir, "json", out, **options)  # neither --resume nor --force

    write_jsonl(source, DOCUMENTS)  # the bad row fixed; the recorded shards hold the same rows as before
    (out / "train" / shard_name(1)).write_bytes(b"\0\0")  # a damaged shard is redone even though recorded
    kept = {index: (out / "train" / shard_name(index)).stat().st_ino for index in recorded if index != 1}
    metadata = tokenize_dataset_ray(tokenizer_dir, "json", out, resume=True, **options)
    assert np.asarray(load_tokens(out, "train")).tobytes() == expected_bytes
    assert {index: (out / "train" / shard_name(index)).stat().st_ino for index in kept} == kept
    assert metadata["num_documents"] == len(DOCUMENTS)

    with pytest.raises(InputError, match="recorded run differs.*append_eot"):
        tokenize_dataset_ray(tokenizer_dir, "json", out, resume=True, append_eot=False, **options)


def test_resume_with_nothing_to_resume_does_not_replace_a_written_split(tokenizer_dir, local_array, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "train.bin").write_bytes(local_array[0])  # as the local engine leaves it
    with pytest.raises(InputError, match="already written"):  # refused before connecting to any cluster
        tokenize_dataset_ray(tokenizer_dir, "json", out, data_files=["unused.jsonl"], resume=True, progress=False)
    assert (out / "train.bin").read_bytes() == local_array[0]


def test_a_missing_text_column_is_named(cluster, tokenizer_dir, tmp_path):
    source = tmp_path / "docs.jsonl"
    source.write_text('{"body": "x"}\n', encoding="utf-8")
    with pytest.raises(InputError, match="no column 'text'.*body"):
        tokenize_dataset_ray(tokenizer_dir, "json", tmp_path / "out", data_files=[str(source)],
                             ray_address=cluster.address, progress=False)
    assert not (tmp_path / "out" / "train.json").exists()


def test_ctrl_c_keeps_the_finished_shards_for_resume(cluster, tokenizer_dir, tmp_path):
    words = (FIXTURES / "corpus.en").read_text(encoding="utf-8").split()
    # Varied text (cold encoder caches), so that the run is still going when it is interrupted.
    documents = [" ".join(words[index * 97 % len(words):][:300]) + f" {index}" for index in range(3000)]
    source = write_jsonl(tmp_path / "docs.jsonl", documents)
    out = tmp_path / "out"
    command = ["tokenize-dataset", "--tokenizer", str(tokenizer_dir), "--dataset", "json", "--data-files",
               str(source), "--out", str(out), "--engine", "ray", "--ray-address", cluster.address, "--no-progress"]
    process = subprocess.Popen([sys.executable, "-m", "hf_bpe.cli", *command], cwd=REPO, stderr=subprocess.PIPE,
                               text=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and process.poll() is None:
            if (out / "train").is_dir() and any(path.name.startswith("part-") for path in (out / "train").iterdir()):
                break  # a shard is finished: interrupt the run in the middle
            time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:  # the test failed (the run hung): it is not left behind
            process.kill()
            process.communicate()
    if process.returncode == 0:
        pytest.skip("the run finished before it could be interrupted")
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert not (out / "train.json").exists()
    recorded = ShardManifest.load(out / "train").shards
    assert all(shard_is_intact(out / "train" / shard_name(index), record, 2)
                            for index, record in recorded.items())

    result = run_cli(*command, "--resume")
    assert result.returncode == 0, result.stderr
    assert not [path for path in (out / "train").iterdir() if path.name.startswith(".")]
    expected = tokenize_dataset(tokenizer_dir, "json", tmp_path / "local", data_files=[str(source)], progress=False)
    assert np.asarray(load_tokens(out, "train")).tobytes() == (tmp_path / "local" / "train.bin").read_bytes()
    assert json.loads((out / "train.json").read_text())["num_tokens"] == expected["num_tokens"]


# --- the CLI -----------------------------------------------------------------------------------------------------


def run_cli(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hf_bpe.cli", *arguments], capture_output=True, text=True,
                          cwd=REPO, timeout=600)


def test_cli_train_and_tokenize_with_the_ray_engine_match_local(cluster, corpus, tokenizer_dir, tmp_path,
                                                                local_array):
    inputs = [str(path) for path in corpus]
    for engine in ("local", "ray"):
        extra = ["--engine", "ray", "--ray-address", cluster.address] if engine == "ray" else []
        result = run_cli("train", *inputs, "--vocab-size", "500", "--special-token", EOT, "--out",
                         str(tmp_path / engine), "--no-progress", *extra)
        assert result.returncode == 0, result.stderr
    for name in ("vocab.json", "merges.txt", "tokenizer.json"):
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "local" / name).read_bytes(), name

    source = write_jsonl(tmp_path / "docs.jsonl", DOCUMENTS)
    result = run_cli("tokenize-dataset", "--tokenizer", str(tokenizer_dir), "--dataset", "json", "--data-files",
                     str(source), "--out", str(tmp_path / "data"), "--engine", "ray", "--ray-address",
                     cluster.address, "--concatenate", "--no-progress")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "data" / "train.bin").read_bytes() == local_array[0]
    assert np.asarray(load_tokens(tmp_path / "data", "train")).tobytes() == local_array[0]


def test_an_unreachable_cluster_is_one_line_and_exit_2_before_any_output(tmp_path):
    result = run_cli("train", str(FIXTURES / "corpus.en"), "--vocab-size", "300", "--engine", "ray", "--ray-address",
                     "127.0.0.1:1", "--out", str(tmp_path / "tok"), "--no-progress")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].endswith(
        "cannot reach the Ray cluster at 127.0.0.1:1 (Connection refused); start it with `ray start --head` or check "
        "--ray-address")
    assert "Traceback" not in result.stderr and not (tmp_path / "tok").exists()


# --- bounded object store ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def large_jsonl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A JSON-lines dataset of 176 MiB (LARGE_BYTES), more than the cluster's two object stores (STORE_BYTES each)
    together; documents of 200-1,700 words, so that the cuts fall inside its read batches."""
    words = (FIXTURES / "corpus.en").read_text(encoding="utf-8").split()
    path = tmp_path_factory.mktemp("large") / "docs.jsonl"
    size = index = 0
    with open(path, "w", encoding="utf-8") as file:
        while size < LARGE_BYTES:
            start = index * 7919 % (len(words) - 2000)
            line = json.dumps({"text": " ".join(words[start:start + 200 + index % 1500]), "id": index}) + "\n"
            file.write(line)
            size += len(line)
            index += 1
    return path


def test_ray_tokenize_streams_a_dataset_larger_than_both_object_stores(cluster, tokenizer_dir, large_jsonl, tmp_path):
    from hf_bpe.cluster.store_stats import ObjectStoreMonitor
    from hf_bpe.cluster.workers import IN_FLIGHT_PER_ACTOR

    with ObjectStoreMonitor(spill_root=cluster.temp_dir) as monitor:
        metadata = tokenize_dataset_ray(tokenizer_dir, "json", tmp_path / "ray", data_files=[str(large_jsonl)],
                                        ray_address=cluster.address, progress=False, concatenate=True)
    # The bound: the shards in flight (IN_FLIGHT_PER_ACTOR per actor, one actor per CPU) in the driver node's
    # store, the copies of those a remote actor reads in its node's store, each at most shard_bytes of text plus
    # its Arrow offsets, and the encoder (a few MB).
    actors = int(ray.cluster_resources()["CPU"])
    shard_bytes = metadata["shard_bytes"]
    bound = (IN_FLIGHT_PER_ACTOR * actors + IN_FLIGHT_PER_ACTOR) * (shard_bytes + shard_bytes // 8) + (8 << 20)
    assert monitor.samples > 10 and monitor.failed_samples == 0
    assert 0 < monitor.peak_used_bytes <= bound < STORE_BYTES, (monitor.peak_used_bytes, bound)
    assert monitor.peak_spilled_bytes == 0
    assert len(metadata["shards"]) >= LARGE_BYTES // shard_bytes - 1

    local = tokenize_dataset(tokenizer_dir, "json", tmp_path / "local", data_files=[str(large_jsonl)], num_proc=2,
                             progress=False)
    assert metadata["num_tokens"] == local["num_tokens"]
    assert file_sha256(tmp_path / "ray" / "train.bin") == file_sha256(tmp_path / "local" / "train.bin")


def test_ray_counting_of_a_corpus_larger_than_both_object_stores_keeps_it_out_of_the_store(cluster, large_jsonl):
    from hf_bpe.cluster.store_stats import ObjectStoreMonitor

    with ObjectStoreMonitor(spill_root=cluster.temp_dir) as monitor:
        counted = count_pretokens_in_files([large_jsonl], [EOT], engine=RayCountingEngine(cluster.address),
                                           progress=False)
    # Chunks are byte ranges each actor reads itself: only the actors' counters (distinct pre-tokens, a few MB
    # here) pass through the store.
    assert monitor.samples > 10 and monitor.failed_samples == 0
    assert monitor.peak_used_bytes <= 16 << 20 and monitor.peak_spilled_bytes == 0, monitor.peak_used_bytes
    assert counted == count_pretokens_in_files([large_jsonl], [EOT], num_workers=2, progress=False)


def test_superbpe_stage_two_on_the_cluster_keeps_a_corpus_larger_than_both_object_stores_out_of_the_store(
        cluster, large_jsonl):
    from hf_bpe.cluster.store_stats import ObjectStoreMonitor

    # Every stage-2 pass runs on the actors, which send back only their tables of pairs and parts (the documents
    # run from number to number across spaces: their ids never leave the actors).
    with ObjectStoreMonitor(spill_root=cluster.temp_dir) as monitor:
        vocab, merges = train_bpe(large_jsonl, 420, [EOT], engine="ray", ray_address=cluster.address,
                                  superword_from=400, progress=False)
    assert monitor.samples > 10 and monitor.failed_samples == 0
    assert monitor.peak_used_bytes <= 16 << 20 and monitor.peak_spilled_bytes == 0, monitor.peak_used_bytes
    assert len(merges) == 420 - 257 and any(b" " in vocab[token_id][1:] for token_id in range(400, 419))


def test_ray_commands_show_progress_with_throughput_on_the_driver(cluster, corpus, tokenizer_dir, tmp_path, capfd):
    source = write_jsonl(tmp_path / "docs.jsonl", DOCUMENTS)
    result = run_cli("tokenize-dataset", "--tokenizer", str(tokenizer_dir), "--dataset", "json", "--data-files",
                     str(source), "--out", str(tmp_path / "data"), "--engine", "ray", "--ray-address",
                     cluster.address)
    assert result.returncode == 0, result.stderr
    bar = result.stderr.replace("\r", "\n").splitlines()
    assert any(line.startswith("tokenizing train:") and "B/s" in line and "documents read" in line for line in bar)
    # Counting for training: the same bar as the local engine (shown on a terminal; asked for here), in bytes.
    count_pretokens_in_files(corpus, SPECIALS, chunk_bytes=CHUNK_BYTES, engine=RayCountingEngine(cluster.address),
                             progress=True)
    lines = capfd.readouterr().err.replace("\r", "\n").splitlines()
    assert any(line.startswith("counting pre-tokens:") and "100%" in line and "B/s" in line for line in lines)
