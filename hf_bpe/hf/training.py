"""`HFBPETokenizer.train_new_from_iterator`: a new tokenizer like an existing one, trained by hf_bpe's exact trainer.

Mirrors `PreTrainedTokenizerFast.train_new_from_iterator`: the new tokenizer keeps the special tokens (in the same
roles, renamed through `special_tokens_map`), adds `new_special_tokens`, and keeps the settings (`padding_side`,
`model_max_length`, chat template, ...). Tokens added as non-special are not carried over: they were not trained.
A corpus too small for `vocab_size` gives a smaller tokenizer, with a UserWarning saying so.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

from transformers import AddedToken, PreTrainedTokenizer

from hf_bpe.formats.directory_specials import ALIASES_KEY
from hf_bpe.formats.gpt2 import token_to_str
from hf_bpe.train.api import train_bpe_from_iterator

# The tokenizer's own class (HFBPETokenizer or a subclass), which builds the new tokenizer.
Tokenizer = TypeVar("Tokenizer", bound=PreTrainedTokenizer)

# init_kwargs that describe the old vocabulary rather than settings.
_NOT_SETTINGS = {"vocab_file", "merges_file", "tokenizer_file", "vocab", "merges", "added_tokens_decoder",
                 "name_or_path", "special_tokens_map_file", "tokenizer_config_file", "added_tokens_file",
                 "chat_template_file", "is_local", "local_files_only", "backend", "files_loaded"}


def train_like(tokenizer: Tokenizer, text_iterator: Iterable[str | Sequence[str]], vocab_size: int,
               new_special_tokens: Sequence[str | AddedToken] | None, special_tokens_map: dict[str, str] | None,
               progress: bool | None, overrides: dict[str, Any]) -> Tokenizer:
    """Train on `text_iterator` (texts or batches of texts) and build a tokenizer with `tokenizer`'s settings;
    `overrides` replace settings, and a `pattern` among them is also the one trained with."""
    overrides = dict(overrides)
    pattern = overrides.pop("pattern", tokenizer.pattern)  # by default the old tokenizer's pre-tokenization
    renamed = dict(special_tokens_map or {})
    specials = [renamed.get(token.content, token.content)
                for _, token in sorted(tokenizer.added_tokens_decoder.items()) if token.special]
    for token in new_special_tokens or ():
        content = token.content if isinstance(token, AddedToken) else str(token)
        if content not in specials:
            specials.append(content)
    vocab, merges = train_bpe_from_iterator(_texts(text_iterator), vocab_size, specials, progress=progress,
                                            pattern=pattern)
    if len(vocab) < vocab_size:  # as `hf-bpe train` notes it: a tokenizer smaller than asked for is easy to miss
        warnings.warn(f"train_new_from_iterator: no pairs left to merge, so the new tokenizer has {len(vocab)} tokens, "
                      f"fewer than the {vocab_size} asked for (the corpus is too small for that vocab size)",
                      UserWarning, stacklevel=3)
    literal = {token.encode("utf-8"): token for token in specials}
    encoder = {literal.get(token) or token_to_str(token): token_id for token_id, token in vocab.items()}
    string_merges = [(token_to_str(left), token_to_str(right)) for left, right in merges]

    settings = {name: value for name, value in tokenizer.init_kwargs.items() if name not in _NOT_SETTINGS}
    for name in ("padding_side", "truncation_side", "model_max_length", "clean_up_tokenization_spaces"):
        settings[name] = getattr(tokenizer, name)
    if tokenizer.chat_template is not None:
        settings["chat_template"] = tokenizer.chat_template
    for name in ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token"):
        value = getattr(tokenizer, name, None)
        settings[name] = None if value is None else renamed.get(str(value), str(value))
    extra_name = "extra_special_tokens" if "extra_special_tokens" in settings else "additional_special_tokens"
    settings.pop("extra_special_tokens", None)
    settings.pop("additional_special_tokens", None)
    named = {settings[name] for name in ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token",
                                         "cls_token", "mask_token") if settings.get(name)}
    others = [token for token in specials if token not in named]
    if others:
        settings[extra_name] = others
    if settings.get(ALIASES_KEY):  # special tokens sharing the id of another: that one's id in the new vocab
        content = {token_id: renamed.get(token.content, token.content)
                   for token_id, token in tokenizer.added_tokens_decoder.items()}
        settings[ALIASES_KEY] = {alias: encoder[content[token_id]] for alias, token_id in settings[ALIASES_KEY].items()}
    settings.update(overrides, pattern=pattern)
    return type(tokenizer)(vocab=encoder, merges=string_merges, **settings)


def _texts(text_iterator: Iterable[str | Sequence[str]]) -> Iterator[str]:
    """Texts from an iterator of texts or of batches of texts, as the fast class accepts."""
    for item in text_iterator:
        if isinstance(item, str):
            yield item
        else:
            yield from item


__all__ = ["train_like"]
