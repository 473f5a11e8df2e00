"""The simulation environment: one ``simpy.Environment`` carrying everything a run needs.

Components (workers, the network, the drivers) receive the environment and find the resolved
scenario, the workers' figures, their contention, the data placement, the scheme and the record
lists on it — no globals. It also owns the run's end: the update target, the time budget, and the records that
are kept (only what finished before the end).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import simpy

from lbsim.contention.model import WorkerContention
from lbsim.fetch import DataLayout
from lbsim.metrics.records import IterationLog, IterationRecord, RecordLog, UpdateTable
from lbsim.numerics.trainer import Trainer
from lbsim.scenario.data import resolve_data
from lbsim.scenario.resolve import WorkerSpec, gradient_bytes
from lbsim.scenario.schema import Scenario


class SimEnv(simpy.Environment):
    def __init__(
        self,
        scenario: Scenario,
        workers: tuple[WorkerSpec, ...],
        contention: list[WorkerContention],
        scheme: Any,
        progress: Callable[[float], None] | None = None,
    ) -> None:
        super().__init__()
        self.scenario = scenario
        self.workers = workers
        self.contention = contention
        self.scheme = scheme
        self.gradient_bytes = gradient_bytes(scenario)
        self.data: DataLayout | None = resolve_data(scenario.data, workers)  # None: data local and free
        self.numerics: Trainer | None = None  # set by simulate() when numerics are enabled
        self.iterations = IterationLog()  # compact columns (lbsim.metrics.records); .table() at the end
        self.updates = RecordLog(UpdateTable)  # compact columns; .table() at the end
        self.update_target = scenario.workload.updates
        self.budget_s = scenario.workload.time_budget_s
        self.finished = self.event()
        self.stopped = False
        self._progress = progress

    @property
    def n(self) -> int:
        return len(self.workers)

    @property
    def version(self) -> int:
        """The global model's version: updates made so far."""
        return len(self.updates)

    def may_update(self) -> bool:
        """False once the run has all the updates it asked for, or has ended."""
        return not self.stopped and (self.update_target is None or self.version < self.update_target)

    def record_update(self, samples: int, gradients: int) -> int:
        update = len(self.updates)
        self.updates.add((update, self._now, samples, gradients))
        if self._progress is not None:
            self._progress(self.progress_fraction())
        return update

    def record_iteration(self, rec: IterationRecord) -> None:
        if not self.stopped:
            self.iterations.append(rec)

    def record_row(self, row: tuple) -> None:  # type: ignore[type-arg]
        """:meth:`record_iteration` for a record given as the tuple of its fields (cheaper)."""
        if not self.stopped:
            self.iterations.add(row)

    def progress_fraction(self) -> float:
        parts = []
        if self.update_target:
            parts.append(self.version / self.update_target)
        if self.budget_s:
            parts.append(self.now / self.budget_s)
        return min(1.0, max(parts)) if parts else 0.0

    def finish(self) -> None:
        """End the run now (idempotent)."""
        if not self.stopped:
            self.stopped = True
            self.finished.succeed()

    def start_budget(self) -> None:
        if self.budget_s is not None:
            self.process(self._budget())

    def _budget(self):  # type: ignore[no-untyped-def]
        yield self.timeout(self.budget_s)
        self.finish()
