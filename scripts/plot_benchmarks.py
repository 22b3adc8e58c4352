"""Draw the benchmark figures of docs/ from the JSON results the benchmark scripts write (`--json`).

    python scripts/plot_benchmarks.py docs/results/*.json --out docs

Needs matplotlib (`pip install "hf_bpe[plots]"`). Each figure is drawn from the records of one kind; where a
measurement was repeated, the newest record of each (corpus, tool) counts. A figure whose records are missing is
skipped with a note, never drawn from other numbers:

- `training.png` (records "train", from bench_train.py): wall time and peak memory against corpus size, per tool;
- `long_words.png` ("long_word", bench_long_words.py): training time against the length of one word, log-log;
- `encoding.png` ("encode", bench_encode.py): MB/s per corpus for hf_bpe, tiktoken and HF `tokenizers`;
- `ray.png` ("ray", bench_ray.py): the Ray engine against the local one as the input grows.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from bench_results import read_results

Record = dict[str, Any]


def newest(records: Iterable[Record], key: Callable[[Record], tuple]) -> list[Record]:
    """The newest record for each key, in the order the keys first appear."""
    chosen: dict[tuple, Record] = {}
    for record in records:
        chosen[key(record)] = record  # records are appended in time order
    return list(chosen.values())


def stamp(records: list[Record]) -> str:
    """The figure's footnote: commits, dates and machine of its records."""
    commits = sorted({record["commit"] + ("+" if record.get("dirty") else "") for record in records})
    dates = sorted({record["date"][:10] for record in records})
    return f"{records[0]['machine']}; {', '.join(dates)}; commit {', '.join(commits)}"


def plot_training(records: list[Record], out: Path, plt: Any) -> Path:
    records = newest(records, lambda r: (r["corpus"], r["tool"], r.get("pattern"), r.get("vocab_size")))
    by_tool: dict[str, list[Record]] = defaultdict(list)
    for record in records:  # one line per tool and pattern
        pattern = record.get("pattern") or "gpt2"
        by_tool[record["tool"] + ("" if pattern == "gpt2" else f", {pattern}")].append(record)
    figure, (time_axes, memory_axes) = plt.subplots(1, 2, figsize=(10, 4))
    for tool, runs in sorted(by_tool.items()):
        runs.sort(key=lambda r: r["corpus_bytes"])
        sizes = [r["corpus_bytes"] / 1e9 for r in runs]
        time_axes.plot(sizes, [r["seconds"] for r in runs], marker="o", label=tool)
        memory_axes.plot(sizes, [r["peak_mb"] for r in runs], marker="o", label=tool)
    time_axes.set(xlabel="corpus (GB)", ylabel="wall time (s)", title="Training time")
    memory_axes.set(xlabel="corpus (GB)", ylabel="peak RSS of the process tree (MB)", title="Peak memory")
    for axes in (time_axes, memory_axes):
        axes.grid(alpha=0.3)
        axes.legend()
    return save(figure, out / "training.png", stamp(records), plt)


def plot_long_words(records: list[Record], out: Path, plt: Any) -> Path:
    records = sorted(newest(records, lambda r: (r["word_bytes"], r["vocab_size"])), key=lambda r: r["word_bytes"])
    figure, axes = plt.subplots(figsize=(5, 4))
    sizes = [r["word_bytes"] / 1e6 for r in records]
    axes.loglog(sizes, [r["seconds"] for r in records], marker="o", label="hf_bpe")
    first = records[0]
    axes.loglog(sizes, [first["seconds"] * size / sizes[0] for size in sizes], linestyle="--", color="gray",
                label="linear")
    axes.set(xlabel="one word (MB of letters)", ylabel="train_bpe time (s)",
             title=f"One long word, vocab {first['vocab_size']}")
    axes.grid(alpha=0.3, which="both")
    axes.legend()
    return save(figure, out / "long_words.png", stamp(records), plt)


def plot_encoding(records: list[Record], out: Path, plt: Any) -> Path:
    records = newest(records, lambda r: (r["corpus"], r["contender"]))
    corpora = list(dict.fromkeys(r["corpus"] for r in records))
    contenders = list(dict.fromkeys(r["contender"] for r in records))
    speed = {(r["corpus"], r["contender"]): r["megabytes_per_second"] for r in records}
    figure, axes = plt.subplots(figsize=(9, 4))
    width = 0.8 / len(contenders)
    for index, contender in enumerate(contenders):
        axes.bar([position + index * width for position in range(len(corpora))],
                 [speed.get((corpus, contender), 0) for corpus in corpora], width, label=contender)
    axes.set_xticks([position + 0.4 - width / 2 for position in range(len(corpora))], corpora)
    axes.set(ylabel="MB/s (one thread unless marked)", title="Encoding speed")
    axes.grid(alpha=0.3, axis="y")
    axes.legend(fontsize="small")
    return save(figure, out / "encoding.png", stamp(records), plt)


def input_bytes(record: Record) -> int:
    """The size of a Ray benchmark's input: the JSON lines of tokenize-dataset, or the text files counted."""
    return record.get("corpus_bytes") or record["jsonl_bytes"]


def plot_ray(records: list[Record], out: Path, plt: Any) -> Path:
    records = newest(records, lambda r: (r["work"], str(r["corpus"]), r["engine"]))  # counting: a list of files
    figure, axes = plt.subplots(figsize=(6, 4))
    lines: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for record in records:
        lines[record["work"].split()[0], record["engine"]].append(record)  # "tokenize-dataset FILE (...)" -> command
    for (work, engine), runs in sorted(lines.items()):
        runs.sort(key=input_bytes)
        axes.plot([input_bytes(r) / 1e9 for r in runs], [r["seconds"] for r in runs], marker="o",
                  linestyle="-" if engine == "ray" else "--", label=f"{work}, {engine}")
    axes.set(xlabel="input (GB)", ylabel="wall time (s)", title="Ray engine against the local engine")
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small")
    return save(figure, out / "ray.png", stamp(records), plt)


def save(figure: Any, path: Path, footnote: str, plt: Any) -> Path:
    figure.text(0.01, 0.01, footnote, fontsize=7, color="gray")
    figure.tight_layout(rect=(0, 0.04, 1, 1))
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


FIGURES = {"train": plot_training, "long_word": plot_long_words, "encode": plot_encoding, "ray": plot_ray}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+", type=Path, help="JSON files written by the benchmark scripts' --json")
    parser.add_argument("--out", type=Path, default=Path("docs"), help="where the PNGs go (default: docs)")
    args = parser.parse_args()
    try:
        import matplotlib
    except ImportError:
        raise SystemExit('plot_benchmarks.py needs matplotlib: pip install "hf_bpe[plots]"') from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = read_results(*args.results)
    for kind, plot in FIGURES.items():
        chosen = [record for record in records if record["kind"] == kind]
        if chosen:
            print(f"wrote {plot(chosen, args.out, plt)} from {len(chosen)} records")
        else:
            print(f"no {kind!r} records: its figure is not drawn")


if __name__ == "__main__":
    main()
