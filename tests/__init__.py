"""hf_bpe's tests, one folder per subpackage of hf_bpe; shared fixtures in tests/fixtures."""

import importlib.util
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
# The shared benchmark corpora, beside the checkout (docs/corpora.md); tests that need them skip without them.
SHARED_CORPORA = REPO.parent / "shared" / "corpora"
# The shared fixtures too (../shared/README.md): OpenAI's o200k_base rank file, among others.
SHARED_FIXTURES = REPO.parent / "shared" / "fixtures"


def load_script(name: str) -> ModuleType:
    """The module of `scripts/NAME.py` (the scripts are not a package), for tests of its functions."""
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
