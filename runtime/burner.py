"""A co-located CPU burner: ``python -m lbsim.runtime.burner '{"scenario": ..., "worker": w, ...}'``.

Started by a rank in ``--contention real`` mode (:class:`lbsim.runtime.inject.RealBurner`). It rebuilds the
worker's slowdown schedule from the scenario (the same deterministic model as the simulator), says
``ready`` on stdout, reads the run's clock origin (``time.monotonic()`` of the start barrier, a
system-wide clock on Linux) from stdin, then runs ``ceil(f_max - 1)`` busy-loop processes per core of the worker, each pinned to its core. Every
``PERIOD_S`` the j-th loop of a core burns for ``clamp(f(t) - 1 - j, 0, 1)`` of the period and
sleeps the rest, so with the worker busy the kernel's fair scheduler leaves it about ``1/f(t)`` of
the core. It stops when its parent (the rank) exits or on SIGTERM. Imports no torch (fast start).
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import signal
import sys
import time

from lbsim.contention.model import build_contention
from lbsim.scenario.loader import load_scenario
from lbsim.scenario.resolve import resolve_workers

from .inject import max_factor, time_factor

PERIOD_S = 0.02
MAX_LOOPS_PER_CORE = 8


def _loop(core: int, j: int, t0: float, cont: object, parent: int) -> None:  # pragma: no cover - runs in a child

    os.sched_setaffinity(0, {core})
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    while os.getppid() == parent:
        start = time.monotonic()
        f, _ = time_factor(cont, start - t0)  # type: ignore[arg-type]
        share = min(1.0, max(0.0, f - 1.0 - j))
        busy_until = start + share * PERIOD_S
        while time.monotonic() < busy_until:
            pass
        left = start + PERIOD_S - time.monotonic()
        if left > 0:
            time.sleep(left)


def main(argv: list[str]) -> int:  # pragma: no cover - exercised through the runtime tests in a subprocess
    """Burn CPU alongside one rank, as hard as its contention schedule says, until the rank goes away."""
    args = json.loads(argv[0])
    scenario = load_scenario(args["scenario"], args["overrides"])
    workers = resolve_workers(scenario)
    cont = build_contention(scenario, workers)[args["worker"]]
    horizon = scenario.workload.time_budget_s or 24 * 3600.0
    loops = min(MAX_LOOPS_PER_CORE, math.ceil(max_factor(cont, horizon) - 1.0))
    rank_pid = os.getppid()
    me = os.getpid()
    print("ready", flush=True)
    line = sys.stdin.readline()
    if not line:  # the rank went away before the run started
        return 0
    t0 = float(line)
    ctx = multiprocessing.get_context("fork")
    children = [ctx.Process(target=_loop, args=(core, j, t0, cont, me), daemon=True)
                for core in args["cores"] for j in range(loops)]
    for c in children:
        c.start()
    stop = False

    def _stop(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    while not stop and os.getppid() == rank_pid:
        time.sleep(0.1)
    for c in children:
        c.terminate()
    for c in children:
        c.join(timeout=2)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
