"""Rank start-up: a 3-rank ``lbsim`` runtime job with ranks forked from a fork server vs spawned.

Run: ``python benchmarks/bench_rank_start.py [pairs]`` or ``python -m pytest benchmarks/bench_rank_start.py -s``
(speed is measured, never asserted). Each sample is a fresh Python process that launches one
3-rank gloo job of 3 updates (the launcher's whole life: imports, ranks' start, rendezvous,
training, teardown) with start method ``forkserver`` (the default) or ``spawn``; the pairs
alternate the two. Reported per method: wall seconds and CPU seconds of the launcher and all its
descendants (the fork server is stopped and reaped before the count, so its ranks' CPU counts),
the median of the samples, with the 1-minute load average before and after (the machine is shared:
read the figures with it).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCENARIO = (
    "name: rank_start\nseed: 5\n"
    "workload: {model: resnet50_imagenet, global_batch: 48, updates: 3}\n"
    "cluster:\n  groups:\n"
    "    - {instance: c5.xlarge, count: 3, t0_s: 0.0, samples_per_s: 1000.0, max_batch: 512}\n"
    "network: {name: ring_allreduce}\n"
    "numerics: {model: softmax, hidden: 16, learning_rate: 0.5}\n"
    "scheme: {name: static}\n"
)
DRIVER = """
import json, resource, sys, time
t0 = time.perf_counter()
from lbsim.runtime.launch import launch
from lbsim.runtime.worker import Job, Task
method, scenario, out = sys.argv[1:4]
launch(Job(scenario=scenario, tasks=(Task("train", out),)), 3, method=method)
wall = time.perf_counter() - t0
import multiprocessing.forkserver as fs
fs._forkserver._stop()  # reap the server (and so count its ranks' CPU time)
ru = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
print(json.dumps({"wall_s": wall, "cpu_s": sum(r.ru_utime + r.ru_stime for r in ru)}))
"""


def sample(method: str, folder: Path) -> dict[str, float]:
    """One launcher process: its wall and CPU seconds (with every descendant's)."""
    scenario = folder / "s.yaml"
    scenario.write_text(SCENARIO, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-c", DRIVER, method, str(scenario), str(folder / f"run_{method}")],
                          cwd=folder, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                          check=True, timeout=600)
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def compare(pairs: int = 3) -> dict[str, dict[str, float]]:
    """Median wall and CPU seconds per start method over ``pairs`` alternated pairs."""
    got: dict[str, list[dict[str, float]]] = {"forkserver": [], "spawn": []}
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(pairs):
            order = ("spawn", "forkserver") if i % 2 else ("forkserver", "spawn")
            for method in order:
                got[method].append(sample(method, Path(tmp)))
    out = {m: {k: statistics.median(s[k] for s in got[m]) for k in ("wall_s", "cpu_s")} for m in got}
    out["load"] = {"before": load_before, "after": os.getloadavg()[0]}
    return out


def test_rank_start_forkserver_vs_spawn() -> None:
    print(json.dumps(compare(), indent=1))


if __name__ == "__main__":
    print(json.dumps(compare(int(sys.argv[1]) if len(sys.argv) > 1 else 3), indent=1))
