"""`HFBPETokenizer`: hf_bpe's encoder as a transformers tokenizer, for transformers 4 and 5.

It is a slow (Python) `PreTrainedTokenizer`, so it runs wherever transformers does, but `tok(texts)`, `encode` and
`__call__` on plain text skip the slow base class's per-token Python work: the whole batch goes through
`hf_bpe.Tokenizer` at once and the result is truncated and padded as the fast tokenizer loaded from the same
directory would (tests compare them field by field). Inputs the fast route does not cover (pre-tokenized words, id
lists, overflowing tokens) take the stock path, which ends in the same encoder through `_tokenize`.

>>> from hf_bpe import HFBPETokenizer
>>> tok = HFBPETokenizer.from_pretrained("saved_directory")  # doctest: +SKIP
>>> tok(["Hello world", "Hi"], padding=True, return_tensors="np")["input_ids"].shape  # doctest: +SKIP
(2, 2)

Encode caches live inside `hf_bpe.Tokenizer`, whose pickles leave them out, so `datasets` fingerprints (which hash
the tokenizer's pickled state) are the same before and after encoding, and `Dataset.map` reuses its cache files.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from transformers import AddedToken, BatchEncoding, PreTrainedTokenizer
from transformers.utils import PaddingStrategy, TensorType

from hf_bpe.encode import Tokenizer
from hf_bpe.errors import InputError
from hf_bpe.gpt2_format import save_gpt2, unicode_to_bytes
from hf_bpe.hf_export import NO_MAX_LENGTH, save_tokenizer_directory

try:  # transformers >= 4.? has these enums in tokenization_utils_base in every version we support
    from transformers.tokenization_utils_base import TruncationStrategy
except ImportError:  # pragma: no cover
    from transformers.utils import TruncationStrategy  # type: ignore[no-redef]



class HFBPETokenizer(PreTrainedTokenizer):
    """A byte-level BPE tokenizer (GPT-2 style) backed by `hf_bpe.Tokenizer`.

    Loaded from a directory written by `hf_bpe.hf_export.save_tokenizer_directory` (or any GPT-2 style
    `vocab.json` + `merges.txt`); adds no tokens around the text, like GPT-2.
    """

    vocab_files_names = {"vocab_file": "vocab.json", "merges_file": "merges.txt"}
    model_input_names = ["input_ids", "attention_mask"]

    def __init__(self, vocab_file: str, merges_file: str, errors: str = "replace",
                 unk_token: str | AddedToken | None = None, bos_token: str | AddedToken | None = None,
                 eos_token: str | AddedToken | None = None, pad_token: str | AddedToken | None = None,
                 add_prefix_space: bool = False, **kwargs: Any) -> None:
        if add_prefix_space:
            raise ValueError("HFBPETokenizer does not support add_prefix_space=True")
        for path in (vocab_file, merges_file):
            if path is None or not os.path.isfile(path):
                name = "vocab.json" if path is vocab_file else "merges.txt"
                raise InputError(f"{path or name}: no such file")
        # Raises InputError naming the file and line for a corrupt vocab or merges file.
        self._ordinary = Tokenizer.from_files(vocab_file, merges_file)
        self._base_vocab: dict[int, bytes] = dict(self._ordinary.vocab)
        self.merges: list[tuple[bytes, bytes]] = list(self._ordinary.merges)
        # vocab.json itself, read as text: the strings transformers sees as tokens (special tokens as plain text).
        self.encoder: dict[str, int] = json.loads(Path(vocab_file).read_text(encoding="utf-8"))
        self.decoder: dict[int, str] = {token_id: token for token, token_id in self.encoder.items()}
        self.errors = errors
        self._with_added_tokens = self._ordinary
        self._ready = False
        # Only the special tokens and errors are settings of ours; model_max_length etc. go to the base class.
        kwargs.setdefault("clean_up_tokenization_spaces", False)
        super().__init__(errors=errors, unk_token=unk_token, bos_token=bos_token, eos_token=eos_token,
                         pad_token=pad_token, add_prefix_space=add_prefix_space, **kwargs)
        self._ready = True
        self._rebuild_added_tokens()

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: str | os.PathLike[str], *args: Any,
                        **kwargs: Any) -> HFBPETokenizer:
        """Load a saved directory (or Hub repository) written by hf_bpe."""
        directory = Path(pretrained_model_name_or_path)
        if directory.is_dir():
            for name in cls.vocab_files_names.values():
                if not (directory / name).is_file():
                    raise InputError(f"{directory / name}: no such file (HFBPETokenizer needs vocab.json and "
                                     f"merges.txt)")
        try:
            with _class_mismatch_warning_silenced():
                return super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        except ImportError as error:
            # transformers 4 without protobuf turns any exception from __init__ into an ImportError about protobuf
            # (its `except import_protobuf_decode_error():` clause raises while matching): raise the real one.
            if "protobuf" in str(error) and error.__context__ is not None:
                raise error.__context__ from None
            raise

    # ------------------------------------------------------------------------------ what the slow base class needs

    @property
    def vocab_size(self) -> int:
        """Size of the base vocabulary (without tokens added after loading)."""
        return len(self.encoder)

    def get_vocab(self) -> dict[str, int]:
        return dict(self.encoder, **self.added_tokens_encoder)

    def _tokenize(self, text: str, **kwargs: Any) -> list[str]:
        # The base class has split off added tokens already: this text has none to honour.
        decoder = self.decoder
        return [decoder[token_id] for token_id in self._ordinary.encode(text)]

    def _convert_token_to_id(self, token: str) -> int | None:
        return self.encoder.get(token, self.encoder.get(str(self.unk_token)) if self.unk_token else None)

    def _convert_id_to_token(self, index: int) -> str | None:
        return self.decoder.get(index)

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        """Byte-level tokens ("Ġworld") back to text; added tokens are taken as their own text."""
        byte_of = unicode_to_bytes()
        added = self._added_tokens_encoder
        data = bytearray()
        for token in tokens:
            if token in added or not all(char in byte_of for char in token):
                data += token.encode("utf-8")
            else:
                data += bytes(byte_of[char] for char in token)
        return data.decode("utf-8", errors=self.errors)

    def _decode(self, token_ids: int | Sequence[int], skip_special_tokens: bool = False,
                clean_up_tokenization_spaces: bool | None = None, **kwargs: Any) -> str:
        # Like the fast tokenizer: bytes of all tokens joined, then decoded; no spaces around special tokens
        # (transformers 4's slow default puts them there).
        ids = [token_ids] if isinstance(token_ids, int) else [int(token_id) for token_id in token_ids]
        if skip_special_tokens:
            special_ids = set(self.all_special_ids)
            ids = [token_id for token_id in ids if token_id not in special_ids]
        text = self._with_added_tokens.decode(ids) if self.errors == "replace" else \
            self.convert_tokens_to_string(self.convert_ids_to_tokens(ids))
        cleanup = self.clean_up_tokenization_spaces if clean_up_tokenization_spaces is None \
            else clean_up_tokenization_spaces
        return self.clean_up_tokenization(text) if cleanup else text

    def _add_tokens(self, new_tokens: Any, special_tokens: bool = False) -> int:
        added = super()._add_tokens(new_tokens, special_tokens=special_tokens)
        if self._ready:
            self._rebuild_added_tokens()
        return added

    def _rebuild_added_tokens(self) -> None:
        """Rebuild the encoder that matches added tokens, with the ids the base class gave them."""
        added = self._added_tokens_decoder
        vocab = dict(self._base_vocab)
        for token_id, token in added.items():
            vocab[token_id] = token.content.encode("utf-8")
        contents = [token.content for _, token in sorted(added.items())]
        self._with_added_tokens = Tokenizer(vocab, self.merges, contents) if contents else self._ordinary
        # The batch route matches added tokens in one pass, which is exact only for plain ones.
        self._plain_added_tokens = all(not (token.lstrip or token.rstrip or token.single_word)
                                       for token in added.values())

    # -------------------------------------------------------------------------------------------------- encoding

    def _encode_plus(self, text: Any, text_pair: Any = None, **kwargs: Any) -> BatchEncoding:
        # transformers 5 sends single texts and batches here; 4 sends single texts here, batches to
        # _batch_encode_plus.
        options, kwargs = _split_encode_options(kwargs)
        if isinstance(text, str) and (text_pair is None or isinstance(text_pair, str)):
            pairs = [(text, text_pair)]
            batched = False
        else:
            pairs = _string_pairs(text, text_pair)
            batched = True
        if pairs is None or not self._can_encode_directly(options, kwargs):
            return super()._encode_plus(text, text_pair=text_pair, **options, **kwargs)
        return self._encode_directly(pairs, batched, kwargs.get("split_special_tokens"), **options)

    def _batch_encode_plus(self, batch_text_or_text_pairs: Any, **kwargs: Any) -> BatchEncoding:
        # transformers 4 only.
        options, kwargs = _split_encode_options(kwargs)
        pairs = _string_pairs(batch_text_or_text_pairs, None)
        if pairs is None or not self._can_encode_directly(options, kwargs):
            return super()._batch_encode_plus(batch_text_or_text_pairs, **options, **kwargs)  # type: ignore[misc]
        return self._encode_directly(pairs, True, kwargs.get("split_special_tokens"), **options)

    def _can_encode_directly(self, options: dict[str, Any], kwargs: dict[str, Any]) -> bool:
        if set(kwargs) - {"split_special_tokens"}:
            return False
        if options["is_split_into_words"] or options["return_overflowing_tokens"] or options["return_offsets_mapping"]:
            return False
        if options["add_special_tokens"] and self.num_special_tokens_to_add(pair=True) != 0:
            return False
        return self._plain_added_tokens

    def _encode_directly(self, pairs: list[tuple[str, str | None]], batched: bool, split_special_tokens: bool | None,
                         *, add_special_tokens: bool, padding_strategy: PaddingStrategy,
                         truncation_strategy: TruncationStrategy, max_length: int | None, stride: int,
                         pad_to_multiple_of: int | None, padding_side: str | None,
                         return_tensors: str | TensorType | None, return_token_type_ids: bool | None,
                         return_attention_mask: bool | None, return_special_tokens_mask: bool, return_length: bool,
                         verbose: bool, **_: Any) -> BatchEncoding:
        """Encode all texts in one encoder call, then truncate and pad like the fast tokenizer."""
        if split_special_tokens is None:
            split_special_tokens = self.split_special_tokens
        encoder = self._ordinary if split_special_tokens else self._with_added_tokens
        texts = [first for first, _ in pairs] + [second for _, second in pairs if second is not None]
        encoded = encoder.encode_batch(texts)
        firsts, seconds = encoded[:len(pairs)], iter(encoded[len(pairs):])
        if return_token_type_ids is None:
            return_token_type_ids = "token_type_ids" in self.model_input_names
        if return_attention_mask is None:
            return_attention_mask = "attention_mask" in self.model_input_names
        truncate = truncation_strategy != TruncationStrategy.DO_NOT_TRUNCATE and max_length is not None

        input_ids: list[list[int]] = []
        type_ids: list[list[int]] = []
        for ids, (_, second) in zip(firsts, pairs):
            pair_ids = next(seconds) if second is not None else None
            if truncate:
                ids, pair_ids = _truncate(ids, pair_ids, truncation_strategy, max_length,  # type: ignore[arg-type]
                                          self.truncation_side)
            if pair_ids is None:
                input_ids.append(ids)
                if return_token_type_ids:
                    type_ids.append([0] * len(ids))
            else:
                input_ids.append(ids + pair_ids)
                if return_token_type_ids:
                    type_ids.append([0] * len(ids) + [1] * len(pair_ids))
            if len(input_ids[-1]) > self.model_max_length and not truncate:
                self._eventual_warn_about_too_long_sequence(input_ids[-1], max_length, verbose)

        outputs: dict[str, Any] = {"input_ids": input_ids}
        if return_token_type_ids:
            outputs["token_type_ids"] = type_ids
        if return_special_tokens_mask:
            # The fast tokenizer marks only tokens it adds itself (none here), not special tokens in the text.
            outputs["special_tokens_mask"] = [[0] * len(ids) for ids in input_ids]
        if padding_strategy != PaddingStrategy.DO_NOT_PAD:
            outputs = dict(self.pad(outputs, padding=padding_strategy.value, max_length=max_length,
                                    pad_to_multiple_of=pad_to_multiple_of, padding_side=padding_side,
                                    return_attention_mask=return_attention_mask))
        elif return_attention_mask:
            outputs["attention_mask"] = [[1] * len(ids) for ids in input_ids]
        if return_length:
            outputs["length"] = [len(ids) for ids in outputs["input_ids"]]
        if not batched:
            outputs = {key: value[0] for key, value in outputs.items()}
            if return_length:
                outputs["length"] = [outputs["length"]]
        elif return_tensors in ("np", TensorType.NUMPY) and _is_rectangular(outputs["input_ids"]):
            # Same arrays as BatchEncoding would make, without its per-element check of nested lists.
            outputs = {key: np.asarray(value) for key, value in outputs.items()}
        return BatchEncoding(outputs, tensor_type=return_tensors, prepend_batch_axis=not batched)

    # -------------------------------------------------------------------------------------------------- saving

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple[str, ...]:
        """Write `vocab.json` and `merges.txt` (the base vocabulary) into `save_directory`."""
        prefix = f"{filename_prefix}-" if filename_prefix else ""
        with tempfile.TemporaryDirectory(dir=save_directory) as scratch:
            save_gpt2(self._base_vocab, self.merges, scratch, self._special_tokens_in_base_vocab())
            paths = []
            for name in ("vocab.json", "merges.txt"):
                target = os.path.join(save_directory, prefix + name)
                shutil.move(os.path.join(scratch, name), target)
                paths.append(target)
        return tuple(paths)

    def save_pretrained(self, save_directory: str | os.PathLike[str], legacy_format: bool | None = None,
                        filename_prefix: str | None = None, push_to_hub: bool = False,
                        **kwargs: Any) -> tuple[str, ...]:
        """Write the same files as `hf_bpe.hf_export.save_tokenizer_directory`: every loader reads them back."""
        if push_to_hub:
            raise ValueError("HFBPETokenizer.save_pretrained does not push to the Hub: save the directory, then "
                             "upload it with huggingface_hub")
        if filename_prefix:
            raise ValueError("HFBPETokenizer.save_pretrained does not support filename_prefix")
        ordinary_added = [token.content for token in self._added_tokens_decoder.values() if not token.special]
        if ordinary_added:
            raise ValueError(f"cannot save tokens added as non-special tokens: {ordinary_added}")
        vocab = dict(self._base_vocab)
        for token_id, token in self._added_tokens_decoder.items():
            vocab[token_id] = token.content.encode("utf-8")
        specials = [token.content for _, token in sorted(self._added_tokens_decoder.items())]
        model_max_length = self.model_max_length if self.model_max_length < NO_MAX_LENGTH else None
        pad_token = str(self.pad_token) if self.pad_token is not None else None
        directory = save_tokenizer_directory(save_directory, vocab, self.merges, specials,
                                             model_max_length=model_max_length, pad_token=pad_token)
        return tuple(str(path) for path in sorted(directory.iterdir()) if path.is_file())

    def _special_tokens_in_base_vocab(self) -> list[str]:
        return [token.content for token_id, token in self._added_tokens_decoder.items()
                if token_id in self._base_vocab]


class _ClassMismatchFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("The tokenizer class you load from this checkpoint is not the same")


@contextmanager
def _class_mismatch_warning_silenced() -> Iterator[None]:
    """Hide transformers 4's warning that the directory names another class: it names the built-in fast class on
    purpose, so that AutoTokenizer works without hf_bpe."""
    logger = logging.getLogger("transformers.tokenization_utils_base")
    log_filter = _ClassMismatchFilter()
    logger.addFilter(log_filter)
    try:
        yield
    finally:
        logger.removeFilter(log_filter)


# The keyword arguments transformers passes to `_encode_plus` / `_batch_encode_plus`, with their defaults there.
_ENCODE_OPTION_DEFAULTS: dict[str, Any] = dict(
    add_special_tokens=True, padding_strategy=PaddingStrategy.DO_NOT_PAD,
    truncation_strategy=TruncationStrategy.DO_NOT_TRUNCATE, max_length=None, stride=0, is_split_into_words=False,
    pad_to_multiple_of=None, padding_side=None, return_tensors=None, return_token_type_ids=None,
    return_attention_mask=None, return_overflowing_tokens=False, return_special_tokens_mask=False,
    return_offsets_mapping=False, return_length=False, verbose=True,
)


def _split_encode_options(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split `_encode_plus` keyword arguments into the known options (defaults filled in) and the rest."""
    options = {name: kwargs.get(name, default) for name, default in _ENCODE_OPTION_DEFAULTS.items()}
    rest = {name: value for name, value in kwargs.items() if name not in _ENCODE_OPTION_DEFAULTS}
    return options, rest


def _truncate(ids: list[int], pair_ids: list[int] | None, strategy: TruncationStrategy, max_length: int,
              side: str) -> tuple[list[int], list[int] | None]:
    """Truncate one sequence or pair to `max_length` tokens as the `tokenizers` library does (truncation.rs).

    >>> _truncate([1, 2, 3, 4, 5], [6, 7], TruncationStrategy.LONGEST_FIRST, 4, "right")
    ([1, 2], [6, 7])
    >>> _truncate([1, 2, 3], [4, 5, 6], TruncationStrategy.LONGEST_FIRST, 3, "left")
    ([3], [5, 6])
    """
    def cut(sequence: list[int], length: int) -> list[int]:
        if len(sequence) <= length:
            return sequence
        return sequence[:length] if side == "right" else sequence[len(sequence) - length:]

    if max_length == 0:
        return [], None if pair_ids is None else []
    to_remove = len(ids) + len(pair_ids or ()) - max_length
    if to_remove <= 0:
        return ids, pair_ids
    if strategy == TruncationStrategy.LONGEST_FIRST:
        if pair_ids is None:
            return cut(ids, max_length), None
        shorter, longer = sorted((len(ids), len(pair_ids)))
        longer = shorter if shorter > max_length else max(shorter, max_length - shorter)
        if shorter + longer > max_length:
            shorter = max_length // 2
            longer = shorter + max_length % 2
        first_length, second_length = (longer, shorter) if len(ids) > len(pair_ids) else (shorter, longer)
        return cut(ids, first_length), cut(pair_ids, second_length)
    if strategy == TruncationStrategy.ONLY_SECOND and pair_ids is None:
        raise ValueError("Truncation error: Second sequence not provided")
    target = ids if strategy == TruncationStrategy.ONLY_FIRST else pair_ids
    assert target is not None
    if len(target) <= to_remove:
        raise ValueError("Truncation error: Sequence to truncate too short to respect the provided max_length")
    if strategy == TruncationStrategy.ONLY_FIRST:
        return cut(ids, len(ids) - to_remove), pair_ids
    return ids, cut(target, len(target) - to_remove)


def _is_rectangular(rows: list[list[int]]) -> bool:
    return bool(rows) and len(rows[0]) > 0 and all(len(row) == len(rows[0]) for row in rows)


def _string_pairs(texts: Any, pairs: Any) -> list[tuple[str, str | None]] | None:
    """A batch of texts (or text pairs) as [(text, pair or None)], or None if it is not one made of strings."""
    if not isinstance(texts, (list, tuple)):
        return None
    if pairs is not None:
        if not isinstance(pairs, (list, tuple)) or len(pairs) != len(texts):
            return None
        result = list(zip(texts, pairs))
    else:
        result = []
        for item in texts:
            if isinstance(item, str):
                result.append((item, None))
            elif isinstance(item, (list, tuple)) and len(item) == 2:
                result.append((item[0], item[1]))
            else:
                return None
    if all(isinstance(first, str) and (second is None or isinstance(second, str)) for first, second in result):
        return result
    return None


__all__ = ["HFBPETokenizer"]
