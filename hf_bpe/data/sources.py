"""Datasets as sources of documents: loading one split with clear errors, and its text column as documents.

What `hf-bpe train --dataset` and `hf-bpe tokenize-dataset` share (their options are in `hf_bpe.cli.options`).

    hf-bpe train --dataset json --data-files docs.jsonl --text-column text --out tok/
    hf-bpe tokenize-dataset --tokenizer tok/ --dataset json --data-files docs.jsonl --out data/

>>> source = DatasetSource("json", data_files=["docs.jsonl"])
>>> source.describe()
"dataset 'json' (docs.jsonl) split 'train'"
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from hf_bpe.common.errors import InputError

T = TypeVar("T")

PACKAGED_BUILDERS = ("json", "csv", "parquet", "text", "arrow")
BUILDER_BY_SUFFIX = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet", ".txt": "text",
                     ".arrow": "arrow"}


@dataclass
class DatasetSource:
    """One split of a dataset, named as on the command line: a `save_to_disk` directory, a packaged builder (`json`,
    `csv`, `parquet`, `text`) with `data_files`, a single data file, or a Hub dataset name."""

    name: str
    split: str = "train"
    text_column: str = "text"
    data_files: list[str] = field(default_factory=list)
    config: str | None = None
    streaming: bool = False
    cache_dir: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> DatasetSource:
        return cls(args.dataset, split=args.split, text_column=args.text_column, data_files=list(args.data_files or []),
                   config=args.config, streaming=args.streaming, cache_dir=args.cache_dir)

    def describe(self) -> str:
        files = f" ({', '.join(self.data_files)})" if self.data_files else ""
        config = f" config {self.config!r}" if self.config else ""
        return f"dataset {self.name!r}{files}{config} split {self.split!r}"

    def hub_name(self) -> str | None:
        """The dataset's Hub id for model-card metadata: None for local files, directories and packaged builders."""
        if self.name in PACKAGED_BUILDERS or Path(self.name).exists() or self.data_files:
            return None
        return self.name

    def load(self) -> Any:
        """The split as a `datasets.Dataset` (an `IterableDataset` when streaming); see `load_text_dataset`."""
        return load_text_dataset(self.name, split=self.split, data_files=self.data_files, config=self.config,
                                 streaming=self.streaming, cache_dir=self.cache_dir)

    def no_rows_error(self) -> InputError:
        return InputError(f"{self.describe()} has no rows")


def load_text_dataset(dataset: str, *, split: str, data_files: Sequence[str] | None = None,
                      config: str | None = None, streaming: bool = False, cache_dir: str | None = None) -> Any:
    """Load one split as a `datasets.Dataset` (or `IterableDataset` when streaming), turning failures into InputError.

    A `save_to_disk` directory goes through `load_from_disk`; a packaged builder name or a single data file through
    `load_dataset` with the data files mapped to `split`; anything else is passed to `load_dataset` as a Hub name.
    A dataset without rows is an InputError saying so (`datasets` itself fails on some with a cryptic error).
    """
    import datasets

    source = DatasetSource(dataset, split=split, data_files=list(data_files or []), config=config)
    path = Path(dataset)
    if is_saved_dataset(path):
        return _load_saved(path, source, streaming)

    builder, files = _builder_and_files(dataset, data_files)
    if not builder:
        raise InputError(f"{dataset}: cannot tell the format from the suffix; use --dataset json|csv|parquet|"
                         f"text --data-files {dataset}")
    if builder in PACKAGED_BUILDERS and not files:
        raise InputError(f"--dataset {builder} needs --data-files")
    for file in files:
        if not any(char in file for char in "*?[") and "://" not in file and not Path(file).exists():
            raise InputError(f"{file}: no such data file")
    try:
        # The data files become the split named by --split (without a slice such as "[:10%]").
        mapped_files = {split.split("[", 1)[0]: files} if files else None
        with _datasets_errors_not_logged():  # they are reported below, on one line
            loaded = datasets.load_dataset(builder, config, data_files=mapped_files, split=split,
                                           streaming=streaming, cache_dir=cache_dir)
    except InputError:
        raise
    except StopIteration:  # the json builder on an empty file
        raise source.no_rows_error() from None
    except Exception as error:  # datasets raises many types (DatasetNotFoundError, ArrowInvalid, ConnectionError..)
        message = " ".join(str(error).split()) or type(error).__name__
        if "corresponds to no data" in message:  # the csv builder on a header without rows
            raise source.no_rows_error() from None
        raise _data_error(builder, files, f"could not load dataset {dataset!r} split {split!r}: {message}"
                          ) from None
    if not streaming and len(loaded) == 0:
        raise source.no_rows_error()
    return loaded


def _builder_and_files(dataset: str, data_files: Sequence[str] | None) -> tuple[str, list[str]]:
    """The builder `load_dataset` gets and its data files: a single data file's builder comes from its suffix
    (empty when the suffix tells none)."""
    path = Path(dataset)
    if path.is_file() and not data_files:
        return BUILDER_BY_SUFFIX.get(path.suffix.lower(), ""), [dataset]
    return dataset, list(data_files or [])


def _data_error(builder: str, files: Sequence[str], message: str) -> InputError:
    """An error reading data files: where the first JSON error of `files` is, for the json builder (datasets says
    only "An error occurred while generating the dataset", or a row number in a chunk), else `message`."""
    where = first_json_error(files) if builder == "json" else None
    return InputError(where if where is not None else message)


def read_batches(batches: Iterator[T], source: DatasetSource) -> Iterator[T]:
    """The batches of a split's `iter()`, with an error raised while reading them (a streamed split reads its data
    files only as it goes) turned into an InputError that says where, as `load_text_dataset` does for an error
    while loading, and not also logged by datasets."""
    while True:
        try:
            with _datasets_errors_not_logged():
                batch = next(batches)
        except StopIteration:
            return
        except (InputError, MemoryError):  # said as they are (out of memory, with what to try)
            raise
        except Exception as error:  # datasets and pyarrow raise many types (ArrowInvalid, JSONDecodeError, ...)
            message = " ".join(str(error).split()) or type(error).__name__
            builder, files = _builder_and_files(source.name, source.data_files)
            raise _data_error(builder, files, f"could not read {source.describe()}: {message}") from None
        yield batch


@contextmanager
def _datasets_errors_not_logged() -> Iterator[None]:
    import datasets

    level = datasets.logging.get_verbosity()
    datasets.logging.set_verbosity(datasets.logging.CRITICAL + 1)
    try:
        yield
    finally:
        datasets.logging.set_verbosity(level)


def first_json_error(files: Sequence[str]) -> str | None:
    """Where the first JSON error of the local data `files` is ("FILE: line N: ..."), or None if none is found.

    A file that starts with `[` is one JSON document; any other is JSON lines, one object per line (blank lines
    allowed). Globs are expanded; URLs and compressed files are not read. Reads until the first error, so a bad line
    deep in a large file takes a while to find: this runs only after loading has failed.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "docs.jsonl"
    >>> _ = path.write_text('{"text": "a"}\\n\\n{"text": "b" "c"}\\n')
    >>> first_json_error([str(path)]).split(": ", 1)[1]
    "line 3: not valid JSON (Expecting ',' delimiter at column 14)"
    """
    import glob

    for pattern in files:
        if "://" in pattern:
            continue
        for name in sorted(glob.glob(pattern)) if any(char in pattern for char in "*?[") else [pattern]:
            if Path(name).suffix.lower() in (".gz", ".bz2", ".xz", ".zst", ".zip", ".lz4"):
                continue
            try:
                where = _json_error_in(Path(name))
            except (OSError, UnicodeDecodeError):
                continue
            if where is not None:
                return f"{name}: {where}"
    return None


def _json_error_in(path: Path) -> str | None:
    with open(path, encoding="utf-8") as file:
        start = file.read(4096).lstrip()
        file.seek(0)
        if start.startswith("["):
            try:
                json.load(file)
            except json.JSONDecodeError as error:
                return f"line {error.lineno}, column {error.colno}: not valid JSON ({error.msg})"
            return None
        for number, line in enumerate(file, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line.rstrip("\r\n"))  # columns of this line, not of a line after its newline
            except json.JSONDecodeError as error:
                # json's messages that end in "at" ("Unterminated string starting at") take the column as is.
                return f"line {number}: not valid JSON ({error.msg.removesuffix(' at')} at column {error.colno})"
            if not isinstance(row, dict):
                return f"line {number}: a row of JSON lines must be an object, got {type(row).__name__}"
    return None


def _load_saved(path: Path, source: DatasetSource, streaming: bool) -> Any:
    """A `save_to_disk` Dataset, or one split of a DatasetDict (only that split is opened)."""
    import datasets

    dict_file = path / "dataset_dict.json"
    if dict_file.is_file():
        splits = _read_json(dict_file).get("splits") or []
        if source.split not in splits:
            raise InputError(f"{path}: no split {source.split!r}; the saved DatasetDict has: {', '.join(splits)}")
        path = path / source.split
    # A saved Dataset without rows has no data files, which load_from_disk fails on with an IndexError.
    if (path / "state.json").is_file() and _read_json(path / "state.json").get("_data_files") == []:
        raise source.no_rows_error()
    try:
        loaded = datasets.load_from_disk(str(path))
    except Exception as error:
        message = " ".join(str(error).split()) or type(error).__name__
        raise InputError(f"{path}: could not load the saved dataset: {message}") from None
    if len(loaded) == 0:
        raise source.no_rows_error()
    return loaded.to_iterable_dataset() if streaming else loaded


def _read_json(path: Path) -> dict[str, Any]:
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise InputError(f"{path}: not a readable JSON file ({error})") from None
    if not isinstance(content, dict):
        raise InputError(f"{path}: expected a JSON object")
    return content


@contextmanager
def datasets_progress_bars(enabled: bool) -> Iterator[None]:
    """Turn off the progress bars of `datasets` (loading, `map`) inside the block unless `enabled`."""
    import datasets

    were_enabled = datasets.is_progress_bar_enabled()
    if not enabled:
        datasets.disable_progress_bars()
    try:
        yield
    finally:
        if were_enabled:
            datasets.enable_progress_bars()


def check_text(row: int, text_column: str, value: Any) -> None:
    """InputError naming the row unless `value` is a string."""
    if not isinstance(value, str):
        preview = repr(value)
        preview = preview if len(preview) <= 60 else preview[:57] + "..."
        raise InputError(f"row {row} of column {text_column!r} is {type(value).__name__} {preview}, not a string")


class RowTexts:
    """The documents of a loaded split, one per row of `text_column`, read in batches; `num_rows` and `num_bytes`
    (UTF-8) count those seen.

    Iterating a streaming split holds one batch of rows at a time, so training from it runs in bounded memory.
    """

    def __init__(self, data: Any, source: DatasetSource, batch_size: int = 1000) -> None:
        self.data, self.source, self.batch_size = data, source, batch_size
        self.num_rows = self.num_bytes = 0
        columns = getattr(data, "column_names", None)
        if columns is not None and source.text_column not in columns:
            raise missing_column_error(source.text_column, columns)

    def __iter__(self) -> Iterator[str]:
        data = self.data.select_columns([self.source.text_column]) if not self.source.streaming else self.data
        for batch in read_batches(iter(data.iter(batch_size=self.batch_size)), self.source):
            if self.source.text_column not in batch:
                raise missing_column_error(self.source.text_column, list(batch))
            for text in batch[self.source.text_column]:
                check_text(self.num_rows, self.source.text_column, text)
                self.num_rows += 1
                self.num_bytes += len(text.encode("utf-8", "surrogatepass"))
                yield text
        if self.num_rows == 0:
            raise self.source.no_rows_error()


class SizedRowTexts(RowTexts):
    """`RowTexts` of a split that is not streamed, so its length is known (for progress bars)."""

    def __len__(self) -> int:
        return len(self.data)


def row_texts(data: Any, source: DatasetSource, batch_size: int = 1000) -> RowTexts:
    """The documents of a loaded split: `SizedRowTexts` unless it is streamed."""
    return (RowTexts if source.streaming else SizedRowTexts)(data, source, batch_size)


def missing_column_error(text_column: str, columns: Sequence[str]) -> InputError:
    return InputError(f"no column {text_column!r} in the dataset; its columns are: {', '.join(columns)}")


def is_saved_dataset(path: Path) -> bool:
    """Whether `path` is a directory written by `datasets`' `save_to_disk` (a Dataset or a DatasetDict)."""
    return path.is_dir() and ((path / "state.json").is_file() or (path / "dataset_dict.json").is_file())


def metadata_of(source: DatasetSource, num_rows: int) -> dict[str, Any]:
    """What a training record says about the dataset it came from.

    >>> metadata_of(DatasetSource("wikitext", config="wikitext-2-raw-v1"), 36718)["num_rows"]
    36718
    """
    return {"name": source.name, "config": source.config, "data_files": list(source.data_files),
            "split": source.split, "text_column": source.text_column, "num_rows": num_rows}

