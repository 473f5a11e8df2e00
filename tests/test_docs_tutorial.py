"""Every shell block of docs/tutorial.md runs, in order, in a scratch folder, and does what the text says.

The blocks run verbatim with ``bash -euo pipefail`` in a temporary folder that links the
repository's ``scenarios/`` (so outputs land in the scratch ``runs/``), with ``lbsim`` bound to
this interpreter's ``python -m lbsim``. Two lines are adapted, and only these:

* ``pip install`` lines are not executed (the test runs after installation, offline); instead
  every extra they name must exist in setup.py, and be in the ``dev`` extra.
* the full straggler study gets ``--set workload.time_budget_s=5`` (180 runs of 5 simulated
  seconds instead of 300: the same commands and files, in seconds rather than minutes).

YAML blocks that show a shipped sweep file must match the file.
"""

from __future__ import annotations

import ast
import csv
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
TUTORIAL = REPO / "docs" / "tutorial.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
STUDY = "lbsim sweep scenarios/sweeps/stragglers.yaml"


def blocks(lang: str) -> list[str]:
    return [body for kind, body in FENCE.findall(TUTORIAL.read_text(encoding="utf-8")) if kind == lang]


def extras() -> dict[str, list[str]]:
    tree = ast.parse((REPO / "setup.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "extras_require":
            return ast.literal_eval(node.value)
    raise AssertionError("setup.py has no extras_require")


def adapt(line: str) -> str:
    if re.search(r"\bpip install\b", line):
        found = extras()
        names = re.findall(r"\[([\w,-]+)\]", line)
        assert names, f"an install line without extras: {line}"
        dev = " ".join(found.get("dev", []))
        for name in names[0].split(","):
            assert name in found, f"tutorial installs extra {name!r}, setup.py has {sorted(found)}"
            for req in found[name]:
                assert req in dev, f"extra {name}'s {req} is not in the dev extra"
        return "true  # pip install: checked against setup.py, not run"
    if line.strip().startswith(STUDY):
        return line.rstrip() + " --set workload.time_budget_s=5"
    return line


def test_tutorial_has_shell_blocks() -> None:
    assert len(blocks("bash")) >= 8


def test_shown_sweep_file_is_the_shipped_one() -> None:
    shown = [b for b in blocks("yaml") if b.startswith("# The tutorial's sweep")]
    assert shown == [(REPO / "scenarios" / "sweeps" / "tutorial.yaml").read_text(encoding="utf-8")]
    for b in blocks("yaml"):
        yaml.safe_load(b)


@pytest.mark.slow
def test_every_shell_block_runs(tmp_path: Path) -> None:
    (tmp_path / "scenarios").symlink_to(REPO / "scenarios", target_is_directory=True)
    prelude = f'lbsim() {{ "{sys.executable}" -m lbsim "$@"; }}\nexport PYTHONPATH="{REPO}"\n'
    outputs = []
    for k, body in enumerate(blocks("bash")):
        script = prelude + "\n".join(adapt(line) for line in body.splitlines())
        proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, f"block {k} failed:\n{body}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        outputs.append(proc.stdout)
    text = "\n".join(outputs)
    runs = tmp_path / "runs"
    # what the text promises
    assert (runs / "ec2_mixed" / "bsp" / "summary.json").is_file()
    first = runs / "first-lbbsp"
    assert (first / "trace.json").is_file() and (first / "plots" / "batch_sizes.png").is_file()
    assert (runs / "ec2_mixed" / "compare" / "compare.csv").is_file()
    assert "12 points, 12 runs: 0 already done, 12 run now, 0 failed" in text
    assert "12 points, 12 runs: 12 already done, 0 run now, 0 failed" in text
    with (runs / "tutorial" / "results.csv").open(newline="", encoding="utf-8") as fh:
        assert len(list(csv.DictReader(fh))) == 12
    names = {p.stem for p in (runs / "tutorial" / "plots").glob("*.png")}
    assert names == {"throughput", "speedup_vs_bsp", "iteration_cdf", "lbbsp_batches", "timelines"}
    with (runs / "stragglers" / "results.csv").open(newline="", encoding="utf-8") as fh:
        assert len(list(csv.DictReader(fh))) == 180
    assert {p.stem for p in (runs / "stragglers" / "plots").glob("*.svg")} >= names | {"staleness"}
