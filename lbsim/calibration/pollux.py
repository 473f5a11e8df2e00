"""Pollux's own throughput model (adaptdl ``goodput.py``), fitted on the same rows, for comparison.

Re-implemented from Qiao et al., OSDI'21 §3.2 and adaptdl's ``goodput.py`` (``PerfParams``,
``_predict_accum_time``, ``_predict_network_time``, ``_predict_log_optim_time``,
``fit_perf_params``)::

    T_compute(b)  = α_c + β_c · b
    T_network     = 0 (one replica);  α_r + β_r · max(n − 2, 1e-8) (one node);  α_n + β_n · max(n − 2, 1e-8) (several)
    T_step        = (T_compute^γ + T_network^γ)^(1/γ)          (γ ≥ 1: the overlap "γ-norm")

fitted, as adaptdl does, by minimising RMSLE(T_compute vs the measured compute time) + RMSLE(T_step
vs the measured step time) + 1e-3 (γ − 1)² over the single-GPU rows and the fit placements' rows
(measured compute time = ``step − sync_time`` where given, else the single-GPU rows only), with
α, β ≥ 1e-8, 1 ≤ γ ≤ 10, and adaptdl's rule that the inter-node figures are at least the
intra-node ones (``α_n ≥ α_r``, ``β_n ≥ β_r``: here by fitting the non-negative excesses).
Parameters the fit rows cannot inform (no multi-node row: α_n, β_n) stay at their start.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lbsim.calibration.measured import Row


@dataclass(frozen=True)
class PolluxParams:
    """Pollux's figures: compute ``α_c, β_c``, one-node network ``α_r, β_r``, multi-node ``α_n, β_n``, overlap ``γ``."""

    alpha_c: float
    beta_c: float
    alpha_r: float
    beta_r: float
    alpha_n: float
    beta_n: float
    gamma: float


def _arrays(rows: Sequence[Row]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    nodes = np.array([len(r.placement) for r in rows], dtype=np.float64)
    replicas = np.array([r.gpus for r in rows], dtype=np.float64)
    bsz = np.array([r.local_bsz for r in rows], dtype=np.float64)
    return nodes, replicas, bsz


def _predict(p: PolluxParams, nodes: np.ndarray, replicas: np.ndarray, bsz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    compute = p.alpha_c + p.beta_c * bsz
    idx = (nodes > 1).astype(int) + (replicas > 1).astype(int)
    alpha = np.array([0.0, p.alpha_r, p.alpha_n])[idx]
    beta = np.array([0.0, p.beta_r, p.beta_n])[idx]
    network = alpha + beta * np.maximum(replicas - 2, 1e-8)
    g = p.gamma
    step = (compute ** g + network ** g) ** (1.0 / g)
    return compute, step


def predict(p: PolluxParams, rows: Sequence[Row]) -> np.ndarray:
    """``T_step`` of every row under ``p`` (module docstring)."""
    return _predict(p, *_arrays(rows))[1]


def _params(x: np.ndarray) -> PolluxParams:
    e = np.exp(x[:6])
    return PolluxParams(e[0], e[1], e[2], e[3], e[2] + e[4], e[3] + e[5], 1.0 + 9.0 / (1.0 + np.exp(-x[6])))


def fit(rows: Sequence[Row], fit_placements: Sequence[tuple[int, ...]]) -> PolluxParams:
    """Pollux's model fitted on the single-GPU rows and the fit placements' rows (module docstring)."""
    from scipy.optimize import minimize

    use = [r for r in rows if r.placement == (1,) or r.placement in set(fit_placements)]
    nodes, replicas, bsz = _arrays(use)
    step = np.log(np.array([r.step_time_s for r in use]))
    has_compute = np.array([r.placement == (1,) or (r.sync_time_s is not None and r.step_time_s > r.sync_time_s)
                            for r in use])
    compute = np.log(np.array([r.step_time_s - (r.sync_time_s or 0.0) if r.placement != (1,) else r.step_time_s
                               for r in use]))

    def objective(x: np.ndarray) -> float:
        p = _params(x)
        pc, ps = _predict(p, nodes, replicas, bsz)
        err1 = np.sqrt(np.mean((np.log(pc[has_compute]) - compute[has_compute]) ** 2))
        err2 = np.sqrt(np.mean((np.log(ps) - step) ** 2))
        return float(err1 + err2 + 1e-3 * (p.gamma - 1.0) ** 2)

    x0 = np.array([np.log(1e-1), np.log(1e-2)] * 3 + [-4.0])  # adaptdl's start: 0.1, 0.01; gamma ~1
    best = None
    for start in (x0, x0 + np.array([-2, -2, -2, -2, -2, -2, 0.0])):
        res = minimize(objective, start, method="L-BFGS-B",
                       bounds=[(np.log(1e-8), np.log(1e3))] * 6 + [(-10.0, 10.0)])
        if best is None or res.fun < best.fun:
            best = res
    assert best is not None
    return _params(best.x)
