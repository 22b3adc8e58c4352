"""tiktoken's public names, backed by hf_bpe (see the package above)."""

from .core import Encoding
from .model import encoding_for_model, encoding_name_for_model
from .registry import get_encoding, list_encoding_names

HF_BPE_SHIM = True  # what tests/encode/tiktoken_shim/hf_bpe_shim_check.py looks for

__all__ = ["Encoding", "encoding_for_model", "encoding_name_for_model", "get_encoding", "list_encoding_names"]
