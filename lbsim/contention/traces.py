"""Readers for real-world contention traces, replayed as per-worker slowdown multipliers.

Three CSV formats are understood; each file may be plain or gzipped (``.gz`` suffix).
Blank lines are skipped, cells are stripped of surrounding whitespace, and every problem with
a file is raised as :class:`lbsim.errors.InputError` ``(path, message)`` with the line number
of the offending row and what was expected there.

``pai_minibatch`` -- Alibaba PAI 2020 per-worker mini-batch times (``job_k_norm.csv``)::

    ,worker,gpu,time,batch_time_norm        (leading unnamed row-index column optional)
    0,0,25,1,476

  ``worker`` = worker id (int), ``gpu`` = GPU share in % (ignored), ``time`` = iteration index,
  ``batch_time_norm`` = mini-batch time normalised to 0-1000 by Alibaba (must be > 0).
  :func:`load_pai_minibatch` returns ``m[w, i] = t[w, i] / median_w t[:, i]``.

``cluster_cpu`` -- Alibaba v2018 cluster-average usage per 300-s bucket (no time column)::

    cpu_util_percent,mem_util_percent,net_in,net_out,disk_io_percent
    16.13,87.14,34.89,27.66,4.09

  Row i is bucket i (t = 300 * i s); :func:`load_cluster_cpu` returns one column, in [0, 100].

``simple`` -- lbsim's own change-point format::

    time_s,worker,slowdown
    20,1,3.0
    60,1,1.0

  From ``time_s`` (>= 0) on, worker ``worker`` (int >= 0) runs ``slowdown`` (> 0) times slower
  (1 = full speed) until its next row. Rows may come in any order; a repeated
  ``(worker, time_s)`` is an error. :func:`load_simple` returns ``{worker: (times, factors)}``.
"""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import numpy as np

from lbsim.errors import InputError
from lbsim.limits import MAX_TRACE_ROWS, short_repr

PAI_COLUMNS = ("worker", "gpu", "time", "batch_time_norm")
CLUSTER_COLUMNS = ("cpu_util_percent", "mem_util_percent", "net_in", "net_out", "disk_io_percent")
SIMPLE_COLUMNS = ("time_s", "worker", "slowdown")

FORMATS = {
    "pai_minibatch": ",worker,gpu,time,batch_time_norm",
    "cluster_cpu": ",".join(CLUSTER_COLUMNS),
    "simple": ",".join(SIMPLE_COLUMNS),
}

_Row = tuple[int, list[str]]  # (1-based line number, stripped cells)


def _read(path: str | Path) -> tuple[list[str], list[_Row]]:
    """Header cells and numbered data rows of a plain or ``.gz`` CSV file."""
    name, p = str(path), Path(path)
    if not p.is_file():
        raise InputError(name, "trace file not found")
    opener = gzip.open if p.suffix.lower() == ".gz" else open
    rows: list[_Row] = []
    try:
        with opener(p, "rt", encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(f)
            for row in reader:
                if len(row) > 64:  # no trace format has more than 5 columns
                    raise InputError(name, f"line {reader.line_num}: {len(row)} fields, more than any trace format has")
                cells = [c.strip() for c in row]
                if any(cells):
                    rows.append((reader.line_num, cells))
                    if len(rows) > MAX_TRACE_ROWS + 1:  # the header and the rows; checked while reading
                        raise InputError(name, f"more than {MAX_TRACE_ROWS} data rows, the bound for a trace file")
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - only I/O, gzip/zlib, decoding and csv run here
        kind = "gzip-compressed CSV" if opener is gzip.open else "UTF-8 CSV text"
        raise InputError(name, f"cannot read file as {kind}: {exc}") from None
    if not rows:
        raise InputError(name, "file is empty (expected a header line)")
    header, data = rows[0][1], rows[1:]
    if not data:
        raise InputError(name, f"no data rows after the header on line {rows[0][0]}")
    return header, data


def _number(path: str | Path, line: int, column: str, cell: str, kind: type = float) -> float:
    """Parse one cell as a finite float (or an int), naming the line if it is not."""
    try:
        value = kind(cell)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise InputError(str(path), f"line {line}: {column} must be {what}, got {short_repr(cell)}") from None
    if kind is float and not np.isfinite(value):
        raise InputError(str(path), f"line {line}: {column} must be finite, got {short_repr(cell)}")
    return value


def _check_width(path: str | Path, line: int, cells: list[str], header: list[str]) -> None:
    if len(cells) != len(header):
        raise InputError(
            str(path),
            f"line {line}: expected {len(header)} fields ({','.join(header)}), got {len(cells)}",
        )


def _format_of(header: list[str]) -> str | None:
    if tuple(header) == SIMPLE_COLUMNS:
        return "simple"
    if tuple(header) == CLUSTER_COLUMNS:
        return "cluster_cpu"
    if tuple(header[-4:]) == PAI_COLUMNS and len(header) in (4, 5) and (len(header) == 4 or not header[0]):
        return "pai_minibatch"
    return None


def _expect(path: str | Path, header: list[str], fmt: str) -> None:
    if _format_of(header) != fmt:
        raise InputError(
            str(path), f"header {short_repr(','.join(header))} is not the {fmt} header {FORMATS[fmt]!r}"
        )


def detect_format(path: str | Path) -> str:
    """Return ``'pai_minibatch'``, ``'cluster_cpu'`` or ``'simple'`` from the file's header line."""
    header, _ = _read(path)
    fmt = _format_of(header)
    if fmt is None:
        known = "; ".join(f"{k}: {v!r}" for k, v in FORMATS.items())
        raise InputError(
            str(path), f"unknown trace format, header {short_repr(','.join(header))}; expected one of {known}"
        )
    return fmt


def load_pai_minibatch(path: str | Path) -> np.ndarray:
    """Alibaba PAI 2020 per-worker mini-batch times as slowdown multipliers.

    Returns ``m`` of shape ``(n_trace_workers, n_iterations)``, float64, with
    ``m[w, i] = batch_time_norm[w, i] / median over workers of batch_time_norm[:, i]``.
    Workers are the sorted distinct ``worker`` values, iterations the sorted distinct ``time``
    values; missing (worker, iteration) cells are 1.0. A repeated (worker, time) row is accepted
    only if it repeats the same time (the shipped job 2 has one such exact duplicate).
    """
    header, data = _read(path)
    _expect(path, header, "pai_minibatch")
    off = len(header) - 4
    seen: dict[tuple[int, float], tuple[int, float]] = {}
    for line, cells in data:
        _check_width(path, line, cells, header)
        worker = int(_number(path, line, "worker", cells[off], int))
        it = _number(path, line, "time", cells[off + 2])
        t = _number(path, line, "batch_time_norm", cells[off + 3])
        if t <= 0:
            raise InputError(str(path), f"line {line}: batch_time_norm must be > 0, got {short_repr(cells[off + 3])}")
        prev = seen.get((worker, it))
        if prev is not None and prev[1] != t:
            raise InputError(
                str(path),
                f"line {line}: worker {worker} at time {cells[off + 2]} already has batch_time_norm "
                f"{prev[1]:g} (line {prev[0]}), expected one value per (worker, time)",
            )
        seen.setdefault((worker, it), (line, t))
    workers = sorted({w for w, _ in seen})
    iters = sorted({i for _, i in seen})
    row = {w: k for k, w in enumerate(workers)}
    col = {i: k for k, i in enumerate(iters)}
    times = np.full((len(workers), len(iters)), np.nan)
    for (w, i), (_, t) in seen.items():
        times[row[w], col[i]] = t
    m = times / np.nanmedian(times, axis=0)
    m[np.isnan(m)] = 1.0
    return m


def load_cluster_cpu(path: str | Path, column: str = "cpu_util_percent") -> np.ndarray:
    """One column of the Alibaba v2018 cluster-average series (row i = 300-s bucket i).

    Returns float64 percent values; each must lie in [0, 100].
    """
    header, data = _read(path)
    if column not in header:
        raise InputError(str(path), f"no column {column!r}; columns present: {', '.join(header)}")
    k = header.index(column)
    out = np.empty(len(data))
    for n, (line, cells) in enumerate(data):
        _check_width(path, line, cells, header)
        v = _number(path, line, column, cells[k])
        if not 0.0 <= v <= 100.0:
            raise InputError(
                str(path), f"line {line}: {column} must be a percentage in [0, 100], got {short_repr(cells[k])}"
            )
        out[n] = v
    return out


def load_simple(path: str | Path) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """lbsim change-point trace: ``{worker: (times_s ascending, slowdown factors)}`` (float64)."""
    header, data = _read(path)
    _expect(path, header, "simple")
    points: dict[int, dict[float, tuple[int, float]]] = {}
    for line, cells in data:
        _check_width(path, line, cells, header)
        t = _number(path, line, "time_s", cells[0])
        w = int(_number(path, line, "worker", cells[1], int))
        s = _number(path, line, "slowdown", cells[2])
        if t < 0:
            raise InputError(str(path), f"line {line}: time_s must be >= 0, got {short_repr(cells[0])}")
        if w < 0:
            raise InputError(str(path), f"line {line}: worker must be an integer >= 0, got {short_repr(cells[1])}")
        if s <= 0:
            raise InputError(
                str(path),
                f"line {line}: slowdown must be > 0 (1 = full speed, 2 = twice as slow), got {short_repr(cells[2])}",
            )
        prev = points.setdefault(w, {}).get(t)
        if prev is not None:
            raise InputError(
                str(path),
                f"line {line}: duplicate row for worker {w} at time_s {cells[0]} (first on line {prev[0]}); "
                "expected one slowdown per (worker, time_s)",
            )
        points[w][t] = (line, s)
    out = {}
    for w in sorted(points):
        ts = sorted(points[w])
        factors = [points[w][t][1] for t in ts]
        out[w] = (np.array(ts, dtype=np.float64), np.array(factors, dtype=np.float64))
    return out
