"""The step-time model calibration fits: compute on shared nodes, an all-reduce over links, overlap.

For a placement (``g_k`` GPUs on node ``k``), per-GPU batch ``b`` and gradient ``S`` bytes::

    t_k     = t(b) · node_compute_factor(g_k, s)          # lbsim.network.overlap
    t       = max_k t_k                                   # the barrier waits for the slowest node
    c       = allreduce_s(S, g, intra, inter, algorithm, φ)  # lbsim.network.collectives, ring latency 'path'
    step(b) = t + exposed_comm_s(c, t, overlap)

and, with compute noise ``jitter_cv`` > 0 (every worker's compute lognormal around its mean, as the
engines draw it), the **mean** step: the barrier waits for the slowest of the replicas, and the
all-reduce hides under that one's backward (:mod:`lbsim.network.replica_wait`, exact expectation).

with every node's intra link ``(B_intra, α_intra)`` and NIC ``(B_nic, α_nic)`` alike. These are
the engines' own formulas (the same functions), so the figures fitted here reproduce in
``lbsim run``; ``lbsim calibrate`` confirms each prediction with a simulation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lbsim.network.algorithms import allreduce_s
from lbsim.network.collectives import Link, bytes_per_s
from lbsim.network.overlap import OverlapParams, exposed_comm_s, node_compute_factor
from lbsim.network.replica_wait import MaxDistribution, expected_step_s, max_distribution
from lbsim.network.ring_latency import RingLatency


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
    jitter_cv: float = 0.0  # per-iteration compute noise (CV of a lognormal factor): the replicas' wait
    ring_latency: RingLatency = "path"  # how the flat ring pays its hops' latencies (lbsim.network.ring_latency)
    nics_per_node: int = 1  # a node of g GPUs sends through min(g, nics_per_node) NICs of nic_bandwidth_gbps each

    def links(self, placement: Sequence[int]) -> tuple[list[Link], list[Link]]:
        """(intra, inter) links of each node of ``placement``: one intra link, and a node of g GPUs sending
        through ``min(g, nics_per_node)`` NICs."""
        intra = Link(bytes_per_s(self.intra_bandwidth_gbps), self.intra_latency_s)
        nics = [Link(bytes_per_s(self.nic_bandwidth_gbps * min(g, self.nics_per_node)), self.nic_latency_s)
                for g in placement]
        return [intra] * len(placement), nics


def comm_s(placement: Sequence[int], gradient_bytes: float, fig: LinkFigures) -> float:
    """One all-reduce of ``gradient_bytes`` over ``placement`` (GPUs per node)."""
    intra, inter = fig.links(placement)
    return allreduce_s(gradient_bytes, list(placement), intra, inter, algorithm=fig.algorithm,
                       chunk_share=fig.chunk_share, ring_latency=fig.ring_latency)


def wait_distribution(placement: Sequence[int], fig: LinkFigures) -> MaxDistribution | None:
    """The distribution of the slowest replica's compute over t(b) (None without noise)."""
    if fig.jitter_cv <= 0:
        return None
    factors = [node_compute_factor(g, fig.shared_node_slowdown) for g in placement for _ in range(g)]
    return max_distribution(factors, fig.jitter_cv)


def steps_s(placement: Sequence[int], compute_s: np.ndarray, gradient_bytes: float, fig: LinkFigures,
            dist: MaxDistribution | None = None, comm: float | None = None) -> np.ndarray:
    """Mean step (s) of ``placement`` for each ``compute_s`` = t(b) on one GPU alone (``dist``: the
    :func:`wait_distribution`, ``comm``: the :func:`comm_s` of ``placement``, when precomputed)."""
    top = node_compute_factor(max(placement), fig.shared_node_slowdown)
    t = np.asarray(compute_s, dtype=np.float64)
    if dist is None:
        dist = wait_distribution(placement, fig)
    if comm is not None:
        c = comm
    else:
        c = comm_s(placement, gradient_bytes, fig) if sum(placement) > 1 else 0.0
    return expected_step_s(t, np.full(t.shape, c), dist, top, fig.overlap)


def step_s(placement: Sequence[int], compute_s: float, gradient_bytes: float, fig: LinkFigures) -> tuple[float, float]:
    """``(step, sync)`` seconds for one synchronous iteration; ``compute_s`` = t(b) on one GPU alone.

    ``sync`` = step − the mean compute of a GPU on the fullest node: the non-overlapped all-reduce
    plus, with noise, the mean wait for slower replicas (what a measured ``sync_time`` holds).
    """
    t = compute_s * node_compute_factor(max(placement), fig.shared_node_slowdown)
    if sum(placement) <= 1 and fig.jitter_cv <= 0:
        return t, 0.0
    if fig.jitter_cv <= 0:
        exposed = exposed_comm_s(comm_s(placement, gradient_bytes, fig), t, fig.overlap)
        return t + exposed, exposed
    step = float(steps_s(placement, np.array([compute_s]), gradient_bytes, fig)[0])
    return step, step - t
