"""The package's layout: stages import only the stages below them, with no circles, and no module grows too big.

The stages, lowest first (a stage may import any stage of a lower rank, and modules of its own stage):

    common                    errors, input files, safe outputs, worker processes
    pretokenize, cluster      the pattern and special tokens; connecting to Ray
    formats                   GPT-2 files, the HF directory, tiktoken files
    encode                    Tokenizer
    train                     counting and the merge loop
    hf, data                  the transformers adapter; token arrays
    evaluation                model cards
    cli                       the commands

Imports inside functions count too (they would only hide a circle), except those of `hf_bpe` itself, which stands
above every stage (its `__getattr__` loads the HF adapter lazily) and is imported only by docstring examples.
"""

from __future__ import annotations

import ast

from tests import REPO

PACKAGE = REPO / "hf_bpe"
RANKS = {"_version": 0, "common": 0, "pretokenize": 1, "cluster": 1, "formats": 2, "encode": 3, "train": 4, "hf": 5,
         "data": 5, "evaluation": 6, "cli": 7, "hf_tokenizer": 8, "__init__": 9}
MAX_LINES = 520
MIN_LINES = 20
# One constant; and the import path that directories saved by hf_bpe 0.1 use.
TINY = {"_version.py", "hf_tokenizer.py"}
GENERATED = {"pretokenize/unicode_classes.py"}


def module_name(path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def stage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports() -> dict[str, set[str]]:
    """Every hf_bpe module and the hf_bpe modules it imports, at any depth of its code."""
    graph = {}
    for path in PACKAGE.rglob("*.py"):
        importer = module_name(path)
        imported = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("hf_bpe"):
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names if alias.name.startswith("hf_bpe"))
        graph[importer] = imported - {"hf_bpe"} if importer != "hf_bpe" else imported
    return graph


def test_every_stage_has_a_rank() -> None:
    assert {stage(module) for module in imports()} <= set(RANKS)


def test_stages_import_only_stages_below_them() -> None:
    wrong = [(importer, imported) for importer, modules in imports().items() for imported in modules
             if RANKS[stage(imported)] > RANKS[stage(importer)]]
    assert wrong == []


def test_no_import_circles() -> None:
    graph = imports()
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        assert module not in path, f"import circle: {' -> '.join(path[path.index(module):] + [module])}"
        if module in done:
            return
        for imported in graph.get(module, ()):
            # `from hf_bpe.data import pipeline` names a module, not a name in the package: follow the package.
            visit(imported, [*path, module])
        done.add(module)

    for module in graph:
        visit(module, [])


def test_modules_stay_small() -> None:
    sizes = {str(path.relative_to(PACKAGE)): len(path.read_text(encoding="utf-8").splitlines())
             for path in PACKAGE.rglob("*.py")}
    assert {name: lines for name, lines in sizes.items() if lines > MAX_LINES and name not in GENERATED} == {}
    small = {name: lines for name, lines in sizes.items()
             if lines < MIN_LINES and not name.endswith(("__init__.py", "__main__.py")) and name not in TINY}
    assert small == {}
