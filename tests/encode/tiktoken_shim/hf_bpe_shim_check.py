"""A pytest plugin (`-p hf_bpe_shim_check`) that stops the run unless `import tiktoken` gives the shim: otherwise
tiktoken's tests would test tiktoken, and pass."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    import tiktoken

    if not getattr(tiktoken, "HF_BPE_SHIM", False):
        raise pytest.UsageError(f"`import tiktoken` gives {tiktoken.__file__}, not the hf_bpe shim")
