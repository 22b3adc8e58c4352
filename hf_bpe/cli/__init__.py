"""The `hf-bpe` command: `train`, `tokenize-dataset`, `card`."""

from hf_bpe.cli.main import main

__all__ = ["main"]
