"""Predictions and error tables of ``lbsim calibrate-nccl``: per row, per node count, per size class.

Error of a row: ``e = predicted / measured − 1`` (positive: lbsim too slow). A table row gives the
median and p90 of ``|e|`` and the geomean ``exp(mean log(1 + |e|)) − 1`` over its rows. Sizes are
split at 1 MiB: below it a call is latency-bound (a few to ~100 µs, where a run's jitter is a large
share), at and above it bandwidth-bound; both are reported. Roles: ``fit`` (a node count the
figures were fitted on), ``held_out`` (never seen by the fit), ``single`` (one GPU: no
communication, predicted 0, not scored).

**Intervals.** A prediction ``T̂`` carries ``[T̂·exp(q_lo), T̂·exp(q_hi)]``, ``q`` the
``(1 − P)/2`` and ``(1 + P)/2`` quantiles of ``log(measured / predicted)`` over the fit's own
leave-one-GPU-count-out rows (:meth:`lbsim.calibration.nccl_fit.NcclFit.cv_ratios`) of the same
size class (``P``: the nominal coverage). They come from one-node rows only — the fit has no second
multi-node count to leave out — so they say how far the model misses a GPU count it did not see,
not a node count; the held-out coverage is reported beside them. **Extrapolation flags**
(``extrapolates``): ``nodes`` (more nodes than any fit row), ``gpus_per_node`` (more than any fit
row), ``size`` (outside the fit rows' sizes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lbsim.calibration.arguments import NCCL_NOMINAL
from lbsim.calibration.error_stats import abs_error_stats
from lbsim.calibration.error_stats import coverage as interval_coverage
from lbsim.calibration.nccl_tests import NcclRow
from lbsim.network.nccl import NcclFigures, nccl_pick

LARGE_BYTES = 2**20


DEFAULT_NOMINAL = NCCL_NOMINAL  # the command's default coverage (lbsim.calibration.arguments)
MIN_INTERVAL_ROWS = 5


@dataclass(frozen=True)
class NcclPrediction:
    """One row's prediction: the time of NCCL's pick (``algorithm`` / ``protocol``), the row's role, its
    interval ``[lo_s, hi_s]`` (None: none) and why it extrapolates (module docstring)."""

    row: NcclRow
    predicted_s: float
    algorithm: str
    protocol: str
    role: str
    lo_s: float | None = None
    hi_s: float | None = None
    extrapolates: str = ""

    @property
    def error(self) -> float:
        """``predicted / measured − 1`` (positive: lbsim too slow)."""
        return self.predicted_s / self.row.time_s - 1.0

    @property
    def covered(self) -> bool | None:
        """Whether the measured time lies in the interval (None without one)."""
        if self.lo_s is None or self.hi_s is None:
            return None
        return self.lo_s <= self.row.time_s <= self.hi_s


def interval_bounds(ratios: Sequence[tuple[int, int, float]], nominal: float) -> dict[bool, tuple[float, float]]:
    """Per size class (``True``: ≥ 1 MiB) the log-ratio quantiles ``(q_lo, q_hi)``; a class with fewer than
    :data:`MIN_INTERVAL_ROWS` rows gets none."""
    out = {}
    for large in (True, False):
        logs = [-math.log(q) for _, s, q in ratios if (s >= LARGE_BYTES) == large]
        if len(logs) >= MIN_INTERVAL_ROWS:
            lo, hi = np.quantile(np.asarray(logs), [(1 - nominal) / 2, (1 + nominal) / 2])
            out[large] = (float(lo), float(hi))
    return out


def _extrapolates(r: NcclRow, fit_rows: Sequence[NcclRow]) -> str:
    why = []
    if r.nodes > max(f.nodes for f in fit_rows):
        why.append("nodes")
    if r.gpus_per_node > max(f.gpus_per_node for f in fit_rows):
        why.append("gpus_per_node")
    if not min(f.size_bytes for f in fit_rows) <= r.size_bytes <= max(f.size_bytes for f in fit_rows):
        why.append("size")
    return "+".join(why)


def predict_rows(fig: NcclFigures, rows: Sequence[NcclRow], fit_nodes: Sequence[int],
                 bounds: dict[bool, tuple[float, float]] | None = None) -> list[NcclPrediction]:
    """Every row predicted with NCCL's pick under ``fig``: its role (fit node count, held out, or one GPU: not
    scored), its interval from ``bounds`` (:func:`interval_bounds`) and its extrapolation flags."""
    fit_rows = [r for r in rows if r.nodes in fit_nodes and r.gpus > 1]
    out = []
    for r in rows:
        if r.gpus <= 1:
            out.append(NcclPrediction(r, 0.0, "", "", "single"))
            continue
        p = nccl_pick(fig, r.gpus, r.nodes, r.size_bytes)
        b = (bounds or {}).get(r.size_bytes >= LARGE_BYTES)
        lo, hi = (p.time_s * math.exp(b[0]), p.time_s * math.exp(b[1])) if b else (None, None)
        out.append(NcclPrediction(r, p.time_s, p.algorithm, p.protocol, "fit" if r.nodes in fit_nodes else "held_out",
                                  lo, hi, _extrapolates(r, fit_rows) if fit_rows else ""))
    return out


def coverage(preds: Sequence[NcclPrediction], role: str, large: bool) -> tuple[int, float]:
    """(rows with an interval, share of them whose measurement lies inside) for one role and size class
    (:func:`lbsim.calibration.error_stats.coverage`)."""
    sel = [p for p in preds if p.role == role and (p.row.size_bytes >= LARGE_BYTES) == large]
    low = np.array([math.nan if p.lo_s is None else p.lo_s for p in sel], dtype=np.float64)
    high = np.array([math.nan if p.hi_s is None else p.hi_s for p in sel], dtype=np.float64)
    measured = np.array([p.row.time_s for p in sel], dtype=np.float64)
    return int(np.isfinite(low).sum()), interval_coverage(measured, low, high)


def csv_rows(preds: Sequence[NcclPrediction]) -> tuple[list[str], list[list[object]]]:
    """``predictions.csv``: columns and one line per row (times to 9 significant digits, the error to 6)."""
    cols = ["nodes", "gpus", "size_bytes", "measured_s", "predicted_s", "predicted_lo_s", "predicted_hi_s", "error",
            "algorithm", "protocol", "role", "extrapolates"]
    body: list[list[object]] = []
    for p in preds:
        r = p.row
        err: object = "" if p.role == "single" else float(f"{p.error:.6g}")
        lo: object = "" if p.lo_s is None else float(f"{p.lo_s:.9g}")
        hi: object = "" if p.hi_s is None else float(f"{p.hi_s:.9g}")
        body.append([r.nodes, r.gpus, r.size_bytes, float(f"{r.time_s:.9g}"), float(f"{p.predicted_s:.9g}"), lo, hi, err,
                     p.algorithm, p.protocol, p.role, p.extrapolates])
    return cols, body


def pct_text(x: float) -> str:
    """A share as the tables print it: ``12.3 %``, an em dash for NaN."""
    return "—" if math.isnan(x) else f"{100 * x:.1f} %"


def summary_table(preds: Sequence[NcclPrediction]) -> list[list[str]]:
    """Rows ``[role, GPUs (nodes), n, median/p90/geomean ≥ 1 MiB, n, median/p90/geomean < 1 MiB]``."""
    table = []
    groups = sorted({(p.role, p.row.gpus, p.row.nodes) for p in preds if p.role != "single"},
                    key=lambda k: (k[0] != "fit", k[1]))
    for role, gpus, nodes in [*groups, ("held_out", 0, 0), ("fit", 0, 0)]:
        sel = [p for p in preds if p.role == role and (gpus == 0 or (p.row.gpus, p.row.nodes) == (gpus, nodes))]
        if not sel:
            continue
        big = [p.error for p in sel if p.row.size_bytes >= LARGE_BYTES]
        small = [p.error for p in sel if p.row.size_bytes < LARGE_BYTES]
        label = f"{gpus} ({nodes} x {gpus // nodes})" if gpus else "all"
        table.append([role, label, str(len(big)), *(pct_text(x) for x in abs_error_stats(big)),
                      str(len(small)), *(pct_text(x) for x in abs_error_stats(small))])
    return table


def per_size_table(preds: Sequence[NcclPrediction]) -> tuple[list[str], list[list[str]]]:
    """Signed error per size (rows) and GPU count (columns), with the candidate NCCL picks."""
    scored = [p for p in preds if p.role != "single"]
    shapes = sorted({(p.row.gpus, p.row.nodes) for p in scored})
    sizes = sorted({p.row.size_bytes for p in scored})
    cell = {(p.row.size_bytes, p.row.gpus, p.row.nodes): p for p in scored}
    header = ["size", *(f"{g} GPUs{' (held out)' if any(p.role == 'held_out' for p in scored if (p.row.gpus, p.row.nodes) == (g, n)) else ''}"
                        for g, n in shapes)]
    body = []
    for s in sizes:
        line = [size_text(s)]
        for g, n in shapes:
            p = cell.get((s, g, n))
            line.append("" if p is None else f"{100 * p.error:+.1f} % {p.algorithm}/{p.protocol}")
        body.append(line)
    return header, body


def size_text(size: int) -> str:
    """A message size in the largest binary unit that divides it: ``8 B``, ``256 KiB``, ``1 GiB``."""
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 2**k and size % 2**k == 0:
            return f"{size >> k} {unit}"
    return f"{size} B"


def markdown(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    """A markdown table of ``header`` and the ``body`` rows."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines) + "\n"


SUMMARY_HEADER = ["rows", "GPUs (nodes x per node)", "n ≥ 1 MiB", "median", "p90", "geomean",
                  "n < 1 MiB", "median", "p90", "geomean"]
