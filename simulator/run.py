"""One simulation run: build -> run -> collect (desmod's lifecycle).

:func:`simulate` takes a loaded scenario and returns a :class:`~lbsim.engine.RunResult`
with the records and the summary: it implements the core's engine contract
(:class:`lbsim.engine.Engine`). Writing files is the run lifecycle's job
(:mod:`lbsim.lifecycle`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lbsim.engine import ProgressFn, RunResult
from lbsim.metrics.records import ColumnRows
from lbsim.metrics.summary import summarize
from lbsim.numerics.trainer import Trainer
from lbsim.scenario.resolve import resolve_run, select_workers
from lbsim.scenario.schema import Scenario
from lbsim.schemes.base import DecisionLog, aggregation_of, is_synchronous

from .asynchronous import AsyncDriver
from .env import SimEnv
from .fast_ps import Reported, run_fast_ps
from .fast_ps import ineligible as ps_ineligible
from .fast_sync import FastSync, ineligible
from .sync import SyncDriver
from .wbsp import WBSPDriver

# Which engine loop carries out a scheme's decisions, by the scheme's ``driver`` attribute.
DRIVERS = {"sync": SyncDriver, "async": AsyncDriver, "wbsp": WBSPDriver}

__all__ = ["DRIVERS", "RunResult", "build_trainer", "simulate"]


def simulate(scenario: Scenario, progress: ProgressFn | None = None, *, fast: bool = True) -> RunResult:
    """Run ``scenario``; ``fast=False`` forces the event path where a fast path would apply.

    Scenarios that qualify take a fast path, which produces the same records as the event path:
    synchronous ones on a ring (no backup workers, no data section:
    :func:`lbsim.simulator.fast_sync.ineligible`), asynchronous and WBSP ones on a parameter server
    (no data section: :func:`lbsim.simulator.fast_ps.ineligible`).
    """
    run = resolve_run(scenario)  # found, not redone, when the loader resolved this scenario
    reported = Reported(progress)
    env = _environment(scenario, run, reported.callback)
    scheme = env.scheme
    if fast and ineligible(env) is None:
        FastSync(env).run()
    elif fast and ps_ineligible(env) is None:
        if not run_fast_ps(env):  # a tie only SimPy's ids order: the event path, from the start
            env = _environment(scenario, run, reported.resumed())
            scheme = env.scheme
            _run_events(env)
    else:
        _run_events(env)
    extra = dict(scheme.diagnostics())
    curve: tuple[dict[str, float], ...] = ()
    if env.numerics is not None:
        extra.update(env.numerics.finish(env.now))
        curve = tuple(env.numerics.curve())
    iterations, updates = env.iterations.table(), env.updates.table()
    summary = summarize(
        iterations, updates, scheme=scheme.name, seed=scenario.seed, engine="simulator",
        workers=env.n, end_s=env.now, synchronous=is_synchronous(scheme), extra=extra,
    )
    decisions: Sequence[dict[str, Any]] = ()
    if isinstance(scheme, DecisionLog):
        rows = scheme.decision_rows()
        decisions = rows if isinstance(rows, ColumnRows) else tuple(rows)  # ColumnRows: built on access
    return RunResult(iterations, updates, summary, decisions, curve)


def _environment(scenario: Scenario, run: Any, progress: ProgressFn | None) -> SimEnv:
    """A fresh environment for ``run``: its scheme, contention and (numerics on) trainer."""
    scheme = run.scheme()
    env = SimEnv(scenario, run.workers, run.contention(), scheme, progress, resolved=run)
    if scenario.numerics.enabled:
        env.numerics = build_trainer(scenario, run.workers, scheme, env)
    return env


def _run_events(env: SimEnv) -> None:
    """The event path: the scheme's driver as SimPy processes, to the run's end."""
    DRIVERS[env.scheme.driver](env)
    env.start_budget()
    env.run(until=env.finished)


def build_trainer(scenario: Scenario, workers: Any, scheme: Any, env: SimEnv) -> Trainer:
    """The run's real model: the scheme's aggregation rule, Byzantine workers, data shards."""
    cfg = scenario.numerics
    byz = select_workers(cfg.byzantine.workers, workers, "numerics.byzantine.workers") if cfg.byzantine else ()
    fractions = [w.local_fraction for w in env.data.workers] if env.data is not None else None
    return Trainer(cfg, seed=scenario.seed, workers=len(workers), byzantine=byz,
                   aggregation=aggregation_of(scheme), local_fractions=fractions,
                   global_batch=scenario.workload.global_batch)
