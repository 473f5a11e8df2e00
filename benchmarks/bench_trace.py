"""The cost of ``--trace gz`` on the performance scenario: wall time and peak memory, side by side.

Run: ``python benchmarks/bench_trace.py [--pairs 3]`` or
``python -m pytest benchmarks/bench_trace.py --benchmark-only`` (measured, never asserted).

Each pair runs, in fresh processes and alternating which goes first, the README's command

    lbsim run scenarios/bench/large.yaml --format parquet --trace gz

and the same run without ``--trace gz`` (1,024 workers x 1,000 updates: 1,024,000
worker-iterations, ~3.1 M trace events). Each command's wall time is measured around the process;
its peak resident set is the child's own ``ru_maxrss`` and its CPU time (user + system, all its
threads) comes from ``os.wait4``: on a loaded machine the CPU seconds say what the work costs, the
wall seconds what the wait was. Reported: every pair,
the medians, the median of the per-pair ratios (trace / plain), and the 1-minute load average
before and after (the machine is shared: compare within a pair, not across passes). Targets
(issue 29): peak RSS < 1 GiB, wall <= 3x the plain run.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
LARGE = "scenarios/bench/large.yaml"


def _run(args: list[str], out: Path) -> tuple[float, float, float]:
    """(wall seconds, peak RSS MiB, CPU seconds) of ``python -m lbsim run LARGE ARGS --out OUT -q`` in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "lbsim", "run", LARGE, *args, "--out", str(out), "-q"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}")
    return wall, usage.ru_maxrss / 1024.0, usage.ru_utime + usage.ru_stime  # Linux: ru_maxrss in KiB


def measure(pairs: int = 3) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(pairs):
            order = ("plain", "trace") if k % 2 == 0 else ("trace", "plain")
            pair: dict[str, Any] = {}
            for kind in order:
                extra = ["--format", "parquet"] + (["--trace", "gz"] if kind == "trace" else [])
                wall, rss, cpu = _run(extra, Path(tmp) / f"{kind}{k}")
                pair[f"{kind}_s"], pair[f"{kind}_rss_mib"] = round(wall, 2), round(rss, 1)
                pair[f"{kind}_cpu_s"] = round(cpu, 2)
            trace_file = Path(tmp) / f"trace{k}" / "trace.json.gz"
            pair["trace_gz_mib"] = round(trace_file.stat().st_size / 2**20, 1)
            pair["ratio"] = round(pair["trace_s"] / pair["plain_s"], 2)
            pair["cpu_ratio"] = round(pair["trace_cpu_s"] / pair["plain_cpu_s"], 2)
            rows.append(pair)
    med = {key: statistics.median(r[key] for r in rows) for key in rows[0]}
    return {"pairs": rows, "median": med, "load_1min_before": round(load_before, 2),
            "load_1min_after": round(os.getloadavg()[0], 2), "cpus": os.cpu_count()}


def test_trace_cost(benchmark: Any) -> None:
    result: dict[str, Any] = {}
    benchmark.pedantic(lambda: result.update(measure()), rounds=1, iterations=1)
    benchmark.extra_info.update(result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    n = int(sys.argv[sys.argv.index("--pairs") + 1]) if "--pairs" in sys.argv else 3
    print(json.dumps(measure(n), indent=2))
