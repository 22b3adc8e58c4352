"""transformers' own generic tokenizer tests (`TokenizerTesterMixin`) run against `HFBPETokenizer` on GPT-2's files.

The tests are transformers', from the source distribution of the installed version, never copied into this
repository: tests/hf/transformers_suite.py (`.ci/transformers_suite.sh`) unpacks them as a package
`transformers_tests`, runs this module with `HF_BPE_TRANSFORMERS_TESTS` set to the folder that holds it, and checks
that only the documented checks fail (its `EXPECTED_FAILURES`). Without that variable this module is skipped.

The mixin's setup saves the tokenizer of `from_pretrained_id` (GPT-2's vocab.json and merges.txt, saved by hf_bpe)
with `AutoTokenizer`, as transformers' own model tests do, and each test loads that directory with
`HFBPETokenizer.from_pretrained`.
"""

from __future__ import annotations

import os
import sys
import unittest
from pathlib import Path

import pytest

from hf_bpe.formats.gpt2 import load_gpt2
from hf_bpe.formats.hf_directory import save_tokenizer_directory
from hf_bpe.hf.tokenizer import HFBPETokenizer
from tests import FIXTURES
from tests.hf.transformers_suite import PACKAGE

SUITE = os.environ.get("HF_BPE_TRANSFORMERS_TESTS")
if not SUITE:
    pytest.skip("transformers' tests are not unpacked here: `python -m tests.hf.transformers_suite` runs them",
                allow_module_level=True)
sys.path.insert(0, SUITE)
TokenizerTesterMixin = __import__(f"{PACKAGE}.test_tokenization_common", fromlist=["_"]).TokenizerTesterMixin


def gpt2_directory() -> str:
    """GPT-2's vocab.json and merges.txt (tests/fixtures), saved by hf_bpe with `<|endoftext|>` beside the tests."""
    vocab, merges = load_gpt2(FIXTURES / "gpt2_vocab.json", FIXTURES / "gpt2_merges.txt")
    return str(save_tokenizer_directory(Path(SUITE) / "gpt2", vocab, merges, ["<|endoftext|>"]))  # type: ignore


class HFBPETokenizerSuite(TokenizerTesterMixin, unittest.TestCase):  # type: ignore[misc, valid-type]
    tokenizer_class = HFBPETokenizer
    from_pretrained_id = [gpt2_directory()]
    test_seq2seq = False  # as transformers' GPT-2 tests have it
