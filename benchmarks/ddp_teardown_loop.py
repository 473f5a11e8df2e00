"""How often the tests' three DDP jobs hang: the teardown deadlock that ``lbsim.runtime.ddp.end_group`` avoids.

Run: ``python benchmarks/ddp_teardown_loop.py RUNS [--busy K]`` from the repository root. Each run is
``tests/conftest.py``'s shared gloo ranks (3 ranks, the jobs of ``DDP3_MODULES`` one after another),
started by the tests' harness (``tests/rank_harness.py``) with a 60 s guard, so a hung rank ends the run
with its threads' stacks instead of holding the loop. ``--busy K`` keeps K CPU-bound processes running
beside it (the hang needs a gloo worker thread to be late: on this project's 2-core VM it showed with
both cores busy). Prints one line per run, the stacks of each hang, and the count at the end.

Figures (docs/library.md, "Ending the job"), with both cores busy: the jobs as they were before
``end_group()`` (``tests/test_ddp_*.py`` at commit 0d6649b), 2 hangs in 82 runs; with it, 0 in 223.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"


def _busy() -> None:
    while True:
        pass


def main(runs: int, busy: int) -> int:
    sys.path.insert(0, str(TESTS))
    import conftest
    from rank_harness import start_ranks

    from lbsim.runtime.launch import preload_fork_server

    preload_fork_server()
    hogs = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(busy)]
    for h in hogs:
        h.start()
    hangs = 0
    try:
        for i in range(runs):
            with tempfile.TemporaryDirectory() as folder:
                jobs = [(name, str(Path(folder) / f"{name}.rendezvous"), str(Path(folder) / f"{name}.out"))
                        for name in conftest.DDP3_MODULES]
                started = time.monotonic()
                try:
                    start_ranks(conftest._ddp3_rank, (jobs,), 3, timeout_s=60)
                    print(f"{i} ok {time.monotonic() - started:.1f} s", flush=True)
                except AssertionError as err:  # a hang, with the ranks' stacks
                    hangs += 1
                    print(f"{i} HUNG {time.monotonic() - started:.1f} s\n{err}", flush=True)
    finally:
        for h in hogs:
            h.kill()
    print(f"{runs} runs, {hangs} hung", flush=True)
    return 1 if hangs else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=int)
    parser.add_argument("--busy", type=int, default=0, help="CPU-bound processes beside the loop")
    args = parser.parse_args()
    sys.exit(main(args.runs, args.busy))
