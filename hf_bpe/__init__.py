"""hf_bpe: train byte-level BPE tokenizers exactly and fast, and use them across the HuggingFace ecosystem.

>>> from hf_bpe import train_bpe, Tokenizer
>>> vocab, merges = train_bpe(["corpus.txt"], vocab_size=1000, special_tokens=["<|endoftext|>"])  # doctest: +SKIP
>>> tokenizer = Tokenizer(vocab, merges, special_tokens=["<|endoftext|>"])  # doctest: +SKIP
>>> save_tokenizer_directory("my-tokenizer", vocab, merges, ["<|endoftext|>"])  # doctest: +SKIP

Other pre-tokenization patterns: `pattern=` a name of `PATTERNS` or regex text, for training and encoding alike.

>>> sorted(PATTERNS)
['cl100k', 'gpt2', 'gpt4', 'llama3', 'o200k']
>>> vocab, merges = train_bpe(["corpus.txt"], 1000, ["<|endoftext|>"], pattern="cl100k")  # doctest: +SKIP
>>> tokenizer = Tokenizer(vocab, merges, ["<|endoftext|>"], pattern="cl100k")  # doctest: +SKIP

Extending a tokenizer (every base id and merge unchanged, new merges learned on new text, new ids after the base's):

>>> vocab, merges = extend_bpe(tokenizer, ["new_text.txt"], tokenizer.vocab_size + 8000)  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hf_bpe._version import __version__
from hf_bpe.encode import Tokenizer
from hf_bpe.formats.hf_directory import save_tokenizer_directory
from hf_bpe.pretokenize.patterns import PATTERNS
from hf_bpe.train import train_bpe, train_bpe_from_counts, train_bpe_from_iterator
from hf_bpe.train.starts.extend import extend_bpe, extend_bpe_from_counts, extend_bpe_from_iterator

if TYPE_CHECKING:
    from hf_bpe.hf.tokenizer import HFBPETokenizer

__all__ = ["PATTERNS", "HFBPETokenizer", "Tokenizer", "extend_bpe", "extend_bpe_from_counts",
           "extend_bpe_from_iterator", "save_tokenizer_directory", "train_bpe", "train_bpe_from_counts",
           "train_bpe_from_iterator", "__version__"]


def __getattr__(name: str) -> Any:
    # transformers takes seconds to import, so the HF adapter is loaded only when asked for.
    if name == "HFBPETokenizer":
        from hf_bpe.hf.tokenizer import HFBPETokenizer

        return HFBPETokenizer
    raise AttributeError(f"module 'hf_bpe' has no attribute {name!r}")
