"""The Python API: simulate, compare and load results as pandas DataFrames (docs/api.md).

* :func:`simulate` — one scenario (a path or a loaded :class:`~lbsim.scenario.schema.Scenario`),
  optionally another scheme and ``--set``-style overrides (a mapping of dotted keys to values);
  returns a :class:`Run`.
* :func:`compare` — the same scenario and seed under several schemes; returns a :class:`Comparison`
  (``.table`` is compare.csv's content, ``.runs`` each scheme's :class:`Run`).
* :func:`load` — a finished run, compare or sweep folder (as written by the CLI or ``.save``).

A :class:`Run` has ``.summary`` (the summary.json mapping), ``.iterations`` and ``.updates``
(and ``.decisions`` / ``.numerics`` where the run has them) as pandas DataFrames with the
record dtypes (int64, float64, bool), and ``.save(dir, format=...)``, which writes exactly the
files ``lbsim run --out dir`` writes. A simulated run's frames come from the engine's columns; a
loaded run's from its files; the two are equal, value for value (CSV floats round-trip exactly).

This module is a front door like the CLI: :func:`simulate`, :func:`compare` and ``.save`` go through
the run lifecycle (:mod:`lbsim.lifecycle`) with the CLI's guards; it never imports an engine
(tests/test_import_boundary.py).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lbsim import lifecycle
from lbsim.errors import InputError
from lbsim.lifecycle import save_compare, save_run
from lbsim.lifecycle.execute import CompareOutcome, RunOutcome
from lbsim.metrics.summary import compare_columns
from lbsim.metrics.writers import Format, rows_to_columns
from lbsim.results import (
    compare_schemes,
    is_compare_dir,
    is_run_dir,
    is_sweep_dir,
    read_frame,
    read_json_object,
    read_summary,
    table_path,
    to_pandas,
)
from lbsim.scenario.schema import Scenario


def _path(path: Any, what: str, expected: str = "a path (str or pathlib.Path)") -> Path:
    """``path`` as a Path; a TypeError naming ``what`` for anything that is not a path (a caller's bug)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{what}: expected {expected}, got {type(path).__name__}")
    return Path(path)


@dataclass
class Run:
    """One run's results: ``summary`` (dict) and its tables as pandas DataFrames."""

    summary: dict[str, Any]
    scenario: Scenario | None = None
    path: Path | None = None  # the folder it was loaded from or last saved to
    _columns: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)  # name -> numpy columns
    _outcome: RunOutcome | None = field(default=None, repr=False)  # the lifecycle's outcome, for save()
    _frames: dict[str, Any] = field(default_factory=dict, repr=False)

    def __repr__(self) -> str:  # the summary's headline, not the whole scenario (~2.6 kB)
        keys = ("scheme", "seed", "engine", "workers", "updates", "throughput_samples_per_s")
        shown = ", ".join(f"{k}={self.summary[k]!r}" for k in keys if k in self.summary)
        name = getattr(self.scenario, "name", None)
        return f"Run({f'scenario={name!r}, ' if name else ''}{shown}{f', path={str(self.path)!r}' if self.path else ''})"

    def table(self, name: str) -> Any:
        """The table ``name`` (iterations, updates, decisions, numerics) as a pandas DataFrame (cached)."""
        if name not in self._frames:
            import pandas as pd

            if name in self._columns:
                self._frames[name] = pd.DataFrame(self._columns[name])
            elif self.path is not None and (p := table_path(self.path, name)) is not None:
                self._frames[name] = to_pandas(read_frame(p, name))
            else:
                self._frames[name] = pd.DataFrame()
        return self._frames[name]

    @property
    def iterations(self) -> Any:
        """The ``iterations`` table: one row per worker iteration (a pandas DataFrame)."""
        return self.table("iterations")

    @property
    def updates(self) -> Any:
        """The ``updates`` table: one row per model update (a pandas DataFrame)."""
        return self.table("updates")

    @property
    def decisions(self) -> Any:
        """The scheme's ``decisions`` table, for schemes that log their decisions (else None)."""
        return self.table("decisions")

    @property
    def numerics(self) -> Any:
        """The ``numerics`` table: the learning curve of a run in numerics mode (else None)."""
        return self.table("numerics")

    def save(self, out: str | Path, *, format: Format = "csv") -> Path:  # noqa: A002 - as the CLI's --format
        """Write the run folder ``out`` as ``lbsim run --out out --format format`` would (staged: ``out``
        holds this whole run or what it held before); returns ``out``."""
        if self._outcome is None:
            raise ValueError("only a simulated run can be saved (a loaded one is already on disk)")
        self.path = save_run(_path(out, "out"), self._outcome, argv=_argv(), fmt=format, option="out")
        return self.path


def _argv() -> list[str]:
    """invocation.json's command of a run saved from Python."""
    return ["python", "lbsim.api", *sys.argv]


def _run(outcome: RunOutcome) -> Run:
    """A :class:`Run` of the lifecycle's outcome (records kept), its tables as the engine's columns."""
    result = outcome.result
    if result is None:
        raise ValueError("the lifecycle dropped this run's records")
    cols: dict[str, dict[str, Any]] = {
        "iterations": dict(result.iterations.columns), "updates": dict(result.updates.columns)}
    for name, rows in (("decisions", result.decisions), ("numerics", result.numerics)):
        if len(rows):
            cols[name] = rows_to_columns(rows)
    return Run(summary=outcome.summary, scenario=outcome.spec.scenario, path=outcome.path, _columns=cols, _outcome=outcome)


def simulate(scenario: str | Path | Scenario, *, scheme: str | None = None,
             overrides: Mapping[str, Any] | None = None) -> Run:
    """Simulate ``scenario`` (a YAML path or a loaded scenario) under ``scheme`` (default: the
    scenario's), with ``overrides`` (``{"scheme.staleness": 2}``, as ``--set``); returns a :class:`Run`.

    Invalid input raises :class:`lbsim.errors.InputError` naming the key path; an argument of the wrong
    type (a scenario that is neither a path nor a Scenario, overrides that are not a mapping) a TypeError.
    The run goes through the same lifecycle and guards as ``lbsim run`` (:mod:`lbsim.lifecycle`).
    """
    return _run(lifecycle.run(lifecycle.plan_run(scenario, scheme=scheme, overrides=overrides)))


@dataclass
class Comparison:
    """``compare``'s results: ``table`` (compare.csv as a DataFrame), ``runs`` by scheme name and
    ``baseline`` (the scheme ``speedup_vs_baseline`` is measured against)."""

    table: Any
    runs: dict[str, Run]
    path: Path | None = None
    baseline: str | None = None
    _outcome: CompareOutcome | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        return f"Comparison(schemes={list(self.runs)!r}{f', path={str(self.path)!r}' if self.path else ''})"

    def save(self, out: str | Path, *, format: Format = "csv") -> Path:  # noqa: A002
        """Write ``out/<scheme>/`` for each run and ``out/compare.csv``, as ``lbsim compare --out out``
        (staged: ``out`` holds this whole comparison or what it held before)."""
        if self._outcome is None:
            raise ValueError("only a computed comparison can be saved (a loaded one is already on disk)")
        folder = save_compare(_path(out, "out"), self._outcome, argv=_argv(), fmt=format, option="out")
        self.path = folder
        for name, run in self.runs.items():
            run.path = folder / name
        return folder


def _summary_frame(rows: Sequence[dict[str, Any]]) -> Any:
    import pandas as pd

    columns = compare_columns(rows)
    return pd.DataFrame([{c: s.get(c) for c in columns} for s in rows], columns=columns)


def compare(scenario: str | Path | Scenario, schemes: str | Sequence[str], *,
            overrides: Mapping[str, Any] | None = None, baseline: str | None = None, cross_family: bool = False,
            network_variant: Mapping[str, Any] | None = None) -> Comparison:
    """The same scenario and seed under each of ``schemes`` (``"bsp,asp"`` or ``["bsp", "asp"]``).

    ``speedup_vs_first`` is measured against the first scheme, ``speedup_vs_baseline`` against
    ``baseline`` (default: the first; with ``cross_family``, ``bsp`` over the all-reduce). With
    ``cross_family`` every scheme runs on its family's network (parameter-server schemes on a parameter
    server, the others on an all-reduce), the one the scenario lacks derived from it (docs/design.md,
    Cross-family compare; ``network_variant={"parameter_server.shards": 8}`` overrides a derived key).
    The same lifecycle and guards as ``lbsim compare``, equal work included.
    """
    plan = lifecycle.plan_compare(scenario, schemes, overrides=overrides, baseline=baseline, cross_family=cross_family,
                                  network_variant=network_variant)
    outcome = lifecycle.compare(plan)
    runs = {r.label: _run(r) for r in outcome.runs}
    return Comparison(_summary_frame(outcome.rows), runs, baseline=plan.baseline, _outcome=outcome)


@dataclass
class Sweep:
    """A sweep folder: ``results`` (results.csv as a DataFrame), ``factors``, and its runs by id."""

    path: Path
    name: str
    factors: list[str]
    results: Any

    def run(self, run_id: str) -> Run:
        """One run of the sweep (a row's ``run`` column), loaded from ``runs/<run_id>/``."""
        return load_run(self.path / "runs" / run_id)

    def table(self, name: str) -> Any:
        """Every finished run's table ``name`` stacked, with the run's ``run``, factor and
        ``repetition`` columns first (e.g. every worker-iteration of the sweep)."""
        import pandas as pd

        frames = []
        keys = ["run", *self.factors, "repetition"]
        for row in self.results[keys].itertuples(index=False):
            frame = self.run(row[0]).table(name)
            head = pd.DataFrame({k: [v] * len(frame) for k, v in zip(keys, row, strict=True)})
            frames.append(pd.concat([head, frame.reset_index(drop=True)], axis=1))
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=keys)


def load_run(path: str | Path) -> Run:
    """A :class:`Run` read back from a run folder; InputError if ``path`` is not one."""
    p = _path(path, "path")
    if not is_run_dir(p):
        raise InputError(str(path), "not a run folder (needs summary.json and iterations.csv or .parquet)")
    return Run(summary=read_summary(p), path=p)


def load(path: str | Path) -> Run | Comparison | Sweep:
    """A finished run folder (:class:`Run`), compare folder (:class:`Comparison`) or sweep folder (:class:`Sweep`)."""
    p = _path(path, "path")
    if is_sweep_dir(p):
        meta = read_json_object(p / "sweep.json") if (p / "sweep.json").is_file() else {}
        results = to_pandas(read_frame(p / "results.csv"))
        return Sweep(p, str(meta.get("name") or p.name), list(meta.get("columns", [])), results)
    if is_compare_dir(p):
        runs = {n: load_run(p / n) for n in compare_schemes(p)}
        table = to_pandas(read_frame(p / "compare.csv"))
        baseline = str(table["baseline"].iloc[0]) if "baseline" in table.columns and len(table) else None
        return Comparison(table, runs, p, baseline)
    if is_run_dir(p):
        return load_run(p)
    raise InputError(str(path), "not a run, compare or sweep folder (summary.json, compare.csv or results.csv)")
