"""Running an advice's matrix in parallel: schemes x variants x seeds on a sweep backend.

The runs go through :mod:`lbsim.sweep.backends` (a local process pool, or Dask), as a sweep's do;
each task gets a resolved scenario's YAML (its identity, as a sweep point's) and returns only the
figures an advice needs (:func:`run_metrics`), so nothing large crosses a process boundary and no
run folder is written: the advice's own files (``runs.csv``, ``advise.json``) hold every run's row.

:func:`run_scenario` is the one place an advice runs a scenario: through the core's run lifecycle
(:func:`lbsim.lifecycle.simulate`, whose default engine is the simulator), as every front door does.

**Seeds that change nothing are not repeated.** With three or more seeds asked for, the first two
run first; if every scheme on every variant gives identical figures for both, the scenario has no
random element the seed reaches (scheduled contention, no jitter) and the other seeds would
repeat them: they are not run, and the report says the result is deterministic.

**More seeds where the interval is wide.** After the first ``seeds``, a variant whose speedup
interval (any scheme's, against the baseline) is wider than ``±target`` (relative half-width on
the log scale) gets the same number of seeds again, every scheme on it (the pairs stay complete),
until ``max_seeds``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from lbsim import lifecycle
from lbsim.advise.plan import BASELINE, Plan, RunSpec
from lbsim.advise.run_text import read_run_text
from lbsim.engine import Engine, RunResult
from lbsim.scenario.loader import scenario_from_data
from lbsim.scenario.schema import Scenario
from lbsim.stats.intervals import MIN_VALUES, quantiles, ratio_mean
from lbsim.sweep.backends import Backend

SUMMARY_KEYS = ("throughput_samples_per_s", "samples", "updates", "sim_time_s", "compute_fraction", "comm_fraction",
                "wait_fraction", "fetch_fraction", "staleness_mean", "staleness_max", "mean_iteration_s",
                "worker_iterations", "time_to_target_s", "final_accuracy")


def run_scenario(engine: Engine | None, scenario: Scenario) -> RunResult:
    """Run one scenario: the single call an advice makes into an engine (None: the lifecycle's default)."""
    return lifecycle.simulate(scenario, engine=engine)


def iteration_times(iterations: Any) -> np.ndarray:
    """Every completed (not dropped) worker-iteration's time, start to the worker's next start."""
    cols = getattr(iterations, "columns", None)
    if cols is not None:
        keep = ~cols["dropped"]
        return np.asarray((cols["end_s"] - cols["start_s"])[keep], dtype=float)
    return np.array([r.iteration_s for r in iterations if not r.dropped], dtype=float)


def run_metrics(result: Any, global_batch: int) -> dict[str, Any]:
    """The figures of one run an advice uses: summary fields, iteration-time percentiles, step time."""
    s = result.summary
    out: dict[str, Any] = {k: s[k] for k in SUMMARY_KEYS if k in s}
    out.update({f"iteration_{k}_s": v for k, v in quantiles(iteration_times(result.iterations)).items()})
    thr = s["throughput_samples_per_s"]
    out["step_s"] = global_batch / thr if thr > 0 else math.inf  # seconds per global batch of samples
    return out


def advise_task(engine: Engine | None, resolved_yaml: str) -> dict[str, Any]:
    """One task on a worker: load the resolved scenario, run it, return its metrics."""
    scenario = scenario_from_data(read_run_text(resolved_yaml))
    return run_metrics(run_scenario(engine, scenario), scenario.workload.global_batch)


@dataclass(frozen=True)
class RunRecord:
    arm: str
    variant: int
    seed: int
    metrics: dict[str, Any]


class RunFailed(Exception):
    """A run of the matrix failed (not bad input: that is caught before anything runs)."""


def run_all(specs: Sequence[RunSpec], engine: Engine | None, backend: Backend,
            on_done: Callable[[], None] | None = None) -> list[RunRecord]:
    """Run ``specs`` on ``backend``; the records in the specs' order (results never depend on the backend)."""
    by_id = {s.run_id: s for s in specs}
    got: dict[str, dict[str, Any]] = {}
    for run_id, outcome in backend.map_unordered(partial(advise_task, engine), [(s.run_id, s.yaml) for s in specs]):
        if isinstance(outcome, BaseException):
            raise RunFailed(f"run {run_id} failed: {type(outcome).__name__}: {' '.join(str(outcome).split())}")
        got[run_id] = outcome
        if on_done:
            on_done()
    return [RunRecord(s.arm, s.variant, s.seed, got[s.run_id]) for s in by_id.values()]


def wide_variants(records: Iterable[RunRecord], target: float) -> list[int]:
    """The variants where some scheme's speedup interval is wider than ``±target`` (one with no
    interval, from fewer than 3 seeds, is left as it is: the report says it has none)."""
    base: dict[tuple[int, int], float] = {}
    arms: dict[tuple[str, int], dict[int, float]] = {}
    for r in records:
        thr = r.metrics["throughput_samples_per_s"]
        if r.arm == BASELINE:
            base[(r.variant, r.seed)] = thr
        arms.setdefault((r.arm, r.variant), {})[r.seed] = thr
    wide = set()
    for (_arm, variant), by_seed in arms.items():
        ratios = [t / base[(variant, s)] for s, t in by_seed.items() if t > 0 and base.get((variant, s), 0) > 0]
        est = ratio_mean(ratios) if ratios else None
        if est is None or est.low is None or est.high is None:
            continue
        if est.low > 0 and math.sqrt(est.high / est.low) - 1.0 > target:
            wide.add(variant)
    return sorted(wide)


def identical_seeds(records: Iterable[RunRecord]) -> bool:
    """Whether every (scheme, variant) has the same figures for each of its seeds (and some has two)."""
    seen: dict[tuple[str, int], dict[str, Any]] = {}
    repeated = False
    for r in records:
        first = seen.setdefault((r.arm, r.variant), r.metrics)
        if first is not r.metrics:
            repeated = True
            if first != r.metrics:
                return False
    return repeated


@dataclass(frozen=True)
class Outcome:
    records: list[RunRecord]
    deterministic: bool  # the first two seeds gave identical runs everywhere; the rest were not run


def execute(plan: Plan, engine: Engine | None, backend: Backend, *, max_seeds: int, target: float,
            on_progress: Callable[[int, int], None] | None = None) -> Outcome:
    """The whole matrix, with more seeds for the variants whose intervals are wide (see the module)."""
    probe = len(plan.seeds) >= MIN_VALUES
    specs = plan.runs(seeds=plan.seeds[:2]) if probe else plan.runs()
    total = len(plan.runs())
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        if on_progress:
            on_progress(done, total)

    if on_progress:
        on_progress(0, total)
    records = run_all(specs, engine, backend, tick)
    if probe:
        if identical_seeds(records):
            if on_progress:
                on_progress(done, done)
            return Outcome(records, True)
        records += run_all(plan.runs(seeds=plan.seeds[2:]), engine, backend, tick)
    seeds = list(plan.seeds)
    step = len(seeds)
    while len(seeds) < max_seeds:
        wide = wide_variants(records, target)
        if not wide:
            break
        extra = [seeds[-1] + 1 + i for i in range(min(step, max_seeds - len(seeds)))]
        more = plan.runs(seeds=extra, variants=wide)
        total += len(more)
        records += run_all(more, engine, backend, tick)
        seeds += extra
    return Outcome(records, False)
