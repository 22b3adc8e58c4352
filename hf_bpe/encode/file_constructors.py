"""`Tokenizer.from_files` and `Tokenizer.from_tiktoken`: a `Tokenizer` from GPT-2's `vocab.json` and `merges.txt`
(`hf_bpe.formats.gpt2`), or from a tiktoken rank file (`hf_bpe.formats.tiktoken_files`).

`FileConstructors` is a base class of `Tokenizer` (so this module does not import it): each constructor reads the
files and calls the class it is called on, `Tokenizer` or a subclass, with the vocab, merges and special tokens.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Self

from hf_bpe.common.errors import InputError
from hf_bpe.encode.cache import DEFAULT_CACHE_BYTES
from hf_bpe.encode.merge_table import MergeTableError
from hf_bpe.formats.gpt2 import load_gpt2_merges_numbered, load_gpt2_vocab
from hf_bpe.formats.tiktoken_files import load_tiktoken


class FileConstructors:
    """The constructors from files of `Tokenizer` (a mixin: `cls(vocab, merges, special_tokens, ...)` is
    `Tokenizer`'s own constructor)."""

    @classmethod
    def from_files(cls, vocab_json: str | os.PathLike[str], merges_txt: str | os.PathLike[str],
                   special_tokens: Sequence[str] | None = None, *, pattern: str | None = None,
                   cache_bytes: int = DEFAULT_CACHE_BYTES, ignore_merges: bool = False) -> Self:
        """Load GPT-2 `vocab.json` and `merges.txt`; token ids are the ones in the file. The files do not hold the
        pre-tokenization pattern nor `ignore_merges`: give them (a directory's `tokenizer.json` has them, see
        `hf_bpe.formats.hf_directory.read_directory_pattern` and `read_directory_ignore_merges`).

        Raises InputError naming the file and line for a corrupt file or a merge that does not fit the vocab.
        """
        vocab = load_gpt2_vocab(vocab_json)
        merges, line_numbers = load_gpt2_merges_numbered(merges_txt)
        try:
            return cls(vocab, merges, special_tokens, pattern=pattern, cache_bytes=cache_bytes,
                       ignore_merges=ignore_merges)
        except MergeTableError as error:
            raise InputError(f"{merges_txt}: line {line_numbers[error.rank]}: {error.args[0]}") from None
        except ValueError as error:
            raise InputError(f"{vocab_json}: {error}") from None

    @classmethod
    def from_tiktoken(cls, path: str | os.PathLike[str], pattern: str | None,
                      special_tokens: Mapping[str, int] | None = None, *, cache_bytes: int = DEFAULT_CACHE_BYTES
                      ) -> Self:
        """Load a `.tiktoken` file: ranks are ids, merges derived from them, each special token at its given id (see
        `hf_bpe.formats.tiktoken_files`; several may share one). The file has no pattern: pass tiktoken's, e.g.
        "cl100k" for cl100k_base. Like tiktoken, a pre-token that is a token is that token (`ignore_merges`)."""
        vocab, merges, specials = load_tiktoken(path, special_tokens, lazy=True)  # pairs of bytes made when read
        return cls(vocab, merges, specials, pattern=pattern, cache_bytes=cache_bytes, ignore_merges=True)


__all__ = ["FileConstructors"]
