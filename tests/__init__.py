"""hf_bpe's tests, one folder per subpackage of hf_bpe; shared fixtures in tests/fixtures."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
