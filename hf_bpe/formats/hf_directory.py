"""The saved tokenizer directory: one set of files that every HuggingFace loader reads to the same token ids.

`save_tokenizer_directory` writes:

- `vocab.json`, `merges.txt`: the GPT-2 files (`hf_bpe.formats.gpt2`), read by `hf_bpe.Tokenizer.from_files`, by
  `HFBPETokenizer` and by tiktoken-style loaders;
- `tokenizer.json`: a `tokenizers` BPE model with the GPT-2 byte-level pre-tokenizer and decoder and the special
  tokens as added special tokens, read by `tokenizers.Tokenizer.from_file` and by `AutoTokenizer`. Another
  pre-tokenization pattern (`pattern=`) is written as Llama 3's tokenizer.json writes its own: a `Split` of the regex
  (behaviour "isolated") followed by `ByteLevel` without GPT-2's regex. That file is where the pattern is kept:
  `load_tokenizer_directory` reads it back (a directory with GPT-2's ByteLevel pre-tokenizer, as every directory of
  hf_bpe 0.1, is GPT-2's pattern);
- `tokenizer_config.json`, `special_tokens_map.json`: the transformers settings. `tokenizer_class` names the built-in
  `PreTrainedTokenizerFast`, so `AutoTokenizer.from_pretrained(directory)` works without hf_bpe installed;
  `auto_map` points `AutoTokenizer(..., trust_remote_code=True)` at `HFBPETokenizer` through the small module file
  `hf_bpe_tokenizer.py` written beside them;
- `README.md`: a minimal model card, only if the directory has none.

Like GPT-2, the first special token (`<|endoftext|>` when present) is the bos, eos and unk token, and nothing is
added around the encoded text. `load_tokenizer_directory` reads the directory back, checking that its files agree.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from hf_bpe.common.errors import InputError
from hf_bpe.common.files import read_small_text, write_text_atomically
from hf_bpe.formats.directory_specials import (
    ALIASES_KEY,
    read_aliases,
    special_tokens_of_config,
    split_aliases,
    with_aliases,
)
from hf_bpe.formats.gpt2 import (
    load_gpt2_merges,
    load_gpt2_vocab,
    merges_file_lines,
    merges_from_strings,
    save_gpt2,
    tokens_to_strs,
    unicode_to_bytes,
)
from hf_bpe.pretokenize import (
    GPT2_PATTERN,
    pattern_from_tokenizers,
    preset_name,
    resolve_pattern,
    tokenizers_pattern,
    validate_special_tokens,
)
from hf_bpe.pretokenize.superword import PUBLISHED_SPLIT_REGEX, SUPERWORD_PATTERN


class AddedTokenSpec(NamedTuple):
    """A token added to a tokenizer (`tok.add_tokens`, special tokens), with its id and transformers' flags."""

    id: int
    content: str
    special: bool = False
    single_word: bool = False
    lstrip: bool = False
    rstrip: bool = False
    normalized: bool = False

    def as_json(self) -> dict[str, Any]:
        """The entry of `added_tokens_decoder` / `tokenizer.json`'s `added_tokens` (without the id)."""
        return {"content": self.content, "lstrip": self.lstrip, "normalized": self.normalized,
                "rstrip": self.rstrip, "single_word": self.single_word, "special": self.special}


ENDOFTEXT = "<|endoftext|>"
MODULE_NAME = "hf_bpe_tokenizer"
CLASS_NAME = "HFBPETokenizer"
# transformers' "no limit" value (`VERY_LARGE_INTEGER`), used when no model_max_length is given.
NO_MAX_LENGTH = int(1e30)
AUTO_MAP = {"AutoTokenizer": [f"{MODULE_NAME}.{CLASS_NAME}", None]}
REQUIRED_FILES = ("vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json")
SAVED_FILES = (*REQUIRED_FILES, "special_tokens_map.json", f"{MODULE_NAME}.py", "README.md")

MODULE_SOURCE = f'''"""Lets `AutoTokenizer.from_pretrained(path, trust_remote_code=True)` load this directory as
hf_bpe's `{CLASS_NAME}`. Without `trust_remote_code`, AutoTokenizer loads it as a `PreTrainedTokenizerFast`
with identical ids.
"""

try:
    from hf_bpe import {CLASS_NAME}
except ImportError as error:
    raise ImportError(
        "This tokenizer directory was written by hf_bpe: loading it with trust_remote_code=True needs the hf_bpe "
        "package (pip install hf_bpe). Without trust_remote_code=True, AutoTokenizer loads it as a "
        f"PreTrainedTokenizerFast with the same token ids. (The import failed with: {{error}})"
    ) from error

__all__ = ["{CLASS_NAME}"]
'''

MINIMAL_CARD = """---
library_name: transformers
tags:
- tokenizer
- bpe
- hf_bpe
---

# Byte-level BPE tokenizer

A GPT-2 style byte-level BPE tokenizer with {vocab_size} tokens and {merge_count} merges, trained with hf_bpe.
Special tokens: {specials}.{pattern}

```python
from transformers import AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("path/to/this/directory")
```
"""


def save_tokenizer_directory(directory: str | os.PathLike[str], vocab: dict[int, bytes],
                             merges: Sequence[tuple[bytes, bytes]],
                             special_tokens: Sequence[str] | Mapping[str, int], *,
                             model_max_length: int | None = None, pad_token: str | None = None,
                             added_tokens: Sequence[AddedTokenSpec] = (),
                             config: dict[str, Any] | None = None, pattern: str | None = None,
                             ignore_merges: bool = False) -> Path:
    """Write a tokenizer that every HuggingFace loader reads into `directory` (created if needed); return its path.

    `vocab` maps ids to token bytes and `merges` lists the merged pairs in rank order, as `hf_bpe.train_bpe` returns
    them; every special token must be in `vocab` (as its UTF-8 bytes), or, given as tiktoken's {token: id}, share the
    id of one that is (`hf_bpe.formats.directory_specials`). Like GPT-2, `<|endoftext|>` (else the first
    special token) becomes the bos, eos and unk token; `pad_token`, if given, must be one of `special_tokens`.
    `model_max_length` is the longest input the model takes (none by default). `added_tokens` are tokens added after
    training (`AddedTokenSpec`, ids following the vocab's), and `config` holds further `tokenizer_config.json`
    settings (`padding_side`, `chat_template`, ...). `pattern` is the pre-tokenization pattern the tokenizer was
    trained with (a preset name or regex text; None: GPT-2's), kept in `tokenizer.json`, as is `ignore_merges`
    (a pre-token that is a token is that token, as tiktoken encodes: `hf-bpe convert` sets it). Each file is written
    atomically, but the set is not: write into a fresh directory and rename it for an atomic save.

    The directory loads with `AutoTokenizer.from_pretrained(directory)` (no hf_bpe needed), with
    `trust_remote_code=True` or `hf_bpe.HFBPETokenizer.from_pretrained` (our encoder), with
    `tokenizers.Tokenizer.from_file(directory / "tokenizer.json")`, and with `hf_bpe.Tokenizer.from_files`.

    >>> import tempfile
    >>> from hf_bpe import HFBPETokenizer, save_tokenizer_directory, train_bpe_from_iterator
    >>> vocab, merges = train_bpe_from_iterator(["low lower lowest"] * 10, 300, ["<|endoftext|>"])
    >>> path = save_tokenizer_directory(tempfile.mkdtemp() + "/tok", vocab, merges, ["<|endoftext|>"])
    >>> sorted(p.name for p in path.iterdir())  # doctest: +NORMALIZE_WHITESPACE
    ['README.md', 'hf_bpe_tokenizer.py', 'merges.txt', 'special_tokens_map.json', 'tokenizer.json',
     'tokenizer_config.json', 'vocab.json']
    >>> from transformers import AutoTokenizer
    >>> ids = AutoTokenizer.from_pretrained(path)("lowest low<|endoftext|>")["input_ids"]
    >>> ids == HFBPETokenizer.from_pretrained(path)("lowest low<|endoftext|>")["input_ids"]
    True
    """
    special_tokens, aliases = split_aliases(vocab, special_tokens)
    special_tokens = validate_special_tokens(special_tokens)
    regex = resolve_pattern(pattern)
    ids_by_token = {token: token_id for token_id, token in vocab.items()}
    for special in special_tokens:
        if special.encode("utf-8") not in ids_by_token:
            raise ValueError(f"special token {special!r} is not in the vocab")
    if pad_token is not None and pad_token not in special_tokens:
        raise ValueError(f"pad token {pad_token!r} must be one of the special tokens {special_tokens}")
    _check_added_token_ids(vocab, added_tokens)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    save_gpt2(vocab, list(merges), directory, special_tokens)
    special_ids = {special: ids_by_token[special.encode("utf-8")] for special in special_tokens}
    write_text_atomically(directory / "tokenizer.json",
                          build_tokenizers_json(vocab, merges, special_tokens, added_tokens, pattern=regex,
                                                ignore_merges=ignore_merges))
    named = named_special_tokens(special_tokens, pad_token)
    _write_json(directory / "tokenizer_config.json",
                {**tokenizer_config(named, special_ids, model_max_length, added_tokens),
                 **({ALIASES_KEY: aliases} if aliases else {}), **(config or {})})
    _write_json(directory / "special_tokens_map.json", named)
    write_text_atomically(directory / f"{MODULE_NAME}.py", MODULE_SOURCE)
    write_minimal_card(directory, len(vocab) + len(added_tokens), len(merges), special_tokens, pattern=regex)
    return directory


def _check_added_token_ids(vocab: dict[int, bytes], added_tokens: Sequence[AddedTokenSpec]) -> None:
    expected = max(vocab, default=-1) + 1
    for token in sorted(added_tokens):
        if token.id != expected:
            raise ValueError(f"added token {token.content!r} has id {token.id}, expected {expected}: added tokens "
                             f"take the ids right after the vocab's, in order")
        expected += 1


def write_minimal_card(directory: Path, vocab_size: int, merge_count: int, special_tokens: Sequence[str],
                       pattern: str | None = None) -> None:
    """Write a minimal model card `README.md`, unless the directory has one already."""
    card = directory / "README.md"
    regex = resolve_pattern(pattern)
    named = "" if regex == GPT2_PATTERN else f"\nPre-tokenization pattern: {describe_pattern(regex)}."
    if not card.exists():
        write_text_atomically(card, MINIMAL_CARD.format(vocab_size=vocab_size, merge_count=merge_count,
                                                        specials=", ".join(f"`{s}`" for s in special_tokens) or "none",
                                                        pattern=named))


def describe_pattern(regex: str) -> str:
    """A pattern for a card: its preset name, or the whole regex in backticks.

    >>> describe_pattern(resolve_pattern("gpt4")), describe_pattern("[a-z]+|[^a-z]")
    ('`cl100k`', '`[a-z]+|[^a-z]`')
    """
    return f"`{preset_name(regex) or regex}`"


def named_special_tokens(special_tokens: Sequence[str], pad_token: str | None = None) -> dict[str, Any]:
    """The transformers names of the special tokens, as in `special_tokens_map.json`.

    GPT-2 uses `<|endoftext|>` as its bos, eos and unk token; the first special token plays that part when there is
    no `<|endoftext|>`. The others are `additional_special_tokens`.

    >>> named_special_tokens(["<pad>", "<|endoftext|>"], pad_token="<pad>")
    {'bos_token': '<|endoftext|>', 'eos_token': '<|endoftext|>', 'unk_token': '<|endoftext|>', \
'pad_token': '<pad>', 'additional_special_tokens': ['<pad>']}
    >>> named_special_tokens([])
    {}
    """
    if not special_tokens:
        return {}
    main = ENDOFTEXT if ENDOFTEXT in special_tokens else special_tokens[0]
    named: dict[str, Any] = {"bos_token": main, "eos_token": main, "unk_token": main}
    if pad_token is not None:
        named["pad_token"] = pad_token
    others = [token for token in special_tokens if token != main]
    if others:
        named["additional_special_tokens"] = others
    return named


def tokenizer_config(named: dict[str, Any], special_ids: dict[str, int], model_max_length: int | None,
                     added_tokens: Sequence[AddedTokenSpec] = ()) -> dict[str, Any]:
    """The contents of `tokenizer_config.json`, readable by transformers 4 and 5."""
    specs = [AddedTokenSpec(token_id, token, special=True) for token, token_id in special_ids.items()]
    added = {str(spec.id): spec.as_json() for spec in sorted([*specs, *added_tokens])}
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "auto_map": AUTO_MAP,
        "added_tokens_decoder": added,
        **named,
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
        "errors": "replace",
        # transformers 4's PreTrainedTokenizerFast would return token_type_ids too; GPT-2 models take neither.
        "model_input_names": ["input_ids", "attention_mask"],
        "model_max_length": NO_MAX_LENGTH if model_max_length is None else model_max_length,
    }


def build_tokenizers_json(vocab: dict[int, bytes], merges: Sequence[tuple[bytes, bytes]],
                          special_tokens: Sequence[str], added_tokens: Sequence[AddedTokenSpec] = (), *,
                          pattern: str | None = None, ignore_merges: bool = False) -> str:
    """The `tokenizer.json` text for a `tokenizers` byte-level BPE tokenizer, laid out like GPT-2's (with another
    `pattern`, its pre-tokenizer laid out like Llama 3's: see the module docstring).

    Special tokens stay in the model vocab (as in GPT-2's `vocab.json`); `added_tokens` follow it.
    """
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors

    specials = {token.encode("utf-8"): token for token in special_tokens}
    string_vocab = {specials.get(token) or text: token_id
                    for (token_id, token), text in zip(vocab.items(), tokens_to_strs(list(vocab.values())))}
    parts = tokens_to_strs([part for pair in merges for part in pair])
    string_merges = list(zip(parts[::2], parts[1::2]))
    tokenizer = Tokenizer(models.BPE(vocab=string_vocab, merges=string_merges, ignore_merges=ignore_merges))
    regex = resolve_pattern(pattern)
    if regex == GPT2_PATTERN:
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    elif regex == SUPERWORD_PATTERN:  # spelled as SuperBPE's authors spell it, which means the same to tokenizers
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=False),
            pre_tokenizers.Split(Regex(PUBLISHED_SPLIT_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    else:  # the regex spelled so that Oniguruma reads it as tiktoken does (hf_bpe.pretokenize.regex_syntax)
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(tokenizers_pattern(regex)), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    # Like GPT-2's: it adds no tokens, it only keeps the offsets untrimmed.
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    tokenizer.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in special_tokens])
    for spec in sorted(added_tokens):
        token = AddedToken(spec.content, single_word=spec.single_word, lstrip=spec.lstrip, rstrip=spec.rstrip,
                           normalized=spec.normalized, special=spec.special)
        if spec.special:
            tokenizer.add_special_tokens([token])
        else:
            tokenizer.add_tokens([token])
        if tokenizer.token_to_id(spec.content) != spec.id:
            raise ValueError(f"added token {spec.content!r} would get id {tokenizer.token_to_id(spec.content)} in "
                             f"tokenizer.json instead of {spec.id}")
    return tokenizer.to_str(pretty=True) + "\n"


def vocab_from_strings(encoder: dict[str, int], literal_tokens: Sequence[str] = ()) -> dict[int, bytes]:
    """GPT-2 `vocab.json` strings -> {id: bytes}; `literal_tokens` (special tokens) and entries that are not made of
    byte-mapping characters are taken as their own UTF-8 text.

    >>> vocab_from_strings({"a": 0, "Ġb": 1, "<|endoftext|>": 2, "\u00e9t\u00e9\u2019": 3})
    {0: b'a', 1: b' b', 2: b'<|endoftext|>', 3: b'\\xc3\\xa9t\\xc3\\xa9\\xe2\\x80\\x99'}
    """
    table, literal = unicode_to_bytes(), set(literal_tokens)
    return {token_id: (token.encode("utf-8") if token in literal or not all(char in table for char in token)
                       else bytes(table[char] for char in token))
            for token, token_id in encoder.items()}


def read_tokenizers_json_model(path: Path) -> tuple[dict[str, int], list[tuple[bytes, bytes]], list[AddedTokenSpec]]:
    """The BPE model of a `tokenizer.json`: (vocab strings -> ids, merges as bytes, added tokens)."""
    return tokenizers_json_model(read_json(path), path)


def tokenizers_json_model(content: Any, path: Path
                          ) -> tuple[dict[str, int], list[tuple[bytes, bytes]], list[AddedTokenSpec]]:
    """`read_tokenizers_json_model` of a `tokenizer.json`'s parsed `content` (`path` names it in errors)."""
    model = content.get("model") if isinstance(content, dict) else None
    if not isinstance(model, dict) or model.get("type") != "BPE" or not isinstance(model.get("vocab"), dict):
        raise InputError(f"{path}: expected a tokenizers BPE model")
    added = [AddedTokenSpec(entry["id"], entry["content"], **{flag: bool(entry.get(flag, False)) for flag in
                                                              ("special", "single_word", "lstrip", "rstrip",
                                                               "normalized")})
             for entry in content.get("added_tokens") or []]
    return model["vocab"], merges_from_strings(model.get("merges") or [], str(path)), added


class LoadedTokenizer(tuple):  # type: ignore[type-arg]
    """What `load_tokenizer_directory` returns: the tuple (vocab, merges, special_tokens), `pattern`, the regex
    text of the pre-tokenization pattern, and `special_token_ids`, every special token's id as tiktoken's
    `special_tokens`, with those that share the id of one of `special_tokens` (`hf_bpe.formats.directory_specials`):
    `Tokenizer(vocab, merges, loaded.special_token_ids)` encodes them as tiktoken does."""

    pattern: str
    special_token_ids: dict[str, int]

    def __new__(cls, vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]], special_tokens: list[str],
                pattern: str, special_token_ids: dict[str, int]) -> LoadedTokenizer:
        loaded = super().__new__(cls, (vocab, merges, special_tokens))
        loaded.pattern, loaded.special_token_ids = pattern, special_token_ids
        return loaded

    def __getnewargs__(self) -> tuple[Any, ...]:
        return (*self, self.pattern, self.special_token_ids)


def load_tokenizer_directory(directory: str | os.PathLike[str]) -> LoadedTokenizer:
    """Read a saved directory back into (vocab, merges, special_tokens), checking that its files agree; the result's
    `pattern` is the pre-tokenization pattern of its `tokenizer.json` (`read_directory_pattern`).

    The special tokens are the added special tokens of `tokenizer_config.json`, in id order. Raises InputError naming
    the file for a missing file, invalid JSON, a special token that is not in `vocab.json`, a `vocab.json` /
    `merges.txt` pair that differs from the model in `tokenizer.json`, or a pre-tokenizer hf_bpe cannot reproduce.

    >>> import tempfile
    >>> path = save_tokenizer_directory(tempfile.mkdtemp() + "/tok", {i: bytes([i]) for i in range(256)}, [], [],
    ...                                 pattern="o200k")
    >>> vocab, merges, special_tokens = loaded = load_tokenizer_directory(path)
    >>> preset_name(loaded.pattern)
    'o200k'
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(f"{directory}: not a directory")
    for name in REQUIRED_FILES:
        if not (directory / name).is_file():
            raise InputError(f"{directory / name}: no such file (a saved tokenizer directory needs "
                             f"{', '.join(REQUIRED_FILES)})")
    vocab_path, merges_path = directory / "vocab.json", directory / "merges.txt"
    vocab = load_gpt2_vocab(vocab_path)
    merges = load_gpt2_merges(merges_path)
    vocab_strings = read_json(vocab_path)
    config_path = directory / "tokenizer_config.json"
    config = read_json(config_path)
    special_tokens = special_tokens_of_config(config, config_path, vocab_strings)
    special_ids = {}
    for special in special_tokens:
        # vocab.json holds special tokens as plain text, which may look like byte-mapped text: read them as text.
        # Tokens added after training (by `tok.add_tokens` + `save_pretrained`) follow the vocab.json ids.
        token_id = special_ids[special] = vocab_strings[special] if special in vocab_strings else len(vocab)
        vocab[token_id] = special.encode("utf-8")
    pattern = _check_tokenizer_json(directory / "tokenizer.json", vocab_strings, merges_path, special_tokens)
    aliases = read_aliases(config, config_path, special_ids)
    return LoadedTokenizer(vocab, merges, special_tokens, pattern, with_aliases(special_ids, aliases))


def read_directory_ignore_merges(path: str | os.PathLike[str]) -> bool:
    """Whether the BPE model of a saved directory (or of its `tokenizer.json`) looks a pre-token up whole before
    merging (`tokenizers`' `ignore_merges`, which `hf-bpe convert` sets, as tiktoken does it): pass it on to
    `hf_bpe.Tokenizer.from_files`."""
    path = Path(path)
    return ignore_merges_of_tokenizers_json(read_json(path / "tokenizer.json" if path.is_dir() else path))


def ignore_merges_of_tokenizers_json(content: Any) -> bool:
    """`read_directory_ignore_merges` of a `tokenizer.json`'s parsed content (False where it does not say)."""
    model = content.get("model") if isinstance(content, dict) else None
    return bool(model.get("ignore_merges", False)) if isinstance(model, dict) else False


def read_directory_pattern(path: str | os.PathLike[str]) -> str:
    """The pre-tokenization pattern (regex text) of a saved directory or of its `tokenizer.json` (see
    `pattern_of_tokenizers_json`)."""
    path = Path(path)
    if path.is_dir():
        path = path / "tokenizer.json"
    return pattern_of_tokenizers_json(read_json(path), path)


def pattern_of_tokenizers_json(content: Any, path: Path) -> str:
    """The pattern of a `tokenizer.json`'s content: GPT-2's for the ByteLevel pre-tokenizer with its regex (GPT-2's
    own files, and every directory of earlier hf_bpe versions), else the regex of a Split (isolated) followed by
    ByteLevel without a regex, as Llama 3's; an InputError naming the file for any other pre-tokenizer."""
    pre = content.get("pre_tokenizer") if isinstance(content, dict) else None
    if isinstance(pre, dict) and pre.get("type") == "ByteLevel" and pre.get("use_regex", True) \
            and not pre.get("add_prefix_space", False):
        return GPT2_PATTERN
    steps = pre.get("pretokenizers") if isinstance(pre, dict) and pre.get("type") == "Sequence" else None
    if isinstance(steps, list) and len(steps) == 3 and steps[0] == {"type": "Digits", "individual_digits": False} \
            and _is_split(steps[1], PUBLISHED_SPLIT_REGEX) and _is_byte_level_alone(steps[2]):
        return SUPERWORD_PATTERN
    if isinstance(steps, list) and len(steps) == 2 and all(isinstance(step, dict) for step in steps):
        split, byte_level = steps
        regex = split.get("pattern", {}).get("Regex") if isinstance(split.get("pattern"), dict) else None
        if isinstance(regex, str) and _is_split(split, regex) and _is_byte_level_alone(byte_level):
            return pattern_from_tokenizers(regex, str(path))
    raise InputError(f"{path}: the pre_tokenizer {json.dumps(pre)[:300]} is not one hf_bpe reproduces (ByteLevel "
                     f"with its regex, or a Split regex with behavior Isolated followed by ByteLevel without one, or "
                     f"SuperBPE's Digits and Split before that ByteLevel)")


def _is_split(step: Any, regex: str) -> bool:
    return isinstance(step, dict) and step.get("type") == "Split" and step.get("pattern") == {"Regex": regex} \
        and step.get("behavior") == "Isolated" and not step.get("invert", False)


def _is_byte_level_alone(step: Any) -> bool:
    return isinstance(step, dict) and step.get("type") == "ByteLevel" and step.get("use_regex") is False \
        and not step.get("add_prefix_space", False)


def _check_tokenizer_json(path: Path, expected_vocab: dict[str, int], merges_path: Path,
                          special_tokens: list[str]) -> str:
    """Check the tokenizer.json model against vocab.json, merges.txt and the special tokens; return its pattern."""
    content = read_json(path)
    model = content.get("model") if isinstance(content, dict) else None
    if not isinstance(model, dict) or model.get("type") != "BPE":
        raise InputError(f"{path}: expected a tokenizers BPE model")
    model_vocab = model.get("vocab")
    if model_vocab != expected_vocab:
        if not isinstance(model_vocab, dict):
            raise InputError(f"{path}: model.vocab is not an object")
        differing = sorted(set(model_vocab.items()) ^ set(expected_vocab.items()), key=lambda item: item[1])
        token, token_id = differing[0]
        where = "tokenizer.json" if model_vocab.get(token) == token_id else "vocab.json"
        raise InputError(f"{path}: model vocab differs from vocab.json ({len(model_vocab)} vs "
                         f"{len(expected_vocab)} tokens; first difference: {token!r} -> {token_id} only in {where})")
    merges_lines = [line for _, line in merges_file_lines(merges_path)]
    model_merges = [" ".join(merge) if isinstance(merge, list) else merge for merge in model.get("merges") or []]
    if model_merges != merges_lines:
        index = next((i for i, (a, b) in enumerate(zip(model_merges, merges_lines)) if a != b),
                     min(len(model_merges), len(merges_lines)))
        raise InputError(f"{path}: model merges differ from merges.txt ({len(model_merges)} vs {len(merges_lines)} "
                         f"merges; first difference at merge {index + 1})")
    added = [entry.get("content") for entry in content.get("added_tokens") or []
             if entry.get("special") or entry.get("content") not in expected_vocab]
    if sorted(added) != sorted(special_tokens):
        raise InputError(f"{path}: added special tokens {added} differ from those of tokenizer_config.json "
                         f"{special_tokens}")
    return pattern_of_tokenizers_json(content, path)


def read_json(path: Path) -> Any:
    """A JSON file's content; InputError naming the file and line for a missing, undecodable or invalid file."""
    try:
        return json.loads(read_small_text(path))
    except json.JSONDecodeError as error:
        raise InputError(f"{path}: not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})") from None


def _write_json(path: Path, content: Any) -> None:
    write_text_atomically(path, json.dumps(content, ensure_ascii=False, indent=2) + "\n")

