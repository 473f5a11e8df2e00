"""Running sweeps: -j 1 and -j 2 and a Dask LocalCluster give identical results; runs are content-addressed.

One small sweep (3 schemes x 2 slowdowns x 2 seeds on ec2_mixed, 30 simulated seconds) is run
once with ``-j 1`` as the reference; every other way of running it must reproduce it byte for
byte: ``results.csv`` and every file of every run folder.
"""

from __future__ import annotations

import csv
import hashlib
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from lbsim.errors import InputError
from lbsim.simulator.run import simulate
from lbsim.sweep import load_sweep
from lbsim.sweep.backends import DaskPool, LocalPool
from lbsim.sweep.runner import run_sweep

REPO = Path(__file__).resolve().parents[1]
EC2 = REPO / "scenarios" / "ec2_mixed.yaml"

SWEEP = {
    "name": "small",
    "base": str(EC2),
    "set": {"workload.time_budget_s": 30, "contention.1.start_s": 5},
    "factors": {"scheme": ["bsp", "asp", "lbbsp"], "contention.1.slowdown": [1.5, 3.0]},
    "repetitions": 2,
}


def write_sweep(folder: Path, data: dict[str, Any] = SWEEP) -> Path:
    path = folder / "small.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def snapshot(out: Path) -> dict[str, bytes]:
    """Every result file of a sweep folder (sweep.json, results.csv, runs/*/*), by relative path."""
    files = {"results.csv": (out / "results.csv").read_bytes(), "sweep.json": (out / "sweep.json").read_bytes()}
    for p in sorted((out / "runs").rglob("*")):
        if p.is_file():
            files[p.relative_to(out).as_posix()] = p.read_bytes()
    return files


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("sweep_ref")
    path = write_sweep(folder)
    report = run_sweep(load_sweep(path), folder / "out", engine=simulate, backend=LocalPool(1))
    assert (report.points, report.runs, report.skipped, report.ran, report.failed) == (12, 12, 0, 12, [])
    return path, folder / "out"


def test_results_csv_has_one_row_per_point_in_point_order(reference: tuple[Path, Path]) -> None:
    path, out = reference
    sweep = load_sweep(path)
    with (out / "results.csv").open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
        header = reader.fieldnames or []
    assert header[:4] == ["run", "scheme", "contention.1.slowdown", "repetition"]
    assert {"throughput_samples_per_s", "seed", "updates", "wait_fraction"} <= set(header)
    assert [r["run"] for r in rows] == [p.run_id for p in sweep.points]
    assert [(r["scheme"], r["contention.1.slowdown"], r["repetition"], r["seed"]) for r in rows][:3] == [
        ("bsp", "1.5", "0", "42"), ("bsp", "1.5", "1", "43"), ("bsp", "3.0", "0", "42")]
    assert all(float(r["throughput_samples_per_s"]) > 0 for r in rows)


def test_run_folders_are_complete_and_named_by_their_content(reference: tuple[Path, Path]) -> None:
    _, out = reference
    folders = sorted(p for p in (out / "runs").iterdir())
    assert len(folders) == 12 and not [p for p in folders if p.name.startswith(".")]
    for folder in folders:
        assert {"scenario.resolved.yaml", "iterations.csv", "updates.csv", "summary.json"} <= {p.name for p in folder.iterdir()}
        text = (folder / "scenario.resolved.yaml").read_bytes()
        assert hashlib.sha256(text).hexdigest()[:16] == folder.name


def test_two_workers_give_identical_results(reference: tuple[Path, Path], tmp_path: Path) -> None:
    path, ref = reference
    report = run_sweep(load_sweep(path), tmp_path / "out", engine=simulate, backend=LocalPool(2))
    assert report.ran == 12 and not report.failed
    assert snapshot(tmp_path / "out") == snapshot(ref)


def test_dask_local_cluster_gives_identical_results(reference: tuple[Path, Path], tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    from dask.distributed import Client, LocalCluster

    path, ref = reference
    with LocalCluster(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        report = run_sweep(load_sweep(path), tmp_path / "out", engine=simulate, backend=DaskPool(client))
    assert report.ran == 12 and not report.failed
    assert snapshot(tmp_path / "out") == snapshot(ref)


def test_scheduler_option_runs_on_a_dask_cluster(reference: tuple[Path, Path], tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("distributed")
    from dask.distributed import LocalCluster

    from lbsim.cli import main

    path, ref = reference
    out = tmp_path / "out"
    with LocalCluster(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None) as cluster:
        assert main(["sweep", str(path), "--scheduler", cluster.scheduler_address, "--out", str(out)]) == 0
        assert "12 run now, 0 failed" in capsys.readouterr().out
        assert main(["sweep", str(path), "--scheduler", cluster.scheduler_address, "-j", "2", "--out", str(out)]) == 2
        assert "drop -j" in capsys.readouterr().err
    assert snapshot(out) == snapshot(ref)


class Serial:
    """An in-process backend (the Backend protocol is all run_sweep needs)."""

    def map_unordered(self, fn, items):
        for key, payload in items:
            try:
                yield key, fn(payload)
            except Exception as err:  # noqa: BLE001
                yield key, err


def _fails_on_seed_43(scenario: Any) -> Any:
    if scenario.seed == 43:
        raise RuntimeError("injected failure")
    return simulate(scenario)


def test_failed_runs_leave_no_folder_and_are_retried(reference: tuple[Path, Path], tmp_path: Path) -> None:
    path, ref = reference
    sweep = load_sweep(path)
    out = tmp_path / "out"
    report = run_sweep(sweep, out, engine=_fails_on_seed_43, backend=Serial())
    assert report.ran == 6 and len(report.failed) == 6
    assert all("RuntimeError: injected failure" in err for _, err in report.failed)
    with (out / "results.csv").open(newline="", encoding="utf-8") as fh:
        assert {r["repetition"] for r in csv.DictReader(fh)} == {"0"}
    assert len(list((out / "runs").iterdir())) == 6
    # what a killed sweep can leave behind is cleaned up on the next start
    (out / "runs" / ".0123456789abcdef.x1.tmp").mkdir()
    (out / ".results.csv.x1.tmp").write_text("half", encoding="utf-8")
    progress: list[tuple[int, int]] = []
    report = run_sweep(sweep, out, engine=simulate, backend=Serial(), on_progress=lambda d, t: progress.append((d, t)))
    assert (report.skipped, report.ran, report.failed) == (6, 6, [])
    assert progress[0] == (0, 6) and progress[-1] == (6, 6)
    assert snapshot(out) == snapshot(ref)
    assert not list(out.glob(".*.tmp")) and not list((out / "runs").glob(".*"))


def test_a_finished_sweep_runs_nothing(reference: tuple[Path, Path], tmp_path: Path) -> None:
    path, ref = reference
    out = tmp_path / "out"
    shutil.copytree(ref, out)
    report = run_sweep(load_sweep(path), out, engine=_fails_on_seed_43, backend=Serial())
    assert (report.skipped, report.ran, report.failed) == (12, 0, [])
    assert snapshot(out) == snapshot(ref)


def test_two_sweeps_cannot_write_one_folder(reference: tuple[Path, Path], tmp_path: Path) -> None:
    fcntl = pytest.importorskip("fcntl")
    path, _ = reference
    out = tmp_path / "out"
    out.mkdir()
    with open(out / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(InputError, match="another lbsim sweep"):
            run_sweep(load_sweep(path), out, engine=simulate, backend=Serial())


def test_sweep_command_line(reference: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from lbsim.cli import main

    path, ref = reference
    out = tmp_path / "out"
    assert main(["sweep", str(path), "-j", "2", "--out", str(out)]) == 0
    assert "12 points, 12 runs: 0 already done, 12 run now, 0 failed" in capsys.readouterr().out
    assert snapshot(out) == snapshot(ref)
    assert main(["sweep", str(path), "-j", "2", "--out", str(out)]) == 0
    assert "12 already done, 0 run now" in capsys.readouterr().out
    # --set reaches every point (and so makes new runs)
    assert main(["sweep", str(path), "-j", "2", "--out", str(out), "-q", "--set", "workload.time_budget_s=10"]) == 0
    with (out / "results.csv").open(newline="", encoding="utf-8") as fh:
        assert {float(r["sim_time_s"]) for r in csv.DictReader(fh)} == {10.0}
    assert len(list((out / "runs").iterdir())) == 24
