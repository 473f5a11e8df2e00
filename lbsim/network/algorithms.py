"""The all-reduce algorithms a scenario can choose: one table, one class per algorithm.

:data:`ALLREDUCE` maps ``network.algorithm`` to an :class:`AllReduceAlgorithm`. Each gives the
duration of one all-reduce in two forms of one formula:

* :meth:`~AllReduceAlgorithm.timer` — the engines' form: prepared once per topology from
  :class:`NodeLinks` (the nodes' links as arrays), then called every round with the nodes'
  network slowdowns ``F_k`` (node ``k``'s links run at ``B / F_k``) and the message size;
* :meth:`~AllReduceAlgorithm.time_s` — the same duration on explicit :class:`Link` lists (the
  calibration fit calls it thousands of times on small placements). By default it *is* the
  engines' form on those links with ``F = 1``; ``ring``, ``hierarchical`` and ``tree`` keep the
  closed forms of :mod:`lbsim.network.collectives` here, which a test holds equal to their
  engine form bit for bit on contended links.

The formulas are in :mod:`lbsim.network.collectives` (ring, hierarchical, tree, NCCL's pick) and
:mod:`lbsim.network.nccl` (``nccl_fitted``: NCCL's own cost model with fitted figures, taking the
slowest node's contended bus bandwidths). A new algorithm is one class here and one entry in
:data:`ALLREDUCE`; the scenario's choices, their validation and the engines follow from the table.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from lbsim.network.collectives import (
    Link,
    fill_s,
    hierarchical_allreduce_s,
    ring_allreduce_s,
    ring_over_s,
    tree_allreduce_s,
    tree_depth,
    tree_path,
)
from lbsim.network.nccl import NcclFigures, allreduce_time_s
from lbsim.network.ring_latency import RingLatency, path_ring_s, ring_hop_latency_sum

Timer = Callable[[float, np.ndarray], float]
"""One all-reduce's duration in s from ``(gradient_bytes, node_factors)`` on a prepared topology."""
NcclFactory = Callable[[float, float], NcclFigures]
"""NCCL's fitted figures for the bus bandwidths ``(intra, inter)`` in bytes/s."""


@dataclass(frozen=True)
class Options:
    """What a scenario sets besides the algorithm: the pipeline chunk share φ, how the flat ring
    pays its latencies, and the fitted NCCL figures (``nccl_fitted`` only)."""

    chunk_share: float = 0.0
    ring_latency: RingLatency = "slowest_hop"
    nccl: NcclFactory | None = None


class NodeLinks:
    """One topology's links as arrays, prepared once: node sizes ``g_k``, NIC and intra links.

    ``multi`` are the nodes with intra hops (``g_k ≥ 2``); ``intra_bw`` / ``intra_lat`` are
    theirs only. Every engine form reads these, so a round costs a few numpy operations."""

    def __init__(self, node_sizes: Sequence[int], intra: Sequence[Link], inter: Sequence[Link]) -> None:
        sizes = np.array(node_sizes, dtype=np.int64)
        self.node_sizes = tuple(int(g) for g in node_sizes)
        self.intra = tuple(intra)
        self.inter = tuple(inter)
        self.n = int(sizes.sum())
        self.nodes = len(sizes)
        self.max_size = int(sizes.max())
        self.nic_bw = np.array([x.bandwidth_bytes_per_s for x in inter], dtype=np.float64)
        self.nic_lat = max(x.latency_s for x in inter)
        self.multi = np.flatnonzero(sizes >= 2)
        self.multi_sizes = [int(g) for g in sizes[self.multi]]
        self.intra_bw = np.array([intra[int(k)].bandwidth_bytes_per_s for k in self.multi], dtype=np.float64)
        self.intra_lat = [intra[int(k)].latency_s for k in self.multi]

    def slowed_intra_nic_min(self, node_factors: np.ndarray) -> tuple[np.ndarray, float]:
        """The multi nodes' intra bandwidths and the slowest NIC's, each node's divided by ``F_k``."""
        intra_bw = self.intra_bw / node_factors[self.multi] if self.multi.size else np.empty(0)
        return intra_bw, float((self.nic_bw / node_factors).min())


class AllReduceAlgorithm:
    """One all-reduce algorithm: its engine form (:meth:`timer`) and its form on links (:meth:`time_s`)."""

    needs_nccl_figures = False
    """True when the algorithm times calls with NCCL's fitted figures (:class:`Options`.nccl)."""

    def timer(self, links: NodeLinks, options: Options) -> Timer:
        """The duration of one call on ``links``, as a function of the size and the nodes' slowdowns."""
        raise NotImplementedError

    def time_s(self, gradient_bytes: float, node_sizes: Sequence[int], intra: Sequence[Link], inter: Sequence[Link],
               options: Options) -> float:
        """One call on uncontended ``intra`` / ``inter`` links (the engine form with every ``F_k = 1``)."""
        links = NodeLinks(node_sizes, intra, inter)
        if links.n <= 1:
            return 0.0
        return self.timer(links, options)(gradient_bytes, np.ones(links.nodes))


class Ring(AllReduceAlgorithm):
    """The flat ring over all ranks (``T_ring``, :func:`lbsim.network.collectives.ring_allreduce_s`)."""

    def timer(self, links: NodeLinks, options: Options) -> Timer:
        """Prepared: the hops the ring uses and the node slowing each; per call ``2(n−1) · max_h (α_h + S/(n B_h/F))``
        (the classic form when all latencies agree, the path form on request) plus the fill."""
        n, phi = links.n, options.chunk_share
        # the hops it uses, in collectives._hops order (intra links of shared nodes, then every NIC
        # when there are >= 2 nodes), and the node whose slowdown slows each
        two_plus = links.nodes >= 2
        hop_node = np.array(list(links.multi.tolist()) + (list(range(links.nodes)) if two_plus else []), dtype=np.intp)
        hop_bw = np.concatenate((links.intra_bw, links.nic_bw if two_plus else np.empty(0)))
        lats = list(links.intra_lat) + ([x.latency_s for x in links.inter] if two_plus else [])
        hop_lat = np.array(lats, dtype=np.float64)
        uniform = len(set(lats)) == 1
        path = options.ring_latency == "path" and not uniform
        lat_sum = ring_hop_latency_sum(links.node_sizes, [x.latency_s for x in links.intra],
                                       [x.latency_s for x in links.inter])

        def duration_s(gradient_bytes: float, node_factors: np.ndarray) -> float:
            bw = hop_bw / node_factors[hop_node]
            if uniform:  # collectives.ring_step_s, classic form
                t = float(ring_over_s(n, gradient_bytes, float(bw.min()), float(hop_lat[0])))
            elif path:
                t = path_ring_s(gradient_bytes, n, lat_sum, float(bw.min()))
            else:
                t = float(2 * (n - 1) * float((hop_lat + gradient_bytes / n / bw).max()))
            return t + fill_s(2 * (n - 1), phi, gradient_bytes, float(bw.min()))

        return duration_s

    def time_s(self, gradient_bytes: float, node_sizes: Sequence[int], intra: Sequence[Link], inter: Sequence[Link],
               options: Options) -> float:
        """The closed form on links (:func:`~lbsim.network.collectives.ring_allreduce_s`)."""
        return ring_allreduce_s(gradient_bytes, node_sizes, intra, inter, options.chunk_share, options.ring_latency)


class Hierarchical(AllReduceAlgorithm):
    """Intra reduce-scatter, a ring of the shards across nodes, intra all-gather (``T_hier``)."""

    def timer(self, links: NodeLinks, options: Options) -> Timer:
        """Prepared: the stages ``2(g_max−1) + 2(N−1)``; per call ``2 max_k RS_k + AR_ring`` on the contended links plus the fill."""
        nodes, phi = links.nodes, options.chunk_share
        stages = 2 * (links.max_size - 1) + 2 * (nodes - 1)

        def duration_s(gradient_bytes: float, node_factors: np.ndarray) -> float:
            intra_bw, nic_min = links.slowed_intra_nic_min(node_factors)
            bott = min(nic_min, float(intra_bw.min())) if intra_bw.size else nic_min
            rs = 0.0
            for g, lat, b in zip(links.multi_sizes, links.intra_lat, intra_bw.tolist(), strict=True):
                rs = max(rs, (g - 1) * lat + (g - 1) / g * gradient_bytes / b)
            ar = 0.0
            if nodes >= 2:
                ar = float(ring_over_s(nodes, gradient_bytes, nic_min, links.nic_lat))
            else:
                bott = float(intra_bw.min())
            return 2 * rs + ar + fill_s(stages, phi, gradient_bytes, bott)

        return duration_s

    def time_s(self, gradient_bytes: float, node_sizes: Sequence[int], intra: Sequence[Link], inter: Sequence[Link],
               options: Options) -> float:
        """The closed form on links (:func:`~lbsim.network.collectives.hierarchical_allreduce_s`)."""
        return hierarchical_allreduce_s(gradient_bytes, node_sizes, intra, inter, options.chunk_share)


class Tree(AllReduceAlgorithm):
    """NCCL's pipelined tree: chains in the nodes, a double binary tree across them (``T_tree``);
    on one node the flat ring."""

    def timer(self, links: NodeLinks, options: Options) -> Timer:
        """Prepared: the path of the ``d + 1`` largest nodes and its latency; per call ``S / B_bott + 2·latency`` plus the fill."""
        if links.nodes <= 1:
            return RING.timer(links, options)
        phi = options.chunk_share
        depth = tree_depth(links.nodes)
        path = tree_path(links.node_sizes)
        hops = sum(links.node_sizes[k] - 1 for k in path)
        latency = math.fsum((links.node_sizes[k] - 1) * links.intra[k].latency_s for k in path) + depth * links.nic_lat

        def duration_s(gradient_bytes: float, node_factors: np.ndarray) -> float:
            intra_bw, nic_min = links.slowed_intra_nic_min(node_factors)
            bott = min(nic_min, float(intra_bw.min())) if intra_bw.size else nic_min
            return gradient_bytes / bott + 2 * latency + fill_s(2 * (hops + depth), phi, gradient_bytes, bott)

        return duration_s

    def time_s(self, gradient_bytes: float, node_sizes: Sequence[int], intra: Sequence[Link], inter: Sequence[Link],
               options: Options) -> float:
        """The closed form on links (:func:`~lbsim.network.collectives.tree_allreduce_s`)."""
        return tree_allreduce_s(gradient_bytes, node_sizes, intra, inter, options.chunk_share)


class NcclPick(AllReduceAlgorithm):
    """NCCL's own choice: the flat ring on one or two nodes (NCCL ≥ 2.4 builds no trees there), the tree on more."""

    @staticmethod
    def choice(nodes: int) -> AllReduceAlgorithm:
        """The algorithm NCCL runs on ``nodes`` nodes."""
        return RING if nodes <= 2 else TREE

    def timer(self, links: NodeLinks, options: Options) -> Timer:
        """The engine form of NCCL's choice for the topology's node count."""
        return self.choice(links.nodes).timer(links, options)

    def time_s(self, gradient_bytes: float, node_sizes: Sequence[int], intra: Sequence[Link], inter: Sequence[Link],
               options: Options) -> float:
        """The closed form on links of NCCL's choice for ``len(node_sizes)`` nodes."""
        return self.choice(len(node_sizes)).time_s(gradient_bytes, node_sizes, intra, inter, options)


class NcclFitted(AllReduceAlgorithm):
    """NCCL's own cost model (:mod:`lbsim.network.nccl`) with fitted figures, built from the bus
    bandwidths of the slowest contended links: ``intra = min_k B_intra_k / F_k`` over nodes with
    intra hops, ``inter = min_k B_nic_k / F_k``; the largest node sets the chain."""

    needs_nccl_figures = True

    def timer(self, links: NodeLinks, options: Options) -> Timer:
        """Per call: NCCL's cost of its cheapest (algorithm, protocol) with figures from the slowest contended links."""
        figures = options.nccl
        if figures is None:
            raise ValueError("algorithm nccl_fitted needs the nccl figures")

        def duration_s(gradient_bytes: float, node_factors: np.ndarray) -> float:
            intra_bw, inter = links.slowed_intra_nic_min(node_factors)
            intra = float(intra_bw.min()) if intra_bw.size else inter
            return allreduce_time_s(figures(intra, inter), links.n, links.nodes, gradient_bytes, links.max_size)

        return duration_s


RING, TREE = Ring(), Tree()

ALLREDUCE: Mapping[str, AllReduceAlgorithm] = {
    "ring": RING,
    "hierarchical": Hierarchical(),
    "tree": TREE,
    "nccl": NcclPick(),
    "nccl_fitted": NcclFitted(),
}
"""Every all-reduce algorithm by its scenario name (``network.algorithm``), in the order the docs list them."""

ALGORITHMS: tuple[str, ...] = tuple(k for k, a in ALLREDUCE.items() if not a.needs_nccl_figures)
"""The algorithms timed from the links alone (what ``lbsim calibrate`` can fit)."""

if TYPE_CHECKING:
    NetworkAlgorithm = str
else:  # the scenario field's valid values: the table's names (lbsim.fields checks a Literal)
    NetworkAlgorithm = Literal[tuple(ALLREDUCE)]


def algorithm_named(name: str) -> AllReduceAlgorithm:
    """The table's entry for ``name``; ValueError listing the valid names otherwise."""
    try:
        return ALLREDUCE[name]
    except KeyError:
        raise ValueError(f"unknown all-reduce algorithm {name!r}; valid: {', '.join(ALLREDUCE)}") from None


def allreduce_s(gradient_bytes: float, node_sizes: Sequence[int], intra: Sequence[Link], inter: Sequence[Link], *,
                algorithm: str = "ring", chunk_share: float = 0.0, ring_latency: RingLatency = "slowest_hop",
                nccl: NcclFactory | None = None) -> float:
    """Duration of one all-reduce of ``gradient_bytes`` over the topology (:data:`ALLREDUCE`'s ``algorithm``)."""
    return algorithm_named(algorithm).time_s(gradient_bytes, node_sizes, intra, inter,
                                             Options(chunk_share, ring_latency, nccl))
