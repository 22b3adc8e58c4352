"""Special tokens in a saved tokenizer directory: those its `tokenizer_config.json` names (`special_tokens_of_config`),
and those that share an id with one of them (aliases).

tiktoken lets several special tokens have one id: o200k_harmony maps `<|endofprompt|>` and `<|reserved_200018|>` both
to 200018, and decodes the id as the first. The HuggingFace files cannot say so: `tokenizers` keeps one added token
per id (adding a second at an id replaces the first, which is then encoded as text) and transformers'
`added_tokens_decoder` is keyed by id. So a saved directory holds the token that the id decodes as (the one the vocab
holds there) in `vocab.json`, `tokenizer.json` and the added tokens, and the others, the *aliases*, in
`tokenizer_config.json` under `special_token_aliases` ({token: id}), which transformers keeps as a setting of the
tokenizer (it is written back by `save_pretrained`). hf_bpe's loaders (`load_tokenizer_directory`'s
`special_token_ids`, `HFBPETokenizer`) encode an alias as its id, as tiktoken does; `tokenizers` and the plain
`AutoTokenizer` encode it as ordinary text. Every loader decodes the id alike.

>>> vocab = {0: b"a", 1: b"<|endofprompt|>"}
>>> split_aliases(vocab, {"<|endofprompt|>": 1, "<|reserved_1|>": 1})
(['<|endofprompt|>'], {'<|reserved_1|>': 1})
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hf_bpe.common.errors import InputError

#: The `tokenizer_config.json` key of the aliases.
ALIASES_KEY = "special_token_aliases"


def special_tokens_of_config(config: Any, config_path: Path, vocab_strings: dict[str, int]) -> list[str]:
    """The special tokens of a directory, in id order: the added special tokens of its `tokenizer_config.json`
    (`config`, read from `config_path`) and the tokens it names (bos, eos, ...), checked against `vocab.json`'s
    strings; InputError naming the file otherwise."""
    if not isinstance(config, dict):
        raise InputError(f"{config_path}: expected a JSON object")
    added = config.get("added_tokens_decoder") or {}
    if not isinstance(added, dict):
        raise InputError(f"{config_path}: added_tokens_decoder must be an object mapping ids to tokens")
    special_by_id: dict[int, str] = {}
    for key, entry in added.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("content"), str) or not key.isdigit():
            raise InputError(f"{config_path}: added_tokens_decoder entry {key!r} is not an id with a token")
        token = entry["content"]
        if token not in vocab_strings:
            if int(key) < len(vocab_strings):
                raise InputError(f"{config_path}: added token {token!r} is not in vocab.json")
            special_by_id[int(key)] = token  # added after training: matched before BPE, special or not
            continue
        if vocab_strings[token] != int(key):
            raise InputError(f"{config_path}: added token {token!r} has id {key} but vocab.json gives it id "
                             f"{vocab_strings[token]}")
        if entry.get("special", False):
            special_by_id[int(key)] = token
    beyond = sorted(token_id for token_id in special_by_id if special_by_id[token_id] not in vocab_strings)
    if beyond and beyond != list(range(len(vocab_strings), len(vocab_strings) + len(beyond))):
        raise InputError(f"{config_path}: added tokens have ids {beyond}, which do not follow vocab.json's "
                         f"{len(vocab_strings)} tokens")
    added_contents = {token for token in special_by_id.values()}
    named = [(name, config[name]) for name in ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token",
                                                "cls_token", "mask_token") if config.get(name) is not None]
    named += [("additional_special_tokens", token) for token in config.get("additional_special_tokens") or []]
    for name, token in named:
        if isinstance(token, dict):  # transformers 4 sometimes writes AddedToken objects
            token = token.get("content")
        if isinstance(token, str) and token in added_contents:
            continue
        if not isinstance(token, str) or token not in vocab_strings:
            raise InputError(f"{config_path}: {name} {token!r} is not in vocab.json")
        special_by_id.setdefault(vocab_strings[token], token)
    return [special_by_id[token_id] for token_id in sorted(special_by_id)]


def split_aliases(vocab: Mapping[int, bytes], special_tokens: Sequence[str] | Mapping[str, int]
                  ) -> tuple[list[str], dict[str, int]]:
    """(the special tokens the vocab holds, in the given order; the others {token: id}, aliases of one of them).

    `special_tokens` are strings (no aliases then) or tiktoken's {token: id}. Raises ValueError for a token whose id
    holds no special token of the table.
    """
    if not isinstance(special_tokens, Mapping):
        return list(special_tokens), {}
    held = {token: token_id for token, token_id in special_tokens.items()
            if vocab.get(token_id) == token.encode("utf-8")}
    aliases = {token: token_id for token, token_id in special_tokens.items() if token not in held}
    held_ids = set(held.values())
    for token, token_id in aliases.items():
        if token_id not in held_ids:
            shown = repr(vocab[token_id]) if token_id in vocab else "nothing"
            raise ValueError(f"special token {token!r} has id {token_id}, where the vocab holds {shown} rather than "
                             f"a special token")
    return list(held), aliases


def read_aliases(config: Mapping[str, Any], config_path: Path, special_ids: Mapping[str, int]) -> dict[str, int]:
    """The aliases a `tokenizer_config.json` gives ({} for none), each checked to share the id of one of the special
    tokens `special_ids`; InputError naming the file otherwise."""
    aliases = config.get(ALIASES_KEY) or {}
    if not isinstance(aliases, dict):
        raise InputError(f"{config_path}: {ALIASES_KEY} must be an object mapping tokens to ids")
    ids = set(special_ids.values())
    for token, token_id in aliases.items():
        if not token or token in special_ids or token_id not in ids or isinstance(token_id, bool):
            raise InputError(f"{config_path}: {ALIASES_KEY}: {token!r} -> {token_id!r} is not a further token for "
                             f"the id of a special token")
    return dict(aliases)


def with_aliases(special_ids: Mapping[str, int], aliases: Mapping[str, int]) -> dict[str, int]:
    """Every special token and its id, in id order, the token an id decodes as before its aliases (tiktoken's
    `special_tokens`).

    >>> with_aliases({"<e>": 5, "<p>": 7}, {"<q>": 5})
    {'<e>': 5, '<q>': 5, '<p>': 7}
    """
    return dict(sorted([*special_ids.items(), *aliases.items()], key=lambda item: item[1]))


def describe_aliases(vocab: Mapping[int, bytes], special_tokens: Mapping[str, int]) -> str:
    """One line saying which special tokens share an id and what each loader does with them.

    >>> print(describe_aliases({7: b"<e>"}, {"<e>": 7, "<r>": 7}))  # doctest: +NORMALIZE_WHITESPACE
    1 special token shares the id of another ('<r>' -> 7, which decodes as '<e>'): hf_bpe's loaders ...
    """
    aliases = split_aliases(vocab, special_tokens)[1]
    shown = ", ".join(f"{token!r} -> {token_id}, which decodes as {vocab[token_id].decode('utf-8', 'replace')!r}"
                      for token, token_id in list(aliases.items())[:3]) + (", ..." if len(aliases) > 3 else "")
    return (f"{len(aliases)} special token{'s' if len(aliases) > 1 else ''} share{'' if len(aliases) > 1 else 's'} "
            f"the id of another ({shown}): hf_bpe's loaders (Tokenizer, HFBPETokenizer, trust_remote_code=True) "
            f"encode {'them' if len(aliases) > 1 else 'it'} as that id as tiktoken does, tokenizers and the plain "
            f"AutoTokenizer (one token per id) as ordinary text")


__all__ = ["ALIASES_KEY", "describe_aliases", "read_aliases", "special_tokens_of_config", "split_aliases",
           "with_aliases"]
