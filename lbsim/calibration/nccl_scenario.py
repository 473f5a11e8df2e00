"""The scenario ``lbsim calibrate-nccl`` writes: the fitted links in the engines' collective model.

A BSP data-parallel run of ResNet-50 on the largest logged cluster (catalog ``p4d.24xlarge``: the
logs' A100-SXM4-40GB x 8 with NVSwitch; every link figure is overridden by the fit), with the
engine algorithm and pipeline fill :func:`engine_match` solves so that the engines' all-reduce of
the model's gradient equals the fitted NCCL model's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lbsim.network.collectives import ALGORITHMS, Algorithm, Link, allreduce_s
from lbsim.network.nccl import NcclFigures, allreduce_time_s

SCENARIO_INSTANCE = "p4d.24xlarge"
SCENARIO_MODEL = "resnet50_imagenet"
SCENARIO_UPDATES = 20


def _g(x: float) -> float:
    return float(f"{x:.6g}")


@dataclass(frozen=True)
class EngineMatch:
    """The engines' all-reduce settings that reproduce the fitted model at the scenario's gradient size."""

    algorithm: Algorithm
    chunk_share: float
    engine_s: float
    fitted_s: float

    @property
    def deviation(self) -> float:
        return self.engine_s / self.fitted_s - 1.0


def engine_match(fig: NcclFigures, nodes: int, gpus_per_node: int, gradient_bytes: float) -> EngineMatch:
    """The engine algorithm and pipeline fill ``chunk_share`` φ whose all-reduce of ``gradient_bytes`` equals
    the fitted model's on the fitted links.

    The engines' collective model (:mod:`lbsim.network.collectives`) has one latency per link and no
    protocols or base latency. Gradients go in buckets of MiBs, the Simple protocol's regime, so its
    figures are the ones carried (NIC: ``B_inter`` and the network hop; intra: ``B_intra`` and the
    NVLink hop). What the engine then lacks (the base latency, the tree levels' chunk time) is of the
    kind its pipeline fill ``(D − 1)·φ·S / B`` models, and its time is linear in φ: each algorithm's
    φ that makes the two equal is solved, and the algorithm needing the least fill (the closest in
    structure; φ·S is then the implied chunk) is kept. If no φ in [0, 1] reaches the fitted time,
    the algorithm closest to it at φ = 0 is kept."""
    simple = fig.protocol("Simple")
    intra = [Link(fig.intra_bytes_per_s, simple.intra_hop_s)] * nodes
    inter = [Link(fig.inter_bytes_per_s, simple.inter_hop_s)] * nodes
    sizes = [gpus_per_node] * nodes
    fitted = allreduce_time_s(fig, nodes * gpus_per_node, nodes, gradient_bytes)
    exact: list[tuple[float, int, Algorithm]] = []
    near: list[tuple[float, int, Algorithm]] = []
    for i, a in enumerate(a for a in ALGORITHMS if a != "nccl"):
        t0 = allreduce_s(gradient_bytes, sizes, intra, inter, algorithm=a)
        t1 = allreduce_s(gradient_bytes, sizes, intra, inter, algorithm=a, chunk_share=1.0)
        if t0 <= fitted <= t1 and t1 > t0:
            exact.append((_g((fitted - t0) / (t1 - t0)), i, a))
        near.append((abs(t0 / fitted - 1.0), i, a))
    phi, _, algo = min(exact) if exact else (0.0, 0, min(near)[2])
    engine = allreduce_s(gradient_bytes, sizes, intra, inter, algorithm=algo, chunk_share=phi)
    return EngineMatch(algo, phi, engine, fitted)


def scenario_data(fig: NcclFigures, nodes: int, gpus_per_node: int, match: EngineMatch) -> dict[str, Any]:
    """A BSP run on ``nodes`` x ``gpus_per_node`` GPUs whose links carry the fitted Simple-protocol figures
    (:func:`engine_match`)."""
    simple = fig.protocol("Simple")
    group = {"instance": SCENARIO_INSTANCE, "count": nodes * gpus_per_node, "workers_per_node": gpus_per_node,
             "bandwidth_gbps": _g(fig.inter_bytes_per_s * 8 / 1e9), "nic_latency_s": _g(simple.inter_hop_s),
             "intra_bandwidth_gbps": _g(fig.intra_bytes_per_s * 8 / 1e9), "intra_latency_s": _g(simple.intra_hop_s)}
    return {
        "name": f"nccl_fit_{nodes}x{gpus_per_node}",
        "description": "BSP data parallelism on the nccl-tests cluster, links from lbsim calibrate-nccl",
        "seed": 1,
        "workload": {"model": SCENARIO_MODEL, "global_batch": 64 * nodes * gpus_per_node, "updates": SCENARIO_UPDATES},
        "cluster": {"groups": [group]},
        "network": {"name": "ring_allreduce", "algorithm": match.algorithm, "chunk_share": match.chunk_share},
        "scheme": {"name": "bsp"},
    }
