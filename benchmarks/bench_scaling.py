"""How simulation cost grows with workers and updates (the scaling table of docs/performance.md).

Run: ``python -m pytest benchmarks/bench_scaling.py --benchmark-only`` (measured, never asserted;
about two minutes on a quiet machine). One sweep per engine path over workers (16, 64, 256, 1,024)
x updates, each cell the median wall time of ``simulate`` over a few runs (3; 1 above 2 M
worker-iterations) of ``scenarios/bench/large.yaml`` scaled to that fleet
(:func:`bench_simulator.scenario`):

* ``sync-fast-path``: bsp on the ring (the synchronous fast path), 100 / 1,000 / 10,000 updates.
  An update is one synchronous round, so a cell plans ``workers x updates`` worker-iterations.
* ``async-fast-path``: asp on the parameter server (the parameter-server fast path), 10,000 / 30,000 /
  100,000 updates.
  For ASP an *update* is one push: every finished worker-iteration is applied on its own, so a
  cell plans ``updates`` worker-iterations whatever the fleet size (the recorded count is a little
  lower: the run ends with every other worker's iteration still in flight, unrecorded). Fewer than
  ~10 pushes per worker would mostly measure start-up (at 1,024 workers x 100 updates a single
  worker-iteration gets recorded), so the grid starts at 10,000.

``extra_info``: every cell's seconds, recorded worker-iterations and worker-iterations per second,
and log-log slopes of time against worker-iterations (1.0 = linear): one over all cells and one
per fleet size (time against updates at fixed workers). The slopes are fitted only over cells that
plan at least ``FIT_MIN_WORKER_ITERATIONS`` (10^4) worker-iterations: below that, per-run set-up
(loading the fleet, building workers, the first round) dominates and a fit through such cells means
nothing (an earlier version fitted every cell and reported a slope of -388 for asp).
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

from lbsim.simulator.run import simulate  # noqa: E402

WORKERS = (16, 64, 256, 1024)
GRIDS = {
    "sync-fast-path": ("bsp", (100, 1_000, 10_000)),
    "async-fast-path": ("asp", (10_000, 30_000, 100_000)),
}
MAX_WI = {"sync-fast-path": 11_000_000, "async-fast-path": 1_000_000}
FIT_MIN_WORKER_ITERATIONS = 10_000  # planned worker-iterations of a cell that enters the slope fits


def _slope(xs: list[float], ys: list[float]) -> float:
    """Log-log slope of ``ys`` against ``xs`` (nan with fewer than two distinct ``xs``)."""
    if len(set(xs)) < 2:
        return float("nan")
    return round(float(np.polyfit(np.log(xs), np.log(ys), 1)[0]), 3)


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
    fit: dict[int, list[tuple[int, float]]] = {}  # workers -> (recorded worker-iterations, seconds)
    for workers in WORKERS:
        for updates in updates_grid:
            wi = workers * updates if path == "sync-fast-path" else updates  # planned
            if wi > MAX_WI[path]:
                continue
            runs = 3 if wi <= 2_000_000 else 1
            secs, n = _median_s(scenario(scheme, workers, updates), runs)
            cells[f"{workers}x{updates}"] = {"s": round(secs, 3), "worker_iterations": n, "wi_per_s": round(n / secs)}
            if wi >= FIT_MIN_WORKER_ITERATIONS:
                fit.setdefault(workers, []).append((n, secs))
    points = [p for pts in fit.values() for p in pts]
    return {
        "path": path, "scheme": scheme, "cells": cells, "fit_min_worker_iterations": FIT_MIN_WORKER_ITERATIONS,
        "loglog_slope_time_vs_worker_iterations": _slope([p[0] for p in points], [p[1] for p in points]),
        "loglog_slope_per_workers": {str(w): _slope([p[0] for p in pts], [p[1] for p in pts]) for w, pts in fit.items()},
    }


@pytest.mark.parametrize("path", list(GRIDS))
def test_scaling(benchmark, path: str) -> None:
    info = benchmark.pedantic(sweep, args=(path,), rounds=1, iterations=1)
    benchmark.extra_info.update(info)
