"""Named sources: pre-token counts per source (a language, a domain), in one counting pass over all of them.

    hf-bpe train en=data/en.txt de=data/de.txt 'code=data/code/*.py' --out tok

`parse_sources` reads such inputs. The rule: an input is `NAME=PATH` when the text before its first `=` is a name
(`NAME_REGEX`: a letter or digit, then letters, digits, `_`, `.`, `+` or `-`; the rule of `hf-bpe eval --corpus`)
and the whole input is not an existing file; PATH is everything after that `=` (so it may hold `=` itself). Any
other input is a bare path, as before: bare inputs alone train on one pooled corpus exactly as they always have.
A PATH with `*`, `?` or `[` that is not a file is a glob, expanded here (sorted), since the shell does not expand
`NAME=...`; a glob that matches no file is an error. Mixing named and bare inputs, or giving a name twice, is an
error too (give a source several files with a glob; from Python, with a list).

`count_sources_in_files` counts every source in one pass: each task (a file chunk, as plain counting cuts them)
carries its source's index, and each worker keeps the counts of each source apart (`SourceCounts`, the `Tally` it
hands over, in hf_bpe.train.counting.source_counts). A worker counts all its sources in one piece table, as plain
counting does, so a piece is pre-tokenized once per worker however many sources hold it; the table's values at each
move to another source tell the sources' counts apart. Each source's counts equal
`hf_bpe.train._reference.reference_counts` of that source's texts (tests/train/counting/test_sources.py).

>>> import os, tempfile
>>> folder = tempfile.mkdtemp()
>>> for name, text in [("en.txt", "the cat the"), ("fr.txt", "le chat")]:
...     _ = open(os.path.join(folder, name), "w").write(text)
>>> sources = parse_sources([f"en={folder}/en.txt", f"fr={folder}/fr.txt"])
>>> {name: sorted(counts.items()) for name, counts in count_sources_in_files(sources, num_workers=1).items()}
{'en': [(b' cat', 1), (b' the', 1), (b'the', 1)], 'fr': [(b' chat', 1), (b'le', 1)]}
"""

from __future__ import annotations

import glob
import itertools
import os
import re
import stat
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence, Sized
from typing import Any

from hf_bpe.common.errors import InputError
from hf_bpe.common.files import PathArg, check_input_files, is_url, read_text
from hf_bpe.common.parallel import progress_bar
from hf_bpe.pretokenize import GPT2_PATTERN, replace_surrogates, resolve_pattern, validate_special_tokens
from hf_bpe.train.counting.count import (
    DEFAULT_CHUNK_BYTES,
    CountingEngine,
    CountStats,
    check_file_options,
    file_chunks,
    files_engine,
    text_batches,
)
from hf_bpe.train.counting.local_engine import LocalCountingEngine, check_num_workers
from hf_bpe.train.counting.piece_counter import PieceCounter
from hf_bpe.train.counting.source_counts import SourceCounts, add_to_source

# A source's name: a code such as en, zh-Hans or pt_BR, or any word; never a path (hf_bpe.evaluation.languages's).
NAME_REGEX = re.compile(r"[A-Za-z0-9][\w.+-]*")
_GLOB_CHARS = frozenset("*?[")


def parse_sources(inputs: Sequence[str | os.PathLike[str]], flag: str = "INPUT") -> dict[str, list[str]] | None:
    """`NAME=PATH` inputs as {name: paths} in the order given, globs expanded; None when every input is a bare path
    (see the module docstring for the rule). InputError, naming the input, for a name given twice, a `NAME=` with no
    path, a glob that matches nothing, or named and bare inputs mixed. `flag` names the inputs in messages.

    >>> parse_sources(["corpus.txt"]) is None
    True
    >>> parse_sources(["en=a.txt", "zh-Hans=b=c.txt"])
    {'en': ['a.txt'], 'zh-Hans': ['b=c.txt']}
    >>> parse_sources(["en=a.txt", "b.txt"])
    Traceback (most recent call last):
    ...
    hf_bpe.common.errors.InputError: INPUT b.txt has no NAME= while en=a.txt has: name every input or none
    """
    named: dict[str, list[str]] = {}
    first_named = first_bare = None
    for value in map(os.fspath, inputs):
        name, equals, path = value.partition("=")
        if not equals or not NAME_REGEX.fullmatch(name) or os.path.isfile(value):
            first_bare = first_bare or value
        else:
            if name in named:
                raise InputError(f"{flag} {value}: the name {name} is given twice (give a source several files with "
                                 "a glob)")
            if not path:
                raise InputError(f"{flag} {value}: no path after {name}=")
            named[name] = _expand(path, value, flag)
            first_named = first_named or value
        if first_named is not None and first_bare is not None:
            raise InputError(f"{flag} {first_bare} has no NAME= while {first_named} has: name every input or none")
    return named or None


def _expand(path: str, value: str, flag: str) -> list[str]:
    """The files of a PATH: itself, or the files a glob matches (sorted)."""
    if is_url(path) or not _GLOB_CHARS.intersection(path) or os.path.exists(path):
        return [path]
    matches = sorted(match for match in glob.glob(path) if os.path.isfile(match))
    if not matches:
        raise InputError(f"{flag} {value}: no file matches {path}")
    return matches


def source_paths(sources: Mapping[str, PathArg | Sequence[PathArg]], what: str = "source") -> dict[str, list[PathArg]]:
    """{name: [paths]} of a mapping from names to a path or paths, checked: names are non-empty strs, and there is at
    least one source, each with at least one path."""
    if not isinstance(sources, Mapping):
        raise TypeError(f"sources must be a mapping from names to paths, got {type(sources).__name__}")
    if not sources:
        raise InputError(f"no {what}s given")
    paths: dict[str, list[PathArg]] = {}
    for name, given in sources.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"{what} names must be non-empty strs, got {name!r}")
        paths[name] = [given] if isinstance(given, (str, os.PathLike)) else list(given)
        if not paths[name]:
            raise InputError(f"{what} {name} has no files")
    return paths


def check_source_files(paths: Mapping[str, Sequence[PathArg]], what: str = "source") -> dict[str, list[int]]:
    """{name: the sizes of its files}, each file checked as `check_input_files` checks it; InputError naming the
    source when all its files are empty."""
    sizes = {}
    for name, files in paths.items():
        if _all_local_and_empty(files):
            raise InputError(f"{what} {name} has no text: " + (f"its {len(files)} files are empty" if len(files) > 1
                                                                 else f"{os.fspath(files[0])} is empty"))
        sizes[name] = check_input_files(files)
    return sizes


def _all_local_and_empty(paths: Sequence[PathArg]) -> bool:
    try:
        return all(not is_url(path) and stat.S_ISREG((status := os.stat(path)).st_mode) and status.st_size == 0
                   for path in paths)
    except OSError:  # check_input_files names the file
        return False


def count_sources_in_files(sources: Mapping[str, PathArg | Sequence[PathArg]], special_tokens: Sequence[str] = (),
                           *, num_workers: int | None = None, engine: CountingEngine | None = None,
                           pattern: str | None = None, errors: str = "strict", chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                           progress: bool | None = None, stats: CountStats | None = None, what: str = "source"
                           ) -> dict[str, Counter[bytes]]:
    """Each source's pre-token counts ({name: counts}, in the order of `sources`), counted in one pass.

    The options are `count_pretokens_in_files`'s (`engine`: the local worker processes by default, or a
    `RayCountingEngine`). InputError naming the source (`what` says what it is: "dev set" for parity's dev sets)
    when it has no text: its files are all empty, or hold only special tokens.
    """
    return count_source_groups_in_files({what: sources}, special_tokens, num_workers=num_workers, engine=engine,
                                        pattern=pattern, errors=errors, chunk_bytes=chunk_bytes, progress=progress,
                                        stats=stats)[what]


def count_source_groups_in_files(groups: Mapping[str, Mapping[str, PathArg | Sequence[PathArg]]],
                                 special_tokens: Sequence[str] = (), *, num_workers: int | None = None,
                                 engine: CountingEngine | None = None, pattern: str | None = None,
                                 errors: str = "strict", chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                                 progress: bool | None = None, stats: CountStats | None = None
                                 ) -> dict[str, dict[str, Counter[bytes]]]:
    """`count_sources_in_files` for several groups of sources at once, each named by what its sources are ("source",
    "dev set"), in one pass over all their files (one pool, one progress bar: parity-aware training's sources and
    dev sets). Returns each group's counts by source name; errors name the group's `what`."""
    specials, regex = check_file_options(special_tokens, pattern, errors, chunk_bytes, num_workers)
    paths = {what: source_paths(sources, what) for what, sources in groups.items()}
    sizes = {what: check_source_files(group, what) for what, group in paths.items()}
    named = [(what, name) for what, group in paths.items() for name in group]
    tasks = [(index, *chunk) for index, (what, name) in enumerate(named)
             for chunk in file_chunks(paths[what][name], sizes[what][name], specials, regex, chunk_bytes, errors,
                                      stats)]
    total = sum(sum(map(sum, group.values())) for group in sizes.values())
    engine = engine if engine is not None else files_engine(num_workers, total)
    with progress_bar(progress, desc="counting pre-tokens", total=total, unit="B", unit_scale=True) as bar:
        counted = engine.count(tasks, _SourceFileTask(errors, regex), specials, bar)
    counts, first = {}, 0
    tables = _by_source(counted)
    for what, group in paths.items():
        counts[what] = _by_name(tables, list(group), f"{what} {{name}} has no text: nothing but special tokens",
                                first)
        first += len(group)
    return counts


def count_sources_and_dev_sets(sources: Mapping[str, PathArg | Sequence[PathArg]],
                               dev_sets: Mapping[str, PathArg | Sequence[PathArg]] | None,
                               special_tokens: Sequence[str] = (), **options: Any
                               ) -> tuple[dict[str, Counter[bytes]], dict[str, Counter[bytes]] | None]:
    """Each source's counts and, when `dev_sets` are given (parity-aware training's), each dev set's, counted in one
    pass (`count_source_groups_in_files`, whose `options` these are); None for no dev sets."""
    groups = {"source": sources} | ({} if dev_sets is None else {"dev set": dev_sets})
    counted = count_source_groups_in_files(groups, special_tokens, **options)
    return counted["source"], counted.get("dev set")


def count_sources_in_iterators(sources: Mapping[str, Iterable[str]], special_tokens: Sequence[str] = (), *,
                               num_workers: int | None = None, engine: CountingEngine | None = None,
                               pattern: str | None = None, progress: bool | None = None, what: str = "source"
                               ) -> dict[str, Counter[bytes]]:
    """Each source's pre-token counts ({name: counts}, in order) of iterables of texts, each text a document, as
    `count_pretokens_in_iterator` counts one: in batches, the sources one after the other in one pass. InputError
    naming a source with no text."""
    if not isinstance(sources, Mapping):
        raise TypeError(f"sources must be a mapping from names to texts, got {type(sources).__name__}")
    if not sources:
        raise InputError(f"no {what}s given")
    check_num_workers(num_workers)
    specials = validate_special_tokens(special_tokens)
    regex = resolve_pattern(pattern)
    names = list(sources)
    sized = all(isinstance(texts, Sized) for texts in sources.values())
    total = sum(len(texts) for texts in sources.values()) if sized else None  # type: ignore[arg-type]
    tasks: Iterator[tuple[int, Any]] = ((index, batch) for index, name in enumerate(names)
                                        for batch in text_batches(sources[name], specials, regex))
    if engine is None:
        first = list(itertools.islice(tasks, 2))
        engine = LocalCountingEngine(1 if len(first) < 2 else num_workers)  # one batch: not worth a worker
        tasks = _chain(first, tasks)
    with progress_bar(progress, desc="counting pre-tokens", total=total, unit=" texts") as bar:
        counted = engine.count(tasks, _SourceBatchTask(regex), specials, bar)
    return _by_name(_by_source(counted), names, f"{what} {{name}} has no text")


def _chain(first: list[Any], rest: Iterator[Any]) -> Iterator[Any]:
    yield from first
    yield from rest


def _by_source(counted: Any) -> dict[int, Counter[bytes]]:
    """What the engine counted (a `SourceCounts`, or nothing counted), by source number; the tally is empty after."""
    return counted.by_source() if isinstance(counted, SourceCounts) else {}


def _by_name(tables: dict[int, Counter[bytes]], names: list[str], no_text: str, first: int = 0
             ) -> dict[str, Counter[bytes]]:
    """Counts by source number (`_by_source`) by source name, the sources numbered from `first`; InputError
    (`no_text`, formatted with the name) for a source with no pre-token."""
    for index, name in enumerate(names, start=first):
        if not tables.get(index):
            raise InputError(no_text.format(name=name))
    return {name: tables[index] for index, name in enumerate(names, start=first)}


# --- the tasks -----------------------------------------------------------------------------------------------------


class _SourceFileTask:
    """Counts one byte range of a source's file, `(source index, path, start, end)`; its size is its bytes."""

    def __init__(self, errors: str, pattern: str | None = None) -> None:
        self.errors = errors
        self.pattern = None if pattern == GPT2_PATTERN else pattern

    def __call__(self, counter: PieceCounter, task: tuple[int, str, int, int]) -> int:
        source, path, start, end = task
        add_to_source(counter, source, read_text(path, start, end, self.errors), self.pattern)
        return end - start


class _SourceBatchTask:
    """Counts a batch of a source's texts, `(source index, batch)`, each text on its own; its size is the number of
    texts that end in it."""

    def __init__(self, pattern: str | None = None) -> None:
        self.pattern = None if pattern == GPT2_PATTERN else pattern

    def __call__(self, counter: PieceCounter, task: tuple[int, list[str]]) -> int:
        source, batch = task
        for text in batch:
            add_to_source(counter, source, replace_surrogates(text), self.pattern)
        return getattr(batch, "texts", len(batch))


__all__ = ["NAME_REGEX", "SourceCounts", "add_to_source", "check_source_files", "count_source_groups_in_files",
           "count_sources_and_dev_sets", "count_sources_in_files", "count_sources_in_iterators", "parse_sources",
           "source_paths"]
