"""docs/tutorial.md shows what ships: its YAML blocks parse and the sweep file it shows is the shipped one.

Its shell blocks run, in order, on a fresh clone in tests/test_docs_commands.py (with the README's).
"""

from __future__ import annotations

from pathlib import Path

import yaml
from docs_harness import shell_blocks

REPO = Path(__file__).resolve().parents[1]
TUTORIAL = REPO / "docs" / "tutorial.md"


def test_tutorial_has_shell_blocks() -> None:
    assert len(shell_blocks(TUTORIAL)) >= 8


def test_shown_sweep_file_is_the_shipped_one() -> None:
    shown = [b for b in shell_blocks(TUTORIAL, "yaml") if b.startswith("# The tutorial's sweep")]
    assert shown == [(REPO / "scenarios" / "sweeps" / "tutorial.yaml").read_text(encoding="utf-8")]
    for b in shell_blocks(TUTORIAL, "yaml"):
        yaml.safe_load(b)
