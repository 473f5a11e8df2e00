"""What ``lbsim run`` says about a calibrated scenario: the mean iteration, its interval, extrapolation.

A scenario carrying ``lbsim calibrate``'s ``calibration:`` section (:mod:`lbsim.scenario.calibration_config`)
gets one line after its table: the run's mean iteration time with the calibration's nominal interval
``[mean · low_factor, mean · high_factor]`` (leave-one-placement-out residuals of the fit,
:mod:`lbsim.calibration.interval`), and — when the scenario's nodes or per-GPU batch lie outside what
the fit placements exercised — which way it extrapolates. Node sizes are the scenario's own (each
worker's ``workers_per_node`` node); the batch is ``global_batch / workers``.
"""

from __future__ import annotations

from typing import Any


def calibrated_run_line(scenario: Any, summary: dict[str, Any]) -> str | None:
    """The line for a calibrated scenario (None when the scenario carries no ``calibration`` section)."""
    info = getattr(scenario, "calibration", None)
    if info is None:
        return None
    from lbsim.scenario.resolve import resolve_workers

    workers = resolve_workers(scenario)
    sizes: dict[int, int] = {}
    for w in workers:
        sizes[w.node] = w.node_size
    node_sizes = tuple(sizes[k] for k in sorted(sizes))
    local_bsz = scenario.workload.global_batch / max(len(workers), 1)
    mean = summary.get("mean_iteration_s")
    fit = ",".join(info.fit_placements)
    text = f"calibrated on {fit}: mean iteration {mean:.4g} s" if isinstance(mean, (int, float)) else \
        f"calibrated on {fit}: no iteration to report"
    if info.interval is not None and isinstance(mean, (int, float)):
        iv = info.interval
        text += (f", {iv.nominal:.0%} interval {mean * iv.low_factor:.4g}–{mean * iv.high_factor:.4g} s "
                 f"(leave-one-placement-out over {iv.folds} fit placements)")
    reasons = info.reasons(node_sizes, local_bsz)
    label = "".join(map(str, node_sizes)) if all(g <= 9 for g in node_sizes) else "-".join(map(str, node_sizes))
    if reasons:
        text += (f"; EXTRAPOLATES ({', '.join(reasons)}): placement {label} at {local_bsz:g} per GPU lies outside "
                 "the fit placements' range, the interval may be too narrow")
    else:
        text += f"; placement {label} at {local_bsz:g} per GPU lies within the fit placements' range"
    return text
