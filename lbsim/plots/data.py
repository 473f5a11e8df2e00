"""Reading what the plots need from output folders (no matplotlib here).

A *run folder* holds ``summary.json``, ``iterations`` (``.csv`` or ``.parquet``) and
``scenario.resolved.yaml`` (and, with numerics, ``numerics``: one row per evaluation with
``time_s`` and ``accuracy``, maybe ``loss`` and ``update``). A *sweep folder* holds
``results.csv``, ``sweep.json`` and ``runs/<hash>/`` run folders (:mod:`lbsim.sweep.runner`); a
*compare folder* ``compare.csv`` and a run folder per scheme. Tables are read by
:mod:`lbsim.results` (polars: a million rows in well under a second).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lbsim.errors import InputError
from lbsim.results import CORRUPT, is_compare_dir, is_run_dir, is_sweep_dir, read_columns, read_json_object, table_path

__all__ = ["RunData", "SweepData", "is_compare_dir", "is_run_dir", "is_sweep_dir", "read_run", "read_sweep"]

ITERATION_FIELDS = ("worker", "iteration", "update", "start_s", "compute_s", "comm_s", "wait_s", "end_s", "batch",
                    "staleness", "dropped", "fetch_s")


def _read_rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """A results table's header and rows (strings); a row with more or fewer cells than the header,
    or no header, is an InputError naming the line (a corrupt or hand-edited file)."""
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            header = list(reader.fieldnames or [])
            rows = []
            for row in reader:
                if None in row or any(v is None for v in row.values()):
                    cells = sum(v is not None for k, v in row.items() if k is not None) + len(row.get(None) or [])
                    raise InputError(f"{path}:{reader.line_num}", f"a row of {cells} cells under a header of "
                                                                  f"{len(header)}; {CORRUPT}")
                rows.append(row)
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise InputError(str(path), f"cannot read it ({type(err).__name__}: {err}); {CORRUPT}") from None
    if not header:
        raise InputError(str(path), f"an empty table (no header); {CORRUPT}")
    return header, rows


def _columns(path: Path, wanted: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The ``wanted`` columns of a table file that has them, as float arrays (missing cells: NaN)."""
    cols = read_columns(path, path.name.split(".")[0], wanted)
    return {name: np.asarray(col, dtype=float) if col.dtype != object
            else np.array([np.nan if v is None else float(v) for v in col]) for name, col in cols.items()}


@dataclass
class RunData:
    """One run's records as numpy columns, its summary and its workers' instance types."""

    path: Path
    summary: dict[str, Any]
    it: dict[str, np.ndarray]  # iterations.csv columns
    numerics: dict[str, np.ndarray] | None = None  # numerics.csv columns, if present
    _instances: list[str] | None = field(default=None, repr=False)

    @property
    def instances(self) -> list[str]:
        """Instance type per worker index, from scenario.resolved.yaml (read when first needed)."""
        if self._instances is None:
            self._instances = _instances(self.path)
        return self._instances

    @property
    def scheme(self) -> str:
        """The run's scheme (from its summary)."""
        return str(self.summary.get("scheme", "?"))

    @property
    def workers(self) -> int:
        """The run's number of workers."""
        return int(self.summary.get("workers", 0)) or (int(self.it["worker"].max()) + 1 if len(self.it["worker"]) else 0)

    def col(self, name: str) -> np.ndarray:
        """An iteration column, zeros where the run has none."""
        return self.it.get(name, np.zeros(len(self.it["worker"])))

    @property
    def measured(self) -> bool:
        """Whether the times are measured (the torch.distributed runtime), not simulated."""
        return self.summary.get("engine") == "runtime"

    @property
    def time_axis(self) -> str:
        """The label of a time axis: measured or simulated seconds since the run's start."""
        return "measured time (s)" if self.measured else "simulated time (s)"

    @property
    def end_s(self) -> float:
        """When the run's last recorded iteration ended (seconds since its start)."""
        return float(self.it["end_s"].max(initial=0.0))




def _instances(path: Path) -> list[str]:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        data = yaml.load((path / "scenario.resolved.yaml").read_text(encoding="utf-8"), Loader=loader)  # noqa: S506
        return [g["instance"] for g in data["cluster"]["groups"] for _ in range(int(g.get("count", 1)))]
    except (OSError, KeyError, TypeError, ValueError, yaml.YAMLError):
        return []


def read_run(path: Path) -> RunData:
    """A run folder's summary and iteration columns; InputError if it is not one."""
    if not is_run_dir(path):
        raise InputError(str(path), "not a run folder (needs summary.json and iterations.csv or .parquet)")
    summary = read_json_object(path / "summary.json")
    it_path = table_path(path, "iterations")
    it = _columns(it_path, ITERATION_FIELDS)  # type: ignore[arg-type]
    missing = [c for c in ITERATION_FIELDS if c not in it]
    if missing or not len(it[ITERATION_FIELDS[0]]):
        raise InputError(str(it_path), (f"missing columns {', '.join(missing)}" if missing else "no rows")
                         + f"; {CORRUPT}")
    numerics = None
    if (num := table_path(path, "numerics")) is not None:
        numerics = _columns(num, ("update", "time_s", "loss", "accuracy"))
        if "time_s" not in numerics or "accuracy" not in numerics:
            numerics = None
    return RunData(path, summary, it, numerics)


@dataclass
class SweepData:
    """A sweep's results table (rows as strings, as in results.csv) and where its runs are."""

    path: Path
    name: str
    factors: list[str]  # factor columns, in the sweep's order
    rows: list[dict[str, str]]

    @property
    def conditions(self) -> list[str]:
        """Factor columns other than the scheme's."""
        return [c for c in self.factors if c != "scheme" and not c.startswith("scheme.")]

    def run(self, run: str) -> RunData:
        """One run of the sweep, by its folder name."""
        return read_run(self.path / "runs" / run)

    def number(self, row: dict[str, str], column: str) -> float:
        """A results row's value as a number (NaN where empty)."""
        return _number(row.get(column, ""))


def _number(text: str) -> float:
    """A CSV cell as a float; NaN where it holds none (an empty cell, a name)."""
    try:
        return float(text)
    except ValueError:
        return float("nan")


def read_sweep(path: Path) -> SweepData:
    """A sweep folder's results and factors; InputError if it is not one."""
    if not is_sweep_dir(path):
        raise InputError(str(path), "not a sweep folder (needs results.csv and runs/)")
    header, rows = _read_rows(path / "results.csv")
    meta: dict[str, Any] = {}
    if (path / "sweep.json").is_file():
        meta = read_json_object(path / "sweep.json")
    factors = list(meta.get("columns", []))
    if not meta:  # no sweep.json: every column before 'repetition' except 'run'
        factors = header[1:header.index("repetition")] if "repetition" in header else []
    return SweepData(path, str(meta.get("name") or path.name), factors, rows)


@dataclass
class CompareData:
    """A compare folder: compare.csv's rows (strings) and each scheme's run, in compare.csv's order."""

    path: Path
    rows: list[dict[str, str]]
    runs: dict[str, RunData]

    def number(self, scheme: str, column: str) -> float:
        row = next((r for r in self.rows if r.get("scheme") == scheme), {})
        return _number(row.get(column, ""))


def read_compare(path: Path) -> CompareData:
    if not is_compare_dir(path):
        raise InputError(str(path), "not a compare folder (needs compare.csv)")
    _, rows = _read_rows(path / "compare.csv")
    runs = {r["scheme"]: read_run(path / r["scheme"]) for r in rows if is_run_dir(path / r.get("scheme", ""))}
    if not runs:
        raise InputError(str(path), "a compare folder without run folders (one per scheme in compare.csv)")
    return CompareData(path, rows, runs)
