"""Model cards (`README.md`) for saved tokenizer directories, in the HuggingFace Hub format.

A card is a YAML header (library, tags, languages) and markdown: how the tokenizer was trained (corpus, vocab size,
special tokens, time, hardware), how well it compresses each evaluation corpus (UTF-8 bytes per token, measured with
the hf_bpe encoder), a few sentences shown token by token, and how to load it.

    hf-bpe card tok/ --eval-corpus valid.txt --language en

>>> path = write_model_card("tok", eval_corpora=["valid.txt"], language=["en"])  # doctest: +SKIP
>>> path.name  # doctest: +SKIP
'README.md'

`library_name` is `transformers`, not `hf_bpe`: the directory loads with plain `AutoTokenizer.from_pretrained` (its
`tokenizer.json` is a standard fast tokenizer), and the Hub only shows a "Use this model" snippet and library filter
for libraries it knows; an unknown `hf_bpe` would get neither. The `hf_bpe` tag keeps the cards findable.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hf_bpe.common.errors import InputError
from hf_bpe.common.files import PathArg, write_text_atomically

# What `hf-bpe train` records about a training run, next to the tokenizer files; the card reads it.
TRAINING_INFO_FILE = "hf_bpe_training.json"
UNKNOWN = "unknown"
LIBRARY_NAME = "transformers"
TAGS = ("tokenizer", "bpe", "hf_bpe")
SAMPLE_TEXT = "Hello, world! Tokenizers turn text into numbers."

# Sentences shown token by token: always English prose and Python code, plus one per language of the card.
EXAMPLE_SENTENCES = {
    "en": "The quick brown fox jumps over the lazy dog.",
    "code": 'def greet(name: str) -> str:\n    return f"Hello, {name}!"',
    "de": "Die Katze schläft auf dem Sofa, während es draußen regnet.",
    "fr": "Le chat dort sur le canapé pendant qu'il pleut dehors.",
    "ru": "Кошка спит на диване, пока на улице идёт дождь.",
    "ja": "外は雨が降っているので、猫はソファで寝ています。",
    "zh": "外面下着雨，猫在沙发上睡觉。",
}
# Whitespace made visible in the token-by-token view.
VISIBLE_WHITESPACE = str.maketrans({" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"})


@dataclass(frozen=True)
class Compression:
    """How one corpus encodes: its size in UTF-8 bytes, its number of tokens, and bytes per token."""

    path: Path
    num_bytes: int
    num_tokens: int

    @property
    def bytes_per_token(self) -> float:
        return self.num_bytes / self.num_tokens if self.num_tokens else 0.0


def write_model_card(directory: PathArg, *, eval_corpora: Sequence[PathArg] = (),
                     language: Sequence[str] = (), training_info: dict[str, Any] | None = None,
                     title: str | None = None, license: str | None = None, datasets: Sequence[str] | None = None
                     ) -> Path:
    """Write `directory/README.md` (atomically) describing the tokenizer saved there, and return its path.

    `training_info` defaults to `directory/hf_bpe_training.json` (written by `hf-bpe train`); whatever is missing is
    reported as "unknown". Each eval corpus is encoded whole with the hf_bpe encoder (special tokens count as one
    token each) to report its bytes per token. `license` (a Hub license id) and `datasets` (Hub dataset ids) go into
    the metadata header; they default to the `license` and `dataset_names` of the training record.
    """
    directory = Path(directory)
    card = render_model_card(directory, eval_corpora=eval_corpora, language=language, training_info=training_info,
                             title=title, license=license, datasets=datasets)
    return write_text_atomically(directory / "README.md", card)


def render_model_card(directory: PathArg, *, eval_corpora: Sequence[PathArg] = (),
                      language: Sequence[str] = (), training_info: dict[str, Any] | None = None,
                      title: str | None = None, license: str | None = None, datasets: Sequence[str] | None = None
                      ) -> str:
    """The text of the model card of a saved tokenizer directory (see `write_model_card`)."""
    from hf_bpe.encode.tokenizer import Tokenizer
    from hf_bpe.formats.hf_directory import load_tokenizer_directory

    for code in language:
        if not re.fullmatch(r"[a-z]{2,3}(-[A-Za-z0-9]{2,8})*", code):
            raise InputError(f"--language {code!r} is not a language code such as en, de or zh-Hans")
    directory = Path(directory)
    info = read_training_info(directory) if training_info is None else training_info
    license = license if license is not None else info.get("license")
    datasets = list(datasets if datasets is not None else info.get("dataset_names") or [])
    check_card_metadata(license, datasets)
    vocab, merges, special_tokens = load_tokenizer_directory(directory)
    tokenizer = Tokenizer(vocab, merges, special_tokens)
    compressions = [measure_compression(tokenizer, corpus) for corpus in eval_corpora]
    num_byte_tokens = sum(len(token) == 1 for token in vocab.values())
    coverage = ("Any text encodes (there is no unknown token) and decodes back exactly." if num_byte_tokens == 256
                else "Some bytes have no token, so not every text can be encoded.")
    sections = [
        _yaml_header(language, license, datasets),
        f"# {title or 'Byte-level BPE tokenizer'}\n\n"
        f"A GPT-2 style byte-level BPE tokenizer with {len(vocab):,} tokens, trained with hf_bpe: "
        f"{num_byte_tokens} byte tokens, {len(merges):,} merges and {len(special_tokens)} special "
        f"token{'s' if len(special_tokens) != 1 else ''}. {coverage}",
        _training_section(directory, info, tokenizer, special_tokens),
        _compression_section(compressions, info),
        _examples_section(tokenizer, language),
        _usage_section(special_tokens),
    ]
    return "\n\n".join(section.strip("\n") for section in sections) + "\n"


def read_training_info(directory: PathArg) -> dict[str, Any]:
    """`directory/hf_bpe_training.json`, or {} when there is none."""
    path = Path(directory) / TRAINING_INFO_FILE
    if not path.is_file():
        return {}
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InputError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(info, dict):
        raise InputError(f"{path}: expected a JSON object")
    return info


def measure_compression(tokenizer: Any, corpus: PathArg, chunk_chars: int = 4_000_000
                        ) -> Compression:
    """Encode a UTF-8 text file with `tokenizer` (an `hf_bpe.Tokenizer`) and count bytes and tokens.

    The file is cut at special tokens, where encoding splits anyway, so the count equals `len(tokenizer.encode(text))`;
    the documents go to `encode_batch` (all cores) in chunks of about `chunk_chars` characters, so only one chunk's
    ids are alive at a time.
    """
    from hf_bpe.pretokenize import SpecialTokenSplitter

    path = Path(corpus)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: no such eval corpus") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected a text file") from None
    if not data:
        raise InputError(f"{path}: the eval corpus is empty, so there is no compression to report")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: invalid UTF-8 at byte offset {error.start}") from None
    parts = SpecialTokenSplitter(tokenizer.special_tokens).split_keeping(text)
    num_tokens = len(parts) // 2  # the special tokens, one token each
    documents = parts[::2]
    start = 0
    while start < len(documents):
        end, length = start, 0
        while end < len(documents) and length < chunk_chars:
            length += len(documents[end])
            end += 1
        num_tokens += sum(len(ids) for ids in tokenizer.encode_batch(documents[start:end]))
        start = end
    return Compression(path, len(data), num_tokens)


def show_tokens(tokenizer: Any, text: str) -> str:
    """`text` token by token, separated by `|`, whitespace made visible, partial UTF-8 shown as hex bytes.

    >>> from hf_bpe.encode.tokenizer import Tokenizer
    >>> vocab = {i: bytes([i]) for i in range(256)} | {256: b" w", 257: b" wo"}
    >>> show_tokens(Tokenizer(vocab, [(b" ", b"w"), (b" w", b"o")]), "a wow é")
    'a|␣wo|w|␣|<c3>|<a9>'
    """
    pieces = []
    for token_id in tokenizer.encode(text):
        token = tokenizer.id_to_token(token_id)
        try:
            pieces.append(token.decode("utf-8").translate(VISIBLE_WHITESPACE))
        except UnicodeDecodeError:
            pieces.append("".join(f"<{byte:02x}>" for byte in token))
    return "|".join(pieces)


def check_card_metadata(license: str | None, datasets: Sequence[str]) -> None:
    """InputError unless `license` looks like a Hub license id and each dataset like a Hub dataset id.

    >>> check_card_metadata("apache-2.0", ["wikitext", "HuggingFaceFW/fineweb-edu"])
    >>> check_card_metadata("Apache 2", [])
    Traceback (most recent call last):
    ...
    hf_bpe.common.errors.InputError: --license 'Apache 2' is not a Hub license id such as apache-2.0, mit or cc-by-4.0
    """
    if license is not None and not re.fullmatch(r"[a-z0-9][a-z0-9.+-]*", license):
        raise InputError(f"--license {license!r} is not a Hub license id such as apache-2.0, mit or cc-by-4.0")
    for name in datasets:
        if not re.fullmatch(r"[\w.-]+(/[\w.-]+)?", name):
            raise InputError(f"--dataset-name {name!r} is not a Hub dataset id such as wikitext or user/name")


def _yaml_header(language: Sequence[str], license: str | None, datasets: Sequence[str]) -> str:
    from huggingface_hub import ModelCardData

    metadata = ModelCardData(language=list(language) or None, license=license, datasets=list(datasets) or None,
                             library_name=LIBRARY_NAME, tags=list(TAGS))
    return f"---\n{metadata.to_yaml()}\n---"


def _training_section(directory: Path, info: dict[str, Any], tokenizer: Any, special_tokens: Sequence[str]) -> str:
    from hf_bpe.data.encoders import eot_token_id

    files = info.get("corpus_files") or []
    corpus = ", ".join(f"`{Path(str(file.get('path', '?'))).name}`" for file in files) or UNKNOWN
    dataset = info.get("dataset")
    if isinstance(dataset, dict):
        corpus = _describe_dataset(dataset)
    seconds, workers = info.get("training_seconds"), info.get("num_workers")
    time = UNKNOWN if seconds is None else f"{seconds:,.1f} s" + (f" with {workers} worker processes" if workers
                                                                    else "")
    eos_id = eot_token_id(directory, dict(tokenizer.vocab), special_tokens)
    specials = ", ".join(f"`{token}` (id {tokenizer.token_to_id(token)}"
                         + (", end of text / eos)" if tokenizer.token_to_id(token) == eos_id else ")")
                         for token in special_tokens) or "none"
    rows = [
        ("Training corpus", corpus),
        ("Corpus size", _size(info.get("corpus_bytes"))),
        ("Vocabulary size", f"{tokenizer.vocab_size:,}"),
        ("Special tokens", specials),
        *([("Invalid UTF-8", _replacements(info))] if "replaced_bytes" in info else []),
        ("Training time", time),
        ("Hardware", info.get("hardware") or UNKNOWN),
        ("Python", info.get("python") or UNKNOWN),
        ("hf_bpe version", info.get("hf_bpe_version") or UNKNOWN),
        ("Unicode version of the pre-tokenizer", info.get("unicode_version") or UNKNOWN),
        ("Date", info.get("date") or UNKNOWN),
    ]
    table = "\n".join(f"| {name} | {_table_cell(value)} |" for name, value in rows)
    return ("## Training\n\nPre-tokenization is the GPT-2 regex; documents are split at the special tokens, which are "
            f"never merged.\n\n| | |\n|---|---|\n{table}")


def _describe_dataset(dataset: dict[str, Any]) -> str:
    """'`name` (config `c`, files `a.jsonl`), split `train`, column `text`: 1,234 rows (one document each)'."""
    details = []
    if dataset.get("config"):
        details.append(f"config `{dataset['config']}`")
    if dataset.get("data_files"):
        details.append("files " + ", ".join(f"`{Path(str(name)).name}`" for name in dataset["data_files"]))
    rows = dataset.get("num_rows")
    return (f"dataset `{dataset.get('name', UNKNOWN)}`" + (f" ({', '.join(details)})" if details else "")
            + f", split `{dataset.get('split', UNKNOWN)}`, column `{dataset.get('text_column', UNKNOWN)}`: "
            + (f"{rows:,} rows, one document each" if isinstance(rows, int) else "unknown number of rows"))


def _replacements(info: dict[str, Any]) -> str:
    first = info.get("first_replacement")
    if not info.get("replaced_bytes") or not isinstance(first, dict):
        return "none (read with --errors replace)"
    return (f"{info['replaced_bytes']:,} bytes replaced with U+FFFD (--errors replace), the first at "
            f"`{Path(str(first.get('path'))).name}` byte offset {first.get('byte_offset')}")


def _compression_section(compressions: Sequence[Compression], info: dict[str, Any]) -> str:
    if not compressions:
        return "## Compression\n\nNo evaluation corpus was given (`hf-bpe card DIR --eval-corpus FILE`)."
    training_names = {Path(str(file.get("path", ""))).name for file in info.get("corpus_files") or []}
    rows = []
    for result in compressions:
        name = _table_cell(f"`{result.path.name}`") + (" (training corpus)" if result.path.name in training_names
                                                       else "")
        rows.append(f"| {name} | {result.num_bytes:,} | {result.num_tokens:,} | {result.bytes_per_token:.3f} |")
    return ("## Compression\n\nUTF-8 bytes per token when each file is encoded whole with the hf_bpe encoder "
            "(special tokens count as one token; higher is better).\n\n"
            "| Corpus | Bytes | Tokens | Bytes per token |\n|---|---:|---:|---:|\n" + "\n".join(rows))


def _examples_section(tokenizer: Any, language: Sequence[str]) -> str:
    keys = ["en", "code", *[code for code in dict.fromkeys(language) if code in EXAMPLE_SENTENCES and code != "en"]]
    blocks = []
    for key in keys:
        text = EXAMPLE_SENTENCES[key]
        ids = tokenizer.encode(text)
        blocks.append(f"{json.dumps(text, ensure_ascii=False)}  ({len(ids)} tokens)\n{show_tokens(tokenizer, text)}\n"
                      f"{ids}")
    return ("## Example tokenizations\n\nEach text, then its tokens separated by `|` (`␣` is a space, `↵` a newline, "
            "`<e6>` a byte of a character split across tokens), then the ids.\n\n```text\n"
            + "\n\n".join(blocks) + "\n```")


def _usage_section(special_tokens: Sequence[str]) -> str:
    specials = json.dumps(list(special_tokens), ensure_ascii=False)
    return f'''## Usage

With transformers (`tokenizer.json` is a standard fast tokenizer, so hf_bpe need not be installed):

```python
from transformers import AutoTokenizer

directory = "."  # this folder; for a copy on the Hub use its repo id, e.g. "user/tokenizer-name"
tokenizer = AutoTokenizer.from_pretrained(directory)
print(tokenizer({SAMPLE_TEXT!r})["input_ids"])
```

With hf_bpe (`pip install hf_bpe`): its own encoder, or the same as a transformers tokenizer (`HFBPETokenizer`, also
what `AutoTokenizer.from_pretrained(directory, trust_remote_code=True)` loads):

```python
import os

from hf_bpe import HFBPETokenizer, Tokenizer

directory = "."  # a local folder (from the Hub: huggingface_hub.snapshot_download("user/tokenizer-name"))
tokenizer = Tokenizer.from_files(os.path.join(directory, "vocab.json"), os.path.join(directory, "merges.txt"),
                                 special_tokens={specials})
ids = tokenizer.encode({SAMPLE_TEXT!r})
print(ids)
assert tokenizer.decode(ids) == {SAMPLE_TEXT!r}

hf_tokenizer = HFBPETokenizer.from_pretrained(directory)
print(hf_tokenizer({SAMPLE_TEXT!r})["input_ids"])
```'''


def _table_cell(value: Any) -> str:
    """GitHub-flavoured tables split cells at every "|", even inside code spans, unless it is escaped."""
    return str(value).replace("|", "\\|")


def _size(num_bytes: Any) -> str:
    """'12.3 MB (12,345,678 bytes)' for a byte count, "unknown" for anything else."""
    if not isinstance(num_bytes, int) or isinstance(num_bytes, bool):
        return UNKNOWN
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if num_bytes >= scale:
            return f"{num_bytes / scale:.1f} {unit} ({num_bytes:,} bytes)"
    return f"{num_bytes:,} bytes"


