"""A sweep killed with SIGKILL mid-way and started again with the same command ends with exactly
the results of an uninterrupted sweep: same rows, same files, nothing lost, nothing run twice.

The sweep runs in a subprocess (``python -m lbsim sweep ...``) in its own session; only its main
process is killed, and its pool workers must not outlive it (checked on Linux through /proc).
"""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from lbsim.simulator.run import simulate
from lbsim.sweep import load_sweep
from lbsim.sweep.runner import run_sweep

REPO = Path(__file__).resolve().parents[1]
EC2 = REPO / "scenarios" / "ec2_mixed.yaml"

# 12 short runs (20 simulated s, 2 repetitions): the kill lands after the third finished run and well before
# the last (the sweep runs them one at a time), which is all the resume needs; longer or more runs add time only.
SWEEP = {
    "base": str(EC2),
    "set": {"workload.time_budget_s": 20, "contention.1.start_s": 5},
    "factors": {"scheme": ["bsp", "asp", "lbbsp"], "contention.1.slowdown": [1.5, 3.0]},
    "repetitions": 2,
}
TOTAL = 12


class _OneByOne:
    """Every run in this process, one after the other: the reference needs no pool (a sweep's results do not
    depend on its backend: tests/test_sweep_run.py), and starting one costs more CPU than its 12 runs."""

    def map_unordered(self, fn: Callable[[Any], Any], items: Sequence[tuple[str, Any]]) -> Iterator[tuple[str, Any]]:
        for key, payload in items:
            try:
                yield key, fn(payload)
            except Exception as err:  # noqa: BLE001 — reported per run by the driver, as LocalPool does
                yield key, err


def _snapshot(out: Path) -> dict[str, bytes]:
    files = {"results.csv": (out / "results.csv").read_bytes()}
    for p in sorted((out / "runs").rglob("*")):
        if p.is_file():
            files[p.relative_to(out).as_posix()] = p.read_bytes()
    return files


def _live_in_group(pgid: int) -> list[int]:
    """PIDs of processes (not zombies) in process group ``pgid``, from /proc."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            pids.append(int(stat.parent.name))
    return pids


def _finished(out: Path) -> list[str]:
    runs = out / "runs"
    return [p.name for p in runs.iterdir() if not p.name.startswith(".")] if runs.is_dir() else []


@pytest.mark.slow
def test_sigkill_then_restart_equals_an_uninterrupted_sweep(tmp_path: Path) -> None:
    sweep_file = tmp_path / "resume.yaml"
    sweep_file.write_text(yaml.safe_dump(SWEEP), encoding="utf-8")
    ref = tmp_path / "ref"
    run_sweep(load_sweep(sweep_file), ref, engine=simulate, backend=_OneByOne())

    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "lbsim", "sweep", str(sweep_file), "-j", "1", "--out", str(out), "-q"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    try:
        while len(_finished(out)) < 3:
            assert proc.poll() is None, f"the sweep ended before it could be killed: {proc.communicate()}"
            assert time.monotonic() < deadline, "no run finished in time"
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        if Path("/proc/self/stat").is_file():
            while _live_in_group(proc.pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not _live_in_group(proc.pid), "pool workers outlived the killed sweep"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # cleanup if anything of that session is left
        except ProcessLookupError:
            pass
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    done = _finished(out)
    assert 3 <= len(done) < TOTAL, "killed mid-way"
    with (out / "results.csv").open(newline="", encoding="utf-8") as fh:  # complete as of some finished run
        rows = list(csv.DictReader(fh))
    assert {r["run"] for r in rows} <= set(done) and len(rows) >= len(done) - 1

    again = subprocess.run(cmd[:-1], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert f"{TOTAL} points, {TOTAL} runs: {len(done)} already done, {TOTAL - len(done)} run now, 0 failed" in again.stdout

    with (out / "results.csv").open(newline="", encoding="utf-8") as fh:
        runs = [r["run"] for r in csv.DictReader(fh)]
    assert len(runs) == len(set(runs)) == TOTAL, "no run lost or duplicated"
    assert _snapshot(out) == _snapshot(ref)
    assert not list(out.glob(".*.tmp")) and not [p for p in (out / "runs").iterdir() if p.name.startswith(".")]
