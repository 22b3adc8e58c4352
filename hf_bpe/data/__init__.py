"""Token arrays for training: a dataset's documents encoded into one `.bin` of ids per split, and read back.

>>> from hf_bpe.data import load_tokens
>>> tokens = load_tokens("data", "train")  # doctest: +SKIP
"""

from hf_bpe.data.load import load_tokens, read_metadata
from hf_bpe.data.pipeline import tokenize_dataset

__all__ = ["load_tokens", "read_metadata", "tokenize_dataset"]
