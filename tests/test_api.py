"""The Python API and the result files: the API returns what the CLI writes; every reader types
every table right; files are as readable as the umask says; provenance and versions."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest

import lbsim
from lbsim.cli import main
from lbsim.metrics.records import ITERATION_DTYPES, UPDATE_DTYPES

REPO = Path(__file__).resolve().parents[1]
EC2 = REPO / "scenarios" / "ec2_mixed.yaml"
ELASTIC = REPO / "scenarios" / "elastic_bsp.yaml"
SHORT = ["--set", "workload.time_budget_s=15"]


def cli(*argv: str) -> int:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return main(list(argv))


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_api_returns_exactly_what_the_cli_writes(tmp_path: Path, fmt: str) -> None:
    out = tmp_path / "cli"
    assert cli("run", str(EC2), "--scheme", "ssp", *SHORT, "--set", "scheme.staleness=2", "--out", str(out),
               "--format", fmt, "-q") == 0
    run = lbsim.simulate(EC2, scheme="ssp", overrides={"workload.time_budget_s": 15, "scheme.staleness": 2})
    assert run.summary == json.loads((out / "summary.json").read_text())
    loaded = lbsim.load(out)
    assert isinstance(loaded, lbsim.api.Run) and loaded.summary == run.summary
    for name in ("iterations", "updates"):
        pd.testing.assert_frame_equal(loaded.table(name), run.table(name), check_exact=True)
    assert len(run.iterations) > 50 and run.iterations["dropped"].dtype == bool
    # .save writes the very files the CLI wrote (all but the volatile invocation.json)
    saved = run.save(tmp_path / "api", format=fmt)
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(p.name for p in saved.iterdir())
    for name in names:
        if name != "invocation.json":
            assert (saved / name).read_bytes() == (out / name).read_bytes(), name


def test_simulate_takes_a_loaded_scenario_and_overrides() -> None:
    from lbsim.scenario.loader import load_scenario

    sc = load_scenario(EC2, ["workload.time_budget_s=10"])
    a = lbsim.simulate(sc, scheme="asp")
    b = lbsim.simulate(EC2, scheme="asp", overrides={"workload.time_budget_s": 10})
    assert a.summary == b.summary and a.summary["scheme"] == "asp"
    with pytest.raises(lbsim.errors.InputError, match="scheme.staleness"):
        lbsim.simulate(sc, scheme="ssp", overrides={"scheme.staleness": -1})


def test_compare_matches_the_cli_compare_folder(tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    assert cli("compare", str(EC2), "--schemes", "bsp,asp", *SHORT, "--out", str(out), "-q") == 0
    api = lbsim.compare(EC2, ["bsp", "asp"], overrides={"workload.time_budget_s": 15})
    loaded = lbsim.load(out)
    assert isinstance(loaded, lbsim.api.Comparison) and list(loaded.runs) == ["bsp", "asp"]
    pd.testing.assert_frame_equal(loaded.table[list(api.table.columns)], api.table, check_dtype=False)
    assert api.table["speedup_vs_first"].iloc[0] == 1.0
    pd.testing.assert_frame_equal(loaded.runs["asp"].updates, api.runs["asp"].updates, check_exact=True)
    saved = api.save(tmp_path / "api")
    for name in ("compare.csv", "bsp/summary.json", "asp/summary.json", "asp/iterations.csv"):
        assert (saved / name).read_bytes() == (out / name).read_bytes(), name


def _expected_kind(name: str, column: str) -> str | None:
    dtypes = {"iterations": ITERATION_DTYPES, "updates": UPDATE_DTYPES}.get(name, {})
    t = dtypes.get(column)
    return None if t is None else {np.int64: "i", np.float64: "f", np.bool_: "b"}[t]


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_pandas_and_polars_type_every_table(tmp_path: Path, fmt: str) -> None:
    """No hints given: float columns read as floats (even when every value is whole), ints as
    ints, ``dropped`` as bool, in pandas and polars, for every table (decisions included)."""
    out = tmp_path / "run"
    assert cli("run", str(ELASTIC), "--set", "workload.time_budget_s=10", "--out", str(out), "--format", fmt, "-q") == 0
    tables = sorted(p for p in out.iterdir() if p.suffix == f".{fmt}")
    assert {p.stem for p in tables} == {"iterations", "updates", "decisions"}
    for path in tables:
        if fmt == "csv":
            frames = {"pandas": pd.read_csv(path), "polars": pl.read_csv(path, infer_schema_length=None)}
        else:
            frames = {"pandas": pd.read_parquet(path), "polars": pl.read_parquet(path)}
        for reader, frame in frames.items():
            if reader == "polars":
                kinds = {c: ("f" if d.is_float() else "i" if d.is_integer() else "b" if d == pl.Boolean else "?")
                         for c, d in frame.schema.items()}
            else:
                kinds = {c: frame[c].dtype.kind for c in frame.columns}
            for column, kind in kinds.items():
                want = _expected_kind(path.stem, column)
                if want is not None:
                    assert kind == want, (reader, path.name, column, kind)
            if path.stem == "iterations":
                assert frame["start_s"][0] == 0.0 and kinds["start_s"] == "f"  # a whole value, typed as float
    # decisions: numbers typed as numbers (budgets is text: the per-worker budgets, space-separated)
    dec = lbsim.load(out).decisions
    assert len(dec) > 0 and {c: dec[c].dtype.kind for c in dec.columns if c != "budgets"} == {
        "superstep": "i", "start_s": "f", "decided_s": "f", "predicted_barrier_s": "f", "predicted_range_s": "f",
        "fastest_worker": "i", "barrier_s": "f", "fastest_wait_s": "f"}


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o027, 0o640)])
def test_files_honour_the_umask(tmp_path: Path, mask: int, mode: int) -> None:
    old = os.umask(mask)
    try:
        out = tmp_path / "cmp"
        assert cli("compare", str(EC2), "--schemes", "bsp,asp", *SHORT, "--out", str(out), "-q") == 0
        assert cli("run", str(EC2), *SHORT, "--trace", "gz", "--format", "parquet", "--out", str(tmp_path / "run"), "-q") == 0
    finally:
        os.umask(old)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) >= 15
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in files} == {p.name: mode for p in files}


def test_writer_leaves_target_untouched_on_error(tmp_path: Path) -> None:
    from lbsim.metrics.writers import atomic_file

    target = tmp_path / "x.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_file(target) as fh:
        fh.write("half")
        raise RuntimeError("boom")
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["x.txt"]


def test_version_and_provenance(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"lbsim {lbsim.__version__}"
    out = tmp_path / "run"
    assert cli("run", str(EC2), *SHORT, "--out", str(out), "-q") == 0
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["lbsim_version"] == lbsim.__version__ and prov["engine"] == "simulator"
    assert prov["libraries"]["numpy"] == np.__version__ and prov["libraries"]["polars"] == pl.__version__
    inv = json.loads((out / "invocation.json").read_text())
    assert inv["command"][:3] == ["lbsim", "run", str(EC2)] and inv["time_utc"].endswith("Z")


def test_resumed_sweep_under_another_version_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import yaml

    import lbsim.cli
    import lbsim.sweep.runner

    sweep = tmp_path / "s.yaml"
    sweep.write_text(yaml.safe_dump({"name": "s", "base": str(EC2), "set": {"workload.time_budget_s": 5},
                                     "factors": {"scheme": ["bsp", "asp"]}, "repetitions": 1}))
    out = tmp_path / "out"
    assert cli("sweep", str(sweep), "-j", "1", "--out", str(out), "-q", "--format", "parquet") == 0
    assert json.loads((out / "sweep.json").read_text())["lbsim_versions"] == [lbsim.__version__]
    assert len(list(out.glob("runs/*/iterations.parquet"))) == 2
    monkeypatch.setattr(lbsim.sweep.runner, "__version__", "9.9.9")
    monkeypatch.setattr(lbsim.cli, "__version__", "9.9.9")
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert main(["sweep", str(sweep), "-j", "1", "--out", str(out), "-q"]) == 0
    assert f"started under lbsim {lbsim.__version__}; resumed under 9.9.9" in err.getvalue()
    assert json.loads((out / "sweep.json").read_text())["lbsim_versions"] == [lbsim.__version__, "9.9.9"]
    swp = lbsim.load(out)
    assert isinstance(swp, lbsim.api.Sweep) and list(swp.results["scheme"]) == ["bsp", "asp"]
    every = swp.table("updates")
    assert set(every["scheme"]) == {"bsp", "asp"} and every["time_s"].dtype == float


def test_progress_covers_writing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's progress bar goes on while the files are written, naming each one."""
    import lbsim.progress

    seen: list[tuple[float, str]] = []

    class Recorder(lbsim.progress.LazyProgress):
        def update(self, fraction: float, description: str | None = None) -> None:
            super().update(fraction, description)
            seen.append((fraction, self.label))

    monkeypatch.setattr(lbsim.progress, "LazyProgress", Recorder)
    assert cli("run", str(EC2), *SHORT, "--out", str(tmp_path / "r"), "--format", "parquet", "--trace", "gz", "-q") == 0
    labels = [label for _, label in seen]
    assert labels[0] == "bsp: simulate"
    distinct = [k for i, k in enumerate(labels) if i == 0 or labels[i - 1] != k]  # the trace reports as it streams
    assert distinct[-3:] == ["bsp: write iterations.parquet", "bsp: write updates.parquet", "bsp: write trace"]
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] < 1.0


def test_provenance_does_not_depend_on_what_else_is_imported() -> None:
    """A simulator run's record is the same whether or not the process has loaded torch (e.g. a
    Dask worker thread in a process that also ran the runtime)."""
    import subprocess
    import sys

    code = ("import json, sys; {pre}from lbsim.provenance import provenance; "
            "print(json.dumps(provenance('simulator'), sort_keys=True))")
    outs = [subprocess.run([sys.executable, "-c", code.format(pre=pre)], cwd=REPO, capture_output=True, text=True,
                           check=True, env={**os.environ, "PYTHONPATH": str(REPO)}).stdout for pre in ("", "import torch; ")]
    assert outs[0] == outs[1] and "torch" not in json.loads(outs[0])["libraries"]


@pytest.mark.parametrize(("call", "message"), [
    (lambda: lbsim.simulate({"seed": 1}), "scenario: expected a YAML path (str or pathlib.Path) or a loaded Scenario, got dict"),
    (lambda: lbsim.simulate(None), "scenario: expected a YAML path"),
    (lambda: lbsim.simulate(EC2, overrides=[("workload.updates", 3)]), "overrides: expected a mapping"),
    (lambda: lbsim.compare(EC2, ["bsp"], overrides="workload.updates=3"), "overrides: expected a mapping"),
    (lambda: lbsim.load(5), "path: expected a path (str or pathlib.Path), got int"),
])
def test_an_argument_of_the_wrong_type_is_a_type_error_naming_it(call: Any, message: str) -> None:
    """A caller's bug (not bad input data): a TypeError that says which argument and what it takes."""
    with pytest.raises(TypeError, match=re.escape(message)):
        call()
