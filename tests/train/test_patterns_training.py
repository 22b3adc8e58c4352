"""Exact training with other patterns: the merges of `train_bpe*(..., pattern=...)` equal those of the plain reference
trainer (`hf_bpe.train._reference`, the `regex` module with the same pattern, the same tie rule), on hypothesis text
and on the CS336-style fixtures; and `hf-bpe train --pattern` records the pattern where every loader finds it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hf_bpe import PATTERNS
from hf_bpe.cli.main import main
from hf_bpe.common.errors import InputError
from hf_bpe.formats.hf_directory import load_tokenizer_directory, read_directory_pattern
from hf_bpe.train._reference import reference_train
from hf_bpe.train.api import train_bpe, train_bpe_from_counts, train_bpe_from_iterator
from tests import FIXTURES
from tests.pretokenize.test_patterns import CUSTOM, PRESETS, pattern_text

EOT = "<|endoftext|>"
ALL = ["gpt2", *PRESETS, *CUSTOM]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(texts=st.lists(pattern_text | st.sampled_from(["aaaa aaaa", "1234 1234 12", "I'M I'm i'M", "\n\n \n\n"]),
                      min_size=1, max_size=8),
       pattern=st.sampled_from(ALL), vocab_size=st.integers(256, 330),
       special_tokens=st.sampled_from([[], [EOT], ["<pad>", EOT]]))
def test_merges_equal_the_reference_trainer(texts: list[str], pattern: str, vocab_size: int,
                                            special_tokens: list[str]) -> None:
    vocab_size = max(vocab_size, 256 + len(special_tokens))
    expected = reference_train(texts, vocab_size, special_tokens, pattern)
    assert train_bpe_from_iterator(texts, vocab_size, special_tokens, num_workers=1, progress=False,
                                   pattern=pattern) == expected


@pytest.mark.parametrize("pattern", ALL, ids=["gpt2", *PRESETS, "qwen2", "oniguruma_traps", "look_behind", "astral",
                                              "gaps"])
@pytest.mark.parametrize("corpus", ["corpus.en", "tinystories_sample.txt"])
def test_cs336_fixtures_train_as_the_reference_with_every_pattern(pattern: str, corpus: str) -> None:
    text = (FIXTURES / corpus).read_text(encoding="utf-8")
    expected_vocab, expected_merges = reference_train([text], 500, [EOT], pattern)
    vocab, merges = train_bpe(FIXTURES / corpus, 500, [EOT], num_workers=1, progress=False, pattern=pattern)
    assert merges == expected_merges
    assert vocab == expected_vocab


def test_a_bad_pattern_is_refused_before_any_work(tmp_path: Path) -> None:
    never = (text for text in iter(lambda: pytest.fail("the texts were read"), None))
    with pytest.raises(InputError, match=r"\\p\{Han\}"):
        train_bpe_from_iterator(never, 300, pattern=r"\p{Han}+")
    with pytest.raises(InputError, match="empty string"):
        train_bpe(tmp_path / "missing.txt", 300, pattern="x?")
    with pytest.raises(InputError, match="pattern"):
        train_bpe_from_counts({b"ab": 1}, 300, pattern="(")


def test_cli_train_records_the_pattern_in_the_directory_the_record_and_the_card(tmp_path: Path) -> None:
    out = tmp_path / "tok"
    corpus = str(FIXTURES / "tinystories_sample.txt")
    assert main(["train", corpus, "--out", str(out), "--vocab-size", "400", "--pattern", "gpt4", "--no-progress",
                 "--workers", "1"]) == 0
    assert load_tokenizer_directory(out).pattern == PATTERNS["cl100k"] == read_directory_pattern(out)
    record = json.loads((out / "hf_bpe_training.json").read_text(encoding="utf-8"))
    assert record["pattern"] == "cl100k"
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "Pre-tokenization is the `cl100k` pattern" in card and 'pattern=\'cl100k\'' in card
    expected = reference_train([Path(corpus).read_text(encoding="utf-8")], 400, [EOT], "cl100k")[1]
    vocab, merges, specials = load_tokenizer_directory(out)
    assert merges == expected

    custom = tmp_path / "custom"
    assert main(["train", corpus, "--out", str(custom), "--vocab-size", "300", "--pattern", CUSTOM[0],
                 "--no-progress", "--workers", "1"]) == 0
    assert json.loads((custom / "hf_bpe_training.json").read_text(encoding="utf-8"))["pattern"] == CUSTOM[0]
    assert "`" + CUSTOM[0] + "`" in (custom / "README.md").read_text(encoding="utf-8")
    assert read_directory_pattern(custom) == CUSTOM[0]


def test_cli_train_refuses_a_bad_pattern_before_training(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "tok"
    assert main(["train", str(FIXTURES / "german.txt"), "--out", str(out), "--pattern", r"\w+"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("hf-bpe train: error: pattern '\\\\w+': the escape \\w is not supported")
    assert error.count("\n") == 1 and "Traceback" not in error
    assert not out.exists()


def test_cli_train_on_a_dataset_takes_the_pattern(tmp_path: Path) -> None:
    texts = [part for part in (FIXTURES / "hf_corpora_sample.txt").read_text(encoding="utf-8").split(EOT) if part]
    data_file = tmp_path / "docs.jsonl"
    data_file.write_text("".join(json.dumps({"body": text}) + "\n" for text in texts), encoding="utf-8")
    out = tmp_path / "tok"
    assert main(["train", "--dataset", "json", "--data-files", str(data_file), "--text-column", "body",
                 "--vocab-size", "400", "--pattern", "o200k", "--out", str(out), "--no-progress", "--workers", "1",
                 "--cache-dir", str(tmp_path / "cache")]) == 0
    vocab, merges, specials = loaded = load_tokenizer_directory(out)
    assert loaded.pattern == PATTERNS["o200k"]
    assert merges == reference_train(texts, 400, [EOT], "o200k")[1]
