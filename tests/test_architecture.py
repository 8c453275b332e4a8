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
         "packed", "training", "scale", "dataset", "report", "consumer", "mixtures", "cli", "__main__", "__init__"]
TOP_LEVEL = {"__init__", "__main__", "_version", "errors", "spec", "storage", "consumer"}  # modules under consumer/


def _modules(root: Path) -> dict[str, Path]:
    out = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _resolve(target: str, names: list[str], modules: dict[str, Path]) -> set[str]:
    """The package modules an import of ``names`` from ``target`` (a module path inside the package, "" for the
    package itself) reaches: a name is the module of that name when there is one, else it counts as ``target``."""
    found = set()
    for alias in names:
        candidate = f"{target}.{alias}".lstrip(".")
        hit = candidate if candidate in modules else target if target in modules else None
        if hit is None and not target:
            hit = "__init__"
        if hit:
            found.add(hit)
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules ``name`` imports, in every form: ``import consumer.x``, ``from consumer import x``,
    ``from consumer.x import y`` and relative imports (resolved)."""
    package = [] if name == "__init__" else name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "consumer":
                    found.add("__init__")
                elif alias.name.startswith("consumer."):
                    inner = alias.name.split(".", 1)[1]
                    found |= _resolve(inner.rpartition(".")[0], [inner.rpartition(".")[2]], modules)
        elif isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)]
            found |= _resolve(".".join(base + ([node.module] if node.module else [])),
                              [a.name for a in node.names], modules)
        elif isinstance(node, ast.ImportFrom) and node.module and \
                (node.module == "consumer" or node.module.startswith("consumer.")):
            found |= _resolve(node.module.partition(".")[2], [a.name for a in node.names], modules)
    found.discard(name)
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


def sabotaged(tmp_path: Path, additions: dict[str, str]) -> Path:
    """A copy of the package under ``tmp_path`` with ``additions[module]`` appended to each module."""
    copy = tmp_path / "consumer"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    for module, text in additions.items():
        (copy / module).write_text((copy / module).read_text() + text)
    return copy


@pytest.mark.parametrize("module, line", [
    ("tokens/documents.py", "from ..training import loader as _sabotage"),
    ("sources/paths.py", "from ..catalog.catalog import Catalog as _sabotage"),
    ("util/validate.py", "from ..spec import Spec as _sabotage"),
])
def test_a_sabotage_import_is_caught(tmp_path: Path, module: str, line: str) -> None:
    problems = layout_violations(sabotaged(tmp_path, {module: f"\n{line}\n"}))
    assert any(module.replace("/", ".")[:-3] in p and "may not import" in p for p in problems), problems


@pytest.mark.parametrize("line", [
    "import consumer.catalog.catalog",                     # import consumer.x
    "import consumer.catalog as _sabotage",
    "from consumer import catalog as _sabotage",           # from consumer import x
    "from consumer.catalog.catalog import Catalog as _sabotage",  # from consumer.x import y
    "from consumer.catalog import catalog as _sabotage",
    "from ..catalog import catalog as _sabotage",          # relative
])
def test_every_import_form_is_seen(tmp_path: Path, line: str) -> None:
    problems = layout_violations(sabotaged(tmp_path, {"util/__init__.py": f"\n{line}\n"}))
    assert any(p.startswith("util imports catalog") and "may not import" in p for p in problems), problems


def test_an_absolute_import_of_the_package_top_is_seen(tmp_path: Path) -> None:
    problems = layout_violations(sabotaged(tmp_path, {"tokens/vocab.py": "\nimport consumer as _sabotage\n"}))
    assert "tokens.vocab imports __init__: tokens may not import __init__ (a higher floor)" in problems, problems


def test_a_sabotage_cycle_is_caught(tmp_path: Path) -> None:
    copy = sabotaged(tmp_path, {"tokens/vocab.py": "\nfrom .index import SampleIndex as _sabotage\n",
                                "tokens/index.py": "\nfrom .vocab import Vocab as _sabotage\n"})
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


# where bytes come from is decided once, in consumer/sources (open_source, locate_store): nothing else asks whether a
# path is a URL, and the storage settings travel as one Storage value
STORAGE_SETTINGS = {"storage_options", "cache_dir", "remote_cache"}
LOOSE_SETTINGS_ALLOWED = {("consumer.py", "__init__"), ("storage.py", "of")}  # the user's own arguments, validated


def source_kind_violations(root: Path) -> list[str]:
    """Calls of ``is_url`` outside ``sources/``, and functions taking the three storage settings as loose
    arguments (other than the user-facing constructor and :meth:`Storage.of`)."""
    problems = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and not rel.startswith("sources/"):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                if name == "is_url":
                    problems.append(f"{rel}:{node.lineno} calls is_url (only consumer/sources decides the kind)")
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = {a.arg for a in node.args.args + node.args.kwonlyargs + node.args.posonlyargs}
                if STORAGE_SETTINGS <= args and (rel, node.name) not in LOOSE_SETTINGS_ALLOWED:
                    problems.append(f"{rel}:{node.lineno} {node.name}() takes storage_options, cache_dir and "
                                    "remote_cache loose (take a Storage)")
    return problems


def test_only_sources_decides_the_kind_of_source_and_storage_travels_whole() -> None:
    problems = source_kind_violations(ROOT)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("module, text", [
    ("fetch/reader.py", "\ndef _sabotage(p):\n    from ..sources.urls import is_url\n    return is_url(p)\n"),
    ("packed/write.py", "\ndef _sabotage(prefix, storage_options=None, cache_dir=None, remote_cache=None):\n"
                        "    return prefix\n"),
])
def test_a_kind_branch_or_loose_settings_are_caught(tmp_path: Path, module: str, text: str) -> None:
    assert any(p.startswith(module) for p in source_kind_violations(sabotaged(tmp_path, {module: text})))


# a dataset's reading strategy is chosen once (ByteSource.choose / bytes_for): no flag of a source is asked outside
# the modules defining the source and token-store types (formats/ reads raw arrays, below the TokenStore type)
READING_HOMES = {"sources/base.py", "sources/store.py", "sources/token_store.py"}


def reading_flag_violations(root: Path) -> list[str]:
    """``x.tokens is ...``, ``.durable``, ``.whole_files`` and ``isinstance(tokens, np.ndarray)`` outside the
    modules that define sources and token stores."""
    problems = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel in READING_HOMES or rel.startswith("formats/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            where = f"{rel}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Attribute) and node.attr in ("durable", "whole_files"):
                problems.append(f"{where} asks .{node.attr} (ask the source what it offers: choose / bytes_for)")
            elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute) and \
                    node.left.attr == "tokens" and any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
                problems.append(f"{where} asks whether .tokens is None (ask ByteSource.choose)")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance" \
                    and len(node.args) == 2 and "tokens" in ast.unparse(node.args[0]) \
                    and ast.unparse(node.args[1]).endswith("ndarray"):
                problems.append(f"{where} tells token stores apart with isinstance (use the TokenStore's methods)")
    return problems


def test_no_reading_flag_is_asked_outside_its_home() -> None:
    problems = reading_flag_violations(ROOT)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("text", [
    "\ndef _sabotage(docs):\n    return docs.source.tokens is None\n",
    "\ndef _sabotage(source):\n    return source.durable\n",
    "\ndef _sabotage(source):\n    return source.whole_files\n",
    "\ndef _sabotage(tokens):\n    return isinstance(tokens, np.ndarray)\n",
])
def test_a_reading_flag_is_caught(tmp_path: Path, text: str) -> None:
    assert any(p.startswith("fetch/reader.py") for p in
               reading_flag_violations(sabotaged(tmp_path, {"fetch/reader.py": text})))


def private_imports_of_other_subpackages(tests: Path) -> list[str]:
    """``from consumer.X... import _name`` in a test outside ``tests/X/``: tests reach public names, or the private
    helpers of the subpackage they test, never another subpackage's."""
    problems = []
    for path in sorted(tests.rglob("*.py")):
        rel = path.relative_to(tests)
        own = rel.parts[0] if len(rel.parts) > 1 else None
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").startswith("consumer."):
                target = node.module.split(".")[1]
                for alias in node.names:
                    if alias.name.startswith("_") and target != own:
                        problems.append(f"{rel.as_posix()}:{node.lineno} imports {node.module}.{alias.name}")
    return problems


def test_tests_reach_only_public_names_or_their_own_subpackage() -> None:
    problems = private_imports_of_other_subpackages(Path(__file__).resolve().parent)
    assert not problems, "\n".join(problems)


def test_a_private_import_across_subpackages_is_caught(tmp_path: Path) -> None:
    (tmp_path / "fetch").mkdir()
    (tmp_path / "fetch" / "test_x.py").write_text("from consumer.tokens.vocab import _TAIL as t\n"
                                                  "from consumer.fetch.reader import _ranges as r\n")
    assert private_imports_of_other_subpackages(tmp_path) == ["fetch/test_x.py:1 imports consumer.tokens.vocab._TAIL"]


# size: small modules with one job, a short facade, short functions (docs/design.md, "Layout")
MAX_MODULE_LINES = 400  # outside consumer/formats/ (other frameworks' formats are kept whole, one per module)
MAX_FACADE_LINES = 250  # consumer/consumer.py: one short call per method
MAX_FUNCTION_LINES = 80  # unless the first line of its body is a comment "# long: <the reason>"


def size_violations(root: Path) -> list[str]:
    """Modules over :data:`MAX_MODULE_LINES` (outside ``formats/``), a facade over :data:`MAX_FACADE_LINES`, and
    functions over :data:`MAX_FUNCTION_LINES` without a ``# long:`` reason as the first line of their body."""
    problems = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        text = path.read_text()
        lines = text.splitlines()
        if rel == "consumer.py" and len(lines) > MAX_FACADE_LINES:
            problems.append(f"{rel}: the facade has {len(lines)} lines, more than {MAX_FACADE_LINES} "
                            "(move logic into the module that does the job)")
        if not rel.startswith("formats/"):
            if len(lines) > MAX_MODULE_LINES:
                problems.append(f"{rel}: {len(lines)} lines, more than {MAX_MODULE_LINES} (split it along its seams)")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                first = lines[node.body[0].lineno - 2].strip()  # the line above the first statement
                if length > MAX_FUNCTION_LINES and not first.startswith("# long:"):
                    problems.append(f"{rel}:{node.lineno} {node.name}() has {length} lines, more than "
                                    f"{MAX_FUNCTION_LINES} (split it, or give the reason on its first line: "
                                    "'# long: ...')")
    return problems


def test_modules_facade_and_functions_are_short() -> None:
    problems = size_violations(ROOT)
    assert not problems, "\n".join(problems)


def _long_function(name: str, reason: str = "") -> str:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    return f"\n\ndef {name}():\n{reason}    \"\"\"Doc.\"\"\"\n{body}    return 0\n"


@pytest.mark.parametrize("module, text, expected", [
    ("util/seeds.py", "\n" + "# filler\n" * MAX_MODULE_LINES, "util/seeds.py: "),
    ("consumer.py", "\n" + "# filler\n" * (MAX_FACADE_LINES - 200), "consumer.py: the facade has "),
    ("tokens/vocab.py", _long_function("_sabotage"), "tokens/vocab.py:"),
    ("formats/pbin.py", _long_function("_sabotage"), "formats/pbin.py:"),  # functions count in formats/ too
])
def test_a_sabotage_of_a_size_rule_is_caught(tmp_path: Path, module: str, text: str, expected: str) -> None:
    assert not [p for p in size_violations(ROOT) if p.startswith(expected)]
    problems = size_violations(sabotaged(tmp_path, {module: text}))
    assert any(p.startswith(expected) for p in problems), problems


def test_a_long_function_with_its_reason_and_a_long_format_module_pass(tmp_path: Path) -> None:
    copy = sabotaged(tmp_path, {"tokens/vocab.py": _long_function("_sabotage", "    # long: a table, read top down\n"),
                                "formats/pbin.py": "\n" + "# filler\n" * MAX_MODULE_LINES})
    assert size_violations(copy) == size_violations(ROOT)
