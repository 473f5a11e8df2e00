"""Locality-aware batch sizing: each worker's batch and local/remote mix (LOFT's search).

Model (units: samples, seconds). Worker i given ``b`` samples, ``l`` of them from its own shard
and ``r = b - l`` from the storage node, produces its gradient after::

    T_i(b, l) = a_i + c_i b           compute (fitted affine curve, c_i > 0)
              + u_i l + v_i r         fetch: seconds per local / remote sample
              + lat_i [r > 0]         one remote latency per batch that reads remotely

with ``0 <= l <= min(b, q_i)``: ``q_i`` is the samples worker i's shard contributes to the
global batch (representative sampling), so a worker never reads more of its own shard than
that. Problem: ``min_b,l max_i T_i`` s.t. ``sum_i b_i = X``, ``lo_i <= b_i <= cap_i``.

For fixed b, T_i is linear in l apart from the latency step at l = b, so the best l is an end
of ``[0, min(b, q_i)]`` (both are evaluated); the best time ``T_i*(b)`` is then non-decreasing
in b, and so is ``B_i(T)``, the largest batch worker i can finish within T (closed form per
piece). The common finish time is found by an adaptive (coarse-to-fine) grid search: evaluate
``sum_i B_i(T) >= X`` on ``grid_points`` values of T spanning the current bracket, keep the cell
between the last infeasible and the first feasible point, repeat until the cell is narrower than
``rel_tol * T``. Then ``b_i = B_i(T)``, and the surplus over X is taken back one sample at a time
from the worker with the latest predicted finish (never below ``lo_i``).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LocalityPlan:
    batches: tuple[int, ...]
    local: tuple[int, ...]
    finish_s: tuple[float, ...]  # predicted T_i(b_i, l_i)
    evaluations: int  # T values tried by the grid search


@dataclass(frozen=True)
class LocalityModel:
    """Per-worker coefficients of ``T_i(b, l)`` (arrays of length n) and the local quotas."""

    a: np.ndarray
    c: np.ndarray
    u: np.ndarray
    v: np.ndarray
    lat: np.ndarray
    quota: np.ndarray

    def best(self, b: np.ndarray | int, i: slice | int | np.ndarray = slice(None)) -> tuple[np.ndarray, np.ndarray]:
        """(best time, best local count) for batch(es) ``b`` of worker(s) ``i``."""
        a, c, u, v, lat, q = self.a[i], self.c[i], self.u[i], self.v[i], self.lat[i], self.quota[i]
        b = np.asarray(b, dtype=np.float64)
        lmax = np.minimum(b, q)
        t_max = a + c * b + u * lmax + v * (b - lmax) + lat * (b > lmax)
        t_0 = a + (c + v) * b + lat * (b > 0)
        use_local = t_max <= t_0
        return np.where(use_local, t_max, t_0), np.where(use_local, lmax, 0.0)

    def max_batch(self, T: np.ndarray) -> np.ndarray:
        """``B_i(T)`` for each T (rows) and worker (columns): the largest b with ``T_i*(b) <= T``."""
        T = np.asarray(T, dtype=np.float64)[:, None]
        a, c, u, v, lat, q = self.a, self.c, self.u, self.v, self.lat, self.quota
        eps = 1e-9
        # all local, b <= q
        b_local = np.minimum(q, np.floor((T - a) / (c + u) + eps))
        # q local + the rest remote, b > q
        b_mixed = q + np.floor((T - a - lat - (c + u) * q) / (c + v) + eps)
        b_mixed = np.where(b_mixed >= q + 1, b_mixed, -1)
        # all remote
        b_remote = np.floor((T - a - lat) / (c + v) + eps)
        b_remote = np.where(b_remote >= 1, b_remote, -1)
        best = np.maximum(np.maximum(b_local, b_mixed), b_remote)
        return np.where(T >= a, np.maximum(best, 0), -1)


def plan_locality(
    total: int,
    model: LocalityModel,
    caps: np.ndarray,
    *,
    min_batch: int = 1,
    grid_points: int = 16,
    rel_tol: float = 1e-9,
    max_levels: int = 64,
) -> LocalityPlan:
    """Batches summing to ``total`` and local counts minimising the predicted makespan."""
    caps = np.asarray(caps, dtype=np.int64)
    n = len(caps)
    if np.any(model.c <= 0) or np.any(model.u < 0) or np.any(model.v < 0) or np.any(model.lat < 0):
        raise ValueError("need c > 0 and u, v, lat >= 0")
    lo = np.minimum(np.full(n, min_batch, dtype=np.int64), caps)
    if caps.sum() < total or lo.sum() > total:
        raise ValueError(f"global batch {total} does not fit within [{int(lo.sum())}, {int(caps.sum())}]")

    def counts(T: np.ndarray) -> np.ndarray:
        return np.clip(model.max_batch(T), lo, caps).astype(np.int64)

    t_lo = float(np.max(model.best(lo)[0]))
    t_hi = float(np.max(model.best(np.minimum(caps, total))[0]))
    evaluations = 2
    if counts(np.array([t_lo]))[0].sum() >= total:
        t_hi = t_lo
    else:
        for _ in range(max_levels):
            if t_hi - t_lo <= rel_tol * max(t_hi, 1e-12):
                break
            grid = np.linspace(t_lo, t_hi, grid_points + 1)[1:]
            feasible = counts(grid).sum(axis=1) >= total
            evaluations += len(grid)
            k = int(np.argmax(feasible))  # the last grid point (t_hi) is always feasible
            t_lo, t_hi = (float(grid[k - 1]) if k > 0 else t_lo), float(grid[k])
    b = counts(np.array([t_hi]))[0]
    surplus = int(b.sum()) - total
    heap = [(-float(model.best(int(b[i]), i)[0]), i) for i in range(n) if b[i] > lo[i]]
    heapq.heapify(heap)
    while surplus > 0:
        _t, i = heapq.heappop(heap)
        b[i] -= 1
        surplus -= 1
        if b[i] > lo[i]:
            heapq.heappush(heap, (-float(model.best(int(b[i]), i)[0]), i))
    finish, local = model.best(b.astype(np.float64))
    return LocalityPlan(
        tuple(int(x) for x in b), tuple(int(x) for x in local), tuple(float(t) for t in finish), evaluations
    )
