"""The dependency rule ``lbsim.simulator -> lbsim <- lbsim.runtime`` (design.md), checked two ways.

The engines live in the top-level folders ``simulator/`` and ``runtime/`` and are imported as
``lbsim.simulator`` and ``lbsim.runtime`` (``lbsim/simulator`` and ``lbsim/runtime`` are links to the
folders; setup.py). Below, "the simulator" is every file under ``simulator/`` and every import of
``lbsim.simulator[.*]``; the same for the runtime; "the core" is every other file under ``lbsim/``.

Dynamically, in fresh subprocesses (``sys.modules`` after the imports):

* the core (``lbsim`` and the modules the CLI and both engines use) loads neither ``simpy`` nor ``torch``;
* the simulator (``lbsim.simulator.run``) never loads ``torch`` nor the runtime.

Statically, by parsing every file with :mod:`ast` and walking *all* ``Import``/``ImportFrom`` nodes
(top level, inside functions, under ``if``/``try``):

* no core file imports the simulator or the runtime, nor ``simpy`` or ``torch`` -- except two imports
  inside functions, each of one engine: **``lbsim/lifecycle/engines.py`` may import the simulator**
  (the run lifecycle's default engine, which every front door reaches through the lifecycle) and
  **``lbsim/cli.py`` may import the runtime** (``train``/``profile``/``validate``); the Python API
  imports no engine at all;
* no simulator file imports the runtime or ``torch``; no runtime file imports the simulator or ``simpy``;
* no engine file imports the command line ``lbsim.cli``, at any depth (a rank parses its arguments
  with :mod:`lbsim.arguments`, which the CLI shares);
* nothing imports the engines by their folder names (``import simulator``, ``from runtime.x ...``):
  those are not installed names, and a module loaded under two names would exist twice.

Relative imports (``from .sync import x``) are how an engine imports its own modules (a tool that
reads files follows them; ``lbsim.simulator.sync`` leads it into a link); none leaves its engine's
folder and the core has none (:func:`test_relative_imports_stay_in_their_engine`), so the checks
above, on absolute imports, see every import between the parts.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

CORE_MODULES = [
    "lbsim", "lbsim.api", "lbsim.engine", "lbsim.lifecycle", "lbsim.results", "lbsim.scenario.loader", "lbsim.schemes", "lbsim.cli", "lbsim.metrics.summary", "lbsim.contention.model",
]


def _loaded_after(imports: list[str], watch: list[str]) -> list[str]:
    """Which of ``watch`` (top-level names) are in sys.modules of a fresh interpreter after ``imports``."""
    code = (
        "import importlib, json, sys\n"
        f"for m in {imports!r}: importlib.import_module(m)\n"
        f"print(json.dumps(sorted({{n.split('.')[0] for n in sys.modules}} & set({watch!r}))))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_core_loads_neither_simpy_nor_torch() -> None:
    assert _loaded_after(CORE_MODULES, ["simpy", "torch"]) == []


def test_cli_commands_without_engine_load_no_engine() -> None:
    """Building the parser and listing schemes (as ``lbsim schemes`` does) stays engine-free."""
    code = (
        "import contextlib, io, json, sys\n"
        "from lbsim.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()): rc = main(['schemes'])\n"
        "print(json.dumps([rc, sorted(n for n in sys.modules if n.split('.')[0] in {'simpy', 'torch'}\n"
        "                            or n.startswith(('lbsim.simulator', 'lbsim.runtime')))]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [0, []]


def test_simulator_never_loads_torch() -> None:
    assert _loaded_after(["lbsim.simulator.run"], ["torch"]) == []
    assert not [m for m in _modules_after(["lbsim.simulator.run"]) if m.startswith("lbsim.runtime")]


def test_the_runtime_launcher_loads_no_torch() -> None:
    """The process that runs ``lbsim train | profile | validate`` starts ranks and refits their profiles;
    only the ranks import torch (seconds of CPU each time)."""
    assert _loaded_after(["lbsim.runtime.commands", "lbsim.runtime.launch", "lbsim.runtime.profile_fit"], ["torch"]) == []


def _modules_after(imports: list[str]) -> list[str]:
    code = (
        "import importlib, json, sys\n"
        f"for m in {imports!r}: importlib.import_module(m)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_engines_are_installed_under_lbsim() -> None:
    """``lbsim.simulator`` and ``lbsim.runtime`` are the top-level folders, not copies of them."""
    import lbsim.simulator

    assert Path(lbsim.simulator.__file__).resolve() == (REPO / "simulator" / "__init__.py").resolve()
    assert (REPO / "lbsim" / "runtime").resolve() == (REPO / "runtime").resolve()


# --- static check ---------------------------------------------------------------------------------

ENGINES = ("simulator", "runtime")


def _part(module: str) -> str:
    """The part of the code base an absolute module name belongs to: ``simulator``/``runtime`` for
    ``lbsim.simulator[.*]``/``lbsim.runtime[.*]``, ``bare simulator``/``bare runtime`` for the folder
    names imported directly, else its top-level name (``lbsim``, ``simpy``, ``torch``, ...)."""
    parts = module.split(".")
    if parts[0] == "lbsim" and len(parts) > 1 and parts[1] in ENGINES:
        return parts[1]
    if parts[0] in ENGINES:
        return f"bare {parts[0]}"
    return parts[0]


def _imports(tree: ast.AST) -> list[tuple[str, int, bool]]:
    """(part, line, inside a function) for every absolute import in ``tree`` (``from lbsim import
    simulator`` counts as importing ``lbsim.simulator``)."""
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                found.extend((_part(alias.name), child.lineno, inside) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                names = [f"{child.module}.{alias.name}" for alias in child.names] if child.module == "lbsim" else [child.module]
                found.extend((_part(name), child.lineno, inside) for name in dict.fromkeys(names))
            visit(child, inside)

    visit(tree, False)
    return found


def _dynamic_imports(tree: ast.AST) -> list[tuple[str, int]]:
    """``importlib.import_module("x")`` / ``__import__("x")`` calls with a literal name."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("import_module", "__import__"):
                found.append((_part(node.args[0].value), node.lineno))
    return found


BARE = {"bare simulator", "bare runtime"}
FORBIDDEN = {
    "lbsim": {"simulator", "runtime", "simpy", "torch"} | BARE,
    "simulator": {"runtime", "torch"} | BARE,
    "runtime": {"simulator", "simpy"} | BARE,
    "tests": BARE,
    "benchmarks": BARE,
    "examples": BARE,
}


# The core files that choose an engine, inside a function, and which one (design.md, The run lifecycle).
ENGINE_CHOOSERS = {"lbsim/lifecycle/engines.py": "simulator", "lbsim/cli.py": "runtime"}


def _files(folder: str) -> list[Path]:
    """The .py files of a folder; ``lbsim/``'s without the engines it links to."""
    links = [REPO / "lbsim" / engine for engine in ENGINES]
    return sorted(p for p in (REPO / folder).rglob("*.py") if not any(p.is_relative_to(link) for link in links))


def _violations(package: str) -> list[str]:
    bad = []
    for path in _files(package):
        rel = path.relative_to(REPO).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
        for module, line, in_function in _imports(tree):
            if module not in FORBIDDEN[package]:
                continue
            if in_function and ENGINE_CHOOSERS.get(rel) == module:
                continue  # the lifecycle's default engine; the CLI's runtime commands
            bad.append(f"{rel}:{line} imports {module}{' (inside a function)' if in_function else ''}")
        for module, line in _dynamic_imports(tree):
            if module in FORBIDDEN[package]:
                bad.append(f"{rel}:{line} imports {module} dynamically")
    return bad


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_static_import_rule(package: str) -> None:
    if not (REPO / package).is_dir():
        pytest.skip(f"{package}/ does not exist yet")
    assert _violations(package) == []


def test_static_checker_sees_nested_imports() -> None:
    """The walker finds imports at any depth and knows whether they are inside a function."""
    tree = ast.parse(
        "import simpy\n"
        "from torch.nn import Linear\n"
        "from . import sibling\n"
        "if True:\n    import lbsim.runtime.x\n"
        "def f():\n    from lbsim.simulator.run import simulate\n"
        "class C:\n    def m(self):\n        import torch\n"
        "from lbsim import runtime, schemes\n"
        "from simulator.env import SimEnv\n"
    )
    assert _imports(tree) == [("simpy", 1, False), ("torch", 2, False), ("runtime", 5, False),
                              ("simulator", 7, True), ("torch", 10, True), ("runtime", 11, False),
                              ("lbsim", 11, False), ("bare simulator", 12, False)]


def _relative_escapes(folder: str) -> list[str]:
    """Relative imports that climb above ``folder`` (the core: any relative import at all)."""
    bad = []
    for path in _files(folder):
        rel = path.relative_to(REPO)
        depth = len(rel.parts) - 2 if folder in ENGINES else -1  # packages between the engine's folder and the file
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level > depth + 1:
                bad.append(f"{rel.as_posix()}:{node.lineno} from {'.' * node.level}{node.module or ''}")
    return bad


@pytest.mark.parametrize("folder", ["lbsim", *ENGINES])
def test_relative_imports_stay_in_their_engine(folder: str) -> None:
    assert _relative_escapes(folder) == []


# --- no engine imports the command line ---------------------------------------------------------

def _module_imports(tree: ast.AST) -> list[tuple[str, int]]:
    """(full dotted module name, line) of every absolute import, ``from a import b`` giving ``a.b`` too."""
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module, node.lineno))
            found.extend((f"{node.module}.{alias.name}", node.lineno) for alias in node.names)
    return found


def _cli_imports(package: str) -> list[str]:
    bad = []
    for path in _files(package):
        rel = path.relative_to(REPO).as_posix()
        for module, line in _module_imports(ast.parse(path.read_text(encoding="utf-8"), filename=rel)):
            if module == "lbsim.cli" or module.startswith("lbsim.cli."):
                bad.append(f"{rel}:{line} imports {module}")
    return bad


@pytest.mark.parametrize("package", ["simulator", "runtime"])
def test_engine_never_imports_the_cli(package: str) -> None:
    assert _cli_imports(package) == []


def test_cli_import_checker_sees_every_form() -> None:
    tree = ast.parse("from lbsim.cli import build_parser\nfrom lbsim import cli\ndef f():\n    import lbsim.cli\n"
                     "from lbsim.arguments import train_parser\n")
    names = [m for m, _ in _module_imports(tree) if m == "lbsim.cli" or m.startswith("lbsim.cli.")]
    assert names == ["lbsim.cli", "lbsim.cli.build_parser", "lbsim.cli", "lbsim.cli"]


def test_rank_entry_point_loads_no_cli() -> None:
    """The torchrun entry point (``lbsim.runtime.worker``) and the launcher's commands never load ``lbsim.cli``."""
    code = ("import json, sys, lbsim.runtime.worker, lbsim.runtime.commands, lbsim.runtime.launch\n"
            "print(json.dumps('lbsim.cli' in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0 and "No module named 'torch'" in proc.stderr:
        pytest.skip("the runtime extra (torch) is not installed")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) is False


def test_installed_packages_are_lbsim_only() -> None:
    """setup.py installs the engines as ``lbsim.simulator``/``lbsim.runtime`` and claims no other top-level name."""
    code = ("import json, os, setuptools, distutils.core as core\n"
            "dist = core.run_setup('setup.py', stop_after='init')\n"
            "print(json.dumps(sorted(dist.packages)))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    packages = json.loads(proc.stdout.strip().splitlines()[-1])
    assert {p.split(".")[0] for p in packages} == {"lbsim"}
    assert {"lbsim.simulator", "lbsim.runtime", "lbsim.runtime.ddp"} <= set(packages)
