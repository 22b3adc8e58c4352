"""Plots of a tokenizer for its model card and `hf-bpe eval --plot`, drawn with matplotlib when it is installed.

matplotlib is an optional extra (`pip install 'hf_bpe[plots]'`), imported only inside these functions, and drawn
with its Agg canvas (no display, no pyplot state). Each plot is a PNG written atomically (a temporary file beside it,
then renamed):

- `plot_bytes_per_token`: bytes per token on each corpus, one bar per tokenizer (higher is better);
- `plot_premiums`: each language's tokens over the reference language's, one bar per tokenizer (1 is parity;
  hf_bpe.evaluation.languages);
- `plot_token_lengths`: how many tokens of the vocabulary have each length in bytes;
- `plot_coverage`: the share of a corpus's tokens that the k most frequent tokens make up, against k.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hf_bpe.common.errors import InputError
from hf_bpe.common.files import write_atomically

PLOTS_HINT = "pip install 'hf_bpe[plots]'"
# Token lengths past this many bytes share the last bar.
MAX_LENGTH_BAR = 24
_COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")


def matplotlib_available() -> bool:
    """Whether matplotlib can be imported (the `plots` extra)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def require_matplotlib(what: str) -> None:
    """InputError saying how to install matplotlib, unless it is installed (checked before long work)."""
    if not matplotlib_available():
        raise InputError(f"{what} needs matplotlib, which is not installed: {PLOTS_HINT}")


def plot_bytes_per_token(results: Sequence[Any], path: str | os.PathLike[str], title: str = "Bytes per token"
                         ) -> Path:
    """Grouped bars: for each corpus, the bytes per token of each tokenizer (`hf_bpe.evaluation.evaluate.Evaluation`
    results). Returns the PNG's path."""
    corpora = list(dict.fromkeys(result.corpus.path.name for result in results))
    names = list(dict.fromkeys(result.tokenizer.name for result in results))
    values = {(result.corpus.path.name, result.tokenizer.name): result.bytes_per_token for result in results}
    series = {name: [values.get((corpus, name), 0.0) for corpus in corpora] for name in names}
    figure, axes = _grouped_bars(corpora, series, "%.2f")
    axes.set_ylabel("UTF-8 bytes per token (higher is better)")
    axes.set_title(title)
    axes.legend(fontsize=8, loc="lower right")
    return _save(figure, path)


def plot_premiums(languages: Sequence[str], premiums: Mapping[str, Sequence[float]], reference: str,
                  path: str | os.PathLike[str], title: str = "Tokens per language on parallel text") -> Path:
    """Grouped bars: for each language, each tokenizer's tokens over those of the `reference` language (`premiums`:
    tokenizer label -> a value per language), with a line at 1 (parity)."""
    figure, axes = _grouped_bars(languages, premiums, "%.2f")
    axes.axhline(1.0, color="#444444", linestyle="--", linewidth=0.8)
    axes.set_ylabel(f"tokens over {reference}'s (lower is better)")
    axes.set_title(title)
    axes.legend(fontsize=8, loc="upper left")
    return _save(figure, path)


def _grouped_bars(groups: Sequence[str], series: Mapping[str, Sequence[float]], label_format: str
                  ) -> tuple[Any, Any]:
    """A figure with a group of bars per group name, a bar per series (name -> a value per group), each labelled."""
    figure, axes = _figure(width=max(6.0, 1.2 + len(groups) * (0.5 + 0.35 * len(series))), height=4.2)
    width = 0.8 / len(series)
    positions = np.arange(len(groups))
    for index, (name, heights) in enumerate(series.items()):
        bars = axes.bar(positions + (index - (len(series) - 1) / 2) * width, heights, width, label=name,
                        color=_COLOURS[index % len(_COLOURS)])
        axes.bar_label(bars, fmt=label_format, fontsize=7, padding=1)
    axes.set_xticks(positions, groups, rotation=15 if len(groups) > 3 else 0, ha="right" if len(groups) > 3
                    else "center", fontsize=8)
    axes.margins(y=0.12)
    return figure, axes


def plot_token_lengths(vocab: Mapping[int, bytes], special_ids: Sequence[int], path: str | os.PathLike[str],
                       title: str = "Token lengths") -> Path:
    """A bar per length in bytes: how many tokens of the vocabulary (special tokens left out) have it."""
    special = set(special_ids)
    lengths = np.array([min(len(token), MAX_LENGTH_BAR) for token_id, token in vocab.items()
                        if token_id not in special])
    counts = np.bincount(lengths, minlength=2)[1:]
    figure, axes = _figure(width=6.4, height=3.6)
    positions = np.arange(1, len(counts) + 1)
    axes.bar(positions, counts, 0.85, color=_COLOURS[0])
    labels = [str(length) for length in positions]
    if len(counts) == MAX_LENGTH_BAR:
        labels[-1] = f"{MAX_LENGTH_BAR}+"
    axes.set_xticks(positions, labels, fontsize=7)
    axes.set_xlabel("token length in bytes")
    axes.set_ylabel("tokens")
    mean = float(np.mean([len(token) for token_id, token in vocab.items() if token_id not in special]))
    axes.set_title(f"{title} (mean {mean:.2f} bytes)")
    return _save(figure, path)


def plot_coverage(counts_by_corpus: Mapping[str, np.ndarray], path: str | os.PathLike[str],
                  title: str = "Share of the corpus covered by the most frequent tokens") -> Path:
    """For each corpus (name -> token counts by id), the cumulative share of its tokens that the k most frequent
    tokens make up, against k on a log scale."""
    figure, axes = _figure(width=6.4, height=3.8)
    for index, (name, counts) in enumerate(counts_by_corpus.items()):
        ordered = np.sort(counts[counts > 0].astype(np.float64))[::-1]
        if not len(ordered):
            continue
        share = np.cumsum(ordered) / ordered.sum()
        axes.plot(np.arange(1, len(share) + 1), share, label=name, color=_COLOURS[index % len(_COLOURS)])
    axes.set_xscale("log")
    axes.set_ylim(0, 1.02)
    axes.set_xlabel("k most frequent tokens")
    axes.set_ylabel("share of the tokens")
    axes.grid(True, which="major", alpha=0.3)
    axes.set_title(title, fontsize=10)
    axes.legend(fontsize=8, loc="lower right")
    return _save(figure, path)


def _figure(width: float, height: float) -> tuple[Any, Any]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    return figure, figure.add_subplot()


def _save(figure: Any, path: str | os.PathLike[str]) -> Path:
    return write_atomically(path, lambda temporary: figure.savefig(temporary, format="png"))
