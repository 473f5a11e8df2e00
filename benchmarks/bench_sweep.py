"""Sweep parallelism: wall time of one CPU-bound sweep with ``-j 1`` and ``-j 2`` (local process pool).

Run: ``python -m pytest benchmarks/bench_sweep.py --benchmark-only`` (speed is measured, never
asserted). The sweep is 8 LB-BSP runs of ``ec2_mixed`` (NARX speed prediction: about a second
of CPU each, little I/O): 2 straggler slowdowns x 4 seeds, 600 simulated seconds. Each timing
covers :func:`~lbsim.sweep.runner.run_sweep` into a fresh folder, pool start-up included.
``extra_info`` holds both wall times, the speedup ``j1_s / j2_s`` and the CPUs available.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import yaml

from lbsim.simulator.run import simulate
from lbsim.sweep import load_sweep
from lbsim.sweep.backends import LocalPool, default_jobs
from lbsim.sweep.runner import run_sweep

REPO = Path(__file__).resolve().parents[1]
SWEEP = {
    "name": "bench",
    "base": str(REPO / "scenarios" / "ec2_mixed.yaml"),
    "set": {"workload.time_budget_s": 600, "contention.1.start_s": 10, "scheme": "lbbsp"},
    "factors": {"contention.1.slowdown": [1.5, 3.0]},
    "repetitions": 4,
}


def test_sweep_j1_vs_j2(benchmark, tmp_path: Path) -> None:
    path = tmp_path / "bench.yaml"
    path.write_text(yaml.safe_dump(SWEEP), encoding="utf-8")
    sweep = load_sweep(path)
    fresh = (tmp_path / f"out{k}" for k in itertools.count())

    def run(jobs: int) -> int:
        return run_sweep(sweep, next(fresh), engine=simulate, backend=LocalPool(jobs)).ran

    list(LocalPool(1).map_unordered(abs, [("warm-up", -1)]))  # start the forkserver outside the timings
    t0 = time.perf_counter()
    assert run(1) == len(sweep.points)
    j1_s = time.perf_counter() - t0
    ran = benchmark.pedantic(run, args=(2,), rounds=1, iterations=1)
    j2_s = benchmark.stats.stats.median
    benchmark.extra_info.update({
        "runs": ran, "cpus": default_jobs(), "j1_s": round(j1_s, 2), "j2_s": round(j2_s, 2),
        "speedup_j2_over_j1": round(j1_s / j2_s, 2),
    })
