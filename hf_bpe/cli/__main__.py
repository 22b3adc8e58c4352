"""`python -m hf_bpe.cli ...`, the same as the `hf-bpe` command."""

import sys

from hf_bpe.cli.main import main

sys.exit(main())
