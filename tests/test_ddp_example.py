"""examples/ddp_digits.py under a real ``torchrun --nproc-per-node=3`` (gloo, CPU), as a user runs it.

Two epochs with LB-BSP and rank 2 slowed 3x (the runtime's emulated contention): every epoch
trains on all 1,438 training samples (each once), LB-BSP gives the slowed rank the smallest batch,
and the CNN learns (test accuracy above 0.8 after the second epoch; chance is 0.1). Plain DDP mode
runs as the README's `torchrun ... --mode ddp --record runs/digits_job` line, in
tests/test_docs_commands.py (one epoch of equal batches, recorded). On a GPU machine (skipped elsewhere): three ranks
sharing the GPU over gloo with the ``gpu_model`` variant, and one NCCL rank.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]


def _run(tmp_path: Path, *args: str, nproc: int = 3) -> list[dict[str, object]]:
    out = tmp_path / "epochs.jsonl"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
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


GPUS = int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
needs_gpu = pytest.mark.skipif(GPUS < 1, reason="no CUDA GPU")


@needs_gpu
def test_example_three_ranks_share_one_gpu_over_gloo(tmp_path: Path) -> None:
    """Three ranks on one GPU (gloo, CUDA tensors, CUDA-event step clock): gpu_model LB-BSP shrinks
    the slowed rank's batch, every sample is seen once an epoch, the CNN learns."""
    lines = _run(tmp_path, "--mode", "lbbsp", "--epochs", "2", "--variant", "gpu_model", "--device", "cuda", "--backend", "gloo")
    assert [e["samples"] for e in lines] == [1438, 1438]
    assert lines[-1]["device"] == "cuda:0" and lines[-1]["backend"] == "gloo"
    last = lines[-1]["batches"]
    assert last[2] < min(last[0], last[1])  # type: ignore[index]
    assert lines[-1]["test_accuracy"] > 0.8  # type: ignore[operator]


@needs_gpu
def test_example_one_nccl_rank(tmp_path: Path) -> None:
    lines = _run(tmp_path, "--mode", "lbbsp", "--epochs", "1", "--variant", "gpu", "--device", "cuda", nproc=1)
    assert lines[0]["backend"] == "nccl" and lines[0]["device"] == "cuda:0" and lines[0]["samples"] == 1438
