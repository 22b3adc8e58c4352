"""Evaluating tokenizers on corpora: bytes per token, tokens per word, and how much of the vocabulary a corpus uses.

`evaluate(tokenizers, corpora)` encodes each UTF-8 file with each tokenizer (the fast encoder, `encode_to_numpy`) and
counts every token id. Each file is read once, in chunks cut at safe places
(`hf_bpe.train.counting.count.find_chunk_boundaries`,
keeping only cuts at a single space between two non-whitespace characters, where every preset pattern, GPT-2's
included, can be cut, and inside no special token of any tokenizer), and large files are spread over worker
processes; every chunk goes through every tokenizer. The counts equal those of encoding the whole file at once:
special tokens count as one token each. Another model's tokenizer (a baseline directory: engine "tokenizers",
hf_bpe.evaluation.hf_tokenizers) is counted by `tokenizers` itself, on the whole text of each file, cut only where
`tokenizers` cuts text; the reports say which engine encoded each tokenizer.

Words are whitespace-separated (Python's `str.split`), except that each character of a script written without
spaces (Han, Hiragana, Katakana, Thai, Lao, Khmer, Myanmar) counts as a word of its own, so "tokens per word" is
tokens per character for Chinese or Japanese text and tokens per word for English, in one number.

>>> count_words("Hello, world!  It's 9 am."), count_words("猫はソファで寝ています。"), count_words("Tokyo 東京")
(5, 12, 3)

Not handled: other scripts without spaces (Tibetan, Javanese, Balinese, ...) count whitespace-separated words, which
for them are phrases or lines; a file without safe cuts, or compared with a tokenizer whose custom pattern has none
(hf_bpe.pretokenize.patterns), is read as one chunk by one process.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import regex

from hf_bpe.common.errors import InputError
from hf_bpe.common.files import PathArg, read_text
from hf_bpe.common.parallel import default_num_workers, process_pool, progress_bar, worker_state
from hf_bpe.evaluation.baselines import NamedTokenizer
from hf_bpe.evaluation.token_counts import COUNT_DTYPE
from hf_bpe.pretokenize import WHITESPACE_CHARS, compile_pattern
from hf_bpe.train.counting.count import find_chunk_boundaries

# Python's whitespace (`str.isspace`, what `str.split()` splits at), and scripts written without spaces.
WHITESPACE_RANGES = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
NO_SPACE_SCRIPTS = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}"
WORD_REGEX = regex.compile(f"[{NO_SPACE_SCRIPTS}]|[^{WHITESPACE_RANGES}{NO_SPACE_SCRIPTS}]+")
# Files smaller than this are encoded in this process: starting workers would cost more than it saves.
MIN_PARALLEL_BYTES = 4 << 20
MIN_CHUNK_BYTES, MAX_CHUNK_BYTES = 1 << 20, 16 << 20


def count_words(text: str) -> int:
    """The number of words in `text`, as the module docstring defines them (without a list of them for non-ASCII)."""
    if text.isascii():
        return len(text.split())
    return WORD_REGEX.subn("", text)[1]


def count_spaces(text: str) -> int:
    r"""The whitespace characters of `text` (`str.isspace`) other than line breaks (`\n`, `\r`): what separates words
    within a line in scripts written with spaces (hf_bpe.evaluation.languages).

    >>> count_spaces("a b\tc\n"), count_spaces("猫が\u3000寝る。\r\n")
    (2, 1)
    """
    return len(text) - sum(map(len, text.split())) - text.count("\n") - text.count("\r")


@dataclass(frozen=True)
class CorpusStats:
    """What a corpus is, whatever the tokenizer: its path, UTF-8 bytes, characters, words and spaces
    (`count_spaces`)."""

    path: Path
    num_bytes: int
    num_characters: int
    num_words: int
    num_spaces: int = 0


@dataclass(frozen=True)
class Evaluation:
    """One tokenizer on one corpus: how often each token id occurs (uint64 by id) and what follows from it."""

    tokenizer: NamedTokenizer
    corpus: CorpusStats
    token_counts: np.ndarray = field(repr=False)

    @property
    def num_tokens(self) -> int:
        return int(self.token_counts.sum())

    @property
    def bytes_per_token(self) -> float:
        return self.corpus.num_bytes / self.num_tokens if self.num_tokens else 0.0

    @property
    def tokens_per_word(self) -> float:
        return self.num_tokens / self.corpus.num_words if self.corpus.num_words else 0.0

    @property
    def ordinary_ids(self) -> np.ndarray:
        """The ids of the tokens that text can encode to (every token but the special ones), sorted."""
        return ordinary_ids(self.tokenizer.tokenizer)

    @property
    def never_used(self) -> np.ndarray:
        """The ids of ordinary tokens that do not occur in the corpus, sorted."""
        ids = self.ordinary_ids
        return ids[self.token_counts[ids] == 0]

    @property
    def share_used(self) -> float:
        """The share of the ordinary tokens that occur at least once."""
        return 1 - len(self.never_used) / len(self.ordinary_ids) if len(self.ordinary_ids) else 0.0

    def as_json(self) -> dict[str, Any]:
        return {"tokenizer": self.tokenizer.name, "baseline": self.tokenizer.is_baseline,
                "engine": self.tokenizer.engine, "corpus": str(self.corpus.path), "tokens": self.num_tokens,
                "bytes_per_token": round(self.bytes_per_token, 6), "tokens_per_word": round(self.tokens_per_word, 6),
                "vocab_size": self.tokenizer.tokenizer.vocab_size, "ordinary_tokens": len(self.ordinary_ids),
                "tokens_used": len(self.ordinary_ids) - len(self.never_used),
                "share_used": round(self.share_used, 6), "never_used": len(self.never_used),
                "never_used_ids": self.never_used.tolist()}


def ordinary_ids(tokenizer: Any) -> np.ndarray:
    """The sorted ids of `tokenizer`'s tokens that are not special tokens."""
    special = {tokenizer.token_to_id(token) for token in tokenizer.special_tokens}
    return np.array(sorted(set(tokenizer.vocab) - special), dtype=np.int64)


def check_corpora(corpora: Sequence[PathArg]) -> list[Path]:
    """The corpora as paths, after checking that each is a non-empty regular file (InputError naming it)."""
    paths = []
    for corpus in corpora:
        path = Path(corpus)
        if path.is_dir():
            raise InputError(f"{path}: is a directory, expected a text file")
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise InputError(f"{path}: no such eval corpus") from None
        except OSError as error:
            raise InputError(f"{path}: cannot read the eval corpus: {error.strerror}") from None
        if size == 0:
            raise InputError(f"{path}: the eval corpus is empty, so there is no compression to report")
        paths.append(path)
    return paths


def evaluate(tokenizers: Sequence[NamedTokenizer], corpora: Sequence[PathArg], *, num_workers: int | None = None,
             progress: bool | None = False, chunk_bytes: int | None = None, errors: str = "strict"
             ) -> list[Evaluation]:
    """Every tokenizer on every corpus: `[Evaluation]`, corpus by corpus, each in the order of `tokenizers`.

    `num_workers` processes (default: the CPUs this process may use) encode files of at least 4 MiB; `chunk_bytes`
    (default: a quarter of a file per worker, within 1-16 MiB) sets the size of the parts a file is read in.
    Invalid UTF-8 is an InputError naming the file and byte offset (`errors="strict"`), or is read as U+FFFD
    (`errors="replace"`; bytes per token still counts the file's bytes).
    """
    paths = check_corpora(corpora)
    workers = default_num_workers() if num_workers is None else num_workers
    if workers < 1:
        raise InputError(f"--workers must be at least 1, got {workers}")
    ours = [named for named in tokenizers if named.engine == "hf_bpe"]  # the others count whole files themselves
    special_tokens = sorted({token.encode("utf-8") for named in ours for token in named.tokenizer.special_tokens})
    cuts_allowed = all(compile_pattern(named.tokenizer.pattern).safe_cut is not None for named in ours)
    results = []
    for path in paths:
        size = path.stat().st_size
        chunk = chunk_bytes or min(MAX_CHUNK_BYTES, max(MIN_CHUNK_BYTES, size // (4 * workers)))
        tasks = [(*task, errors) for task in _chunks(path, size, chunk, special_tokens, cuts_allowed)]
        state = [named.tokenizer for named in ours]
        totals = {named: np.zeros(max(named.tokenizer.vocab) + 1, dtype=COUNT_DTYPE) for named in ours}
        characters = words = spaces = 0
        with progress_bar(progress, total=size, unit="B", unit_scale=True, desc=f"eval {path.name}") as bar:
            for task, (num_characters, num_words, num_spaces, sparse_counts) in zip(tasks, _run(tasks, state,
                                                                                                workers, size)):
                characters += num_characters
                words += num_words
                spaces += num_spaces
                for total, (ids, counts) in zip(totals.values(), sparse_counts):
                    total[ids] += counts
                bar.update(task[2] - task[1])
        others = [named for named in tokenizers if named not in totals]
        text = read_text(path, 0, size, errors) if others else ""
        totals.update((named, named.tokenizer.count_tokens(text)) for named in others)
        del text
        stats = CorpusStats(path, size, characters, words, spaces)
        results.extend(Evaluation(named, stats, totals[named]) for named in tokenizers)
    return results


def _chunks(path: Path, size: int, chunk_bytes: int, special_tokens: list[bytes], cuts_allowed: bool = True
            ) -> Iterator[tuple[str, int, int]]:
    """(path, start, end) parts of the file, cut only at a single space between two non-whitespace characters
    (the safe cut of every preset pattern, GPT-2's included: hf_bpe.pretokenize.patterns), inside no special token
    of any tokenizer; one part when `cuts_allowed` is false (a pattern without safe cuts)."""
    inner = []
    with open(path, "rb") as file:
        cuts = find_chunk_boundaries(file, size, chunk_bytes, special_tokens) if cuts_allowed else [0, size]
        for cut in cuts[1:-1]:
            start = max(0, cut - 4)  # the character before the cut is in the 4 bytes before it
            file.seek(start)
            before = file.read(cut - start + 1)
            if before[-1:] == b" " and before[:-1].decode("utf-8", "ignore")[-1:] not in ("", *WHITESPACE_CHARS):
                inner.append(cut)
    bounds = [0, *inner, size]
    for start, end in zip(bounds, bounds[1:]):
        yield (os.fspath(path), start, end)


def _run(tasks: list[tuple[str, int, int, str]], tokenizers: list[Any], workers: int, size: int
         ) -> Iterator[tuple[int, int, int, list[tuple[np.ndarray, np.ndarray]]]]:
    """Each task's result, in order: in this process for a small file or one worker, else in a pool."""
    if workers == 1 or len(tasks) == 1 or size < MIN_PARALLEL_BYTES:
        for task in tasks:
            yield _encode_chunk(task, tokenizers)
        return
    with process_pool(min(workers, len(tasks)), tokenizers) as pool:
        yield from pool.imap(_encode_chunk_in_worker, tasks)


def _encode_chunk(task: tuple[str, int, int, str], tokenizers: list[Any]
                  ) -> tuple[int, int, int, list[tuple[np.ndarray, np.ndarray]]]:
    """(characters, words, spaces, per tokenizer the ids that occur and their counts) of one part of a file."""
    path, start, end, errors = task
    text = read_text(path, start, end, errors)
    sparse = []
    for tokenizer in tokenizers:
        counts = np.bincount(tokenizer.encode_to_numpy(text), minlength=max(tokenizer.vocab) + 1)
        ids = np.flatnonzero(counts)
        sparse.append((ids, counts[ids].astype(COUNT_DTYPE)))
    return len(text), count_words(text), count_spaces(text), sparse


def _encode_chunk_in_worker(task: tuple[str, int, int, str]
                            ) -> tuple[int, int, int, list[tuple[np.ndarray, np.ndarray]]]:
    return _encode_chunk(task, worker_state())


def markdown_report(results: Sequence[Evaluation], examples: int = 6) -> str:
    """A Markdown table (a row per corpus and tokenizer), then the tokens each tokenizer never used in any corpus."""
    from hf_bpe.evaluation.viewer import readable_token

    rows = []
    for result in results:
        corpus = result.corpus
        name = result.tokenizer.name + (" (baseline)" if result.tokenizer.is_baseline else "")
        words = f"{result.tokens_per_word:.3f}" if corpus.num_words else "n/a"
        rows.append(f"| `{corpus.path.name}` | {_cell(name)} | {result.bytes_per_token:.3f} | {words} | "
                    f"{result.num_tokens:,} | {result.share_used:.1%} of {len(result.ordinary_ids):,} | "
                    f"{len(result.never_used):,} | {result.tokenizer.engine} |")
    lines = ["| Corpus | Tokenizer | Bytes per token | Tokens per word | Tokens | Vocabulary used | Never used "
             "| Encoded by |",
             "|---|---|---:|---:|---:|---:|---:|---|", *rows, "",
             "Tokens that occur in none of the corpora (candidates for under-trained tokens):", ""]
    for named, never in never_used_everywhere(results).items():
        vocab = named.tokenizer.vocab
        merged = [token_id for token_id in never.tolist() if len(vocab[token_id]) > 1]
        shown = ", ".join(f"`{readable_token(vocab[token_id])}`" for token_id in merged[:examples])
        lines.append(f"- {_cell(named.name)}: {len(never):,} of {len(ordinary_ids(named.tokenizer)):,} "
                     f"({len(never) - len(merged):,} of them single bytes)"
                     + (f"; the first merged ones by id: {_cell(shown)}" if shown else ""))
    corpora = list(dict.fromkeys(result.corpus for result in results))
    lines += ["", "Corpora: " + "; ".join(f"`{corpus.path.name}` {corpus.num_bytes:,} bytes, "
                                          f"{corpus.num_characters:,} characters, {corpus.num_words:,} words"
                                          for corpus in corpora) + "."]
    return "\n".join(lines) + "\n"


def never_used_everywhere(results: Sequence[Evaluation]) -> dict[NamedTokenizer, np.ndarray]:
    """For each tokenizer, the ids of its ordinary tokens that occur in none of the corpora, sorted."""
    totals: dict[NamedTokenizer, np.ndarray] = {}
    for result in results:
        total = totals.get(result.tokenizer)
        totals[result.tokenizer] = result.token_counts.copy() if total is None else total + result.token_counts
    return {named: ids[total[ids] == 0] for named, total in totals.items()
            for ids in [ordinary_ids(named.tokenizer)]}


def json_report(results: Sequence[Evaluation]) -> dict[str, Any]:
    """Everything `markdown_report` shows, for machines: the corpora, a result per pair, never-used ids."""
    corpora = list(dict.fromkeys(result.corpus for result in results))
    return {"corpora": [{"path": str(corpus.path), "bytes": corpus.num_bytes, "characters": corpus.num_characters,
                         "words": corpus.num_words} for corpus in corpora],
            "results": [result.as_json() for result in results],
            "never_used_in_any_corpus": {named.name: ids.tolist()
                                         for named, ids in never_used_everywhere(results).items()}}


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
