"""The step-time model calibration fits: compute on shared nodes, an all-reduce over links, overlap.

For a placement (``g_k`` GPUs on node ``k``), per-GPU batch ``b`` and gradient ``S`` bytes::

    t_k     = t(b) · node_compute_factor(g_k, s)          # lbsim.network.overlap
    t       = max_k t_k                                   # the barrier waits for the slowest node
    c       = allreduce_s(S, g, intra, inter, algorithm, φ)  # lbsim.network.collectives
    step(b) = t + exposed_comm_s(c, t, overlap)

with every node's intra link ``(B_intra, α_intra)`` and NIC ``(B_nic, α_nic)`` alike. These are
the engines' own formulas (the same functions), so the figures fitted here reproduce in
``lbsim run``; ``lbsim calibrate`` confirms each prediction with a simulation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lbsim.network.collectives import Link, allreduce_s, bytes_per_s
from lbsim.network.overlap import OverlapParams, exposed_comm_s, node_compute_factor


@dataclass(frozen=True)
class LinkFigures:
    """The fitted figures besides t(b): links, shared-node slowdown, overlap and the collective."""

    intra_bandwidth_gbps: float
    intra_latency_s: float
    nic_bandwidth_gbps: float
    nic_latency_s: float
    shared_node_slowdown: float
    overlap: OverlapParams
    algorithm: str
    chunk_share: float = 0.0  # pipeline fill: chunk / call size (lbsim.network.collectives)

    def links(self, nodes: int) -> tuple[list[Link], list[Link]]:
        intra = Link(bytes_per_s(self.intra_bandwidth_gbps), self.intra_latency_s)
        nic = Link(bytes_per_s(self.nic_bandwidth_gbps), self.nic_latency_s)
        return [intra] * nodes, [nic] * nodes


def comm_s(placement: Sequence[int], gradient_bytes: float, fig: LinkFigures) -> float:
    """One all-reduce of ``gradient_bytes`` over ``placement`` (GPUs per node)."""
    intra, inter = fig.links(len(placement))
    return allreduce_s(gradient_bytes, list(placement), intra, inter, algorithm=fig.algorithm,  # type: ignore[arg-type]
                       chunk_share=fig.chunk_share)


def step_s(placement: Sequence[int], compute_s: float, gradient_bytes: float, fig: LinkFigures) -> tuple[float, float]:
    """``(step, exposed)`` seconds for one synchronous iteration; ``compute_s`` = t(b) on one GPU alone."""
    t = compute_s * node_compute_factor(max(placement), fig.shared_node_slowdown)
    if sum(placement) <= 1:
        return t, 0.0
    exposed = exposed_comm_s(comm_s(placement, gradient_bytes, fig), t, fig.overlap)
    return t + exposed, exposed
