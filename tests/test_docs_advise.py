"""docs/advise.md: every shell block runs, in a scratch folder, and the newcomer's output is what the page shows.

The first command (the newcomer's question) runs verbatim and its printed mapping and decision must
be the lines the page quotes. The other ``lbsim advise`` lines get a shorter run and one seed, so the
test takes seconds: a scenario file gets ``--set workload.time_budget_s=20 --seeds 1``, a cluster line
``--budget-s 20 --seeds 1``. The Python block runs with ``budget_s=20.0`` added to its request.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "advise.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
NEWCOMER = 'lbsim advise --cluster "4xV100,4xT4" --network 10gbps --colocated "slowdown=2 on 1 node"'


def blocks(lang: str) -> list[str]:
    return [body for kind, body in FENCE.findall(PAGE.read_text(encoding="utf-8")) if kind == lang]


def adapt(line: str) -> str:
    if line.strip() == NEWCOMER or not line.strip().startswith("lbsim advise"):
        return line
    if line.strip().startswith("lbsim advise scenarios/"):
        return line.rstrip() + " --set workload.time_budget_s=20 --seeds 1"
    return line.rstrip() + " --budget-s 20 --seeds 1"


def run(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    prelude = f'lbsim() {{ "{sys.executable}" -m lbsim "$@"; }}\nexport PYTHONPATH="{REPO}"\n'
    return subprocess.run(["bash", "-euo", "pipefail", "-c", prelude + script], cwd=cwd, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.slow
def test_every_shell_block_runs_and_the_quoted_output_is_real(tmp_path: Path) -> None:
    (tmp_path / "scenarios").symlink_to(REPO / "scenarios", target_is_directory=True)
    shell = blocks("bash")
    assert shell[0].strip() == NEWCOMER and len(shell) >= 4
    quoted = [b for kind, b in FENCE.findall(PAGE.read_text(encoding="utf-8")) if kind == "" and "cluster:" in b][0]
    for k, body in enumerate(shell):
        proc = run("\n".join(adapt(line) for line in body.splitlines()), tmp_path)
        assert proc.returncode == 0, f"block {k}: {proc.stderr[-2000:]}"
        if k == 0:
            printed = proc.stdout.splitlines()
            for line in quoted.splitlines():
                if line.startswith(("cluster:", "advise:")):
                    assert line in printed, line
            decision = " ".join(line for line in quoted.splitlines()[-2:])
            assert decision in " ".join(printed[-3:-1]) or decision in proc.stdout.replace("\n", " ")
    for folder in ("runs/cluster/advise", "runs/ec2_mixed/advise4", "runs/ec2_mixed/straggler", "runs/cluster/advise-dask"):
        report = json.loads((tmp_path / folder / "advise.json").read_text(encoding="utf-8"))
        assert (tmp_path / folder / "advise.html").is_file() and report["decision"]["text"]
    four = json.loads((tmp_path / "runs/ec2_mixed/advise4/advise.json").read_text(encoding="utf-8"))
    assert [a["scheme"] for a in four["arms"]] == ["bsp", "asp", "dssp", "wbsp", "lbbsp"]


def test_the_python_block_runs(tmp_path: Path) -> None:
    (code,) = blocks("python")
    code = code.replace('colocated="slowdown=2 on 1 node")', 'colocated="slowdown=2 on 1 node", budget_s=20.0)')
    assert "budget_s=20.0" in code
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith(("Use ", "It depends"))
