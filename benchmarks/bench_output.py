"""End to end: ``lbsim run scenarios/bench/large.yaml`` (both formats) against simulate alone and a bare SimPy loop.

Run: ``python -m pytest benchmarks/bench_output.py --benchmark-only -s`` (measured, never asserted).
One case, heavy (~1 minute): each of its rounds times, one after the other on the same machine,

* ``bare`` — :func:`bench_simulator.bare_simpy_loop` of the same size: 1,024 processes x 1,000
  timeouts (1,025,024 events);
* ``simulate`` — :func:`lbsim.simulator.run.simulate` of large.yaml alone (1,024 workers x 1,000
  updates: 1,024,000 worker-iterations), no files;
* ``write_csv`` / ``write_parquet`` — :func:`lbsim.output.write_run` of that result alone (every
  table, provenance, summary);
* ``run_csv`` / ``run_parquet`` — ``lbsim run scenarios/bench/large.yaml --out DIR -q --format F``
  end to end, in this process (``lbsim.cli.main``: load, simulate, write every file);
* ``cli_csv`` / ``cli_parquet`` — the same as a fresh ``python -m lbsim`` process (interpreter
  start and imports included), once per round.

``extra_info``: the median wall seconds of each, ``write_share_*`` = write / run (the share of
the run spent writing; it dominated before: ~36-80 s of writing for ~1.5 s of simulating),
``write_vs_simulate_*`` = write / simulate, and ``ratio_*`` = bare / run (target >= 0.6: the whole run, files included, within
1 / 0.6 = 1.67x the time a bare SimPy loop of the same size takes just to process its events;
the same convention as ``ratio_to_bare`` in bench_simulator.py), plus the files' sizes. Every
figure comes in wall seconds and in CPU seconds (``*_cpu``: this process's threads plus the
CLI child processes; less disturbed by other processes on a shared machine, but polars writes
with several threads, so its CPU seconds exceed its wall seconds on an idle machine), and
``ratio_*_best_wall`` compares the fastest rounds.
"""

from __future__ import annotations

import contextlib
import io
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_simulator import LARGE, REPO, bare_simpy_loop  # noqa: E402

from lbsim.cli import main  # noqa: E402
from lbsim.output import write_run  # noqa: E402
from lbsim.scenario.loader import load_scenario  # noqa: E402
from lbsim.simulator.run import simulate  # noqa: E402

PROCESSES, TIMEOUTS = 1024, 1000
ROUNDS = 3


class _Clock:
    """Wall seconds and CPU seconds (this process's threads and finished children) of each timed step."""

    def __init__(self) -> None:
        self.wall: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}

    @staticmethod
    def _cpu() -> float:
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.process_time() + kids.ru_utime + kids.ru_stime

    def time(self, key: str, fn):  # type: ignore[no-untyped-def]
        c0, t0 = self._cpu(), time.perf_counter()
        out = fn()
        self.wall.setdefault(key, []).append(time.perf_counter() - t0)
        self.cpu.setdefault(key, []).append(self._cpu() - c0)
        return out


def _run(out: Path, fmt: str) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["run", str(LARGE), "--out", str(out), "-q", "--format", fmt]) == 0


def _cli(out: Path, fmt: str) -> None:
    subprocess.run([sys.executable, "-m", "lbsim", "run", str(LARGE), "--out", str(out), "-q", "--format", fmt],
                   cwd=REPO, check=True, capture_output=True)


def test_large_run_end_to_end_vs_bare_simpy(benchmark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    clock = _Clock()
    sizes: dict[str, int] = {}
    events = PROCESSES * TIMEOUTS + PROCESSES

    def one_round() -> None:
        clock.time("bare", lambda: bare_simpy_loop(events, PROCESSES))
        sc = load_scenario(LARGE)
        res = clock.time("simulate", lambda: simulate(sc))
        for fmt in ("csv", "parquet"):
            out = tmp_path / f"w{fmt}"
            clock.time(f"write_{fmt}", lambda out=out, fmt=fmt: write_run(out, res.iterations, res.updates, res.summary,
                                                                          res.decisions, fmt=fmt))
            shutil.rmtree(out)
        res = None  # free the records before the end-to-end runs
        for fmt in ("csv", "parquet"):
            out = tmp_path / fmt
            clock.time(f"run_{fmt}", lambda out=out, fmt=fmt: _run(out, fmt))
            sizes[f"iterations_{fmt}_mib"] = round((out / f"iterations.{fmt}").stat().st_size / 2**20, 1)
            shutil.rmtree(out)
            clock.time(f"cli_{fmt}", lambda out=out, fmt=fmt: _cli(out, fmt))
            shutil.rmtree(out)

    benchmark.pedantic(one_round, rounds=ROUNDS, iterations=1, warmup_rounds=0)
    info: dict[str, float] = {}
    for kind, table in (("wall", clock.wall), ("cpu", clock.cpu)):
        med = {k: statistics.median(v) for k, v in table.items()}
        info.update({f"{k}_{kind}_median_s": round(v, 3) for k, v in med.items()})
        for fmt in ("csv", "parquet"):
            info[f"write_share_{fmt}_{kind}"] = round(med[f"write_{fmt}"] / med[f"run_{fmt}"], 3)
            info[f"write_vs_simulate_{fmt}_{kind}"] = round(med[f"write_{fmt}"] / med["simulate"], 3)
            info[f"ratio_{fmt}_{kind}"] = round(med["bare"] / med[f"run_{fmt}"], 3)
            info[f"ratio_{fmt}_cli_process_{kind}"] = round(med["bare"] / med[f"cli_{fmt}"], 3)
        if kind == "wall":  # the least disturbed round of each, on a shared machine
            for fmt in ("csv", "parquet"):
                info[f"ratio_{fmt}_best_wall"] = round(min(table["bare"]) / min(table[f"run_{fmt}"]), 3)
    benchmark.extra_info.update(info, **sizes, target_ratio=0.6, rounds=ROUNDS)
    print({**info, **sizes})
    assert sizes["iterations_parquet_mib"] > 0  # files were written: a result, not a time
