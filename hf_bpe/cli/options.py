"""Options that several commands share: where a dataset comes from, which engine runs the work, how many worker
processes, progress bars.
"""

from __future__ import annotations

import argparse

from hf_bpe.cluster.session import ENGINES, RAY_INSTALL_HINT, check_engine
from hf_bpe.common.errors import InputError


def add_dataset_arguments(parser: argparse.ArgumentParser, *, required: bool) -> None:
    """The dataset options, the same for `hf-bpe train --dataset` and `hf-bpe tokenize-dataset`."""
    parser.add_argument("--dataset", required=required, metavar="NAME_OR_PATH",
                        help="a save_to_disk directory, a builder (json, csv, parquet, text) with --data-files, "
                             "a data file, or a Hub dataset name" + ("" if required else " (instead of INPUT files)"))
    parser.add_argument("--data-files", nargs="+", metavar="F", help="data files for a builder (globs allowed)")
    parser.add_argument("--config", metavar="NAME", help="dataset configuration name (Hub datasets; default: none)")
    parser.add_argument("--split", default="train", metavar="S",
                        help="split to read" + (", also the output name OUT/S.bin" if required else "")
                             + " (default: %(default)s)")
    parser.add_argument("--text-column", default="text", metavar="C",
                        help="column holding the documents, one document per row (default: %(default)s)")
    parser.add_argument("--streaming", action="store_true",
                        help="stream the dataset (IterableDataset): rows are read as they are used, in bounded "
                             "memory (default: off)")
    parser.add_argument("--cache-dir", metavar="DIR", help="datasets cache directory (default: HF_DATASETS_CACHE)")


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    """`--engine` and `--ray-address`, the same for `hf-bpe train` and `hf-bpe tokenize-dataset`."""
    parser.add_argument("--engine", choices=ENGINES, default="local",
                        help="where the work runs: worker processes on this machine (local) or a Ray cluster (ray, "
                             f"needs {RAY_INSTALL_HINT}); both give identical results (default: %(default)s)")
    parser.add_argument("--ray-address", metavar="ADDRESS",
                        help="the Ray cluster to join, e.g. 10.0.0.1:6379 or ray://host:10001 (default: RAY_ADDRESS, "
                             "else a local cluster started for the run); only with --engine ray")


def check_engine_arguments(args: argparse.Namespace) -> None:
    """InputError for --ray-address without --engine ray, or --engine ray without ray installed (before any work)."""
    if args.ray_address is not None and args.engine != "ray":
        raise InputError("--ray-address needs --engine ray")
    check_engine(args.engine, args.ray_address, asked_as="--engine ray")


def add_progress_argument(parser: argparse.ArgumentParser) -> None:
    """`--no-progress`, for the commands whose bars show only on a terminal."""
    parser.add_argument("--no-progress", action="store_true", help="do not show progress bars (default: shown on a "
                                                                     "terminal)")


def check_workers(workers: int | None) -> None:
    """InputError for a `--workers` below 1 (None: the default)."""
    if workers is not None and workers < 1:
        raise InputError(f"--workers must be at least 1, got {workers}")
