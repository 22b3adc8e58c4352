"""The model card's rows on named sources (`hf-bpe train NAME=PATH ...`): each source's size, the weights and the
rule that made them integers, and the options of parity-aware training, from the training record
(`hf_bpe_training.json`'s `sources`, `weights` and `parity`; `hf_bpe.cli.train_sources`).

>>> info = {"sources": {"en": {"bytes": 9000, "files": [{"path": "en.txt"}]},
...                     "hi": {"bytes": 1000, "files": [{"path": "hi.txt"}]}},
...         "weights": {"sampling_temperature": None, "rule": "k = ...",
...                     "sources": {"en": {"weight": 1.0, "integer_weight": 1},
...                                 "hi": {"weight": 2.0, "integer_weight": 2}}},
...         "parity": {"variant": "base", "chooses_by": "dev sets", "global_merges": 0,
...                    "dev_sets": {"en": {"files": ["dev.en"]}, "hi": {"files": ["dev.hi"]}}}}
>>> for name, value in source_rows(info):  # doctest: +ELLIPSIS
...     print(f"{name}: {value}")
Sources: `en` (9,000 bytes: `en.txt`), `hi` (1,000 bytes: `hi.txt`)
Source weights: `en` 1 (counts times 1), `hi` 2 (counts times 2); integers by k = ...
Parity-aware training: base variant, the merge of the worst-compressed source on its dev set (`dev.en`, ...) each step
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any


def source_rows(info: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The card's rows for a tokenizer trained on named sources ([] for any other)."""
    sources = info.get("sources")
    if not isinstance(sources, Mapping) or not sources:
        return []
    rows = [("Sources", ", ".join(f"`{name}` ({_bytes(entry)}: {_files(entry.get('files'))})"
                                  for name, entry in sources.items() if isinstance(entry, Mapping)))]
    weights = info.get("weights")
    if isinstance(weights, Mapping):
        rows.append(("Source weights", _weights(weights)))
    parity = info.get("parity")
    if isinstance(parity, Mapping):
        rows.append(("Parity-aware training", _parity(parity)))
    return rows


def _bytes(entry: Mapping[str, Any]) -> str:
    size = entry.get("bytes")
    return f"{size:,} bytes" if isinstance(size, int) else "unknown size"


def _files(files: Any) -> str:
    names = [Path(str(file.get("path") if isinstance(file, Mapping) else file)).name for file in files or ()]
    return ", ".join(f"`{name}`" for name in names) or "no files recorded"


def _weights(record: Mapping[str, Any]) -> str:
    from hf_bpe.train.counting.weights import describe_weights

    entries = record.get("sources") or {}
    if record.get("sampling_temperature") is None and all(
            isinstance(entry, Mapping) and entry.get("integer_weight") == 1 for entry in entries.values()):
        return "none: each source's counts once, as if their text were put together"
    return describe_weights(record)


def _parity(parity: Mapping[str, Any]) -> str:
    variant = parity.get("variant", "base")
    text = f"{variant} variant"
    if variant == "window":
        text += f" (window of {parity.get('window_size')} steps, alpha {parity.get('alpha')})"
    dev_sets = parity.get("dev_sets")
    if isinstance(dev_sets, Mapping):
        files = ", ".join(_files(entry.get("files") if isinstance(entry, Mapping) else None)
                          for entry in dev_sets.values())
        text += f", the merge of the worst-compressed source on its dev set ({files}) each step"
    elif isinstance(parity.get("ratios"), Mapping):
        ratios = ", ".join(f"`{name}` {ratio:g}" for name, ratio in parity["ratios"].items())
        text += f", the merge of the source furthest below its target compression ratio ({ratios}) each step"
    else:
        text += ", the merge of the source longest in tokens (its own training text) each step"
    global_merges = parity.get("global_merges")
    if global_merges:
        text += f", after {global_merges:,} merges of all sources' counts added up"
    return text
