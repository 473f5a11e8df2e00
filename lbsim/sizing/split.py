"""Splitting a global batch of X samples into integer per-worker batches.

Model: worker i gets ``x_i = clip(lam * w_i, lo_i, hi_i)`` with the water level ``lam`` chosen
so that ``sum x_i = X`` (weights ``w_i > 0``, e.g. predicted sample speeds; bounds from a
minimum batch and each device's memory cap). The real-valued split is then integerised by
largest remainders, so the integers still sum to exactly X, stay within the bounds and keep the
order of the weights (a worker with a larger weight never gets fewer samples, unless a cap
forces it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

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


def bisect_bracket(lo_v: float, hi_v: float, below: Callable[[float], bool], guess: float | None = None) -> tuple[float, float]:
    """The bracket ``(lo, hi)`` left by 200 halvings of ``[lo_v, hi_v]``, computed cheaply.

    The plain loop is ``for _ in range(200): mid = (lo + hi) / 2; if below(mid): lo = mid else:
    hi = mid``; this returns exactly its final ``(lo, hi)`` for any ``below`` that is monotone
    (True below some threshold, False from it on — true of every sum of clipped monotone terms
    here, in floating point too, as rounding is monotone). Two savings, neither changing a bit:

    * once the midpoint is one of the ends (the bracket is down to adjacent floats) the loop
      cannot change anything any more, so it stops (after ~60 of the 200 iterations);
    * ``below`` is evaluated only where monotonicity does not already answer: every evaluation
      tightens a known ``(p, q)`` with ``below(p)`` and ``not below(q)``, and a ``guess`` of the
      threshold (any float; a close one saves most evaluations) starts that search, so a close
      guess leaves ~10 evaluations instead of ~60.
    """
    p, q = -math.inf, math.inf  # below(p) is True, below(q) is False (evaluated)
    if guess is not None and math.isfinite(guess) and lo_v < guess < hi_v:
        step = max(abs(guess) * 2.0**-44, 5e-324)
        x, up = guess, below(guess)
        if up:
            p = x
        else:
            q = x
        for _ in range(12):  # walk away from the guess until the other side is found
            x = x + step if up else x - step
            if not lo_v < x < hi_v:
                break
            if below(x):
                p = x
                if not up:
                    break
            else:
                q = x
                if up:
                    break
            step *= 16.0
    for _ in range(200):
        mid = 0.5 * (lo_v + hi_v)
        last = mid == lo_v or mid == hi_v
        if mid <= p:
            go_up = True
        elif mid >= q:
            go_up = False
        else:
            go_up = below(mid)
            if go_up:
                p = mid
            else:
                q = mid
        if go_up:
            lo_v = mid
        else:
            hi_v = mid
        if last:
            break
    return lo_v, hi_v


def _active_set_root(total: float, value, lo: np.ndarray, hi: np.ndarray) -> float | None:  # type: ignore[no-untyped-def]
    """Approximate root r of ``sum clip(u + r v, lo, hi) = total`` (``value = (u, v)``, v > 0).

    Only a guess for :func:`bisect_bracket` (which stays exact whatever the guess): a few rounds
    of fixing which terms are clipped at the current r and solving the linear equation for the
    rest. None when it does not settle (the bisection then runs without a guess).
    """
    u, v = value
    r = (total - float(u.sum())) / float(v.sum())
    y = u + r * v
    if not ((y <= lo).any() or (y >= hi).any()):  # the usual case: nothing clipped at the unclipped root
        return r
    low = high = None
    for _ in range(20):  # (dot products: a guess needs no particular rounding, only speed)
        y = u + r * v
        new_low, new_high = y <= lo, y >= hi
        if low is not None and not (new_low != low).any() and not (new_high != high).any():
            return r
        low, high = new_low, new_high
        free = ~(low | high)
        s = float(np.dot(v, free))
        if not s > 0.0:
            return None
        fixed = float(np.dot(lo, low)) + float(np.dot(hi, high))
        r = (total - fixed - float(np.dot(u, free))) / s
    return None


def _water_fill(total: float, w: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Real x = clip(lam*w, lo, hi) with sum x = total, by bisection on lam (monotone)."""
    buf = np.empty_like(w)

    def below(lam: float) -> bool:  # np.clip(lam * w, lo, hi).sum() < total, without temporaries
        np.multiply(lam, w, out=buf)
        np.maximum(buf, lo, out=buf)
        np.minimum(buf, hi, out=buf)
        return bool(buf.sum() < total)

    guess = _active_set_root(total, (np.zeros_like(w), w), lo, hi)
    _, lam_hi = bisect_bracket(0.0, float(np.max(hi / w)) * 2.0 + 1.0, below, guess)
    return np.clip(lam_hi * w, lo, hi)


def _integerise(total: int, real: np.ndarray, w: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[int, ...]:
    x = np.floor(real + 1e-9).astype(np.int64)
    x = np.clip(x, np.ceil(lo).astype(np.int64), hi.astype(np.int64))
    short = total - int(x.sum())
    frac = real - x
    # Hand out missing units by largest remainder, then larger weight, then lower index;
    # take back surplus (rare, from rounding) from the smallest remainders first.
    order = np.lexsort((np.arange(len(x)), -w, -frac))  # == sorted(range(n), key=(-frac[i], -w[i], i))
    while short > 0:  # passes over the order: each worker below its cap takes one unit
        open_ = order[x[order] < hi[order]]
        if not open_.size:
            raise InfeasibleSplit("cannot place the remaining samples within the caps")
        take = open_[:short]
        x[take] += 1
        short -= len(take)
    if short < 0:  # one pass from the smallest remainder: each worker above its minimum gives one
        back = order[::-1]
        back = back[x[back] > lo[back]][:-short]
        x[back] -= 1
    return tuple(x.tolist())
