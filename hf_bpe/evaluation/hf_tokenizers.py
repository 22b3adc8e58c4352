"""Other models' tokenizers, encoded by the `tokenizers` library itself: `TokenizersEngine`.

`hf-bpe eval --baseline DIR`, `hf-bpe card --baseline DIR` and `hf-bpe show DIR` take any HuggingFace tokenizer
directory with a `tokenizer.json` (Qwen's, Llama 3's, DeepSeek's, ...), whatever its normalizer, pre-tokenizer
sequence and model: `tokenizers` reads the file and encodes the text, hf_bpe only counts the ids. Text is encoded
without the tokens a post-processor adds (`add_special_tokens=False`), and without the truncation and padding a
tokenizer.json may ask for, as hf_bpe's own encoder sees it: special tokens in the text count as one token each.

**Counting a file exactly, in parts.** `tokenizers` cuts text at its added tokens before anything else: the
normalizer, the pre-tokenizers and the model then work on each piece alone. So a file is cut right after each place
where `tokenizers` itself finds an added token (a second `tokenizers.Tokenizer` with the same added tokens and
nothing else finds them, in one pass over the file), and the parts are encoded in batches: the ids are those of
encoding the whole file at once, with memory bounded by the batch. The file is not cut (it is encoded whole, which
takes a few hundred bytes of memory per token) when that reasoning does not hold: an added token that takes the
whitespace after it (`rstrip`) or must stand alone (`single_word`), or a normalizer or pre-tokenizer not known to work
piece by piece, such as Metaspace with `prepend_scheme: first`, which treats the piece at the start of the text
otherwise.

**Tokens as bytes** (for the viewer and the lists of unused tokens only; counts come from the ids): byte-level
vocabularies (a ByteLevel decoder or pre-tokenizer) through GPT-2's byte mapping, byte-fallback tokens `<0xE6>` as
their byte, the Metaspace `▁` as a space, anything else as its UTF-8 text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from hf_bpe.common.errors import InputError
from hf_bpe.evaluation.token_counts import COUNT_DTYPE
from hf_bpe.formats.gpt2 import unicode_to_bytes
from hf_bpe.formats.hf_directory import read_json

ENGINE = "tokenizers"
# Normalizers and pre-tokenizers whose work on a piece of text does not depend on where the piece is in the text.
PIECEWISE_COMPONENTS = frozenset({
    "Sequence", "NFC", "NFD", "NFKC", "NFKD", "Lowercase", "Strip", "StripAccents", "Replace", "Prepend",
    "BertNormalizer", "Precompiled", "Nmt", "ByteLevel", "Split", "Whitespace", "WhitespaceSplit", "Punctuation",
    "Digits", "BertPreTokenizer", "UnicodeScripts", "CharDelimiterSplit", "Metaspace", "FixedLength"})
# How many characters of a file go to `tokenizers` in one batch of parts.
BATCH_CHARACTERS = 1 << 22
_BYTE_FALLBACK = re.compile(r"<0x([0-9A-Fa-f]{2})>")


class TokenizersEngine:
    """A `tokenizer.json` encoded by `tokenizers`, with what `hf_bpe.evaluation` asks of a tokenizer: `vocab` (id ->
    bytes), `special_tokens`, `token_to_id`, `id_to_token`, `encode`, `encode_to_numpy` and `count_tokens`."""

    engine = ENGINE
    pattern = None  # no hf_bpe pattern: a file is cut where `tokenizers` cuts text (see the module docstring)

    def __init__(self, path: Path) -> None:
        import tokenizers

        content = read_json(path)
        if not isinstance(content, dict) or not isinstance(content.get("model"), dict):
            raise InputError(f"{path}: not a tokenizers tokenizer.json (no \"model\" object)")
        try:
            self._tokenizer = tokenizers.Tokenizer.from_str(json.dumps(content))
        except Exception as error:  # tokenizers raises a plain Exception with serde's message
            reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise InputError(f"{path}: tokenizers {tokenizers.__version__} cannot read it: {reason}") from None
        # A tokenizer.json may ask for truncation or padding (a model's input length): whole texts are counted here.
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        self.path = path
        added = self._tokenizer.get_added_tokens_decoder()
        self.special_tokens = [token.content for _, token in sorted(added.items()) if token.special]
        to_bytes = _token_bytes(content)
        strings = self._tokenizer.get_vocab(with_added_tokens=True)
        self.vocab: dict[int, bytes] = {token_id: (text.encode("utf-8") if token_id in added else to_bytes(text))
                                        for text, token_id in strings.items()}
        self._ids = {token: token_id for token_id, token in self.vocab.items()}
        self.vocab_size = len(self.vocab)
        self._splitter = _added_token_finder(added) if _cuttable(content, added.values()) else None

    def token_to_id(self, token: bytes | str) -> int | None:
        return self._ids.get(token.encode("utf-8") if isinstance(token, str) else token)

    def id_to_token(self, token_id: int) -> bytes:
        return self.vocab[token_id]

    def encode(self, text: str) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=False).ids

    def encode_to_numpy(self, text: str) -> np.ndarray:
        return np.array(self.encode(text), dtype=np.uint32)

    def parts(self, text: str) -> list[str]:
        """`text` cut right after each added token `tokenizers` finds in it (the whole text when it cannot be cut)."""
        if self._splitter is None or not text:
            return [text]
        found = self._splitter.encode(text, add_special_tokens=False)
        ends = [end for (_, end), token_id in zip(found.offsets, found.ids) if token_id != 0]
        bounds = [0, *ends] if ends and ends[-1] == len(text) else [0, *ends, len(text)]
        return [text[start:end] for start, end in zip(bounds, bounds[1:])]

    def count_tokens(self, text: str) -> np.ndarray:
        """How often each id occurs in the encoding of `text`, by id: encoded in parts, in batches."""
        counts = np.zeros(max(self.vocab) + 1, dtype=COUNT_DTYPE)
        for batch in _batches(self.parts(text), BATCH_CHARACTERS):
            for encoding in self._tokenizer.encode_batch_fast(batch, add_special_tokens=False):
                if encoding.ids:
                    counts += np.bincount(np.array(encoding.ids, dtype=np.int64),
                                          minlength=len(counts)).astype(COUNT_DTYPE)
        return counts

    def __reduce__(self) -> tuple[Any, tuple[Path]]:
        return TokenizersEngine, (self.path,)

    def __repr__(self) -> str:
        return f"TokenizersEngine({str(self.path)!r})"


def load_tokenizer_json(directory: str | Path) -> TokenizersEngine:
    """The `tokenizers` engine of a directory's `tokenizer.json` (or of that file), or an InputError naming the file
    and the reason."""
    path = Path(directory)
    if path.is_dir():
        path = path / "tokenizer.json"
    if not path.is_file():
        raise InputError(f"{path}: no such file (a HuggingFace tokenizer directory has the tokenizer.json that "
                         f"tokenizers reads)")
    return TokenizersEngine(path)


def _token_bytes(content: dict[str, Any]):  # type: ignore[no-untyped-def]
    """The function from a vocabulary string to the bytes it stands for (see the module docstring)."""
    described = json.dumps([content.get("decoder"), content.get("pre_tokenizer")], ensure_ascii=False)
    table = unicode_to_bytes()
    if '"ByteLevel"' in described:
        def byte_level(text: str) -> bytes:
            try:
                return bytes(table[char] for char in text)
            except KeyError:
                return text.encode("utf-8")
        return byte_level
    byte_fallback = bool(content["model"].get("byte_fallback"))
    metaspace = '"Metaspace"' in described or "\u2581" in described

    def other(text: str) -> bytes:
        match = _BYTE_FALLBACK.fullmatch(text) if byte_fallback else None
        if match:
            return bytes([int(match.group(1), 16)])
        return (text.replace("\u2581", " ") if metaspace else text).encode("utf-8")
    return other


def _cuttable(content: dict[str, Any], added: Any) -> bool:
    """Whether a text may be cut after its added tokens (see the module docstring)."""
    if any(token.rstrip or token.single_word for token in added):
        return False
    for component in _components(content.get("normalizer")) + _components(content.get("pre_tokenizer")):
        if component.get("type") not in PIECEWISE_COMPONENTS or component.get("prepend_scheme") == "first":
            return False
    return True


def _components(node: Any) -> list[dict[str, Any]]:
    """A normalizer or pre-tokenizer and, for a Sequence, every one inside it."""
    if not isinstance(node, dict):
        return []
    inner = node.get("normalizers") or node.get("pretokenizers") or []
    return [node, *(component for item in inner for component in _components(item))]


def _added_token_finder(added: dict[int, Any]) -> Any:
    """A tokenizer with the same added tokens and nothing else: every other piece of text is one token, id 0. Only
    the added tokens `tokenizers` finds before normalizing matter for cutting; the normalized ones are found inside
    the pieces, which are encoded whole either way."""
    import tokenizers

    finder = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[text]": 0}, unk_token="[text]"))
    raw = [tokenizers.AddedToken(token.content, single_word=False, lstrip=token.lstrip, rstrip=False,
                                 normalized=False, special=token.special)
           for _, token in sorted(added.items()) if not token.normalized]
    finder.add_special_tokens([token for token in raw if token.special])
    finder.add_tokens([token for token in raw if not token.special])
    return finder


def _batches(parts: list[str], characters: int) -> Iterator[list[str]]:
    batch: list[str] = []
    size = 0
    for part in parts:
        batch.append(part)
        size += len(part)
        if size >= characters:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


__all__ = ["ENGINE", "TokenizersEngine", "load_tokenizer_json"]
