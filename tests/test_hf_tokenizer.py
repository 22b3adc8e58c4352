"""`HFBPETokenizer` against the fast tokenizer loaded from the same directory, field by field.

Runs under transformers 5 (installed) and 4 (`.ci/transformers4.sh`).
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tokenizers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transformers import AutoTokenizer

from hf_bpe.errors import InputError
from hf_bpe.gpt2_format import load_gpt2
from hf_bpe.hf_export import SAVED_FILES, load_tokenizer_directory, save_tokenizer_directory
from hf_bpe.hf_tokenizer import HFBPETokenizer

FIXTURES = Path(__file__).parent / "fixtures"
EOT = "<|endoftext|>"
SPECIALS = [EOT, "<|end|>", "<pad>"]

# Pieces that stress the GPT-2 pre-tokenizer and special-token matching.
TRICKY_PIECES = [
    " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r", "\x0b", "\x0c", "\x85", "\xa0", "\u1680", "\u2000", "\u2009",
    "\u200a", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff",
    "\u180e", "\x1c", "\x1f", "\x00",
    "'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'ve", "'VE", "'m", "'M", "'ll", "'LL", "'lL", "'d", "'D", "’s", "'",
    "don't", "I'M", "we'Ve", "it''s",
    "hello", " world", "Hello", "HELLO", "naïve", "e\u0301", "a\u0308\u0301", "Ωμέγα", "Привет", "日本語", "한국어",
    "مرحبا", " שלום", "\u202eabc\u202c", "١٢٣", "123", " 4567", "½", "Ⅻ", "x²", "3.14", "1,000", "...", "!!", "?!",
    "😀", "👍🏽", "👨\u200d👩\u200d👧", "🇩🇪", "\U0001f600\U0001f600", "—", "--", "``", "<", ">", "|", "<|", "|>",
    EOT, "<|endoftext", "endoftext|>", "<|end|>", "<|end", "<pad>", "<pad", "<|endoftext|><|endoftext|>", "<<|end|>>",
]


def adversarial_text() -> st.SearchStrategy[str]:
    """Text made of tricky pieces and arbitrary characters (no surrogates: they cannot be encoded as UTF-8)."""
    piece = st.one_of(st.sampled_from(TRICKY_PIECES),
                      st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=4))
    return st.lists(piece, max_size=25).map("".join)


@pytest.fixture(scope="module")
def directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trained 500-token tokenizer with three special tokens, two of them overlapping."""
    vocab, merges = load_gpt2(FIXTURES / "train-bpe-reference-vocab.json",
                              FIXTURES / "train-bpe-reference-merges.txt")
    vocab = {**vocab, 500: b"<|end|>", 501: b"<pad>"}
    return save_tokenizer_directory(tmp_path_factory.mktemp("hf_tokenizer") / "tok", vocab, merges, SPECIALS)


@pytest.fixture(scope="module")
def ours(directory: Path) -> HFBPETokenizer:
    tokenizer = HFBPETokenizer.from_pretrained(directory)
    tokenizer.pad_token = EOT
    return tokenizer


@pytest.fixture(scope="module")
def fast(directory: Path):
    tokenizer = AutoTokenizer.from_pretrained(directory)
    tokenizer.pad_token = EOT
    return tokenizer


def as_plain(encoding: Any) -> Any:
    """A BatchEncoding (or an exception) as plain Python values, for comparing."""
    if isinstance(encoding, Exception):
        return ("error", str(encoding).split(":")[0])
    return {key: value.tolist() if hasattr(value, "tolist") else value for key, value in encoding.items()}


def call(tokenizer: Any, args: tuple, options: dict[str, Any]) -> Any:
    try:
        return as_plain(tokenizer(*args, **options))
    except Exception as error:  # the fast tokenizer raises a bare Exception for impossible truncation
        return as_plain(error)


TEXTS = ["Hello world<|endoftext|> again", "", "a  b\r\n c", "It's OK   yes 😀", "<pad><|end|><|endoftext|>x"]
INPUTS = {
    "single": (TEXTS[0],),
    "batch": (TEXTS,),
    "pair": (TEXTS[0], TEXTS[3]),
    "batch_of_pairs": (TEXTS, TEXTS[::-1]),
    "list_of_pairs": ([(first, second) for first, second in zip(TEXTS, TEXTS[::-1])],),
}
OPTIONS = {
    "defaults": {},
    "pad_longest": dict(padding=True),
    "pad_max_length": dict(padding="max_length", max_length=12, truncation=True),
    "truncate_left": dict(truncation=True, max_length=3, padding=True, padding_side="left"),
    "numpy": dict(padding=True, return_tensors="np"),
    "no_attention_mask": dict(padding=True, return_attention_mask=False),
    "multiple_of": dict(padding=True, pad_to_multiple_of=8, return_length=True),
    "lengths_and_masks": dict(truncation=True, max_length=5, return_length=True, return_special_tokens_mask=True),
    "token_type_ids": dict(return_token_type_ids=True, padding=True),
    "only_first": dict(truncation="only_first", max_length=4),
    "only_second": dict(truncation="only_second", max_length=9),
    "only_second_too_short": dict(truncation="only_second", max_length=2),
    "longest_first": dict(truncation="longest_first", max_length=7),
    "split_special_tokens": dict(split_special_tokens=True),
    "no_special_tokens_added": dict(add_special_tokens=False),
}


@pytest.mark.parametrize("input_name", list(INPUTS))
@pytest.mark.parametrize("option_name", list(OPTIONS))
def test_call_matches_the_fast_tokenizer(ours, fast, input_name: str, option_name: str) -> None:
    args, options = INPUTS[input_name], OPTIONS[option_name]
    if option_name == "split_special_tokens" and not hasattr(fast, "split_special_tokens"):
        pytest.skip("this transformers has no split_special_tokens")
    assert call(ours, args, options) == call(fast, args, options)


def test_truncation_side_left(ours, fast) -> None:
    ours.truncation_side = fast.truncation_side = "left"
    try:
        for args in INPUTS.values():
            assert call(ours, args, dict(truncation=True, max_length=4)) == \
                call(fast, args, dict(truncation=True, max_length=4))
    finally:
        ours.truncation_side = fast.truncation_side = "right"


def test_numpy_output_has_the_same_shape_and_dtype(ours, fast) -> None:
    mine, theirs = ours(TEXTS, padding=True, return_tensors="np"), fast(TEXTS, padding=True, return_tensors="np")
    for key in ("input_ids", "attention_mask"):
        assert isinstance(mine[key], np.ndarray)
        assert (mine[key].shape, mine[key].dtype) == (theirs[key].shape, theirs[key].dtype)


def test_encode_decode_and_tokens_match(ours, fast) -> None:
    for text in TEXTS:
        ids = fast.encode(text)
        assert ours.encode(text) == ids
        assert ours.tokenize(text) == fast.tokenize(text)
        assert ours.convert_ids_to_tokens(ids) == fast.convert_ids_to_tokens(ids)
        for skip in (False, True):
            assert ours.decode(ids, skip_special_tokens=skip) == fast.decode(ids, skip_special_tokens=skip)
    batch = [fast.encode(text) for text in TEXTS]
    assert ours.batch_decode(batch, skip_special_tokens=True) == fast.batch_decode(batch, skip_special_tokens=True)
    assert ours.decode(batch[0]) == TEXTS[0]


def test_vocabulary_and_special_tokens_match(ours, fast) -> None:
    assert ours.get_vocab() == fast.get_vocab()
    assert len(ours) == len(fast) == 502
    assert ours.all_special_ids == fast.all_special_ids
    assert (ours.eos_token, ours.bos_token, ours.unk_token) == (EOT, EOT, EOT)
    assert ours.eos_token_id == fast.eos_token_id == 0


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(adversarial_text(), min_size=1, max_size=8))
def test_adversarial_text_matches_the_fast_and_backend_tokenizers(ours, fast, directory, texts: list[str]) -> None:
    backend = _backend(directory)
    expected = [encoding.ids for encoding in backend.encode_batch(texts)]
    assert ours(texts)["input_ids"] == expected
    assert fast(texts)["input_ids"] == expected
    for text, ids in zip(texts, expected):
        assert ours.encode(text) == ids
        # The stock slow route (added-token split, then _tokenize) agrees too.
        assert ours.convert_tokens_to_ids(ours.tokenize(text)) == ids
        assert ours.decode(ids) == fast.decode(ids) == text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ids=st.lists(st.integers(min_value=0, max_value=501), max_size=30), skip=st.booleans())
def test_decoding_any_ids_matches_the_fast_tokenizer(ours, fast, ids: list[int], skip: bool) -> None:
    # Arbitrary ids split UTF-8 sequences: both must replace the broken bytes the same way.
    assert ours.decode(ids, skip_special_tokens=skip) == fast.decode(ids, skip_special_tokens=skip)


_backends: dict[Path, tokenizers.Tokenizer] = {}


def _backend(directory: Path) -> tokenizers.Tokenizer:
    if directory not in _backends:
        _backends[directory] = tokenizers.Tokenizer.from_file(str(directory / "tokenizer.json"))
    return _backends[directory]


def test_stock_routes_still_work(ours, fast) -> None:
    text = TEXTS[3]
    ids = fast.encode(text)
    assert ours.encode(ids) == ids  # ids in, ids out
    assert ours.decode(ours.convert_tokens_to_ids(ours.tokenize(text))) == text


def test_added_tokens_match(directory: Path) -> None:
    ours, fast = HFBPETokenizer.from_pretrained(directory), AutoTokenizer.from_pretrained(directory)
    for tokenizer in (ours, fast):
        tokenizer.add_special_tokens({"mask_token": "<mask>"})
        tokenizer.add_tokens(["hello world"])
    text = "say hello world<mask> to <pad>"
    assert ours.convert_tokens_to_ids("<mask>") == fast.convert_tokens_to_ids("<mask>") == 502
    assert ours(text)["input_ids"] == fast(text)["input_ids"]
    assert 503 in ours(text)["input_ids"]
    assert ours.decode(ours(text)["input_ids"]) == fast.decode(fast(text)["input_ids"])


def test_pickle_round_trip(ours) -> None:
    copy = pickle.loads(pickle.dumps(ours))
    assert copy(TEXTS)["input_ids"] == ours(TEXTS)["input_ids"]
    assert copy.pad_token == EOT


def test_datasets_fingerprint_is_stable_after_encoding(directory: Path) -> None:
    from datasets.fingerprint import Hasher

    tokenizer = HFBPETokenizer.from_pretrained(directory)
    before = Hasher.hash(tokenizer)
    tokenizer(TEXTS * 3)
    tokenizer.encode("something new to cache")
    assert Hasher.hash(tokenizer) == before


def test_dataset_map_with_two_processes_reuses_its_cache(directory: Path, tmp_path: Path) -> None:
    import datasets

    tokenizer = HFBPETokenizer.from_pretrained(directory)
    datasets.Dataset.from_dict({"text": TEXTS * 20}).save_to_disk(str(tmp_path / "data"))
    dataset = datasets.load_from_disk(str(tmp_path / "data"))

    def tokenize(batch: dict[str, list[str]]) -> Any:
        return tokenizer(batch["text"])

    first = dataset.map(tokenize, batched=True, num_proc=2)
    second = dataset.map(tokenize, batched=True, num_proc=2)
    assert first["input_ids"] == [tokenizer.encode(text) for text in TEXTS * 20]
    assert first.cache_files and first.cache_files == second.cache_files
    assert first._fingerprint == second._fingerprint


def test_save_pretrained_writes_the_same_directory(ours, directory: Path, tmp_path: Path) -> None:
    ours.save_pretrained(tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(SAVED_FILES)
    for name in ("vocab.json", "merges.txt", "tokenizer.json", "special_tokens_map.json", "hf_bpe_tokenizer.py"):
        if name == "special_tokens_map.json":
            continue  # ours has a pad token set
        assert (tmp_path / name).read_bytes() == (directory / name).read_bytes(), name
    assert load_tokenizer_directory(tmp_path) == load_tokenizer_directory(directory)
    reloaded = HFBPETokenizer.from_pretrained(tmp_path)
    assert reloaded.pad_token == EOT
    assert reloaded(TEXTS)["input_ids"] == ours(TEXTS)["input_ids"]


def test_add_prefix_space_is_refused(directory: Path) -> None:
    with pytest.raises(ValueError, match="add_prefix_space=True"):
        HFBPETokenizer.from_pretrained(directory, add_prefix_space=True)


@pytest.mark.parametrize("name", ["vocab.json", "merges.txt"])
def test_missing_file_is_named(directory: Path, tmp_path: Path, name: str) -> None:
    for path in directory.iterdir():
        if path.name != name:
            (tmp_path / path.name).write_bytes(path.read_bytes())
    with pytest.raises(InputError, match=rf"{name}: no such file"):
        HFBPETokenizer.from_pretrained(tmp_path)


def test_corrupt_merges_file_is_named_with_its_line(directory: Path, tmp_path: Path) -> None:
    for path in directory.iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    lines = (tmp_path / "merges.txt").read_text(encoding="utf-8").split("\n")
    lines[3] = "Ġ zzzq"
    (tmp_path / "merges.txt").write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(InputError, match=r"merges.txt: line 4: .*is not in the vocab"):
        HFBPETokenizer.from_pretrained(tmp_path)
