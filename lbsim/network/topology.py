"""The cluster's nodes and links, and the all-reduce plan both engines time rounds with.

Workers are grouped into nodes (consecutive worker indices; a node never spans two worker
groups). Each node has a NIC (:class:`~lbsim.network.collectives.Link` between nodes, shared by
the node's workers) and an intra-node link (PCIe / NVLink). Both come from the catalog instance
and the group's inline overrides (:mod:`lbsim.scenario.resolve`).

Network contention: worker ``w``'s network slowdown ``f_w(t)`` slows the links of its node —
node ``k``'s links run at ``B / F_k`` with ``F_k = max_{w on k} f_w``: the NIC and the PCIe/NVLink
hops are shared, so the most slowed worker's share sets the pace (with one worker per node,
``F_k = f_w``: the worker's own link, as before nodes existed).

:class:`AllReducePlan` is :func:`~lbsim.network.collectives.allreduce_s` on a fixed topology,
with the per-node arrays prepared once so that a round costs a few numpy operations (the
synchronous fast path times thousands of rounds of thousands of workers); a test checks it
against the :class:`Link`-based functions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from lbsim.network.collectives import (
    ALGORITHMS,
    Algorithm,
    Link,
    NetworkAlgorithm,
    _ring_over,
    bytes_per_s,
    fill_s,
    nccl_choice,
    tree_depth,
    tree_path,
)
from lbsim.network.nccl import NcclFigures, allreduce_time_s
from lbsim.network.ring_latency import RingLatency, path_ring_s, ring_hop_latency_sum

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
        return sum(self.node_sizes)

    @property
    def node_of(self) -> tuple[int, ...]:
        """Each worker's node index."""
        return tuple(k for k, g in enumerate(self.node_sizes) for _ in range(g))

    def members(self, node: int) -> range:
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
    """All-reduce durations on one topology, vectorised over nodes (same result as ``allreduce_s``).

    ``algorithm="nccl_fitted"`` times every call with NCCL's fitted cost model instead
    (:mod:`lbsim.network.nccl`): ``nccl`` builds its figures from the bus bandwidths (intra, inter)
    in bytes/s, the slowest node's links slowed by its network contention. ``ring_latency="path"``
    makes the flat ring pay its hops' latencies summed along its path
    (:mod:`lbsim.network.ring_latency`) rather than the slowest hop's at every step."""

    def __init__(self, topology: Topology, algorithm: NetworkAlgorithm = "ring", chunk_share: float = 0.0, *,
                 nccl: Callable[[float, float], NcclFigures] | None = None,
                 ring_latency: RingLatency = "slowest_hop") -> None:
        self.nccl = nccl
        if algorithm == "nccl_fitted":
            if nccl is None:
                raise ValueError("algorithm nccl_fitted needs the nccl figures")
            algorithm = "ring"  # the arrays below are prepared as for the ring; duration_s uses the NCCL model
        elif nccl is not None:
            raise ValueError(f"nccl figures are for algorithm nccl_fitted, not {algorithm}")
        if algorithm not in ALGORITHMS:
            raise ValueError(f"unknown all-reduce algorithm {algorithm!r}; valid: {', '.join(ALGORITHMS)}")
        if not 0.0 <= chunk_share <= 1.0:
            raise ValueError(f"pipeline chunk share must be in [0, 1], got {chunk_share!r}")
        self.chunk_share = chunk_share
        sizes = np.array(topology.node_sizes, dtype=np.int64)
        self.n = int(sizes.sum())
        self.nodes = len(sizes)
        self.algorithm: Algorithm = nccl_choice(self.nodes) if algorithm == "nccl" else algorithm
        if self.algorithm == "tree" and self.nodes <= 1:
            self.algorithm = "ring"  # collectives.tree_allreduce_s: one node runs the flat ring
        self.one_per_node = bool((sizes == 1).all())
        self.starts = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.intp)
        self.nic_bw = np.array([x.bandwidth_bytes_per_s for x in topology.nic], dtype=np.float64)
        self.nic_lat = max(x.latency_s for x in topology.nic)
        self.multi = np.flatnonzero(sizes >= 2)  # nodes with intra hops
        self.multi_sizes = [int(g) for g in sizes[self.multi]]
        self.intra_bw = np.array([topology.intra[k].bandwidth_bytes_per_s for k in self.multi], dtype=np.float64)
        self.intra_lat = [topology.intra[k].latency_s for k in self.multi]
        # flat ring: the hops it uses, in collectives._hops order (intra links of shared nodes, then
        # every NIC when there are >= 2 nodes), and the node whose slowdown slows each
        hop_node = list(self.multi.tolist()) + (list(range(self.nodes)) if self.nodes >= 2 else [])
        self.hop_node = np.array(hop_node, dtype=np.intp)
        self.hop_bw = np.concatenate((self.intra_bw, self.nic_bw if self.nodes >= 2 else np.empty(0)))
        hop_lat = list(self.intra_lat) + ([x.latency_s for x in topology.nic] if self.nodes >= 2 else [])
        self.hop_lat = np.array(hop_lat, dtype=np.float64)
        self.uniform_lat = len(set(hop_lat)) == 1
        # ring_latency "path": the hops' latencies summed along the ring (lbsim.network.ring_latency)
        self.path_ring = ring_latency == "path" and not self.uniform_lat
        self.ring_lat_sum = ring_hop_latency_sum(topology.node_sizes, [x.latency_s for x in topology.intra],
                                                 [x.latency_s for x in topology.nic])
        # tree: the path of the d+1 largest nodes (collectives.tree_allreduce_s)
        self.depth = tree_depth(self.nodes)
        path = tree_path(topology.node_sizes)
        self.path_hops = sum(topology.node_sizes[k] - 1 for k in path)
        self.path_latency = (math.fsum((topology.node_sizes[k] - 1) * topology.intra[k].latency_s for k in path)
                             + self.depth * self.nic_lat)
        self.max_size = int(sizes.max())

    def _node_factors(self, worker_factors: np.ndarray) -> np.ndarray:
        if self.one_per_node:
            return worker_factors
        return np.maximum.reduceat(worker_factors, self.starts)

    def duration_s(self, gradient_bytes: float, worker_factors: np.ndarray | Sequence[float]) -> float:
        """One all-reduce starting when the workers' network slowdowns are ``worker_factors``."""
        if self.n <= 1:
            return 0.0
        nf = self._node_factors(np.asarray(worker_factors, dtype=np.float64))
        if self.nccl is not None:
            inter = float((self.nic_bw / nf).min())
            intra = float((self.intra_bw / nf[self.multi]).min()) if self.multi.size else inter
            return allreduce_time_s(self.nccl(intra, inter), self.n, self.nodes, gradient_bytes, self.max_size)
        phi = self.chunk_share
        if self.algorithm == "ring":
            bw = self.hop_bw / nf[self.hop_node]
            if self.uniform_lat:  # collectives.ring_step_s, classic form
                t = float(_ring_over(self.n, gradient_bytes, float(bw.min()), float(self.hop_lat[0])))
            elif self.path_ring:
                t = path_ring_s(gradient_bytes, self.n, self.ring_lat_sum, float(bw.min()))
            else:
                t = float(2 * (self.n - 1) * float((self.hop_lat + gradient_bytes / self.n / bw).max()))
            return t + fill_s(2 * (self.n - 1), phi, gradient_bytes, float(bw.min()))
        intra_bw = self.intra_bw / nf[self.multi] if self.multi.size else np.empty(0)
        nic_min = float((self.nic_bw / nf).min())
        bott = min(nic_min, float(intra_bw.min())) if intra_bw.size else nic_min
        if self.algorithm == "tree":
            return (gradient_bytes / bott + 2 * self.path_latency
                    + fill_s(2 * (self.path_hops + self.depth), phi, gradient_bytes, bott))
        rs = 0.0
        for g, lat, b in zip(self.multi_sizes, self.intra_lat, intra_bw.tolist(), strict=True):
            rs = max(rs, (g - 1) * lat + (g - 1) / g * gradient_bytes / b)
        ar = 0.0
        if self.nodes >= 2:
            ar = float(_ring_over(self.nodes, gradient_bytes, nic_min, self.nic_lat))
        else:
            bott = float(intra_bw.min())
        stages = 2 * (self.max_size - 1) + 2 * (self.nodes - 1)
        return 2 * rs + ar + fill_s(stages, phi, gradient_bytes, bott)


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
