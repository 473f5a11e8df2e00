"""Running documented commands as a new user would: in a fresh copy of the repository.

:func:`fresh_clone` copies what a ``git clone`` of the working tree holds (tracked files plus
untracked files git does not ignore: no ``runs/``, caches or local data) into a scratch folder,
symlinks kept; outside a git checkout, every file but those the .gitignore names. Commands run
there with ``cwd`` and ``PYTHONPATH`` at the copy and ``HOME`` in the scratch folder, so a
command that needed anything the repository does not hold (a folder beside it, a file left in the
working tree, a user's config) fails.

:func:`shell_blocks` gives a Markdown file's fenced blocks of one language; :func:`run_script`
runs one with ``bash -euo pipefail``, ``lbsim`` bound to this interpreter's ``python -m lbsim``.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
IGNORED = ("runs", "__pycache__", ".pytest_cache", ".hypothesis", ".benchmarks", ".mypy_cache", ".ruff_cache",
           ".git", "build", "dist", ".venv", "venv")


def repository_files() -> list[str]:
    """Paths (relative) a fresh clone of the working tree would hold."""
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=REPO,
                             capture_output=True, check=True).stdout.decode().split("\0")
        return [f for f in out if f and ((REPO / f).exists() or (REPO / f).is_symlink())]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for p in REPO.rglob("*"):
            rel = p.relative_to(REPO)
            if any(part in IGNORED or part.endswith(".egg-info") for part in rel.parts):
                continue
            if p.is_file() or p.is_symlink():
                files.append(str(rel))
        return files


def fresh_clone(dest: Path) -> Path:
    """Copy the repository's files into ``dest`` (created); returns ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    for rel in repository_files():
        src, dst = REPO / rel, dest / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dst)
        elif src.is_file():
            shutil.copy2(src, dst)
    return dest


def clone_env(clone: Path, home: Path) -> dict[str, str]:
    """The environment of a new user's shell in ``clone``: this one's, without lbsim's and pytest's
    variables and with Python's default bytecode cache (``__pycache__`` in the clone), as after
    ``git clone``: a ``PYTHONDONTWRITEBYTECODE`` set here would have every command, and every rank
    it starts, compile lbsim's sources afresh."""
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LBSIM_", "PYTEST_")) and k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=str(clone), HOME=str(home), MPLCONFIGDIR=str(home / "mpl"))
    return env


def shell_blocks(markdown: Path, lang: str = "bash") -> list[str]:
    return [body for kind, body in FENCE.findall(markdown.read_text(encoding="utf-8")) if kind == lang]


def extras() -> dict[str, list[str]]:
    tree = ast.parse((REPO / "setup.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "extras_require":
            return ast.literal_eval(node.value)  # type: ignore[no-any-return]
    raise AssertionError("setup.py has no extras_require")


def check_install_line(line: str) -> str:
    """A ``pip install -e ".[a,b]"`` line is not run (offline, already installed): every extra it names
    must exist in setup.py and be in the dev extra. Returns the shell no-op that replaces it."""
    found = extras()
    names = re.findall(r"\[([\w,-]+)\]", line)
    assert names, f"an install line without extras: {line}"
    dev = " ".join(found.get("dev", []))
    for name in names[0].split(","):
        assert name in found, f"the docs install extra {name!r}, setup.py has {sorted(found)}"
        if name not in ("dev", "runtime"):
            for req in found[name]:
                assert req in dev, f"extra {name}'s {req} is not in the dev extra"
    return "true  # pip install: checked against setup.py, not run"


def run_script(script: str, cwd: Path, env: dict[str, str], *, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    prelude = f'lbsim() {{ "{sys.executable}" -m lbsim "$@"; }}\n'
    return subprocess.run(["bash", "-euo", "pipefail", "-c", prelude + script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
