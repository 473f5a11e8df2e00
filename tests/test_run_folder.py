"""Issue 16: a run folder always holds exactly one complete run; a second writer is refused.

* a run into a folder that holds another run replaces it whole (no stale decisions, numerics,
  trace or figures beside the new summary);
* a run killed (SIGKILL) mid-way leaves the previous complete run intact, byte for byte, and the
  next run clears what the killed one left;
* while one run writes a folder, a second run into it is refused (exit 2, one line);
* the two-rename fallback of the swap, and its recovery when a kill splits it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lbsim.cli import main
from lbsim.errors import InputError
from lbsim.run_folder import check_replaceable, staged_run

REPO = Path(__file__).resolve().parents[1]

SMALL = (
    "seed: 1\n"
    "workload: {model: resnet50_imagenet, global_batch: 96, updates: 4}\n"
    "cluster: {groups: [{instance: g4dn.xlarge, count: 2}, {instance: p3.2xlarge, count: 1}]}\n"
    "network: {name: parameter_server}\n"
    "scheme: {name: bsp}\n"
)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _scenario(tmp_path: Path, text: str = SMALL) -> Path:
    f = tmp_path / "s.yaml"
    f.write_text(text, encoding="utf-8")
    return f


def test_a_run_replaces_the_whole_previous_run(tmp_path: Path) -> None:
    f = _scenario(tmp_path)
    out = tmp_path / "run"
    assert main(["run", str(f), "--out", str(out), "-q", "--trace", "--scheme", "elastic_bsp",
                 "--set", "numerics.enabled=true", "--set", "workload.updates=40"]) == 0
    assert {"decisions.csv", "numerics.csv", "trace.json"} <= set(os.listdir(out))
    assert main(["run", str(f), "--out", str(out), "-q"]) == 0
    assert sorted(os.listdir(out)) == ["invocation.json", "iterations.csv", "provenance.json", "scenario.resolved.yaml",
                                       "summary.json", "updates.csv"]
    assert "name: bsp" in (out / "scenario.resolved.yaml").read_text(encoding="utf-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "s.yaml"]  # no staging folder or lock left


def test_compare_replaces_its_folder_whole(tmp_path: Path) -> None:
    f = _scenario(tmp_path)
    out = tmp_path / "cmp"
    equal_samples = ["--set", "workload.updates=null", "--set", "workload.samples=384"]  # equal work across schemes
    assert main(["compare", str(f), "--schemes", "bsp,asp,ssp", "--out", str(out), "-q", *equal_samples]) == 0
    assert main(["compare", str(f), "--schemes", "static,bsp", "--out", str(out), "-q", *equal_samples]) == 0
    assert sorted(os.listdir(out)) == ["bsp", "compare.csv", "static"]


def _start_long_run(f: Path, out: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "lbsim", "run", str(f), "--out", str(out), "-q",
                             "--set", "workload.updates=10000000"],
                            cwd=f.parent, env={**os.environ, "PYTHONPATH": str(REPO)}, text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _wait_for_stage(out: Path, proc: subprocess.Popen[str]) -> Path:
    deadline = time.monotonic() + 120  # hang guard only
    while time.monotonic() < deadline:
        stages = [p for p in out.parent.glob(f".{out.name}.*.tmp") if (p / "scenario.resolved.yaml").exists()]
        if stages:
            return stages[0]
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.05)
    raise AssertionError("the run never started writing")


def test_a_killed_run_leaves_the_previous_run_intact_and_a_second_writer_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _scenario(tmp_path)
    out = tmp_path / "run"
    assert main(["run", str(f), "--out", str(out), "-q", "--trace"]) == 0
    before = _snapshot(out)
    proc = _start_long_run(f, out)
    try:
        stage = _wait_for_stage(out, proc)
        # while it runs: a second run into the same folder is refused, and writes nothing
        capsys.readouterr()
        assert main(["run", str(f), "--out", str(out), "-q"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"--out: another lbsim run is writing to {out}" in err
        assert _snapshot(out) == before
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert _snapshot(out) == before  # the previous complete run, byte for byte
    assert stage.exists()  # what the killed run left ...
    assert main(["run", str(f), "--out", str(out), "-q"]) == 0
    assert not stage.exists()  # ... is cleared by the next run into the folder
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "s.yaml"]
    assert "trace.json" not in os.listdir(out)


def test_swap_without_renameat2_and_recovery_from_a_split_swap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import lbsim.run_folder as rf

    monkeypatch.setattr(rf, "_exchange", lambda a, b: False)
    out = tmp_path / "run"
    for content in ("first", "second"):
        with staged_run(out) as stage:
            (stage / "summary.json").write_text(content, encoding="utf-8")
        assert (out / "summary.json").read_text(encoding="utf-8") == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    # a kill between the two renames: the previous run sits in .run.<random>.prev and run is gone
    os.rename(out, tmp_path / ".run.x1y2z3w4.prev")
    with pytest.raises(RuntimeError), staged_run(out):
        raise RuntimeError("the new run fails")
    assert (out / "summary.json").read_text(encoding="utf-8") == "second"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_a_failing_run_keeps_the_previous_one_unless_told(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with staged_run(out) as stage:
        (stage / "summary.json").write_text("ok", encoding="utf-8")
    with pytest.raises(KeyError), staged_run(out) as stage:
        (stage / "summary.json").write_text("half", encoding="utf-8")
        raise KeyError("lbsim fault")
    assert (out / "summary.json").read_text(encoding="utf-8") == "ok"
    with pytest.raises(KeyError), staged_run(out, keep_on=(KeyError,)) as stage:
        (stage / "failure.json").write_text("crashed rank", encoding="utf-8")
        raise KeyError("a rank crashed")
    assert sorted(os.listdir(out)) == ["failure.json"]


def test_only_empty_or_lbsim_folders_are_replaced(tmp_path: Path) -> None:
    check_replaceable(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    check_replaceable(tmp_path / "empty")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("x", encoding="utf-8")
    with pytest.raises(InputError, match="holds no lbsim run"):
        check_replaceable(tmp_path / "other")
    (tmp_path / "file").write_text("x", encoding="utf-8")
    with pytest.raises(InputError, match="not a directory"):
        check_replaceable(tmp_path / "file")


def test_a_run_leaves_the_staging_folder_of_a_neighbour_alone(tmp_path: Path) -> None:
    neighbour = tmp_path / ".run.2.abcd1234.tmp"  # a run into run.2 in progress (or killed): not ours
    neighbour.mkdir()
    stale = tmp_path / ".run.abcd1234.tmp"  # ours, left by a killed run
    stale.mkdir()
    with staged_run(tmp_path / "run") as stage:
        (stage / "summary.json").write_text("{}", encoding="utf-8")
    assert neighbour.exists() and not stale.exists()
