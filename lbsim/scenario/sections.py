"""Scenario sections: the workload, the cluster's worker groups and the network.

Each class is a frozen dataclass; the defaults and help texts here are the only defaults lbsim
has. Network models are polymorphic (``network: {name: ring_allreduce, ...}``).

Nodes and links: a group's workers sit ``workers_per_node`` to a node (default 1: every worker
alone on its node, the meaning scenarios had before nodes existed). A node's NIC
(``bandwidth_gbps``, ``nic_latency_s``) is shared by its workers; its intra-node link
(``intra_bandwidth_gbps``, ``intra_latency_s``: PCIe / NVLink) joins them. Unset figures come
from the catalog instance (:mod:`lbsim.scenario.catalog`); formulas in :mod:`lbsim.network`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from lbsim.errors import InputError
from lbsim.fields import param
from lbsim.network.algorithms import NetworkAlgorithm
from lbsim.network.ring_latency import RingLatency
from lbsim.samples.config import SampleCostConfig
from lbsim.scenario.nccl_section import NcclModel


@dataclass(frozen=True)
class Overlap:
    """Bucketed overlap of the all-reduce with backward: exposed = max(tail_share c, c - hide_share t)."""

    hide_share: float = param(0.0, "share of the step's compute that the all-reduce can hide under (0: no overlap)", ge=0, le=1)
    tail_share: float = param(1.0, "share of the all-reduce that is never hidden (the last bucket; 1: no overlap)", ge=0, le=1)


@dataclass(frozen=True)
class Workload:
    """What is trained and when it stops: the model profile, the global batch, the stops, gradient size,
    overlap and per-sample cost."""

    model: str = param("resnet50_imagenet", "model profile from the catalog (`lbsim catalog`)")
    global_batch: int = param(1024, "samples per global update, split across workers", gt=0)
    updates: int | None = param(200, "stop after this many global model updates (null: no limit)", gt=0)
    time_budget_s: float | None = param(None, "stop at this simulated time (null: no limit)", gt=0)
    samples: int | None = param(None, "stop once updates have applied this many samples: equal work across schemes whose updates hold different batches (null: no limit)", gt=0)
    gradient_bytes: int | None = param(None, "bytes pushed per gradient (null: the model profile's)", gt=0)
    overlap: Overlap | None = param(None, "overlap of the gradient all-reduce with backward (null: the model profile's; "
                                          "the catalog's models have none)")
    sample_cost: SampleCostConfig | None = param(None, "per-sample cost by sequence length (null: every sample costs "
                                                       "the same; docs/sample-cost.md)")

    def check(self) -> None:
        """At least one stop is set: updates, samples or a time budget (the first one reached ends the run)."""
        if self.updates is None and self.time_budget_s is None and self.samples is None:
            raise InputError("updates", "set updates, samples or time_budget_s (or several: whichever comes first)")


@dataclass(frozen=True)
class WorkerGroup:
    """Identical workers of one catalog instance, with overrides of its figures and their nodes."""

    instance: str = param(help="instance type from the catalog (`lbsim catalog`)")
    count: int = param(1, "number of identical workers in this group", gt=0)
    t0_s: float | None = param(None, "override: fixed per-iteration time in t(b) = t0_s + b / samples_per_s", ge=0)
    samples_per_s: float | None = param(None, "override: asymptotic sample throughput", gt=0)
    max_batch: int | None = param(None, "override: memory cap on the per-worker batch", gt=0)
    bandwidth_gbps: float | None = param(None, "override: effective bandwidth of each node's NIC (inter-node link), "
                                                 "shared by the node's workers", gt=0)
    jitter_cv: float = param(0.0, "natural per-iteration compute noise (lognormal, coefficient of variation)", ge=0)
    workers_per_node: int = param(1, "workers of this group sharing one node (the last node holds the rest; "
                                     "nodes never span groups)", gt=0)
    nic_latency_s: float | None = param(None, "override: per-hop latency of an inter-node hop (null: the ring's alpha_s)", ge=0)
    intra_bandwidth_gbps: float | None = param(None, "override: effective bandwidth of a hop inside a node "
                                                       "(PCIe / NVLink)", gt=0)
    intra_latency_s: float | None = param(None, "override: per-hop latency inside a node", ge=0)
    shared_node_slowdown: float | None = param(None, "override: compute slowdown per extra worker on a node, "
                                                     "t x (1 + s (k - 1)) for k workers on the node", ge=0)
    nics_per_node: int = param(1, "NICs per node, one beside each GPU up to this count: a node of k workers sends "
                                  "through min(k, nics_per_node) of them, so its inter-node bandwidth is bandwidth_gbps "
                                  "x that (NCCL runs a channel per NIC near the GPUs in use; 1: one NIC shared by the node)",
                               gt=0, le=64)
    compute_curve: tuple[tuple[float, ...], ...] | None = param(
        None, "override: tabulated t(b) as [[batch, step_s], ...] (batches increasing), piecewise-linear, "
              "extrapolated linearly beyond the ends (never below 0); replaces t0_s/samples_per_s in the engines")

    def check(self) -> None:
        """The group's figures agree with each other (InputError naming the key otherwise)."""
        if self.compute_curve is None:
            return
        if len(self.compute_curve) < 2:
            raise InputError("compute_curve", f"needs at least 2 points [batch, step_s], got {len(self.compute_curve)}")
        for i, point in enumerate(self.compute_curve):
            if len(point) != 2:
                raise InputError(f"compute_curve[{i}]", f"expected [batch, step_s], got {list(point)}")
            if not point[0] > 0 or not point[1] > 0:
                raise InputError(f"compute_curve[{i}]", f"batch and step_s must be > 0, got {list(point)}")
            if i and not point[0] > self.compute_curve[i - 1][0]:
                raise InputError(f"compute_curve[{i}]", "batches must be strictly increasing")


@dataclass(frozen=True)
class Cluster:
    """The workers: groups in worker-index order."""

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
class AllReduceConfig:
    """All-reduce over nodes and links: a flat ring (T = 2(n-1) alpha + 2 (n-1)/n S / B_min), hierarchical, tree or NCCL's pick."""

    kind: ClassVar[str] = "ring_allreduce"
    alpha_s: float = param(0.00005, "per-step latency alpha of an inter-node hop (groups may override: nic_latency_s)", ge=0)
    bandwidth_gbps: float | None = param(None, "every node's NIC bandwidth (null: each group's own; the ring runs at its "
                                               "slowest hop)", gt=0)
    algorithm: NetworkAlgorithm = param(
        "ring", "ring: one flat ring over all workers; hierarchical: intra-node reduce-scatter, ring across nodes, "
                "intra-node all-gather; tree: NCCL's pipelined tree (chains in nodes, double binary tree across); "
                "nccl: ring on <= 2 nodes, tree on more (lbsim/network/collectives.py); nccl_fitted: NCCL's own "
                "cost model with the figures of `nccl` (ring / tree x LL / LL128 / Simple; lbsim/network/nccl.py)")
    chunk_share: float = param(
        0.0, "pipeline fill: NCCL's chunk as a share of one all-reduce call (0: perfect pipelining; "
             "1: store-and-forward; NCCL 512 KiB / DDP 25 MiB bucket = 0.02)", ge=0, le=1)
    ring_latency: RingLatency = param(
        "slowest_hop", "how the flat ring pays its hops' latencies: slowest_hop: every step waits for the slowest hop; "
                       "path: summed along the ring's path, as NCCL's unsynchronised steps do (what `lbsim calibrate` "
                       "fits; lbsim/network/ring_latency.py)")
    nccl: NcclModel | None = param(None, "algorithm nccl_fitted only: the figures `lbsim calibrate-nccl` fits; the "
                                         "links' bandwidths are its bus bandwidths (NIC: across nodes, intra: inside)")

    def check(self) -> None:
        """The ``nccl`` figures are given exactly when the algorithm is ``nccl_fitted``."""
        if self.algorithm == "nccl_fitted" and self.nccl is None:
            raise InputError("nccl", "algorithm nccl_fitted needs the `nccl` figures (`lbsim calibrate-nccl` writes them)")
        if self.nccl is not None and self.algorithm != "nccl_fitted":
            raise InputError("nccl", f"the `nccl` figures are used by algorithm nccl_fitted only, not {self.algorithm}")


def network_configs() -> dict[str, type]:
    """The ``network`` sections by ``name``: parameter_server, ring_allreduce."""
    return {c.kind: c for c in (ParameterServerConfig, AllReduceConfig)}


NetworkConfig = ParameterServerConfig | AllReduceConfig
