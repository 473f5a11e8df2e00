"""NCCL's all-reduce as a cost model with per-level figures: ring / tree x LL / LL128 / Simple, NCCL's pick.

NCCL times every call with a latency + size / bandwidth model per algorithm and protocol and runs
the cheapest (NVIDIA nccl ``src/graph/tuning.cc``, ``ncclTopoTuneModel`` / ``ncclTopoGetAlgoTime``).
lbsim keeps NCCL's *structure* (which hops each algorithm crosses, how often) and fits the
*hardware figures* from measurements (:mod:`lbsim.calibration.nccl_fit`); the measured time of a
call is the cheapest candidate's time. ``n`` ranks on ``N`` equal nodes of ``g = n/N`` GPUs,
message ``S`` bytes, protocol ``p`` with figures ``b_p`` (launch and protocol set-up), ``a_p`` (one
intra-node hop: NVLink / PCIe), ``x_p`` (one network hop), ``η_p`` (the protocol's share of the
link bandwidth: LL sends a 4-byte flag with every 4 bytes of data, LL128 8 of every 128; Simple
1) and the per-rank *bus* bandwidths ``B_intra`` (one node) and ``B_inter`` (across nodes)::

    ring   T = b_p + (2(n−1) − 2(N−1))·a_p + 2(N−1)·x_p + 2(n−1)/n · S / (η_p·B)     B = B_intra (N=1), B_inter
    tree   T = b_p + 2·((g−1)·a_p + d·(x_p + c_p / B_nic)) + 2·S / (η_p·B_inter)   d = ⌈log2 N⌉, N ≥ 2

* **Ring** (Patarasuk & Yuan 2009; NCCL's ring): ``2(n−1)`` steps, reduce-scatter then
  all-gather, of which ``2(N−1)`` leave a node (NCCL's ``nInterSteps``) and pay a network hop, the
  rest an intra-node hop; every rank moves ``2(n−1)/n·S`` through its slowest link.
* **Tree** (NCCL ≥ 2.4's double binary tree across nodes, a chain inside each node; Sanders et
  al. 2009): a chunk goes up ``g−1`` chain hops and ``d`` tree levels and back down, so the
  latency grows with ``log2 N``, not with ``n``. A tree level forwards whole chunks: a chunk of
  ``c_p`` bytes is received before it is sent on, so each level adds the chunk's transfer time
  ``c_p / B_nic`` on one NIC, ``B_nic = B_inter / nics_per_node`` (each channel rides its own NIC).
  ``c_Simple`` = 256 KiB (the chunk NCCL's own tree/Simple latency is stated for in
  ``tuning.cc``: "the latency [of] a 256kB chunk"); LL and LL128 forward in 8- and 128-byte lines,
  ``c = 0``. Every rank's NIC carries the message up one tree and down the other, ``2S`` at
  ``B_inter`` (NCCL's tree ``algbw = busbw / 2``). NCCL builds trees only across nodes (``N ≥ 2``).
* **NCCL's pick**: the cheapest of the candidates, per call — so the algorithm and protocol change
  with the size and the node count (small: LL; middle: LL128; large: Simple; many nodes: the tree).

What each term assumes: equal nodes; a hop's latency is a property of the link and the protocol,
the same in the ring and the tree; one NIC per GPU-channel; the network is non-blocking (a fat
tree: ``B_inter`` does not fall with ``N``). Where it was checked: docs/collectives.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

Protocol = Literal["LL", "LL128", "Simple"]
PROTOCOLS: tuple[Protocol, ...] = ("LL", "LL128", "Simple")
NcclAlgorithm = Literal["ring", "tree"]
TREE_CHUNK_BYTES: dict[Protocol, float] = {"LL": 0.0, "LL128": 0.0, "Simple": 256.0 * 1024}


@dataclass(frozen=True)
class ProtocolFigures:
    """One protocol's figures: ``base_s`` (b_p), ``intra_hop_s`` (a_p), ``inter_hop_s`` (x_p), ``efficiency`` (η_p)."""

    base_s: float
    intra_hop_s: float
    inter_hop_s: float
    efficiency: float

    def __post_init__(self) -> None:
        for name in ("base_s", "intra_hop_s", "inter_hop_s"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if not 0 < self.efficiency <= 1:
            raise ValueError(f"efficiency must be in (0, 1], got {self.efficiency!r}")


@dataclass(frozen=True)
class NcclFigures:
    """Per-protocol figures (in :data:`PROTOCOLS` order), the per-rank bus bandwidths in bytes/s, the NICs
    per node and the Simple protocol's tree chunk (a sourced figure, not fitted; module docstring)."""

    protocols: tuple[ProtocolFigures, ProtocolFigures, ProtocolFigures]
    intra_bytes_per_s: float
    inter_bytes_per_s: float
    nics_per_node: int
    simple_chunk_bytes: float = TREE_CHUNK_BYTES["Simple"]

    def __post_init__(self) -> None:
        if not (self.intra_bytes_per_s > 0 and self.inter_bytes_per_s > 0):
            raise ValueError("bus bandwidths must be > 0")
        if self.nics_per_node < 1:
            raise ValueError(f"nics_per_node must be >= 1, got {self.nics_per_node}")
        if not self.simple_chunk_bytes >= 0:
            raise ValueError(f"simple_chunk_bytes must be >= 0, got {self.simple_chunk_bytes!r}")

    def chunk_bytes(self, name: Protocol) -> float:
        """``c_p``: the bytes a tree level forwards whole (Simple: ``simple_chunk_bytes``; LL, LL128: 0)."""
        return self.simple_chunk_bytes if name == "Simple" else TREE_CHUNK_BYTES[name]

    def protocol(self, name: Protocol) -> ProtocolFigures:
        """The figures of protocol ``name`` (LL, LL128 or Simple)."""
        return self.protocols[PROTOCOLS.index(name)]


@dataclass(frozen=True)
class Pick:
    """NCCL's pick for one call: the cheapest candidate and its time."""

    time_s: float
    algorithm: NcclAlgorithm
    protocol: Protocol


def tree_levels(nodes: int) -> int:
    """``d = ⌈log2 N⌉`` (0 on one node)."""
    return math.ceil(math.log2(nodes)) if nodes >= 2 else 0


def check_shape(gpus: int, nodes: int) -> int:
    """GPUs per node ``g``; ``gpus`` must split evenly over ``nodes``."""
    if nodes < 1 or gpus < nodes or gpus % nodes:
        raise ValueError(f"{gpus} GPUs do not split evenly over {nodes} node(s)")
    return gpus // nodes


def candidate_s(fig: NcclFigures, algorithm: NcclAlgorithm, protocol: Protocol, gpus: int, nodes: int,
                size_bytes: float, largest_node: int | None = None) -> float:
    """The module docstring's ``T`` for one algorithm and protocol (``tree`` needs ``nodes >= 2``).

    ``largest_node``: for nodes of unequal sizes, the largest one's GPUs (its chain is the tree's
    longest); by default the nodes must be equal."""
    g = check_shape(gpus, nodes) if largest_node is None else largest_node
    n = gpus
    pf = fig.protocol(protocol)
    if n <= 1:
        return 0.0
    if algorithm == "ring":
        bw = fig.intra_bytes_per_s if nodes == 1 else fig.inter_bytes_per_s
        inter_steps = 2 * (nodes - 1)
        return (pf.base_s + (2 * (n - 1) - inter_steps) * pf.intra_hop_s + inter_steps * pf.inter_hop_s
                + 2 * (n - 1) / n * size_bytes / (pf.efficiency * bw))
    if nodes < 2:
        raise ValueError("NCCL builds trees across nodes only (nodes >= 2)")
    nic = fig.inter_bytes_per_s / fig.nics_per_node
    level = pf.inter_hop_s + fig.chunk_bytes(protocol) / nic
    return (pf.base_s + 2 * ((g - 1) * pf.intra_hop_s + tree_levels(nodes) * level)
            + 2 * size_bytes / (pf.efficiency * fig.inter_bytes_per_s))


def candidates(nodes: int) -> list[tuple[NcclAlgorithm, Protocol]]:
    """The (algorithm, protocol) pairs NCCL chooses among: ring and tree across nodes, the ring alone on one."""
    algos: tuple[NcclAlgorithm, ...] = ("ring", "tree") if nodes >= 2 else ("ring",)
    return [(a, p) for a in algos for p in PROTOCOLS]


def nccl_pick(fig: NcclFigures, gpus: int, nodes: int, size_bytes: float, largest_node: int | None = None) -> Pick:
    """NCCL's choice (the cheapest candidate; ties: ring before tree, LL before LL128 before Simple)."""
    best: Pick | None = None
    for a, p in candidates(nodes):
        t = candidate_s(fig, a, p, gpus, nodes, size_bytes, largest_node)
        if best is None or t < best.time_s:
            best = Pick(t, a, p)
    assert best is not None
    return best


def allreduce_time_s(fig: NcclFigures, gpus: int, nodes: int, size_bytes: float, largest_node: int | None = None) -> float:
    """Predicted time of one all-reduce of ``size_bytes`` on ``gpus`` GPUs over ``nodes`` nodes (equal, or
    ``largest_node`` GPUs on the largest)."""
    return nccl_pick(fig, gpus, nodes, size_bytes, largest_node).time_s
