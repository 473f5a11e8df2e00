"""No import circles between files: the module graph of the core and both engines is acyclic.

Every import of a project module (absolute, or relative as the engines import their own modules),
at any depth (top level, inside functions, under
``if TYPE_CHECKING``), is an edge from the importing file to the imported module's file
(``from a.b import c`` points at ``a/b/c.py`` when that is a module, else at ``a/b``). A package's
``__init__`` that an import passes through on its way to a submodule is not an edge: it runs, but
what it holds is not what the importer takes. Strongly connected components of more than one file
are circles.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENGINES = {"simulator": REPO / "simulator", "runtime": REPO / "runtime"}


def _module_files() -> dict[str, Path]:
    """Dotted name -> file, for lbsim (without the engine links) and the engines under their lbsim names."""
    files: dict[str, Path] = {}
    roots = [("lbsim", REPO / "lbsim")] + [(f"lbsim.{name}", path) for name, path in ENGINES.items()]
    for prefix, root in roots:
        for path in root.rglob("*.py"):
            rel = path.relative_to(root)
            if prefix == "lbsim" and rel.parts[0] in ENGINES:
                continue  # the links: the engines are walked from their own folders
            parts = [prefix, *rel.with_suffix("").parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            files[".".join(parts)] = path
    return files


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module a ``from`` import names: ``from .sync import x`` in ``lbsim.simulator.run``
    is ``lbsim.simulator.sync`` (each further dot one package up)."""
    if not node.level:
        return node.module or ""
    package = module if is_package else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def _edges(files: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(name, path.name == "__init__.py", node)
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base for alias in node.names]
            for target in targets:
                while target and target not in files:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one node."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circles() -> None:
    files = _module_files()
    assert "lbsim.simulator.run" in files and "lbsim.runtime.worker" in files and "lbsim.cli" in files
    assert _circles(_edges(files)) == []


def test_relative_imports_resolve_inside_their_package() -> None:
    tree = ast.parse("from .sync import run_sync\nfrom . import network\nfrom ..ddp.hook import h\nfrom lbsim.errors import E\n")
    nodes = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert [_absolute("lbsim.simulator.run", False, n) for n in nodes] == [
        "lbsim.simulator.sync", "lbsim.simulator", "lbsim.ddp.hook", "lbsim.errors"]
    assert _absolute("lbsim.runtime.ddp", True, nodes[0]) == "lbsim.runtime.ddp.sync"


def test_the_circle_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _circles(graph) == [["a", "b", "c"]]
