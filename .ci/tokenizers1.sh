#!/usr/bin/env bash
# Check that saved directories give the same ids under tokenizers 1.0 (its newest release candidate; inference only)
# as under the tokenizers 0.23 that transformers requires: tests/hf/test_tokenizers1.py, run by the current venv's
# python (hf_bpe and tokenizers 0.23), which hands the texts to a second venv that holds only tokenizers 1.0.
#
# The second venv lives in .venv-tokenizers1 in the repo root (git-ignored) and is reused by later runs: it is rebuilt
# only when this script's requirement changes. Usage: bash .ci/tokenizers1.sh [extra pytest args]
# (HF_BPE_TOKENIZERS1_VENV overrides the venv location.)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${HF_BPE_TOKENIZERS1_VENV:-$repo/.venv-tokenizers1}"
requirement="tokenizers>=1.0.0rc1,<2"
stamp="$venv/.requirements"

if [[ ! -x "$venv/bin/python" || ! -f "$stamp" || "$(cat "$stamp")" != "$requirement" ]]; then
    echo "tokenizers1.sh: creating $venv"
    rm -rf "$venv"
    python3 -m venv "$venv"
    log="$venv/pip.log"
    if ! "$venv/bin/python" -m pip install --disable-pip-version-check --pre "$requirement" > "$log" 2>&1; then
        tail -n 30 "$log" >&2
        echo "tokenizers1.sh: pip install failed (full log: $log)" >&2
        exit 1
    fi
    printf '%s' "$requirement" > "$stamp"
fi

# HF_BPE_PREPARE_ONLY: only make the venv (.ci/run makes it while the main tests run).
[[ -z "${HF_BPE_PREPARE_ONLY:-}" ]] || exit 0

cd "$repo"
# -s: the test prints which directories 1.0 gives the same ids for and which it refuses.
exec env HF_BPE_TOKENIZERS1_PYTHON="$venv/bin/python" python -m pytest -q -s -p no:cacheprovider -o addopts="" \
    tests/hf/test_tokenizers1.py "$@"
