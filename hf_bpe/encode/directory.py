"""The `Tokenizer` of a saved tokenizer directory, for every caller that encodes with one (the trainer's extension
base, evaluation's directories).

Not handled here: special tokens that share an id with another (`special_token_aliases`) are left out, as the
directory's plain special-token list has them; `hf_bpe.data.encoders` reads them for token arrays.
"""

from __future__ import annotations

import os

from hf_bpe.encode.tokenizer import Tokenizer
from hf_bpe.formats.hf_directory import load_tokenizer_directory, read_directory_ignore_merges


def load_directory_tokenizer(directory: str | os.PathLike[str]) -> Tokenizer:
    """The `Tokenizer` of a directory saved by hf_bpe or HF (InputError naming the file if it is not one), with the
    directory's pattern and, for a converted tiktoken file, its whole-pre-token lookup (`ignore_merges`)."""
    loaded = load_tokenizer_directory(directory)
    vocab, merges, special_tokens = loaded
    return Tokenizer(vocab, merges, special_tokens, pattern=loaded.pattern,
                     ignore_merges=read_directory_ignore_merges(directory))
