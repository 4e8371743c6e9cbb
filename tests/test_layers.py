"""The layer rules of DEVELOPERS.md ("Layout and dependency direction"), read from the imports.

Every ``import`` and ``from … import`` of every module counts, also inside functions and under
``TYPE_CHECKING``: a lazy import is still a dependency. ``from package import submodule`` is a
dependency on the submodule only (Python runs the package's ``__init__`` for any submodule, so
counting it would make every re-exporting package a cycle). The rules:

* the library (``fedpriv``) imports neither the application (``strategies``, ``clients``,
  ``attacks``, ``workflows``) nor Flower;
* the math (``fedpriv.accounting``, ``leakage``, ``verification``, ``canaries``, ``special``)
  imports neither the mechanisms nor the run's configuration nor the command front ends: it
  consumes typed releases;
* the server (``strategies``) never imports the client (``clients``), nor the client the server;
  only ``workflows`` imports ``workflows``;
* the attacks (``attacks``) import only the library, and of it never the wire protocol
  (``fedpriv.protocol``): they see a ``ServerView``, which the server builds from a reply;
* no module imports itself through others (no import cycle);
* no module of the packages is over :data:`MAX_LINES` lines;
* the benchmarks (``benchmarks``) run the public code: none imports a module of ``tests/`` or
  changes ``sys.path`` to reach it, and none is named after a package (run as a script,
  ``benchmarks/`` leads ``sys.path`` and such a module would shadow the package).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("fedpriv", "strategies", "clients", "attacks", "workflows")
MATH = tuple(f"fedpriv.{p}" for p in ("accounting", "leakage", "verification", "canaries",
                                       "special"))
MAX_LINES = 500

RULES: tuple[tuple[tuple[str, ...], tuple[str, ...], str], ...] = (
    (("fedpriv",), ("strategies", "clients", "attacks", "workflows"),
     "the library imports no application package"),
    (("fedpriv",), ("flwr",), "Flower types stay in clients/ and strategies/"),
    (MATH, ("fedpriv.mechanisms", "fedpriv.config", "fedpriv.commands"),
     "the math consumes typed releases, not mechanisms, config or front ends"),
    (("strategies",), ("clients", "workflows"), "the server never imports the client"),
    (("clients",), ("strategies", "attacks", "workflows"), "the client never imports the server"),
    (("attacks",), ("strategies", "clients", "workflows"), "attacks import only the library"),
    (("attacks",), ("fedpriv.protocol",),
     "attacks see a ServerView, never the wire protocol (strategies/attack_views.py builds it)"),
)


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def modules(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    """``{dotted module name: file}`` for every ``.py`` file of ``packages`` under ``root``."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _targets(module: str, path: Path, node: ast.Import | ast.ImportFrom,
             known: Mapping[str, Path]) -> Iterator[str]:
    """The modules one import statement names (absolute; submodules where they exist)."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    base = node.module or ""
    if node.level:
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, base] if base else package)
    submodules = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known]
    yield from submodules
    if len(submodules) < len(node.names):
        yield base


def _deepest(target: str, known: Mapping[str, Path], packages: tuple[str, ...]) -> str:
    """The deepest known module of ``packages`` that ``target`` (a module or a name in one)
    lies in; names outside ``packages`` as they are."""
    while "." in target and target not in known and target.split(".")[0] in packages:
        target = target.rpartition(".")[0]
    return target


def import_graph(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    """``{module: imported names}``: every import of every module, resolved to the deepest
    module of ``packages`` it names (or the plain name for outside packages)."""
    known = modules(root, packages)
    graph: dict[str, set[str]] = {}
    for module, path in known.items():
        edges = graph.setdefault(module, set())
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                edges.update(_deepest(t, known, packages)
                             for t in _targets(module, path, node, known))
        edges.discard(module)
    return graph


def violations(graph: Mapping[str, set[str]]) -> list[str]:
    """One line per import that breaks one of :data:`RULES`."""
    return [
        f"{module} imports {target}: {why}"
        for module, targets in sorted(graph.items())
        for target in sorted(targets)
        for sources, forbidden, why in RULES
        if _within(module, sources) and _within(target, forbidden)
    ]


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next((c for c in children if c in graph), None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def benchmark_violations(root: Path) -> list[str]:
    """One line per benchmark module that reaches into ``tests/`` (imports one of its modules,
    or changes ``sys.path`` in a statement that names it) or is named after a package."""
    tests = {"tests", *(p.stem for p in (root / "tests").glob("*.py"))}
    found = [f"{module} imports {target}: benchmarks run the public code, not tests/"
             for module, targets in sorted(import_graph(root, ("benchmarks",)).items())
             for target in sorted(targets) if target.split(".")[0] in tests]
    for module, path in modules(root, ("benchmarks",)).items():
        if path.stem in PACKAGES:
            found.append(f"{module} shadows the {path.stem} package when run as a script")
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            text = ast.unparse(node) if isinstance(node, ast.Expr | ast.Assign |
                                                   ast.AugAssign) else ""
            if "sys.path" in text and "tests" in text.lower():
                found.append(f"{module} line {node.lineno}: {text}: reaches tests/ by sys.path")
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(ROOT)


def test_every_package_is_read(graph: dict[str, set[str]]) -> None:
    assert {m.split(".")[0] for m in graph} == set(PACKAGES)
    assert len(graph) > 100


def test_layer_rules_hold(graph: dict[str, set[str]]) -> None:
    assert violations(graph) == []


def test_no_import_cycle(graph: dict[str, set[str]]) -> None:
    assert cycles(graph) == []


def test_benchmarks_run_the_public_code() -> None:
    assert benchmark_violations(ROOT) == []


def test_no_module_over_the_line_limit() -> None:
    long = {str(p.relative_to(ROOT)): n for p in modules(ROOT).values()
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def _tree(root: Path, files: Mapping[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_checks_see_what_they_claim(tmp_path: Path) -> None:
    """The rules, the cycle search and the benchmark check fail on a tree that breaks them
    (lazy, type-only and relative imports included), and pass on the same tree mended."""
    _tree(tmp_path, {
        "fedpriv/__init__.py": "",
        "fedpriv/config.py": "",
        "fedpriv/protocol.py": "",
        "fedpriv/leakage/__init__.py": "",
        "fedpriv/leakage/a.py": "def f():\n    from ..config import X\n",
        "fedpriv/leakage/b.py": "from fedpriv.leakage import c\n",
        "fedpriv/leakage/c.py": "import fedpriv.leakage.b\n",
        "strategies/__init__.py": "",
        "strategies/s.py": "from clients.app import app\n",
        "clients/__init__.py": "",
        "clients/app.py": "app = 1\n",
        "attacks/__init__.py": "",
        "attacks/view.py": ("from typing import TYPE_CHECKING\n"
                            "if TYPE_CHECKING:\n    from fedpriv.protocol import ClientReport\n"),
        "workflows/__init__.py": "",
        "tests/grid_support.py": "",
        "benchmarks/__init__.py": "",
        "benchmarks/attacks.py": "",
        "benchmarks/speed.py": ("import sys\nTESTS = 'tests'\n"
                                "def run():\n    sys.path.insert(0, TESTS)\n"
                                "    from grid_support import Grid\n"),
        "benchmarks/paths.py": ("import sys\n"
                                "sys.path[:] = [p for p in sys.path if 'tests' not in p]\n"),
    })
    graph = import_graph(tmp_path)
    assert graph["fedpriv.leakage.a"] == {"fedpriv.config"}
    assert [line.split(":")[0] for line in violations(graph)] == [
        "attacks.view imports fedpriv.protocol", "fedpriv.leakage.a imports fedpriv.config",
        "strategies.s imports clients.app"]
    assert cycles(graph) == [["fedpriv.leakage.b", "fedpriv.leakage.c"]]
    assert [line.split(":")[0] for line in benchmark_violations(tmp_path)] == [
        "benchmarks.speed imports grid_support", "benchmarks.attacks shadows the attacks package "
        "when run as a script", "benchmarks.paths line 2", "benchmarks.speed line 4"]
    _tree(tmp_path, {"fedpriv/leakage/a.py": "", "fedpriv/leakage/c.py": "",
                     "strategies/s.py": "APP = 'clients.app:app'\n", "attacks/view.py": "",
                     "benchmarks/speed.py": "from workflows import grid\n",
                     "benchmarks/paths.py": "import sys\nsys.path.insert(0, 'src')\n"})
    (tmp_path / "benchmarks/attacks.py").rename(tmp_path / "benchmarks/attack_speed.py")
    graph = import_graph(tmp_path)
    assert violations(graph) == [] and cycles(graph) == []
    assert benchmark_violations(tmp_path) == []
