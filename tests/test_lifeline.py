"""Issue 16: no orphans. Killing the launcher (SIGKILL: no handler runs) leaves no rank behind.

* :func:`lbsim.runtime.lifeline.die_with_parent` on its own: a process whose parent is SIGKILLed ends;
* end to end: ``lbsim train`` killed while its ranks train leaves no rank running, and the run
  folder still holds the previous complete run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

psutil = pytest.importorskip("psutil")

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE  # dead, waiting for init to reap it
    except psutil.NoSuchProcess:
        return True


def _wait_gone(pids: list[int], timeout_s: float = 60.0) -> list[int]:
    deadline = time.monotonic() + timeout_s  # hang guard only
    while time.monotonic() < deadline:
        left = [p for p in pids if not _gone(p)]
        if not left:
            return []
        time.sleep(0.1)
    return [p for p in pids if not _gone(p)]


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_die_with_parent_ends_the_child_of_a_killed_parent(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    child_py = tmp_path / "child.py"
    child_py.write_text("import os, time\nfrom lbsim.runtime.lifeline import die_with_parent\ndie_with_parent()\n"
                        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(600)\n", encoding="utf-8")
    parent_code = (f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, {str(child_py)!r}])\n"
                   "time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", parent_code], env=ENV)
    child = 0
    try:
        deadline = time.monotonic() + 60
        while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        child = int(pid_file.read_text())
        assert not _gone(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        assert _wait_gone([child]) == []
    finally:
        parent.kill()
        if child:
            _kill_all([child])


SCENARIO = (
    "name: orphans\nseed: 5\n"
    "workload: {model: resnet50_imagenet, global_batch: 32, updates: 10000000}\n"
    "cluster:\n  groups:\n"
    "    - {instance: c5.xlarge, count: 2, t0_s: 0.0, samples_per_s: 1000.0, max_batch: 512}\n"
    "network: {name: ring_allreduce}\n"
    "numerics: {model: softmax, hidden: 16, learning_rate: 0.5}\n"
    "scheme: {name: static}\n"
)


def _ranks(launcher: int) -> tuple[list[int], list[int]]:
    """The launcher's ranks (spawned: its children running ``spawn_main``; forked: the fork server's
    children) and all its descendants."""
    ranks, everyone = [], []
    for c in psutil.Process(launcher).children(recursive=True):
        try:
            cmd, parent = " ".join(c.cmdline()), psutil.Process(c.ppid()).cmdline()
        except psutil.NoSuchProcess:
            continue
        everyone.append(c.pid)
        if "spawn_main" in cmd or "multiprocessing.forkserver" in " ".join(parent):
            ranks.append(c.pid)
    return ranks, everyone


def test_killing_the_launcher_leaves_no_rank_and_the_previous_run(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from lbsim.cli import main

    f = tmp_path / "s.yaml"
    f.write_text(SCENARIO, encoding="utf-8")
    out = tmp_path / "run"
    assert main(["run", str(f), "--out", str(out), "-q", "--set", "workload.updates=3"]) == 0  # the previous run
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    launcher = subprocess.Popen([sys.executable, "-m", "lbsim", "train", str(f), "--out", str(out), "-q"],
                                cwd=tmp_path, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    ranks: list[int] = []
    descendants: list[int] = []
    try:
        deadline = time.monotonic() + 240  # hang guard: torch starts slowly on a busy machine
        while time.monotonic() < deadline:
            assert launcher.poll() is None, launcher.stderr.read() if launcher.stderr else ""
            ranks, descendants = _ranks(launcher.pid)
            started = [p for p in tmp_path.glob(".run.*.tmp") if (p / "scenario.resolved.yaml").exists()]
            if len(ranks) == 2 and started:
                break  # both ranks run, and the recorder has started writing the new run
            time.sleep(0.1)
        assert len(ranks) == 2, "the ranks never started"
        launcher.send_signal(signal.SIGKILL)
        launcher.wait(timeout=30)
        assert _wait_gone(ranks) == [], "a rank outlived its launcher"
        assert _wait_gone(descendants) == [], "a process the launcher started (the fork server) outlived it"
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
        _kill_all(ranks + descendants)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
