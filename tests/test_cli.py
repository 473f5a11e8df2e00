"""The command line's output contract (docs/references.md §9): run, compare, schemes, catalog.

Runs are kept short with ``--set workload.time_budget_s=...``; everything goes through
``lbsim.cli.main`` in-process except one console-script smoke test.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lbsim.cli import main
from lbsim.schemes.registry import scheme_names

REPO = Path(__file__).resolve().parents[1]
EC2 = str(REPO / "scenarios" / "ec2_mixed.yaml")
SHORT = ["--set", "workload.time_budget_s=60"]

SUMMARY_KEYS = {
    "scheme", "seed", "engine", "workers", "updates", "sim_time_s", "samples", "throughput_samples_per_s",
    "mean_iteration_s", "p99_iteration_s", "wait_fraction", "compute_fraction", "staleness_mean", "staleness_max",
}
ITERATION_COLUMNS = {"worker", "iteration", "start_s", "compute_s", "wait_s", "batch", "staleness"}


def _read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        return list(reader.fieldnames or []), list(reader)


@pytest.fixture(scope="module")
def ec2_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("run") / "out"
    import io
    from contextlib import redirect_stdout

    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main(["run", EC2, "--out", str(out), *SHORT]) == 0
    return out, buf.getvalue()


def test_run_writes_summary(ec2_run: tuple[Path, str]) -> None:
    out, _ = ec2_run
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert SUMMARY_KEYS <= set(summary)
    assert summary["scheme"] == "bsp" and summary["seed"] == 42 and summary["engine"] == "simulator"
    assert summary["workers"] == 10
    assert summary["updates"] > 0 and summary["samples"] > 0
    assert 0 < summary["sim_time_s"] <= 60 + 1e-9
    assert summary["throughput_samples_per_s"] == pytest.approx(summary["samples"] / summary["sim_time_s"])
    assert 0 <= summary["wait_fraction"] <= 1 and 0 < summary["compute_fraction"] <= 1
    assert summary["mean_iteration_s"] > 0 and summary["p99_iteration_s"] > 0
    assert summary["staleness_mean"] == 0 and summary["staleness_max"] == 0  # BSP is never stale


def test_run_writes_iterations_csv(ec2_run: tuple[Path, str]) -> None:
    out, _ = ec2_run
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    header, rows = _read_csv(out / "iterations.csv")
    assert ITERATION_COLUMNS <= set(header)
    assert rows
    keys = [(int(r["worker"]), int(r["iteration"])) for r in rows]
    assert len(set(keys)) == len(keys), "one row per worker-iteration"
    assert {w for w, _ in keys} == set(range(summary["workers"]))
    if "worker_iterations" in summary:
        assert len(rows) == summary["worker_iterations"]


def test_run_writes_resolved_scenario_and_table(ec2_run: tuple[Path, str]) -> None:
    out, stdout = ec2_run
    data = yaml.safe_load((out / "scenario.resolved.yaml").read_text(encoding="utf-8"))
    assert data["seed"] == 42 and data["workload"]["time_budget_s"] == 60
    assert data["scheme"] == {"name": "bsp", "backup_workers": 0}
    assert "bsp" in stdout and str(out) in stdout
    assert not list(out.glob(".*.tmp")), "no temporary files left behind"


def test_run_is_deterministic(ec2_run: tuple[Path, str], tmp_path: Path) -> None:
    out, _ = ec2_run
    assert main(["run", EC2, "--out", str(tmp_path), "-q", *SHORT]) == 0
    for name in ("summary.json", "iterations.csv", "scenario.resolved.yaml"):
        assert (tmp_path / name).read_bytes() == (out / name).read_bytes(), name


def test_run_quiet_prints_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", EC2, "--out", str(tmp_path / "o"), "-q", "--set", "workload.time_budget_s=10"]) == 0
    assert capsys.readouterr().out == ""
    assert (tmp_path / "o" / "summary.json").is_file()


def test_scheme_option_and_set_are_honoured(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ssp"
    assert main(["run", EC2, "--scheme", "ssp", "--set", "scheme.staleness=1", "--out", str(out), "-q", *SHORT]) == 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["scheme"] == "ssp"
    resolved = yaml.safe_load((out / "scenario.resolved.yaml").read_text(encoding="utf-8"))
    assert resolved["scheme"] == {"name": "ssp", "staleness": 1}


def test_default_out_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["run", EC2, "-q", "--scheme", "asp", "--set", "workload.time_budget_s=10"]) == 0
    assert (tmp_path / "runs" / "ec2_mixed" / "asp" / "summary.json").is_file()


def test_compare(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    schemes = ["bsp", "asp", "ssp", "static"]
    out = tmp_path / "cmp"
    assert main(["compare", EC2, "--schemes", ",".join(schemes), "--out", str(out), *SHORT]) == 0
    stdout = capsys.readouterr().out
    header, rows = _read_csv(out / "compare.csv")
    assert [r["scheme"] for r in rows] == schemes
    assert SUMMARY_KEYS <= set(header) and "speedup_vs_first" in header
    assert float(rows[0]["speedup_vs_first"]) == 1.0
    base = float(rows[0]["throughput_samples_per_s"])
    for r in rows:
        assert float(r["speedup_vs_first"]) == pytest.approx(float(r["throughput_samples_per_s"]) / base, rel=1e-6)
        assert r["seed"] == "42"
    for name in schemes:
        assert name in stdout
        assert (out / name / "summary.json").is_file()
        assert json.loads((out / name / "summary.json").read_text(encoding="utf-8"))["scheme"] == name


def test_schemes_lists_every_scheme(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schemes"]) == 0
    stdout = capsys.readouterr().out
    first_words = {line.split()[0] for line in stdout.splitlines() if line and not line[0].isspace()}
    assert {"bsp", "asp", "ssp", "static"} <= first_words
    assert set(scheme_names()) <= first_words
    assert "staleness" in stdout and "backup_workers" in stdout  # parameters are documented


def test_catalog(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog"]) == 0
    stdout = capsys.readouterr().out
    for word in ("resnet50_imagenet", "resnet18_cifar10", "g4dn.xlarge", "c5.18xlarge", "p4d.24xlarge"):
        assert word in stdout


def test_catalog_one_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "--model", "resnet50_imagenet"]) == 0
    stdout = capsys.readouterr().out
    assert "resnet50_imagenet" in stdout and "c5.18xlarge" in stdout
    assert "resnet18_cifar10" not in stdout and "bert_base_squad" not in stdout


def test_help_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "run" in capsys.readouterr().out


def test_console_script_smoke(tmp_path: Path) -> None:
    """The real entry point (``python -m lbsim``) succeeds with exit code 0 and writes the contract's files."""
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "lbsim", "run", EC2, "--out", str(out), "-q",
                           "--set", "workload.time_budget_s=10"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert {"summary.json", "iterations.csv", "scenario.resolved.yaml"} <= {p.name for p in out.iterdir()}


def test_compare_refuses_a_stop_by_updates_across_unequal_updates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A BSP update holds the global batch, an ASP update one worker's push: equal updates are unequal work."""
    out = tmp_path / "cmp"
    rc = main(["compare", EC2, "--schemes", "bsp,asp", "--set", "workload.updates=30", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and not out.exists()
    assert err.startswith("lbsim: error: workload.updates: stopping every scheme at 30 model updates compares different work")
    assert "asp: one worker's push" in err and "workload.samples" in err and "workload.time_budget_s" in err
    assert len(err.strip().splitlines()) == 1
    # schemes whose updates hold the same work may stop by updates
    assert main(["compare", EC2, "--schemes", "bsp,lbbsp", "--set", "workload.updates=5", "--out", str(out), "-q"]) == 0


def test_compare_on_equal_samples_names_what_columns_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cmp"
    assert main(["compare", EC2, "--schemes", "bsp,asp", "--set", "workload.time_budget_s=null",
                 "--set", "workload.samples=16000", "--out", str(out)]) == 0
    stdout = capsys.readouterr().out
    for label in ("model", "updates", "gradients", "applied", "(updates)"):
        assert label in stdout
    _header, rows = _read_csv(out / "compare.csv")
    bsp, asp = rows
    assert int(bsp["samples"]) == int(asp["samples"]) == 16000  # 1600-sample updates, 160-sample pushes
    assert int(bsp["updates"]) == 10 and int(asp["updates"]) == 100
    assert int(bsp["worker_iterations"]) == int(asp["worker_iterations"]) == 100  # gradients applied
