"""lbsim advise over the cores: ec2_mixed, 9 schemes x 3 variants x 5 seeds = 135 runs of 600 simulated s.

Run: ``python -m pytest benchmarks/bench_advise.py --benchmark-only -s`` (speed is measured, never
asserted; about 5 minutes on two idle cores). One case times the whole advice (plan, runs, analysis;
no files) three ways, one after the other: a local process pool with one worker (the serial
baseline), with every CPU (``-j``, the default), and a local Dask cluster with one single-threaded
worker process per CPU (``--dask``; its start-up is timed separately). The variants are the size of
the V100 straggler's slowdown (``--vary contention.1.slowdown=1.5,3,6``); ``max_seeds`` = 5, so
every way runs exactly the same 135 runs. ``extra_info`` holds the wall times, the speedups over
the serial pool, the CPUs and the 1-minute load average before and after (other processes share
the machine: read the figures with it).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from lbsim.advise.run import Request, advise, prepare
from lbsim.simulator.run import simulate
from lbsim.sweep.backends import DaskPool, LocalPool, default_jobs

REPO = Path(__file__).resolve().parents[1]
REQUEST = Request(scenario=str(REPO / "scenarios" / "ec2_mixed.yaml"), vary=("contention.1.slowdown=1.5,3,6",),
                  seeds=5, max_seeds=5)


def _timed(backend: object) -> tuple[float, int]:
    t0 = time.perf_counter()
    _report, rows = advise(prepare(REQUEST), simulate, backend)  # type: ignore[arg-type]
    return time.perf_counter() - t0, len(rows)


def test_advise_ec2_mixed_135_runs(benchmark) -> None:  # type: ignore[no-untyped-def]
    from dask.distributed import Client, LocalCluster

    cpus = default_jobs()
    load_before = os.getloadavg()[0]
    list(LocalPool(1).map_unordered(abs, [("warm-up", -1)]))  # start the forkserver outside the timings
    serial_s, runs = _timed(LocalPool(1))
    pool_s, _ = _timed(LocalPool(cpus))
    t0 = time.perf_counter()
    cluster = LocalCluster(n_workers=cpus, threads_per_worker=1, processes=True, dashboard_address=None)
    client = Client(cluster)
    dask_start_s = time.perf_counter() - t0
    try:
        dask_s = benchmark.pedantic(lambda: _timed(DaskPool(client))[0], rounds=1, iterations=1)
    finally:
        client.close()
        cluster.close()
    benchmark.extra_info.update({
        "runs": runs, "cpus": cpus, "serial_s": round(serial_s, 1), "pool_s": round(pool_s, 1),
        "dask_s": round(dask_s, 1), "dask_start_s": round(dask_start_s, 1),
        "pool_speedup": round(serial_s / pool_s, 2), "dask_speedup": round(serial_s / dask_s, 2),
        "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2),
    })
    print(f"\nadvise ec2_mixed, {runs} runs, {cpus} CPUs: serial {serial_s:.1f} s, pool {pool_s:.1f} s "
          f"({serial_s / pool_s:.2f}x), dask {dask_s:.1f} s ({serial_s / dask_s:.2f}x; start-up {dask_start_s:.1f} s); "
          f"load {load_before:.2f} -> {os.getloadavg()[0]:.2f}")
