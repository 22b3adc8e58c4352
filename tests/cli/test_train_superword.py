"""`hf-bpe train --superword-from T [--superword-pattern REGEX]` (SuperBPE) as real processes: the directory is saved
with the stage-2 pre-tokenization as SuperBPE's authors spell it, every loader gives the same ids, those ids are the
training segmentation (the token counts the merge loop left), the record and the card say which stage made which
ids, and bad options stop with one line, exit code 2, and nothing written."""

from __future__ import annotations

import json
import re

import pytest

from hf_bpe.formats.gpt2 import load_gpt2
from hf_bpe.pretokenize.superword import PUBLISHED_SPLIT_REGEX
from tests import FIXTURES
from tests.cli.faults import EOT, finish, one_line, start
from tests.cli.test_train_extend import run
from tests.hf.test_loading import assert_loaders_give_the_training_segmentation

LOADERS = ("auto", "tokenizers", "hf_bpe_class", "remote_code", "hf_bpe", "tiktoken")
VOCAB_SIZE, TRANSITION = 1200, 800


@pytest.fixture(scope="module")
def superword(tmp_path_factory: pytest.TempPathFactory):
    """A SuperBPE tokenizer trained by a real `hf-bpe train --superword-from`, and plain training up to T."""
    work = tmp_path_factory.mktemp("superword")
    corpus = work / "corpus.txt"
    corpus.write_text((FIXTURES / "hf_corpora_sample.txt").read_text(encoding="utf-8") + EOT
                      + "It costs 1234567 dollars, by the way. " * 20, encoding="utf-8")
    runs = {"superword": ["--superword-from", str(TRANSITION)], "plain": []}
    for name, options in runs.items():
        size = VOCAB_SIZE if options else TRANSITION
        process = start("train", str(corpus), "--vocab-size", str(size), "--out", str(work / name), "--workers",
                        "2", "--no-progress", *options)
        stderr = finish(process, timeout=300)
        assert process.returncode == 0, stderr
    return work, corpus, work / "superword"


def test_stage_one_is_plain_training_and_the_directory_says_so(superword) -> None:
    work, _, out = superword
    vocab, merges = load_gpt2(out / "vocab.json", out / "merges.txt")
    _, plain_merges = load_gpt2(work / "plain" / "vocab.json", work / "plain" / "merges.txt")
    assert merges[:len(plain_merges)] == plain_merges
    assert len(vocab) == VOCAB_SIZE and vocab[VOCAB_SIZE - 1] == EOT.encode()
    pre_tokenizer = json.loads((out / "tokenizer.json").read_text())["pre_tokenizer"]
    assert [step["type"] for step in pre_tokenizer["pretokenizers"]] == ["Digits", "Split", "ByteLevel"]
    assert pre_tokenizer["pretokenizers"][1]["pattern"] == {"Regex": PUBLISHED_SPLIT_REGEX}
    info = json.loads((out / "hf_bpe_training.json").read_text())
    assert info["pattern"] == "superword"
    assert info["superword"] == {"from": TRANSITION, "stage_1_pattern": "gpt2", "stage_1_merges": len(plain_merges),
                                 "stage_1_distinct_pretokens": info["superword"]["stage_1_distinct_pretokens"]}
    end_of_one = 256 + len(plain_merges)
    assert (f"ids 256-{end_of_one - 1:,}: stage 1 (subwords, `gpt2` pattern, up to {TRANSITION:,} tokens); ids "
            f"{end_of_one:,}-{VOCAB_SIZE - 2:,}: stage 2") in (out / "README.md").read_text()
    assert any(re.search(rb"[^\s] ", token) for token in vocab.values())  # superwords


def test_every_loader_gives_the_training_segmentation(superword) -> None:
    work, corpus, out = superword
    documents = corpus.read_text(encoding="utf-8").split(EOT)
    assert_loaders_give_the_training_segmentation(LOADERS, out, [EOT], documents, work)


@pytest.mark.parametrize(("arguments", "message"), [
    (["--superword-from", "2000"], "--superword-from 2000 must be at most --vocab-size (1200)"),
    (["--superword-from", "256"], "--superword-from 256 is too small"),
    (["--superword-pattern", "superword"], "--superword-pattern is the pattern of SuperBPE's stage 2: it needs "
                                           "--superword-from"),
    (["--superword-from", "900", "--superword-pattern", r"\d+"], r"the escape \d is not supported"),
])
def test_bad_options_stop_before_any_work(tmp_path, arguments: list[str], message: str) -> None:
    out = tmp_path / "out"
    options = ["--vocab-size", str(VOCAB_SIZE)] if "--vocab-size" not in arguments else []
    result = run(str(FIXTURES / "german.txt"), "--out", str(out), *options, *arguments)
    assert result.returncode == 2
    assert message in one_line(result.stderr)
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_a_stretch_of_text_with_no_number_and_no_special_token_stops_before_any_work(tmp_path) -> None:
    # SuperBPE's stage 2 would merge it whole (one pre-token of 70 MB, in gigabytes): refused at once, naming the file
    # and bytes.
    corpus = tmp_path / "prose.txt"
    with open(corpus, "w", encoding="utf-8") as file:
        file.write("12 numbered start" + EOT)
        for _ in range(70):
            file.write("the cat sat on the mat, by the way. " * 29127)  # 1 MiB
    out = tmp_path / "out"
    result = run(str(corpus), "--out", str(out), "--vocab-size", "600", "--superword-from", "500")
    assert result.returncode == 2
    line = one_line(result.stderr)
    assert f"{corpus}: between bytes 0 and " in line and "bytes with no number and no special token" in line, line
    assert not out.exists() and sorted(tmp_path.iterdir()) == [corpus]
