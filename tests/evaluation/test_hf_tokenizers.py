"""Other models' tokenizers as baselines (hf_bpe.evaluation.hf_tokenizers): directories that the tests build with
`tokenizers` (a normalizer, a sequence of pre-tokenizers), counted by `tokenizers` itself, in parts exactly as on the
whole file, and shown token by token."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import tokenizers
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tokenizers import AddedToken, decoders, models, normalizers, pre_tokenizers, trainers

from hf_bpe.common.errors import InputError
from hf_bpe.evaluation import hf_tokenizers
from hf_bpe.evaluation.baselines import resolve_baseline, resolve_directory, resolve_tokenizer
from hf_bpe.evaluation.evaluate import evaluate, json_report, markdown_report
from hf_bpe.evaluation.hf_tokenizers import TokenizersEngine, load_tokenizer_json
from hf_bpe.evaluation.viewer import token_spans
from hf_bpe.formats.gpt2 import load_gpt2
from hf_bpe.formats.hf_directory import save_tokenizer_directory
from tests import FIXTURES

EOT, IM_START = "<|endoftext|>", "<|im_start|>"
CORPUS = FIXTURES / "hf_corpora_sample.txt"  # documents separated by <|endoftext|>
TRAINING_TEXT = CORPUS.read_text(encoding="utf-8").split(EOT)
SPLIT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"""
         r"""|\s+(?!\S)|\s+""")  # Qwen2's


def build(directory: Path, kind: str) -> Path:
    """A tokenizer.json as `tokenizers` writes it. "qwen_like": NFKC + Lowercase, then Split + Digits + ByteLevel
    (byte-level BPE); "llama2_like": Metaspace with prepend_scheme "first" and byte fallback (SentencePiece style)."""
    if kind == "qwen_like":
        tokenizer = tokenizers.Tokenizer(models.BPE())
        tokenizer.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(tokenizers.Regex(SPLIT), behavior="isolated"),
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        tokenizer.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=[EOT, IM_START], show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    else:
        tokenizer = tokenizers.Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>"))
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
        tokenizer.decoder = decoders.Sequence([decoders.Metaspace(prepend_scheme="first"), decoders.ByteFallback()])
        trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<unk>", EOT, IM_START], show_progress=False)
    tokenizer.train_from_iterator(TRAINING_TEXT, trainer)
    if kind == "llama2_like":  # with the 256 byte tokens a SentencePiece model falls back to
        trained = json.loads(tokenizer.to_str())["model"]
        vocab = trained["vocab"] | {f"<0x{byte:02X}>": len(trained["vocab"]) + byte for byte in range(256)}
        tokenizer.model = models.BPE(vocab=vocab, merges=[tuple(merge) for merge in trained["merges"]],
                                     byte_fallback=True, unk_token="<unk>")
    tokenizer.add_special_tokens([AddedToken(EOT, special=True, normalized=False),
                                  AddedToken(IM_START, special=True, normalized=False)])
    directory.mkdir(parents=True)
    tokenizer.save(str(directory / "tokenizer.json"))
    return directory


@pytest.fixture(scope="module")
def directories(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("foreign")
    return {kind: build(root / kind, kind) for kind in ("qwen_like", "llama2_like")}


@cache
def library(path: str) -> tokenizers.Tokenizer:
    return tokenizers.Tokenizer.from_file(str(Path(path) / "tokenizer.json"))


def library_counts(directory: Path, text: str, size: int) -> np.ndarray:
    """The counts of encoding the whole text with `tokenizers` directly."""
    ids = library(str(directory)).encode(text, add_special_tokens=False).ids
    return np.bincount(np.array(ids, dtype=np.int64), minlength=size)


@pytest.mark.parametrize("kind, parts", [("qwen_like", len(TRAINING_TEXT)), ("llama2_like", 1)])
def test_a_file_counts_as_tokenizers_encodes_it_whole(directories: dict[str, Path], kind: str, parts: int) -> None:
    named = resolve_baseline(str(directories[kind]))
    assert named.engine == "tokenizers" and isinstance(named.tokenizer, TokenizersEngine)
    text = CORPUS.read_text(encoding="utf-8")
    # Cut after each <|endoftext|> unless Metaspace's "first" makes the start of the text special.
    assert len(named.tokenizer.parts(text)) == parts
    [result] = evaluate([named], [CORPUS], num_workers=1)
    assert np.array_equal(result.token_counts, library_counts(directories[kind], text, len(result.token_counts)))
    assert result.num_tokens == len(library(str(directories[kind])).encode(text, add_special_tokens=False).ids)


def test_truncation_and_padding_in_the_file_are_not_applied(directories: dict[str, Path], tmp_path: Path) -> None:
    content = json.loads((directories["qwen_like"] / "tokenizer.json").read_text(encoding="utf-8"))
    content["truncation"] = {"direction": "Right", "max_length": 8, "strategy": "LongestFirst", "stride": 0}
    content["padding"] = {"strategy": {"Fixed": 64}, "direction": "Right", "pad_to_multiple_of": None, "pad_id": 0,
                          "pad_type_id": 0, "pad_token": EOT}
    (tmp_path / "tokenizer.json").write_text(json.dumps(content), encoding="utf-8")
    text = CORPUS.read_text(encoding="utf-8")
    counts = load_tokenizer_json(tmp_path).count_tokens(text)
    assert np.array_equal(counts, library_counts(directories["qwen_like"], text, len(counts)))
    assert load_tokenizer_json(tmp_path).encode("Hello") == library(str(directories["qwen_like"])).encode(
        "Hello", add_special_tokens=False).ids


def test_metaspace_first_is_why_such_a_tokenizer_is_not_cut(directories: dict[str, Path]) -> None:
    # Encoded in parts, each part would start with a "▁" that the whole text has only at its start.
    directory = directories["llama2_like"]
    text = CORPUS.read_text(encoding="utf-8")
    pieces = text.split(EOT)
    parts = [piece + EOT for piece in pieces[:-1]] + [pieces[-1]]
    in_parts = sum(len(encoding.ids) for encoding in library(str(directory)).encode_batch(parts,
                                                                                          add_special_tokens=False))
    assert in_parts != len(library(str(directory)).encode(text, add_special_tokens=False).ids)


_PIECES = [EOT, IM_START, " ", "  ", "\n", "\n\n", "\t", "Hello", " World", "ÉCOLE", "ﬁ", "１２３", "12345", "'S",
           "日本語", "\U0001f600", "<|endoftext", "|>", "\xa0"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.lists(st.sampled_from(_PIECES) | st.text(max_size=3), max_size=30).map("".join),
       kind=st.sampled_from(["qwen_like", "llama2_like"]))
@example(text=f"{EOT}{EOT} a{IM_START}\n{EOT}", kind="qwen_like").via("added tokens side by side and at the ends")
def test_counts_in_parts_equal_the_whole_text(directories: dict[str, Path], text: str, kind: str) -> None:
    engine = load_tokenizer_json(directories[kind])
    assert "".join(engine.parts(text)) == text
    counts = engine.count_tokens(text)
    assert np.array_equal(counts, library_counts(directories[kind], text, len(counts)))


def test_a_mix_of_engines_in_one_report(directories: dict[str, Path], tmp_path: Path) -> None:
    # An hf_bpe directory (cut into chunks, two workers) beside another model's tokenizer, each exact.
    ours = save_tokenizer_directory(tmp_path / "gpt2", *load_gpt2(FIXTURES / "gpt2_vocab.json",
                                                                  FIXTURES / "gpt2_merges.txt"), [EOT])
    named = [resolve_directory(str(ours)), resolve_baseline(str(directories["qwen_like"]))]
    results = evaluate(named, [CORPUS], num_workers=2, chunk_bytes=20_000)
    text = CORPUS.read_text(encoding="utf-8")
    assert results[0].num_tokens == len(named[0].tokenizer.encode(text))
    assert np.array_equal(results[1].token_counts,
                          library_counts(directories["qwen_like"], text, len(results[1].token_counts)))
    report = markdown_report(results)
    assert "| Never used | Encoded by |" in report
    assert report.splitlines()[2].endswith("| hf_bpe |") and report.splitlines()[3].endswith("| tokenizers |")
    assert [entry["engine"] for entry in json_report(results)["results"]] == ["hf_bpe", "tokenizers"]


def test_tokens_read_as_bytes_and_shown(directories: dict[str, Path]) -> None:
    qwen_like, llama2_like = (load_tokenizer_json(directories[kind]) for kind in ("qwen_like", "llama2_like"))
    assert qwen_like.special_tokens == [EOT, IM_START] and qwen_like.token_to_id(EOT) == library(
        str(directories["qwen_like"])).token_to_id(EOT)
    assert all(len(qwen_like.vocab[qwen_like.token_to_id(bytes([byte]))]) == 1 for byte in range(256))
    assert llama2_like.vocab[llama2_like.token_to_id(b"\xe6")] == b"\xe6"  # the byte-fallback token <0xE6>
    text = f"Hello World 123 日本{EOT} ok"
    for engine, kind in ((qwen_like, "qwen_like"), (llama2_like, "llama2_like")):
        spans = token_spans(engine, text)
        assert [span.id for span in spans] == library(str(directories[kind])).encode(text,
                                                                                     add_special_tokens=False).ids
    # Lower-cased by the normalizer, then byte-level: the tokens spell the normalized text.
    assert b"".join(span.token for span in token_spans(qwen_like, "Hello World")) == b"hello world"
    named = resolve_tokenizer(str(directories["qwen_like"]))
    assert named.engine == "tokenizers" and not named.is_baseline


def test_an_hf_bpe_directory_is_shown_by_hf_bpe(tmp_path: Path) -> None:
    ours = save_tokenizer_directory(tmp_path / "tok", *load_gpt2(FIXTURES / "train-bpe-reference-vocab.json",
                                                                 FIXTURES / "train-bpe-reference-merges.txt"), [EOT])
    assert resolve_tokenizer(str(ours)).engine == "hf_bpe"
    assert resolve_baseline(str(ours)).engine == "tokenizers"  # a baseline directory: its tokenizer.json


@pytest.mark.parametrize("content, reason", [
    (None, "tokenizer.json: no such file (a HuggingFace tokenizer directory has the tokenizer.json"),
    ("{", "tokenizer.json: not valid JSON (line 1, column 2"),
    ('{"version": "1.0"}', 'tokenizer.json: not a tokenizers tokenizer.json (no "model" object)'),
    ('{"model": {"type": "Nope"}}', f"tokenizer.json: tokenizers {tokenizers.__version__} cannot read it: "),
])
def test_a_directory_that_cannot_be_read_is_one_line_naming_the_file(tmp_path: Path, content: str | None,
                                                                     reason: str) -> None:
    if content is not None:
        (tmp_path / "tokenizer.json").write_text(content, encoding="utf-8")
    with pytest.raises(InputError) as raised:
        resolve_baseline(str(tmp_path))
    assert str(raised.value).startswith(f"{tmp_path}{'/'}{reason}") and "\n" not in str(raised.value)


def test_a_baseline_pickles_by_its_path(directories: dict[str, Path]) -> None:
    import pickle

    engine = load_tokenizer_json(directories["qwen_like"])
    again = pickle.loads(pickle.dumps(engine))
    assert again.encode("Hello 123") == engine.encode("Hello 123") and repr(again) == repr(engine)
    assert hf_tokenizers.ENGINE == engine.engine == "tokenizers"
