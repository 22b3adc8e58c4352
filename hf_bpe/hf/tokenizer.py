"""`HFBPETokenizer`: hf_bpe's encoder as a transformers tokenizer, for transformers 4 and 5.

It is a slow (Python) `PreTrainedTokenizer`, so it runs wherever transformers does, but `tok(texts)`, `encode` and
`__call__` on text skip the slow base class's per-token Python work (`hf_bpe.hf.encode_route`): added tokens are
found as
the fast tokenizer finds them (`hf_bpe.hf.added_tokens`), the text between them goes through `hf_bpe.Tokenizer` in
one batch, and the result is truncated into windows, given offsets (`hf_bpe.hf.offsets`) and padded as the fast
tokenizer loaded from the same directory would (tests compare them field by field). Only pre-tokenized words and id
lists take transformers' stock path, which ends in the same encoder through `_tokenize`. Saving lives in
`hf_bpe.hf.save`, training a new tokenizer in `hf_bpe.hf.training`.

>>> from hf_bpe.hf.tokenizer import HFBPETokenizer
>>> tok = HFBPETokenizer.from_pretrained("saved_directory")  # doctest: +SKIP
>>> tok(["Hello world", "Hi"], padding=True, return_tensors="np")["input_ids"].shape  # doctest: +SKIP
(2, 2)

The model's tables live in one `hf_bpe.hf.model_state.ModelTables`, which pickles as compressed merge ids and no
caches, so pickles are small, `datasets` hashes the tokenizer quickly, and its fingerprint is the same before and
after encoding (`Dataset.map` reuses its cache files).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from transformers import AddedToken, BatchEncoding, PreTrainedTokenizer
from transformers.utils import PaddingStrategy, TensorType

from hf_bpe.common.errors import InputError
from hf_bpe.encode.tokenizer import Tokenizer
from hf_bpe.formats.directory_specials import ALIASES_KEY
from hf_bpe.formats.gpt2 import unicode_to_bytes
from hf_bpe.formats.hf_directory import (
    ENDOFTEXT,
    ignore_merges_of_tokenizers_json,
    merges_from_strings,
    pattern_of_tokenizers_json,
    read_json,
    tokenizers_json_model,
    vocab_from_strings,
)
from hf_bpe.hf.added_tokens import AddedTokenSplitter, alias_specs
from hf_bpe.hf.encode_route import (
    EncodedText,
    EncodeOptions,
    Row,
    assemble,
    is_rectangular,
    pad_offsets,
    split_encode_options,
    string_pairs,
    truncated_rows,
)
from hf_bpe.hf.model_state import ModelTables
from hf_bpe.hf.offsets import token_offsets
from hf_bpe.hf.save import DirectorySaving
from hf_bpe.hf.training import train_like

# Marks a bos/eos/unk token left to its GPT-2 default: `<|endoftext|>` when the vocab has it, else none.
_GPT2_DEFAULT: Any = object()


class HFBPETokenizer(DirectorySaving, PreTrainedTokenizer):
    """A byte-level BPE tokenizer (GPT-2 style) backed by `hf_bpe.Tokenizer`.

    Built from GPT-2 files (`HFBPETokenizer(vocab_file, merges_file)`), from objects as transformers 5 tokenizers
    are (`HFBPETokenizer(vocab={token: id}, merges=[(left, right), ...])`), or by `from_pretrained` from a directory
    with `vocab.json` + `merges.txt` or only a `tokenizer.json`. Adds no tokens around the text, like GPT-2; like
    `GPT2Tokenizer`, `<|endoftext|>` is the bos, eos and unk token by default when the vocab has it. The
    pre-tokenization pattern is the one `tokenizer.json` holds (`hf_bpe.formats.hf_directory.read_directory_pattern`;
    GPT-2's when there is none), or `pattern` (a preset name or regex text) when given.
    """

    vocab_files_names = {"vocab_file": "vocab.json", "merges_file": "merges.txt"}
    model_input_names = ["input_ids", "attention_mask"]

    def __init__(self, vocab_file: str | None = None, merges_file: str | None = None, errors: str = "replace",
                 unk_token: str | AddedToken | None = _GPT2_DEFAULT, bos_token: str | AddedToken | None = _GPT2_DEFAULT,
                 eos_token: str | AddedToken | None = _GPT2_DEFAULT, pad_token: str | AddedToken | None = None,
                 add_prefix_space: bool = False, *, vocab: dict[str, int] | Sequence[Any] | None = None,
                 merges: Sequence[Any] | None = None, tokenizer_file: str | None = None, pattern: str | None = None,
                 **kwargs: Any) -> None:
        if add_prefix_space:
            raise ValueError("HFBPETokenizer does not support add_prefix_space=True")
        encoder, ordinary = _read_model(vocab_file, merges_file, vocab, merges, tokenizer_file, pattern)
        self._set_model(encoder, ordinary)
        self.errors = errors
        self.add_prefix_space = False  # like GPT2Tokenizer's attribute (True is refused above)
        # A directory re-saved by the fast class says backend "tokenizers": we are not one (no Encoding objects,
        # so no `sequence_ids()`); transformers 5 marks Python tokenizers "custom".
        kwargs.pop("backend", None)
        self._ready = False
        named = {name: (ENDOFTEXT if ENDOFTEXT in encoder else None) if value is _GPT2_DEFAULT else value
                 for name, value in (("unk_token", unk_token), ("bos_token", bos_token), ("eos_token", eos_token))}
        # Only the special tokens and errors are settings of ours; model_max_length etc. go to the base class.
        kwargs.setdefault("clean_up_tokenization_spaces", False)
        given = [token for token in (pad_token, *named.values(), *kwargs.values()) if isinstance(token, AddedToken)]
        super().__init__(errors=errors, pad_token=pad_token, add_prefix_space=add_prefix_space, **named, **kwargs)
        # Every __init__ argument with a default is in init_kwargs, as transformers expects (its generic tests check
        # it); saving leaves the pattern out of tokenizer_config.json, since tokenizer.json holds it.
        self.init_kwargs["pattern"] = self.pattern
        self._keep_flags_of(given)
        self._ready = True
        self._rebuild_added_tokens()

    def _keep_flags_of(self, special_tokens: list[AddedToken]) -> None:
        """Keep the lstrip/rstrip/... flags of special tokens given as AddedToken (`eos_token=AddedToken(...)`), as
        the fast class does; transformers 5's slow base class registers them from their text only."""
        for token in special_tokens:
            token_id = self._added_tokens_encoder.get(token.content)
            if token_id is not None and self._added_tokens_decoder[token_id].__getstate__() != token.__getstate__():
                flags = {**token.__getstate__(), "special": True}
                self._added_tokens_decoder[token_id] = AddedToken(**flags)

    def _set_model(self, encoder: dict[str, int], ordinary: Tokenizer) -> None:
        """Install the base vocabulary: `encoder` holds the strings transformers sees as tokens."""
        self._tables = ModelTables(encoder, ordinary)

    # The model's tables live in one ModelTables object (small pickles, cheap `datasets` hashing).
    encoder = property(lambda self: self._tables.encoder, doc="vocab.json: token string -> id")
    decoder = property(lambda self: self._tables.decoder, doc="id -> token string")
    merges = property(lambda self: self._tables.merges, doc="the merges as byte pairs, in rank order")
    _base_vocab = property(lambda self: self._tables.base_vocab)
    _ordinary = property(lambda self: self._tables.ordinary)
    _with_added_tokens = property(lambda self: self._tables.with_added)
    pattern = property(lambda self: self._tables.ordinary.pattern, doc="the pre-tokenization pattern's regex text")

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: str | os.PathLike[str], *args: Any,
                        **kwargs: Any) -> HFBPETokenizer:
        """Load a saved directory (or Hub repository): `vocab.json` + `merges.txt`, or `tokenizer.json` alone."""
        directory = Path(pretrained_model_name_or_path)
        if directory.is_dir() and not (directory / "tokenizer.json").is_file():
            for name in cls.vocab_files_names.values():
                if not (directory / name).is_file():
                    raise InputError(f"{directory / name}: no such file (HFBPETokenizer needs vocab.json and "
                                     f"merges.txt, or tokenizer.json)")
        # A tokenizer.json is read (once: it may be megabytes) and checked by __init__ (`_read_model`).
        try:
            with _class_mismatch_warning_silenced():
                return super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        except ImportError as error:
            # transformers 4 without protobuf turns any exception from __init__ into an ImportError about protobuf
            # (its `except import_protobuf_decode_error():` clause raises while matching): raise the real one.
            if "protobuf" in str(error) and error.__context__ is not None:
                raise error.__context__ from None
            raise

    def train_new_from_iterator(self, text_iterator: Iterable[str | Sequence[str]], vocab_size: int,
                                length: int | None = None, new_special_tokens: Sequence[str | AddedToken] | None = None,
                                special_tokens_map: dict[str, str] | None = None, *, progress: bool | None = None,
                                **kwargs: Any) -> HFBPETokenizer:
        """Train a new tokenizer like this one (same special tokens and settings) with hf_bpe's exact trainer.

        Mirrors `PreTrainedTokenizerFast.train_new_from_iterator`: `text_iterator` yields texts or batches of texts
        (each text a document), `vocab_size` counts the 256 bytes, the merges and the special tokens,
        `new_special_tokens` are added to the current ones and `special_tokens_map` renames special tokens
        ({old: new}). `length` is accepted for compatibility (the progress bar needs no total). Other keyword
        arguments are settings of the new tokenizer; `pattern=` also sets the pre-tokenization it is trained with.
        """
        return train_like(self, text_iterator, vocab_size, new_special_tokens, special_tokens_map, progress, kwargs)

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
        ids = _checked_ids([token_ids] if not isinstance(token_ids, (list, tuple, np.ndarray)) else token_ids)
        if skip_special_tokens:
            special_ids = set(self.all_special_ids)
            ids = [token_id for token_id in ids if token_id not in special_ids]
        text = self._with_added_tokens.decode(ids) if self.errors == "replace" else \
            self.convert_tokens_to_string(self.convert_ids_to_tokens(ids))
        cleanup = self.clean_up_tokenization_spaces if clean_up_tokenization_spaces is None \
            else clean_up_tokenization_spaces
        if cleanup and not _fast_skips_cleanup(self):
            text = self.clean_up_tokenization(text)
        return text

    def _add_tokens(self, new_tokens: Any, special_tokens: bool = False) -> int:
        added = super()._add_tokens(new_tokens, special_tokens=special_tokens)
        if self._ready:
            self._rebuild_added_tokens()
        return added

    def _rebuild_added_tokens(self) -> None:
        """Rebuild the decoder of added tokens and the splitter that finds them, with the ids the base class gave."""
        added = self._added_tokens_decoder
        self._tables.set_added_tokens([(token_id, token.content) for token_id, token in added.items()])
        specs = self._added_token_specs(added.keys())  # and the further tokens of a shared id (directory_specials)
        aliases = alias_specs(self.init_kwargs.get(ALIASES_KEY), {spec.id: spec for spec in specs})
        self._added_splitter = AddedTokenSplitter(specs + aliases)

    def tokenize(self, text: str, *args: Any, **kwargs: Any) -> list[str]:
        """The tokens of `text`, added tokens found as the fast tokenizer finds them (see hf_added_tokens)."""
        if not isinstance(text, str) or args or set(kwargs) - {"split_special_tokens", "add_special_tokens"}:
            return super().tokenize(text, *args, **kwargs)
        split_special_tokens = kwargs.get("split_special_tokens")
        skip_special = self.split_special_tokens if split_special_tokens is None else split_special_tokens
        tokens: list[str] = []
        decoder = self.decoder
        for start, stop, token_id in self._added_splitter.split(text, skip_special):
            if token_id is None:
                tokens += [decoder[token_id] for token_id in self._ordinary.encode(text[start:stop])]
            else:  # like the fast tokenizer: the matched text, with the whitespace lstrip/rstrip took
                tokens.append(text[start:stop])
        return tokens

    # -------------------------------------------------------------------------------------------------- encoding

    def _encode_plus(self, text: Any, text_pair: Any = None, **kwargs: Any) -> BatchEncoding:
        # transformers 5 sends single texts and batches here; 4 sends single texts here, batches to
        # _batch_encode_plus.
        options, rest = split_encode_options(kwargs)
        if isinstance(text, str) and (text_pair is None or isinstance(text_pair, str)):
            pairs: list[tuple[str, str | None]] | None = [(text, text_pair)]
            batched = False
        else:
            pairs = string_pairs(text, text_pair)
            batched = True
        if pairs is None or not self._can_encode_directly(options, rest):
            self._refuse_offsets(options)
            return super()._encode_plus(text, text_pair=text_pair, **options.as_kwargs(), **rest)
        return self._encode_directly(pairs, batched, rest.get("split_special_tokens"), options)

    def _batch_encode_plus(self, batch_text_or_text_pairs: Any, **kwargs: Any) -> BatchEncoding:
        # transformers 4 only.
        options, rest = split_encode_options(kwargs)
        pairs = string_pairs(batch_text_or_text_pairs, None)
        if pairs is None or not self._can_encode_directly(options, rest):
            self._refuse_offsets(options)
            return super()._batch_encode_plus(  # type: ignore[misc]
                batch_text_or_text_pairs, **options.as_kwargs(), **rest)
        return self._encode_directly(pairs, True, rest.get("split_special_tokens"), options)

    def _can_encode_directly(self, options: EncodeOptions, rest: dict[str, Any]) -> bool:
        if set(rest) - {"split_special_tokens"} or options.is_split_into_words:
            return False
        return not (options.add_special_tokens and self.num_special_tokens_to_add(pair=True) != 0)

    def _refuse_offsets(self, options: EncodeOptions) -> None:
        if options.return_offsets_mapping:
            raise NotImplementedError(
                "return_offsets_mapping=True is supported for text (or text pairs) given as str, without "
                "is_split_into_words; use the fast tokenizer (AutoTokenizer.from_pretrained(directory)) otherwise")

    def _encode_directly(self, pairs: list[tuple[str, str | None]], batched: bool, split_special_tokens: bool | None,
                         options: EncodeOptions) -> BatchEncoding:
        """Encode all texts in one encoder call, then truncate and assemble like the fast tokenizer."""
        samples = self._encode_texts(pairs, split_special_tokens, options.return_offsets_mapping)
        side = self.truncation_side
        rows: list[Row] = []
        sample_of_row: list[int] = []
        for index, (first, second) in enumerate(samples):
            sample_rows = truncated_rows(first, second, options, side)
            rows += sample_rows
            sample_of_row += [index] * len(sample_rows)
        if not options.truncates:
            for row in rows:
                # The whole row, the pair's two texts together, as the fast tokenizer checks its input_ids.
                ids = row.first.ids if row.second is None else row.first.ids + row.second.ids
                if len(ids) > self.model_max_length:
                    self._eventual_warn_about_too_long_sequence(ids, options.max_length, options.verbose)
        return self._finish(rows, sample_of_row, batched, options)

    def _encode_texts(self, pairs: list[tuple[str, str | None]], split_special_tokens: bool | None,
                      with_offsets: bool) -> list[tuple[EncodedText, EncodedText | None]]:
        """Encode every text of the pairs: added tokens found first, all the text between them in one batch."""
        skip_special = self.split_special_tokens if split_special_tokens is None else split_special_tokens
        texts = [first for first, _ in pairs] + [second for _, second in pairs if second is not None]
        splitter = self._added_splitter
        splits = [splitter.split(text, skip_special) if splitter else [(0, len(text), None)] for text in texts]
        pieces = [text[start:stop] for text, segments in zip(texts, splits)
                  for start, stop, token_id in segments if token_id is None]
        # In this process: its cache stays warm across calls (a pool per call would start cold every time), and
        # inside `Dataset.map(num_proc=N)` workers a pool of pools would only compete for the same cores.
        piece_ids = iter(self._ordinary.encode_batch(pieces, num_workers=1))
        encoded = []
        for text, segments in zip(texts, splits):
            ids: list[int] = []
            offsets: list[tuple[int, int]] | None = [] if with_offsets else None
            for start, stop, token_id in segments:
                if token_id is not None:
                    ids.append(token_id)
                    if offsets is not None:
                        offsets.append((start, stop))
                    continue
                segment_ids = next(piece_ids)
                ids += segment_ids
                if offsets is not None:
                    offsets += token_offsets(text[start:stop], self._tables.token_lengths[segment_ids], start)
            encoded.append(EncodedText(ids, offsets))
        firsts, seconds = encoded[:len(pairs)], iter(encoded[len(pairs):])
        return [(first, next(seconds) if second is not None else None) for first, (_, second) in zip(firsts, pairs)]

    def _finish(self, rows: list[Row], sample_of_row: list[int], batched: bool, options: EncodeOptions
                ) -> BatchEncoding:
        """Pad the rows' fields, add lengths and the overflow mapping, and make tensors as the fast tokenizer does."""
        return_token_type_ids = options.return_token_type_ids
        if return_token_type_ids is None:
            return_token_type_ids = "token_type_ids" in self.model_input_names
        return_attention_mask = options.return_attention_mask
        if return_attention_mask is None:
            return_attention_mask = "attention_mask" in self.model_input_names
        outputs: dict[str, Any] = assemble(rows, options, return_token_type_ids)
        offsets = outputs.pop("offset_mapping", None)
        if options.padding_strategy != PaddingStrategy.DO_NOT_PAD:
            outputs = dict(self.pad(outputs, padding=options.padding_strategy.value, max_length=options.max_length,
                                    pad_to_multiple_of=options.pad_to_multiple_of, padding_side=options.padding_side,
                                    return_attention_mask=return_attention_mask))
        elif return_attention_mask:
            outputs["attention_mask"] = [[1] * len(ids) for ids in outputs["input_ids"]]
        if offsets is not None:
            outputs["offset_mapping"] = pad_offsets(offsets, [len(ids) for ids in outputs["input_ids"]],
                                                    options.padding_side or self.padding_side)
        if options.return_length:
            outputs["length"] = [len(ids) for ids in outputs["input_ids"]]
        if options.return_overflowing_tokens:
            # Like the fast tokenizer, a single text with overflow keeps the batch axis.
            outputs["overflow_to_sample_mapping"] = sample_of_row
            batched = True
        if not batched:
            outputs = {key: value[0] for key, value in outputs.items()}
            if options.return_length:
                outputs["length"] = [outputs["length"]]
        elif options.return_tensors in ("np", TensorType.NUMPY) and is_rectangular(outputs["input_ids"]):
            # Same arrays as BatchEncoding would make, without its per-element check of nested lists.
            outputs = {key: np.asarray(value) for key, value in outputs.items()}
        return BatchEncoding(outputs, tensor_type=options.return_tensors, prepend_batch_axis=not batched)


def _read_model(vocab_file: str | None, merges_file: str | None, vocab: dict[str, int] | Sequence[Any] | None,
                merges: Sequence[Any] | None, tokenizer_file: str | None, pattern: str | None = None
                ) -> tuple[dict[str, int], Tokenizer]:
    """The base vocabulary (strings -> ids) and its encoder, from objects, GPT-2 files or a `tokenizer.json`; its
    pattern is `pattern`, else that of `tokenizer_file` when there is one, else GPT-2's.

    Raises InputError naming the file (and line) for a missing or corrupt file, or a merge that does not fit.
    """
    json_path = Path(tokenizer_file) if tokenizer_file is not None and os.path.isfile(tokenizer_file) else None
    # Parsed once, here only (`from_pretrained` does not read it first): the file may be megabytes. It has the pattern
    # and `ignore_merges` (converted tiktoken files).
    content = read_json(json_path) if json_path is not None else None
    ignore_merges = ignore_merges_of_tokenizers_json(content)
    if pattern is None and json_path is not None:
        pattern = pattern_of_tokenizers_json(content, json_path)
    if vocab is not None or merges is not None:
        if vocab is None or merges is None:
            raise ValueError("HFBPETokenizer(vocab=..., merges=...) needs both the vocab and the merges")
        encoder = _encoder_of(vocab)
        return encoder, _tokenizer_of(vocab_from_strings(encoder), merges_from_strings(merges), "vocab", pattern,
                                      ignore_merges)
    if json_path is not None:  # its model is checked even beside vocab.json, as `hf-bpe tokenize-dataset` checks it
        encoder, byte_merges, _ = tokenizers_json_model(content, json_path)
        if vocab_file is None and merges_file is None:
            return encoder, _tokenizer_of(vocab_from_strings(encoder), byte_merges, str(json_path), pattern,
                                          ignore_merges)
    for path, name in ((vocab_file, "vocab.json"), (merges_file, "merges.txt")):
        if path is None or not os.path.isfile(path):
            raise InputError(f"{path or name}: no such file")
    assert vocab_file is not None and merges_file is not None
    ordinary = Tokenizer.from_files(vocab_file, merges_file, pattern=pattern, ignore_merges=ignore_merges)
    # vocab.json itself, read as text: the strings transformers sees as tokens (special tokens as plain text).
    return read_json(Path(vocab_file)), ordinary


def _encoder_of(vocab: Any) -> dict[str, int]:
    """A vocab given as {token: id}, or as tokens (or (token, score) pairs, as transformers' extractors give them)
    in id order."""
    if isinstance(vocab, dict):
        return dict(vocab)
    if isinstance(vocab, (list, tuple)):
        tokens = [item[0] if isinstance(item, (list, tuple)) else item for item in vocab]
        if all(isinstance(token, str) for token in tokens):
            return {token: token_id for token_id, token in enumerate(tokens)}
    raise TypeError(f"vocab must be a dict of token strings to ids or a list of tokens, got {type(vocab).__name__}")


def _tokenizer_of(vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]], source: str,
                  pattern: str | None = None, ignore_merges: bool = False) -> Tokenizer:
    try:
        return Tokenizer(vocab, merges, pattern=pattern, ignore_merges=ignore_merges)
    except ValueError as error:  # a merge that does not fit the vocab, a token given twice
        raise InputError(f"{source}: {error}") from None


def _fast_skips_cleanup(tokenizer: PreTrainedTokenizer) -> bool:
    """Whether the fast tokenizer of this transformers ignores `clean_up_tokenization_spaces` for BPE: 5 does
    (unless forced with `clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output`), 4 does not."""
    if not hasattr(tokenizer, "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output"):
        return False
    return not tokenizer.clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output


def _checked_ids(token_ids: Iterable[Any]) -> list[int]:
    """Token ids as ints; TypeError for anything that is not an integer (numpy integers are fine)."""
    ids = []
    for token_id in token_ids:
        if isinstance(token_id, (bool, np.bool_)) or not isinstance(token_id, (int, np.integer)):
            raise TypeError(f"token ids must be integers, got {token_id!r} ({type(token_id).__name__})")
        ids.append(int(token_id))
    return ids


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


__all__ = ["HFBPETokenizer"]
