"""`HFBPETokenizer` against the fast tokenizer loaded from the same directory, field by field.

Runs under transformers 5 (installed) and 4 (`.ci/transformers4.sh`).
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tokenizers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transformers import AddedToken, AutoTokenizer

from hf_bpe.common.errors import InputError
from hf_bpe.encode.tokenizer import Tokenizer
from hf_bpe.formats.gpt2 import load_gpt2
from hf_bpe.formats.hf_directory import SAVED_FILES, load_tokenizer_directory, save_tokenizer_directory
from hf_bpe.hf.tokenizer import HFBPETokenizer
from tests import FIXTURES

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
    if isinstance(encoding, BaseException):
        if "stride" in str(encoding):  # the fast tokenizer panics (pyo3 PanicException), we raise ValueError
            return ("error", "stride")
        return ("error", str(encoding).split(":")[0])
    return {key: value.tolist() if hasattr(value, "tolist") else value for key, value in encoding.items()}


def call(tokenizer: Any, args: tuple, options: dict[str, Any]) -> Any:
    try:
        return as_plain(tokenizer(*args, **options))
    except (Exception, BaseException) as error:  # the fast tokenizer raises a bare Exception, or panics
        if isinstance(error, (KeyboardInterrupt, SystemExit)):
            raise
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


# ------------------------------------------------------------------------------------ overflowing windows (issue 11)

OVERFLOW_OPTIONS = {
    "stride": dict(truncation=True, max_length=8, stride=3, return_overflowing_tokens=True),
    "no_stride": dict(truncation=True, max_length=4, return_overflowing_tokens=True),
    "stride_padded": dict(truncation=True, max_length=6, stride=2, return_overflowing_tokens=True, padding=True,
                          return_length=True, return_special_tokens_mask=True),
    "stride_padded_left_numpy": dict(truncation=True, max_length=6, stride=1, return_overflowing_tokens=True,
                                     padding="max_length", padding_side="left", return_tensors="np"),
    "only_first": dict(truncation="only_first", max_length=9, stride=2, return_overflowing_tokens=True),
    "only_second": dict(truncation="only_second", max_length=9, stride=1, return_overflowing_tokens=True),
    "longest_first": dict(truncation="longest_first", max_length=7, stride=1, return_overflowing_tokens=True,
                          return_token_type_ids=True),
    "with_offsets": dict(truncation=True, max_length=5, stride=2, return_overflowing_tokens=True,
                         return_offsets_mapping=True, padding=True),
    "stride_too_large": dict(truncation=True, max_length=4, stride=4, return_overflowing_tokens=True),
}
LONG_TEXTS = [" ".join(TEXTS) * 3, "short", "", TEXTS[3] * 4, "日本語のテキスト 😀" * 5]
OVERFLOW_INPUTS = {
    "single": (LONG_TEXTS[0],),
    "batch": (LONG_TEXTS,),
    "pair": (LONG_TEXTS[0], LONG_TEXTS[3]),
    "batch_of_pairs": (LONG_TEXTS, LONG_TEXTS[::-1]),
}


@pytest.mark.parametrize("input_name", list(OVERFLOW_INPUTS))
@pytest.mark.parametrize("option_name", list(OVERFLOW_OPTIONS))
def test_overflowing_windows_match_the_fast_tokenizer(ours, fast, input_name: str, option_name: str) -> None:
    args, options = OVERFLOW_INPUTS[input_name], OVERFLOW_OPTIONS[option_name]
    mine, theirs = call(ours, args, options), call(fast, args, options)
    assert mine == theirs
    if option_name == "stride":
        assert "overflow_to_sample_mapping" in mine


def test_overflow_with_left_truncation_matches_the_fast_tokenizer(ours, fast) -> None:
    ours.truncation_side = fast.truncation_side = "left"
    try:
        for args in OVERFLOW_INPUTS.values():
            for options in (OVERFLOW_OPTIONS["stride"], OVERFLOW_OPTIONS["longest_first"]):
                assert call(ours, args, options) == call(fast, args, options)
    finally:
        ours.truncation_side = fast.truncation_side = "right"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(adversarial_text(), min_size=1, max_size=4), max_length=st.integers(1, 12),
       stride=st.integers(0, 11), pair=st.booleans(),
       strategy=st.sampled_from(["longest_first", "only_first", "only_second"]))
def test_any_overflow_matches_the_fast_tokenizer(ours, fast, texts: list[str], max_length: int, stride: int,
                                                 pair: bool, strategy: str) -> None:
    args = (texts, texts[::-1]) if pair else (texts,)
    options = dict(truncation=strategy if pair else True, max_length=max_length, stride=min(stride, max_length - 1),
                   return_overflowing_tokens=True, return_offsets_mapping=True)
    assert call(ours, args, options) == call(fast, args, options)


# ----------------------------------------------------------------------------------------------- offsets (issue 11)

MULTILINGUAL_PIECES = TRICKY_PIECES + ["Größe", "ﬁ", "İ", "ß", "ǅ", "🏳️\u200d🌈", "𝔘𝔫𝔦", "\U0010ffff", "é" * 3,
                                       "中文字符", "ไทย", "हिन्दी", "각", "\u0301", "a\u0300\u0301\u0302"]


def multilingual_text() -> st.SearchStrategy[str]:
    piece = st.one_of(st.sampled_from(MULTILINGUAL_PIECES),
                      st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=5))
    return st.lists(piece, max_size=20).map("".join)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(multilingual_text(), min_size=1, max_size=6), pair=st.booleans(),
       split_special_tokens=st.booleans())
def test_offsets_match_the_fast_tokenizer(ours, fast, texts: list[str], pair: bool,
                                          split_special_tokens: bool) -> None:
    args = (texts, texts[::-1]) if pair else (texts,)
    options: dict[str, Any] = dict(return_offsets_mapping=True, padding=True)
    if split_special_tokens and hasattr(fast, "split_special_tokens"):
        options["split_special_tokens"] = True
    mine, theirs = call(ours, args, options), call(fast, args, options)
    assert mine == theirs
    for text in texts:  # a single string too
        assert call(ours, (text,), dict(return_offsets_mapping=True)) == \
            call(fast, (text,), dict(return_offsets_mapping=True))


def test_offsets_of_a_character_split_between_tokens(ours, fast) -> None:
    text = "x😀é"
    mine = ours(text, return_offsets_mapping=True)
    assert mine["offset_mapping"] == fast(text, return_offsets_mapping=True)["offset_mapping"]
    spans = mine["offset_mapping"]
    assert spans[0] == (0, 1) and spans[-1][1] == 3 and len(spans) > 3  # the emoji's bytes share its span


def test_offsets_are_refused_where_they_cannot_match(directory: Path) -> None:
    tokenizer = HFBPETokenizer.from_pretrained(directory)
    with pytest.raises(NotImplementedError, match="return_offsets_mapping=True is supported for text"):
        tokenizer(["a", "b"], is_split_into_words=True, return_offsets_mapping=True)


# -------------------------------------------------------------------------------------- decoding (issues 10 and 11)

def test_decode_refuses_ids_that_are_not_integers(ours) -> None:
    for bad in (["5"], [2.0], [1, None], "5"):
        with pytest.raises(TypeError, match="token ids must be integers"):
            ours.decode(bad)
    ids = ours.encode("HI")
    assert ours.decode(np.array(ids, dtype=np.int64)) == ours.decode(ids) == "HI"
    assert ours.decode([np.int32(ids[0]), np.uint16(ids[1])]) == "HI"
    assert ours.decode(ids[0]) == "H"


def test_clean_up_tokenization_spaces_follows_the_fast_tokenizer(ours, fast) -> None:
    ids = fast.encode("Hello , world ! I 'm here . don 't")
    for cleanup in (None, False, True):
        assert ours.decode(ids, clean_up_tokenization_spaces=cleanup) == \
            fast.decode(ids, clean_up_tokenization_spaces=cleanup)


ADDED_TOKEN_TEXT = st.lists(st.sampled_from(["ab", "<x>", "a", "b", " ", "  ", "\n", "x", "_", ".", "é", "1", "\u0301",
                                              "ab<x>", "<x> ", EOT, "<pad>", "\u3000"]), max_size=12).map("".join)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flags=st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans(), st.booleans(), st.booleans()),
                      min_size=3, max_size=3),
       texts=st.lists(ADDED_TOKEN_TEXT, min_size=1, max_size=4), split_special_tokens=st.booleans())
def test_added_tokens_with_flags_match_the_fast_tokenizer(directory: Path, flags, texts: list[str],
                                                          split_special_tokens: bool) -> None:
    ours, fast = HFBPETokenizer.from_pretrained(directory), AutoTokenizer.from_pretrained(directory)
    for content, (single_word, lstrip, rstrip, normalized, special) in zip(["ab", "<x>", "b"], flags):
        token = AddedToken(content, single_word=single_word, lstrip=lstrip, rstrip=rstrip, normalized=normalized,
                           special=special)
        for tokenizer in (ours, fast):
            tokenizer.add_tokens([token], special_tokens=special)
    options: dict[str, Any] = dict(return_offsets_mapping=True)
    if hasattr(fast, "split_special_tokens"):
        options["split_special_tokens"] = split_special_tokens
    assert call(ours, (texts,), options) == call(fast, (texts,), options)
    for text in texts:
        assert ours.tokenize(text) == fast.tokenize(text)


def test_single_word_tokens_need_non_word_characters_around_them(directory: Path) -> None:
    ours, fast = HFBPETokenizer.from_pretrained(directory), AutoTokenizer.from_pretrained(directory)
    for tokenizer in (ours, fast):
        tokenizer.add_tokens([AddedToken("ab", single_word=True)])
    token_id = ours.convert_tokens_to_ids("ab")
    for text, found in [("ab", True), ("x ab y", True), ("xab", False), ("abx", False), (" ab.", True),
                        ("(ab)", True), ("_ab", False), ("éab", False), ("1ab", False), ("xab ab abx", True)]:
        assert (token_id in ours(text)["input_ids"]) is found, text
        assert ours(text)["input_ids"] == fast(text)["input_ids"], text


# ------------------------------------------------------------------------------------ pickles, hashing, the Hub

def test_pickle_is_smaller_than_the_fast_tokenizers(ours, fast) -> None:
    ours(TEXTS)  # fill the caches: they are not pickled
    mine, theirs = pickle.dumps(ours), pickle.dumps(fast)
    assert len(mine) < len(theirs)
    copy = pickle.loads(mine)
    assert copy.get_vocab() == ours.get_vocab() and copy.merges == ours.merges
    assert copy(TEXTS, return_offsets_mapping=True) == ours(TEXTS, return_offsets_mapping=True)


def test_datasets_hashes_only_the_compact_model(ours) -> None:
    from datasets.utils._dill import dumps

    # datasets pickles the tokenizer's __dict__ (not __getstate__): it must hold the compact model only, so a
    # vocab 100 times larger adds (much) less than its own pickle to the hash input.
    assert len(dumps(ours)) < len(pickle.dumps(ours._tables.base_vocab)) + len(pickle.dumps(ours.merges))
    assert len(dumps(ours)) - len(pickle.dumps(ours._tables.__reduce__())) < 4000


def test_push_to_hub_is_refused_both_ways_with_the_same_message(ours, tmp_path: Path) -> None:
    with pytest.raises(ValueError) as by_push:
        ours.push_to_hub("someone/some-repo")
    with pytest.raises(ValueError) as by_save:
        ours.save_pretrained(tmp_path / "out", push_to_hub=True)
    assert str(by_push.value) == str(by_save.value)
    assert "upload_folder" in str(by_push.value)
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------- save and reload (issue 11 item 1)

def saved_and_reloaded(tokenizer: Any, path: Path) -> Any:
    tokenizer.save_pretrained(path)
    return type(tokenizer).from_pretrained(path)


def state_of(tokenizer: Any) -> dict[str, Any]:
    """What save_pretrained must keep, as plain values comparable between our class and the fast one."""
    return {
        "vocab": tokenizer.get_vocab(),
        "added": {token_id: (token.content, token.special, token.lstrip, token.rstrip, token.single_word)
                  for token_id, token in tokenizer.added_tokens_decoder.items()},
        "named": {name: str(getattr(tokenizer, name)) for name in ("bos_token", "eos_token", "unk_token",
                                                                   "pad_token", "mask_token")},
        "all_special_tokens": sorted(tokenizer.all_special_tokens),
        "settings": (tokenizer.padding_side, tokenizer.truncation_side, tokenizer.model_max_length),
        "chat_template": tokenizer.chat_template,
        "ids": tokenizer(TEXTS + ["say bim bambam [NEW_EOS] new_additional_special_token"])["input_ids"],
    }


def test_save_and_reload_keep_what_the_fast_tokenizer_keeps(directory: Path, tmp_path: Path) -> None:
    new_eos = AddedToken("[NEW_EOS]", rstrip=False, lstrip=True, normalized=False, special=True)
    mask = AddedToken("[MASK]", lstrip=True, rstrip=False, normalized=False)
    states = {}
    for name, cls in (("ours", HFBPETokenizer), ("fast", AutoTokenizer)):
        tokenizer = cls.from_pretrained(directory, eos_token=new_eos, mask_token=mask, padding_side="left",
                                        truncation_side="left", model_max_length=42)
        tokenizer.add_tokens(["bim", "bambam"])
        tokenizer.add_tokens(["new_additional_special_token"], special_tokens=True)
        tokenizer.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        before = state_of(tokenizer)
        reloaded = saved_and_reloaded(tokenizer, tmp_path / name)
        assert state_of(reloaded) == before, name
        states[name] = before
    # all_special_tokens is transformers' own business: its slow and fast classes differ on whether a token added
    # with add_tokens(special_tokens=True) is listed there.
    for state in states.values():
        state.pop("all_special_tokens")
    assert states["ours"] == states["fast"]
    assert states["ours"]["named"]["eos_token"] == "[NEW_EOS]"
    # The fast class reads our saved directory with the same state.
    fast_reading_ours = state_of(AutoTokenizer.from_pretrained(tmp_path / "ours"))
    fast_reading_ours.pop("all_special_tokens")
    assert fast_reading_ours == states["fast"]


def test_chat_template_is_saved_as_the_fast_class_saves_it(ours, fast, tmp_path: Path) -> None:
    template = "{% for message in messages %}{{message['role'] + message['content']}}{% endfor %}"
    conversation = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    files = {}
    for name, tokenizer in (("ours", ours), ("fast", fast)):
        tokenizer.chat_template = template
        try:
            files[name] = tokenizer.save_pretrained(tmp_path / name)
        finally:
            tokenizer.chat_template = None
        assert (tmp_path / name / "chat_template.jinja").read_text(encoding="utf-8") == template
        assert any(str(path).endswith("chat_template.jinja") for path in files[name])
        config = json.loads((tmp_path / name / "tokenizer_config.json").read_text(encoding="utf-8"))
        assert "chat_template" not in config
    reloaded = HFBPETokenizer.from_pretrained(tmp_path / "ours")
    assert reloaded.chat_template == template
    pytest.importorskip("jinja2")
    assert reloaded.apply_chat_template(conversation, tokenize=False) == \
        AutoTokenizer.from_pretrained(tmp_path / "fast").apply_chat_template(conversation, tokenize=False)
    assert reloaded.apply_chat_template(conversation) == fast.apply_chat_template(conversation, chat_template=template)


@pytest.mark.parametrize("save_jinja_files", [True, False])
def test_chat_template_dicts_round_trip(directory: Path, tmp_path: Path, save_jinja_files: bool) -> None:
    templates = {"default": "{{'a'}}", "template2": "{{'b'}}"}
    saved = {}
    for name, cls in (("ours", HFBPETokenizer), ("fast", AutoTokenizer)):
        tokenizer = cls.from_pretrained(directory)
        tokenizer.chat_template = dict(templates)
        tokenizer.save_pretrained(tmp_path / name, save_jinja_files=save_jinja_files)
        saved[name] = sorted(str(path.relative_to(tmp_path / name)) for path in (tmp_path / name).rglob("*")
                             if path.is_file() and path.name != "README.md" and not path.name.startswith("hf_bpe")
                             and path.name not in ("vocab.json", "merges.txt"))
        assert cls.from_pretrained(tmp_path / name).chat_template == templates
    assert saved["ours"] == [*saved["fast"]] or set(saved["fast"]) <= set(saved["ours"])
    if save_jinja_files:
        assert (tmp_path / "ours" / "additional_chat_templates" / "template2.jinja").read_text() == "{{'b'}}"


def test_chat_template_names_that_leave_the_directory_are_refused(directory: Path, tmp_path: Path) -> None:
    tokenizer = HFBPETokenizer.from_pretrained(directory)
    target = tmp_path / "out"
    for bad_name in ("../escaped", "sub/../../escaped", "/tmp/absolute"):
        tokenizer.chat_template = {"default": "{{'a'}}", bad_name: "{{'b'}}"}
        with pytest.raises(ValueError, match="Invalid chat template name"):
            tokenizer.save_pretrained(target)
    assert not target.exists() or list(target.iterdir()) == []
    assert not (tmp_path / "escaped.jinja").exists()


def test_save_into_an_existing_directory_replaces_our_files_and_keeps_the_card(ours, tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("my card", encoding="utf-8")
    ours.save_pretrained(tmp_path)
    ours.save_pretrained(tmp_path)
    assert (tmp_path / "README.md").read_text(encoding="utf-8") == "my card"
    assert not [path for path in tmp_path.iterdir() if path.name.startswith(".hf_bpe")]


# --------------------------------------------------------------- loading from tokenizer.json, objects, bare GPT-2 files

def test_a_directory_resaved_by_the_fast_class_loads(directory: Path, tmp_path: Path) -> None:
    fast = AutoTokenizer.from_pretrained(directory)
    fast.add_tokens(["hello world"])
    fast.save_pretrained(tmp_path)
    assert not (tmp_path / "vocab.json").exists()
    ours = HFBPETokenizer.from_pretrained(tmp_path)
    assert ours.get_vocab() == fast.get_vocab()
    # The fast class writes backend "tokenizers" into the config: we must not claim it (no sequence_ids()).
    assert getattr(ours, "backend", "custom") != "tokenizers"
    assert ours.add_prefix_space is False
    texts = TEXTS + ["say hello world"]
    assert ours(texts)["input_ids"] == fast(texts)["input_ids"]


def test_construction_from_objects_equals_construction_from_files(directory: Path) -> None:
    from_files = HFBPETokenizer(str(directory / "vocab.json"), str(directory / "merges.txt"))
    vocab = json.loads((directory / "vocab.json").read_text(encoding="utf-8"))
    lines = (directory / "merges.txt").read_text(encoding="utf-8").splitlines()[1:]
    pairs = [tuple(line.split(" ")) for line in lines]
    in_id_order = [token for token, _ in sorted(vocab.items(), key=lambda item: item[1])]
    for given_vocab, given_merges in ((vocab, pairs), (vocab, lines), (in_id_order, pairs),
                                      ([(token, 0.0) for token in in_id_order], pairs)):
        tokenizer = HFBPETokenizer(vocab=given_vocab, merges=given_merges)
        assert tokenizer.get_vocab() == from_files.get_vocab()
        assert tokenizer(TEXTS)["input_ids"] == from_files(TEXTS)["input_ids"]
        assert (tokenizer.eos_token, tokenizer.bos_token, tokenizer.unk_token) == (EOT, EOT, EOT)
    with pytest.raises(ValueError, match="needs both the vocab and the merges"):
        HFBPETokenizer(vocab=vocab)
    with pytest.raises(InputError, match="merge 0"):
        HFBPETokenizer(vocab=vocab, merges=["x"])


def test_construction_as_transformers_extractors_do_it(directory: Path, fast) -> None:
    content = json.loads((directory / "tokenizer.json").read_text(encoding="utf-8"))
    model = content["model"]
    added = {entry["id"]: AddedToken(entry["content"], special=entry["special"], normalized=entry["normalized"])
             for entry in content["added_tokens"]}
    tokenizer = HFBPETokenizer(vocab=model["vocab"], merges=model["merges"], do_lower_case=False, keep_accents=True,
                               added_tokens_decoder=added)
    assert tokenizer(TEXTS)["input_ids"] == fast(TEXTS)["input_ids"]
    assert tokenizer.decode(fast(TEXTS[0])["input_ids"]) == TEXTS[0]


def test_bare_gpt2_files_get_the_special_tokens_gpt2_gets(tmp_path: Path) -> None:
    from transformers import GPT2Tokenizer

    for name in ("vocab.json", "merges.txt"):
        (tmp_path / name).write_bytes((FIXTURES / f"gpt2_{name.replace('.', '_').replace('_json', '.json')}"
                                       .replace("_txt", ".txt")).read_bytes())
    ours, gpt2 = HFBPETokenizer.from_pretrained(tmp_path), GPT2Tokenizer.from_pretrained(tmp_path)
    for name in ("bos_token", "eos_token", "unk_token", "pad_token", "bos_token_id", "eos_token_id", "unk_token_id"):
        assert getattr(ours, name) == getattr(gpt2, name), name
    assert ours.eos_token == EOT and ours.eos_token_id == 50256
    texts = TEXTS + ["It's 2024 — naïve café 😀"]
    assert ours(texts)["input_ids"] == gpt2(texts)["input_ids"]
    ours.pad_token = ours.eos_token  # the README's recipe for batches
    assert ours(texts, padding=True)["input_ids"][1] == [50256] * len(ours(texts, padding=True)["input_ids"][0])


def test_without_endoftext_there_is_no_default_special_token(directory: Path) -> None:
    vocab = json.loads((directory / "vocab.json").read_text(encoding="utf-8"))
    del vocab[EOT]
    vocab = {token: token_id - 1 for token, token_id in vocab.items()}
    lines = (directory / "merges.txt").read_text(encoding="utf-8").splitlines()[1:]
    tokenizer = HFBPETokenizer(vocab=vocab, merges=lines)
    assert (tokenizer.eos_token, tokenizer.bos_token, tokenizer.unk_token) == (None, None, None)
    assert len(tokenizer) == len(vocab)


# --------------------------------------------------------------------------- training from Python (issue 11 item 5)

def test_train_new_from_iterator_uses_our_trainer_and_keeps_the_settings(directory: Path, tmp_path: Path) -> None:
    from hf_bpe.train.api import train_bpe_from_iterator

    old = HFBPETokenizer.from_pretrained(directory, padding_side="left", model_max_length=64)
    old.chat_template = "{{ messages[0]['content'] }}"
    corpus = (FIXTURES / "tinystories_sample.txt").read_text(encoding="utf-8").split("\n\n")
    batches = [corpus[start:start + 7] for start in range(0, len(corpus), 7)]
    new = old.train_new_from_iterator(iter(batches), 400, new_special_tokens=["<sep>"])
    vocab, merges = train_bpe_from_iterator(corpus, 400, [EOT, "<|end|>", "<pad>", "<sep>"])
    assert isinstance(new, HFBPETokenizer)
    assert new.merges == merges and dict(new._base_vocab) == vocab
    assert (new.padding_side, new.model_max_length, new.chat_template) == ("left", 64, old.chat_template)
    assert (new.eos_token, new.bos_token, new.unk_token) == (EOT, EOT, EOT)
    assert set(new.all_special_tokens) == {EOT, "<|end|>", "<pad>", "<sep>"}
    assert len(new) == 400
    reloaded_fast = AutoTokenizer.from_pretrained(new.save_pretrained(tmp_path) and tmp_path)
    texts = corpus[:20] + ["a<sep>b<|end|>"]
    assert new(texts)["input_ids"] == reloaded_fast(texts)["input_ids"]
    assert new("a<sep>b")["input_ids"][1] == new.convert_tokens_to_ids("<sep>")


def test_train_new_from_iterator_trains_with_the_pattern_it_is_given(directory: Path) -> None:
    from hf_bpe.train.api import train_bpe_from_iterator

    old = HFBPETokenizer.from_pretrained(directory)  # GPT-2's pattern
    corpus = (FIXTURES / "tinystories_sample.txt").read_text(encoding="utf-8").split("\n\n")
    new = old.train_new_from_iterator(corpus, 400, pattern="cl100k")
    vocab, merges = train_bpe_from_iterator(corpus, 400, [EOT, "<|end|>", "<pad>"], pattern="cl100k")
    assert new.merges == merges and dict(new._base_vocab) == vocab
    assert new.pattern == old.train_new_from_iterator(corpus, 300, pattern="cl100k").pattern != old.pattern
    assert new("It's 12345")["input_ids"] == Tokenizer(vocab, merges, pattern="cl100k").encode("It's 12345")


def test_train_new_from_iterator_renames_special_tokens(directory: Path) -> None:
    old = HFBPETokenizer.from_pretrained(directory)
    new = old.train_new_from_iterator(["low lower lowest"] * 5, 300, special_tokens_map={EOT: "</s>"})
    assert (new.eos_token, new.bos_token, new.unk_token) == ("</s>", "</s>", "</s>")
    assert EOT not in new.get_vocab()


@pytest.mark.parametrize("text", ["a\ud800b", "x\udc00", "\udfff\ud800 \ud83d\ude00 ok\udbff"])
def test_lone_surrogates_become_u_fffd_as_in_tiktoken(text: str, tmp_path: Path) -> None:
    """Python strings may hold lone surrogates; every route replaces them by U+FFFD, as tiktoken does (issue 8)."""
    tiktoken = pytest.importorskip("tiktoken")
    from hf_bpe.formats.tiktoken import tiktoken_encoding

    vocab, merges = load_gpt2(FIXTURES / "gpt2_vocab.json", FIXTURES / "gpt2_merges.txt")
    expected: list[int] = tiktoken_encoding(vocab, merges).encode_ordinary(text)
    if text == "a\ud800b":
        assert expected == [64, 4210, 65]
    assert isinstance(tiktoken.__version__, str)
    directory = save_tokenizer_directory(tmp_path / "gpt2", vocab, merges, [])
    tokenizer = HFBPETokenizer.from_pretrained(directory)
    assert tokenizer(text)["input_ids"] == expected
    assert tokenizer([text, "plain"])["input_ids"][0] == expected
    assert tokenizer.encode(text) == expected
    assert tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text)) == expected


# ------------------------------------------------------------------------------------ faults, round three (issue 20)


def too_long_warnings(tokenizer: Any, first: str, second: str) -> list[str]:
    """The "Token indices sequence length is longer..." warnings of a fresh copy of `tokenizer` for one pair."""
    import logging

    tokenizer = pickle.loads(pickle.dumps(tokenizer))
    tokenizer.model_max_length = 8
    tokenizer.deprecation_warnings.clear()
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("transformers")
    logger.addHandler(handler)
    try:
        tokenizer(first, second)
    finally:
        logger.removeHandler(handler)
    return [record.getMessage() for record in records if "sequence length is longer" in record.getMessage()]


@pytest.mark.parametrize("first, second", [("hi", "the cat sat on the mat and the dog sat on the log"),
                                           ("the cat sat on the mat and the dog sat on the log", "hi there"),
                                           ("hi", "there")])
def test_a_long_pair_warns_as_the_fast_tokenizer_does(ours: HFBPETokenizer, fast: Any, first: str,
                                                      second: str) -> None:
    expected = too_long_warnings(fast, first, second)
    assert too_long_warnings(ours, first, second) == expected
    assert bool(expected) == (len(first + second) > 20)  # the long pairs warn, the short one does not


def test_train_new_from_iterator_warns_when_the_corpus_gives_fewer_tokens(directory: Path) -> None:
    old = HFBPETokenizer.from_pretrained(directory)
    with pytest.warns(UserWarning, match=r"no pairs left to merge, so the new tokenizer has 2\d\d tokens, fewer than "
                                         r"the 400 asked for"):
        new = old.train_new_from_iterator(["low lower lowest"] * 5, 400)
    assert len(new) < 400


def test_a_directory_with_an_invalid_tokenizer_json_is_refused(directory: Path, tmp_path: Path) -> None:
    import shutil

    broken = Path(shutil.copytree(directory, tmp_path / "broken"))
    (broken / "tokenizer.json").write_text('{"model": {"type": "BPE", ', encoding="utf-8")
    with pytest.raises(InputError, match=rf"^{broken / 'tokenizer.json'}: not valid JSON \(line 1, column 27"):
        HFBPETokenizer.from_pretrained(broken)
    with pytest.raises(InputError, match=rf"^{broken / 'tokenizer.json'}: not valid JSON"):
        load_tokenizer_directory(broken)  # what the CLI reads


@pytest.mark.parametrize("files", ["all", "tokenizer.json only"])
def test_from_pretrained_parses_tokenizer_json_once(directory: Path, tmp_path: Path, files: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Every JSON parse goes through `json.loads` (`json.load` calls it): the text of tokenizer.json is parsed once,
    and nothing parsed from it is saved back into tokenizer_config.json."""
    import shutil

    copy = Path(shutil.copytree(directory, tmp_path / "copy"))
    if files != "all":
        (copy / "vocab.json").unlink()
        (copy / "merges.txt").unlink()
    text = (copy / "tokenizer.json").read_text(encoding="utf-8")
    parsed: list[object] = []
    loads = json.loads

    def counting_loads(document: str | bytes, *args: Any, **kwargs: Any) -> Any:
        parsed.append(document)
        return loads(document, *args, **kwargs)

    monkeypatch.setattr(json, "loads", counting_loads)
    tokenizer = HFBPETokenizer.from_pretrained(copy)
    monkeypatch.undo()
    assert sum(document in (text, text.encode("utf-8")) for document in parsed) == 1
    assert tokenizer(TEXTS)["input_ids"] == HFBPETokenizer.from_pretrained(directory)(TEXTS)["input_ids"]
    tokenizer.save_pretrained(tmp_path / "saved")
    config = (tmp_path / "saved" / "tokenizer_config.json").read_text(encoding="utf-8")
    assert '"model"' not in config and '"merges"' not in config and len(config) < 10_000


def test_a_tokenizer_json_that_is_no_bpe_model_is_refused_beside_vocab_json(directory: Path, tmp_path: Path) -> None:
    import shutil

    copy = Path(shutil.copytree(directory, tmp_path / "copy"))
    content = json.loads((copy / "tokenizer.json").read_text(encoding="utf-8"))
    content["model"]["type"] = "WordPiece"
    (copy / "tokenizer.json").write_text(json.dumps(content), encoding="utf-8")
    with pytest.raises(InputError, match=rf"^{copy / 'tokenizer.json'}: expected a tokenizers BPE model"):
        HFBPETokenizer.from_pretrained(copy)
