"""SuperBPE's gain against its transition point, as the paper's figure draws it: train at one vocab size with
several transition points, and measure bytes per token on text held out from training.

    python scripts/superword_curve.py $SHARED/corpora/*.txt --vocab-size 32000 \
        --json docs/results/superword_curve.json --plot docs/superword.png
    python scripts/superword_curve.py tests/fixtures/hf_corpora_sample.txt --vocab-size 2000 \
        --transitions 1500 1800 2000 --plot /tmp/curve.png

For each corpus (documents separated by <|endoftext|>), the last `--held-out` share of its documents is held out and
the rest trained on, once per transition point (`--transitions`, absolute sizes; by default 60% to 100% of the vocab
size: 100% is plain BPE). Each tokenizer is evaluated (`hf_bpe.evaluation.evaluate`, as `hf-bpe eval` does) on the
corpus's held-out documents and on `packages.txt`, text that none of the corpora hold: the descriptions (the
METADATA long descriptions, mostly READMEs) of the Python packages installed beside hf_bpe, written by
`package_descriptions`. `--json FILE` appends one record per corpus, transition point and evaluation text
(`bench_results.append_result`, kind "superword_curve"); `--plot FILE` draws bytes per token against the transition
point, one line per corpus and evaluation text, plain BPE's value as a dotted line.
"""

from __future__ import annotations

import argparse
import time
from importlib import metadata
from pathlib import Path
from tempfile import TemporaryDirectory

from bench_results import append_result

SPECIAL_TOKENS = ["<|endoftext|>"]
DEFAULT_SHARES = (0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0)


def package_descriptions(path: Path) -> Path:
    """Write the long descriptions of the installed Python packages, one document each (sorted by name), to `path`."""
    texts = {}
    for distribution in metadata.distributions():
        description = distribution.metadata.get_payload() or distribution.metadata.get("Description") or ""
        name = distribution.metadata.get("Name") or ""
        if description.strip() and name not in texts:
            texts[name] = description.strip()
    path.write_text(SPECIAL_TOKENS[0].join(texts[name] for name in sorted(texts)), encoding="utf-8")
    return path


def split_corpus(corpus: Path, held_out: float, directory: Path) -> tuple[Path, Path]:
    """The corpus's documents cut into a training file and a held-out file (its last `held_out` share)."""
    documents = corpus.read_text(encoding="utf-8").split(SPECIAL_TOKENS[0])
    cut = max(1, round(len(documents) * (1 - held_out)))
    train, test = directory / f"{corpus.stem}.train.txt", directory / f"{corpus.stem}.held_out.txt"
    train.write_text(SPECIAL_TOKENS[0].join(documents[:cut]), encoding="utf-8")
    test.write_text(SPECIAL_TOKENS[0].join(documents[cut:]), encoding="utf-8")
    return train, test


def measure(args: argparse.Namespace) -> list[dict]:
    from hf_bpe import Tokenizer, train_bpe
    from hf_bpe.evaluation.baselines import NamedTokenizer
    from hf_bpe.evaluation.evaluate import evaluate

    transitions = sorted(args.transitions or {round(share * args.vocab_size) for share in DEFAULT_SHARES})
    records = []
    with TemporaryDirectory(prefix="superword_curve_") as scratch:
        packages = package_descriptions(Path(scratch) / "packages.txt")
        for corpus in map(Path, args.corpus):
            train, held_out = split_corpus(corpus, args.held_out, Path(scratch))
            for transition in transitions:
                stages = {} if transition >= args.vocab_size else {"superword_from": transition}
                start = time.perf_counter()
                vocab, merges = train_bpe(train, args.vocab_size, SPECIAL_TOKENS, num_workers=args.workers,
                                          progress=False, **stages)
                seconds = time.perf_counter() - start
                tokenizer = Tokenizer(vocab, merges, SPECIAL_TOKENS, pattern="superword" if stages else None)
                named = NamedTokenizer(f"{corpus.stem}-t{transition}", tokenizer)
                for result in evaluate([named], [held_out, packages], num_workers=args.workers):
                    record = {"corpus": corpus.name, "eval": "held-out" if result.corpus.path == held_out
                              else "packages", "vocab_size": args.vocab_size, "transition": transition,
                              "bytes_per_token": result.bytes_per_token, "tokens": result.num_tokens,
                              "eval_bytes": result.corpus.num_bytes, "training_seconds": seconds}
                    records.append(record)
                    append_result(args.json, "superword_curve", **record)
                    print(f"{corpus.name} t={transition}: {record['bytes_per_token']:.3f} bytes/token on "
                          f"{record['eval']} text ({seconds:.1f} s training)", flush=True)
    return records


def plot(records: list[dict], path: str) -> None:
    """Bytes per token against the transition point; plain BPE (transition = vocab size) as a dotted line."""
    from hf_bpe.evaluation.plots import require_matplotlib

    require_matplotlib("--plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.2))
    lines = sorted({(record["corpus"], record["eval"]) for record in records})
    for corpus, held in lines:
        points = sorted((record["transition"], record["bytes_per_token"]) for record in records
                        if (record["corpus"], record["eval"]) == (corpus, held))
        drawn = axes.plot([t for t, _ in points], [value for _, value in points], marker="o",
                          label=f"trained on {corpus}, {held} text")
        plain = [value for t, value in points if t >= records[0]["vocab_size"]]
        if plain:
            axes.axhline(plain[0], linestyle=":", color=drawn[0].get_color(), linewidth=1)
    axes.set_xlabel(f"transition point t (vocab size {records[0]['vocab_size']:,}; t = vocab size is plain BPE)")
    axes.set_ylabel("bytes per token (higher: fewer tokens)")
    axes.set_title("SuperBPE: encoding efficiency against the transition point")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", nargs="+", help="UTF-8 text files, documents separated by <|endoftext|>")
    parser.add_argument("--vocab-size", type=int, default=32000)
    parser.add_argument("--transitions", type=int, nargs="+", metavar="T",
                        help="transition points (default: 60%%, 70%%, 80%%, 85%%, 90%%, 95%% and 100%% of the "
                             "vocab size)")
    parser.add_argument("--held-out", type=float, default=0.1, help="the share of documents held out (default 0.1)")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--json", help="append the records to this JSON file")
    parser.add_argument("--plot", help="draw the curve into this PNG file")
    args = parser.parse_args()
    records = measure(args)
    if args.plot:
        plot(records, args.plot)


if __name__ == "__main__":
    main()
