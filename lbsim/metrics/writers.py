"""Every file lbsim writes goes through one atomic writer; tables are written column-wise.

Atomic: a file is written under a temporary name in its own directory, flushed and fsynced,
given the mode a plain ``open()`` would give it (``0o666 & ~umask``: 0644 under umask 022;
``mkstemp`` alone makes 0600, unreadable by colleagues on a shared file system), then renamed
over the target (``os.replace`` is atomic on POSIX and Windows). A reader sees the old file or
the complete new one, never half of one; on an error the target is untouched.

Tables (``iterations``, ``updates``, decision logs, learning curves) are written from their
numpy columns by polars' native writers, in one of two formats (:data:`FORMATS`):

* ``csv`` — floats in shortest round-trip form that always reads as a float (``0.0``, not
  ``0``; ``1e-7``), so every reader (pandas, polars, R, a spreadsheet) types a float column as
  float and reading the file gives back the exact float64 values; booleans as ``true``/``false``.
* ``parquet`` — typed columns, zstd level 3, statistics on, fixed row-group size: the writer
  options are pinned (:data:`PARQUET_OPTIONS`) and Parquet carries no timestamp, so the same
  columns give the same bytes (for a given polars version).

Small ad-hoc tables (``compare.csv``, a sweep's ``results.csv``) are written by :func:`csv_text`
with the same float rule (Python's ``repr``: ``0.0``, ``1e-07``).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import numpy as np

Format = Literal["csv", "parquet"]
PARQUET_OPTIONS: dict[str, Any] = {
    "compression": "zstd", "compression_level": 3, "statistics": True, "row_group_size": 262_144,
    "data_page_size": 1 << 20, "use_pyarrow": False,
}


def _write_csv_frame(frame: Any, fh: IO[bytes]) -> None:
    frame.write_csv(fh, include_header=True, line_terminator="\n", float_precision=None)


def _read_csv_frame(path: Path, dtypes: Mapping[str, Any]) -> Any:
    import polars as pl

    return pl.read_csv(path, schema_overrides=dict(dtypes) or None, infer_schema_length=None)


def _write_parquet_frame(frame: Any, fh: IO[bytes]) -> None:
    frame.write_parquet(fh, **PARQUET_OPTIONS)


def _read_parquet_frame(path: Path, dtypes: Mapping[str, Any]) -> Any:
    import polars as pl

    return pl.read_parquet(path)  # typed already


@dataclass(frozen=True)
class TableFormat:
    """How one table format is written (a polars DataFrame into a binary file) and read back (a path
    and the polars dtypes of the columns a text format cannot carry)."""

    write: Callable[[Any, IO[bytes]], None]
    read: Callable[[Path, Mapping[str, Any]], Any]


TABLE_FORMATS: dict[str, TableFormat] = {
    "csv": TableFormat(_write_csv_frame, _read_csv_frame),
    "parquet": TableFormat(_write_parquet_frame, _read_parquet_frame),
}
"""Every table format by its name, which is also the file suffix; a new format is one entry here
(and its name in :data:`Format`)."""
FORMATS = tuple(TABLE_FORMATS)


def umask() -> int:
    """This process's umask, read without changing it where the OS allows (Linux: /proc)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # elsewhere: read by setting and restoring
    os.umask(mask)
    return mask


def new_folder_mode(path: Path) -> None:
    """Give a folder made private (``mkdtemp``: 0700) the mode any new folder gets: ``0777 & ~umask``."""
    os.chmod(path, 0o777 & ~umask())


def fsync_dir(path: Path) -> None:
    """Flush a folder's entries (its renames) to disk, where the OS lets a folder be opened."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def file_mode() -> int:
    """The mode a new file gets from ``open()``: ``0o666 & ~umask`` (0644 under umask 022)."""
    return 0o666 & ~umask()


@contextlib.contextmanager
def atomic_file(path: str | Path, mode: Literal["w", "wb"] = "w") -> Iterator[IO[Any]]:
    """An open file that, when the block ends without error, replaces ``path`` at once.

    ``mode`` ``"w"`` (UTF-8 text, ``\\n`` line ends) or ``"wb"``. The file gets the mode of a
    plainly created file (:func:`file_mode`); on an error the temporary file is removed and
    ``path`` is untouched.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        os.fchmod(fd, file_mode()) if hasattr(os, "fchmod") else os.chmod(tmp, file_mode())
        kw: dict[str, Any] = {"encoding": "utf-8", "newline": ""} if mode == "w" else {}
        with os.fdopen(fd, mode, **kw) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException as err:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        # a write's error names no file (and a library's, e.g. polars', may carry its errno in its text): name it
        if not (isinstance(err, OSError) and err.filename is not None) and (code := _errno_of(err)) is not None:
            raise OSError(code, os.strerror(code), str(p)) from err
        raise


def _errno_of(err: BaseException) -> int | None:
    """The errno of an OSError, or the one a library's exception carries in its text ("(os error 28)")."""
    import re

    if isinstance(err, OSError) and err.errno is not None:
        return err.errno
    m = re.search(r"\(os error (\d+)\)", str(err))
    return int(m.group(1)) if m else None


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (module docstring)."""
    with atomic_file(path) as fh:
        fh.write(text)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (module docstring)."""
    with atomic_file(path, "wb") as fh:
        fh.write(data)


def json_text(data: Any) -> str:
    """``data`` as indented JSON text, keys in their order, with a final newline."""
    return json.dumps(data, indent=2, sort_keys=False) + "\n"


def write_json(path: str | Path, data: Any) -> None:
    """Write ``data`` as indented JSON to ``path`` atomically."""
    atomic_write_text(path, json_text(data))


def _cell(v: Any) -> Any:
    if isinstance(v, bool) or type(v).__name__ == "bool_":  # numpy's bool, without importing numpy here
        return "true" if v else "false"
    if isinstance(v, float) or type(v).__name__ in ("float32", "float16"):
        return repr(float(v))  # shortest round-trip, always float-looking: 0.0, 1e-07, nan
    return v


def csv_text(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A small table as CSV text, floats in the module's always-float form."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for row in rows:
        w.writerow([_cell(v) for v in row])
    return buf.getvalue()


def write_csv(path: str | Path, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Like ``atomic_write_text(path, csv_text(columns, rows))``, byte for byte, but streamed."""
    with atomic_file(path) as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(columns)
        block: list[list[Any]] = []
        for row in rows:
            block.append([_cell(v) for v in row])
            if len(block) >= 4096:
                w.writerows(block)
                block = []
        w.writerows(block)


def _frame(columns: Mapping[str, Any]) -> Any:
    import numpy as np
    import polars as pl

    series = []
    for name, col in columns.items():
        arr = np.asarray(col) if not isinstance(col, np.ndarray) else col
        if arr.dtype == object:  # e.g. a decision log's column with None: let polars type it
            series.append(pl.Series(name, list(arr), strict=False))
        else:
            series.append(pl.Series(name, arr))
    return pl.DataFrame(series)


def write_table(path: str | Path, columns: Mapping[str, Any], fmt: Format = "csv") -> Path:
    """Write one table (column name -> 1-D array, in order) atomically as ``fmt``; returns the path."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown table format {fmt!r}; valid: {', '.join(FORMATS)}")
    frame = _frame(columns)
    with atomic_file(path, "wb") as fh:
        TABLE_FORMATS[fmt].write(frame, fh)
    return Path(path)


def rows_to_columns(rows: Sequence[Mapping[str, Any]]) -> dict[str, np.ndarray]:
    """Dict rows (every row the first row's keys) as columns; ``ColumnRows`` give theirs directly."""
    import numpy as np

    cols = getattr(rows, "columns", None)
    if isinstance(cols, dict) and not getattr(rows, "convert", None):
        return {k: np.asarray(v) for k, v in cols.items()}
    keys = list(rows[0]) if len(rows) else []
    out: dict[str, np.ndarray] = {}
    for k in keys:
        values = [row.get(k) for row in rows]
        if any(v is None for v in values) or any(isinstance(v, str) for v in values):
            out[k] = np.array(values, dtype=object)
        elif all(isinstance(v, (bool, np.bool_)) for v in values):
            out[k] = np.array(values, dtype=np.bool_)
        elif all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
            out[k] = np.array(values, dtype=np.int64)
        else:
            out[k] = np.array(values, dtype=np.float64)
    return out
