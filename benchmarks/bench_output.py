"""End to end: ``lbsim run scenarios/bench/large.yaml`` (both formats) against simulate alone and a bare SimPy loop.

Run: ``python -m pytest benchmarks/bench_output.py --benchmark-only -s`` (measured, never asserted).
One case, heavy (~1 minute): each of its rounds times, one after the other on the same machine,

* ``bare`` — :func:`bench_simulator.bare_simpy_loop` of the same size: 1,024 processes x 1,000
  timeouts (1,025,024 events);
* ``simulate`` — :func:`simulator.run.simulate` of large.yaml alone (1,024 workers x 1,000
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
the same convention as ``ratio_to_bare`` in bench_simulator.py), plus the files' sizes.
"""

from __future__ import annotations

import contextlib
import io
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
from simulator.run import simulate  # noqa: E402

PROCESSES, TIMEOUTS = 1024, 1000
ROUNDS = 3


def _wall(fn) -> float:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _run(out: Path, fmt: str) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["run", str(LARGE), "--out", str(out), "-q", "--format", fmt]) == 0


def _cli(out: Path, fmt: str) -> None:
    subprocess.run([sys.executable, "-m", "lbsim", "run", str(LARGE), "--out", str(out), "-q", "--format", fmt],
                   cwd=REPO, check=True, capture_output=True)


def test_large_run_end_to_end_vs_bare_simpy(benchmark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    keys = ("bare", "simulate", "write_csv", "write_parquet", "run_csv", "run_parquet", "cli_csv", "cli_parquet")
    times: dict[str, list[float]] = {k: [] for k in keys}
    sizes: dict[str, int] = {}
    events = PROCESSES * TIMEOUTS + PROCESSES

    def one_round() -> None:
        times["bare"].append(bare_simpy_loop(events, PROCESSES))
        sc = load_scenario(LARGE)
        t0 = time.perf_counter()
        res = simulate(sc)
        times["simulate"].append(time.perf_counter() - t0)
        for fmt in ("csv", "parquet"):
            t0 = time.perf_counter()
            write_run(tmp_path / f"w{fmt}", res.iterations, res.updates, res.summary, res.decisions, fmt=fmt)
            times[f"write_{fmt}"].append(time.perf_counter() - t0)
            shutil.rmtree(tmp_path / f"w{fmt}")
        res = None  # free the records before the end-to-end runs
        for fmt in ("csv", "parquet"):
            out = tmp_path / fmt
            times[f"run_{fmt}"].append(_wall(lambda out=out, fmt=fmt: _run(out, fmt)))
            sizes[f"iterations_{fmt}_mib"] = round((out / f"iterations.{fmt}").stat().st_size / 2**20, 1)
            shutil.rmtree(out)
            times[f"cli_{fmt}"].append(_wall(lambda out=out, fmt=fmt: _cli(out, fmt)))
            shutil.rmtree(out)

    benchmark.pedantic(one_round, rounds=ROUNDS, iterations=1, warmup_rounds=0)
    med = {k: statistics.median(v) for k, v in times.items()}
    info: dict[str, float] = {f"{k}_median_s": round(v, 3) for k, v in med.items()}
    for fmt in ("csv", "parquet"):
        info[f"write_share_{fmt}"] = round(med[f"write_{fmt}"] / med[f"run_{fmt}"], 3)
        info[f"write_vs_simulate_{fmt}"] = round(med[f"write_{fmt}"] / med["simulate"], 3)
        info[f"ratio_{fmt}"] = round(med["bare"] / med[f"run_{fmt}"], 3)
        info[f"ratio_{fmt}_cli_process"] = round(med["bare"] / med[f"cli_{fmt}"], 3)
    benchmark.extra_info.update(info, **sizes, target_ratio=0.6, rounds=ROUNDS)
    print({**info, **sizes})
    assert sizes["iterations_parquet_mib"] > 0  # files were written: a result, not a time
