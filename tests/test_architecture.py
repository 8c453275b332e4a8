"""The package's shape (docs/design.md, "Layout"): subpackages by concern, imports pointing one way between them,
no import cycle, one home per heavy dependency, a short top level. Imports are read with ``ast`` (lazy imports
inside functions count too)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "consumer"

# the floors, lowest first: a module may import its own subpackage (or top-level module) and lower floors only
ORDER = ["errors", "_version", "util", "storage", "formats", "sources", "tokens", "catalog", "spec", "fetch", "query",
         "packed", "training", "scale", "dataset", "consumer", "cli", "__main__", "__init__"]
TOP_LEVEL = {"__init__", "__main__", "_version", "errors", "spec", "storage", "consumer"}  # modules under consumer/


def _modules(root: Path) -> dict[str, Path]:
    out = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules ``name`` imports (relative imports, resolved; a name imported from a package counts as
    the module of that name when there is one, else as the package)."""
    package = [] if name == "__init__" else name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                candidate = f"{target}.{alias.name}".lstrip(".")
                hit = candidate if candidate in modules else target if target in modules else None
                if hit is None and not target:
                    hit = "__init__"
                if hit and hit != name:
                    found.add(hit)
    return found


def _unit(module: str) -> str:
    return module.split(".")[0]


def layout_violations(root: Path) -> list[str]:
    """Every import that points up the floors of :data:`ORDER`, every module outside a known floor, and every
    import cycle, as readable lines (empty when the layout holds)."""
    modules = _modules(root)
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    rank = {unit: i for i, unit in enumerate(ORDER)}
    problems = [f"{m}: not in a known floor (add it to ORDER in tests/test_architecture.py and docs/design.md)"
                for m in modules if _unit(m) not in rank]
    for m, deps in sorted(graph.items()):
        for d in sorted(deps):
            a, b = _unit(m), _unit(d)
            if a in rank and b in rank and a != b and rank[b] > rank[a]:
                problems.append(f"{m} imports {d}: {a} may not import {b} (a higher floor)")
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                problems.append("import cycle: " + " -> ".join(trail + [node, dep]))
            elif not state.get(dep):
                visit(dep, trail + [node])
        state[node] = 2

    for name in sorted(graph):
        if not state.get(name):
            visit(name, [])
    return problems


def test_imports_point_one_way_between_subpackages_and_never_cycle() -> None:
    problems = layout_violations(ROOT)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("module, line", [
    ("tokens/documents.py", "from ..training import loader as _sabotage"),
    ("sources/paths.py", "from ..catalog.catalog import Catalog as _sabotage"),
    ("util/validate.py", "from ..spec import Spec as _sabotage"),
])
def test_a_sabotage_import_is_caught(tmp_path: Path, module: str, line: str) -> None:
    copy = tmp_path / "consumer"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / module
    target.write_text(target.read_text() + f"\n{line}\n")
    problems = layout_violations(copy)
    assert any(module.replace("/", ".")[:-3] in p and "may not import" in p for p in problems), problems


def test_a_sabotage_cycle_is_caught(tmp_path: Path) -> None:
    copy = tmp_path / "consumer"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "tokens" / "vocab.py").write_text((copy / "tokens" / "vocab.py").read_text()
                                              + "\nfrom .index import SampleIndex as _sabotage\n")
    (copy / "tokens" / "index.py").write_text((copy / "tokens" / "index.py").read_text()
                                              + "\nfrom .vocab import Vocab as _sabotage\n")
    assert any(p.startswith("import cycle") for p in layout_violations(copy))


def test_the_top_level_is_short_and_every_other_module_sits_in_a_subpackage() -> None:
    top = {p.stem for p in ROOT.glob("*.py")}
    assert top == TOP_LEVEL, f"modules directly under consumer/: {sorted(top)}"
    assert len(top) <= 8
    for folder in (p for p in ROOT.iterdir() if p.is_dir() and p.name != "__pycache__"):
        assert (folder / "__init__.py").exists(), f"{folder.name}/ has no __init__.py"
        assert folder.name in ORDER, f"{folder.name}/ is not a known floor"


# ranks.py: a build must know whether it runs under torch.distributed (rank 0 alone builds a shared index); it
# imports torch only when the program already did, so builds without torch never load it
@pytest.mark.parametrize("library, home", [("torch", {"fetch/collate.py", "training/loader.py", "dataset/ranks.py"}),
                                           ("magic", {"sources/magic.py"}),
                                           ("dask", {"scale/engines.py"}), ("distributed", {"scale/engines.py"})])
def test_one_home_per_heavy_dependency(library: str, home: set[str]) -> None:
    users = set()
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            if any(n == library or n.startswith(library + ".") for n in names):
                users.add(path.relative_to(ROOT).as_posix())
    assert users <= home, f"{library} is imported outside {sorted(home)}: {sorted(users - home)}"


def test_import_consumer_loads_neither_torch_nor_the_store_modules() -> None:
    code = ("import sys, consumer; "
            "print(sorted(m for m in ('torch', 'consumer.packed', 'consumer.formats.pbin', "
            "'consumer.formats.fairseq_batching') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
