"""Simulator speed: simulated worker-iterations per wall-clock second.

Run: ``python -m pytest benchmarks/ --benchmark-only`` (not part of the test suite: speed is
measured here, never asserted). Each case simulates about 20,000 worker-iterations of a T4
cluster with Markov contention on every worker; ``extra_info`` holds the rate.
"""

from __future__ import annotations

import pytest

from lbsim.scenario.loader import scenario_from_data
from simulator.run import simulate

WORKER_ITERATIONS = 20_000


def scenario(scheme: str, workers: int):
    sync = scheme in ("bsp", "static")
    updates = max(5, WORKER_ITERATIONS // workers) if sync else WORKER_ITERATIONS
    network = {"name": "ring_allreduce"} if sync else {"name": "parameter_server", "shards": 4, "apply_s": 0.0001}
    return scenario_from_data(
        {
            "seed": 0,
            "workload": {"model": "resnet18_cifar10", "global_batch": 64 * workers, "updates": updates},
            "cluster": {"groups": [{"instance": "g4dn.xlarge", "count": workers, "jitter_cv": 0.05}]},
            "network": network,
            "contention": [{"name": "markov", "workers": "all", "mean_off_s": 20, "mean_on_s": 5}],
            "scheme": {"name": scheme},
        }
    )


@pytest.mark.parametrize("workers", [16, 256, 1024])
@pytest.mark.parametrize("scheme", ["bsp", "asp"])
def test_worker_iterations_per_s(benchmark, scheme: str, workers: int) -> None:
    sc = scenario(scheme, workers)
    result = benchmark.pedantic(simulate, args=(sc,), rounds=3, iterations=1)
    n = result.summary["worker_iterations"]
    benchmark.extra_info["worker_iterations"] = n
    benchmark.extra_info["worker_iterations_per_s"] = round(n / benchmark.stats.stats.median)
    assert n > 0
