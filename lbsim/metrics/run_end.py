"""The end of a run and the records it cuts.

A run ends at the first of: the update target (``workload.updates``, the moment the final update
is made), the sample target (``workload.samples``, the moment an update brings the samples
applied to it or beyond), the time budget (``workload.time_budget_s``). :class:`RunEnd` holds the
rule; both engines ask it (the simulator's driver loops and budget event, the runtime's servers):

* targets: the update that brings ``updates >= workload.updates`` or ``samples >= workload.samples``
  is the last one made;
* budget B: an update is made only strictly before B (``t < B``); the run then ends at
  ``T = B`` and no update is made at or after it. In the simulator's event path the budget is
  a timeout at B, scheduled first, so it precedes every same-time event of the run; the fast path
  and the runtime's servers test :meth:`RunEnd.update_made` on the update's time;
* ``progress = max(updates / updates_target, samples / samples_target, t / B)``, at most 1.

Rule for the records:

* every gradient counted in an update has its iteration row: a worker whose gradient was applied
  but whose iteration had not ended (pulling the new weights, held at a gate, waiting for its
  round to finish) is recorded up to the end ``T`` and marked ``cut``;
* an iteration whose gradient made no update by ``T`` is not recorded and not counted;

so ``Σ batch over non-dropped rows = Σ samples over updates = summary.samples`` exactly, and a
cut row's parts add up to its span like any other row::

    wait_s = (T − start_s) − fetch_s − compute_s − comm_s     (comm_s: what was moved by T)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol


def stop_reached(updates: int, samples: int, update_target: int | None, sample_target: int | None) -> bool:
    """True once the run has the updates or the samples it asked for."""
    return (update_target is not None and updates >= update_target) or (
        sample_target is not None and samples >= sample_target
    )


class _Workload(Protocol):
    @property
    def updates(self) -> int | None: ...
    @property
    def samples(self) -> int | None: ...
    @property
    def time_budget_s(self) -> float | None: ...


@dataclass(frozen=True, slots=True)
class RunEnd:
    """When a run ends: its update target, sample target and time budget (each ``None``: not set)."""

    update_target: int | None = None
    sample_target: int | None = None
    budget_s: float | None = None

    @classmethod
    def of(cls, workload: _Workload) -> RunEnd:
        """The rule of a scenario's ``workload`` section."""
        return cls(workload.updates, workload.samples, workload.time_budget_s)

    def reached(self, updates: int, samples: int) -> bool:
        """True once ``updates`` updates applying ``samples`` samples meet a target (no update follows)."""
        return stop_reached(updates, samples, self.update_target, self.sample_target)

    def thresholds(self) -> tuple[float, float]:
        """``(u, s)`` such that :meth:`reached` ⇔ ``updates >= u or samples >= s`` (``inf``: target not set)."""
        return (math.inf if self.update_target is None else self.update_target,
                math.inf if self.sample_target is None else self.sample_target)

    def update_made(self, t_s: float) -> bool:
        """Whether an update due at ``t_s`` is made: only strictly before the budget (the run ends at it)."""
        return self.budget_s is None or t_s < self.budget_s

    def fraction(self, updates: int, samples: int, t_s: float) -> float:
        """The run's progress in [0, 1]: the largest of the target and budget fractions (0 if none)."""
        parts = []
        if self.update_target:
            parts.append(updates / self.update_target)
        if self.sample_target:
            parts.append(samples / self.sample_target)
        if self.budget_s:
            parts.append(t_s / self.budget_s)
        return min(1.0, max(parts)) if parts else 0.0


def cut_row(
    *,
    worker: int,
    iteration: int,
    update: int,
    start_s: float,
    end_s: float,
    compute_s: float,
    comm_s: float,
    fetch_s: float,
    batch: int,
    staleness: int,
    weight: float,
    dropped: bool = False,
) -> tuple[Any, ...]:
    """An IterationRecord's fields, in column order, for an iteration the run's end cut at ``end_s``."""
    wait_s = end_s - start_s - fetch_s - compute_s - comm_s
    return (worker, iteration, update, start_s, compute_s, comm_s, wait_s, end_s, batch, staleness, dropped,
            weight, fetch_s, True)
