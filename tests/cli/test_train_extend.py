"""`hf-bpe train --extend BASE` (and --min-frequency, --max-token-length) as real processes: the saved directory keeps
every base id and merge, every loader gives the same ids, those ids are the training segmentation (the token counts
the merge loop left), and bad options stop with one line, exit code 2, and nothing written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hf_bpe.evaluation.baselines import GPT2_FILES
from hf_bpe.formats.gpt2 import load_gpt2
from tests import FIXTURES, REPO
from tests.cli.faults import EOT, finish, one_line, start
from tests.hf.test_loading import assert_loaders_give_the_training_segmentation, ids_in_loaders

LOADERS = ("auto", "tokenizers", "hf_bpe_class", "hf_bpe", "tiktoken")
NEW_MERGES = 300


def run(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hf_bpe.cli", "train", *arguments], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}, timeout=300)


@pytest.fixture(scope="module")
def extended(tmp_path_factory: pytest.TempPathFactory):
    """GPT-2 extended by NEW_MERGES merges on German and mixed text, by a real `hf-bpe train --extend gpt2`: (its
    folder, the corpus, the directory, its stderr)."""
    work = tmp_path_factory.mktemp("extend")
    corpus = work / "corpus.txt"
    corpus.write_text((FIXTURES / "german.txt").read_text(encoding="utf-8") + EOT
                      + (FIXTURES / "hf_corpora_sample.txt").read_text(encoding="utf-8"), encoding="utf-8")
    out = work / "extended"
    process = start("train", str(corpus), "--extend", "gpt2", "--vocab-size", str(50257 + NEW_MERGES), "--out",
                    str(out), "--workers", "1", "--no-progress")
    stderr = finish(process, timeout=300)
    assert process.returncode == 0, stderr
    return work, corpus, out, stderr


def test_extension_keeps_every_gpt2_id_and_merge(extended) -> None:
    _, _, out, _ = extended
    base_vocab, base_merges = load_gpt2(GPT2_FILES / "vocab.json", GPT2_FILES / "merges.txt")
    vocab, merges = load_gpt2(out / "vocab.json", out / "merges.txt")
    assert all(vocab[token_id] == token for token_id, token in base_vocab.items())
    assert merges[:len(base_merges)] == base_merges and len(merges) == len(base_merges) + NEW_MERGES
    assert sorted(set(vocab) - set(base_vocab)) == list(range(50257, 50257 + NEW_MERGES))
    info = json.loads((out / "hf_bpe_training.json").read_text())
    assert info["extends"] == {"base": "gpt2", "vocab_size": 50257, "merges": 50000}


def test_every_loader_gives_the_training_segmentation(extended) -> None:
    work, corpus, out, _ = extended
    documents = corpus.read_text(encoding="utf-8").split(EOT)
    encoded = assert_loaders_give_the_training_segmentation(LOADERS, out, [EOT], documents, work)
    assert encoded[50257:].sum() > 0  # the new tokens are used


def test_the_summary_and_the_card_count_the_new_tokens_apart(extended) -> None:
    """The summary line and the card say how many of the NEW_MERGES new tokens never occur in the training corpus,
    and how many occur 1-9 times, as token_counts.npy has them; then the count over all merged tokens, GPT-2's
    included (most of which never occur in German text)."""
    _, _, out, stderr = extended
    counts = np.load(out / "token_counts.npy")
    new = counts[50257:50257 + NEW_MERGES]
    never, rare = int((new == 0).sum()), int(((new > 0) & (new < 10)).sum())
    merged = np.concatenate([counts[256:50256], new])  # GPT-2's 50,000 merged tokens (its 50256 is special) and ours
    occur = {1: "occurs"}
    assert (f"; {NEW_MERGES:,} new tokens learned: {never:,} never {occur.get(never, 'occur')} in the training "
            f"corpus and {rare:,} {occur.get(rare, 'occur')} 1-9 times (under-trained: see README.md; "
            f"{int((merged == 0).sum()):,} of all {len(merged):,} merged tokens never occur in it)") in stderr
    card = (out / "README.md").read_text(encoding="utf-8")
    assert f"- of the **{NEW_MERGES:,}** new tokens this extension learned, **{never:,}** never occur" in card
    assert f"and **{rare:,}** occur fewer than 10 times" in card
    assert f"- **{int((merged == 0).sum()):,}** of the {len(merged):,} merged tokens (the base's included)" in card


@pytest.mark.parametrize(("arguments", "message"), [
    (["--extend", "no/such/base"], "no/such/base: not a tokenizer directory, nor a baseline"),
    (["--extend", "gpt2", "--vocab-size", "50257"], "--vocab-size 50257 must be larger than the 50,257 tokens"),
    (["--extend", "gpt2", "--pattern", "cl100k"], "--pattern cannot be given"),
    (["--extend", "gpt2", "--special-token", "<pad>"], "--special-token cannot be given"),
    (["--min-frequency", "-1"], "--min-frequency must be an int >= 0"),
    (["--max-token-length", "0"], "--max-token-length must be None or an int >= 1"),
])
def test_bad_options_stop_before_any_work(tmp_path, arguments: list[str], message: str) -> None:
    out = tmp_path / "out"
    options = ["--vocab-size", "50300"] if "--vocab-size" not in arguments else []
    result = run(str(FIXTURES / "german.txt"), "--out", str(out), *options, *arguments)
    assert result.returncode == 2
    assert message in one_line(result.stderr)
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_extend_from_a_saved_directory_and_trainer_options(tmp_path) -> None:
    """A directory hf_bpe saved is a BASE too; --min-frequency stops early, --max-token-length bounds the tokens."""
    base = tmp_path / "base"
    result = run(str(FIXTURES / "corpus.en"), "--vocab-size", "400", "--out", str(base), "--no-progress")
    assert result.returncode == 0, result.stderr
    out = tmp_path / "extended"
    result = run(str(FIXTURES / "german.txt"), "--extend", str(base), "--vocab-size", "5000", "--out", str(out),
                 "--min-frequency", "3", "--max-token-length", "6", "--no-progress")
    assert result.returncode == 0, result.stderr
    base_vocab, _ = load_gpt2(base / "vocab.json", base / "merges.txt")
    vocab, _ = load_gpt2(out / "vocab.json", out / "merges.txt")
    new_tokens = [token for token_id, token in vocab.items() if token_id not in base_vocab]
    assert new_tokens and len(vocab) < 5000  # stopped at --min-frequency
    assert max(map(len, new_tokens)) < 6
    assert sorted(set(vocab) - set(base_vocab)) == list(range(400, 400 + len(new_tokens)))


# The tokens of a small tiktoken file: b"xyz" and b" xyz" are made by no merge (no "xy" nor "yz" token).
RANK_FILE_TOKENS = [bytes([byte]) for byte in range(256)] + [b"th", b" th", b"the", b" the", b"xyz", b" xyz", b"er"]


def converted_rank_file(tmp_path: Path) -> Path:
    """A tiktoken file of RANK_FILE_TOKENS with `<|endoftext|>` at 300, converted by a real `hf-bpe convert`."""
    import base64

    rank_file = tmp_path / "small.tiktoken"
    rank_file.write_text("".join(f"{base64.b64encode(token).decode()} {rank}\n"
                                 for rank, token in enumerate(RANK_FILE_TOKENS)))
    base = tmp_path / "base"
    converted = subprocess.run([sys.executable, "-m", "hf_bpe.cli", "convert", str(rank_file), "--pattern", "gpt2",
                                "--special-token", f"{EOT}=300", "--out", str(base)], capture_output=True, text=True,
                               env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}, timeout=300)
    assert converted.returncode == 0, converted.stderr
    return base


def test_extend_a_converted_tiktoken_file(tmp_path) -> None:
    """A tiktoken file converted by `hf-bpe convert` (pre-tokens that are tokens are looked up whole, as tiktoken
    does, and some tokens no merge reaches) is a BASE: the loaders agree, and give the training segmentation."""
    base = converted_rank_file(tmp_path)
    corpus = tmp_path / "corpus.txt"
    documents = ["the xyz other xyz thermal xyzzy " * 3, "ther xyz the\nxyz", "thethe xyzxyz"]
    corpus.write_text(EOT.join(documents * 4), encoding="utf-8")
    out = tmp_path / "extended"
    result = run(str(corpus), "--extend", str(base), "--vocab-size", "290", "--out", str(out), "--no-progress")
    assert result.returncode == 0, result.stderr
    vocab, _ = load_gpt2(out / "vocab.json", out / "merges.txt")
    # After the largest id, the special token's.
    assert min(set(vocab) - set(range(len(RANK_FILE_TOKENS))) - {300}) == 301
    ids = ids_in_loaders(LOADERS, out, [EOT], documents, tmp_path)
    for name, got in ids.items():
        assert got == ids["tokenizers"], f"{name} differs from tokenizers"
    trained = np.load(out / "token_counts.npy")
    encoded = np.bincount(np.concatenate([np.array(document_ids, dtype=np.int64) for document_ids in ids["auto"]]),
                          minlength=len(trained)) * 4
    assert encoded.tolist() == trained.tolist()


def test_extend_a_rank_file_named_as_a_baseline(tmp_path) -> None:
    """--extend cl100k=PATH reads the rank file as hf_bpe's tokenizer (its ranks as ids, tiktoken's pattern and
    special tokens): every cl100k id is kept, the new tokens after its largest special token's id."""
    from tests.formats.test_tiktoken_files import CL100K_SPECIALS, cl100k_file

    out = tmp_path / "extended"
    result = run(str(FIXTURES / "german.txt"), "--extend", f"cl100k={cl100k_file()}", "--vocab-size", "100271",
                 "--out", str(out), "--no-progress")
    assert result.returncode == 0, result.stderr
    vocab, merges = load_gpt2(out / "vocab.json", out / "merges.txt")
    assert len(merges) == 100010 and sorted(set(vocab) - set(range(100256)) - set(CL100K_SPECIALS.values())) == list(
        range(100277, 100287))
    info = json.loads((out / "hf_bpe_training.json").read_text())
    assert info["pattern"] == "cl100k" and info["extends"]["merges"] == 100000
