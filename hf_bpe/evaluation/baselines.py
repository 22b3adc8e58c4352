"""The tokenizers that `hf-bpe eval`, `hf-bpe card` and `hf-bpe show` load: hf_bpe directories and baselines.

A tokenizer is named on the command line by one of:

- a directory saved by hf_bpe (or any directory with GPT-2 style `vocab.json`, `merges.txt`, `tokenizer.json` and
  `tokenizer_config.json`, as `hf_bpe.formats.hf_directory.load_tokenizer_directory` reads it);
- `gpt2`: GPT-2's tokenizer, from a copy of its `vocab.json` and `merges.txt` shipped in this package
  (`hf_bpe/evaluation/gpt2_files`, 1.5 MB), so that it works offline;
- `cl100k=PATH` or `o200k=PATH`: GPT-4's or GPT-4o's tokenizer from its tiktoken file, which the user gives
  (`cl100k_base.tiktoken`, `o200k_base.tiktoken`), with tiktoken's pattern and special tokens, encoded by tiktoken
  (hf_bpe.evaluation.tiktoken_engine; `pip install tiktoken`); hf_bpe never downloads anything. A path to a file
  named `cl100k_base*.tiktoken` or `o200k_base*.tiktoken` works too;
- a baseline directory: any HuggingFace tokenizer directory (its `tokenizer.json`: Qwen's, Llama 3's, ...),
  encoded by the `tokenizers` library itself (hf_bpe.evaluation.hf_tokenizers).

Each `NamedTokenizer` says which engine encodes it (`engine`): "hf_bpe" (hf_bpe's encoder: its own directories
and `gpt2`, whose vocab.json and merges.txt are the GPT-2 format hf_bpe reads and encodes exactly), "tokenizers" or
"tiktoken".
`hf-bpe show DIR` (`resolve_tokenizer`) encodes with hf_bpe a directory that hf_bpe reads exactly, and any other
directory with a `tokenizer.json` with `tokenizers`.

>>> gpt2 = resolve_tokenizer("gpt2")
>>> gpt2.name, gpt2.tokenizer.vocab_size, gpt2.tokenizer.encode("Hello world")
('gpt2', 50257, [15496, 995])

Not handled: other tiktoken files (Llama 3's, say) as baselines by name: convert them into a directory first
(`hf-bpe convert FILE --pattern ... --out DIR`) and give the directory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hf_bpe.common.errors import InputError

GPT2_FILES = Path(__file__).resolve().with_name("gpt2_files")
GPT2_SPECIAL_TOKENS = ("<|endoftext|>",)
#: Baselines that come from a tiktoken file the user gives, and the start of the file's usual name.
TIKTOKEN_BASELINES = {"cl100k": "cl100k_base", "o200k": "o200k_base"}
#: Their special tokens and ids, as tiktoken defines them (tiktoken_ext/openai_public.py, tiktoken 0.14).
TIKTOKEN_SPECIAL_TOKENS = {
    "cl100k": {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259, "<|fim_suffix|>": 100260,
               "<|endofprompt|>": 100276},
    "o200k": {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
}
BASELINE_NAMES = ("gpt2", *TIKTOKEN_BASELINES)


@dataclass(frozen=True)
class NamedTokenizer:
    """A tokenizer (`hf_bpe.Tokenizer`) and the name it goes by in tables, plots and pages."""

    name: str
    tokenizer: Any
    is_baseline: bool = False

    @property
    def engine(self) -> str:
        """The library that encodes it: "hf_bpe", "tokenizers" for another model's tokenizer.json, or "tiktoken" for a
        rank file."""
        return getattr(self.tokenizer, "engine", "hf_bpe")


def gpt2_tokenizer() -> Any:
    """GPT-2's tokenizer (`<|endoftext|>` = 50256) from the copy of its files shipped in the package."""
    from hf_bpe.encode.tokenizer import Tokenizer

    return Tokenizer.from_files(GPT2_FILES / "vocab.json", GPT2_FILES / "merges.txt", list(GPT2_SPECIAL_TOKENS))


def load_directory_tokenizer(directory: str | os.PathLike[str]) -> Any:
    """The `hf_bpe.Tokenizer` of a saved tokenizer directory (InputError naming the file if it is not one)."""
    from hf_bpe.encode.directory import load_directory_tokenizer as load  # imported when needed: start-up stays light

    return load(directory)


def resolve_directory(directory: str) -> NamedTokenizer:
    """The tokenizer of a saved directory, named as `directory_name` names it."""
    return NamedTokenizer(directory_name(directory), load_directory_tokenizer(directory))


def resolve_tokenizer(spec: str) -> NamedTokenizer:
    """The tokenizer named by `spec`: a directory (which wins over a baseline of the same name), or a baseline. A
    directory that hf_bpe does not read exactly (another model's, with a normalizer, say) is encoded by `tokenizers`
    from its tokenizer.json.

    >>> resolve_tokenizer("no/such/dir")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    hf_bpe.common.errors.InputError: no/such/dir: not a tokenizer directory, nor a baseline (gpt2, ...)
    """
    if not Path(spec).is_dir():
        return resolve_baseline(spec)
    try:
        return resolve_directory(spec)
    except InputError:
        if not (Path(spec) / "tokenizer.json").is_file():
            raise
    return NamedTokenizer(directory_name(spec), _tokenizers_engine(spec))


def _tokenizers_engine(directory: str) -> Any:
    from hf_bpe.evaluation.hf_tokenizers import load_tokenizer_json

    return load_tokenizer_json(directory)


def resolve_baseline(spec: str) -> NamedTokenizer:
    """The baseline named by `spec`: `gpt2`, `cl100k=PATH`, `o200k=PATH`, a `.tiktoken` path, or a directory (encoded
    by `tokenizers` from its tokenizer.json)."""
    name, _, path = spec.partition("=")
    if spec == "gpt2":
        return NamedTokenizer("gpt2", gpt2_tokenizer(), is_baseline=True)
    if spec in TIKTOKEN_BASELINES:
        raise InputError(f"baseline {spec} needs its tiktoken file: {spec}=PATH (for example {spec}="
                         f"{TIKTOKEN_BASELINES[spec]}.tiktoken); hf_bpe does not download it")
    if name in TIKTOKEN_BASELINES and path:
        return _tiktoken_baseline(name, Path(path))
    if spec.endswith(".tiktoken"):
        for known, file_name in TIKTOKEN_BASELINES.items():
            if Path(spec).name.startswith(file_name):
                return _tiktoken_baseline(known, Path(spec))
        raise InputError(f"{spec}: cannot tell which tokenizer this tiktoken file is from its name; name it: "
                         f"{' or '.join(f'{known}={spec}' for known in TIKTOKEN_BASELINES)}")
    if Path(spec).is_dir():
        return NamedTokenizer(directory_name(spec), _tokenizers_engine(spec), is_baseline=True)
    raise InputError(f"{spec}: not a tokenizer directory, nor a baseline (gpt2, cl100k=PATH, o200k=PATH)")


def _tiktoken_baseline(name: str, path: Path) -> NamedTokenizer:
    """cl100k or o200k from its tiktoken file, with tiktoken's pattern and special tokens, encoded by tiktoken."""
    from hf_bpe.evaluation.tiktoken_engine import TiktokenEngine, require_tiktoken

    require_tiktoken()  # before reading anything
    if not path.is_file():
        raise InputError(f"{path}: no such file (the tiktoken file of {name})")
    return NamedTokenizer(name, TiktokenEngine(name, path, TIKTOKEN_SPECIAL_TOKENS[name]), is_baseline=True)


def directory_name(spec: str) -> str:
    """How a directory is named in tables: as given, without a trailing slash ("." becomes the folder's name).

    >>> directory_name("runs/tok/")
    'runs/tok'
    """
    stripped = spec.rstrip("/\\") or spec
    return Path(stripped).resolve().name if stripped in (".", "..") else stripped
