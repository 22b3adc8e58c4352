#!/usr/bin/env bash
# Run transformers' own generic tokenizer tests (TokenizerTesterMixin, from the source distribution of the installed
# transformers, cached in $HF_BPE_CACHE or ~/.cache/hf_bpe) against HFBPETokenizer on GPT-2's files, and fail on any
# failure but the documented ones (docs/hf-compat.md): tests/hf/transformers_suite.py.
# Usage: bash .ci/transformers_suite.sh   (with the venv to test active; it needs pip access once per version)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# transformers' test modules import `parameterized`, which hf_bpe's test extra does not install.
python -c 'import parameterized' 2>/dev/null || python -m pip install --quiet --disable-pip-version-check parameterized
exec python -m tests.hf.transformers_suite
