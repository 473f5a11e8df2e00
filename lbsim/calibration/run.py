"""``lbsim calibrate``: read measurements, fit, write ``fit.yaml``, predict every row with the engine.

The engine is passed in (``simulate_mean_s``: scenario data -> mean iteration time), so this core
module imports no engine; the CLI hands it the simulator. Every row's ``predicted_step_time`` is
the mean iteration time of a BSP simulation of that placement and batch with the fitted figures
(:func:`lbsim.calibration.scenario.row_scenario`); the fit's own formulas only steer the fit.
Outputs: ``fit.yaml`` (scenario keys, the ``calibration`` section — the interval and the fit
domain, which ``lbsim run`` reports — and diagnostics as comments) and ``predictions.csv`` (every
input row, then ``predicted_step_time``, ``predicted_low`` / ``predicted_high`` (the nominal
interval, :mod:`lbsim.calibration.interval`; empty when there are fewer than two folds),
``relative_error`` = predicted / measured − 1 (positive: lbsim too slow), ``role``: ``single``
(placement 1, fits t(b)), ``fit`` (a fit placement) or ``held_out``, and ``extrapolates``: why
the row lies outside the fit domain (``nodes``, ``gpus_per_node``, ``batch``, joined by ``+``;
empty: inside)).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from lbsim.calibration.fit import DEFAULT_CHUNK_SHARE, Calibration, calibrate_rows, intra_bounds_for
from lbsim.calibration.measured import Row, placement_label, role_of
from lbsim.calibration.scenario import default_instance, fit_data, row_scenario
from lbsim.calibration.select import AUTO, JitterChoice, calibrate_auto, with_interval
from lbsim.errors import InputError
from lbsim.metrics.writers import atomic_write_text, write_csv
from lbsim.scenario import catalog

SimulateFn = Callable[[dict[str, Any]], float]


@dataclass(frozen=True)
class Prediction:
    """One row's simulated mean step time, its role, its interval and why it extrapolates."""

    row: Row
    predicted_s: float
    role: str
    low_s: float | None = None  # the nominal interval (None: no interval)
    high_s: float | None = None
    extrapolates: tuple[str, ...] = ()

    @property
    def relative_error(self) -> float:
        """``predicted / measured − 1``."""
        return self.predicted_s / self.row.step_time_s - 1.0


def check_instance(instance: str | None, rows: Sequence[Row]) -> str:
    """The catalog instance the rows ran on: ``instance`` if it holds their largest node, else the default for
    that node size; InputError naming the option otherwise."""
    biggest = max(max(r.placement) for r in rows)
    if instance is None:
        try:
            return default_instance(biggest)
        except ValueError:
            raise InputError("placement", f"a node uses {biggest} GPUs, more than any catalog instance holds "
                                          f"(`lbsim catalog`)") from None
    inst = catalog.INSTANCES.get(instance)
    if inst is None:
        raise InputError("--instance", f"unknown instance {instance!r}; valid: {', '.join(sorted(catalog.INSTANCES))}")
    if inst.kind == "gpu" and inst.gpus_per_node < biggest:
        raise InputError("--instance", f"{instance} has {inst.gpus_per_node} GPU(s) per node; the measurements "
                                       f"use up to {biggest} on one node")
    return instance


def predict(cal: Calibration, rows: Sequence[Row], instance: str, simulate_mean_s: SimulateFn,
            progress: Callable[[float], None] | None = None) -> list[Prediction]:
    """Every row predicted by simulating its placement and batch under the calibration (each distinct pair once)."""
    max_batch = max(r.local_bsz for r in rows)
    cache: dict[tuple[tuple[int, ...], int], float] = {}
    out = []
    for i, r in enumerate(rows):
        key = (r.placement, r.local_bsz)
        if key not in cache:
            cache[key] = simulate_mean_s(row_scenario(cal, instance, max_batch, r.placement, r.local_bsz))
        pred = cache[key]
        low, high = cal.interval.bounds(pred) if cal.interval is not None else (None, None)
        reasons = cal.domain.reasons(r.placement, r.local_bsz) if cal.domain is not None else ()
        out.append(Prediction(r, pred, role_of(r, cal.fit_placements), low, high, reasons))
        if progress is not None:
            progress((i + 1) / len(rows))
    return out


def fit_yaml_text(cal: Calibration, instance: str, max_batch: int, source: str, floor_text: str | None = None) -> str:
    """``fit.yaml``: comment lines on how each figure was chosen and how well it fits, then the scenario."""
    f = cal.figures
    lines = [
        f"# lbsim calibrate {source}: figures fitted on placements "
        f"{','.join(placement_label(p) for p in cal.fit_placements)} (t(b) from the single-GPU rows).",
        f"# compute curve: {'affine' if cal.curve.affine else 'table'}; shared_node_slowdown from "
        f"{'step - sync_time' if cal.slowdown_from_sync else 'the step-time fit'}; all-reduce algorithm "
        f"{f.algorithm} (fit rms log error per algorithm: "
        + ", ".join(f"{a} {v:.4f}" for a, v in cal.residuals.items()) + ").",
        f"# NICs per node: {f.nics_per_node} (fit rms log error per NIC count: "
        + ", ".join(f"{n} {v:.4f}" for n, v in cal.nic_residuals) + "; one per node kept unless one per GPU "
        "fits more than 2 % better).",
        f"# geomean |error| of the fitted model over the fit placements' multi-GPU rows: {cal.fit_error:.2%}.",
        f"# intra-node link bounded by {inst_bounds_text(instance)}; pipeline chunk share {f.chunk_share:.4g} "
        "(not fitted: NCCL/DDP default or --chunk-share).",
        "# Merge into a scenario; give each group its count and workers_per_node.",
    ]
    if f.jitter_cv > 0:
        lines.insert(-1, f"# compute noise jitter_cv {f.jitter_cv:.4g} (the replicas' wait; "
                         "predictions: mean of many seeded iterations).")
    if cal.noise is not None:
        lines.insert(-1, f"# {cal.noise.text()}.")
    if floor_text is not None:
        lines.insert(-1, f"# {floor_text} (lbsim.calibration.repeatability).")
    if cal.interval is not None:
        lines.insert(-1, f"# {cal.interval.text()}.")
    if not any(len(p) > 1 for p in cal.fit_placements):
        lines.append("# WARNING: no fit placement spans two nodes: the NIC figures are not informed by the data.")
    if not any(max(p) > 1 for p in cal.fit_placements):
        lines.append("# WARNING: no fit placement shares a node: the intra-node figures are not informed by the data.")
    body = yaml.safe_dump(fit_data(cal, instance, max_batch), sort_keys=False, default_flow_style=None, width=120)
    return "\n".join(lines) + "\n" + body


def inst_bounds_text(instance: str) -> str:
    """The intra-node link's bounds on ``instance`` in words."""
    b = intra_bounds_for(instance)
    return f"{instance}: <= {b.max_gbps:g} Gbit/s, <= {b.max_latency_s:g} s per hop"


def write_predictions(path: Path, preds: Sequence[Prediction]) -> None:
    """``predictions.csv``: every measured column, the prediction, its interval, the error, role and flags."""
    rows = [p.row for p in preds]
    has_sync = any(r.sync_time_s is not None for r in rows)
    extra_cols = [k for k, _ in rows[0].extra] if rows and rows[0].extra else []
    cols = ["placement", "local_bsz", "step_time", *(["sync_time"] if has_sync else []), *extra_cols,
            "predicted_step_time", "predicted_low", "predicted_high", "relative_error", "role", "extrapolates"]
    out = []
    for p in preds:
        r = p.row
        extra = dict(r.extra)
        out.append([r.label, r.local_bsz, r.step_time_s, *([r.sync_time_s] if has_sync else []),
                    *(extra.get(k, "") for k in extra_cols), float(f"{p.predicted_s:.9g}"),
                    *("" if x is None else float(f"{x:.9g}") for x in (p.low_s, p.high_s)),
                    float(f"{p.relative_error:.6g}"), p.role, "+".join(p.extrapolates)])
    write_csv(path, cols, out)


def calibrate_to(rows: Sequence[Row], fit_placements: Sequence[tuple[int, ...]], gradient_bytes: int, out: Path,
                 simulate_mean_s: SimulateFn, *, instance: str | None = None, source: str = "",
                 chunk_share: float = DEFAULT_CHUNK_SHARE, jitter_cv: JitterChoice = AUTO,
                 progress: Callable[[float], None] | None = None,
                 floor_text: str | None = None) -> tuple[Calibration, list[Prediction]]:
    """Fit, write ``out/fit.yaml``, simulate every row, write ``out/predictions.csv``.

    ``floor_text``: the input's repeatability line (:func:`~lbsim.calibration.repeatability.held_out_floor_text`),
    written to ``fit.yaml`` as a comment.

    ``jitter_cv``: the compute noise — ``"auto"`` (kept where cross-validation on the fit placements
    supports it: :mod:`lbsim.calibration.select`), None (always fitted) or a fixed value.
    """
    inst = check_instance(instance, rows)

    def part(lo: float, hi: float) -> Callable[[float], None] | None:
        return None if progress is None else (lambda f: progress(lo + (hi - lo) * f))

    if jitter_cv == AUTO:
        cal = calibrate_auto(rows, fit_placements, gradient_bytes, intra_bounds=intra_bounds_for(inst),
                             chunk_share=chunk_share, progress=part(0.0, 0.3))
    else:
        cal = calibrate_rows(rows, fit_placements, gradient_bytes, intra_bounds=intra_bounds_for(inst),
                             chunk_share=chunk_share, jitter_cv=jitter_cv, progress=part(0.0, 0.3))
    cal = with_interval(cal, rows, intra_bounds=intra_bounds_for(inst), chunk_share=chunk_share)
    preds = predict(cal, rows, inst, simulate_mean_s, part(0.3, 1.0))
    out.mkdir(parents=True, exist_ok=True)
    max_batch = max(r.local_bsz for r in rows)
    atomic_write_text(out / "fit.yaml", fit_yaml_text(cal, inst, max_batch, source, floor_text))
    write_predictions(out / "predictions.csv", preds)
    return cal, preds
