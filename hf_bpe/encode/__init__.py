"""Encoding: `Tokenizer` applies the merges, in rank order, to each pre-token, with a cache of pre-tokens' ids."""

from hf_bpe.encode.tokenizer import Tokenizer

__all__ = ["Tokenizer"]
