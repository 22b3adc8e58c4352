"""Benchmark parity-aware training (issue 35) on the Debian handbook's parallel corpus: hf_bpe's plain training,
hf_bpe's parity-aware training and HF tokenizers' ParityBpeTrainer on the same text to the same vocab sizes, in the
same run, then each tokenizer's fairness on the held-out test split.

    scripts/build_handbook_parallel.sh                       # the corpus, once (~/.cache/hf_bpe_corpora/handbook)
    python scripts/bench_parity.py --json docs/results/parity.json --markdown parity.md --keep runs/parity
    python scripts/bench_parity.py --languages en fr de --vocab-size 2000 --dry-run
    python scripts/bench_parity.py --languages en fr de ja --vocab-size 2000 --tools plain hf_parity

The bounds it checks (issue 35): parity training at most 1.5x the time of hf_bpe's plain training of the same text
to the same size and at most ParityBpeTrainer's peak memory; on held-out parallel text, the parity-aware tokenizer's
fairness figure better (lower) than plain training's, at the cost in compression for the best-served language it
reports.

The corpus is `--corpus-dir` (default ${XDG_CACHE_HOME:-~/.cache}/hf_bpe_corpora/handbook): train/LANG.txt,
dev/LANG.txt and test/LANG.txt per language, the same pages in every language, documents separated by
<|endoftext|> (scripts/build_handbook_parallel.sh). `--languages` picks some (default: all of manifest.json's, the
26 of the handbook); `--max-untranslated S` keeps those whose prose is at most the share S identical to English
(manifest.json's `prose_identical_to_english`: many of the handbook's translations are incomplete).

The tools (`--tools`, default all three), each training in a fresh process:

- `plain`: `hf-bpe train en=train/en.txt fr=train/fr.txt ... --vocab-size V --out DIR --verbose`, the named sources
  without weights (the pooled text). Until `hf-bpe train` takes NAME=PATH sources (until its --help says NAME=), the
  same files are given as bare paths, which is the same training, and the record says `"sources": "bare"`;
- `parity`: the same with `--parity --dev en=dev/en.txt --dev fr=dev/fr.txt ...`; skipped (with a note) until
  `hf-bpe train --help` offers --parity;
- `hf_parity`: ParityBpeTrainer (tokenizers 0.23) in a child of this script: GPT-2's ByteLevel pre-tokenizer, the
  256 bytes as its initial alphabet, <|endoftext|> as its special token and `num_merges` = V - 256 - 1 (the same
  number of merges as hf_bpe's, the same vocab), called as tests/train/test_parity_reference.py calls it:
  `trainer.train_from_iterator(tokenizer, train_iterators, dev_iterators, None)`, one iterator per language of its
  documents (split at <|endoftext|>, read from the file as they are consumed), the dev sets driving the selection.
  Saved as DIR/tokenizer.json.

Each is measured as scripts/bench_train.py and scripts/bench_superword.py measure (`tree_memory.run_measured`): the
wall time of the whole process, the peak of its process tree's summed PSS (sampled every 50 ms) and the largest
process's RSS; and the training alone (hf-bpe's counting and merging phases, as `--verbose` prints them; the
`train_from_iterator` call). The tools alternate, and which goes first alternates between `--repeats`. Medians go
into the ratios. `--workers N` gives hf-bpe N processes and ParityBpeTrainer N threads (RAYON_NUM_THREADS).

Then, not timed, `hf-bpe eval plain parity --baseline hf_parity --corpus en=test/en.txt ... --json` (the
per-language report, hf_bpe/evaluation/languages.py; the ParityBpeTrainer directory is a baseline, which
`tokenizers` encodes) gives each tokenizer's tokens and bytes per token per language on the test split, and its
fairness: the most tokens a language takes over the fewest (1 is parity). The best-served language is the one plain
training gives the fewest tokens; its compression cost is its bytes per token under parity-aware training against
plain's.

Printed: a Markdown table per vocab size (also written to `--markdown FILE`). `--json FILE` appends one record per
tool and run (`bench_results.append_result`, kind "parity") and one per vocab size with the medians, the ratios and,
under "test", the fairness figures and per-language counts (kind "parity_summary"). `--keep DIR` keeps the trained
tokenizers, the eval JSON and (with matplotlib) the premiums plot in DIR/V/{plain,parity,hf_parity,eval.json,
premiums.png}.
`--dry-run` prints the commands, training nothing. Do not time on a loaded machine (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from bench_results import append_result
from bench_train import cli_result
from tree_memory import run_measured

SEPARATOR = "<|endoftext|>"
SPECIAL_TOKENS = [SEPARATOR]
TOOLS = ("plain", "parity", "hf_parity")
LABELS = {"plain": "hf_bpe plain", "parity": "hf_bpe parity", "hf_parity": "ParityBpeTrainer"}
SPLITS = ("train", "dev", "test")
TIME_BOUND, MEMORY_BOUND = 1.5, 1.0  # parity / plain time, parity / ParityBpeTrainer peak PSS
DEFAULT_CORPUS = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hf_bpe_corpora" / "handbook"
READ_CHUNK = 1 << 20


def hf_bpe_command() -> str:
    """The hf-bpe script of this interpreter's environment (or the one on PATH)."""
    beside = Path(sys.executable).with_name("hf-bpe")
    return str(beside) if beside.exists() else "hf-bpe"


def cli_features() -> dict[str, bool]:
    """Which of issue 35's training options `hf-bpe train` offers now, from its --help."""
    try:
        usage = subprocess.run([hf_bpe_command(), "train", "--help"], capture_output=True, text=True).stdout
    except OSError:
        usage = ""
    return {"named_sources": "NAME=" in usage, "parity": "--parity" in usage}


def split_path(corpus: Path, split: str, language: str) -> Path:
    return corpus / split / f"{language}.txt"


def train_command(tool: str, corpus: Path, languages: list[str], vocab_size: int, out: Path, workers: int | None,
                  named: bool) -> list[str]:
    """The hf-bpe train command of `plain` or `parity`; with `named` False the sources are bare paths."""
    sources = [f"{language}={split_path(corpus, 'train', language)}" if named
               else str(split_path(corpus, "train", language)) for language in languages]
    command = [hf_bpe_command(), "train", *sources, "--vocab-size", str(vocab_size), "--out", str(out),
               "--no-progress", "--verbose"]
    if tool == "parity":
        command.append("--parity")
        for language in languages:
            command += ["--dev", f"{language}={split_path(corpus, 'dev', language)}"]
    return command + (["--workers", str(workers)] if workers else [])


def hf_parity_command(corpus: Path, languages: list[str], vocab_size: int, out: Path) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--child", "hf_parity", "--corpus-dir", str(corpus),
            "--languages", *languages, "--vocab-size", str(vocab_size), "--out", str(out)]


def eval_command(corpus: Path, languages: list[str], tokenizers: list[str], json_path: str,
                 plot: str | None, workers: int | None) -> list[str]:
    """`hf-bpe eval` of the hf_bpe directories and the ParityBpeTrainer baseline on the test split (run in the folder
    that holds the tokenizers, so that their names in the report are the tools')."""
    ours = [tool for tool in tokenizers if tool != "hf_parity"]
    command = [hf_bpe_command(), "eval", *ours]
    command += ["--baseline", "hf_parity"] if "hf_parity" in tokenizers else []
    command += ["--corpus", *(f"{language}={split_path(corpus, 'test', language)}" for language in languages),
                "--json", json_path, "--force", "--no-progress"]
    command += ["--plot", plot] if plot else []
    return command + (["--workers", str(workers)] if workers else [])


def documents(path: Path) -> Iterator[str]:
    """The file's documents (split at <|endoftext|>), read a chunk at a time as they are consumed."""
    with open(path, encoding="utf-8") as file:
        rest = ""
        while chunk := file.read(READ_CHUNK):
            parts = (rest + chunk).split(SEPARATOR)
            rest = parts.pop()
            yield from (part for part in parts if part)
        if rest:
            yield rest


def train_hf_parity(corpus: Path, languages: list[str], vocab_size: int, out: Path) -> dict:
    """ParityBpeTrainer on the train split, its selection driven by the dev split; saves out/tokenizer.json."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    num_merges = vocab_size - 256 - len(SPECIAL_TOKENS)
    trainer = trainers.ParityBpeTrainer(num_merges=num_merges, show_progress=False, special_tokens=SPECIAL_TOKENS,
                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    start = time.perf_counter()
    trainer.train_from_iterator(tokenizer, [documents(split_path(corpus, "train", language)) for language in languages],
                                [documents(split_path(corpus, "dev", language)) for language in languages], None)
    wall = time.perf_counter() - start
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(out / "tokenizer.json"))
    model = json.loads(tokenizer.to_str())["model"]
    return {"wall": wall, "num_merges": len(model["merges"]), "vocab": tokenizer.get_vocab_size()}


def run_tool(tool: str, args: argparse.Namespace, vocab_size: int, folder: Path, named: bool) -> dict:
    """One training in a fresh process, measured: its result, whole-process wall time and memory figures."""
    out = folder / tool
    if out.exists():
        shutil.rmtree(out)
    environment = dict(os.environ)
    if args.workers:
        environment["RAYON_NUM_THREADS"] = str(args.workers)
    if tool == "hf_parity":
        command = hf_parity_command(args.corpus_dir, args.languages, vocab_size, out)
    else:
        command = train_command(tool, args.corpus_dir, args.languages, vocab_size, out, args.workers, named)
    run = run_measured(command, environment)
    if run.returncode != 0:
        sys.exit(f"{tool} at {vocab_size} failed with exit code {run.returncode}:\n{shlex.join(command)}\n"
                 f"{run.errors[-2000:]}")
    if tool == "hf_parity":
        result = json.loads(run.output.strip().splitlines()[-1])
    else:
        result = cli_result(run.errors, str(out))
        result.pop("first_tokens", None)
    return {**result, "process_wall": run.wall, "peak_pss_mb": run.memory.pss / 1e6, "peak_mb": run.memory.rss / 1e6,
            "max_process_mb": run.max_process_bytes / 1e6}


def evaluate(args: argparse.Namespace, tools: list[str], folder: Path, vocab_size: int) -> dict:
    """The per-language report of the trained tokenizers on the test split (`hf-bpe eval --json`'s "languages")."""
    plot = None
    if args.keep:
        try:
            import matplotlib  # noqa: F401

            plot = "premiums.png"
        except ImportError:
            pass
    command = eval_command(args.corpus_dir, args.languages, tools, "eval.json", plot, args.workers)
    run = subprocess.run(command, cwd=folder, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"hf-bpe eval at {vocab_size} failed with exit code {run.returncode}:\n{shlex.join(command)}\n"
                 f"{run.stderr[-2000:]}")
    return json.loads((folder / "eval.json").read_text(encoding="utf-8"))["languages"]


def fairness_summary(report: dict, tools: list[str]) -> dict:
    """Per tool: fairness, the languages with the most and fewest tokens, tokens and bytes per token per language;
    and the best-served language under plain training with its bytes per token under each tool."""
    results = {(row["language"], row["tokenizer"]): row for row in report["results"]}
    languages = [corpus["name"] for corpus in report["corpora"]]
    summary: dict = {"languages": {corpus["name"]: {"bytes": corpus["bytes"]} for corpus in report["corpora"]},
                     "tools": {}}
    for entry in report["fairness"]:
        tool = entry["tokenizer"]
        summary["tools"][tool] = {
            "fairness": entry["fairness"], "most_tokens": entry["most_tokens"], "fewest_tokens": entry["fewest_tokens"],
            "tokens": {language: results[language, tool]["tokens"] for language in languages},
            "bytes_per_token": {language: results[language, tool]["bytes_per_token"] for language in languages}}
    if "plain" in summary["tools"]:
        best = summary["tools"]["plain"]["fewest_tokens"]
        plain_rate = summary["tools"]["plain"]["bytes_per_token"][best]
        summary["best_served"] = {
            "language": best,
            "bytes_per_token": {tool: figures["bytes_per_token"][best] for tool, figures in summary["tools"].items()},
            "compression_cost": {tool: round(1 - figures["bytes_per_token"][best] / plain_rate, 6)
                                 for tool, figures in summary["tools"].items() if tool != "plain"}}
    summary["tools"] = {tool: summary["tools"][tool] for tool in tools if tool in summary["tools"]}
    return summary


def markdown(vocab_size: int, languages: list[str], sizes: dict[str, int], medians: dict, ratios: dict,
             summary: dict, runs: int) -> str:
    tools = list(medians)
    lines = [f"### {len(languages)} languages, vocab {vocab_size:,}", "",
             f"Training on {sizes['train'] / 1e6:.1f} MB (dev {sizes['dev'] / 1e6:.1f} MB), evaluated on the test "
             f"split ({sizes['test'] / 1e6:.1f} MB); median of {runs} run{'s' * (runs > 1)}.", "",
             "| Trainer | Time, whole command (s) | Training (s) | Peak PSS (MB) | Fairness on test | Most tokens | "
             "Fewest tokens |", "|---|---:|---:|---:|---:|---|---|"]
    for tool in tools:
        figures = summary["tools"].get(tool, {})
        fairness = f"{figures['fairness']:.3f}" if figures else "n/a"
        lines.append(f"| {LABELS[tool]} | {medians[tool]['process_wall']:.2f} | {medians[tool]['wall']:.2f} | "
                     f"{medians[tool]['peak_pss_mb']:.0f} | {fairness} | `{figures.get('most_tokens', '')}` | "
                     f"`{figures.get('fewest_tokens', '')}` |")
    lines.append("")
    if "time_parity_over_plain" in ratios:
        lines.append(f"- Parity training's time over plain training's: {ratios['time_parity_over_plain']:.2f}x "
                     f"(bound: {TIME_BOUND}x)")
    if "memory_parity_over_hf_parity" in ratios:
        lines.append(f"- Parity training's peak memory over ParityBpeTrainer's: "
                     f"{ratios['memory_parity_over_hf_parity']:.2f}x (bound: {MEMORY_BOUND}x)")
    if "time_hf_parity_over_plain" in ratios:
        lines.append(f"- ParityBpeTrainer's time over plain training's: {ratios['time_hf_parity_over_plain']:.2f}x")
    tools_fairness = summary["tools"]
    if "plain" in tools_fairness:
        lines.append("- Fairness on test (the most tokens of a language over the fewest; lower is fairer): "
                     + ", ".join(f"{LABELS[tool]} {figures['fairness']:.3f}"
                                 for tool, figures in tools_fairness.items())
                     + (" (bound: parity's below plain's)" if "parity" in tools_fairness else ""))
        best = summary["best_served"]
        lines.append(f"- Best-served language under plain training: `{best['language']}`, bytes per token "
                     + ", ".join(f"{LABELS[tool]} {rate:.3f}" for tool, rate in best["bytes_per_token"].items())
                     + "; the bytes per token it loses against plain (its compression cost): "
                     + ", ".join(f"{LABELS[tool]} {cost:.1%}" for tool, cost in best["compression_cost"].items()))
    lines += ["", "| Language | Test bytes | " + " | ".join(f"{LABELS[tool]} tokens" for tool in tools_fairness)
              + " | " + " | ".join(f"{LABELS[tool]} bytes/token" for tool in tools_fairness) + " |",
              "|---|---:|" + "---:|" * (2 * len(tools_fairness))]
    for language in languages:
        lines.append(f"| `{language}` | {summary['languages'][language]['bytes']:,} | "
                     + " | ".join(f"{figures['tokens'][language]:,}" for figures in tools_fairness.values()) + " | "
                     + " | ".join(f"{figures['bytes_per_token'][language]:.3f}" for figures in tools_fairness.values())
                     + " |")
    return "\n".join(lines) + "\n"


def chosen_languages(args: argparse.Namespace) -> list[str]:
    """--languages, else manifest.json's; filtered by --max-untranslated."""
    manifest_path = args.corpus_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8")) if manifest_path.exists() else None
    if args.languages:
        languages = list(dict.fromkeys(args.languages))
    elif manifest is not None:
        languages = list(manifest["languages"])
    else:
        sys.exit(f"{manifest_path}: no such file; build the corpus (scripts/build_handbook_parallel.sh) or give "
                 "--languages")
    if args.max_untranslated is not None:
        if manifest is None:
            sys.exit(f"--max-untranslated needs {manifest_path}")
        known = manifest["languages"]  # a language it does not know is kept, for the missing files' error
        languages = [language for language in languages if language not in known
                     or known[language]["prose_identical_to_english"] <= args.max_untranslated]
    return languages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus-dir", type=Path, default=DEFAULT_CORPUS,
                        help=f"the parallel corpus (default: {DEFAULT_CORPUS})")
    parser.add_argument("--languages", nargs="+", help="languages to train on (default: all of manifest.json's)")
    parser.add_argument("--max-untranslated", type=float, metavar="S",
                        help="keep only languages whose prose is at most this share identical to English")
    parser.add_argument("--vocab-size", type=int, nargs="+", default=[32000, 64000])
    parser.add_argument("--tools", nargs="+", choices=TOOLS, default=list(TOOLS))
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--workers", type=int, help="hf-bpe's processes and ParityBpeTrainer's threads "
                        "(default: each tool's own, all CPUs)")
    parser.add_argument("--json", metavar="FILE", help="append the records to this JSON list")
    parser.add_argument("--markdown", metavar="FILE", help="also write the tables to this file")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="keep the tokenizers and eval outputs in DIR/V/")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, train nothing")
    parser.add_argument("--child", choices=["hf_parity"], help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.languages = chosen_languages(args)
    if args.child:
        print(json.dumps(train_hf_parity(args.corpus_dir, args.languages, args.vocab_size[0], args.out)))
        return
    if len(args.languages) < 2:
        sys.exit(f"parity needs two languages or more, got: {' '.join(args.languages) or 'none'}")
    features = cli_features()
    if args.dry_run:
        dry_run(args, features)
        return
    missing = [path for split in SPLITS for language in args.languages
               if not (path := split_path(args.corpus_dir, split, language)).is_file()]
    if missing:
        sys.exit(f"missing corpus files: {', '.join(map(str, missing[:5]))}; build them with "
                 "scripts/build_handbook_parallel.sh")
    tools = list(args.tools)
    if "parity" in tools and not features["parity"]:
        print("note: hf-bpe train has no --parity yet: skipping the parity tool", file=sys.stderr)
        tools.remove("parity")
    if not features["named_sources"] and set(tools) & {"plain", "parity"}:
        print("note: hf-bpe train takes no NAME=PATH sources yet: plain training gets the files as bare paths (the "
              "same pooled text)", file=sys.stderr)
    sizes = {split: sum(split_path(args.corpus_dir, split, language).stat().st_size for language in args.languages)
             for split in SPLITS}
    print(f"{args.corpus_dir}: {len(args.languages)} languages ({' '.join(args.languages)}); train "
          f"{sizes['train'] / 1e6:.1f} MB, dev {sizes['dev'] / 1e6:.1f} MB, test {sizes['test'] / 1e6:.1f} MB",
          flush=True)
    tables = []
    with tempfile.TemporaryDirectory(prefix="bench_parity_") as scratch:
        for vocab_size in args.vocab_size:
            folder = (args.keep or Path(scratch)) / str(vocab_size)
            folder.mkdir(parents=True, exist_ok=True)
            tables.append(bench_vocab(args, tools, features, sizes, vocab_size, folder))
    text = "\n".join(tables)
    print("\n" + text, end="")
    if args.markdown:
        Path(args.markdown).write_text(text, encoding="utf-8")


def bench_vocab(args: argparse.Namespace, tools: list[str], features: dict[str, bool], sizes: dict[str, int],
                vocab_size: int, folder: Path) -> str:
    """Train with each tool `--repeats` times at `vocab_size`, evaluate the last tokenizers; the Markdown table."""
    common = {"corpus": "debian_handbook", "languages": args.languages, "corpus_bytes": sizes,
              "vocab_size": vocab_size, "sources": "named" if features["named_sources"] else "bare"}
    runs: dict[str, list[dict]] = {tool: [] for tool in tools}
    for repeat in range(args.repeats):
        for tool in tools if repeat % 2 == 0 else tools[::-1]:
            result = run_tool(tool, args, vocab_size, folder, features["named_sources"])
            runs[tool].append(result)
            print(f"vocab {vocab_size} {LABELS[tool]:16} run {repeat + 1}: {result['process_wall']:8.2f} s whole "
                  f"({result['wall']:8.2f} s training), peak {result['peak_pss_mb']:7.0f} MB PSS "
                  f"({result['peak_mb']:.0f} MB RSS, largest process {result['max_process_mb']:.0f} MB), "
                  f"{result['num_merges']:,} merges", flush=True)
            append_result(args.json, "parity", **common, tool=tool, run=repeat, **result)
    fields = ("process_wall", "wall", "peak_pss_mb", "peak_mb", "max_process_mb")
    medians = {tool: {field: statistics.median(run[field] for run in results) for field in fields}
               for tool, results in runs.items()}
    ratios = {}
    if "parity" in medians and "plain" in medians:
        ratios["time_parity_over_plain"] = medians["parity"]["process_wall"] / medians["plain"]["process_wall"]
    if "parity" in medians and "hf_parity" in medians:
        ratios["memory_parity_over_hf_parity"] = medians["parity"]["peak_pss_mb"] / medians["hf_parity"]["peak_pss_mb"]
    if "hf_parity" in medians and "plain" in medians:
        ratios["time_hf_parity_over_plain"] = medians["hf_parity"]["process_wall"] / medians["plain"]["process_wall"]
    summary = fairness_summary(evaluate(args, tools, folder, vocab_size), tools)
    append_result(args.json, "parity_summary", **common, repeats=args.repeats, medians=medians, ratios=ratios,
                  test=summary)
    return markdown(vocab_size, args.languages, sizes, medians, ratios, summary, args.repeats)


def dry_run(args: argparse.Namespace, features: dict[str, bool]) -> None:
    """Print the commands a run would measure (hf-bpe's with the options issue 35 adds), then the eval command."""
    print(f"# hf-bpe train now: NAME=PATH sources {'yes' if features['named_sources'] else 'not yet'}, --parity "
          f"{'yes' if features['parity'] else 'not yet'}")
    for vocab_size in args.vocab_size:
        folder = (args.keep or Path("TMP")) / str(vocab_size)
        print(f"# vocab {vocab_size:,}: each training measured in a fresh process (whole wall time, peak summed PSS)")
        for tool in args.tools:
            command = (hf_parity_command(args.corpus_dir, args.languages, vocab_size, folder / tool)
                       if tool == "hf_parity" else
                       train_command(tool, args.corpus_dir, args.languages, vocab_size, folder / tool, args.workers,
                                     True))
            print(shlex.join(command))
        print(f"# then, in {folder}, not timed:")
        print(shlex.join(eval_command(args.corpus_dir, args.languages, list(args.tools), "eval.json",
                                      "premiums.png" if args.keep else None, args.workers)))


if __name__ == "__main__":
    main()
