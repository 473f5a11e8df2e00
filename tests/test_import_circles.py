"""No import circles between files (issue 17): the module graph of the core and both engines is acyclic.

Every absolute import of a project module, at any depth (top level, inside functions, under
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


def _edges(files: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in files else node.module
                           for alias in node.names]
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


def test_the_circle_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _circles(graph) == [["a", "b", "c"]]
