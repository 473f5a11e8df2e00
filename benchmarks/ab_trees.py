"""A/B of two checkouts on the async benchmark's cases: alternated fresh processes, process time.

Run: ``python benchmarks/ab_trees.py TREE_A TREE_B asp@1024,wbsp@16 [PAIRS]``, where each tree is a
checkout of the repository (e.g. ``git worktree add /tmp/base 2cf3c1f``). For each case
(``scheme@workers``, sized as ``bench_simulator.test_async_event_rate_vs_bare_simpy``: 60,000
updates, WBSP 60,000 / workers), ``PAIRS`` times (default 3): a fresh Python process on tree A,
then one on tree B, each importing that tree's code only, running ``simulate`` once to warm up and
then 5 times, and reporting the least process time of the 5 (the run least disturbed by the rest
of the machine; process time excludes waiting for the CPU). Alternating keeps both trees under the
same load. Prints per case the median over the pairs for each tree, B / A, and every pair's figures.
``TREE_B`` may be ``-``: tree A alone, with the time per worker-iteration (how cost grows with the
workers: ``python benchmarks/ab_trees.py . - asp@16,asp@512,asp@768,asp@1024 1``).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

_CHILD = r"""
import sys, time
sys.path[:0] = [{tree!r} + "/benchmarks", {tree!r}]
import lbsim
assert lbsim.__file__.startswith({tree!r}), lbsim.__file__
from bench_simulator import scenario
from lbsim.simulator.run import simulate
workers = {workers}
# bench_simulator's sizing of the async ratio, written here: the tree may be a checkout from before any helper
updates = max(10, 60_000 // workers) if {scheme!r} == "wbsp" else 60_000
sc = scenario({scheme!r}, workers, updates)
simulate(sc)
best = float("inf")
for _ in range(5):
    c = time.process_time()
    simulate(sc)
    best = min(best, time.process_time() - c)
print(best, simulate(sc).summary["worker_iterations"])
"""


def least_process_time(tree: str, scheme: str, workers: int) -> tuple[float, int]:
    """The least process time of 5 runs of the case in a fresh process on ``tree``, and its worker-iterations."""
    code = _CHILD.format(tree=str(Path(tree).resolve()), scheme=scheme, workers=workers)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"})
    if out.returncode:
        raise SystemExit(f"{tree} {scheme}@{workers} failed:\n{out.stderr[-2000:]}")
    best, iterations = out.stdout.split()
    return float(best), int(iterations)


def main(a: str, b: str, cases: str, pairs: int) -> None:
    trees = [a] if b == "-" else [a, b]
    for case in cases.split(","):
        scheme, workers = case.split("@")
        times: dict[str, list[float]] = {t: [] for t in trees}
        n = 0
        for _ in range(pairs):
            for tree in trees:
                best, n = least_process_time(tree, scheme, int(workers))
                times[tree].append(best)
        ma = statistics.median(times[a])
        if b == "-":
            print(f"{case:16s} {ma:.4f} s  {ma / n * 1e6:.2f} us per worker-iteration ({n})  {[round(x, 3) for x in times[a]]}",
                  flush=True)
            continue
        mb = statistics.median(times[b])
        print(f"{case:16s} A {ma:.4f} s  B {mb:.4f} s  B/A {mb / ma:.3f}   "
              f"A {[round(x, 3) for x in times[a]]} B {[round(x, 3) for x in times[b]]}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 3)
