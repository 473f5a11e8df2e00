"""From a scenario to concrete workers, and the checks that span sections (the top layer of lbsim.scenario).

:func:`resolve_workers` expands the cluster's groups into one :class:`WorkerSpec` per worker,
taking each figure from the catalog unless the group overrides it inline. :func:`check_scenario`
holds every rule that involves more than one section (a scheme that needs a parameter server, a
global batch that cannot fit in memory, contention naming a worker that does not exist, trace
files that cannot be read, data placement that misses a worker or over-commits the dataset);
each raises :class:`~lbsim.errors.InputError` at the key path.

Resolution once: :func:`resolve_run` gives a :class:`ResolvedRun` — the workers, the data layout,
the scheme context, the gradient bytes and the overlap, everything about a run that follows from
its scenario alone — and both engines take their figures from it. It is immutable and a function
of the scenario's value, so it is computed once per scenario (the loader's checks resolve it; a
run of the same scenario finds it) and shared; the stateful objects of a run (the contention
sources with their random streams, the scheme) are made fresh from it per run
(:meth:`ResolvedRun.contention`, :meth:`ResolvedRun.scheme`).
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, replace
from typing import Any

from lbsim.contention.model import WorkerContention, build_contention
from lbsim.errors import InputError
from lbsim.fetch import DataLayout
from lbsim.limits import MAX_WORKER_ITERATIONS, MAX_WORKERS, short_repr
from lbsim.network.overlap import OverlapParams, node_compute_factor
from lbsim.samples.model import sample_model
from lbsim.scenario import catalog
from lbsim.scenario.data import resolve_data
from lbsim.scenario.schema import Scenario
from lbsim.scenario.sections import ParameterServerConfig
from lbsim.schemes.base import Scheme, SchemeContext, is_synchronous
from lbsim.schemes.registry import build_scheme, needs_parameter_server, scheme_class
from lbsim.workers import ComputeCurve, WorkerSpec, select_workers

__all__ = ["ComputeCurve", "ResolvedRun", "WorkerSpec", "build_scheme_for", "check_scenario", "gradient_bytes",
           "overlap_params", "resolve_run", "resolve_workers", "scheme_context", "select_workers"]


def resolve_workers(scenario: Scenario) -> tuple[WorkerSpec, ...]:
    """The scenario's workers, group by group: each one's instance, node, links and compute curve t(b)."""
    model = scenario.workload.model
    if model not in catalog.MODELS:
        raise InputError("workload.model", f"unknown model {short_repr(model)}; valid: {', '.join(catalog.model_names())}")
    total = 0
    for g, group in enumerate(scenario.cluster.groups):  # the size is checked before any worker exists
        total += group.count
        if total > MAX_WORKERS:
            raise InputError(f"cluster.groups[{g}].count", f"{group.count} brings the cluster to {total} workers, "
                             f"more than the bound of {MAX_WORKERS}")
    workers: list[WorkerSpec] = []
    for g, group in enumerate(scenario.cluster.groups):
        path = f"cluster.groups[{g}]"
        inst = catalog.INSTANCES.get(group.instance)
        if inst is None:
            raise InputError(f"{path}.instance", f"unknown instance type {short_repr(group.instance)}; valid: {', '.join(catalog.instance_names())}")
        perf = catalog.performance(model, group.instance)
        if perf is None and (group.samples_per_s is None or group.max_batch is None):
            raise InputError(
                f"{path}.instance",
                f"the catalog has no figures for model {model} on {group.instance}; "
                "give samples_per_s and max_batch (and t0_s) inline, or pick another instance/model",
            )
        t0 = group.t0_s if group.t0_s is not None else (perf.t0_s if perf else 0.0)
        speed = group.samples_per_s if group.samples_per_s is not None else perf.samples_per_s  # type: ignore[union-attr]
        cap = group.max_batch if group.max_batch is not None else perf.max_batch  # type: ignore[union-attr]
        bw = group.bandwidth_gbps if group.bandwidth_gbps is not None else inst.bandwidth_gbps
        per_node = group.workers_per_node
        if inst.kind == "gpu" and per_node > inst.gpus_per_node:
            raise InputError(f"{path}.workers_per_node", f"{per_node} workers on a node of {group.instance}, "
                                                         f"which has {inst.gpus_per_node} GPU(s); valid: 1..{inst.gpus_per_node}")
        intra_bw = group.intra_bandwidth_gbps if group.intra_bandwidth_gbps is not None else inst.intra_bandwidth_gbps
        if per_node > 1 and min(per_node, group.count) > 1 and intra_bw is None:
            raise InputError(f"{path}.intra_bandwidth_gbps", f"the catalog has no intra-node link for {group.instance}; "
                                                             "give intra_bandwidth_gbps (and intra_latency_s) inline")
        intra_lat = group.intra_latency_s if group.intra_latency_s is not None else (inst.intra_latency_s or 0.0)
        slow = group.shared_node_slowdown if group.shared_node_slowdown is not None else inst.shared_node_slowdown
        curve = _curve(group.compute_curve)
        first_node = workers[-1].node + 1 if workers else 0
        for i in range(group.count):
            size = min(per_node, group.count - (i // per_node) * per_node)
            factor = node_compute_factor(size, slow)
            node_bw = bw * min(size, group.nics_per_node)  # the node's NICs in use (sections.WorkerGroup)
            g_t0, g_speed, g_curve = t0, speed, curve
            if factor != 1.0:
                g_t0, g_speed = t0 * factor, speed / factor
                g_curve = curve.scaled(factor) if curve is not None else None
            workers.append(WorkerSpec(
                len(workers), g, group.instance, inst.kind, g_t0, g_speed, cap, node_bw, group.jitter_cv,
                node=first_node + i // per_node, node_size=size, nic_latency_s=group.nic_latency_s,
                intra_bandwidth_gbps=intra_bw if size > 1 else None, intra_latency_s=intra_lat,
                compute_curve=g_curve,
            ))
    return tuple(workers)


def _curve(points: tuple[tuple[float, ...], ...] | None) -> ComputeCurve | None:
    if points is None:
        return None
    return ComputeCurve(tuple(p[0] for p in points), tuple(p[1] for p in points))


def overlap_params(scenario: Scenario) -> OverlapParams:
    """The workload's overlap of the all-reduce with backward, or the model profile's."""
    o = scenario.workload.overlap
    if o is None:
        o = catalog.MODELS[scenario.workload.model].overlap
    return OverlapParams(o.hide_share, o.tail_share)


def gradient_bytes(scenario: Scenario) -> int:
    """Bytes of one gradient: the workload's own figure, else the catalog model's."""
    w = scenario.workload
    return w.gradient_bytes if w.gradient_bytes is not None else catalog.MODELS[w.model].gradient_bytes


def check_scenario(scenario: Scenario) -> tuple[WorkerSpec, ...]:
    """Cross-section checks; returns the resolved workers."""
    workers = resolve_workers(scenario)
    total_cap = sum(w.max_batch for w in workers)
    if scenario.workload.global_batch > total_cap:
        raise InputError(
            "workload.global_batch",
            f"{scenario.workload.global_batch} samples exceed the cluster's total memory cap {total_cap} "
            "(sum of max_batch over workers)",
        )
    cls: Any = scheme_class(scenario.scheme.kind)
    synchronous = is_synchronous(cls)
    updates = scenario.workload.updates
    planned = None if updates is None else updates * (len(workers) if synchronous else 1)
    w = scenario.workload
    if planned is not None and planned > MAX_WORKER_ITERATIONS and (w.time_budget_s is not None or w.samples is not None):
        _check_open_ended(scenario, workers)  # a budget or a sample target ends the run first: bound what it plans
    elif planned is not None and planned > MAX_WORKER_ITERATIONS:  # every worker-iteration is recorded in memory
        per = f" x {len(workers)} workers" if synchronous else ""
        raise InputError("workload.updates", f"{updates} updates{per} plan {planned} worker-iterations, more than the "
                         f"bound of {MAX_WORKER_ITERATIONS} (each is recorded in memory)")
    if updates is None:  # only a time budget and/or a sample target ends the run: estimate what they plan
        _check_open_ended(scenario, workers)
    if needs_parameter_server(scenario.scheme) and not isinstance(scenario.network, ParameterServerConfig):
        what = f"scheme {cls.name}" if not synchronous else "scheme.backup_workers"
        raise InputError("network.name", f"{what} needs a parameter server; valid here: parameter_server")
    _check_sample_cost(scenario)
    build_contention(scenario, workers)  # reads and checks every trace file
    data = resolve_data(scenario.data, workers)  # data placement: coverage, shares sum to <= 1
    run = _resolved(scenario, workers, data)
    run.scheme()  # a scheme may reject the cluster (e.g. memory caps)
    return workers


def _check_sample_cost(scenario: Scenario) -> None:
    """A sample-cost model needs throughput mode (lengths read in ``_context``)."""
    if scenario.workload.sample_cost is None:
        return
    if scenario.numerics.enabled:
        raise InputError("numerics.enabled", "the simulated model's numerics do not model sequence lengths; "
                                             "turn numerics off or drop workload.sample_cost")


def _check_open_ended(scenario: Scenario, workers: tuple[WorkerSpec, ...]) -> None:
    """Bound a run that only a time budget or a sample target ends, before any work starts.

    The estimate runs every worker back to back at its nominal speed with the global batch split
    evenly (b = B/n): a budget T plans ``T * sum_i 1/t_i(b)`` worker-iterations, a sample target S
    plans ``S / b`` (whichever ends the run first counts). Communication, waiting and contention only
    lower it; noise, traces and adaptive batches can move it by a small factor, never by orders of
    magnitude, which is what the bound is for (a budget of 1e12 s would otherwise run until memory ran out).
    """
    w = scenario.workload
    share = max(w.global_batch / len(workers), 1.0)
    estimates: list[tuple[float, str, float]] = []  # (worker-iterations planned, key, its value)
    if w.time_budget_s is not None:
        rate_per_s = math.fsum(1.0 / max(worker.compute_s(round(share)), 1e-12) for worker in workers)
        estimates.append((w.time_budget_s * rate_per_s, "workload.time_budget_s", w.time_budget_s))
    if w.samples is not None:
        estimates.append((w.samples / share, "workload.samples", w.samples))
    planned, key, value = min(estimates)
    if planned > MAX_WORKER_ITERATIONS:
        raise InputError(key, f"{short_repr(value)} plans about {planned:.3g} worker-iterations "
                         f"(every worker at its nominal speed, the global batch split evenly), more than the bound of "
                         f"{MAX_WORKER_ITERATIONS} (each is recorded in memory); set workload.updates, or a smaller value")


@dataclass(frozen=True)
class ResolvedRun:
    """Everything about a run that follows from its scenario alone (see the module docstring)."""

    scenario: Scenario
    workers: tuple[WorkerSpec, ...]
    data: DataLayout | None  # None: data local and free
    context: SchemeContext
    gradient_bytes: int
    overlap: OverlapParams

    @property
    def n(self) -> int:
        """The number of workers."""
        return len(self.workers)

    def contention(self) -> list[WorkerContention]:
        """Fresh contention sources, one per worker, with their random streams at the start."""
        return build_contention(self.scenario, self.workers)

    def scheme(self) -> Scheme:
        """A fresh scheme object for one run."""
        return build_scheme(self.scenario.scheme, self.context)


# scenario -> its resolved parts (a ResolvedRun without the scenario, which is the key: the entry
# goes with the last scenario object equal to it).
_RESOLVED: weakref.WeakKeyDictionary[Scenario, tuple[Any, ...]] = weakref.WeakKeyDictionary()


def _resolved(scenario: Scenario, workers: tuple[WorkerSpec, ...], data: DataLayout | None) -> ResolvedRun:
    context = _context(scenario, workers, data)
    if context.sample_cost is not None:  # the per-iteration drivers time each worker's own draw
        workers = tuple(replace(w, sample_cost=context.sample_cost) for w in workers)
    parts = (workers, data, context, gradient_bytes(scenario), overlap_params(scenario))
    _RESOLVED[scenario] = parts
    return ResolvedRun(scenario, *parts)


def resolve_run(scenario: Scenario) -> ResolvedRun:
    """The scenario's :class:`ResolvedRun`, resolved once per scenario value."""
    parts = _RESOLVED.get(scenario)
    if parts is not None:
        return ResolvedRun(scenario, *parts)
    workers = resolve_workers(scenario)
    return _resolved(scenario, workers, resolve_data(scenario.data, workers))


def _context(scenario: Scenario, workers: tuple[WorkerSpec, ...], data: DataLayout | None) -> SchemeContext:
    return SchemeContext(
        global_batch=scenario.workload.global_batch,
        t0_s=tuple(w.t0_s for w in workers),
        samples_per_s=tuple(w.samples_per_s for w in workers),
        max_batch=tuple(w.max_batch for w in workers),
        kinds=tuple(w.kind for w in workers),
        seed=scenario.seed,
        data=data,
        sample_cost=None if (cost := scenario.workload.sample_cost) is None else sample_model(cost, scenario.seed),
    )


def scheme_context(scenario: Scenario, workers: tuple[WorkerSpec, ...]) -> SchemeContext:
    """What a scheme knows before the run, for ``workers`` (which a calibration may have replaced)."""
    return _context(scenario, workers, resolve_data(scenario.data, workers))


def build_scheme_for(scenario: Scenario, workers: tuple[WorkerSpec, ...]) -> Scheme:
    """The scenario's scheme, built for these workers (its :class:`SchemeContext`)."""
    return build_scheme(scenario.scheme, scheme_context(scenario, workers))
