"""How fairly tokenizers serve languages: the per-language view of `hf-bpe eval` and of the model card.

    hf-bpe eval tok/ --corpus en=en.txt de=de.txt hi=hi.txt ja=ja.txt --baseline gpt2 --parity-reference en

A corpus given as `NAME=PATH` is one language's text; the named corpora are taken to be parallel (translations of the
same text, as FLORES+ or the Debian handbook are). Per language and tokenizer the report gives:

- bytes per token (UTF-8 bytes over tokens, as `hf_bpe.evaluation.evaluate` counts them);
- tokens per word, for a language written with spaces: whitespace other than line breaks (`count_spaces`) is at
  least 1 in 20 of its characters (`MIN_SPACE_SHARE`; English, Hindi or Finnish text has 1 in 6 to 1 in 9). The words
  are those `hf-bpe eval` counts (whitespace-separated). Text written without spaces between words (Chinese,
  Japanese, Thai, Khmer, Lao, Burmese, Tibetan), whose spaces, if any, separate phrases, gets "n/a";
- the premium: its tokens over the reference language's, with the same tokenizer (Petrov et al., "Language Model
  Tokenizers Introduce Unfairness Between Languages", 2023). The reference is `--parity-reference NAME`, by default
  the first named corpus.

Then one fairness figure per tokenizer: the most tokens any language takes over the fewest (1 is parity). On text
that is not parallel, premiums and fairness compare different contents and mean little.

>>> parse_corpus_arguments(["en=a.txt", "b.txt"], "--corpus")
[CorpusArgument(name='en', path=PosixPath('a.txt')), CorpusArgument(name=None, path=PosixPath('b.txt'))]
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hf_bpe.common.errors import InputError
from hf_bpe.evaluation.evaluate import CorpusStats, Evaluation, _cell

MIN_SPACE_SHARE = 1 / 20
# A language's name: a code such as en, zh-Hans or pt_BR, or any word; never a path.
NAME_REGEX = re.compile(r"[A-Za-z0-9][\w.+-]*")


@dataclass(frozen=True)
class CorpusArgument:
    """A corpus as given on the command line: PATH (name None) or NAME=PATH."""

    name: str | None
    path: Path


def parse_corpus_arguments(values: Sequence[str | os.PathLike[str]], flag: str) -> list[CorpusArgument]:
    """Each value as NAME=PATH when it has an `=` after a name (`NAME_REGEX`) and is not the path of a file, else as a
    PATH; InputError (naming `flag`) for a name given twice."""
    arguments, seen = [], set()
    for value in map(os.fspath, values):
        name, equals, path = value.partition("=")
        if not equals or not NAME_REGEX.fullmatch(name) or Path(value).is_file():
            arguments.append(CorpusArgument(None, Path(value)))
            continue
        if name in seen:
            raise InputError(f"{flag} {value}: the name {name} is given twice")
        if not path:
            raise InputError(f"{flag} {value}: no path after {name}=")
        seen.add(name)
        arguments.append(CorpusArgument(name, Path(path)))
    return arguments


def check_parity_reference(reference: str | None, names: Sequence[str | None], flag: str) -> None:
    """InputError unless `reference` (when given) is one of the corpora's `names` (None: a corpus without one)."""
    given = [name for name in names if name is not None]
    if reference is not None and reference not in given:
        raise InputError(f"--parity-reference {reference}: no {flag} is named {reference} "
                         + (f"(the names: {', '.join(given)})" if given else f"(name them: {flag} NAME=PATH)"))


def written_with_spaces(corpus: CorpusStats) -> bool:
    """Whether whitespace other than line breaks is at least `MIN_SPACE_SHARE` of the corpus's characters."""
    return corpus.num_spaces >= MIN_SPACE_SHARE * corpus.num_characters


@dataclass(frozen=True)
class LanguageReport:
    """The evaluations of the named corpora (`results[language][tokenizer name]`, both in the order given) and the
    reference language of the premiums."""

    reference: str
    results: dict[str, dict[str, Evaluation]]

    @property
    def languages(self) -> list[str]:
        return list(self.results)

    @property
    def tokenizers(self) -> list[Any]:
        """The `NamedTokenizer`s, in order."""
        return [result.tokenizer for result in self.results[self.reference].values()]

    def premium(self, language: str, tokenizer: str) -> float:
        """The language's tokens over the reference language's, with `tokenizer`."""
        return self.results[language][tokenizer].num_tokens / self.results[self.reference][tokenizer].num_tokens

    def tokens_per_word(self, language: str, tokenizer: str) -> float | None:
        """Tokens per word, None for a language written without spaces."""
        result = self.results[language][tokenizer]
        return result.tokens_per_word if written_with_spaces(result.corpus) else None

    def fairness(self, tokenizer: str) -> tuple[float, str, str]:
        """(the most tokens of a language over the fewest, the language with the most, the one with the fewest); the
        first in order among equals."""
        tokens = {language: by_tokenizer[tokenizer].num_tokens for language, by_tokenizer in self.results.items()}
        most, fewest = max(tokens, key=tokens.__getitem__), min(tokens, key=tokens.__getitem__)
        return tokens[most] / tokens[fewest], most, fewest

    def markdown(self) -> str:
        """The per-language table and the fairness figures, in Markdown."""
        rows = []
        for language, by_tokenizer in self.results.items():
            for name, result in by_tokenizer.items():
                label = name + (" (baseline)" if result.tokenizer.is_baseline else "")
                words = self.tokens_per_word(language, name)
                rows.append(f"| `{language}` | {_cell(label)} | {result.bytes_per_token:.3f} | "
                            f"{'n/a' if words is None else f'{words:.3f}'} | {result.num_tokens:,} | "
                            f"{self.premium(language, name):.3f} |")
        fairness = []
        for named in self.tokenizers:
            ratio, most, fewest = self.fairness(named.name)
            tokens = {language: self.results[language][named.name].num_tokens for language in (most, fewest)}
            fairness.append(f"- {_cell(named.name)}: {ratio:.3f} (`{most}` {tokens[most]:,} tokens, `{fewest}` "
                            f"{tokens[fewest]:,})")
        without_spaces = [language for language, by_tokenizer in self.results.items()
                          if not written_with_spaces(next(iter(by_tokenizer.values())).corpus)]
        lines = [f"Per language, on parallel text (premium: the language's tokens over those of `{self.reference}`, "
                 "the reference; 1.000 is parity):", "",
                 "| Language | Tokenizer | Bytes per token | Tokens per word | Tokens | Premium |",
                 "|---|---|---:|---:|---:|---:|", *rows, "",
                 "Fairness, the most tokens a language takes over the fewest (1.000 is parity):", "", *fairness]
        if without_spaces:
            lines += ["", "Tokens per word is n/a for text written without spaces between words (whitespace, line "
                      "breaks aside, under 1 in 20 characters): " + ", ".join(f"`{name}`" for name in without_spaces)
                      + "."]
        return "\n".join(lines) + "\n"

    def as_json(self) -> dict[str, Any]:
        """Everything `markdown` shows, for machines."""
        corpora = [(language, next(iter(by_tokenizer.values())).corpus)
                   for language, by_tokenizer in self.results.items()]
        return {
            "reference": self.reference,
            "corpora": [{"name": language, "path": str(corpus.path), "bytes": corpus.num_bytes,
                         "characters": corpus.num_characters, "words": corpus.num_words, "spaces": corpus.num_spaces,
                         "written_with_spaces": written_with_spaces(corpus)} for language, corpus in corpora],
            "results": [{"language": language, "tokenizer": name, "baseline": result.tokenizer.is_baseline,
                         "tokens": result.num_tokens, "bytes_per_token": round(result.bytes_per_token, 6),
                         "tokens_per_word": _rounded(self.tokens_per_word(language, name)),
                         "premium": round(self.premium(language, name), 6)}
                        for language, by_tokenizer in self.results.items() for name, result in by_tokenizer.items()],
            "fairness": [{"tokenizer": named.name, "fairness": round(ratio, 6), "most_tokens": most,
                          "fewest_tokens": fewest}
                         for named in self.tokenizers for ratio, most, fewest in [self.fairness(named.name)]],
        }

    def plot(self, path: str | os.PathLike[str], title: str = "Tokens per language on parallel text") -> Path:
        """Draw the premiums as grouped bars (hf_bpe.evaluation.plots.plot_premiums), fairness in the legend."""
        from hf_bpe.evaluation.plots import plot_premiums

        premiums = {f"{named.name} (fairness {self.fairness(named.name)[0]:.2f})":
                    [self.premium(language, named.name) for language in self.languages] for named in self.tokenizers}
        return plot_premiums(self.languages, premiums, self.reference, path, title)


def language_report(results: Sequence[Evaluation], names: Sequence[str | None], reference: str | None = None
                    ) -> LanguageReport | None:
    """The per-language view of `evaluate`'s results (corpus by corpus, each in tokenizer order) on corpora named
    by `names` (None for a corpus without a name, which the view leaves out); None when no corpus is named.
    `reference` defaults to the first name."""
    named = [name for name in names if name is not None]
    if not named:
        return None
    per_corpus = len(results) // len(names)
    by_language = {}
    for index, name in enumerate(names):
        if name is not None:
            block = results[index * per_corpus:(index + 1) * per_corpus]
            by_language[name] = {result.tokenizer.name: result for result in block}
    return LanguageReport(named[0] if reference is None else reference, by_language)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 6)
