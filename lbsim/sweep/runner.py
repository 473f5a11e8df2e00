"""Running a sweep: content-addressed run folders, a streaming results table, resume for free.

Layout of the output folder ``DIR``:

* ``DIR/runs/<hash>/`` — one folder per distinct run, named by the content hash of its resolved
  scenario, holding the usual run files (:mod:`lbsim.output`). The folder is written under a
  temporary name and renamed into place, so it exists only when the run is complete.
* ``DIR/results.csv`` — one row per finished point, in the sweep's point order: ``run``, the
  factor columns, ``repetition``, then the summary fields (a summary field with the same name as
  a factor column is left out: the factor's label is the more specific). Rebuilt from the
  finished runs and replaced atomically after every completion: it streams, and is never
  half-written. (Only for very large sweeps, where one rewrite takes longer than 50 ms, are
  rewrites spaced to at most 5% of the time; the last one always happens.)
* ``DIR/sweep.json`` — the sweep's name, columns and every point (label, repetition, run), every
  lbsim version that ran in it (``lbsim_versions``) and this one's provenance.

Resume: a run whose folder exists is skipped. A sweep killed at any moment (even SIGKILL) and
started again with the same command loses nothing and repeats nothing: the stale temporary
folders of a killed sweep are removed at start. A lock (``DIR/.lock``) keeps two sweeps from
writing one folder at the same time.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from lbsim.errors import InputError
from lbsim.metrics.writers import Format, atomic_write_bytes, atomic_write_text, csv_text, fsync_dir, json_text, new_folder_mode
from lbsim.provenance import provenance
from lbsim.run_folder import folder_lock
from lbsim.sweep.backends import Backend
from lbsim.sweep.expand import Sweep
from lbsim.sweep.worker import Engine, execute_run
from lbsim.version import __version__

RUNS = "runs"
RESULTS = "results.csv"


@dataclass
class SweepReport:
    points: int
    runs: int  # distinct runs
    skipped: int  # finished before this invocation
    ran: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)  # (run id, error text)
    earlier_versions: list[str] = field(default_factory=list)  # other lbsim versions that wrote into this sweep


def results_columns(sweep: Sweep, summaries: dict[str, dict[str, Any]]) -> list[str]:
    """``run``, factor columns, ``repetition``, then summary keys in order of first appearance."""
    head = ["run", *sweep.columns, "repetition"]
    keys: dict[str, None] = {}
    for p in sweep.points:
        for k in summaries.get(p.run_id, {}):
            if k not in head:
                keys.setdefault(k, None)
    return head + list(keys)


def _cell(v: Any) -> Any:
    return json.dumps(v, sort_keys=True) if isinstance(v, (dict, list, tuple)) else v


def results_text(sweep: Sweep, summaries: dict[str, dict[str, Any]]) -> str:
    """The whole ``results.csv`` for the finished runs in ``summaries`` (pure)."""
    columns = results_columns(sweep, summaries)
    rows = []
    for p in sweep.points:
        s = summaries.get(p.run_id)
        if s is None:
            continue
        fixed = {"run": p.run_id, "repetition": p.repetition, **dict(zip(sweep.columns, p.labels, strict=True))}
        rows.append([fixed[c] if c in fixed else _cell(s.get(c)) for c in columns])
    return csv_text(columns, rows)


def sweep_json(sweep: Sweep, versions: Sequence[str] = ()) -> str:
    """``sweep.json``: name, columns, points, and (``lbsim_versions``) every lbsim version that ran in it."""
    return json_text({
        "name": sweep.name, "columns": list(sweep.columns), "repetitions": sweep.repetitions,
        "points": [{"index": p.index, "labels": list(p.labels), "repetition": p.repetition, "run": p.run_id}
                   for p in sweep.points],
        "lbsim_versions": list(versions), "provenance": provenance(),
    })


def previous_versions(out: Path) -> list[str]:
    """The lbsim versions an existing ``out/sweep.json`` lists (none for a new or older sweep)."""
    try:
        data = json.loads((out / "sweep.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    versions = data.get("lbsim_versions") if isinstance(data, dict) else None
    return [str(v) for v in versions] if isinstance(versions, list) else []


def commit_run(runs_dir: Path, run: str, files: dict[str, bytes]) -> None:
    """Write ``runs_dir/run/`` atomically: every file into a temporary folder, then one rename."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{run}.", suffix=".tmp", dir=runs_dir))
    try:
        new_folder_mode(tmp)  # mkdtemp makes 0700; a run folder is as readable as any new folder
        for name, content in files.items():
            atomic_write_bytes(tmp / name, content)
        fsync_dir(tmp)
        os.rename(tmp, runs_dir / run)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    fsync_dir(runs_dir)


def _finished(runs_dir: Path, run: str) -> dict[str, Any] | None:
    summary = runs_dir / run / "summary.json"
    if not summary.is_file():
        return None
    try:
        return json.loads(summary.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _clean(out: Path, runs_dir: Path, run_ids: list[str]) -> None:
    """Remove what a killed sweep may have left: temporary folders and files, incomplete run folders."""
    for p in runs_dir.iterdir():
        if p.name.startswith(".") and p.name.endswith(".tmp"):
            shutil.rmtree(p, ignore_errors=True)
    for run in run_ids:
        folder = runs_dir / run
        if folder.exists() and _finished(runs_dir, run) is None:  # e.g. edited by hand; never left by lbsim
            shutil.rmtree(folder, ignore_errors=True)
    for p in out.glob(".*.tmp"):
        p.unlink(missing_ok=True)


class _Results:
    """Rewrites results.csv after each completion, spaced out only when a rewrite gets expensive."""

    def __init__(self, path: Path, sweep: Sweep, summaries: dict[str, dict[str, Any]]) -> None:
        self.path, self.sweep, self.summaries = path, sweep, summaries
        self.cost_s = 0.0
        self.last = 0.0

    def write(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and self.cost_s > 0.05 and now - self.last < 20 * self.cost_s:
            return
        atomic_write_text(self.path, results_text(self.sweep, self.summaries))
        self.last = time.monotonic()
        self.cost_s = self.last - now


def run_sweep(
    sweep: Sweep,
    out: Path,
    *,
    engine: Engine | None = None,
    backend: Backend,
    on_progress: Callable[[int, int], None] | None = None,
    fmt: Format = "csv",
) -> SweepReport:
    """Run every unfinished point of ``sweep`` on ``backend``; results stream into ``out``.

    ``engine`` runs each point (None: the lifecycle's default, the simulator).
    ``on_progress(done, total)`` is called once before the first run and after each one
    (``total`` counts the runs this invocation has to do). Run tables are written as ``fmt``;
    ``report.earlier_versions`` lists the other lbsim versions that already ran in ``out``.
    """
    runs_dir = out / RUNS
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError("--out", f"cannot create {runs_dir}: {err.strerror or err}") from None
    run_ids = sweep.run_ids()
    with folder_lock(out / ".lock", out, what="sweep"):
        _clean(out, runs_dir, run_ids)
        versions = previous_versions(out)
        earlier = [v for v in versions if v != __version__]
        atomic_write_text(out / "sweep.json", sweep_json(sweep, [*versions, __version__] if __version__ not in versions else versions))
        summaries = {r: s for r in run_ids if (s := _finished(runs_dir, r)) is not None}
        results = _Results(out / RESULTS, sweep, summaries)
        results.write(force=True)
        todo = [r for r in run_ids if r not in summaries]
        report = SweepReport(len(sweep.points), len(run_ids), len(summaries), earlier_versions=earlier)
        if on_progress:
            on_progress(0, len(todo))
        yaml_of = {p.run_id: p.resolved_yaml for p in sweep.points}
        for run, outcome in backend.map_unordered(partial(execute_run, engine, fmt=fmt), [(r, yaml_of[r]) for r in todo]):
            if isinstance(outcome, BaseException):
                report.failed.append((run, f"{type(outcome).__name__}: {' '.join(str(outcome).split())}"))
            else:
                commit_run(runs_dir, run, outcome)
                summaries[run] = json.loads(outcome["summary.json"])
                results.write()
                report.ran += 1
            if on_progress:
                on_progress(report.ran + len(report.failed), len(todo))
        results.write(force=True)
    return report
