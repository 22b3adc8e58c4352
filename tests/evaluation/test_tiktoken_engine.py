"""Rank-file baselines (cl100k=PATH, o200k=PATH) are encoded by tiktoken itself: hf_bpe.evaluation.tiktoken_engine."""

from __future__ import annotations

import base64
import json
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hf_bpe.cli.main import main
from hf_bpe.evaluation.baselines import TIKTOKEN_SPECIAL_TOKENS, resolve_baseline
from hf_bpe.evaluation.evaluate import evaluate, json_report, markdown_report
from hf_bpe.evaluation.tiktoken_engine import TiktokenEngine
from hf_bpe.pretokenize import PATTERNS
from tests import FIXTURES, REPO
from tests.formats.test_tiktoken_files import cl100k_file

CORPORA = [FIXTURES / "tinystories_sample.txt", FIXTURES / "german.txt"]


def small_rank_file(path: Path) -> Path:
    """256 bytes and a few joins, some reached only through a higher-ranked part (tiktoken's rules, not BPE's)."""
    tokens = [bytes([byte]) for byte in range(256)] + [b"e ", b"th", b"the", b" t", b"he", b".:.:", b".:", b".:.",
                                                         b"in", b"ing", b" the"]
    path.write_text("".join(f"{base64.b64encode(token).decode()} {rank}\n" for rank, token in enumerate(tokens)))
    return path


def test_rank_file_baselines_are_encoded_by_tiktoken(tmp_path: Path) -> None:
    import tiktoken

    text = "the thing.:.: is <|endoftext|> then <|endofprompt|>.:. \n\n  them 123456"
    corpus = tmp_path / "mixed.txt"
    corpus.write_text(text * 20, encoding="utf-8")
    small = small_rank_file(tmp_path / "small.tiktoken")
    for spec, name, path in (("cl100k", "cl100k", cl100k_file()), ("o200k", "o200k", small)):
        named = resolve_baseline(f"{spec}={path}")
        assert named.engine == "tiktoken" and isinstance(named.tokenizer, TiktokenEngine) and named.is_baseline
        from tiktoken.load import load_tiktoken_bpe

        encoding = tiktoken.Encoding(name, pat_str=PATTERNS[name], mergeable_ranks=load_tiktoken_bpe(str(path)),
                                     special_tokens=TIKTOKEN_SPECIAL_TOKENS[name])
        assert named.tokenizer.encode(text) == encoding.encode(text, allowed_special="all")
        assert pickle.loads(pickle.dumps(named.tokenizer)).encode(text) == named.tokenizer.encode(text)
        results = evaluate([named], [corpus, *CORPORA], num_workers=1)
        for result in results:
            ids = encoding.encode(result.corpus.path.read_text(encoding="utf-8"), allowed_special="all")
            assert result.token_counts.tolist() == np.bincount(ids, minlength=len(result.token_counts)).tolist()
        assert [entry["engine"] for entry in json_report(results)["results"]] == ["tiktoken"] * len(results)
        assert all(line.rstrip().endswith("| tiktoken |") for line in markdown_report(results).splitlines()
                   if f"| {name} (baseline) |" in line)


def test_gpt2_is_encoded_by_hf_bpe_from_its_own_files() -> None:
    # GPT-2's vocab.json and merges.txt are the format hf_bpe reads and encodes exactly: the column says hf_bpe.
    assert resolve_baseline("gpt2").engine == "hf_bpe"


def test_eval_json_says_tiktoken(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "report.json"
    code = main(["eval", "--corpus", str(CORPORA[1]), "--baseline", f"cl100k={cl100k_file()}", "--json", str(report),
                 "--no-progress"])
    assert code == 0, capsys.readouterr().err
    assert [entry["engine"] for entry in json.loads(report.read_text())["results"]] == ["tiktoken"]


def test_without_tiktoken_a_one_line_error_before_any_work(tmp_path: Path) -> None:
    # tiktoken made unimportable in a fresh interpreter (sys.modules entry None is how Python marks a blocked import).
    program = ("import sys; sys.modules['tiktoken'] = None\n"
               "from hf_bpe.cli.main import main\n"
               f"sys.exit(main(['eval', '--corpus', {str(CORPORA[1])!r}, '--baseline', "
               f"'cl100k=' + {str(tmp_path / 'never-read.tiktoken')!r}, '--json', {str(tmp_path / 'r.json')!r}]))")
    finished = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=REPO, check=False)
    assert finished.returncode == 2
    assert finished.stderr.strip().count("\n") == 0 and "pip install tiktoken" in finished.stderr
    assert "Traceback" not in finished.stderr and not (tmp_path / "r.json").exists()
