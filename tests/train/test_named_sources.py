"""`train_bpe` on named sources (a mapping from names to paths): unweighted it trains as on all the files together,
weighted as the reference on the weighted counts, parity-aware as the parity reference on each source's counts."""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hf_bpe.common.errors import InputError
from hf_bpe.train._reference import reference_counts, reference_parity_train, reference_train_from_counts
from hf_bpe.train.api import train_bpe
from tests import FIXTURES

EOT = "<|endoftext|>"
PARALLEL = {path.stem: path for path in sorted((FIXTURES / "parallel").glob("*.txt"))}
LETTERS = st.text(st.sampled_from("ab c\né<"), min_size=1, max_size=30)
SOURCE_TEXTS = st.dictionaries(st.sampled_from(["en", "de", "hi"]), st.lists(LETTERS, min_size=1, max_size=2),
                               min_size=1, max_size=3)


def write(folder: str, sources: dict[str, list[str]]) -> dict[str, list[Path]]:
    paths = {}
    for name, texts in sources.items():
        paths[name] = [Path(folder) / f"{name}{number}.txt" for number in range(len(texts))]
        for path, text in zip(paths[name], texts):
            path.write_text(text, encoding="utf-8")
    return paths


def test_unweighted_sources_train_as_all_their_files_together(tmp_path: Path) -> None:
    sources = {"en": PARALLEL["en"], "deutsch": [PARALLEL["de"], PARALLEL["fr"]], "hi": [PARALLEL["hi"]]}
    files = [PARALLEL[name] for name in ("en", "de", "fr", "hi")]
    together = tmp_path / "together.txt"  # the text put together, documents apart
    together.write_text(EOT.join(path.read_text(encoding="utf-8") for path in files), encoding="utf-8")
    expected = train_bpe([together], 700, [EOT], num_workers=1)
    assert train_bpe(files, 700, [EOT], num_workers=1) == expected
    assert train_bpe(sources, 700, [EOT], num_workers=1) == expected
    assert train_bpe(sources, 700, [EOT], num_workers=2, weights={"en": 2.5, "hi": 2.5, "deutsch": 2.5}) == expected


@settings(max_examples=60, deadline=None)
@given(SOURCE_TEXTS, st.dictionaries(st.sampled_from(["en", "de", "hi"]), st.sampled_from([0, 0.5, 1, 2, 3.25])),
       st.integers(256, 300))
def test_weighted_sources_train_as_the_reference_on_weighted_counts(sources: dict[str, list[str]],
                                                                    weights: dict[str, float], vocab_size: int) -> None:
    weights = {name: weight for name, weight in weights.items() if name in sources}
    real = {name: weights.get(name, 1) for name in sources}
    positive = min((weight for weight in real.values() if weight), default=0)
    with tempfile.TemporaryDirectory() as folder:
        paths = write(folder, sources)
        if not positive:
            with pytest.raises(InputError, match="every source's weight is 0"):
                train_bpe(paths, vocab_size, weights=weights, num_workers=1)
            return
        # The rule's integers for these weights, before the gcd is divided out (which changes no merge).
        scaled = {name: round(weight / positive * 100) for name, weight in real.items()}
        pooled: Counter[bytes] = Counter()
        for name, texts in sources.items():
            for pretoken, count in reference_counts(texts).items():
                pooled[pretoken] += count * scaled[name]
        assert train_bpe(paths, vocab_size, weights=weights, num_workers=1) == reference_train_from_counts(
            +pooled, vocab_size)


def test_sampling_temperature_weights_the_small_sources_up(tmp_path: Path) -> None:
    big, small = tmp_path / "big.txt", tmp_path / "small.txt"
    big.write_text("aaaa " * 900)
    small.write_text("bbbb " * 100)
    # Shares 0.9 and 0.1 at T=2: weights 1/sqrt(0.9) and 1/sqrt(0.1), integers 1 and 3 (the rule).
    expected = reference_train_from_counts({b"aaaa": 1, b" aaaa": 899, b"bbbb": 3, b" bbbb": 297}, 262)
    assert train_bpe({"big": big, "small": small}, 262, sampling_temperature=2.0, num_workers=1) == expected


PARITY_OPTIONS = [
    {"dev": True},
    {"ratios": {name: 1.0 + index / 4 for index, name in enumerate(["en", "de", "hi", "ja"])}},
    {},
    {"dev": True, "parity_variant": "window", "window_size": 3, "alpha": 1.0, "global_merges": 5},
    {"dev": True, "weights": {"en": 0.5, "hi": 2}},
]


@pytest.mark.parametrize("options", PARITY_OPTIONS)
def test_parity_trains_as_the_parity_reference(tmp_path: Path, options: dict) -> None:
    pytest.importorskip("hf_bpe.train.parity")
    names = ["en", "de", "hi", "ja"]
    sources, dev = {}, {}
    for name in names:  # the first half of each text to train on, the second half as the dev set
        lines = PARALLEL[name].read_text(encoding="utf-8").splitlines(keepends=True)
        sources[name], dev[name] = tmp_path / f"{name}.train", tmp_path / f"{name}.dev"
        sources[name].write_text("".join(lines[:6]), encoding="utf-8")
        dev[name].write_text("".join(lines[6:]), encoding="utf-8")
    counts = {name: reference_counts([path.read_text(encoding="utf-8")], [EOT]) for name, path in sources.items()}
    dev_counts = {name: reference_counts([path.read_text(encoding="utf-8")], [EOT]) for name, path in dev.items()}
    options = dict(options)
    weights = options.pop("weights", None)
    use_dev = options.pop("dev", False)
    reference_options = {"dev": dev_counts if use_dev else None, "ratios": options.get("ratios"),
                         "variant": options.get("parity_variant", "base"),
                         "window_size": options.get("window_size", 100), "alpha": options.get("alpha", 2.0),
                         "global_merges": options.get("global_merges", 0),
                         "weights": None if weights is None else {"en": 1, "de": 2, "hi": 4, "ja": 2}}
    expected = reference_parity_train(counts, 330, [EOT], **reference_options)
    trained = train_bpe(sources, 330, [EOT], num_workers=1, parity=True, dev=dev if use_dev else None,
                        weights=weights, **options)
    assert trained == expected


@pytest.mark.parametrize(("arguments", "error", "message"), [
    ({"weights": {"en": 2}}, ValueError, "weights needs named sources"),
    ({"parity": True}, ValueError, "parity needs named sources"),
    ({"dev": {"en": "x"}}, ValueError, "dev needs parity=True"),
    ({"global_merges": 3}, ValueError, "global_merges needs parity=True"),
])
def test_options_of_named_sources_need_them(arguments: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        train_bpe(PARALLEL["en"], 300, **arguments)


@pytest.mark.parametrize(("arguments", "error", "message"), [
    ({"weights": {"xx": 2}}, InputError, "weight for xx, which is no source"),
    ({"weights": {"en": -1}}, InputError, "the weight of source en must be a non-negative number"),
    ({"weights": {"en": 0, "de": 0}}, InputError, "every source's weight is 0"),
    ({"weights": {"en": 2}, "sampling_temperature": 2}, InputError, "not both"),
    ({"sampling_temperature": 0}, InputError, "sampling temperature must be a positive number"),
    ({"parity": True, "dev": {"en": PARALLEL["en"]}}, ValueError, "dev sets must name the sources"),
    ({"parity": True, "ratios": {"en": 1, "de": 0}}, ValueError, "ratios must be positive"),
    ({"parity": True, "dev": {"en": PARALLEL["en"]}, "ratios": {"en": 1, "de": 1}}, ValueError, "not both"),
    ({"parity": True, "parity_variant": "wide"}, ValueError, "variant must be 'base' or 'window'"),
    ({"parity": True, "global_merges": -1}, ValueError, "global_merges must be an int >= 0"),
    ({"superword_from": 280}, ValueError, "SuperBPE trains on one pooled corpus"),
])
def test_bad_options_of_named_sources_are_refused_before_counting(arguments: dict, error: type, message: str
                                                                  ) -> None:
    sources = {"en": PARALLEL["en"], "de": "/nonexistent/de.txt" if error is ValueError else PARALLEL["de"]}
    with pytest.raises(error, match=message):
        train_bpe(sources, 300, **arguments)


def test_a_source_without_text_is_named(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(InputError, match=r"^source de has no text"):
        train_bpe({"en": PARALLEL["en"], "de": tmp_path / "empty.txt"}, 300)
