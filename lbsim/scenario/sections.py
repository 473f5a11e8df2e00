"""Scenario sections: the workload, the cluster's worker groups and the network.

Each class is a frozen dataclass; the defaults and help texts here are the only defaults lbsim
has. Network models are polymorphic (``network: {name: ring_allreduce, ...}``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from lbsim.errors import InputError
from lbsim.scenario.fields import param


@dataclass(frozen=True)
class Workload:
    model: str = param("resnet50_imagenet", "model profile from the catalog (`lbsim catalog`)")
    global_batch: int = param(1024, "samples per global update, split across workers", gt=0)
    updates: int | None = param(200, "stop after this many global model updates (null: no limit)", gt=0)
    time_budget_s: float | None = param(None, "stop at this simulated time (null: no limit)", gt=0)
    samples: int | None = param(None, "stop once updates have applied this many samples: equal work across schemes whose updates hold different batches (null: no limit)", gt=0)
    gradient_bytes: int | None = param(None, "bytes pushed per gradient (null: the model profile's)", gt=0)

    def check(self) -> None:
        if self.updates is None and self.time_budget_s is None and self.samples is None:
            raise InputError("updates", "set updates, samples or time_budget_s (or several: whichever comes first)")


@dataclass(frozen=True)
class WorkerGroup:
    instance: str = param(help="instance type from the catalog (`lbsim catalog`)")
    count: int = param(1, "number of identical workers in this group", gt=0)
    t0_s: float | None = param(None, "override: fixed per-iteration time in t(b) = t0_s + b / samples_per_s", ge=0)
    samples_per_s: float | None = param(None, "override: asymptotic sample throughput", gt=0)
    max_batch: int | None = param(None, "override: memory cap on the per-worker batch", gt=0)
    bandwidth_gbps: float | None = param(None, "override: effective network bandwidth", gt=0)
    jitter_cv: float = param(0.0, "natural per-iteration compute noise (lognormal, coefficient of variation)", ge=0)


@dataclass(frozen=True)
class Cluster:
    groups: tuple[WorkerGroup, ...] = param(help="worker groups, in worker-index order", nonempty=True)


@dataclass(frozen=True)
class ParameterServerConfig:
    """Parameter server: k shards, a shared server NIC and a serial apply queue."""

    kind: ClassVar[str] = "parameter_server"
    shards: int = param(1, "server shards; the model is split evenly across them", gt=0)
    server_bandwidth_gbps: float = param(25.0, "NIC bandwidth of each shard (each direction)", gt=0)
    apply_s: float = param(0.005, "time to apply one gradient to the whole model (split across shards)", ge=0)
    latency_s: float = param(0.0001, "one-way message latency", ge=0)


@dataclass(frozen=True)
class RingAllReduceConfig:
    """Ring all-reduce, alpha-beta model: T = 2(n-1) alpha + 2 (n-1)/n S / B_min."""

    kind: ClassVar[str] = "ring_allreduce"
    alpha_s: float = param(0.00005, "per-step latency alpha of the ring", ge=0)
    bandwidth_gbps: float | None = param(None, "link bandwidth (null: each worker's own; the ring runs at the slowest)", gt=0)


def network_configs() -> dict[str, type]:
    return {c.kind: c for c in (ParameterServerConfig, RingAllReduceConfig)}


NetworkConfig = ParameterServerConfig | RingAllReduceConfig
