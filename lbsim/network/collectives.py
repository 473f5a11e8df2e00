"""Collectives over nodes and links: all-reduce durations in closed form (pure, no engine).

Topology: ranks (workers) live on nodes, node ``k`` holding ``g_k = node_sizes[k]`` consecutive
ranks, ``n = Σ g_k`` ranks on ``N = len(node_sizes)`` nodes. Each node has two links, each a
:class:`Link` (bandwidth ``B`` in bytes/s, per-hop latency ``α`` in s):

* ``intra[k]`` — a hop between two ranks of node ``k`` (PCIe / NVLink);
* ``inter[k]`` — the node's NIC: a hop that leaves node ``k`` crosses it. The NIC is shared by
  everything that leaves the node at the same time.

Contention is applied by the caller: a slowed node's link is passed with its bandwidth divided
by the slowdown, so one slow NIC can dominate. ``S`` is the gradient size in bytes.

**Flat ring** (``algorithm="ring"``): the n ranks form one ring in node order. A ring
all-reduce is ``2(n−1)`` steps (reduce-scatter, then all-gather); in each step every rank sends
``S/n`` bytes to its successor, all hops at once, so a step lasts as long as its slowest hop::

    T_ring = 2(n−1) · max_h (α_h + S / (n B_h))

over the hops the ring uses: the intra link of every node with ``g_k ≥ 2`` (its ``g_k − 1``
inside hops) and, when ``N ≥ 2``, the NIC of every node (exactly one ring hop leaves each node,
so a NIC carries one hop's traffic). When every hop has the same latency α (one rank per node:
only NICs) this is the classic α–β ring ``2(n−1)α + 2(n−1)/n · S / B_min``, and it is computed
in that form, with those floating-point operations. One node: only intra hops.

**Hierarchical** (``algorithm="hierarchical"``): ring across nodes between intra-node phases:

1. intra-node reduce-scatter on every node at once: ``(g_k−1)`` steps of ``S/g_k`` bytes over
   ``intra[k]``: ``RS_k = (g_k−1)·α_intra_k + (g_k−1)/g_k · S / B_intra_k``;
2. inter-node all-reduce of the shards: the ``g_k`` ranks of node ``k`` each all-reduce their
   ``S/g_k`` shard with their peers on the other nodes, all through node ``k``'s NIC at once —
   the NIC carries ``2(N−1)/N · S`` in all, whatever ``g_k``, in a ring over the N nodes::
       AR_ring = 2(N−1)·α_inter_max + 2(N−1)/N · S / B_inter_min
3. intra-node all-gather, the mirror of step 1 (``AG_k = RS_k``).

Nodes run steps 1 and 3 in parallel and meet for step 2, so ``T_hier = 2·max_k RS_k + AR_ring``.
With one rank per node ``RS_k = 0`` and ``T_hier = T_ring`` exactly; on one node ``AR = 0``.

**Tree** (``algorithm="tree"``, NCCL's double binary tree across nodes): as hierarchical, with
step 2 a pipelined reduce-then-broadcast over two binary trees of the N nodes: its latency grows
with the tree depth and its bandwidth term does not grow with N::

    AR_tree = 2⌈log2 N⌉·α_inter_max + S / B_inter_min          (N ≥ 2; 0 on one node)
    T_tree  = 2·max_k RS_k + AR_tree

(on two nodes ``S / B`` is the ring's ``2(N−1)/N · S / B``).

**NCCL** (``algorithm="nccl"``): NCCL's own choice between the two — the flat ring on one or two
nodes (NCCL ≥ 2.4 uses no trees there), the tree on three or more. Measured sync tails (Pollux
T4 profiles, ``lbsim calibrate``) show both regimes: on two nodes the tail grows with the GPUs
per node like a flat ring; across more nodes it hardly grows with the node count, like a tree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Algorithm = Literal["ring", "hierarchical", "tree", "nccl"]
ALGORITHMS: tuple[Algorithm, ...] = ("ring", "hierarchical", "tree", "nccl")


@dataclass(frozen=True)
class Link:
    """One hop: ``bandwidth_bytes_per_s`` (> 0) and a per-hop ``latency_s`` (>= 0)."""

    bandwidth_bytes_per_s: float
    latency_s: float

    def __post_init__(self) -> None:
        if not self.bandwidth_bytes_per_s > 0:
            raise ValueError(f"link bandwidth must be > 0, got {self.bandwidth_bytes_per_s!r}")
        if not self.latency_s >= 0:
            raise ValueError(f"link latency must be >= 0, got {self.latency_s!r}")


def bytes_per_s(gbps: float) -> float:
    """Gbit/s (decimal) to bytes/s."""
    return gbps * 1e9 / 8.0


def _check(node_sizes: Sequence[int], intra: Sequence[Link], inter: Sequence[Link]) -> None:
    if not (len(node_sizes) == len(intra) == len(inter)):
        raise ValueError(f"one intra and one inter link per node: {len(node_sizes)} nodes, "
                         f"{len(intra)} intra, {len(inter)} inter")
    if any(g < 1 for g in node_sizes):
        raise ValueError(f"every node holds at least one rank, got {list(node_sizes)}")


def _ring_over(steps_n: int, gradient_bytes: float, bandwidth: float, latency: float) -> float:
    """α–β ring all-reduce among ``steps_n`` parties: ``2(m−1)α + 2(m−1)/m · S/B``."""
    n = steps_n
    return 2 * (n - 1) * latency + 2 * (n - 1) / n * gradient_bytes / bandwidth


def ring_step_s(gradient_bytes: float, n: int, bandwidths: Sequence[float], latencies: Sequence[float]) -> float:
    """``2(n−1) · max_h (α_h + S/(n B_h))`` over hops ``(bandwidths[h], latencies[h])``.

    With one latency for every hop, the classic form ``2(n−1)α + 2(n−1)/n · S / B_min`` (the same
    value, computed as the engines always have: results written before nodes existed do not move).
    """
    if len(set(latencies)) == 1:
        return _ring_over(n, gradient_bytes, min(bandwidths), latencies[0])
    return 2 * (n - 1) * max(a + gradient_bytes / n / b for a, b in zip(latencies, bandwidths, strict=True))


def _hops(node_sizes: Sequence[int], intra: Sequence[Link], inter: Sequence[Link]) -> list[Link]:
    """The links a flat ring crosses: intra links of shared nodes, every NIC when there are >= 2 nodes."""
    hops = [intra[k] for k, g in enumerate(node_sizes) if g >= 2]
    if len(node_sizes) >= 2:
        hops.extend(inter)
    return hops


def ring_allreduce_s(gradient_bytes: float, node_sizes: Sequence[int], intra: Sequence[Link],
                     inter: Sequence[Link]) -> float:
    """Flat ring over all ranks (module docstring, ``T_ring``)."""
    _check(node_sizes, intra, inter)
    n = sum(node_sizes)
    if n <= 1:
        return 0.0
    hops = _hops(node_sizes, intra, inter)
    return ring_step_s(gradient_bytes, n, [h.bandwidth_bytes_per_s for h in hops], [h.latency_s for h in hops])


def _intra_rs_s(gradient_bytes: float, node_sizes: Sequence[int], intra: Sequence[Link]) -> float:
    """``max_k RS_k``: the slowest node's intra-node reduce-scatter (0 when every node holds one rank)."""
    rs = 0.0
    for g, link in zip(node_sizes, intra, strict=True):
        if g >= 2:
            rs = max(rs, (g - 1) * link.latency_s + (g - 1) / g * gradient_bytes / link.bandwidth_bytes_per_s)
    return rs


def tree_inter_s(gradient_bytes: float, nodes: int, bandwidth: float, latency: float) -> float:
    """``AR_tree = 2⌈log2 N⌉ α + S / B`` across ``nodes`` nodes (0 for one node)."""
    if nodes <= 1:
        return 0.0
    return 2 * math.ceil(math.log2(nodes)) * latency + gradient_bytes / bandwidth


def tree_allreduce_s(gradient_bytes: float, node_sizes: Sequence[int], intra: Sequence[Link],
                     inter: Sequence[Link]) -> float:
    """Intra reduce-scatter, double binary tree across nodes, intra all-gather (``T_tree``)."""
    _check(node_sizes, intra, inter)
    if sum(node_sizes) <= 1:
        return 0.0
    ar = tree_inter_s(gradient_bytes, len(node_sizes), min(h.bandwidth_bytes_per_s for h in inter),
                      max(h.latency_s for h in inter))
    return 2 * _intra_rs_s(gradient_bytes, node_sizes, intra) + ar


def hierarchical_allreduce_s(gradient_bytes: float, node_sizes: Sequence[int], intra: Sequence[Link],
                             inter: Sequence[Link]) -> float:
    """Intra reduce-scatter, ring all-reduce of the shards across nodes, intra all-gather (``T_hier``)."""
    _check(node_sizes, intra, inter)
    if sum(node_sizes) <= 1:
        return 0.0
    nodes = len(node_sizes)
    ar = 0.0
    if nodes >= 2:
        ar = _ring_over(nodes, gradient_bytes, min(h.bandwidth_bytes_per_s for h in inter),
                        max(h.latency_s for h in inter))
    return 2 * _intra_rs_s(gradient_bytes, node_sizes, intra) + ar


def nccl_choice(nodes: int) -> Algorithm:
    """NCCL's pick: the flat ring on one or two nodes, the tree on three or more."""
    return "ring" if nodes <= 2 else "tree"


def allreduce_s(gradient_bytes: float, node_sizes: Sequence[int], intra: Sequence[Link],
                inter: Sequence[Link], *, algorithm: Algorithm = "ring") -> float:
    """Duration of one all-reduce of ``gradient_bytes`` over the topology (module docstring)."""
    if algorithm == "nccl":
        algorithm = nccl_choice(len(node_sizes))
    if algorithm == "ring":
        return ring_allreduce_s(gradient_bytes, node_sizes, intra, inter)
    if algorithm == "hierarchical":
        return hierarchical_allreduce_s(gradient_bytes, node_sizes, intra, inter)
    if algorithm == "tree":
        return tree_allreduce_s(gradient_bytes, node_sizes, intra, inter)
    raise ValueError(f"unknown all-reduce algorithm {algorithm!r}; valid: {', '.join(ALGORITHMS)}")
