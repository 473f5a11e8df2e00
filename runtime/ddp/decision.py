"""The batch-decision core shared by :class:`lbsim.runtime.ddp.LoadBalancer` and lbsim's own synchronous loop.

Torch-free: the transport (which collective carries the observations and the decision) is the
caller's. One decision, from one observation row per rank of the step just finished::

    columns (per rank r)   b_r, compute_s_r, cpu_available_r, mem_available_r
                           [oracle_slowdown_r, fetch_s_r, local_r: what lbsim's loop also measures]
    round_observation      -> lbsim's RoundObservation (WorkerObservation per rank; remote = b_r - local_r)
    Decider.decide         -> scheme.next_batches(observation): (b_0', ..., b_{n-1}'),
                              with local_counts(scheme, layout, b'): the local samples of each batch
                              (LOFT's choice when the scheme is LocalityAware; all local without data placement)

Who decides and how the decision reaches the ranks:

* ``LoadBalancer`` (lag 2, the default): observations travel in one asynchronous ``all_gather``
  per step; rank 0's ``Decider`` decides from it and its decision rides in the next one.
* ``LoadBalancer(lag=0)`` and ``lbsim train`` / ``lbsim validate`` (:mod:`lbsim.runtime.loop`): lag 0 —
  the step's observations are all-gathered when it ends, rank 0's ``Decider`` decides at once, and
  every rank receives the decision before the next step starts (the balancer: a broadcast; the
  loop: the tail of its gradient all-reduce). LB-BSP's own timing, as the simulator models it.

The decider times each decision (``decision_s``: lbsim's summary reports the mean).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from lbsim.fetch import DataLayout
from lbsim.schemes.base import RoundObservation, WorkerObservation, local_counts


def round_observation(update: int, time_s: float, batch: Sequence[float], compute_s: Sequence[float],
                      cpu_available: Sequence[float], mem_available: Sequence[float], *,
                      oracle_slowdown: Sequence[float] | None = None, fetch_s: Sequence[float] | None = None,
                      local: Sequence[float] | None = None, work: Sequence[float] | None = None) -> RoundObservation:
    """lbsim's :class:`RoundObservation` from per-rank columns (index = rank).

    ``oracle_slowdown``: NaN (or absent) where the engine cannot know it; ``local``: the local
    samples of each batch (absent: none read from a shard, as without data placement); ``work``: each
    batch's work in reference samples when samples' costs differ (lbsim.samples; absent: none)."""
    n = len(batch)
    obs = []
    for i in range(n):
        b = int(batch[i])
        oracle = float(oracle_slowdown[i]) if oracle_slowdown is not None else math.nan
        loc = int(local[i]) if local is not None else 0
        obs.append(WorkerObservation(
            worker=i, batch=b, compute_s=float(compute_s[i]), comm_s=0.0, wait_s=0.0,
            cpu_available=float(cpu_available[i]), mem_available=float(mem_available[i]),
            oracle_slowdown=oracle if math.isfinite(oracle) else None,
            fetch_s=float(fetch_s[i]) if fetch_s is not None else 0.0,
            local_samples=loc, remote_samples=b - loc if local is not None else 0,
            work=float(work[i]) if work is not None else None,
        ))
    return RoundObservation(update=update, time_s=time_s, workers=tuple(obs))


class Decider:
    """The deciding rank's side: a synchronous scheme, its first batches and each next decision."""

    def __init__(self, scheme: Any, layout: DataLayout | None = None) -> None:
        self.scheme = scheme
        self.layout = layout
        self.decisions = 0
        self.decision_s: list[float] = []  # wall time of every scheme.next_batches call

    def initial(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The first step's batches and their local counts."""
        return self.with_local(tuple(int(b) for b in self.scheme.initial_batches()))

    def decide(self, observation: RoundObservation) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The next step's batches (and local counts) from the step just observed."""
        t = time.perf_counter()
        batches = tuple(int(b) for b in self.scheme.next_batches(observation))
        self.decision_s.append(time.perf_counter() - t)
        self.decisions += 1
        return self.with_local(batches)

    def with_local(self, batches: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """``batches`` with their local counts (LOFT's choice when the scheme is LocalityAware)."""
        return batches, tuple(local_counts(self.scheme, self.layout, batches))

    @property
    def mean_decision_s(self) -> float:
        """Mean wall time of one scheme decision (``next_batches``), 0 before the first."""
        return sum(self.decision_s) / len(self.decision_s) if self.decision_s else 0.0
