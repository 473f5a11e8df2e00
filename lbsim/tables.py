"""The summary table ``lbsim run`` / ``compare`` / ``train`` print, fitted to the terminal.

Columns: the scheme, throughput, samples, model updates, gradients applied, time, mean and p99
iteration time, where the workers' time went, staleness, and a command's extra columns (a
comparison's speedup, accuracy). The time shares are ``compute + communicate + wait (+ fetch)``
of the workers' busy time, printed as whole percents that add up to exactly 100 (largest
remainder rounding), so a reader can check them at a glance; ``fetch`` appears only when some
run read data.

Width: on a terminal the table fits the terminal's width (80 columns included). When the full
table is wider, the least needed columns are left out, in :data:`DROP_ORDER`, and the caption says
which (every figure is in ``summary.json``). Not on a terminal (a pipe, a file), the table is
printed whole, as wide as it needs (``COLUMNS`` sets a width there too).
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Sequence
from typing import Any

Column = tuple[str, str, str]  # (summary key, header, format)

SUMMARY_COLUMNS: tuple[Column, ...] = (
    ("scheme", "scheme", "{}"),
    ("throughput_samples_per_s", "samples/s", "{:.1f}"),
    ("samples", "samples", "{}"),
    ("updates", "model updates", "{}"),
    ("worker_iterations", "gradients applied", "{}"),
    ("sim_time_s", "time (s)", "{:.1f}"),
    ("mean_iteration_s", "mean iter (s)", "{:.3f}"),
    ("p99_iteration_s", "p99 iter (s)", "{:.3f}"),
    ("compute_fraction", "compute", "%"),
    ("comm_fraction", "comm", "%"),
    ("wait_fraction", "wait", "%"),
    ("fetch_fraction", "fetch", "%"),
    ("staleness_mean", "stale mean (updates)", "{:.2f}"),
    ("staleness_max", "stale max (updates)", "{}"),
)
SHARES = ("compute_fraction", "comm_fraction", "wait_fraction", "fetch_fraction")
# Left out first when the table does not fit: what summary.json and the other columns already imply.
DROP_ORDER = ("samples", "worker_iterations", "staleness_max", "p99_iteration_s", "sim_time_s", "updates",
              "staleness_mean", "mean_iteration_s")
SHORT_HEADERS = {"model updates": "updates", "gradients applied": "grads", "stale mean (updates)": "stale",
                 "stale max (updates)": "stale max", "mean iter (s)": "iter (s)", "p99 iter (s)": "p99 (s)"}


def percent_shares(row: dict[str, Any], keys: Sequence[str] = SHARES) -> dict[str, int | None]:
    """Whole percents of ``row[key]`` that add up to the rounded total (100 for shares of one whole).

    Largest remainder: floor every share, then give the missing points to the largest remainders.
    """
    vals = {k: row.get(k) for k in keys}
    known = {k: float(v) for k, v in vals.items() if isinstance(v, (int, float)) and math.isfinite(v)}
    out: dict[str, int | None] = {k: None for k in keys}
    if not known or not any(known.values()):  # no busy time at all: no shares to show
        return out
    scaled = {k: 100.0 * v for k, v in known.items()}
    floors = {k: math.floor(v + 1e-9) for k, v in scaled.items()}
    missing = round(math.fsum(scaled.values())) - sum(floors.values())
    for k in sorted(scaled, key=lambda k: (-(scaled[k] - floors[k]), list(keys).index(k)))[:max(missing, 0)]:
        floors[k] += 1
    out.update(floors)
    return out


def _cells(row: dict[str, Any], cols: Sequence[Column], shares: dict[str, int | None]) -> list[str]:
    cells = []
    for key, _label, fmt in cols:
        if fmt == "%":
            v = shares.get(key)
            cells.append("—" if v is None else f"{v}%")
        else:
            cells.append("—" if row.get(key) is None else fmt.format(row[key]))
    return cells


def table_width() -> int | None:
    """The width to fit: the terminal's on a terminal, else ``COLUMNS`` if set, else None (no limit)."""
    if sys.stdout.isatty():
        from rich.console import Console

        return int(Console().width)
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else None


def build_table(rows: Sequence[dict[str, Any]], title: str, extra: Sequence[Column] = (),
                width: int | None = None) -> tuple[Any, list[str]]:
    """The rich Table for ``rows`` (and the keys of the columns left out to fit ``width``)."""
    from rich.console import Console
    from rich.table import Table

    cols = [c for c in (*SUMMARY_COLUMNS, *extra)
            if c[0] != "fetch_fraction" or any((r.get("fetch_fraction") or 0) > 0 for r in rows)]
    shares = [percent_shares(r) for r in rows]
    dropped: list[str] = []

    def make(cols: Sequence[Column], short: bool) -> Any:
        table = Table(title=title, caption=None, pad_edge=False, collapse_padding=True)
        for i, (_key, label, _fmt) in enumerate(cols):
            table.add_column(SHORT_HEADERS.get(label, label) if short else label,
                             justify="left" if i == 0 else "right", no_wrap=True)
        for row, share in zip(rows, shares, strict=True):
            table.add_row(*_cells(row, cols, share))
        return table

    def natural(table: Any) -> int:
        return int(Console(width=10_000).measure(table).maximum)

    table = make(cols, short=False)
    if width is None or natural(table) <= width:
        return table, dropped
    table = make(cols, short=True)
    for key in DROP_ORDER:
        if natural(table) <= width:
            break
        cols = [c for c in cols if c[0] != key]
        dropped.append(key)
        table = make(cols, short=True)
    return table, dropped


def console(width: int | None) -> Any:
    """A rich Console on stdout whose closed pipe is a BrokenPipeError (rich's own default exits with 1)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError

    return _Console(width=width, soft_wrap=False)


def print_summary_table(rows: Sequence[dict[str, Any]], title: str, extra: Sequence[Column] = (),
                        width: int | None = None) -> None:
    """Print the summary table to stdout, fitted to ``width`` (default: :func:`table_width`)."""
    from rich.console import Console

    width = table_width() if width is None else width
    table, dropped = build_table(rows, title, extra, width)
    if dropped:
        labels = {k: label for k, label, _f in SUMMARY_COLUMNS}
        table.caption = f"left out to fit {width} columns: {', '.join(labels[k] for k in dropped)} (see summary.json)"
    console(width or max(80, int(Console(width=10_000).measure(table).maximum))).print(table)
