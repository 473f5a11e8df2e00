"""The engine contract: what an engine is to the core, and the :class:`RunResult` it returns.

An engine takes a loaded, checked :class:`~lbsim.scenario.schema.Scenario` (and, optionally, a
progress callback receiving the simulated share done, 0..1) and returns a :class:`RunResult`: the
run's records as numpy-backed tables, its summary (the future ``summary.json``), the scheme's own
decision log and, in numerics mode, the learning curve. It writes nothing: writing is the run
lifecycle's job (:mod:`lbsim.lifecycle`), so every front door writes the same files.

The simulator implements the contract (:func:`lbsim.simulator.run.simulate`) and imports this
module; this module imports no engine. The lifecycle reaches the simulator through
:func:`lbsim.lifecycle.engines.default_engine` (imported on call), and a caller may pass any other
object that satisfies :class:`Engine` (a test's fake, a future engine).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from lbsim.metrics.records import IterationTable, UpdateTable
from lbsim.scenario.schema import Scenario

ProgressFn = Callable[[float], None]
"""A progress callback: the share of the work done, 0..1, non-decreasing."""


@dataclass(frozen=True)
class RunResult:
    """One run's records and summary, as an engine returns them.

    ``iterations``: one row per worker-iteration (:class:`~lbsim.metrics.records.IterationRecord`
    fields as numpy columns); ``updates``: one row per global model update; ``summary``: the summary
    fields (:func:`lbsim.metrics.summary.summarize`); ``decisions``: the scheme's per-decision log,
    e.g. ElasticBSP's supersteps (empty for schemes that keep none); ``numerics``: the learning curve
    (update, time_s, loss, accuracy) in numerics mode, else empty.
    """

    iterations: IterationTable
    updates: UpdateTable
    summary: dict[str, Any]
    decisions: Sequence[dict[str, Any]] = ()
    numerics: tuple[dict[str, float], ...] = ()


class Engine(Protocol):
    """Runs one loaded, checked scenario and returns its records; writes nothing."""

    def __call__(self, scenario: Scenario, progress: ProgressFn | None = None) -> RunResult:
        """Run a checked scenario; ``progress`` gets the fraction done as the run goes."""

