"""Predictions and error tables of ``lbsim calibrate-nccl``: per row, per node count, per size class.

Error of a row: ``e = predicted / measured − 1`` (positive: lbsim too slow). A table row gives the
median and p90 of ``|e|`` and the geomean ``exp(mean log(1 + |e|)) − 1`` over its rows. Sizes are
split at 1 MiB: below it a call is latency-bound (a few to ~100 µs, where a run's jitter is a large
share), at and above it bandwidth-bound; both are reported. Roles: ``fit`` (a node count the
figures were fitted on), ``held_out`` (never seen by the fit), ``single`` (one GPU: no
communication, predicted 0, not scored).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lbsim.network.nccl import NcclFigures, nccl_pick
from lbsim.calibration.nccl_tests import NcclRow

LARGE_BYTES = 2**20


@dataclass(frozen=True)
class NcclPrediction:
    row: NcclRow
    predicted_s: float
    algorithm: str
    protocol: str
    role: str

    @property
    def error(self) -> float:
        return self.predicted_s / self.row.time_s - 1.0


def predict_rows(fig: NcclFigures, rows: Sequence[NcclRow], fit_nodes: Sequence[int]) -> list[NcclPrediction]:
    out = []
    for r in rows:
        if r.gpus <= 1:
            out.append(NcclPrediction(r, 0.0, "", "", "single"))
            continue
        p = nccl_pick(fig, r.gpus, r.nodes, r.size_bytes)
        out.append(NcclPrediction(r, p.time_s, p.algorithm, p.protocol, "fit" if r.nodes in fit_nodes else "held_out"))
    return out


def csv_rows(preds: Sequence[NcclPrediction]) -> tuple[list[str], list[list[object]]]:
    cols = ["nodes", "gpus", "size_bytes", "measured_s", "predicted_s", "error", "algorithm", "protocol", "role"]
    body: list[list[object]] = []
    for p in preds:
        r = p.row
        err: object = "" if p.role == "single" else float(f"{p.error:.6g}")
        body.append([r.nodes, r.gpus, r.size_bytes, float(f"{r.time_s:.9g}"), float(f"{p.predicted_s:.9g}"), err,
                     p.algorithm, p.protocol, p.role])
    return cols, body


def stats(errors: Sequence[float]) -> tuple[float, float, float]:
    """(median, p90, geomean) of ``|e|``; NaNs when empty."""
    if not errors:
        return (math.nan, math.nan, math.nan)
    a = np.abs(np.asarray(errors, dtype=float))
    return (float(np.median(a)), float(np.quantile(a, 0.9)), float(np.expm1(np.mean(np.log1p(a)))))


def _pct(x: float) -> str:
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
        table.append([role, label, str(len(big)), *(_pct(x) for x in stats(big)),
                      str(len(small)), *(_pct(x) for x in stats(small))])
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
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 2**k and size % 2**k == 0:
            return f"{size >> k} {unit}"
    return f"{size} B"


def markdown(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines) + "\n"


SUMMARY_HEADER = ["rows", "GPUs (nodes x per node)", "n ≥ 1 MiB", "median", "p90", "geomean",
                  "n < 1 MiB", "median", "p90", "geomean"]
