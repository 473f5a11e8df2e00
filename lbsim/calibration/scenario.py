"""Fitted figures as scenario data: ``fit.yaml`` and the tiny per-row scenarios the engine predicts with.

Keys (``docs/scenarios.md``): per worker group ``compute_curve`` (with ``t0_s``/``samples_per_s``
for the schemes' sizing), ``bandwidth_gbps`` + ``nic_latency_s`` (the node's NIC),
``intra_bandwidth_gbps`` + ``intra_latency_s`` (a hop inside the node), ``shared_node_slowdown``,
``jitter_cv`` (only when the compute noise is not 0), ``nics_per_node`` (only when one NIC per GPU
was fitted: ``bandwidth_gbps`` is then each NIC's);
``workload.overlap`` and ``workload.gradient_bytes``; ``network.algorithm``; ``calibration`` (the fit
placements, the fit domain and the interval: :mod:`lbsim.scenario.calibration_config`, in ``fit.yaml``
only). A placement becomes
one group per node (``count = workers_per_node = g_k``), so ``1212`` is four groups.

Without noise every iteration of a BSP run is the same, so :data:`UPDATES` = 3 iterations give the
step exactly. With noise the prediction is the mean over :data:`NOISY_UPDATES` iterations (seeded:
deterministic): its standard error is about ``sd(step) / sqrt(NOISY_UPDATES)`` ≤ c·t/14, 0.35 % of
the step for c = 0.05 — far below the errors being measured.
"""

from __future__ import annotations

from typing import Any

from lbsim.calibration.fit import Calibration
from lbsim.calibration.measured import placement_label
from lbsim.scenario import catalog

UPDATES = 3  # iterations per prediction: no noise, so every iteration of a BSP run is the same
NOISY_UPDATES = 200  # iterations per prediction with compute noise: a mean of many rounds (docstring)


def _g(x: float) -> float:
    return float(f"{x:.6g}")


def default_instance(max_node_size: int) -> str:
    """A catalog GPU instance with room for ``max_node_size`` workers per node (every figure is overridden)."""
    fits = [(inst.gpus_per_node, name) for name, inst in catalog.INSTANCES.items()
            if inst.kind == "gpu" and inst.gpus_per_node >= max_node_size]
    if not fits:
        raise ValueError(f"no catalog instance holds {max_node_size} GPUs per node")
    return min(fits)[1]


def group_figures(cal: Calibration, max_batch: int) -> dict[str, Any]:
    """The fitted figures as a worker group's overrides: the compute curve, the links, the shared-node slowdown."""
    f = cal.figures
    return {
        "t0_s": _g(cal.curve.t0_s),
        "samples_per_s": _g(cal.curve.samples_per_s),
        "max_batch": int(max_batch),
        "compute_curve": [[_g(b), _g(t)] for b, t in cal.curve.points],
        "bandwidth_gbps": _g(f.nic_bandwidth_gbps),
        "nic_latency_s": _g(f.nic_latency_s),
        "intra_bandwidth_gbps": _g(f.intra_bandwidth_gbps),
        "intra_latency_s": _g(f.intra_latency_s),
        "shared_node_slowdown": _g(f.shared_node_slowdown),
        **({"jitter_cv": _g(f.jitter_cv)} if f.jitter_cv > 0 else {}),
        **({"nics_per_node": int(f.nics_per_node)} if f.nics_per_node > 1 else {}),
    }


def fit_data(cal: Calibration, instance: str, max_batch: int) -> dict[str, Any]:
    """``fit.yaml``: the fitted figures as a scenario fragment (set ``count``/``workers_per_node``)."""
    f = cal.figures
    return {
        "workload": {"gradient_bytes": int(cal.gradient_bytes),
                     "overlap": {"hide_share": _g(f.overlap.hide_share), "tail_share": _g(f.overlap.tail_share)}},
        "cluster": {"groups": [{"instance": instance, **group_figures(cal, max_batch)}]},
        "network": {"name": "ring_allreduce", "alpha_s": _g(f.nic_latency_s), "algorithm": f.algorithm,
                    "chunk_share": _g(f.chunk_share), "ring_latency": f.ring_latency},
        **({"calibration": calibration_data(cal)} if cal.domain is not None else {}),
    }


def calibration_data(cal: Calibration) -> dict[str, Any]:
    """The ``calibration:`` section (fit placements, domain, interval), for ``lbsim run`` to report."""
    assert cal.domain is not None
    out: dict[str, Any] = {"fit_placements": [placement_label(p) for p in cal.fit_placements],
                           "domain": cal.domain.data()}
    if cal.interval is not None:
        iv = cal.interval
        lo, hi = iv.bounds(1.0)
        out["interval"] = {"nominal": _g(iv.nominal), "low_factor": _g(lo), "high_factor": _g(hi), "folds": iv.folds}
    return out


def row_scenario(cal: Calibration, instance: str, max_batch: int, placement: tuple[int, ...], local_bsz: int) -> dict[str, Any]:
    """A BSP run of ``placement`` at ``local_bsz`` per GPU with the fitted figures (no contention)."""
    fit = fit_data(cal, instance, max_batch)
    group = fit["cluster"]["groups"][0]
    return {
        "name": f"calibrate_{placement_label(placement)}_b{local_bsz}",
        "seed": 1,
        "workload": {**fit["workload"], "global_batch": int(sum(placement) * local_bsz), "updates": NOISY_UPDATES if cal.figures.jitter_cv > 0 else UPDATES},
        "cluster": {"groups": [{**group, "count": g, "workers_per_node": g} for g in placement]},
        "network": fit["network"],
        "scheme": {"name": "bsp"},
    }
