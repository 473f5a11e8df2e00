"""Waiting for the slowest replica: the expected synchronous step under lognormal compute noise.

A synchronous step starts every worker together and reduces when the **last** one is done. With
natural per-iteration compute noise (a group's ``jitter_cv`` = c: worker ``w``'s compute is
``t_w · X_w``, ``X_w`` lognormal with mean 1 and coefficient of variation c, independent across
workers and iterations; ``lbsim.contention.model``), the engines' step is::

    M       = max_w t_w · X_w                      # the barrier waits for the slowest replica
    step    = M + exposed_comm_s(C, M, overlap)    # the all-reduce hides under the last one's backward

and its mean over many rounds is, exactly (``σ² = log(1 + c²)``, ``Φ`` the standard normal CDF)::

    F(m)    = P(M ≤ m) = Π_w Φ((log(m / t_w) + σ²/2) / σ)
    E[M]    = ∫ (1 − F(m)) dm
    E[step] = E[M] + C                                              (no overlap)
    E[step] = E[M] + τ·C + h · ∫_0^K F(m) dm,   K = (1 − τ)·C / h   (overlap h = hide_share, τ = tail_share)

since ``max(τC, C − hM) = τC + h·max(0, K − M)`` and ``E[max(0, K − M)] = ∫_0^K F``. For
identical workers ``E[M] ≈ t·(1 + c·E[max of n standard normals])``: the wait grows with n.
The integrals are taken by the trapezoid rule on a grid of :data:`GRID` points in log m over
±:data:`Z_SPAN` standard deviations around the slowest worker's median (beyond it F is 0 or 1 to
~1e-15), so the result is deterministic and within ~1e-4 (relative, for c ≤ 0.5) of the exact value. With c = 0 the
formulas reduce to ``M = max_w t_w`` exactly (returned without the grid).

:func:`expected_step_s` is what ``lbsim calibrate`` fits with; the engine simulates the same
thing, and its mean over many rounds converges to it (``tests/test_replica_wait.py``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from lbsim.network.overlap import OverlapParams, exposed_comm_rows_s

GRID = 801
Z_SPAN = 9.0


@dataclass(frozen=True)
class MaxDistribution:
    """The CDF of ``M / t`` on a grid, for workers with relative compute ``factors`` (one per worker)."""

    u: np.ndarray  # grid of m / t
    cdf: np.ndarray  # F(u)
    cum: np.ndarray  # ∫_{u[0]}^{u} F: trapezoid running sum
    mean: float  # E[M] / t

    def below(self, k: np.ndarray) -> np.ndarray:
        """``∫_0^k F(u) du`` for each ``k`` (0 below the grid, linear in k above it: F = 1 there)."""
        k = np.asarray(k, dtype=np.float64)
        inside = np.interp(k, self.u, self.cum)  # F is ~0 below u[0] and the grid is fine: linear is enough
        return np.where(k > self.u[-1], self.cum[-1] + (k - self.u[-1]), np.where(k < self.u[0], 0.0, inside))


def max_distribution(factors: Sequence[float], cv: float) -> MaxDistribution:
    """``M / t = max_w factors[w] · X_w`` for lognormal ``X_w`` of mean 1 and CV ``cv`` > 0."""
    if cv <= 0:
        raise ValueError(f"cv must be > 0 (cv = 0 has no distribution: M = max factor), got {cv}")
    return _max_distribution(tuple(sorted(Counter(float(a) for a in factors).items())), float(cv))


@lru_cache(maxsize=512)  # a fit asks for the same (factors, cv) many times (finite differences)
def _max_distribution(groups: tuple[tuple[float, int], ...], cv: float) -> MaxDistribution:
    from scipy.special import ndtr  # the standard normal CDF, vectorised

    s2 = math.log1p(cv * cv)
    sd = math.sqrt(s2)
    top = max(v for v, _ in groups)
    log_u = math.log(top) - s2 / 2 + sd * np.linspace(-Z_SPAN, Z_SPAN, GRID)
    u = np.exp(log_u)
    log_cdf = np.zeros(GRID)
    for v, k in groups:
        log_cdf += k * np.log(np.maximum(ndtr((log_u - math.log(v) + s2 / 2) / sd), 1e-300))
    cdf = np.exp(log_cdf)
    du = np.diff(u)
    cum = np.concatenate(([0.0], np.cumsum(du * (cdf[1:] + cdf[:-1]) / 2)))
    mean = float(u[0] + np.sum(du * ((1 - cdf[1:]) + (1 - cdf[:-1])) / 2))
    for arr in (u, cdf, cum):
        arr.flags.writeable = False  # shared through the cache
    return MaxDistribution(u, cdf, cum, mean)


def expected_step_s(compute_s: np.ndarray, comm_s: np.ndarray, dist: MaxDistribution | None, top_factor: float,
                    overlap: OverlapParams) -> np.ndarray:
    """Mean step (s) per row: ``compute_s`` = t(b) alone, ``comm_s`` = the all-reduce, ``dist`` of ``M / t``.

    ``dist`` None means no noise: ``M = top_factor · t`` exactly (``exposed_comm_s`` as the engines do).
    """
    t = np.asarray(compute_s, dtype=np.float64)
    c = np.asarray(comm_s, dtype=np.float64)
    if dist is None:
        m = t * top_factor
        return m + exposed_comm_rows_s(c, m, overlap)
    if not overlap.enabled:
        return t * dist.mean + c
    h, tau = overlap.hide_share, overlap.tail_share
    k = (1.0 - tau) * c / h
    return t * dist.mean + tau * c + h * t * dist.below(k / t)
