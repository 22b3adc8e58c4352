"""`hf_bpe.evaluation.languages`: the per-language view on the parallel fixtures (tests/fixtures/parallel: the same ten
sentences in nine languages, written for these tests), against token counts from the `tokenizers` library, spaces
counted a character at a time, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hf_bpe.common.errors import InputError
from hf_bpe.evaluation.baselines import GPT2_FILES, resolve_baseline, resolve_directory
from hf_bpe.evaluation.card import write_model_card
from hf_bpe.evaluation.evaluate import count_spaces, evaluate
from hf_bpe.evaluation.languages import (
    MIN_SPACE_SHARE,
    CorpusArgument,
    check_parity_reference,
    language_report,
    parse_corpus_arguments,
)
from hf_bpe.formats.gpt2 import load_gpt2
from hf_bpe.formats.hf_directory import save_tokenizer_directory
from tests import FIXTURES

PARALLEL = FIXTURES / "parallel"
LANGUAGES = ["en", "de", "fr", "el", "ru", "hi", "ja", "zh", "th"]


@pytest.fixture(scope="module")
def small_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    vocab, merges = load_gpt2(FIXTURES / "train-bpe-reference-vocab.json", FIXTURES / "train-bpe-reference-merges.txt")
    return save_tokenizer_directory(tmp_path_factory.mktemp("languages") / "small", vocab, merges, ["<|endoftext|>"])


def gpt2_tokens(path: Path) -> int:
    """GPT-2's token count of a file, by the `tokenizers` library from GPT-2's own files."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.BPE.from_file(str(GPT2_FILES / "vocab.json"), str(GPT2_FILES / "merges.txt")))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    return len(tokenizer.encode(path.read_text(encoding="utf-8")).ids)


def plain_spaces(text: str) -> int:
    return sum(char.isspace() and char not in "\n\r" for char in text)


@settings(max_examples=200, deadline=None)
@given(st.text(st.sampled_from([*"ab .\n\r\t\x0b\x1c\u3000\xa0\u2028\u2029\x85", *"猫ไทย", "é"])))
def test_spaces_match_a_plain_count(text: str) -> None:
    assert count_spaces(text) == plain_spaces(text)


def test_the_fixtures_are_parallel_and_some_have_no_spaces() -> None:
    """The premise of the other tests: ten lines in each language, and both kinds of script."""
    texts = {language: (PARALLEL / f"{language}.txt").read_text(encoding="utf-8") for language in LANGUAGES}
    assert {len(text.splitlines()) for text in texts.values()} == {10}
    spaced = {language for language, text in texts.items() if plain_spaces(text) >= MIN_SPACE_SHARE * len(text)}
    assert spaced == {"en", "de", "fr", "el", "ru", "hi"}


def test_the_report_against_independent_counts(small_dir: Path) -> None:
    corpora = [PARALLEL / f"{language}.txt" for language in LANGUAGES]
    results = evaluate([resolve_directory(str(small_dir)), resolve_baseline("gpt2")], corpora)
    report = language_report(results, LANGUAGES, "de")
    assert report is not None and report.languages == LANGUAGES and report.reference == "de"
    tokens = {language: gpt2_tokens(PARALLEL / f"{language}.txt") for language in LANGUAGES}
    for language in LANGUAGES:
        result = report.results[language]["gpt2"]
        assert result.num_tokens == tokens[language]
        assert report.premium(language, "gpt2") == tokens[language] / tokens["de"]
        text = (PARALLEL / f"{language}.txt").read_text(encoding="utf-8")
        words = report.tokens_per_word(language, "gpt2")
        if language in ("ja", "zh", "th"):
            assert words is None
        else:
            assert words == tokens[language] / len(text.split())
    most, fewest = max(tokens, key=tokens.__getitem__), min(tokens, key=tokens.__getitem__)
    assert report.fairness("gpt2") == (tokens[most] / tokens[fewest], most, fewest)

    # The Markdown and the JSON say the same.
    table = report.markdown()
    bytes_per_token = (PARALLEL / "th.txt").stat().st_size / tokens["th"]
    assert f"| `th` | gpt2 (baseline) | {bytes_per_token:.3f} | n/a | {tokens['th']:,} |" in table
    assert f"- gpt2: {tokens[most] / tokens[fewest]:.3f} (`{most}` {tokens[most]:,} tokens" in table
    document = json.loads(json.dumps(report.as_json()))
    assert document["reference"] == "de"
    assert [corpus["written_with_spaces"] for corpus in document["corpora"]] == [
        language not in ("ja", "zh", "th") for language in LANGUAGES]
    rows = {(row["language"], row["tokenizer"]): row for row in document["results"]}
    assert rows["hi", "gpt2"]["premium"] == round(tokens["hi"] / tokens["de"], 6)
    assert rows["zh", "gpt2"]["tokens_per_word"] is None
    assert {entry["tokenizer"]: entry["most_tokens"] for entry in document["fairness"]}["gpt2"] == most


def test_unnamed_corpora_are_left_out_and_the_first_name_is_the_reference(small_dir: Path) -> None:
    corpora = [FIXTURES / "german.txt", PARALLEL / "fr.txt", PARALLEL / "en.txt"]
    results = evaluate([resolve_baseline("gpt2")], corpora)
    report = language_report(results, [None, "fr", "en"])
    assert report is not None and report.languages == ["fr", "en"] and report.reference == "fr"
    assert report.results["en"]["gpt2"] is results[2]
    assert language_report(results, [None, None, None]) is None


def test_corpus_arguments(tmp_path: Path) -> None:
    odd = tmp_path / "x=y.txt"
    odd.write_text("text", encoding="utf-8")
    assert parse_corpus_arguments(["zh-Hans=a.txt", str(odd), "dir/a=b.txt", "pt_BR=c"], "--corpus") == [
        CorpusArgument("zh-Hans", Path("a.txt")), CorpusArgument(None, odd), CorpusArgument(None, Path("dir/a=b.txt")),
        CorpusArgument("pt_BR", Path("c"))]
    with pytest.raises(InputError, match="^--corpus en=b.txt: the name en is given twice$"):
        parse_corpus_arguments(["en=a.txt", "en=b.txt"], "--corpus")
    with pytest.raises(InputError, match="^--eval-corpus en=: no path after en=$"):
        parse_corpus_arguments(["en="], "--eval-corpus")
    check_parity_reference("en", [None, "en"], "--corpus")
    with pytest.raises(InputError, match=r"^--parity-reference de: no --corpus is named de \(the names: en, fr\)$"):
        check_parity_reference("de", ["en", None, "fr"], "--corpus")
    with pytest.raises(InputError, match=r"name them: --eval-corpus NAME=PATH"):
        check_parity_reference("de", [None], "--eval-corpus")


def test_the_card_has_a_languages_section(small_dir: Path) -> None:
    pytest.importorskip("matplotlib")
    path = write_model_card(small_dir, eval_corpora=[FIXTURES / "german.txt"],
                            eval_languages={"en": PARALLEL / "en.txt", "ja": PARALLEL / "ja.txt"},
                            parity_reference="ja", baselines=["gpt2"])
    card = path.read_text(encoding="utf-8")
    results = evaluate([resolve_baseline("gpt2")], [PARALLEL / "en.txt", PARALLEL / "ja.txt"])
    premium = results[0].num_tokens / results[1].num_tokens
    assert "## Languages\n\nPer language, on parallel text (premium: the language's tokens over those of `ja`" in card
    assert f"| `en` | gpt2 (baseline) | {results[0].bytes_per_token:.3f} | " in card
    assert f"{results[0].num_tokens:,} | {premium:.3f} |" in card
    assert "![Each language's tokens over the reference language's](languages.png)" in card
    assert (small_dir / "languages.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(InputError, match="--parity-reference fr: no --eval-corpus is named fr"):
        write_model_card(small_dir, eval_languages={"en": PARALLEL / "en.txt"}, parity_reference="fr")
