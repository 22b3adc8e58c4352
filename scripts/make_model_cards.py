"""Train the tokenizers we recommend and regenerate their model cards in model_cards/<name>/README.md.

    python scripts/make_model_cards.py --shared $SHARED/corpora [--only python-docs-8k]

Each tokenizer is trained with `hf-bpe train` (hf_bpe.train_bpe, then save_tokenizer_directory and
hf_bpe_training.json, token_counts.npy) into a temporary directory; the card is then rewritten with its evaluation
corpora, the gpt2 baseline and languages (hf_bpe.evaluation.card.write_model_card, which draws the plots when matplotlib
is installed) and only README.md and the plots (*.png) are copied here, not the tokenizer files. Corpora that
are not found (without --shared) are skipped, and so are tokenizers whose training corpus is missing.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hf_bpe.cli.main import main as hf_bpe_main
from hf_bpe.cli.train import shipped_corpus
from hf_bpe.evaluation.card import write_model_card

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class CardSpec:
    name: str
    title: str
    corpora: tuple[str, ...]  # file names: "python_docs_sample.txt" is the shipped corpus, the rest are in --shared
    vocab_size: int
    language: tuple[str, ...]
    eval_corpora: tuple[str, ...]


CARDS = (
    CardSpec("python-docs-8k", "python-docs-8k: a small English byte-level BPE tokenizer",
             ("python_docs_sample.txt",), 8192, ("en",),
             ("python_docs_sample.txt", "en_pydocs.txt", "en_gcide.txt", "multi_manpages.txt")),
    CardSpec("english-32k", "english-32k: an English byte-level BPE tokenizer for prose and technical text",
             ("en_gcide.txt", "en_pydocs.txt"), 32768, ("en",),
             ("en_gcide.txt", "en_pydocs.txt", "python_docs_sample.txt", "multi_manpages.txt")),
    CardSpec("manpages-multilingual-32k", "manpages-multilingual-32k: a multilingual byte-level BPE tokenizer",
             ("multi_manpages.txt",), 32000, ("en", "de", "fr", "ru", "ja", "zh"),
             ("multi_manpages.txt", "en_pydocs.txt", "en_gcide.txt", "python_docs_sample.txt")),
)


def find_corpus(name: str, shared: Path | None) -> Path | None:
    if name == shipped_corpus().name:
        return shipped_corpus()
    path = shared / name if shared else None
    return path if path and path.is_file() else None


def make_card(spec: CardSpec, shared: Path | None, out_root: Path, workers: int | None) -> Path | None:
    corpora = [find_corpus(name, shared) for name in spec.corpora]
    if None in corpora:
        print(f"{spec.name}: skipped, training corpus {spec.corpora} not found (pass --shared DIR)")
        return None
    eval_corpora = [path for path in (find_corpus(name, shared) for name in spec.eval_corpora) if path]
    with tempfile.TemporaryDirectory(prefix=f"{spec.name}-") as scratch:
        tokenizer_dir = Path(scratch) / spec.name
        arguments = ["train", *map(str, corpora), "--vocab-size", str(spec.vocab_size), "--out", str(tokenizer_dir),
                     "--no-progress"]
        if workers:
            arguments += ["--workers", str(workers)]
        if hf_bpe_main(arguments) != 0:
            raise SystemExit(f"{spec.name}: training failed")
        card = write_model_card(tokenizer_dir, eval_corpora=eval_corpora, language=spec.language, title=spec.title,
                                progress=False)
        target = out_root / spec.name / "README.md"
        target.parent.mkdir(parents=True, exist_ok=True)
        for old_plot in target.parent.glob("*.png"):
            old_plot.unlink()
        for plot in tokenizer_dir.glob("*.png"):  # the plots the card shows (relative links, as on the Hub)
            shutil.copyfile(plot, target.parent / plot.name)
        shutil.copyfile(card, target)
    print(f"{spec.name}: wrote {target.relative_to(REPO) if target.is_relative_to(REPO) else target}")
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared", type=Path, help="directory with en_pydocs.txt, en_gcide.txt, multi_manpages.txt")
    parser.add_argument("--only", action="append", choices=[spec.name for spec in CARDS], help="cards to make")
    parser.add_argument("--workers", type=int, help="training processes (default: all cores)")
    parser.add_argument("--out", type=Path, default=REPO / "model_cards", help="where the card folders go")
    args = parser.parse_args()
    for spec in CARDS:
        if not args.only or spec.name in args.only:
            make_card(spec, args.shared, args.out, args.workers)


if __name__ == "__main__":
    main()
