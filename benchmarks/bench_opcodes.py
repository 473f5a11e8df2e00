"""Python opcodes per worker-iteration: the parameter-server fast path against a bare SimPy loop.

Run: ``python -m pytest benchmarks/bench_opcodes.py --benchmark-only`` (measured, never asserted;
a few minutes). Wall and CPU times on a shared 2-core machine move by tens of percent with other
jobs (docs/performance.md); the number of bytecode instructions CPython executes does not, and on
this code it tracks the time (both loops spend their time interpreting Python). Each case counts,
with ``sys.settrace`` opcode events, the instructions of :func:`bench_simulator.bare_simpy_loop`
given as many events as the SimPy event path processes on the scenario, and of ``simulate`` on
the fast path; ``extra_info``: both per worker-iteration and their ratio bare / ours (the
issue's target, in time: >= 2). Calls into C (heap operations, numpy) count as one instruction
each, so the ratio is a guide, not a replacement for ``bench_simulator.py``'s times. The cyclic
garbage collector runs in C, so its passes are not counted: the bare loop is counted as users run
it and with the GC suspended as the fast path suspends it (``ratio_to_bare_gc_off``), and the two
counts agree — the GC's cost shows only in ``bench_simulator.py``'s times.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lbsim.simulator.run import simulate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_simulator import ASYNC, bare_simpy_loop, count_events, scenario  # noqa: E402


def opcodes(fn: Callable[[], Any]) -> int:
    """Bytecode instructions executed by ``fn()`` (every Python frame it runs)."""
    count = [0]

    def trace(frame, event, arg):  # type: ignore[no-untyped-def]
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        if event == "opcode":
            count[0] += 1
        return trace

    sys.settrace(trace)
    try:
        fn()
    finally:
        sys.settrace(None)
    return count[0]


@pytest.mark.parametrize("workers", (16, 256, 1024))
@pytest.mark.parametrize("scheme", ASYNC)
def test_opcodes_per_worker_iteration(benchmark, scheme: str, workers: int) -> None:
    updates = 4000 * max(1, workers // 256)  # 1,024 workers: 16,000, so that the run's set-up is not most of it
    if scheme == "wbsp":
        updates = max(10, updates // workers)
    sc = scenario(scheme, workers, updates)
    events = count_events(sc)
    result = simulate(sc)
    n = result.summary["worker_iterations"]
    counts = benchmark.pedantic(lambda: (opcodes(lambda: bare_simpy_loop(events, workers)),
                                         opcodes(lambda: bare_simpy_loop(events, workers, gc_off=True)),
                                         opcodes(lambda: simulate(sc))),
                                rounds=1, iterations=1)
    bare, bare_gc_off, ours = counts
    benchmark.extra_info.update(events=events, worker_iterations=n, bare_opcodes_per_wi=round(bare / n, 1),
                                bare_gc_off_opcodes_per_wi=round(bare_gc_off / n, 1),
                                ours_opcodes_per_wi=round(ours / n, 1), ratio_to_bare=round(bare / ours, 3),
                                ratio_to_bare_gc_off=round(bare_gc_off / ours, 3))
    assert n > 0  # a result, not a count
