"""The offline rank files of the run of tiktoken's own tests (tests/encode/tiktoken_suite.py, which CI runs) are the
files tiktoken downloads, byte for byte, for each of its 7 encodings; checked here too, without tiktoken's tests."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import tiktoken_ext.openai_public as openai_public

from tests import SHARED_FIXTURES
from tests.encode.tiktoken_suite import offline_files


def downloads() -> dict[str, str]:
    """URL -> sha256 of every file tiktoken's constructors of its encodings download."""
    expected: dict[str, str] = {}

    def record_rank_file(url: str, expected_hash: str) -> dict[bytes, int]:
        expected[url] = expected_hash
        return {}

    def record_gpt2_files(vocab_bpe_file: str, encoder_json_file: str, vocab_bpe_hash: str,
                          encoder_json_hash: str) -> dict[bytes, int]:
        expected.update({vocab_bpe_file: vocab_bpe_hash, encoder_json_file: encoder_json_hash})
        return {}

    with pytest.MonkeyPatch.context() as patch:  # they would download the files
        patch.setattr(openai_public, "load_tiktoken_bpe", record_rank_file)
        patch.setattr(openai_public, "data_gym_to_mergeable_bpe_ranks", record_gpt2_files)
        for constructor in openai_public.ENCODING_CONSTRUCTORS.values():
            constructor()
    return expected


def test_the_offline_files_are_those_tiktoken_downloads(tmp_path: Path) -> None:
    if not (SHARED_FIXTURES / "tiktoken" / "o200k_base.tiktoken").is_file():
        pytest.skip("the shared fixtures are not beside the clone")
    folder = offline_files(tmp_path / "files")
    expected = downloads()
    assert len(expected) == 6 and len(openai_public.ENCODING_CONSTRUCTORS) == 7
    for url, sha256 in expected.items():
        assert hashlib.sha256((folder / url.rsplit("/", 1)[-1]).read_bytes()).hexdigest() == sha256, url
