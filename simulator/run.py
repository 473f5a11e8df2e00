"""One simulation run: build -> run -> collect (desmod's lifecycle).

:func:`simulate` takes a loaded scenario and returns a :class:`RunResult` with the records and
the summary; writing files is the caller's job (:mod:`lbsim.output`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lbsim.contention.model import build_contention
from lbsim.metrics.records import IterationRecord, UpdateRecord
from lbsim.metrics.summary import summarize
from lbsim.scenario.resolve import build_scheme_for, resolve_workers
from lbsim.scenario.schema import Scenario
from simulator.asynchronous import AsyncDriver
from simulator.env import SimEnv
from simulator.sync import SyncDriver
from simulator.wbsp import WBSPDriver


# Which engine loop carries out a scheme's decisions, by the scheme's ``driver`` attribute.
DRIVERS = {"sync": SyncDriver, "async": AsyncDriver, "wbsp": WBSPDriver}


@dataclass(frozen=True)
class RunResult:
    iterations: tuple[IterationRecord, ...]
    updates: tuple[UpdateRecord, ...]
    summary: dict[str, Any]
    decisions: tuple[dict[str, Any], ...] = ()  # the scheme's own per-decision log (e.g. ElasticBSP supersteps)


def simulate(scenario: Scenario, progress: Callable[[float], None] | None = None) -> RunResult:
    workers = resolve_workers(scenario)
    scheme = build_scheme_for(scenario, workers)
    env = SimEnv(scenario, workers, build_contention(scenario, workers), scheme, progress)
    DRIVERS[scheme.driver](env)
    env.start_budget()
    env.run(until=env.finished)
    summary = summarize(
        env.iterations, env.updates, scheme=scheme.name, seed=scenario.seed, engine="simulator",
        workers=env.n, end_s=env.now, synchronous=scheme.synchronous, extra=scheme.diagnostics(),
    )
    decisions = tuple(scheme.decision_rows()) if hasattr(scheme, "decision_rows") else ()
    return RunResult(tuple(env.iterations), tuple(env.updates), summary, decisions)
