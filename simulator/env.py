"""The simulation environment: one ``simpy.Environment`` carrying everything a run needs.

Components (workers, the network, the drivers) receive the environment and find the resolved
scenario, the workers' figures, their contention, the data placement, the scheme and the record
lists on it — no globals. It also owns the run's end (:mod:`lbsim.metrics.run_end`): the update
target, the sample target, the time budget, and the rows of iterations the end cuts: an engine
registers, for each gradient applied whose iteration has not ended, how to record it cut at the
end (:meth:`SimEnv.open_row`); :meth:`SimEnv.finish` records them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import simpy

from lbsim.contention.model import WorkerContention
from lbsim.fetch import DataLayout
from lbsim.metrics.records import IterationLog, IterationRecord, RecordLog, UpdateTable
from lbsim.metrics.run_end import RunEnd
from lbsim.numerics.trainer import Trainer
from lbsim.scenario.resolve import ResolvedRun, resolve_run
from lbsim.scenario.schema import Scenario
from lbsim.schemes.base import Scheme
from lbsim.workers import WorkerSpec


class SimEnv(simpy.Environment):
    def __init__(
        self,
        scenario: Scenario,
        workers: tuple[WorkerSpec, ...],
        contention: list[WorkerContention],
        scheme: Scheme,
        progress: Callable[[float], None] | None = None,
        resolved: ResolvedRun | None = None,
    ) -> None:
        super().__init__()
        self.scenario = scenario
        self.workers = workers
        self.contention = contention
        self.scheme = scheme
        self.resolved = resolved if resolved is not None else resolve_run(scenario)  # the scenario resolved once
        self.gradient_bytes = self.resolved.gradient_bytes
        self.data: DataLayout | None = self.resolved.data  # None: data local and free
        self.numerics: Trainer | None = None  # set by simulate() when numerics are enabled
        self.iterations = IterationLog()  # compact columns (lbsim.metrics.records); .table() at the end
        self.updates = RecordLog(UpdateTable)  # compact columns; .table() at the end
        self.run_end = RunEnd.of(scenario.workload)  # targets and budget: the one rule (lbsim.metrics.run_end)
        self.samples_applied = 0  # samples in the updates made so far
        # iterations whose gradient is in an update but which have not ended: key -> its cut row at time T
        self.open_rows: dict[Any, Callable[[float], tuple[Any, ...]]] = {}
        self.finished = self.event()
        self.stopped = False
        self._progress = progress

    @property
    def n(self) -> int:
        """The number of workers."""
        return len(self.workers)

    @property
    def version(self) -> int:
        """The global model's version: updates made so far."""
        return len(self.updates)

    def may_update(self) -> bool:
        """False once the run has all the updates it asked for, or has ended."""
        return not self.stopped and not self.run_end.reached(self.version, self.samples_applied)

    def record_update(self, samples: int, gradients: int) -> int:
        """Record a model update at the current time; returns its index."""
        update = len(self.updates)
        self.samples_applied += samples
        self.updates.add((update, self._now, samples, gradients))
        if self._progress is not None:
            self._progress(self.progress_fraction())
        return update

    def record_iteration(self, rec: IterationRecord) -> None:
        """Record a finished iteration (none once the run has stopped)."""
        if not self.stopped:
            self.iterations.append(rec)

    def record_row(self, row: tuple) -> None:  # type: ignore[type-arg]
        """:meth:`record_iteration` for a record given as the tuple of its fields (cheaper)."""
        if not self.stopped:
            self.iterations.add(row)

    def progress_fraction(self) -> float:
        """How far the run is, 0 to 1 (the run end's rule)."""
        return self.run_end.fraction(self.version, self.samples_applied, self.now)

    def open_row(self, key: Any, cut: Callable[[float], tuple[Any, ...]]) -> None:
        """An iteration whose gradient is in an update has not ended: ``cut(T)`` is its row if the run ends at T."""
        self.open_rows[key] = cut

    def close_row(self, key: Any) -> None:
        """The iteration registered as ``key`` ended (its own row is recorded by the engine)."""
        self.open_rows.pop(key, None)

    def finish(self) -> None:
        """End the run now (idempotent); the iterations it cuts are recorded up to now, by key."""
        if not self.stopped:
            for key in sorted(self.open_rows):
                self.iterations.add(self.open_rows[key](self._now))
            self.open_rows.clear()
            self.stopped = True
            self.finished.succeed()

    def start_budget(self) -> None:
        """The budget as a timeout at B scheduled before any run event: it precedes every update due at B,
        so an update is made only before B (:meth:`RunEnd.update_made`)."""
        if self.run_end.budget_s is not None:
            self.process(self._budget())

    def _budget(self):  # type: ignore[no-untyped-def]
        yield self.timeout(self.run_end.budget_s)
        self.finish()
