"""The import path that `hf_bpe_tokenizer.py` in directories saved by hf_bpe 0.1 uses; kept so they keep loading.

Directories saved since 0.2 import `HFBPETokenizer` from `hf_bpe` itself.
"""

from hf_bpe.hf.tokenizer import HFBPETokenizer

__all__ = ["HFBPETokenizer"]
