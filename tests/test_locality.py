"""LOFT's locality-aware search (lbsim.sizing.locality) against brute force on small instances."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from lbsim.fetch import DataLayout, WorkerData, largest_remainder
from lbsim.sizing.locality import LocalityModel, plan_locality


def _model(rng: np.random.Generator, n: int, total: int) -> LocalityModel:
    shares = rng.dirichlet(np.ones(n + 1))
    quota = np.array(largest_remainder(total, list(shares))[:n], dtype=float)
    return LocalityModel(
        a=rng.uniform(0, 0.3, n), c=rng.uniform(0.002, 0.02, n), u=rng.uniform(0, 0.005, n),
        v=rng.uniform(0, 0.05, n), lat=rng.uniform(0, 0.1, n), quota=quota,
    )


def _brute(total: int, m: LocalityModel, caps: np.ndarray, lo: int) -> float:
    """The smallest makespan over every batch vector and every local count (exhaustive)."""
    n = len(caps)
    best = np.inf
    for b in itertools.product(*(range(lo, int(c) + 1) for c in caps)):
        if sum(b) != total:
            continue
        span = 0.0
        for i, x in enumerate(b):
            times = [m.a[i] + m.c[i] * x + m.u[i] * ell + m.v[i] * (x - ell) + m.lat[i] * (x > ell)
                     for ell in range(0, int(min(x, m.quota[i])) + 1)]
            span = max(span, min(times))
        best = min(best, span)
    assert n and best < np.inf
    return best


@pytest.mark.parametrize("seed", range(40))
def test_search_matches_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 4))
    total = int(rng.integers(n, 16))
    m = _model(rng, n, total)
    caps = rng.integers(total // n + 1, total + 1, n)
    lo = int(rng.integers(1, 3)) if total >= 2 * n else 1
    plan = plan_locality(total, m, caps, min_batch=lo, grid_points=int(rng.integers(2, 20)))
    assert sum(plan.batches) == total
    assert all(lo <= b <= c for b, c in zip(plan.batches, caps, strict=True))
    assert all(0 <= ell <= min(b, q) for ell, b, q in zip(plan.local, plan.batches, m.quota, strict=True))
    assert max(plan.finish_s) == pytest.approx(_brute(total, m, caps, lo), rel=1e-9, abs=1e-12)


def test_fetch_free_model_is_affine_water_filling() -> None:
    from lbsim.sizing.waterfill import equalize_affine, makespan

    a, c = np.array([0.1, 0.05, 0.0, 0.2]), np.array([1 / 600, 1 / 240, 1 / 100, 1 / 800])
    zeros = np.zeros(4)
    caps = np.array([400, 200, 300, 800])
    m = LocalityModel(a=a, c=c, u=zeros, v=zeros, lat=zeros, quota=caps.astype(float))
    plan = plan_locality(1000, m, caps)
    ref = equalize_affine(1000, a, c, caps)
    assert max(plan.finish_s) == pytest.approx(makespan(ref, a, c), rel=1e-12)


def test_slow_remote_link_reads_its_own_shard() -> None:
    """A worker behind a slow, high-latency link takes exactly its shard's quota, all of it local."""
    lay = DataLayout(110_000, (WorkerData(0.05, 16, 10, 0.001), WorkerData(0.45, 16, 0.1, 0.1)))
    q = lay.quotas(200)
    assert q == (10, 90, 100) and sum(q) == 200
    n = 2
    m = LocalityModel(
        a=np.zeros(n), c=np.full(n, 1 / 400), u=np.array([lay.local_s_per_sample(i) for i in range(n)]),
        v=np.array([lay.remote_s_per_sample(i) for i in range(n)]), lat=np.array([lay.remote_latency_s(i) for i in range(n)]),
        quota=np.array(q[:n], dtype=float),
    )
    plan = plan_locality(200, m, np.array([200, 200]))
    assert plan.batches == (110, 90) and plan.local == (10, 90)


def test_largest_remainder_sums_and_rounds() -> None:
    assert largest_remainder(10, [0.25, 0.25, 0.5]) == (3, 2, 5) or largest_remainder(10, [0.25, 0.25, 0.5]) == (2, 3, 5)
    rng = np.random.default_rng(1)
    for _ in range(200):
        shares = list(rng.dirichlet(np.ones(int(rng.integers(1, 9)))))
        total = int(rng.integers(0, 5000))
        q = largest_remainder(total, shares)
        assert sum(q) == total
        assert all(abs(x - total * s) < 1 for x, s in zip(q, shares, strict=True))
