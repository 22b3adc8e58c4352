"""Model cards (`README.md`) for saved tokenizer directories, in the HuggingFace Hub format.

A card is a YAML header (library, tags, languages) and markdown: how the tokenizer was trained (corpus, vocab size,
special tokens, time, hardware), how well it compresses each evaluation corpus against baselines such as GPT-2's
(UTF-8 bytes per token, tokens per word, share of the vocabulary used: `hf_bpe.evaluation.evaluate`), its
under-trained tokens (`hf_bpe.evaluation.token_counts`), plots (`hf_bpe.evaluation.plots`, PNG files beside the card,
shown the way the Hub shows images: a relative link), a few sentences shown token by token, and how to load it.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hf_bpe.common.errors import InputError
from hf_bpe.common.files import PathArg, write_text_atomically
from hf_bpe.evaluation.card_sources import source_rows
from hf_bpe.evaluation.viewer import show_tokens

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
# The baselines a card compares with, the name of the card's own tokenizer in its tables and plots, and its plots.
DEFAULT_BASELINES = ("gpt2",)
THIS_TOKENIZER = "this tokenizer"
PLOT_FILES = {"compression": "bytes_per_token.png", "lengths": "token_lengths.png", "coverage": "coverage.png",
              "languages": "languages.png"}


@dataclass(frozen=True)
class CardData:
    """What a card shows, gathered and checked before anything is drawn or written."""

    directory: Path
    info: dict[str, Any]
    tokenizer: Any
    merges: int
    token_counts: np.ndarray | None
    evaluations: list[Any]  # hf_bpe.evaluation.evaluate.Evaluation: this tokenizer and the baselines on each corpus
    language: Sequence[str]
    license: str | None
    datasets: list[str]
    title: str | None
    languages: Any = None  # hf_bpe.evaluation.languages.LanguageReport of the named corpora, if any

    @property
    def special_ids(self) -> set[int]:
        return {self.tokenizer.token_to_id(token) for token in self.tokenizer.special_tokens}


def write_model_card(directory: PathArg, *, eval_corpora: Sequence[PathArg] = (),
                     eval_languages: Mapping[str, PathArg] | None = None, parity_reference: str | None = None,
                     language: Sequence[str] = (), training_info: dict[str, Any] | None = None,
                     title: str | None = None, license: str | None = None, datasets: Sequence[str] | None = None,
                     baselines: Sequence[str] = DEFAULT_BASELINES, plots: bool = True, progress: bool | None = False,
                     tokenizer: Any = None, token_counts: np.ndarray | None = None) -> Path:
    """Write `directory/README.md` (atomically) describing the tokenizer saved there, and return its path.

    `training_info` defaults to `directory/hf_bpe_training.json` (written by `hf-bpe train`); whatever is missing is
    reported as "unknown". Each eval corpus is encoded with the hf_bpe encoder and with each of `baselines` (names
    as `hf_bpe.evaluation.baselines.resolve_baseline` takes them) to report bytes per token, tokens per word and the
    share of the vocabulary used (`hf_bpe.evaluation.evaluate`); so are the `eval_languages` (language name -> a
    file of parallel text), which also get a section on each language's premium over `parity_reference`'s (default:
    the first) and the fairness figures (`hf_bpe.evaluation.languages`). The under-trained tokens come from the
    token counts that `hf-bpe train` stores (`hf_bpe.evaluation.token_counts`). With `plots` and matplotlib
    installed, PNG plots are drawn into the directory and shown in the card; without matplotlib the card says how to
    get them.
    `license` (a Hub license id) and `datasets` (Hub dataset ids) go into the metadata header; they default to the
    `license` and `dataset_names` of the training record. `tokenizer` (an `hf_bpe.Tokenizer`) and `token_counts`
    are what the directory holds, when the caller has them at hand (`hf-bpe train`, which has just saved them):
    by default they are read from the directory.
    """
    from hf_bpe.evaluation.plots import matplotlib_available

    data = gather_card_data(directory, eval_corpora=eval_corpora, eval_languages=eval_languages,
                            parity_reference=parity_reference, language=language, training_info=training_info,
                            title=title, license=license, datasets=datasets, baselines=baselines, progress=progress,
                            tokenizer=tokenizer, token_counts=token_counts)
    images = _draw_plots(data) if plots and matplotlib_available() else None
    return write_text_atomically(data.directory / "README.md", _render(data, images, plots))


def render_model_card(directory: PathArg, **options: Any) -> str:
    """The text of the model card of a saved tokenizer directory (`write_model_card`'s options), without plots."""
    return _render(gather_card_data(directory, **options), None, False)


def gather_card_data(directory: PathArg, *, eval_corpora: Sequence[PathArg] = (),
                     eval_languages: Mapping[str, PathArg] | None = None, parity_reference: str | None = None,
                     language: Sequence[str] = (),
                     training_info: dict[str, Any] | None = None, title: str | None = None,
                     license: str | None = None, datasets: Sequence[str] | None = None,
                     baselines: Sequence[str] = DEFAULT_BASELINES, progress: bool | None = False,
                     tokenizer: Any = None, token_counts: np.ndarray | None = None) -> CardData:
    """Check the options and the directory, then evaluate the corpora (the long part) for `write_model_card`; the
    tokenizer and the token counts are read from the directory unless given."""
    from hf_bpe.evaluation.baselines import NamedTokenizer, load_directory_tokenizer, resolve_baseline
    from hf_bpe.evaluation.token_counts import load_token_counts

    for code in language:
        if not re.fullmatch(r"[a-z]{2,3}(-[A-Za-z0-9]{2,8})*", code):
            raise InputError(f"--language {code!r} is not a language code such as en, de or zh-Hans")
    names = [None] * len(eval_corpora) + list(eval_languages or {})
    corpora = [*eval_corpora, *(eval_languages or {}).values()]
    if corpora or parity_reference is not None:  # evaluation (and its regex) is imported only to evaluate
        from hf_bpe.evaluation.languages import check_parity_reference, language_report

        check_parity_reference(parity_reference, names, "--eval-corpus")
    directory = Path(directory)
    info = read_training_info(directory) if training_info is None else training_info
    license = license if license is not None else info.get("license")
    datasets = list(datasets if datasets is not None else info.get("dataset_names") or [])
    check_card_metadata(license, datasets)
    if tokenizer is None:
        tokenizer = load_directory_tokenizer(directory)
    if token_counts is None:
        token_counts = load_token_counts(directory, info, tokenizer.vocab_size)
    evaluations = []
    if corpora:
        from hf_bpe.evaluation.evaluate import check_corpora, evaluate

        check_corpora(corpora)
        compared = [NamedTokenizer(THIS_TOKENIZER, tokenizer), *map(resolve_baseline, dict.fromkeys(baselines))]
        evaluations = evaluate(compared, corpora, progress=progress)
    return CardData(directory, info, tokenizer, len(tokenizer.merges), token_counts, evaluations, language, license,
                    datasets, title, language_report(evaluations, names, parity_reference) if corpora else None)


def _render(data: CardData, images: list[tuple[str, str]] | None, plots_asked: bool) -> str:
    """The card's text; `images` are the (file, description) of the plots drawn, None if none were drawn."""
    from hf_bpe.evaluation.token_counts import under_trained_section

    vocab, special_ids = data.tokenizer.vocab, data.special_ids  # a property: made once, not once per token
    num_byte_tokens = sum(len(token) == 1 for token_id, token in vocab.items() if token_id not in special_ids)
    coverage = ("Any text encodes (there is no unknown token) and decodes back exactly." if num_byte_tokens == 256
                else "Some bytes have no token, so not every text can be encoded.")
    num_special = len(data.tokenizer.special_tokens)
    sections = [
        _yaml_header(data.language, data.license, data.datasets),
        f"# {data.title or 'Byte-level BPE tokenizer'}\n\n"
        f"A GPT-2 style byte-level BPE tokenizer with {len(vocab):,} tokens, trained with hf_bpe: "
        f"{num_byte_tokens} byte tokens, {data.merges:,} merges and {num_special} special "
        f"token{'s' if num_special != 1 else ''}. {coverage}",
        _training_section(data.directory, data.info, data.tokenizer, data.tokenizer.special_tokens),
        _compression_section(data.evaluations, data.info),
        *([] if data.languages is None else ["## Languages\n\n" + data.languages.markdown()]),
        under_trained_section(data.token_counts, vocab, data.special_ids, _extension_ids(data)),
        _plots_section(images, plots_asked),
        _examples_section(data.tokenizer, data.language),
        _usage_section(data.tokenizer.special_tokens, data.tokenizer.pattern),
    ]
    return "\n\n".join(section.strip("\n") for section in sections) + "\n"


def _extension_ids(data: CardData) -> list[int] | None:
    """The ids of the tokens an extension learned (the training record's `extends`), None for other tokenizers."""
    from hf_bpe.evaluation.token_counts import new_token_ids

    extends = data.info.get("extends")
    if not isinstance(extends, dict) or not isinstance(extends.get("merges"), int):
        return None
    return new_token_ids(data.tokenizer.vocab, data.tokenizer.merges, extends["merges"])


def _draw_plots(data: CardData) -> list[tuple[str, str]]:
    """Draw the card's plots into its directory: [(file name, description)]."""
    from hf_bpe.evaluation import plots

    images = []
    if data.evaluations:
        plots.plot_bytes_per_token(data.evaluations, data.directory / PLOT_FILES["compression"],
                                   title="Bytes per token: this tokenizer and baselines")
        images.append((PLOT_FILES["compression"], "Bytes per token on each evaluation corpus, against the baselines"))
    if data.languages is not None:
        data.languages.plot(data.directory / PLOT_FILES["languages"])
        images.append((PLOT_FILES["languages"], "Each language's tokens over the reference language's"))
    plots.plot_token_lengths(data.tokenizer.vocab, sorted(data.special_ids), data.directory / PLOT_FILES["lengths"])
    images.append((PLOT_FILES["lengths"], "How many tokens have each length in bytes"))
    counts = {"training corpus": data.token_counts} if data.token_counts is not None else {}
    counts.update((result.corpus.path.name, result.token_counts) for result in data.evaluations
                  if result.tokenizer.name == THIS_TOKENIZER)
    if counts:
        plots.plot_coverage(counts, data.directory / PLOT_FILES["coverage"])
        images.append((PLOT_FILES["coverage"], "Share of each corpus covered by its k most frequent tokens"))
    return images


def _plots_section(images: list[tuple[str, str]] | None, plots_asked: bool) -> str:
    from hf_bpe.evaluation.plots import PLOTS_HINT

    if images:
        return "## Plots\n\n" + "\n\n".join(f"![{description}]({name})" for name, description in images)
    if plots_asked:
        return (f"## Plots\n\nPlots need matplotlib, which was not installed when this card was written: `{PLOTS_HINT}`"
                ", then `hf-bpe card DIR --eval-corpus FILE` draws them.")
    return ("## Plots\n\nNo plots yet: `hf-bpe card DIR --eval-corpus FILE` draws bytes per token against baselines, "
            f"token lengths and corpus coverage (with matplotlib: `{PLOTS_HINT}`).")


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
    """The card's metadata as `huggingface_hub.ModelCardData.to_yaml` lays it out (keys sorted, lists as "- item"),
    written here: importing huggingface_hub and its YAML library took most of the card's time in `hf-bpe train`.

    >>> print(_yaml_header(["en", "no"], "mit", []))
    ---
    language:
    - en
    - "no"
    library_name: transformers
    license: mit
    tags:
    - tokenizer
    - bpe
    - hf_bpe
    ---
    """
    fields = {"datasets": list(datasets), "language": list(language), "library_name": LIBRARY_NAME,
              "license": license, "tags": list(TAGS)}
    lines = ["---"]
    for key, value in fields.items():
        if isinstance(value, list) and value:
            lines += [f"{key}:", *(f"- {_yaml_scalar(item)}" for item in value)]
        elif isinstance(value, str):
            lines.append(f"{key}: {_yaml_scalar(value)}")
    return "\n".join([*lines, "---"])


def _yaml_scalar(text: str) -> str:
    """`text` as a YAML string: plain when no YAML reader could take it for anything else, else JSON-quoted (which
    YAML reads as the same string): values that look like numbers, or like YAML 1.1's booleans and null.

    >>> _yaml_scalar("apache-2.0"), _yaml_scalar("no"), _yaml_scalar("1.0"), _yaml_scalar("user/data.set")
    ('apache-2.0', '"no"', '"1.0"', 'user/data.set')
    """
    plain = re.fullmatch(r"[A-Za-z][\w./+-]*", text) and text.lower() not in _YAML_WORDS
    return text if plain else json.dumps(text)


# Plain scalars that YAML 1.1 readers (PyYAML, the Hub's) take for booleans or null.
_YAML_WORDS = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null"})


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
        *source_rows(info),  # named sources: their sizes, weights, parity-aware training
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
    pattern = _pattern_of(info, tokenizer)
    rows.insert(4, ("Pre-tokenization pattern", pattern))
    stages = _superword_stages(info, tokenizer)
    if stages:
        rows.insert(5, ("SuperBPE stages", stages))
    table = "\n".join(f"| {name} | {_table_cell(value)} |" for name, value in rows)
    return (f"## Training\n\nPre-tokenization is the {pattern} pattern; documents are split at the special tokens, "
            f"which are never merged.\n\n| | |\n|---|---|\n{table}")


def _pattern_of(info: dict[str, Any], tokenizer: Any) -> str:
    """The pattern for the card: as the training record names it (a preset name or the whole regex), else the
    tokenizer's (from its tokenizer.json)."""
    from hf_bpe.formats.hf_directory import describe_pattern
    from hf_bpe.pretokenize import resolve_pattern

    recorded = info.get("pattern")
    return describe_pattern(resolve_pattern(recorded) if isinstance(recorded, str) else tokenizer.pattern)


def _superword_stages(info: dict[str, Any], tokenizer: Any = None) -> str:
    """Which ids each SuperBPE stage made, from the training record's `superword` entry ('' without one). With
    `extends` too (superwords on a base's first tokens: `hf-bpe train --extend BASE --superword-from N`), stage 2
    made the `tokenizer`'s tokens of the merges after the base's kept ones.

    >>> _superword_stages({"superword": {"from": 1000, "stage_1_pattern": "gpt2", "stage_1_merges": 743},
    ...                    "vocab_size": 1200, "special_tokens": ["<|endoftext|>"]})  # doctest: +ELLIPSIS
    'ids 256-998: stage 1 (subwords, `gpt2` pattern, up to 1,000 tokens); ids 999-1,198: stage 2 (superwords, ...'
    >>> from hf_bpe import Tokenizer
    >>> _superword_stages({"superword": {"from": 257, "stage_1_pattern": "gpt2", "stage_1_merges": 1},
    ...                    "extends": {"base": "base", "vocab_size": 258, "merges": 1}}, Tokenizer(
    ...     {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"ab "}, [(b"a", b"b"), (b"ab", b" ")]))
    ...     # doctest: +ELLIPSIS
    'stage 1: the first 257 tokens of `base` (... first 1 merges and special tokens; ids 0-256, ...); ids 257-257: ...'
    """
    superword = info.get("superword")
    if not isinstance(superword, dict) or not isinstance(superword.get("stage_1_merges"), int):
        return ""
    merges, extends = superword["stage_1_merges"], info.get("extends")
    if isinstance(extends, dict) and tokenizer is not None:
        from hf_bpe.evaluation.token_counts import new_token_ids

        new_ids = new_token_ids(tokenizer.vocab, tokenizer.merges, extends["merges"])
        stage_two = range(min(new_ids), max(new_ids) + 1) if new_ids else range(0)
        where = ("every id as it is there" if superword.get("from") == extends.get("vocab_size")
                 else f"ids 0-{255 + merges:,}, the special tokens last")
        stage_one = (f"stage 1: the first {superword.get('from', 0):,} tokens of `{extends.get('base')}` (subwords, "
                     f"`{superword.get('stage_1_pattern')}` pattern: its bytes, first {merges:,} merges and special "
                     f"tokens; {where})")
    else:
        stage_two = range(256 + merges, info.get("vocab_size", 0) - len(info.get("special_tokens") or []))
        stage_one = (f"ids 256-{255 + merges:,}: stage 1 (subwords, `{superword.get('stage_1_pattern')}` pattern, up "
                     f"to {superword.get('from', 0):,} tokens)")
    return f"{stage_one}; " + (f"ids {stage_two.start:,}-{stage_two.stop - 1:,}: stage 2 (superwords, which may "
                               f"bridge spaces, `{info.get('pattern', 'superword')}` pattern)" if stage_two
                               else "no stage-2 tokens")


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


def _compression_section(evaluations: Sequence[Any], info: dict[str, Any]) -> str:
    if not evaluations:
        return "## Compression\n\nNo evaluation corpus was given (`hf-bpe card DIR --eval-corpus FILE`)."
    training_names = {Path(str(file.get("path", ""))).name for file in info.get("corpus_files") or []}
    baselines = list(dict.fromkeys(result.tokenizer.name for result in evaluations if result.tokenizer.is_baseline))
    rows = []
    for result in evaluations:
        if result.tokenizer.name != THIS_TOKENIZER:
            continue
        corpus = result.corpus
        name = _table_cell(f"`{corpus.path.name}`") + (" (training corpus)" if corpus.path.name in training_names
                                                       else "")
        compared = {other.tokenizer.name: other.bytes_per_token for other in evaluations
                    if other.corpus.path == corpus.path}
        rows.append(f"| {name} | {corpus.num_bytes:,} | {result.num_tokens:,} | {result.bytes_per_token:.3f} | "
                    + "".join(f"{compared[baseline]:.3f} | " for baseline in baselines)
                    + f"{result.tokens_per_word:.3f} | {result.share_used:.1%} |")
    return ("## Compression\n\nUTF-8 bytes per token when each file is encoded with the hf_bpe encoder (special "
            "tokens count as one token; higher is better), and the same for "
            + (", ".join(f"`{name}`" for name in baselines) or "no baseline")
            + "; tokens per word (whitespace-separated words; each Chinese, Japanese or Thai character counts as a "
            "word); and the share of the vocabulary that occurs in the file (`hf-bpe eval` lists the tokens that "
            "do not).\n\n"
            "| Corpus | Bytes | Tokens | Bytes per token | "
            + "".join(f"{_table_cell(name)} bytes per token | " for name in baselines)
            + "Tokens per word | Vocabulary used |\n|---|" + "---:|" * (5 + len(baselines)) + "\n" + "\n".join(rows))


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


def _usage_section(special_tokens: Sequence[str], pattern: str | None = None) -> str:
    from hf_bpe.pretokenize import GPT2_PATTERN, preset_name

    specials = json.dumps(list(special_tokens), ensure_ascii=False)
    if pattern is not None and pattern != GPT2_PATTERN:  # vocab.json and merges.txt do not hold the pattern
        specials += f", pattern={preset_name(pattern) or pattern!r}"
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


