"""Cost of ZipLine (ElasticBSP's barrier choice) next to the paper's Table II.

Run: ``python -m pytest benchmarks/bench_zipline.py --benchmark-only``
(add ``--benchmark-columns=min,median,mean,rounds`` for a compact table).

Synthetic data as in the paper's timing study (authors' generator, schemes-research.md §2.5): each
worker has a constant iteration interval drawn uniformly in [1.0, 1.5] s and a random start offset
(its last push, uniform in [0, 1.5) s); seeded numpy. ``extra_info`` records the paper's Table II
figure for the same (n, R) -- ICDM'19, mean of 10 trials on a Xeon E5-2620 v3, implementation
language not stated -- and the ratio to our median. The scaling case fits the measured cost against
``n * R * log2(n)`` and reports the fit; nothing here asserts a time.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from lbsim.sizing.zipline import predict_ends, zipline

#: ICDM'19 Table II, ZipLine column, in microseconds, keyed by (n, R).
PAPER_TABLE2_US = {
    (10, 15): 149.0,
    (10, 150): 1320.0,
    (100, 15): 6370.0,
    (100, 150): 49900.0,
    (1000, 15): 253000.0,
    (1000, 150): 2380000.0,
}


def synthetic_ends(n: int, r: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng([seed, n, r])
    interval = rng.uniform(1.0, 1.5, n)
    last_push = rng.uniform(0.0, 1.5, n)
    return predict_ends(last_push, interval, r)


@pytest.mark.parametrize("r", [15, 150])
@pytest.mark.parametrize("n", [10, 100, 1000])
def test_zipline_vs_paper(benchmark, n: int, r: int) -> None:
    ends = synthetic_ends(n, r)
    choice = benchmark(zipline, ends)
    assert len(choice.indices) == n  # a result, not a time
    paper = PAPER_TABLE2_US[(n, r)]
    benchmark.extra_info.update(n=n, R=r, paper_table2_us=paper, range_s=choice.range_s)
    stats = getattr(benchmark, "stats", None)
    if stats is not None:
        median_us = stats.stats.median * 1e6
        benchmark.extra_info["median_us"] = round(median_us, 1)
        benchmark.extra_info["paper_over_ours"] = round(paper / median_us, 1)


def _best_time(fn, arg, budget_s: float = 0.25, max_reps: int = 200) -> float:
    """Fastest of several runs of ``fn(arg)`` within about ``budget_s`` (seconds per call)."""
    best = math.inf
    spent = 0.0
    reps = 0
    while reps < 3 or (spent < budget_s and reps < max_reps):
        t0 = time.perf_counter()
        fn(arg)
        dt = time.perf_counter() - t0
        best = min(best, dt)
        spent += dt
        reps += 1
    return best


SCALING_N = (10, 30, 100, 300, 1000)
SCALING_R = (15, 50, 150)


def scaling_fit() -> dict[str, object]:
    """Time zipline over a grid of (n, R) and fit ``t = c * n R log2(n) + t0``.

    The fit minimises *relative* residuals (each case weighted by 1 / its time), so the small cases
    count as much as the big ones; ``ns_per_unit`` is each case's ``t / (n R log2 n)``.
    """
    cases = []
    for n in SCALING_N:
        for r in SCALING_R:
            t = _best_time(zipline, synthetic_ends(n, r, seed=1))
            cases.append((n, r, n * r * math.log2(n), t))
    x = np.array([c[2] for c in cases])
    y = np.array([c[3] for c in cases])
    design = np.column_stack([x, np.ones_like(x)])
    (slope, intercept), *_ = np.linalg.lstsq(design / y[:, None], np.ones_like(y), rcond=None)
    fitted = design @ np.array([slope, intercept])
    rel = (y - fitted) / y
    # log-log slope of t against n R log2 n (1.0 = exactly that growth)
    loglog = float(np.polyfit(np.log(x), np.log(y), 1)[0])
    return {
        "model": "t = c * n*R*log2(n) + t0 (relative least squares)",
        "c_ns_per_unit": round(float(slope) * 1e9, 2),
        "t0_us": round(float(intercept) * 1e6, 2),
        "rms_rel_residual": round(float(np.sqrt(np.mean(rel**2))), 3),
        "max_rel_residual": round(float(np.max(np.abs(rel))), 3),
        "loglog_slope": round(loglog, 3),
        "cases_us": {f"{n}x{r}": round(t * 1e6, 1) for n, r, _, t in cases},
        "ns_per_unit": {f"{n}x{r}": round(t / u * 1e9, 1) for n, r, u, t in cases},
    }


def test_zipline_scaling(benchmark) -> None:
    """One sweep over the (n, R) grid; the fit and every case's best time go to extra_info."""
    fit = benchmark.pedantic(scaling_fit, rounds=1, iterations=1)
    benchmark.extra_info.update(fit)
