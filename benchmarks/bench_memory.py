"""Peak memory of a run with a million worker-iterations, results written to disk.

Run: ``python -m pytest benchmarks/bench_memory.py --benchmark-only`` (measured, never asserted).
Each case starts a fresh Python process (so its peak RSS is the run's own) that simulates about
1,000,000 worker-iterations and writes the run's files with :func:`lbsim.output.write_run`
(column-wise, by polars), as CSV and then as Parquet, then reports
``resource.getrusage(RUSAGE_SELF).ru_maxrss`` — the process's peak resident set, interpreter and
libraries included. ``extra_info``: peak RSS in MiB (target < 1,024), the RSS right after the
imports, wall seconds for simulate and for each write_run, and the tables' sizes.

* ``sync-fast-path``: ``scenarios/bench/large.yaml`` with bsp, 977 updates of 1,024 workers
  (1,000,448 worker-iterations; records appended as numpy column blocks).
* ``async-fast-path``: asp on a parameter server, 64 workers of the same fleet, 1,000,064 updates
  (one per worker-iteration) on the parameter-server fast path (records and updates buffered as
  flat lists and turned into numpy column blocks every 1,024 updates; the merged table gives its
  blocks' memory back to the system column by column: ``lbsim.metrics.records.give_back_memory``).
* ``async-events``: the same run on the SimPy event path (``simulate(sc, fast=False)``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import json, resource, sys, time
from pathlib import Path
from lbsim.output import write_run
from lbsim.scenario.loader import load_scenario
from lbsim.simulator.run import simulate

def rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB

case, out = sys.argv[1], Path(sys.argv[2])
large = "scenarios/bench/large.yaml"
if case == "sync-fast-path":
    sc = load_scenario(large, ["workload.updates=977"], scheme="bsp")
else:
    sc = load_scenario(large, ["cluster.groups.0.count=8", "cluster.groups.1.count=16", "cluster.groups.2.count=16",
                               "cluster.groups.3.count=24", "workload.global_batch=4096", "workload.updates=1000064",
                               "network={name: parameter_server, shards: 4, server_bandwidth_gbps: 100, apply_s: 0.0001}"],
                       scheme="asp")
base = rss_mib()
t0 = time.perf_counter()
res = simulate(sc, fast=case != "async-events")
t1 = time.perf_counter()
after_sim = rss_mib()
write_run(out, res.iterations, res.updates, res.summary, res.decisions)
t2 = time.perf_counter()
write_run(out, res.iterations, res.updates, res.summary, res.decisions, fmt="parquet")
t3 = time.perf_counter()
peak = rss_mib()  # the run: simulate + write_run (both formats)
print(json.dumps({"case": case, "worker_iterations": res.summary["worker_iterations"], "peak_rss_mib": round(peak, 1),
                  "peak_rss_after_simulate_mib": round(after_sim, 1), "rss_after_imports_mib": round(base, 1),
                  "simulate_s": round(t1 - t0, 2), "write_run_csv_s": round(t2 - t1, 2),
                  "write_run_parquet_s": round(t3 - t2, 2),
                  "iterations_csv_mib": round((out / "iterations.csv").stat().st_size / 2**20, 1),
                  "iterations_parquet_mib": round((out / "iterations.parquet").stat().st_size / 2**20, 1)}))
"""


def measure(case: str, out: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", SCRIPT, case, str(out)], cwd=REPO, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", ["sync-fast-path", "async-fast-path", "async-events"])
def test_peak_rss_one_million_worker_iterations(benchmark, case: str, tmp_path: Path) -> None:
    runs = iter(range(10**6))
    info = benchmark.pedantic(lambda: measure(case, tmp_path / f"run{next(runs)}"), rounds=1, iterations=1)
    benchmark.extra_info.update(info, target_peak_rss_mib=1024)
    assert info["worker_iterations"] >= 1_000_000  # a result, not a size
