"""Reading a recording (a job folder or one generic CSV/Parquet file) into a checked :class:`Recording`.

Every problem is an :class:`~lbsim.errors.InputError` whose path is the file and whose message
names the row (1-based, the header not counted) and, for CSV, the line: a missing shard, a rank
with no rows, a row of the wrong rank, steps that do not follow each other, moments out of order
or past the bounds of :mod:`lbsim.recording.schema` (negative, a step of more than an hour, a clock
past a year: a unit error), and a shard cut mid-row.

A killed job (``complete`` false or missing in ``job.json``) is expected to end untidily: the last
line of a shard may be cut (it is dropped) and the ranks may have written different numbers of
steps. It is read up to the last step every rank completed, and the recording's notes say how many
steps were used. In a complete job or a generic file the same defects are errors.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lbsim.errors import InputError
from lbsim.limits import MAX_WORKERS, short_repr
from lbsim.recording.schema import (
    CLOCK_TOLERANCE_S,
    COLUMNS,
    FORMAT,
    HEADER_FILE,
    HEADER_KEYS,
    INT_COLUMNS,
    MAX_CLOCK_S,
    MAX_FILE_BYTES,
    MAX_ROWS,
    MAX_SAMPLES,
    MAX_STEP_S,
    OPTIONAL_COLUMNS,
    REQUIRED_HEADER_KEYS,
    SHARD_STEM,
    SHARD_SUFFIXES,
    TEXT_COLUMNS,
    TIME_COLUMNS,
    VERSION,
    Recording,
)


@dataclass
class _Table:
    """One file's rows as columns; ``lines[i]`` is row i's line in a CSV file (None: Parquet)."""

    name: str
    cols: dict[str, Any]
    lines: list[int] | None
    cut: bool = False  # the last line was cut mid-row and dropped

    def __len__(self) -> int:
        return len(self.cols["step"])

    def where(self, i: int) -> str:
        return f"row {i + 1}" + (f" (line {self.lines[i]})" if self.lines is not None else "")

    def error(self, i: int, message: str) -> InputError:
        return InputError(self.name, f"{self.where(i)}: {message}")

    def take(self, mask: np.ndarray) -> _Table:
        cols = {k: (v[mask] if isinstance(v, np.ndarray) else [x for x, m in zip(v, mask, strict=True) if m])
                for k, v in self.cols.items()}
        lines = None if self.lines is None else [x for x, m in zip(self.lines, mask, strict=True) if m]
        return _Table(self.name, cols, lines, self.cut)


# -- files ------------------------------------------------------------------------------------------------
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


def _read_csv(path: Path, *, allow_cut: bool) -> _Table:
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
    table = _Table(name, {}, lines, cut)
    table.cols = {col: _convert(table, col, cells) for col, cells in cols.items()}
    if "tokens" not in table.cols:
        table.cols["tokens"] = None
    return table


def _convert(table: _Table, col: str, cells: list[str]) -> Any:
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


def _read_parquet(path: Path) -> _Table:
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
    table = _Table(name, {}, None)
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


def _read_table(path: Path, *, allow_cut: bool) -> _Table:
    if path.suffix.lower() == ".parquet":
        return _read_parquet(path)
    return _read_csv(path, allow_cut=allow_cut)


# -- checks -----------------------------------------------------------------------------------------------
def _first(mask: np.ndarray) -> int | None:
    idx = np.flatnonzero(mask)
    return int(idx[0]) if len(idx) else None


def _check_rows(t: _Table) -> None:
    """Values each row must hold on its own, and the order of a rank's consecutive rows."""
    c = t.cols
    if (i := _first(c["rank"] < 0)) is not None:
        raise t.error(i, f"rank must be >= 0, got {c['rank'][i]}")
    if (i := _first((c["samples"] < 1) | (c["samples"] > MAX_SAMPLES))) is not None:
        raise t.error(i, f"samples must lie in [1, {MAX_SAMPLES}], got {c['samples'][i]}")
    if c["tokens"] is not None and (i := _first(c["tokens"] < 0)) is not None:
        raise t.error(i, f"tokens must be >= 0, got {c['tokens'][i]}")
    if (i := _first(c["step"] < 0)) is not None:
        raise t.error(i, f"step must be >= 0, got {c['step'][i]}")
    for col in TIME_COLUMNS:
        v = c[col]
        if (i := _first((v < 0) | (v > MAX_CLOCK_S))) is not None:
            raise t.error(i, f"{col} = {v[i]:g} s is not seconds since the job's start (must lie in [0, {MAX_CLOCK_S:g}]): "
                             "check the unit and the clock's origin")
    for a, b in zip(TIME_COLUMNS, TIME_COLUMNS[1:], strict=False):
        if (i := _first(c[b] < c[a] - CLOCK_TOLERANCE_S)) is not None:
            raise t.error(i, f"{b} ({c[b][i]:g} s) is before {a} ({c[a][i]:g} s)")
    span = c["optimizer_end_s"] - c["batch_ready_s"]
    if (i := _first(span > MAX_STEP_S)) is not None:
        raise t.error(i, f"a step of {span[i]:g} s (batch_ready_s to optimizer_end_s), more than {MAX_STEP_S:g} s: check the unit")


def _check_rank_order(t: _Table, idx: np.ndarray) -> None:
    """One rank's rows (``idx``, in file order): one host and device, steps consecutive, time forward."""
    c = t.cols
    hosts = {c["host"][i] for i in idx}
    devices = {c["device"][i] for i in idx}
    for col, values in (("host", hosts), ("device", devices)):
        if len(values) > 1:
            i = next(i for i in idx if c[col][i] != c[col][idx[0]])
            raise t.error(int(i), f"{col} {short_repr(c[col][i])} differs from this rank's first row's "
                                  f"{short_repr(c[col][idx[0]])}: one rank runs on one {col}")
    steps = c["step"][idx]
    bad = np.flatnonzero(np.diff(steps) != 1)
    if len(bad):
        j = int(idx[bad[0] + 1])
        raise t.error(j, f"steps out of order: step {int(c['step'][j])} follows step {int(steps[bad[0]])} of rank "
                         f"{int(c['rank'][j])} (expected {int(steps[bad[0]]) + 1})")
    back = np.flatnonzero(c["batch_ready_s"][idx][1:] < c["optimizer_end_s"][idx][:-1] - CLOCK_TOLERANCE_S)
    if len(back):
        j = int(idx[back[0] + 1])
        raise t.error(j, f"batch_ready_s ({c['batch_ready_s'][j]:g} s) is before the previous step's optimizer_end_s "
                         f"({c['optimizer_end_s'][idx[back[0]]]:g} s): a rank's steps do not overlap")


# -- the header --------------------------------------------------------------------------------------------
def _header(folder: Path) -> dict[str, Any]:
    path = folder / HEADER_FILE
    name = str(path)
    if not path.is_file():
        raise InputError(name, f"not found: a job folder holds {HEADER_FILE} and one rank-NNNNN.csv per rank "
                               "(or give one generic CSV file with every rank's rows)")
    if path.stat().st_size > 2**20:
        raise InputError(name, "more than 1 MiB: not a recording header")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(name, f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(name, "expected a JSON object")
    for key in data:
        if key not in HEADER_KEYS:
            raise InputError(f"{name}: {short_repr(key, 30)}", f"unknown key; valid keys: {', '.join(HEADER_KEYS)}")
    for key in REQUIRED_HEADER_KEYS:
        if key not in data:
            raise InputError(f"{name}: {key}", f"required ({HEADER_KEYS[key]})")
    if data["format"] != FORMAT:
        raise InputError(f"{name}: format", f"expected {FORMAT!r}, got {short_repr(data['format'])}")
    if data["version"] != VERSION:
        raise InputError(f"{name}: version", f"this lbsim reads version {VERSION}, got {short_repr(data['version'])}")
    world = data["world_size"]
    if not isinstance(world, int) or isinstance(world, bool) or not 1 <= world <= MAX_WORKERS:
        raise InputError(f"{name}: world_size", f"must be an integer in [1, {MAX_WORKERS}], got {short_repr(world)}")
    scheme = data.get("scheme", {"name": "bsp"})
    if not isinstance(scheme, dict) or not isinstance(scheme.get("name"), str):
        raise InputError(f"{name}: scheme", f"expected a mapping with a name, e.g. {{\"name\": \"bsp\"}}, got {short_repr(scheme)}")
    if not isinstance(data.get("complete", False), bool):
        raise InputError(f"{name}: complete", f"expected true or false, got {short_repr(data['complete'])}")
    gb = data.get("gradient_bytes")
    if gb is not None and (not isinstance(gb, int) or isinstance(gb, bool) or not 0 < gb <= 2**50):
        raise InputError(f"{name}: gradient_bytes", f"expected a positive integer or null, got {short_repr(gb)}")
    return data


def _shard_path(folder: Path, rank: int) -> Path:
    stem = SHARD_STEM.format(rank=rank)
    found = [folder / f"{stem}{s}" for s in SHARD_SUFFIXES if (folder / f"{stem}{s}").is_file()]
    if not found:
        raise InputError(str(folder / f"{stem}.csv"), f"missing: rank {rank}'s shard ({HEADER_FILE} says the job has "
                                                       "this rank; every rank writes its own shard)")
    if len(found) > 1:
        raise InputError(str(found[1]), f"rank {rank} has two shards ({found[0].name} and {found[1].name}): keep one")
    return found[0]


# -- assembling -------------------------------------------------------------------------------------------
def _per_rank(tables: list[tuple[_Table, np.ndarray]], *, complete: bool) -> tuple[list[tuple[_Table, np.ndarray]], int, int, list[str]]:
    """Cut every rank to the steps all ranks hold; returns (tables, steps recorded, steps used, notes)."""
    firsts = [int(t.cols["step"][idx[0]]) for t, idx in tables]
    lasts = [int(t.cols["step"][idx[-1]]) for t, idx in tables]
    notes: list[str] = []
    if len(set(firsts)) > 1:
        r = int(np.argmax(firsts))
        t, idx = tables[r]
        raise t.error(int(idx[0]), f"rank {r}'s first step is {firsts[r]}, rank {int(np.argmin(firsts))}'s "
                                   f"{min(firsts)}: every rank records from the same step")
    first, last = firsts[0], min(lasts)
    if len(set(lasts)) > 1 and complete:
        r = int(np.argmin(lasts))
        t, idx = tables[r]
        raise t.error(int(idx[-1]), f"rank {r} ends at step {lasts[r]}, rank {int(np.argmax(lasts))} at step {max(lasts)}: "
                                    "the ranks of a complete job record the same steps (a killed job's header says complete: false)")
    recorded = max(lasts) - first + 1
    used = last - first + 1
    if used < recorded:
        notes.append(f"killed job: used {used} of {recorded} recorded steps (up to step {last}, the last every rank completed)")
    cut = [t.name for t, _ in tables if t.cut]
    if cut:
        notes.append(f"killed job: dropped the cut last row of {', '.join(sorted(set(cut)))}")
    return [(t, idx[: used]) for t, idx in tables], recorded, used, notes


def _assemble(source: str, tables: list[tuple[_Table, np.ndarray]], *, header: dict[str, Any]) -> Recording:
    complete = bool(header.get("complete", False))
    tables, recorded, used, notes = _per_rank(tables, complete=complete)
    has_tokens = all(t.cols["tokens"] is not None for t, _ in tables)

    def stack(col: str) -> np.ndarray:
        return np.stack([t.cols[col][idx] for t, idx in tables])

    first_table, first_idx = tables[0]
    return Recording(
        source=source,
        hosts=tuple(t.cols["host"][int(idx[0])] for t, idx in tables),
        devices=tuple(t.cols["device"][int(idx[0])] for t, idx in tables),
        steps=first_table.cols["step"][first_idx].copy(),
        samples=stack("samples"),
        batch_ready_s=stack("batch_ready_s"),
        last_bucket_s=stack("last_bucket_s"),
        step_end_s=stack("step_end_s"),
        optimizer_end_s=stack("optimizer_end_s"),
        tokens=stack("tokens") if has_tokens else None,
        scheme=dict(header.get("scheme", {"name": "bsp"})),
        complete=complete,
        steps_recorded=max(recorded, used),
        gradient_bytes=header.get("gradient_bytes"),
        notes=tuple(notes),
    )


def _job_folder(folder: Path) -> Recording:
    header = _header(folder)
    world = int(header["world_size"])
    complete = bool(header.get("complete", False))
    extra = sorted(p.name for p in folder.glob("rank-*") if p.suffix in SHARD_SUFFIXES
                   and not (p.stem[5:].isdigit() and int(p.stem[5:]) < world))
    if extra:
        raise InputError(str(folder / extra[0]), f"a shard beyond world_size {world} in {HEADER_FILE}")
    tables: list[tuple[_Table, np.ndarray]] = []
    total = 0
    for rank in range(world):
        t = _read_table(_shard_path(folder, rank), allow_cut=not complete)
        if len(t) == 0:
            raise InputError(t.name, f"rank {rank} has no rows (every rank records every step; "
                                     "a rank that never completed a step makes the job unreadable)")
        total += len(t)
        if total > MAX_ROWS:
            raise InputError(t.name, f"more than {MAX_ROWS} rows over the shards, the bound for a recording")
        _check_rows(t)
        if (i := _first(t.cols["rank"] != rank)) is not None:
            raise t.error(i, f"rank {int(t.cols['rank'][i])} in rank {rank}'s shard")
        idx = np.arange(len(t))
        _check_rank_order(t, idx)
        tables.append((t, idx))
    return _assemble(str(folder), tables, header=header)


def _generic(path: Path, scheme: dict[str, Any] | None) -> Recording:
    t = _read_table(path, allow_cut=False)
    if len(t) == 0:
        raise InputError(str(path), "no rows after the header")
    _check_rows(t)
    ranks = t.cols["rank"]
    world = int(ranks.max()) + 1
    if world > MAX_WORKERS:
        raise InputError(str(path), f"rank {world - 1}: more than {MAX_WORKERS} ranks")
    order = np.argsort(ranks, kind="stable")
    bounds = np.searchsorted(ranks[order], np.arange(world + 1))
    tables = []
    for r in range(world):
        idx = order[bounds[r]:bounds[r + 1]]
        if len(idx) == 0:
            raise InputError(str(path), f"rank {r} has no rows (ranks 0 to {world - 1} appear: every rank records every step)")
        _check_rank_order(t, idx)
        tables.append((t, idx))
    header = {"scheme": scheme or {"name": "bsp"}, "complete": True}
    return _assemble(str(path), tables, header=header)


def read_recording(path: str | Path, *, scheme: dict[str, Any] | None = None) -> Recording:
    """The checked recording at ``path``: a job folder (``job.json`` + one shard per rank) or one generic
    CSV/Parquet file with every rank's rows (``scheme``: the scheme it ran, default plain DDP = ``bsp``)."""
    p = Path(path)
    if p.is_dir():
        rec = _job_folder(p)
        if scheme is not None:
            rec = Recording(**{**rec.__dict__, "scheme": dict(scheme)})
        return rec
    if not p.exists():
        raise InputError(str(p), "not found: expected a job folder (job.json + rank-NNNNN.csv) or a CSV/Parquet file")
    return _generic(p, scheme)
