"""The cluster's nodes and links, and the all-reduce plan both engines time rounds with.

Workers are grouped into nodes (consecutive worker indices; a node never spans two worker
groups). Each node has a NIC (:class:`~lbsim.network.collectives.Link` between nodes, shared by
the node's workers) and an intra-node link (PCIe / NVLink). Both come from the catalog instance
and the group's inline overrides (:mod:`lbsim.scenario.resolve`).

Network contention: worker ``w``'s network slowdown ``f_w(t)`` slows the links of its node —
node ``k``'s links run at ``B / F_k`` with ``F_k = max_{w on k} f_w``: the NIC and the PCIe/NVLink
hops are shared, so the most slowed worker's share sets the pace (with one worker per node,
``F_k = f_w``: the worker's own link, as before nodes existed).

:class:`AllReducePlan` is the chosen algorithm's engine form (:mod:`lbsim.network.algorithms`)
on a fixed topology, with the per-node arrays prepared once so that a round costs a few numpy
operations (the synchronous fast path times thousands of rounds of thousands of workers); a test
checks it against the :class:`Link`-based functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from lbsim.network.algorithms import NcclFactory, NetworkAlgorithm, NodeLinks, Options, algorithm_named
from lbsim.network.collectives import Link, bytes_per_s
from lbsim.network.ring_latency import RingLatency

if TYPE_CHECKING:
    from lbsim.workers import WorkerSpec


@dataclass(frozen=True)
class Topology:
    """Nodes in worker order: sizes, each worker's node, each node's NIC and intra link."""

    node_sizes: tuple[int, ...]
    nic: tuple[Link, ...]
    intra: tuple[Link, ...]

    def __post_init__(self) -> None:
        if not (len(self.node_sizes) == len(self.nic) == len(self.intra)):
            raise ValueError("one NIC and one intra link per node")
        if any(g < 1 for g in self.node_sizes):
            raise ValueError(f"every node holds at least one worker, got {list(self.node_sizes)}")

    @property
    def n_workers(self) -> int:
        """``n = Σ g_k``."""
        return sum(self.node_sizes)

    @property
    def node_of(self) -> tuple[int, ...]:
        """Each worker's node index."""
        return tuple(k for k, g in enumerate(self.node_sizes) for _ in range(g))

    def members(self, node: int) -> range:
        """The worker indices on ``node``."""
        start = sum(self.node_sizes[:node])
        return range(start, start + self.node_sizes[node])

    def node_factors(self, worker_factors: Sequence[float]) -> list[float]:
        """``F_k = max`` of the node's workers' network slowdowns (module docstring)."""
        out, start = [], 0
        for g in self.node_sizes:
            out.append(max(worker_factors[start:start + g]))
            start += g
        return out

    def links(self, worker_factors: Sequence[float]) -> tuple[list[Link], list[Link]]:
        """(intra, inter) links of every node, slowed by the node's network contention."""
        nf = self.node_factors(worker_factors)
        intra = [Link(x.bandwidth_bytes_per_s / f, x.latency_s) for x, f in zip(self.intra, nf, strict=True)]
        inter = [Link(x.bandwidth_bytes_per_s / f, x.latency_s) for x, f in zip(self.nic, nf, strict=True)]
        return intra, inter


class AllReducePlan:
    """All-reduce durations on one topology: the algorithm's engine form, prepared once
    (:mod:`lbsim.network.algorithms`; the same result as its ``allreduce_s``).

    ``algorithm="nccl_fitted"`` times every call with NCCL's fitted cost model
    (:mod:`lbsim.network.nccl`): ``nccl`` builds its figures from the bus bandwidths (intra, inter)
    in bytes/s, the slowest node's links slowed by its network contention. ``ring_latency="path"``
    makes the flat ring pay its hops' latencies summed along its path
    (:mod:`lbsim.network.ring_latency`) rather than the slowest hop's at every step."""

    def __init__(self, topology: Topology, algorithm: NetworkAlgorithm = "ring", chunk_share: float = 0.0, *,
                 nccl: NcclFactory | None = None, ring_latency: RingLatency = "slowest_hop") -> None:
        form = algorithm_named(algorithm)
        if nccl is not None and not form.needs_nccl_figures:
            raise ValueError(f"nccl figures are for algorithm nccl_fitted, not {algorithm}")
        if not 0.0 <= chunk_share <= 1.0:
            raise ValueError(f"pipeline chunk share must be in [0, 1], got {chunk_share!r}")
        links = NodeLinks(topology.node_sizes, topology.intra, topology.nic)
        self.n = links.n
        self.one_per_node = all(g == 1 for g in topology.node_sizes)
        self.starts = np.concatenate(([0], np.cumsum(topology.node_sizes)[:-1])).astype(np.intp)
        self._timer = form.timer(links, Options(chunk_share, ring_latency, nccl))

    def _node_factors(self, worker_factors: np.ndarray) -> np.ndarray:
        if self.one_per_node:
            return worker_factors
        return np.maximum.reduceat(worker_factors, self.starts)

    def duration_s(self, gradient_bytes: float, worker_factors: np.ndarray | Sequence[float]) -> float:
        """One all-reduce starting when the workers' network slowdowns are ``worker_factors``."""
        if self.n <= 1:
            return 0.0
        return self._timer(gradient_bytes, self._node_factors(np.asarray(worker_factors, dtype=np.float64)))


def topology_of(workers: Sequence[WorkerSpec], *, nic_gbps: float | None = None,
                nic_latency_s: float = 0.0) -> Topology:
    """Nodes of resolved workers: each node's NIC (``nic_gbps``, if given, sets every node's) and intra link.

    ``nic_latency_s`` is the inter-node hop latency of workers that do not override it.
    """
    sizes: list[int] = []
    nic: list[Link] = []
    intra: list[Link] = []
    for w in workers:
        if w.node == len(sizes):  # the node's first worker carries the node's figures
            bw = nic_gbps if nic_gbps is not None else w.bandwidth_gbps
            lat = w.nic_latency_s if w.nic_latency_s is not None else nic_latency_s
            nic.append(Link(bytes_per_s(bw), lat))
            intra_gbps = w.intra_bandwidth_gbps if w.intra_bandwidth_gbps is not None else bw  # unused when alone
            intra.append(Link(bytes_per_s(intra_gbps), w.intra_latency_s))
            sizes.append(0)
        elif w.node != len(sizes) - 1:
            raise ValueError(f"workers must be in node order: worker {w.index} on node {w.node}")
        sizes[-1] += 1
    return Topology(tuple(sizes), tuple(nic), tuple(intra))
