"""From a scenario to concrete workers, and the checks that span sections.

:func:`resolve_workers` expands the cluster's groups into one :class:`WorkerSpec` per worker,
taking each figure from the catalog unless the group overrides it inline. :func:`check_scenario`
holds every rule that involves more than one section (a scheme that needs a parameter server, a
global batch that cannot fit in memory, contention naming a worker that does not exist, trace
files that cannot be read, data placement that misses a worker or over-commits the dataset);
each raises :class:`~lbsim.errors.InputError` at the key path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from lbsim.errors import InputError
from lbsim.limits import MAX_WORKER_ITERATIONS, MAX_WORKERS, short_repr
from lbsim.scenario import catalog
from lbsim.scenario.data import resolve_data
from lbsim.scenario.sections import ParameterServerConfig

if TYPE_CHECKING:
    from lbsim.scenario.schema import Scenario


@dataclass(frozen=True)
class WorkerSpec:
    """One worker's figures after catalog lookup and inline overrides."""

    index: int
    group: int
    instance: str
    kind: Literal["gpu", "cpu"]
    t0_s: float
    samples_per_s: float
    max_batch: int
    bandwidth_gbps: float
    jitter_cv: float

    def compute_s(self, batch: int) -> float:
        """Nominal (uncontended) compute time of one iteration: t(b) = t0 + b / X."""
        return self.t0_s + batch / self.samples_per_s


def resolve_workers(scenario: Scenario) -> tuple[WorkerSpec, ...]:
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
        for _ in range(group.count):
            workers.append(WorkerSpec(len(workers), g, group.instance, inst.kind, t0, speed, cap, bw, group.jitter_cv))
    return tuple(workers)


def gradient_bytes(scenario: Scenario) -> int:
    w = scenario.workload
    return w.gradient_bytes if w.gradient_bytes is not None else catalog.MODELS[w.model].gradient_bytes


def select_workers(selector: str | tuple[int | str, ...], workers: tuple[WorkerSpec, ...], path: str) -> tuple[int, ...]:
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


def check_scenario(scenario: Scenario) -> tuple[WorkerSpec, ...]:
    """Cross-section checks; returns the resolved workers."""
    from lbsim.contention.model import build_contention
    from lbsim.schemes.registry import scheme_class

    workers = resolve_workers(scenario)
    total_cap = sum(w.max_batch for w in workers)
    if scenario.workload.global_batch > total_cap:
        raise InputError(
            "workload.global_batch",
            f"{scenario.workload.global_batch} samples exceed the cluster's total memory cap {total_cap} "
            "(sum of max_batch over workers)",
        )
    cls: Any = scheme_class(scenario.scheme.kind)  # type: ignore[attr-defined]
    updates = scenario.workload.updates
    planned = None if updates is None else updates * (len(workers) if cls.synchronous else 1)
    if planned is not None and planned > MAX_WORKER_ITERATIONS:  # every worker-iteration is recorded in memory
        per = f" x {len(workers)} workers" if cls.synchronous else ""
        raise InputError("workload.updates", f"{updates} updates{per} plan {planned} worker-iterations, more than the "
                         f"bound of {MAX_WORKER_ITERATIONS} (each is recorded in memory)")
    needs_ps = not cls.synchronous or getattr(scenario.scheme, "backup_workers", 0) > 0
    if needs_ps and not isinstance(scenario.network, ParameterServerConfig):
        what = f"scheme {cls.name}" if not cls.synchronous else "scheme.backup_workers"
        raise InputError("network.name", f"{what} needs a parameter server; valid here: parameter_server")
    build_contention(scenario, workers)  # reads and checks every trace file
    resolve_data(scenario.data, workers)  # data placement: coverage, shares sum to <= 1
    build_scheme_for(scenario, workers)  # a scheme may reject the cluster (e.g. memory caps)
    return workers


def scheme_context(scenario: Scenario, workers: tuple[WorkerSpec, ...]):  # -> SchemeContext
    from lbsim.schemes.base import SchemeContext

    return SchemeContext(
        global_batch=scenario.workload.global_batch,
        t0_s=tuple(w.t0_s for w in workers),
        samples_per_s=tuple(w.samples_per_s for w in workers),
        max_batch=tuple(w.max_batch for w in workers),
        kinds=tuple(w.kind for w in workers),
        seed=scenario.seed,
        data=resolve_data(scenario.data, workers),
    )


def build_scheme_for(scenario: Scenario, workers: tuple[WorkerSpec, ...]):
    from lbsim.schemes.registry import build_scheme

    return build_scheme(scenario.scheme, scheme_context(scenario, workers))
