"""A recording's files as column tables: CSV (line numbers kept, a cut last line detected) or Parquet.

Cells are converted and typed here (integers, finite numbers, non-empty text), each problem an
:class:`~lbsim.errors.InputError` naming the file, the row and, for CSV, the line.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lbsim.errors import InputError
from lbsim.limits import short_repr
from lbsim.recording.schema import COLUMNS, HEADER_FILE, INT_COLUMNS, MAX_FILE_BYTES, MAX_ROWS, OPTIONAL_COLUMNS, TEXT_COLUMNS


@dataclass
class Table:
    """One file's rows as columns; ``lines[i]`` is row i's line in a CSV file (None: Parquet)."""

    name: str
    cols: dict[str, Any]
    lines: list[int] | None
    cut: bool = False  # the last line was cut mid-row and dropped

    def __len__(self) -> int:
        return len(self.cols["step"])

    def where(self, i: int) -> str:
        """Row i as an error names it: ``row N`` and, in a CSV file, its line."""
        return f"row {i + 1}" + (f" (line {self.lines[i]})" if self.lines is not None else "")

    def error(self, i: int, message: str) -> InputError:
        """An InputError at this file naming row i."""
        return InputError(self.name, f"{self.where(i)}: {message}")

    def take(self, mask: np.ndarray) -> Table:
        """The rows where ``mask`` holds, line numbers kept."""
        cols = {k: (v[mask] if isinstance(v, np.ndarray) else [x for x, m in zip(v, mask, strict=True) if m])
                for k, v in self.cols.items()}
        lines = None if self.lines is None else [x for x, m in zip(self.lines, mask, strict=True) if m]
        return Table(self.name, cols, lines, self.cut)


def _check_size(path: Path) -> None:
    if not path.is_file():
        raise InputError(str(path), "file not found")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise InputError(str(path), f"{size} bytes, more than the {MAX_FILE_BYTES} a recording shard may hold")


def _header_columns(name: str, header: list[str]) -> None:
    missing = [c for c in COLUMNS if c not in header]
    unknown = [c for c in header if c not in COLUMNS and c not in OPTIONAL_COLUMNS]
    if missing or unknown or len(set(header)) != len(header):
        what = (f"missing {', '.join(missing)}" if missing else
                f"unknown {', '.join(short_repr(c, 30) for c in unknown)}" if unknown else "a column named twice")
        raise InputError(name, f"header: {what}; the columns are {', '.join(COLUMNS)} (+ optional {', '.join(OPTIONAL_COLUMNS)})")


def _read_csv(path: Path, *, allow_cut: bool) -> Table:
    """A CSV shard's rows; a last line without its newline is a cut row: dropped if ``allow_cut``, else an error."""
    _check_size(path)
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(name, f"cannot read file as UTF-8 CSV text: {exc}") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [c.strip() for c in next(reader)]
    except StopIteration:
        raise InputError(name, "file is empty (expected the header line)") from None
    _header_columns(name, header)
    rows: list[list[str]] = []
    lines: list[int] = []
    try:
        for row in reader:
            if not any(c.strip() for c in row):
                continue
            rows.append(row)
            lines.append(reader.line_num)
            if len(rows) > MAX_ROWS:
                raise InputError(name, f"more than {MAX_ROWS} rows, the bound for a recording")
    except csv.Error as exc:
        raise InputError(name, f"line {reader.line_num}: not CSV: {exc}") from None
    cut = False
    if rows and not text.endswith(("\n", "\r")):
        if not allow_cut:
            raise InputError(name, f"row {len(rows)} (line {lines[-1]}): cut mid-row (the file ends without a newline) "
                                   f"in a job whose {HEADER_FILE} says it completed")
        rows.pop()
        lines.pop()
        cut = True
    width = len(header)
    for i, row in enumerate(rows):
        if len(row) != width:
            raise InputError(name, f"row {i + 1} (line {lines[i]}): {len(row)} fields, expected {width} ({','.join(header)}): "
                                   "a row cut or garbled mid-file")
    cols: dict[str, Any] = {}
    for j, col in enumerate(header):
        cells = [r[j].strip() for r in rows]
        cols[col] = cells
    table = Table(name, {}, lines, cut)
    table.cols = {col: _convert(table, col, cells) for col, cells in cols.items()}
    if "tokens" not in table.cols:
        table.cols["tokens"] = None
    return table


def _convert(table: Table, col: str, cells: list[str]) -> Any:
    if col in TEXT_COLUMNS:
        for i, c in enumerate(cells):
            if not c:
                raise table.error(i, f"{col} is empty")
        return cells
    out = np.empty(len(cells), dtype=np.int64 if col in INT_COLUMNS else np.float64)
    for i, c in enumerate(cells):
        try:
            v = float(c)
        except ValueError:
            raise table.error(i, f"{col} must be a number, got {short_repr(c)}") from None
        if not math.isfinite(v):
            raise table.error(i, f"{col} must be finite, got {short_repr(c)}")
        if col in INT_COLUMNS:
            if v != int(v) or abs(v) > 2**53:
                raise table.error(i, f"{col} must be an integer, got {short_repr(c)}")
            v = int(v)
        out[i] = v
    return out


def _read_parquet(path: Path) -> Table:
    _check_size(path)
    name = str(path)
    import polars as pl

    try:
        frame = pl.read_parquet(path)
    except Exception as exc:  # noqa: BLE001 - any reader failure is a file that is not a Parquet table
        raise InputError(name, f"cannot read file as Parquet: {short_repr(str(exc), 120)}") from None
    _header_columns(name, list(frame.columns))
    if frame.height > MAX_ROWS:
        raise InputError(name, f"more than {MAX_ROWS} rows, the bound for a recording")
    table = Table(name, {}, None)
    cols: dict[str, Any] = {}
    for col in frame.columns:
        series = frame[col]
        if series.null_count():
            i = int(series.is_null().arg_true()[0])
            raise table.error(i, f"{col} is empty")
        values = series.to_list()
        cols[col] = _convert(table, col, [str(v) for v in values]) if col not in TEXT_COLUMNS else \
            _convert(table, col, [str(v).strip() for v in values])
    table.cols = cols
    table.cols.setdefault("tokens", None)
    return table


def read_table(path: Path, *, allow_cut: bool) -> Table:
    """A Parquet or CSV file's rows (``allow_cut``: a CSV's last line cut mid-row is dropped, not refused)."""
    if path.suffix.lower() == ".parquet":
        return _read_parquet(path)
    return _read_csv(path, allow_cut=allow_cut)
