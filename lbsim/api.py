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

This module is a front end like the CLI: it imports the simulator inside :func:`simulate` only
(tests/test_import_boundary.py).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lbsim.errors import InputError
from lbsim.metrics.writers import Format
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


def _overrides(overrides: Mapping[str, Any] | None) -> list[str]:
    """A mapping of dotted keys to values as ``--set KEY=VALUE`` strings (values as YAML/JSON)."""
    if overrides is not None and not isinstance(overrides, Mapping):
        raise TypeError(f"overrides: expected a mapping of dotted keys to values, e.g. {{'workload.updates': 50}}, "
                        f"got {type(overrides).__name__}")
    out = []
    for key, value in (overrides or {}).items():
        text = value if isinstance(value, str) else json.dumps(value)
        out.append(f"{key}={text}")
    return out


def _scenario(scenario: str | Path | Scenario, scheme: str | None, overrides: Mapping[str, Any] | None) -> Scenario:
    """A path is loaded as ``lbsim run PATH --scheme S --set ...``; a loaded scenario is re-validated
    with the scheme switched and the overrides applied (its trace paths are already absolute)."""
    from lbsim.scenario.loader import load_scenario, scenario_data, scenario_from_data, with_scheme
    from lbsim.scenario.overrides import apply_overrides

    if not isinstance(scenario, Scenario):
        return load_scenario(_path(scenario, "scenario", "a YAML path (str or pathlib.Path) or a loaded Scenario"), _overrides(overrides), scheme=scheme)
    if scheme is None and not overrides:
        return scenario
    data = scenario_data(scenario)
    if scheme is not None:
        data = with_scheme(data, scheme)
    return scenario_from_data(apply_overrides(data, _overrides(overrides)))


@dataclass
class Run:
    """One run's results: ``summary`` (dict) and its tables as pandas DataFrames."""

    summary: dict[str, Any]
    scenario: Scenario | None = None
    path: Path | None = None  # the folder it was loaded from or last saved to
    _columns: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)  # name -> numpy columns
    _records: Any = field(default=None, repr=False)  # the engine's result, for save()
    _frames: dict[str, Any] = field(default_factory=dict, repr=False)

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
        return self.table("iterations")

    @property
    def updates(self) -> Any:
        return self.table("updates")

    @property
    def decisions(self) -> Any:
        return self.table("decisions")

    @property
    def numerics(self) -> Any:
        return self.table("numerics")

    def save(self, out: str | Path, *, format: Format = "csv") -> Path:  # noqa: A002 - as the CLI's --format
        """Write the run folder ``out`` as ``lbsim run --out out --format format`` would; returns ``out``."""
        from lbsim.output import write_run, write_run_header

        if self._records is None or self.scenario is None:
            raise ValueError("only a simulated run can be saved (a loaded one is already on disk)")
        folder = Path(out)
        write_run_header(folder, self.scenario, ["python", "lbsim.api", *sys.argv])
        r = self._records
        write_run(folder, r.iterations, r.updates, r.summary, r.decisions, r.numerics, fmt=format)
        self.path = folder
        return folder


def _run_from_result(scenario: Scenario, result: Any) -> Run:
    from lbsim.metrics.writers import rows_to_columns

    cols: dict[str, dict[str, Any]] = {
        "iterations": dict(result.iterations.columns), "updates": dict(result.updates.columns)}
    for name in ("decisions", "numerics"):
        rows = getattr(result, name, ())
        if len(rows):
            cols[name] = rows_to_columns(rows)
    return Run(summary=result.summary, scenario=scenario, _columns=cols, _records=result)


def simulate(scenario: str | Path | Scenario, *, scheme: str | None = None,
             overrides: Mapping[str, Any] | None = None) -> Run:
    """Simulate ``scenario`` (a YAML path or a loaded scenario) under ``scheme`` (default: the
    scenario's), with ``overrides`` (``{"scheme.staleness": 2}``, as ``--set``); returns a :class:`Run`.

    Invalid input raises :class:`lbsim.errors.InputError` naming the key path; an argument of the wrong
    type (a scenario that is neither a path nor a Scenario, overrides that are not a mapping) a TypeError.
    """
    from lbsim.simulator.run import simulate as engine

    sc = _scenario(scenario, scheme, overrides)
    return _run_from_result(sc, engine(sc))


@dataclass
class Comparison:
    """``compare``'s results: ``table`` (compare.csv as a DataFrame) and ``runs`` by scheme name."""

    table: Any
    runs: dict[str, Run]
    path: Path | None = None

    def save(self, out: str | Path, *, format: Format = "csv") -> Path:  # noqa: A002
        """Write ``out/<scheme>/`` for each run and ``out/compare.csv``, as ``lbsim compare --out out``."""
        from lbsim.metrics.summary import add_speedups
        from lbsim.output import write_compare_table

        folder = Path(out)
        summaries = [dict(r.summary) for r in self.runs.values()]
        add_speedups(summaries)
        for name, run in self.runs.items():
            run.save(folder / name, format=format)
        write_compare_table(folder, summaries)
        self.path = folder
        return folder


def _summary_frame(summaries: Sequence[dict[str, Any]]) -> Any:
    import pandas as pd

    from lbsim.metrics.summary import compare_columns

    columns = compare_columns(summaries)
    return pd.DataFrame([{c: s.get(c) for c in columns} for s in summaries], columns=columns)


def compare(scenario: str | Path | Scenario, schemes: Sequence[str], *,
            overrides: Mapping[str, Any] | None = None) -> Comparison:
    """The same scenario and seed under each of ``schemes`` (the first is the baseline of the speedups)."""
    from lbsim.metrics.summary import add_speedups

    names = list(schemes)
    if not names or len(set(names)) != len(names):
        raise InputError("schemes", f"give distinct scheme names, got {names}")
    scenarios = {n: _scenario(scenario, n, overrides) for n in names}  # all validated before any runs
    runs = {n: simulate(sc) for n, sc in scenarios.items()}
    rows = [dict(r.summary) for r in runs.values()]  # each run's summary stays as its summary.json
    add_speedups(rows)
    return Comparison(_summary_frame(rows), runs)


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
        return Comparison(to_pandas(read_frame(p / "compare.csv")), runs, p)
    if is_run_dir(p):
        return load_run(p)
    raise InputError(str(path), "not a run, compare or sweep folder (summary.json, compare.csv or results.csv)")
