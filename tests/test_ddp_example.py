"""examples/ddp_digits.py under a real ``torchrun --nproc-per-node=3`` (gloo, CPU), as a user runs it.

Two epochs with LB-BSP and rank 2 slowed 3x (the runtime's emulated contention): every epoch
trains on all 1,438 training samples (each once), LB-BSP gives the slowed rank the smallest batch,
and the CNN learns (test accuracy above 0.8 after the second epoch; chance is 0.1). Plain DDP mode
runs too (one epoch) and takes equal batches.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run(tmp_path: Path, *args: str) -> list[dict[str, object]]:
    out = tmp_path / "epochs.jsonl"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=3",
           str(REPO / "examples" / "ddp_digits.py"), "--json", str(out), "--slow-rank", "2", "--slowdown", "3", *args]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_example_lbbsp_under_torchrun(tmp_path: Path) -> None:
    lines = _run(tmp_path, "--mode", "lbbsp", "--epochs", "2", "--variant", "cpu", "--predictor", "ema")
    assert [e["samples"] for e in lines] == [1438, 1438]
    last = lines[-1]["batches"]
    assert last[2] < min(last[0], last[1])  # type: ignore[index]
    assert lines[-1]["test_accuracy"] > 0.8  # type: ignore[operator]


def test_example_plain_ddp_under_torchrun(tmp_path: Path) -> None:
    lines = _run(tmp_path, "--mode", "ddp", "--epochs", "1")
    assert lines[0]["batches"] == [32.0, 32.0, 32.0] and lines[0]["samples"] == 1344
