"""Equalising predicted finish times: ``min max_i t_i(x_i)`` s.t. ``sum x_i = X``, bounds.

Each worker's predicted compute time is affine in its batch, ``t_i(x) = a_i + b_i x`` with
``a_i >= 0`` and ``b_i > 0`` (a GPU's fixed overhead ``t0`` and inverse throughput; a CPU has
``a = 0`` and ``b = 1 / v``). Because every ``t_i`` increases, the optimum gives every worker
that is not at a bound the same finish time T (water-filling):
``x_i(T) = clip((T - a_i) / b_i, lo_i, hi_i)`` with T chosen so that ``sum x_i(T) = X``.

Integers: start from ``floor(x_i(T))`` and hand each remaining sample to the worker whose finish
time after taking it is smallest (greedy on the makespan, ties to the smaller b, then the lower
index) — for
increasing ``t_i`` this minimises the integer makespan.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np

from lbsim.sizing.split import InfeasibleSplit


def equalize_affine(
    total: int,
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    caps: Sequence[int] | np.ndarray,
    *,
    min_batch: int = 1,
) -> tuple[int, ...]:
    """Integer batches summing to ``total`` that minimise the largest ``a_i + b_i x_i``."""
    a_ = np.asarray(a, dtype=np.float64)
    b_ = np.asarray(b, dtype=np.float64)
    hi = np.asarray(caps, dtype=np.int64)
    n = len(a_)
    if not (len(b_) == n == len(hi)) or n == 0:
        raise ValueError("a, b and caps must be non-empty and of equal length")
    if np.any(~np.isfinite(a_)) or np.any(~np.isfinite(b_)) or np.any(b_ <= 0):
        raise ValueError(f"need finite a and b > 0, got a={a_.tolist()} b={b_.tolist()}")
    lo = np.minimum(np.full(n, min_batch, dtype=np.int64), hi)
    if hi.sum() < total:
        raise InfeasibleSplit(f"global batch {total} exceeds the sum of memory caps {int(hi.sum())}")
    if lo.sum() > total:
        raise InfeasibleSplit(f"global batch {total} is below {n} workers x min batch {min_batch}")

    def fill(T: float) -> np.ndarray:
        return np.clip((T - a_) / b_, lo, hi)

    t_lo = float(np.min(a_ + b_ * lo))
    t_hi = float(np.max(a_ + b_ * hi))
    for _ in range(200):
        mid = 0.5 * (t_lo + t_hi)
        if fill(mid).sum() < total:
            t_lo = mid
        else:
            t_hi = mid
    x = np.floor(fill(t_lo) + 1e-9).astype(np.int64)
    x = np.clip(x, lo, hi)
    short = total - int(x.sum())
    if short < 0:  # rounding surplus (rare): take back from the latest finishers
        order = sorted(range(n), key=lambda i: -(a_[i] + b_[i] * x[i]))
        for i in order:
            while short < 0 and x[i] > lo[i]:
                x[i] -= 1
                short += 1
    # ties (equal finish times after rounding) go to the worker with the smaller b, then lower index
    heap = [(a_[i] + b_[i] * (x[i] + 1), b_[i], i) for i in range(n) if x[i] < hi[i]]
    heapq.heapify(heap)
    while short > 0:
        _t, _b, i = heapq.heappop(heap)
        x[i] += 1
        short -= 1
        if x[i] < hi[i]:
            heapq.heappush(heap, (a_[i] + b_[i] * (x[i] + 1), b_[i], i))
    return tuple(int(v) for v in x)


def makespan(batches: Sequence[int], a: Sequence[float], b: Sequence[float]) -> float:
    """The largest predicted finish time ``max_i a_i + b_i x_i`` of an allocation."""
    return float(max(ai + bi * x for x, ai, bi in zip(batches, a, b, strict=False)))
