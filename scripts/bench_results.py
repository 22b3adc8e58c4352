"""Benchmark results as JSON, so that docs/benchmarks.md's tables and the plots come from the same numbers.

Each benchmark script given `--json FILE` appends one record per measurement to FILE (a JSON list), stamped with what
a figure needs to be trusted again later: date, commit (and whether the tree had uncommitted changes), machine, load
average, Python and library versions, and the exact command. `scripts/plot_benchmarks.py` draws the figures in
docs/ from these files.

    from bench_results import append_result
    append_result(path, "train", corpus="linux_code.txt", corpus_bytes=..., tool="hf_bpe", seconds=58.1, peak_mb=435)
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
VERSIONED = ("hf_bpe", "tokenizers", "tiktoken", "transformers", "datasets", "numpy", "ray", "rustbpe", "bpeasy")


def environment() -> dict[str, Any]:
    """Where and when a measurement ran: the stamp every record carries."""
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return ""

    versions = {}
    for name in VERSIONED:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    cpu = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as file:
            cpu = next((line.split(":", 1)[1].strip() for line in file if line.startswith("model name")), "")
    except OSError:
        pass
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "commit": git("rev-parse", "--short", "HEAD"),
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        "machine": f"{cpu or platform.machine()}, {os.cpu_count()} cores",
        "load_average": [round(load, 2) for load in os.getloadavg()],
        "python": platform.python_version(),
        "versions": versions,
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
    }


def append_result(path: str | os.PathLike[str] | None, kind: str, **fields: Any) -> None:
    """Append `{"kind": kind, **fields, **environment()}` to the JSON list in `path` (created if missing); no-op
    without a path. The file is rewritten atomically, so an interrupted run leaves it whole."""
    from hf_bpe.common.files import write_text_atomically

    if path is None:
        return
    path = Path(path)
    records = json.loads(path.read_text(encoding="utf-8")) if path.exists() else []
    records.append({"kind": kind, **fields, **environment()})
    write_text_atomically(path, json.dumps(records, indent=1) + "\n")


def read_results(*paths: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every record of the given files, in order."""
    return [record for path in paths for record in json.loads(Path(path).read_text(encoding="utf-8"))]
