"""How a flat ring all-reduce pays its hops' latencies: at the slowest hop every step, or along its path.

A flat ring over ``n`` ranks on ``N`` nodes (node ``k`` holding ``g_k`` ranks) has ``n`` hops: the
``g_k − 1`` hops inside each node (latency ``α_intra_k``) and, when ``N ≥ 2``, one NIC hop leaving
each node (``α_nic_k``); on one node the ring closes inside it (``n`` intra hops). An all-reduce is
``2(n−1)`` steps.

* ``slowest_hop`` (the engines' default, :func:`lbsim.network.collectives.ring_step_s`): every step
  is a barrier that lasts as long as its slowest hop, ``2(n−1) · max_h (α_h + S/(n B_h))``.
* ``path``: NCCL does not synchronise the ring's steps: a slice's step ``k + 1`` on rank ``r`` waits
  only for step ``k`` of rank ``r − 1``, so the dependency chain of the ``2(n−1)`` steps walks
  ``2(n−1)`` consecutive hops round the ring and pays *their* latencies, each hop about
  ``2(n−1)/n`` times, while the data stream at the slowest hop's bandwidth::

      T_ring = 2(n−1)/n · Σ_h α_h + 2(n−1)/n · S / B_min        (+ fill, as for every algorithm)

  This is NCCL's own cost structure (``src/graph/tuning.cc``: the ring's latency is its intra-node
  steps at the intra-node hop latency plus its inter-node steps at the network's), and it is what
  extrapolates from few GPUs per node to many: adding GPUs to a node adds intra-node hops, not NIC
  hops (``88``'s two NIC hops cost ``2 · 15/8`` = 3.75 NIC latencies, ``44``'s 3.5; the slowest-hop
  form charges 30 and 14).
  With one latency for every hop the two forms are the same number, ``2(n−1)α + 2(n−1)/n · S/B``,
  and both compute it in that classic form.

``lbsim calibrate`` fits with ``path`` and writes ``network.ring_latency: path``; other scenarios
keep ``slowest_hop`` unless they set it (their results do not move).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

RingLatency = Literal["slowest_hop", "path"]
RING_LATENCIES: tuple[RingLatency, ...] = ("slowest_hop", "path")


def ring_hop_latency_sum(node_sizes: Sequence[int], intra_latency_s: Sequence[float],
                         nic_latency_s: Sequence[float]) -> float:
    """``Σ_h α_h`` over the ring's ``n`` hops (module docstring); per-node latencies in node order."""
    if len(node_sizes) == 1:
        return node_sizes[0] * intra_latency_s[0] if node_sizes[0] >= 2 else 0.0
    return (sum((g - 1) * a for g, a in zip(node_sizes, intra_latency_s, strict=True))
            + sum(nic_latency_s))


def path_ring_s(gradient_bytes: float, n: int, latency_sum_s: float, bottleneck_bytes_per_s: float) -> float:
    """``2(n−1)/n · (Σ_h α_h + S / B_min)``: the ring with latencies paid along its path (no fill)."""
    share = 2 * (n - 1) / n
    return share * latency_sum_s + share * gradient_bytes / bottleneck_bytes_per_s
