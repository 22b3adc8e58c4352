"""The gain of extending GPT-2 on a language it encodes poorly, measured with `hf-bpe eval` before and after.

    python scripts/extension_gain.py --language ja --merges 8000 --work /tmp/gain --json gain.json
    python scripts/extension_gain.py --language ru --merges 500 --work /tmp/gain-ru     # a quick check

The procedure, each step a real `hf-bpe` command:

1. From the corpus (default: the shared `multi_manpages.txt`, documents separated by `<|endoftext|>`), take the
   documents in the language: those where at least `--share` of the word characters are of its script (ja:
   hiragana, katakana and CJK ideographs; ru: Cyrillic). Every `--heldout-every`-th of them is held out, the others
   are the training text (WORK/train.txt, WORK/heldout.txt).
2. `hf-bpe train WORK/train.txt --extend gpt2 --vocab-size 50257+MERGES --out WORK/gpt2-extended`.
3. `hf-bpe eval WORK/gpt2-extended --baseline gpt2 --corpus WORK/heldout.txt --json WORK/eval.json`: bytes per
   token of GPT-2 and of the extension on the held-out text.

It prints both, and the share of tokens the extension saves on the held-out text; `--json FILE` appends the record
(`bench_results.append_result`, kind "extension_gain").
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_results import REPO, append_result  # noqa: E402

EOT = "<|endoftext|>"
SCRIPTS = {"ja": "[\u3040-\u30ff\u4e00-\u9fff]", "ru": "[\u0400-\u04ff]"}
DEFAULT_CORPUS = REPO.parent / "shared" / "corpora" / "multi_manpages.txt"


def split_language(corpus: Path, language: str, share: float, heldout_every: int) -> tuple[list[str], list[str]]:
    """The documents in `language`, as (training, held out)."""
    script, word_char = re.compile(SCRIPTS[language]), re.compile(r"\w")
    chosen = [document for document in corpus.read_text(encoding="utf-8").split(EOT)
              if len(script.findall(document)) >= share * max(1, len(word_char.findall(document)))]
    heldout = chosen[::heldout_every]
    training = [document for index, document in enumerate(chosen) if index % heldout_every]
    return training, heldout


def hf_bpe(*arguments: str) -> None:
    command = [sys.executable, "-m", "hf_bpe.cli", *arguments]
    print("$ hf-bpe " + " ".join(arguments), flush=True)
    if subprocess.run(command, check=False).returncode != 0:
        raise SystemExit(f"extension_gain: hf-bpe {arguments[0]} failed")


def bytes_per_token(results: object, name: str) -> float:
    """The bytes per token of the tokenizer called `name` in `hf-bpe eval --json`'s results."""
    rows = results["results"] if isinstance(results, dict) and "results" in results else results
    for row in rows:  # type: ignore[union-attr]
        if row.get("tokenizer") == name:
            return float(row["bytes_per_token"])
    raise SystemExit(f"extension_gain: no result for {name} in hf-bpe eval's JSON")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--language", choices=sorted(SCRIPTS), default="ja")
    parser.add_argument("--share", type=float, default=0.15,
                        help="least share of a document's word characters in the language's script")
    parser.add_argument("--heldout-every", type=int, default=10)
    parser.add_argument("--merges", type=int, default=8000)
    parser.add_argument("--work", type=Path, required=True, help="a new directory for the texts and tokenizer")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--json", help="append the record to this JSON file")
    args = parser.parse_args()

    training, heldout = split_language(args.corpus, args.language, args.share, args.heldout_every)
    if not training or not heldout:
        raise SystemExit(f"extension_gain: too few {args.language} documents in {args.corpus}")
    args.work.mkdir(parents=True, exist_ok=False)
    train_path, heldout_path = args.work / "train.txt", args.work / "heldout.txt"
    train_path.write_text(EOT.join(training), encoding="utf-8")
    heldout_path.write_text(EOT.join(heldout), encoding="utf-8")
    extended, eval_json = args.work / "gpt2-extended", args.work / "eval.json"
    workers = [] if args.workers is None else ["--workers", str(args.workers)]
    hf_bpe("train", str(train_path), "--extend", "gpt2", "--vocab-size", str(50257 + args.merges), "--out",
           str(extended), "--no-progress", *workers)
    hf_bpe("eval", str(extended), "--baseline", "gpt2", "--corpus", str(heldout_path), "--json", str(eval_json),
           "--no-progress", *workers)
    results = json.loads(eval_json.read_text(encoding="utf-8"))
    before, after = bytes_per_token(results, "gpt2"), bytes_per_token(results, str(extended))
    saved = 1 - before / after
    print(f"{args.language}: GPT-2 {before:.3f} bytes per token, extended by {args.merges:,} merges {after:.3f} "
          f"({saved:.1%} fewer tokens on {heldout_path.stat().st_size:,} held-out bytes; trained on "
          f"{train_path.stat().st_size:,} bytes)")
    append_result(args.json, "extension_gain", corpus=args.corpus.name, language=args.language, merges=args.merges,
                  training_bytes=train_path.stat().st_size, heldout_bytes=heldout_path.stat().st_size,
                  gpt2_bytes_per_token=round(before, 4), extended_bytes_per_token=round(after, 4),
                  tokens_saved=round(saved, 4))


if __name__ == "__main__":
    main()
