"""The package's layout: stages import only the stages below them, with no circles, and no module grows too big.

The stages, lowest first (a stage may import any stage of a lower rank, and modules of its own stage):

    common                    errors, input files, safe outputs, worker processes
    pretokenize, cluster      the pattern and special tokens; connecting to Ray
    formats                   GPT-2 files, the HF directory, tiktoken files
    encode                    Tokenizer
    train                     counting, the merge loop, and its start states (each a package of its own)
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


# Inside train, by concern: counting and the merge loop stand alone; start states use both; the API uses all.
TRAIN_RANKS = {"counting": 0, "merging": 0, "checks": 0, "_reference": 0, "starts": 1, "parity": 1, "api": 2,
               "__init__": 3}
MAX_MODULES_PER_PACKAGE = 20


def train_part(module: str) -> str:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 else "__init__"


def test_train_parts_import_only_parts_below_them() -> None:
    train = {importer: {m for m in modules if stage(m) == "train"} for importer, modules in imports().items()
             if stage(importer) == "train"}
    assert {train_part(module) for module in train} <= set(TRAIN_RANKS)
    wrong = [(importer, imported) for importer, modules in train.items() for imported in modules
             if train_part(imported) != train_part(importer)
             and TRAIN_RANKS[train_part(imported)] >= TRAIN_RANKS[train_part(importer)]]
    assert wrong == []


def test_packages_stay_flat_enough() -> None:
    crowded = {str(package.relative_to(PACKAGE)): len(list(package.glob("*.py"))) for package in PACKAGE.rglob("*")
               if package.is_dir() and (package / "__init__.py").exists()}
    assert {name: count for name, count in crowded.items() if count > MAX_MODULES_PER_PACKAGE} == {}


def test_modules_stay_small() -> None:
    sizes = {str(path.relative_to(PACKAGE)): len(path.read_text(encoding="utf-8").splitlines())
             for path in PACKAGE.rglob("*.py")}
    assert {name: lines for name, lines in sizes.items() if lines > MAX_LINES and name not in GENERATED} == {}
    small = {name: lines for name, lines in sizes.items()
             if lines < MIN_LINES and not name.endswith(("__init__.py", "__main__.py")) and name not in TINY}
    assert small == {}
