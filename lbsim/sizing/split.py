"""Splitting a global batch of X samples into integer per-worker batches.

Model: worker i gets ``x_i = clip(lam * w_i, lo_i, hi_i)`` with the water level ``lam`` chosen
so that ``sum x_i = X`` (weights ``w_i > 0``, e.g. predicted sample speeds; bounds from a
minimum batch and each device's memory cap). The real-valued split is then integerised by
largest remainders, so the integers still sum to exactly X, stay within the bounds and keep the
order of the weights (a worker with a larger weight never gets fewer samples, unless a cap
forces it).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class InfeasibleSplit(ValueError):
    """The global batch cannot be split within the workers' bounds."""


def even_split(total: int, workers: int) -> tuple[int, ...]:
    """``total`` split as evenly as possible; the first ``total % workers`` get one more."""
    base, extra = divmod(total, workers)
    return tuple(base + (1 if i < extra else 0) for i in range(workers))


def proportional_split(
    total: int,
    weights: Sequence[float] | np.ndarray,
    caps: Sequence[int] | np.ndarray,
    *,
    min_batch: int = 1,
) -> tuple[int, ...]:
    """Split ``total`` in proportion to ``weights`` within ``[min_batch, caps_i]``.

    Raises :class:`InfeasibleSplit` when ``sum(caps) < total`` or ``n * min_batch > total``.
    """
    w = np.asarray(weights, dtype=np.float64)
    hi = np.asarray(caps, dtype=np.float64)
    n = len(w)
    if n == 0 or len(hi) != n:
        raise ValueError("weights and caps must be non-empty and of equal length")
    if np.any(~np.isfinite(w)) or np.any(w <= 0):
        raise ValueError(f"weights must be finite and > 0, got {w.tolist()}")
    lo = np.minimum(np.full(n, float(min_batch)), hi)
    if hi.sum() < total:
        raise InfeasibleSplit(f"global batch {total} exceeds the sum of memory caps {int(hi.sum())}")
    if lo.sum() > total:
        raise InfeasibleSplit(f"global batch {total} is below {n} workers x min batch {min_batch}")
    real = _water_fill(float(total), w, lo, hi)
    return _integerise(total, real, w, lo, hi)


def _water_fill(total: float, w: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Real x = clip(lam*w, lo, hi) with sum x = total, by bisection on lam (monotone)."""
    lam_lo, lam_hi = 0.0, float(np.max(hi / w)) * 2.0 + 1.0
    for _ in range(200):
        lam = 0.5 * (lam_lo + lam_hi)
        if np.clip(lam * w, lo, hi).sum() < total:
            lam_lo = lam
        else:
            lam_hi = lam
    return np.clip(lam_hi * w, lo, hi)


def _integerise(total: int, real: np.ndarray, w: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[int, ...]:
    x = np.floor(real + 1e-9).astype(np.int64)
    x = np.clip(x, np.ceil(lo).astype(np.int64), hi.astype(np.int64))
    short = total - int(x.sum())
    frac = real - x
    # Hand out missing units by largest remainder, then larger weight, then lower index;
    # take back surplus (rare, from rounding) from the smallest remainders first.
    order = sorted(range(len(x)), key=lambda i: (-frac[i], -w[i], i))
    while short > 0:
        progressed = False
        for i in order:
            if short == 0:
                break
            if x[i] < hi[i]:
                x[i] += 1
                short -= 1
                progressed = True
        if not progressed:
            raise InfeasibleSplit("cannot place the remaining samples within the caps")
    for i in reversed(order):
        if short == 0:
            break
        if x[i] > lo[i]:
            x[i] -= 1
            short += 1
    return tuple(int(v) for v in x)
