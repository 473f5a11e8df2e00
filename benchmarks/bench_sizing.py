"""Cost of batch-sizing decisions (they sit on the runtime's critical path at every barrier).

Run: ``python -m pytest benchmarks/bench_sizing.py --benchmark-only`` (add
``--benchmark-columns=min,median,rounds`` for a compact table). Target (issue 9): one LB-BSP
decision for 1,024 workers under 1 ms; docs/performance.md has the figures.
"""

from __future__ import annotations

import numpy as np
import pytest

from lbsim.rng import stream
from lbsim.schemes.base import RoundObservation, SchemeContext, WorkerColumns
from lbsim.schemes.lbbsp import LBBSP, LBBSPConfig
from lbsim.sizing.narx import NarxParams, NarxPredictor
from lbsim.sizing.split import proportional_split
from lbsim.sizing.waterfill import equalize_affine


def _context(n: int) -> SchemeContext:
    rng = stream(0, "bench")
    speeds = tuple(float(v) for v in rng.uniform(50, 5000, n))
    t0 = tuple(float(v) for v in rng.uniform(0.0, 0.1, n))
    return SchemeContext(global_batch=64 * n, t0_s=t0, samples_per_s=speeds, max_batch=(4096,) * n,
                         kinds=("gpu",) * (n // 2) + ("cpu",) * (n - n // 2))


@pytest.mark.parametrize("n", [16, 256, 1024])
def test_proportional_split(benchmark, n: int) -> None:
    ctx = _context(n)
    benchmark(proportional_split, ctx.global_batch, ctx.samples_per_s, ctx.max_batch)


@pytest.mark.parametrize("n", [16, 256, 1024])
def test_equalize_affine(benchmark, n: int) -> None:
    ctx = _context(n)
    b = 1.0 / np.array(ctx.samples_per_s)
    benchmark(equalize_affine, ctx.global_batch, ctx.t0_s, b, ctx.max_batch)


def _observations(ctx: SchemeContext, batches: tuple[int, ...], rounds: int, oracle: bool) -> list[tuple[RoundObservation, RoundObservation]]:
    """``rounds`` barrier observations (as the runtime builds them, a tuple of WorkerObservation,
    and as the simulator's fast path does, WorkerColumns), made before any timing."""
    n = ctx.workers
    rng = stream(1, "bench-obs")
    t0, v = np.array(ctx.t0_s), np.array(ctx.samples_per_s)
    out = []
    for k in range(rounds):
        b = np.array(batches)
        slow = rng.uniform(1, 1.5, n)
        compute = (t0 + b / v) * slow
        cpu = rng.uniform(0.3, 1.0, n)
        orc = rng.uniform(1, 1.5, n) if oracle else None
        cols = WorkerColumns(worker=np.arange(n), batch=b, compute_s=compute, comm_s=np.zeros(n), wait_s=np.zeros(n),
                             cpu_available=cpu, oracle_slowdown=orc, fetch_s=np.zeros(n), local_samples=b,
                             remote_samples=np.zeros(n, dtype=np.int64))
        out.append((RoundObservation(k, 0.0, tuple(cols)), RoundObservation(k, 0.0, cols)))
    return out


@pytest.mark.parametrize("form", ["objects", "columns"])
@pytest.mark.parametrize("variant,predictor", [("cpu", "last"), ("cpu", "ema"), ("cpu", "oracle"), ("cpu", "narx"),
                                               ("gpu_model", "last"), ("gpu", "last"), ("auto", "narx")])
@pytest.mark.parametrize("n", [16, 256, 1024])
def test_lbbsp_decision(benchmark, n: int, variant: str, predictor: str, form: str) -> None:
    """One LB-BSP barrier decision (observe every worker, predict, size), fit windows full.

    ``objects``: the observation as the runtime passes it (a tuple of WorkerObservation);
    ``columns``: as the simulator's synchronous fast path passes it (WorkerColumns arrays).
    Observations are built before timing; the timed call is ``scheme.next_batches`` alone.
    """
    ctx = _context(n)
    scheme = LBBSP(LBBSPConfig(variant=variant, predictor=predictor), ctx)
    pool = _observations(ctx, scheme.initial_batches(), 32, predictor == "oracle")
    pick = 0 if form == "objects" else 1
    for obs in pool[:24]:  # warm up: history windows full (fit_history 20; NARX trained)
        scheme.next_batches(obs[pick])
    cycle = iter(range(10**9))

    def decide():  # type: ignore[no-untyped-def]
        return scheme.next_batches(pool[next(cycle) % len(pool)][pick])

    benchmark(decide)
    stats = getattr(benchmark, "stats", None)
    if stats is not None:
        benchmark.extra_info.update(median_ms=round(stats.stats.median * 1e3, 3), target_ms=1.0)


def test_narx_observe_predict(benchmark) -> None:
    p = NarxPredictor(NarxParams(), stream(0, "narx"))
    rng = stream(2, "narx-data")

    def step():
        c = float(rng.uniform(0.3, 1.0))
        p.observe(100.0 * c, c, 1.0)
        return p.predict(c, 1.0)

    benchmark(step)
