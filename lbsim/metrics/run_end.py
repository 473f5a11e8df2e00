"""The end of a run and the records it cuts.

A run ends at the first of: the update target (``workload.updates``, the moment the final update
is made), the sample target (``workload.samples``, the moment an update brings the samples
applied to it or beyond), the time budget (``workload.time_budget_s``). Rule for the records:

* every gradient counted in an update has its iteration row: a worker whose gradient was applied
  but whose iteration had not ended (pulling the new weights, held at a gate, waiting for its
  round to finish) is recorded up to the end ``T`` and marked ``cut``;
* an iteration whose gradient made no update by ``T`` is not recorded and not counted;

so ``Σ batch over non-dropped rows = Σ samples over updates = summary.samples`` exactly, and a
cut row's parts add up to its span like any other row::

    wait_s = (T − start_s) − fetch_s − compute_s − comm_s     (comm_s: what was moved by T)
"""

from __future__ import annotations

from typing import Any


def stop_reached(updates: int, samples: int, update_target: int | None, sample_target: int | None) -> bool:
    """True once the run has the updates or the samples it asked for."""
    return (update_target is not None and updates >= update_target) or (
        sample_target is not None and samples >= sample_target
    )


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
