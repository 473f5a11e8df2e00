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

(+ fill, below; ``ring_latency="path"`` pays the hops' latencies along the ring's path instead of
the slowest hop's at every step: :mod:`lbsim.network.ring_latency`) over the hops the ring uses: the intra link of every node with ``g_k ≥ 2`` (its
``g_k − 1`` inside hops) and, when ``N ≥ 2``, the NIC of every node (exactly one ring hop leaves each node,
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

Nodes run steps 1 and 3 in parallel and meet for step 2, so ``T_hier = 2·max_k RS_k + AR_ring`` (+ fill).
With one rank per node ``RS_k = 0`` and ``T_hier = T_ring`` exactly; on one node ``AR = 0``.

**Tree** (``algorithm="tree"``, NCCL's double binary tree across nodes, Jeaugey, "Massively
scale your deep learning training with NCCL 2.4", NVIDIA blog 2019; Sanders et al., "Two-tree
algorithms for full bandwidth broadcast, reduction and scan", Parallel Computing 2009): inside
each node the ranks form a chain, across nodes two binary trees each carry half the data, and the
whole structure is *one* pipeline: chunks flow up (reduce) and down (broadcast) through the chains
and the trees at once. So the phases do not add: the time is the bottleneck link's bandwidth term
plus the latency of the longest path (stated from the NCCL design as published; the search tool
was not available to check the text)::

    d       = ⌈log2 N⌉                                  (tree depth across nodes; 0 on one node)
    P       = the d+1 largest nodes (a root-to-leaf path of the tree; the largest: the worst case)
    h       = Σ_{k∈P} (g_k − 1)                          (chain hops on that path)
    B_bott  = min(min_k B_inter_k, min_{g_k≥2} B_intra_k)   (every chain link and NIC carries ~S)
    T_tree  = S / B_bott + 2·(Σ_{k∈P} (g_k − 1)·α_intra_k + d·α_inter_max) + fill   (N ≥ 2)

(on one node the tree is the flat ring: NCCL builds trees across nodes only.)

**Pipeline fill** (every algorithm; ``chunk_share`` φ, default 0): NCCL streams a call's buffer
through its ``D`` sequential stages in chunks (a fixed slice of the buffer, not ``S/n``), and with
its bounded buffering every stage runs at the bottleneck's pace, so the last chunk leaves ``D − 1``
chunk-times after the first: ``fill = (D − 1) · φ · S / B_bott`` with φ = chunk / call size (0 —
infinitely fine pipelining, the classic formulas; 1 — store-and-forward: each stage waits for the
whole message, so the phases add). ``D`` = ``2(n−1)`` ring steps (``ring``), ``2(g_max−1) + 2(N−1)``
(``hierarchical``), ``2(h + d)`` (``tree``). φ is a property of the software stack (NCCL chunk and
DDP bucket sizes, protocol), not of the hardware: ``lbsim calibrate`` does not fit it (small fit
placements cannot tell it) but takes NCCL's 512 KiB step over DDP's 25 MiB bucket, 0.02
(:data:`lbsim.calibration.fit.DEFAULT_CHUNK_SHARE`), or ``--chunk-share``.

**NCCL** (``algorithm="nccl"``): NCCL's own choice between the two — the flat ring on one or two
nodes (NCCL ≥ 2.4 uses no trees there), the tree on three or more. Measured sync tails (Pollux
T4 profiles, ``lbsim calibrate``) show both regimes: on two nodes the tail grows with the GPUs
per node like a flat ring; across more nodes it hardly grows with the node count, like a tree
(:class:`lbsim.network.algorithms.NcclPick`).

Which algorithm a scenario runs, and the engines' prepared form of each formula, are in
:mod:`lbsim.network.algorithms` (its table :data:`~lbsim.network.algorithms.ALLREDUCE`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from lbsim.network.ring_latency import RingLatency, path_ring_s, ring_hop_latency_sum


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


def ring_over_s(steps_n: int, gradient_bytes: float, bandwidth: float, latency: float) -> float:
    """α–β ring all-reduce among ``steps_n`` parties: ``2(m−1)α + 2(m−1)/m · S/B``."""
    n = steps_n
    return 2 * (n - 1) * latency + 2 * (n - 1) / n * gradient_bytes / bandwidth


def ring_step_s(gradient_bytes: float, n: int, bandwidths: Sequence[float], latencies: Sequence[float]) -> float:
    """``2(n−1) · max_h (α_h + S/(n B_h))`` over hops ``(bandwidths[h], latencies[h])``.

    With one latency for every hop, the classic form ``2(n−1)α + 2(n−1)/n · S / B_min`` (the same
    value, computed as the engines always have: results written before nodes existed do not move).
    """
    if len(set(latencies)) == 1:
        return ring_over_s(n, gradient_bytes, min(bandwidths), latencies[0])
    return 2 * (n - 1) * max(a + gradient_bytes / n / b for a, b in zip(latencies, bandwidths, strict=True))


def _hops(node_sizes: Sequence[int], intra: Sequence[Link], inter: Sequence[Link]) -> list[Link]:
    """The links a flat ring crosses: intra links of shared nodes, every NIC when there are >= 2 nodes."""
    hops = [intra[k] for k, g in enumerate(node_sizes) if g >= 2]
    if len(node_sizes) >= 2:
        hops.extend(inter)
    return hops


def _check_share(chunk_share: float) -> None:
    if not 0.0 <= chunk_share <= 1.0:
        raise ValueError(f"pipeline chunk share must be in [0, 1], got {chunk_share!r}")


def fill_s(stages: int, chunk_share: float, gradient_bytes: float, bottleneck_bytes_per_s: float) -> float:
    """Pipeline fill ``(D − 1) · φ · S / B_bott`` (module docstring); exactly 0.0 when φ = 0."""
    if chunk_share == 0.0 or stages <= 1:
        return 0.0
    return (stages - 1) * chunk_share * gradient_bytes / bottleneck_bytes_per_s


def ring_allreduce_s(gradient_bytes: float, node_sizes: Sequence[int], intra: Sequence[Link],
                     inter: Sequence[Link], chunk_share: float = 0.0, ring_latency: RingLatency = "slowest_hop") -> float:
    """Flat ring over all ranks (module docstring, ``T_ring``; ``ring_latency``: :mod:`lbsim.network.ring_latency`)."""
    _check(node_sizes, intra, inter)
    _check_share(chunk_share)
    n = sum(node_sizes)
    if n <= 1:
        return 0.0
    hops = _hops(node_sizes, intra, inter)
    bws = [h.bandwidth_bytes_per_s for h in hops]
    lats = [h.latency_s for h in hops]
    if ring_latency == "path" and len(set(lats)) > 1:
        lat_sum = ring_hop_latency_sum(node_sizes, [x.latency_s for x in intra], [x.latency_s for x in inter])
        t = path_ring_s(gradient_bytes, n, lat_sum, min(bws))
    else:
        t = ring_step_s(gradient_bytes, n, bws, lats)
    return t + fill_s(2 * (n - 1), chunk_share, gradient_bytes, min(bws))


def _intra_rs_s(gradient_bytes: float, node_sizes: Sequence[int], intra: Sequence[Link]) -> float:
    """``max_k RS_k``: the slowest node's intra-node reduce-scatter (0 when every node holds one rank)."""
    rs = 0.0
    for g, link in zip(node_sizes, intra, strict=True):
        if g >= 2:
            rs = max(rs, (g - 1) * link.latency_s + (g - 1) / g * gradient_bytes / link.bandwidth_bytes_per_s)
    return rs


def tree_depth(nodes: int) -> int:
    """``d = ⌈log2 N⌉``: edges on a root-to-leaf path of a binary tree over ``nodes`` nodes (0 for one)."""
    return math.ceil(math.log2(nodes)) if nodes >= 2 else 0


def tree_path(node_sizes: Sequence[int]) -> list[int]:
    """Indices of the ``d + 1`` largest nodes (ties: the first), the path the tree's time is set by."""
    order = sorted(range(len(node_sizes)), key=lambda k: (-node_sizes[k], k))
    return order[:tree_depth(len(node_sizes)) + 1]


def tree_allreduce_s(gradient_bytes: float, node_sizes: Sequence[int], intra: Sequence[Link],
                     inter: Sequence[Link], chunk_share: float = 0.0) -> float:
    """NCCL's pipelined tree: chains in the nodes, a double binary tree across them (``T_tree``)."""
    _check(node_sizes, intra, inter)
    _check_share(chunk_share)
    nodes = len(node_sizes)
    if nodes <= 1:
        return ring_allreduce_s(gradient_bytes, node_sizes, intra, inter, chunk_share)
    d = tree_depth(nodes)
    path = tree_path(node_sizes)
    hops = sum(node_sizes[k] - 1 for k in path)
    latency = math.fsum((node_sizes[k] - 1) * intra[k].latency_s for k in path) + d * max(h.latency_s for h in inter)
    bott = min(h.bandwidth_bytes_per_s for h in inter)
    for g, link in zip(node_sizes, intra, strict=True):
        if g >= 2:
            bott = min(bott, link.bandwidth_bytes_per_s)
    return gradient_bytes / bott + 2 * latency + fill_s(2 * (hops + d), chunk_share, gradient_bytes, bott)


def hierarchical_allreduce_s(gradient_bytes: float, node_sizes: Sequence[int], intra: Sequence[Link],
                             inter: Sequence[Link], chunk_share: float = 0.0) -> float:
    """Intra reduce-scatter, ring all-reduce of the shards across nodes, intra all-gather (``T_hier``)."""
    _check(node_sizes, intra, inter)
    _check_share(chunk_share)
    if sum(node_sizes) <= 1:
        return 0.0
    nodes = len(node_sizes)
    ar = 0.0
    bott = math.inf
    if nodes >= 2:
        bott = min(h.bandwidth_bytes_per_s for h in inter)
        ar = ring_over_s(nodes, gradient_bytes, bott, max(h.latency_s for h in inter))
    for g, link in zip(node_sizes, intra, strict=True):
        if g >= 2:
            bott = min(bott, link.bandwidth_bytes_per_s)
    stages = 2 * (max(node_sizes) - 1) + 2 * (nodes - 1)
    return 2 * _intra_rs_s(gradient_bytes, node_sizes, intra) + ar + fill_s(stages, chunk_share, gradient_bytes, bott)
