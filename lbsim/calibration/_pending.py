"""TEMPORARY: the all-reduce forms requested from lbsim.network.collectives (COORD.md), until they land there."""

from __future__ import annotations

import math
from collections.abc import Sequence

from lbsim.network import collectives
from lbsim.network.collectives import Link

PENDING_ALGORITHMS = ("nccl", "ring", "tree", "hierarchical")


def _rs(gradient_bytes: float, node_sizes: Sequence[int], intra: Sequence[Link]) -> float:
    rs = 0.0
    for g, link in zip(node_sizes, intra, strict=True):
        if g >= 2:
            rs = max(rs, (g - 1) * link.latency_s + (g - 1) / g * gradient_bytes / link.bandwidth_bytes_per_s)
    return rs


def allreduce_s(gradient_bytes: float, node_sizes: Sequence[int], intra: Sequence[Link], inter: Sequence[Link],
                *, algorithm: str = "ring") -> float:
    n, nodes = sum(node_sizes), len(node_sizes)
    if n <= 1:
        return 0.0
    if algorithm == "nccl":
        algorithm = "ring" if nodes <= 2 else "tree"
    if algorithm == "ring":
        hops = [intra[k] for k, g in enumerate(node_sizes) if g >= 2] + (list(inter) if nodes >= 2 else [])
        step = max(h.latency_s + gradient_bytes / n / h.bandwidth_bytes_per_s for h in hops)
        return 2 * (n - 1) * step
    if algorithm == "tree":
        ar = 0.0
        if nodes >= 2:
            ar = (2 * math.ceil(math.log2(nodes)) * max(h.latency_s for h in inter)
                  + gradient_bytes / min(h.bandwidth_bytes_per_s for h in inter))
        return 2 * _rs(gradient_bytes, node_sizes, intra) + ar
    return collectives.allreduce_s(gradient_bytes, node_sizes, intra, inter, algorithm=algorithm)  # type: ignore[arg-type]
