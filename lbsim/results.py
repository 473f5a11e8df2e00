"""Reading results back: run, compare and sweep folders, tables in CSV or Parquet, typed.

A *run folder* holds ``summary.json`` and the tables ``iterations``, ``updates`` (and maybe
``decisions``, ``numerics``) as ``NAME.csv`` or ``NAME.parquet`` (:mod:`lbsim.output`); a
*compare folder* ``compare.csv`` and one run folder per scheme; a *sweep folder* ``results.csv``,
``sweep.json`` and ``runs/<hash>/`` run folders (:mod:`lbsim.sweep.runner`).

A file lbsim wrote that cannot be read back (a corrupt or hand-edited folder) is an
:class:`~lbsim.errors.InputError` naming it, never a parser's traceback.

Tables are read by polars (fast, exact float parsing) into numpy columns with the record types'
dtypes where they are known (:data:`lbsim.metrics.records.ITERATION_DTYPES`, ``UPDATE_DTYPES``);
other tables are typed by inference. No pyarrow needed: frames are built from numpy columns.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from lbsim.errors import InputError
from lbsim.metrics.records import ITERATION_DTYPES, UPDATE_DTYPES
from lbsim.metrics.writers import FORMATS, TABLE_FORMATS

KNOWN_DTYPES: dict[str, dict[str, type]] = {"iterations": ITERATION_DTYPES, "updates": UPDATE_DTYPES}


def table_path(folder: Path, name: str) -> Path | None:
    """``folder/name.parquet`` or ``folder/name.csv``, whichever exists (Parquet first), else None."""
    for fmt in reversed(FORMATS):
        p = folder / f"{name}.{fmt}"
        if p.is_file():
            return p
    return None


def _polars_dtype(t: type) -> Any:
    import polars as pl

    return {np.int64: pl.Int64, np.float64: pl.Float64, np.bool_: pl.Boolean}[t]


CORRUPT = "a corrupt or partial lbsim output: re-run the command that wrote it"


def read_frame(path: Path, name: str | None = None) -> Any:
    """A polars DataFrame of one table file; known tables (by ``name``) get their record dtypes."""
    import polars as pl

    known = KNOWN_DTYPES.get(name or path.name.split(".")[0], {})
    try:
        table_format = TABLE_FORMATS.get(path.suffix.lstrip("."), TABLE_FORMATS["csv"])
        return table_format.read(path, {c: _polars_dtype(t) for c, t in known.items()})
    except (OSError, pl.exceptions.PolarsError) as err:
        raise InputError(str(path), f"cannot read the table ({type(err).__name__}: {str(err).splitlines()[0][:200]}); "
                                    f"{CORRUPT}") from None


def read_json_object(path: Path) -> dict[str, Any]:
    """A JSON file lbsim wrote (summary.json, sweep.json) as a dict; InputError naming it if it is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise InputError(str(path), f"cannot read it ({type(err).__name__}: {str(err)[:200]}); {CORRUPT}") from None
    if not isinstance(data, dict):
        raise InputError(str(path), f"expected a JSON object, got {type(data).__name__}; {CORRUPT}")
    return data


def read_columns(path: Path, name: str | None = None, wanted: tuple[str, ...] | None = None) -> dict[str, np.ndarray]:
    """One table file as numpy columns (only ``wanted`` ones that exist, if given)."""
    frame = read_frame(path, name)
    cols = [c for c in frame.columns if wanted is None or c in wanted]
    return {c: frame.get_column(c).to_numpy() for c in cols}


def to_pandas(frame: Any) -> Any:
    """A polars frame as a pandas DataFrame, column by column (no pyarrow needed)."""
    import pandas as pd

    return pd.DataFrame({c: frame.get_column(c).to_numpy() for c in frame.columns})


def is_run_dir(path: Path) -> bool:
    """Whether ``path`` is a run folder: ``summary.json`` and an ``iterations`` table."""
    return (path / "summary.json").is_file() and table_path(path, "iterations") is not None


def is_sweep_dir(path: Path) -> bool:
    """Whether ``path`` is a sweep folder: ``results.csv`` and ``runs/``."""
    return (path / "results.csv").is_file() and (path / "runs").is_dir()


def is_compare_dir(path: Path) -> bool:
    """Whether ``path`` is a compare folder: ``compare.csv``."""
    return (path / "compare.csv").is_file()


def read_summary(path: Path) -> dict[str, Any]:
    """A run folder's ``summary.json`` as a dict."""
    return read_json_object(path / "summary.json")


def compare_schemes(path: Path) -> list[str]:
    """The schemes of a compare folder, in compare.csv's order (its run subfolders)."""
    frame = read_frame(path / "compare.csv")
    names = [str(s) for s in frame.get_column("scheme").to_list()] if "scheme" in frame.columns else []
    return [n for n in names if is_run_dir(path / n)]
