"""A worker's figures after the scenario is resolved — the bottom-layer value types.

:class:`WorkerSpec` is one worker (catalog figures with inline overrides, the shared-node compute
factor folded in); :class:`ComputeCurve` a tabulated ``t(b)``; :func:`select_workers` reads a
``workers:`` selector ('all', indices, instance names) of a contention item, the data section or
numerics.byzantine. This module imports no other part of the scenario: the sections that name
workers (contention, data) and :mod:`lbsim.scenario.resolve` (which builds the workers from a
scenario and checks it across sections) import it, never the other way round.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Literal, Protocol

from lbsim.errors import InputError
from lbsim.limits import short_repr

Workers = Literal["all"] | tuple[int | str, ...]
"""A ``workers:`` selector: ``all``, or worker indices and instance types (:func:`select_workers`)."""



class IterationWork(Protocol):
    """What a worker needs of a per-sample cost model (``lbsim.samples.model.SampleModel``)."""

    def iteration_work(self, worker: int, iteration: int, batch: int) -> float:
        """The work, in reference samples, of ``worker``'s iteration ``iteration`` on ``batch`` samples."""
        ...


@dataclass(frozen=True)
class WorkerSpec:
    """One worker's figures after catalog lookup and inline overrides.

    ``bandwidth_gbps`` is the worker's node's NIC (shared by the node's workers), ``node`` the
    node's index (nodes numbered in worker order), ``node_size`` how many workers share it. The
    shared-node compute factor is already folded into ``t0_s``, ``samples_per_s`` and
    ``compute_curve`` (so schemes and engines see the slower node alike).
    """

    index: int
    group: int
    instance: str
    kind: Literal["gpu", "cpu"]
    t0_s: float
    samples_per_s: float
    max_batch: int
    bandwidth_gbps: float
    jitter_cv: float
    node: int = 0
    node_size: int = 1
    nic_latency_s: float | None = None  # None: the network section's latency
    intra_bandwidth_gbps: float | None = None  # None: no intra-node hop (alone on its node)
    intra_latency_s: float = 0.0
    compute_curve: ComputeCurve | None = None
    # per-sample cost by length (workload.sample_cost), for the drivers that time one worker's
    # iteration at a time (parameter server: async, wbsp); not part of the worker's identity
    sample_cost: IterationWork | None = field(default=None, compare=False, repr=False)

    def iteration_s(self, batch: int, iteration: int) -> float:
        """Nominal compute of this worker's iteration ``iteration`` on ``batch`` samples: :meth:`compute_s`,
        or with a sample-cost model the work of the samples it draws (``SampleModel.iteration_work``)."""
        if self.sample_cost is None:
            return self.compute_s(batch)
        return self.compute_work_s(self.sample_cost.iteration_work(self.index, iteration, batch))

    def compute_s(self, batch: int) -> float:
        """Nominal (uncontended) compute time of one iteration: t(b) = t0 + b / X, or the curve."""
        if self.compute_curve is not None:
            return self.compute_curve.step_s(batch)
        return self.t0_s + batch / self.samples_per_s

    def compute_work_s(self, work: float) -> float:
        """:meth:`compute_s` of a batch whose work is ``work`` reference samples (lbsim.samples);
        equal to ``compute_s(b)`` when ``work`` is the float of b."""
        if self.compute_curve is not None:
            return self.compute_curve.step_s(work)
        return self.t0_s + work / self.samples_per_s


@dataclass(frozen=True)
class ComputeCurve:
    """Tabulated ``t(b)``: piecewise-linear between the points, linear beyond the end segments.

    An end segment extended far enough may reach 0; the time is never less than 0.
    """

    batches: tuple[float, ...]
    steps_s: tuple[float, ...]

    def step_s(self, batch: float) -> float:
        """t(b): the step time at ``batch``, linear between points, the end segments extended (never below 0)."""
        b, t = self.batches, self.steps_s
        i = bisect.bisect_right(b, batch) - 1
        i = min(max(i, 0), len(b) - 2)  # the end segments extend beyond the ends
        return max(0.0, t[i] + (t[i + 1] - t[i]) * (batch - b[i]) / (b[i + 1] - b[i]))

    def scaled(self, factor: float) -> ComputeCurve:
        """The curve with every step time multiplied by ``factor``."""
        return ComputeCurve(self.batches, tuple(s * factor for s in self.steps_s))


def select_workers(selector: Workers, workers: tuple[WorkerSpec, ...], path: str) -> tuple[int, ...]:
    """Worker indices named by a contention ``workers:`` value ('all', indices, instance names)."""
    if isinstance(selector, str):  # the only string allowed is 'all'
        return tuple(range(len(workers)))
    chosen: list[int] = []
    for i, item in enumerate(selector):
        if isinstance(item, int):
            if not 0 <= item < len(workers):
                raise InputError(f"{path}[{i}]", f"worker {item} does not exist (workers are 0..{len(workers) - 1})")
            chosen.append(item)
        else:
            match = [w.index for w in workers if w.instance == item]
            if not match:
                present = sorted({w.instance for w in workers})
                raise InputError(f"{path}[{i}]", f"no worker of instance type {short_repr(item)}; the cluster has: {', '.join(present)}")
            chosen.extend(match)
    return tuple(sorted(set(chosen)))
