"""How simulation cost grows with workers and updates (the scaling table of docs/performance.md).

Run: ``python -m pytest benchmarks/bench_scaling.py --benchmark-only`` (measured, never asserted;
about two minutes). One sweep per engine path over workers (16, 64, 256, 1,024) x updates (100,
1,000, 10,000), each cell the median wall time of ``simulate`` over a few runs of
``scenarios/bench/large.yaml`` scaled to that fleet (:func:`bench_simulator.scenario`):

* ``sync-fast-path``: bsp on the ring (the synchronous fast path);
* ``async-events``: asp on the parameter server (SimPy events). One update per worker-iteration,
  so updates = worker-iterations: 10,000, 30,000 and 100,000 at each fleet size (fewer than
  ~10 per worker would mostly measure start-up, and a run ends with every worker's iteration in
  flight unrecorded).

``extra_info``: every cell's seconds and worker-iterations per second, and the log-log slope of
time against worker-iterations (1.0 = linear) fitted over the cells with at least 10^4
worker-iterations (below that, per-run set-up dominates).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_simulator import scenario  # noqa: E402

from simulator.run import simulate  # noqa: E402

WORKERS = (16, 64, 256, 1024)
GRIDS = {
    "sync-fast-path": ("bsp", (100, 1_000, 10_000)),
    "async-events": ("asp", (10_000, 30_000, 100_000)),
}
MAX_WI = {"sync-fast-path": 11_000_000, "async-events": 1_000_000}


def _median_s(sc, runs: int) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    times, n = [], 0
    for _ in range(runs):
        t0 = time.perf_counter()
        res = simulate(sc)
        times.append(time.perf_counter() - t0)
        n = res.summary["worker_iterations"]
    return statistics.median(times), n


def sweep(path: str) -> dict[str, object]:
    scheme, updates_grid = GRIDS[path]
    cells: dict[str, dict[str, float]] = {}
    xs, ys = [], []
    for workers in WORKERS:
        for updates in updates_grid:
            wi = workers * updates if path == "sync-fast-path" else updates
            if wi > MAX_WI[path]:
                continue
            runs = 3 if wi <= 2_000_000 else 1
            secs, n = _median_s(scenario(scheme, workers, updates), runs)
            cells[f"{workers}x{updates}"] = {"s": round(secs, 3), "worker_iterations": n, "wi_per_s": round(n / secs)}
            if n >= 10_000:
                xs.append(n)
                ys.append(secs)
    slope = float(np.polyfit(np.log(xs), np.log(ys), 1)[0]) if len(xs) >= 2 else float("nan")
    return {"path": path, "scheme": scheme, "cells": cells, "loglog_slope_time_vs_worker_iterations": round(slope, 3)}


@pytest.mark.parametrize("path", list(GRIDS))
def test_scaling(benchmark, path: str) -> None:
    info = benchmark.pedantic(sweep, args=(path,), rounds=1, iterations=1)
    benchmark.extra_info.update(info)
