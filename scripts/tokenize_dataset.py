"""Tokenize a HuggingFace dataset into OUT/<split>.bin (token ids, eot after each document) and OUT/<split>.json.

    python scripts/tokenize_dataset.py --tokenizer tok/ --dataset json --data-files docs.jsonl --split train \\
        --text-column text --num-proc 8 --out data/

Same options as `hf-bpe tokenize-dataset`; see hf_bpe/data/. Read the result with `hf_bpe.data.load_tokens`.
"""

import argparse
import sys
from pathlib import Path

from hf_bpe.cli.main import run_reporting_errors
from hf_bpe.cli.tokenize_dataset import add_tokenize_dataset_arguments, run_tokenize_dataset


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_tokenize_dataset_arguments(parser)
    args = parser.parse_args()
    return run_reporting_errors(Path(sys.argv[0]).name, run_tokenize_dataset, args)


if __name__ == "__main__":
    sys.exit(main())
