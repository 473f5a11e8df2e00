"""Cost of batch-sizing decisions (they sit on the runtime's critical path at every barrier).

Run: ``python -m pytest benchmarks/bench_sizing.py --benchmark-only``.
"""

from __future__ import annotations

import numpy as np
import pytest

from lbsim.rng import stream
from lbsim.schemes.base import RoundObservation, SchemeContext, WorkerObservation
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


@pytest.mark.parametrize("variant,predictor", [("cpu", "last"), ("cpu", "narx"), ("gpu_model", "last"), ("auto", "narx")])
@pytest.mark.parametrize("n", [16, 1024])
def test_lbbsp_decision(benchmark, n: int, variant: str, predictor: str) -> None:
    """One LB-BSP barrier decision (observe every worker, predict, size)."""
    ctx = _context(n)
    scheme = LBBSP(LBBSPConfig(variant=variant, predictor=predictor), ctx)
    batches = scheme.initial_batches()
    rng = stream(1, "bench-obs")
    update = iter(range(10**9))

    def decide():
        obs = tuple(
            WorkerObservation(i, batches[i], ctx.t0_s[i] + batches[i] / ctx.samples_per_s[i] * float(rng.uniform(1, 1.5)),
                              0.0, 0.0, float(rng.uniform(0.3, 1.0)))
            for i in range(n)
        )
        return scheme.next_batches(RoundObservation(next(update), 0.0, obs))

    benchmark(decide)


def test_narx_observe_predict(benchmark) -> None:
    p = NarxPredictor(NarxParams(), stream(0, "narx"))
    rng = stream(2, "narx-data")

    def step():
        c = float(rng.uniform(0.3, 1.0))
        p.observe(100.0 * c, c, 1.0)
        return p.predict(c, 1.0)

    benchmark(step)
