"""The `hf-bpe` command: `train`, `tokenize-dataset`, `card`, `eval`, `show`, `convert`, `export-tiktoken`."""

from hf_bpe.cli.main import main

__all__ = ["main"]
