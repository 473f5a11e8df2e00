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

from lbsim.sizing.split import InfeasibleSplit, _active_set_root, bisect_bracket


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

    buf = np.empty(n)
    lo_f, hi_f = lo.astype(np.float64), hi.astype(np.float64)

    def below(T: float) -> bool:  # fill(T).sum() < total, without temporaries
        np.subtract(T, a_, out=buf)
        np.divide(buf, b_, out=buf)
        np.maximum(buf, lo_f, out=buf)
        np.minimum(buf, hi_f, out=buf)
        return bool(buf.sum() < total)

    t_lo = float(np.min(a_ + b_ * lo))
    t_hi = float(np.max(a_ + b_ * hi))
    inv = 1.0 / b_  # only for the guess: fill(T) = (T - a) / b = -a/b + T/b, clipped
    guess = _active_set_root(float(total), (-a_ * inv, inv), lo_f, hi_f)
    t_lo, t_hi = bisect_bracket(t_lo, t_hi, below, guess)  # == 200 plain halvings
    x = np.floor(fill(t_lo) + 1e-9).astype(np.int64)
    x = np.clip(x, lo, hi)
    short = total - int(x.sum())
    if short < 0:  # rounding surplus (rare): take back from the latest finishers
        order = np.argsort(-(a_ + b_ * x), kind="stable")  # == sorted(range(n), key=-(a + b x))
        avail = (x - lo)[order]
        before = np.cumsum(avail) - avail
        x[order] -= np.clip(-short - before, 0, avail)
        short = total - int(x.sum())
    if short > 0:
        _top_up(x, short, a_, b_, hi)
    return tuple(x.tolist())


def _top_up(x: np.ndarray, short: int, a: np.ndarray, b: np.ndarray, hi: np.ndarray) -> None:
    """Hand ``short`` samples, one at a time, to the worker whose finish time after taking it is
    smallest (ties: smaller b, then lower index) — in place, as the heap loop

        heap = [(a[i] + b[i] * (x[i] + 1), b[i], i) for i with x[i] < hi[i]]
        pop the smallest, x[i] += 1, push (a[i] + b[i] * (x[i] + 1), b[i], i) while x[i] < hi[i]

    does. That loop is a merge of the workers' non-decreasing sequences ``a_i + b_i (x_i + k)``,
    so it takes the ``short`` smallest entries ``(t, b, i, k)`` of all of them; every one of those
    is at most V = the short-th smallest first entry, so only entries up to V are generated and
    sorted. Falls back to the loop when that bound does not apply.
    """
    room = hi - x
    cand = np.flatnonzero(room > 0)
    if short <= cand.size:
        ac, bc, xc, rc = a[cand], b[cand], x[cand], room[cand]
        v = float(np.partition(ac + bc * (xc + 1), short - 1)[short - 1])
        with np.errstate(over="ignore", invalid="ignore"):
            est = np.floor((v - ac) / bc) - xc + 2.0
        kmax = np.clip(np.where(np.isfinite(est), est, 1.0), 1, rc).astype(np.int64)
        capped = kmax < rc  # the entry after the last generated one must lie beyond v
        total_k = int(kmax.sum())
        if total_k <= 64 * cand.size and not (ac + bc * (xc + kmax + 1) <= v)[capped].any():
            owner = np.repeat(np.arange(cand.size), kmax)
            k = np.arange(total_k) - np.repeat(np.cumsum(kmax) - kmax, kmax) + 1
            t = ac[owner] + bc[owner] * (xc[owner] + k)
            if t.size >= short:
                cut = t[np.argpartition(t, short - 1)[short - 1]]  # the short-th smallest entry
                take = owner[t < cut]
                tie = np.flatnonzero(t == cut)
                need = short - take.size
                if need:  # entries equal to the cut: smaller b, then lower index, then k first
                    tie = tie[np.lexsort((k[tie], cand[owner[tie]], bc[owner[tie]]))[:need]]
                    take = np.concatenate([take, owner[tie]])
                x[cand] += np.bincount(take, minlength=cand.size)
                return
    heap = [(a[i] + b[i] * (x[i] + 1), b[i], i) for i in range(len(x)) if x[i] < hi[i]]
    heapq.heapify(heap)
    while short > 0:
        _t, _b, i = heapq.heappop(heap)
        x[i] += 1
        short -= 1
        if x[i] < hi[i]:
            heapq.heappush(heap, (a[i] + b[i] * (x[i] + 1), b[i], i))


def makespan(batches: Sequence[int], a: Sequence[float], b: Sequence[float]) -> float:
    """The largest predicted finish time ``max_i a_i + b_i x_i`` of an allocation."""
    return float(max(ai + bi * x for x, ai, bi in zip(batches, a, b, strict=False)))
