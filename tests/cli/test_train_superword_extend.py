"""`hf-bpe train --extend BASE --superword-from N [--superword-pattern P]` (superwords on top of an existing tokenizer)
as real processes: GPT-2 kept whole keeps every id and merge, a smaller N is laid out as SuperBPE from scratch, the
authors' own example (cl100k's merges extended to 128,000 tokens with their stage-2 regex) runs, every loader gives
the training segmentation, the record and the card say BASE + superwords, and bad options stop with one line, exit
code 2, and nothing written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hf_bpe.evaluation.baselines import gpt2_tokenizer
from hf_bpe.formats.gpt2 import load_gpt2
from tests import FIXTURES
from tests.cli.faults import EOT, finish, one_line, start
from tests.cli.test_train_extend import converted_rank_file, run
from tests.formats.test_tiktoken_files import CL100K_SPECIALS, cl100k_file
from tests.hf.test_loading import assert_loaders_give_the_training_segmentation
from tests.train.starts.test_superword_extend import AUTHORS_PATTERN

LOADERS = ("auto", "tokenizers", "hf_bpe_class", "remote_code", "hf_bpe", "tiktoken")
NEW_TOKENS = 300


def train(*arguments: str, timeout: float = 300) -> None:
    process = start("train", *arguments, "--workers", "2", "--no-progress")
    stderr = finish(process, timeout=timeout)
    assert process.returncode == 0, stderr


@pytest.fixture(scope="module")
def gpt2_superwords(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, Path]:
    """GPT-2 plus NEW_TOKENS superwords, kept whole and from its first 1,000 tokens: (folder, corpus, whole, part)."""
    work = tmp_path_factory.mktemp("superword_extend")
    corpus = work / "corpus.txt"
    corpus.write_text((FIXTURES / "hf_corpora_sample.txt").read_text(encoding="utf-8") + EOT
                      + "It costs 1234567 dollars, by the way. " * 20, encoding="utf-8")
    train(str(corpus), "--extend", "gpt2", "--superword-from", "50257", "--vocab-size", str(50257 + NEW_TOKENS),
          "--out", str(work / "whole"))
    train(str(corpus), "--extend", "gpt2", "--superword-from", "1000", "--vocab-size", str(1000 + NEW_TOKENS),
          "--out", str(work / "part"))
    return work, corpus, work / "whole", work / "part"


def test_gpt2_kept_whole_keeps_every_id_and_merge(gpt2_superwords) -> None:
    _, _, out, _ = gpt2_superwords
    gpt2 = gpt2_tokenizer()
    vocab, merges = load_gpt2(out / "vocab.json", out / "merges.txt")
    assert {token_id: vocab[token_id] for token_id in gpt2.vocab} == dict(gpt2.vocab) and vocab[50256] == EOT.encode()
    assert merges[:50000] == list(gpt2.merges) and len(merges) == 50000 + NEW_TOKENS
    assert sorted(set(vocab) - set(gpt2.vocab)) == list(range(50257, 50257 + NEW_TOKENS))
    assert any(re.search(rb"[^\s] [^\s]", vocab[token_id]) for token_id in range(50257, 50257 + NEW_TOKENS))
    tokenizer_json = json.loads((out / "tokenizer.json").read_text())
    assert [step["type"] for step in tokenizer_json["pre_tokenizer"]["pretokenizers"]] == ["Digits", "Split",
                                                                                           "ByteLevel"]
    info = json.loads((out / "hf_bpe_training.json").read_text())
    assert info["pattern"] == "superword"
    assert info["superword"] == {"from": 50257, "stage_1_pattern": "gpt2", "stage_1_distinct_pretokens": None,
                                 "stage_1_merges": 50000}
    assert info["extends"] == {"base": "gpt2", "vocab_size": 50257, "merges": 50000}
    assert ("| SuperBPE stages | stage 1: the first 50,257 tokens of `gpt2` (subwords, `gpt2` pattern: its bytes, "
            f"first 50,000 merges and special tokens; every id as it is there); ids 50,257-{50256 + NEW_TOKENS:,}: "
            "stage 2 (superwords") in (out / "README.md").read_text()


def test_a_smaller_n_is_laid_out_as_superbpe_from_scratch(gpt2_superwords) -> None:
    _, _, _, out = gpt2_superwords
    gpt2 = gpt2_tokenizer()
    vocab, merges = load_gpt2(out / "vocab.json", out / "merges.txt")
    assert len(vocab) == 1000 + NEW_TOKENS and vocab[1000 + NEW_TOKENS - 1] == EOT.encode()
    assert {token_id: vocab[token_id] for token_id in range(999)} == {token_id: gpt2.vocab[token_id]
                                                                       for token_id in range(999)}
    assert merges[:743] == list(gpt2.merges[:743])
    info = json.loads((out / "hf_bpe_training.json").read_text())
    assert info["extends"] == {"base": "gpt2", "vocab_size": 50257, "merges": 743}
    assert info["superword"]["stage_1_merges"] == 743
    assert (f"ids 0-998, the special tokens last); ids 999-{998 + NEW_TOKENS:,}: stage 2"
            in (out / "README.md").read_text())


@pytest.mark.parametrize("which", ["whole", "part"])
def test_every_loader_gives_the_training_segmentation(gpt2_superwords, which: str) -> None:
    work, corpus, whole, part = gpt2_superwords
    documents = corpus.read_text(encoding="utf-8").split(EOT)
    encoded = assert_loaders_give_the_training_segmentation(LOADERS, {"whole": whole, "part": part}[which], [EOT],
                                                            documents, work)
    first_new = 50257 if which == "whole" else 999
    assert encoded[first_new:first_new + NEW_TOKENS].sum() > 0  # the superwords are used


def test_the_authors_cl100k_example(tmp_path: Path) -> None:
    """SuperBPE's `scripts/extend_existing_tokenizer.sh`: cl100k's 100,000 merges (and its special tokens) kept,
    extended to 128,000 tokens with the authors' stage-2 regex, on a few hundred KB of text; cl100k's ids stay."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join((FIXTURES / name).read_text(encoding="utf-8")
                              for name in ("hf_corpora_sample.txt", "corpus.en", "tinystories_sample.txt")),
                      encoding="utf-8")
    out = tmp_path / "cl100k-superwords"
    train(str(corpus), "--extend", f"cl100k={cl100k_file()}", "--superword-from", "100261", "--vocab-size",
          "128000", "--superword-pattern", AUTHORS_PATTERN, "--out", str(out))
    vocab, merges = load_gpt2(out / "vocab.json", out / "merges.txt")
    cl100k = json.loads((out / "tokenizer.json").read_text())["added_tokens"]
    assert {token["content"]: token["id"] for token in cl100k} == CL100K_SPECIALS
    assert len(merges) > 100000 and max(vocab) == 100276 + len(merges) - 100000
    assert sorted(set(vocab) - set(range(100256)) - set(CL100K_SPECIALS.values())) == list(
        range(100277, max(vocab) + 1))
    info = json.loads((out / "hf_bpe_training.json").read_text())
    assert info["pattern"] == AUTHORS_PATTERN and info["superword"]["stage_1_pattern"] == "cl100k"
    assert info["extends"]["merges"] == 100000 and info["vocab_size"] == len(vocab)
    documents = re.split("|".join(map(re.escape, CL100K_SPECIALS)), corpus.read_text(encoding="utf-8"))
    # Not the tiktoken twin: tiktoken drops the text a pattern leaves unmatched, as this one does (`tiktoken_encoding`).
    assert_loaders_give_the_training_segmentation(LOADERS[:-1], out, list(CL100K_SPECIALS), documents, tmp_path)


def test_a_converted_rank_file_keeps_the_tokens_its_merges_make(tmp_path: Path) -> None:
    """A tiktoken file converted by `hf-bpe convert` whose tokens b"xyz" and b" xyz" no merge makes: kept whole it is
    refused with one line; its first tokens are kept, and the directory encodes as training ended (merged by rank:
    the converted directory's lookups of whole pre-tokens are not kept)."""
    base = converted_rank_file(tmp_path)
    corpus = tmp_path / "corpus.txt"
    documents = ["the xyz other xyz thermal xyzzy " * 3, "ther xyz the\nxyz", "thethe xyzxyz 12345 the other"]
    corpus.write_text(EOT.join(documents * 4), encoding="utf-8")
    refused = run(str(corpus), "--extend", str(base), "--superword-from", "264", "--vocab-size", "300", "--out",
                  str(tmp_path / "refused"))
    assert refused.returncode == 2 and not (tmp_path / "refused").exists()
    assert re.fullmatch(r"hf-bpe train: error: --superword-from 264 keeps token b' ?xyz' \(id 26[01]\) of --extend "
                        r".*base, which none of its merges makes, so it cannot be a stage-1 token: it keeps at most "
                        r"262 tokens \(its bytes, merges and special tokens\)", one_line(refused.stderr))
    out = tmp_path / "superwords"
    result = run(str(corpus), "--extend", str(base), "--superword-from", "261", "--vocab-size", "280", "--out",
                 str(out), "--no-progress")
    assert result.returncode == 0, result.stderr
    assert json.loads((out / "tokenizer.json").read_text())["model"].get("ignore_merges") is False
    vocab, merges = load_gpt2(out / "vocab.json", out / "merges.txt")
    base_merges = load_gpt2(base / "vocab.json", base / "merges.txt")[1]
    assert len(base_merges) == 5 and merges[:4] == base_merges[:4] and len(merges) > 4
    assert vocab[max(vocab)] == EOT.encode() and max(vocab) == len(vocab) - 1  # as from scratch: special last
    assert_loaders_give_the_training_segmentation(LOADERS, out, [EOT], documents * 4, tmp_path)


@pytest.mark.parametrize(("arguments", "message"), [
    (["--superword-from", "60000", "--vocab-size", "70000"],
     "--superword-from 60000 is more than the 50,257 tokens of --extend gpt2: it counts the base's tokens kept"),
    (["--superword-from", "256"], "--superword-from 256 is too small: it counts the 256 byte tokens and the 1 special "
                                  "tokens too, so it must be at least 257"),
    (["--superword-pattern", AUTHORS_PATTERN], "--superword-pattern is the pattern of SuperBPE's stage 2: it needs "
                                               "--superword-from"),
    (["--superword-from", "50257", "--vocab-size", "50000"],
     "--superword-from 50257 must be at most --vocab-size (50000): stage 1 trains up to it"),
])
def test_bad_options_stop_before_any_work(tmp_path: Path, arguments: list[str], message: str) -> None:
    # The corpus does not exist: each option is refused before it is read.
    out = tmp_path / "out"
    options = ["--vocab-size", "50300"] if "--vocab-size" not in arguments else []
    result = run(str(tmp_path / "never-read.txt"), "--extend", "gpt2", "--out", str(out), *options, *arguments)
    assert result.returncode == 2
    assert one_line(result.stderr) == f"hf-bpe train: error: {message}"
    assert list(tmp_path.iterdir()) == []
