"""The package's shape: imports point one way (no cycle, no upward edge), one home per heavy dependency."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "consumer"

# layer of every module: a module may import modules of its own layer or below, never above
LAYERS: dict[str, int] = {
    # 0: no engine imports (errors, helpers, other frameworks' formats)
    "errors": 0, "_version": 0, "validate": 0, "seeds": 0, "fileio": 0, "pathlist": 0, "progress": 0,
    "formats": 0, "formats.mmidx": 0, "formats.pbin": 0, "formats.megatron_sampling": 0,
    "formats.fairseq_batching": 0, "remote": 1, "remote_read": 1, "remote_cache": 1, "remote_meta": 2,
    "remote_requests": 1, "remote_tokens": 1, "ranks": 0, "shared_build": 1, "remote_cloud": 0, "remote_plan": 0,
    # 1: tokens, inputs, file types
    "vocab": 1, "ir": 1, "filemeta": 1,
    # 2: samples and settings (pure numpy, no file reads)
    "index": 2, "megatron_index": 2, "sampling": 2, "spec": 2, "documents": 2, "content": 1, "duplicates": 3,
    "sqlfuncs": 1, "catalog_rows": 1, "catalog_file": 2,
    # 3: storage and the fetch steps
    "catalog": 3, "cache": 3, "sql": 3, "reader": 3, "select": 3, "queries": 3, "sampler": 3, "packed.layout": 3,
    "packed.table": 3,
    # 4: assembling datasets, fetching, tensors
    "fetch": 4, "dataset_sql": 4, "packed.open": 4, "packed.remote": 4, "packed.write": 4, "packed.verify": 4,
    "packed": 4, "build": 4, "export": 4,
    "collate": 4, "display": 4, "frames": 1, "plan": 3, "loader": 4, "split": 1, "workers": 3,
    # 5: the facade; 6: the package face and the command line
    "consumer": 5, "__init__": 6, "__main__": 6, "cli": 6, "cli_commands": 6,
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    package = name.split(".")[:-1] if path.name != "__init__.py" else name.split(".")
    if name == "__init__":
        package = []
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
            for candidate in [target] + [f"{target}.{a.name}".lstrip(".") for a in node.names]:
                if candidate in modules and candidate != name:
                    found.add(candidate)
    return found


def test_every_module_has_a_layer() -> None:
    missing = sorted(set(_modules()) - set(LAYERS))
    assert not missing, f"place these modules in LAYERS: {missing}"


def test_imports_never_point_up_and_never_cycle() -> None:
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    upward = [(m, d) for m, deps in graph.items() for d in deps
              if m in LAYERS and d in LAYERS and LAYERS[d] > LAYERS[m]]
    assert not upward, f"imports pointing up a layer: {upward}"
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for dep in graph[node]:
            assert state.get(dep) != 1, f"import cycle: {' -> '.join(trail + [node, dep])}"
            if not state.get(dep):
                visit(dep, trail + [node])
        state[node] = 2

    for name in graph:
        if not state.get(name):
            visit(name, [])


# ranks.py: a build must know whether it runs under torch.distributed (rank 0 alone builds a shared index); it
# imports torch only when the program already did, so builds without torch never load it
@pytest.mark.parametrize("library, home", [("torch", {"collate.py", "loader.py", "ranks.py"}),
                                           ("magic", {"filemeta.py"})])
def test_one_home_per_heavy_dependency(library: str, home: set[str]) -> None:
    users = set()
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            if any(n == library or n.startswith(library + ".") for n in names):
                users.add(path.name)
    assert users <= home, f"{library} is imported outside {sorted(home)}: {sorted(users - home)}"


def test_import_consumer_loads_neither_torch_nor_the_store_modules() -> None:
    code = ("import sys, consumer; "
            "print(sorted(m for m in ('torch', 'consumer.packed', 'consumer.formats.pbin', "
            "'consumer.formats.fairseq_batching') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
