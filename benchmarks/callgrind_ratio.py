"""Machine instructions per worker-iteration: the parameter-server fast path against a bare SimPy loop.

Run: ``python benchmarks/callgrind_ratio.py asp@16 dssp@1024 ...`` (``scheme@workers[:updates]``; needs ``valgrind``; minutes per
case: valgrind runs Python ~50x slower). Load-free like ``bench_opcodes.py``, but it counts what the
CPU executes (callgrind's ``Ir``), the C inside every call included — heap operations, float
hashing, dict and tuple work, numpy — where ``bench_opcodes.py`` counts each Python bytecode as
one. Per case: the events the SimPy event path processes on the scenario (counted natively, as
``bench_simulator.count_events``), then two runs under ``valgrind --tool=callgrind`` with
collection on only inside ``sys.call_tracing`` (``--toggle-collect=sys_call_tracing``, a C
function nothing else calls; ``eval``, used before, is also called by the library's imports and
``typing`` during the warm-up, whose code was then counted too): the bare loop
(:func:`bench_simulator.bare_simpy_loop`, those events) and ``simulate`` (the fast path), each
after a warm-up of the same call so that lazy imports and caches are not counted. Sizes as
``bench_opcodes.py``: 4,000 updates at 16 and 256 workers, 16,000 at 1,024 (WBSP: that many
local steps divided by the workers). ``PYTHONHASHSEED=0`` keeps the runs repeatable.

Prints, per case: the events, both instruction counts, both per worker-iteration and the ratio
bare / ours (the issue's target, in time: >= 2).

``--cache-mib M`` (e.g. ``--cache-mib 1 asp@16 asp@1024``) also simulates a data cache of M MiB,
16-way, 64-byte lines (callgrind's first-level data cache set to that size: this VM's CPUs give
``perf`` no hardware counters, and this valgrind overrides ``--LL`` with the host's L3) and prints
its misses (reads and writes) per worker-iteration for both; the cache is simulated through the
warm-up, so the measured call starts from the cache it would find.

``--keep DIR`` keeps callgrind's profiles as ``DIR/bare.CASE.out``
and ``DIR/ours.CASE.out``, for ``callgrind_annotate --show=D1mr,D1mw,Ir --sort=D1mr DIR/ours.asp@1024.out``
(where, by C function, the instructions and misses fall).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _size(scheme: str, workers: int) -> int:
    updates = 4000 * max(1, workers // 256)
    return max(10, updates // workers) if scheme == "wbsp" else updates


def _inner(mode: str, scheme: str, workers: int, updates: int, events: int) -> None:
    """Under valgrind: warm up, then the measured call inside ``sys.call_tracing`` (the only code collected)."""
    from bench_simulator import bare_simpy_loop, scenario

    from lbsim.simulator.run import simulate

    sc = scenario(scheme, workers, updates)
    if mode == "bare":
        bare_simpy_loop(min(events, 20_000), workers)
        sys.call_tracing(bare_simpy_loop, (events, workers))  # the collected region
    else:
        simulate(sc)
        result = sys.call_tracing(simulate, (sc,))  # the collected region
        print(f"worker_iterations={result.summary['worker_iterations']}")


def _count(pattern: str, stderr: str) -> int:
    found = re.search(pattern + r":\s+([\d,]+)", stderr)
    if found is None:
        raise RuntimeError(f"no {pattern!r} from valgrind:\n{stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def _instructions(mode: str, scheme: str, workers: int, updates: int, events: int,
                  cache_mib: int | None = None, keep: str | None = None) -> tuple[int, int | None, str]:
    """(instructions, data-cache misses or None, the inner run's stdout) of the collected call."""
    cache = [] if cache_mib is None else ["--cache-sim=yes", f"--D1={cache_mib << 20},16,64"]
    out_file = "/dev/null" if keep is None else str(Path(keep) / f"{mode}.{scheme}@{workers}.out")
    cmd = ["valgrind", "--tool=callgrind", "--toggle-collect=sys_call_tracing", f"--callgrind-out-file={out_file}",
           *cache, sys.executable, __file__, "--inner", mode, scheme, str(workers), str(updates), str(events)]
    env = dict(os.environ, PYTHONHASHSEED="0")
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    misses = None if cache_mib is None else _count(r"D1  misses", out.stderr)
    return _count(r"I\s+refs", out.stderr), misses, out.stdout


def main(cases: list[str], cache_mib: int | None = None, keep: str | None = None) -> None:
    from bench_simulator import count_events, scenario

    for case in cases:
        scheme, rest = case.split("@")
        workers_text, _, updates_text = rest.partition(":")
        workers = int(workers_text)
        updates = int(updates_text) if updates_text else _size(scheme, workers)
        events = count_events(scenario(scheme, workers, updates))
        bare, bare_misses, _ = _instructions("bare", scheme, workers, updates, events, cache_mib, keep)
        ours, our_misses, stdout = _instructions("ours", scheme, workers, updates, events, cache_mib, keep)
        n = int(re.search(r"worker_iterations=(\d+)", stdout).group(1))  # type: ignore[union-attr]
        misses = "" if bare_misses is None or our_misses is None else (
            f"; {cache_mib} MiB cache misses bare {bare_misses / n:,.1f}/wi, ours {our_misses / n:,.1f}/wi")
        print(f"{case}: updates {updates}, events {events}, worker-iterations {n}; instructions bare {bare:,} "
              f"({bare / n:,.0f}/wi), ours {ours:,} ({ours / n:,.0f}/wi); ratio {bare / ours:.3f}{misses}", flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--inner"]:
        _inner(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
    else:
        parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
        parser.add_argument("cases", nargs="*", help="scheme@workers[:updates] (default: every scheme at 16, 256, 1,024)")
        parser.add_argument("--cache-mib", type=int, help="also simulate a data cache of this many MiB and count its misses")
        parser.add_argument("--keep", metavar="DIR", help="keep callgrind's profiles in DIR (for callgrind_annotate)")
        args = parser.parse_args()
        if args.keep is not None:
            Path(args.keep).mkdir(parents=True, exist_ok=True)
        main(args.cases or [f"{s}@{w}" for s in ("asp", "ssp", "dssp", "elastic_bsp", "wbsp") for w in (16, 256, 1024)],
             args.cache_mib, args.keep)
