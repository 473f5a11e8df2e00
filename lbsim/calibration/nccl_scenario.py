"""The scenario ``lbsim calibrate-nccl`` writes: the fitted NCCL model as the engines' all-reduce.

A BSP data-parallel run of ResNet-50 on the largest logged cluster (catalog ``p4d.24xlarge``: the
logs' A100-SXM4-40GB x 8 with NVSwitch; its links are overridden) with ``network.algorithm:
nccl_fitted``: the engines time every all-reduce with :mod:`lbsim.network.nccl` and the fitted
figures (``network.nccl``), the links carrying the fitted bus bandwidths (NIC ``B_inter``,
intra-node ``B_intra``), so network contention slows them as any link.
"""

from __future__ import annotations

from typing import Any

from lbsim.network.nccl import PROTOCOLS, NcclFigures

SCENARIO_INSTANCE = "p4d.24xlarge"
SCENARIO_MODEL = "resnet50_imagenet"
SCENARIO_UPDATES = 20


def _g(x: float) -> float:
    return float(f"{x:.6g}")


def nccl_section(fig: NcclFigures) -> dict[str, Any]:
    """``network.nccl`` (:class:`lbsim.scenario.nccl_section.NcclModel`) of the fitted figures."""
    section: dict[str, Any] = {
        name: {"base_s": _g(pf.base_s), "intra_hop_s": _g(pf.intra_hop_s), "inter_hop_s": _g(pf.inter_hop_s),
               "efficiency": _g(pf.efficiency)}
        for name, pf in zip(PROTOCOLS, fig.protocols, strict=True)}
    section["nics_per_node"] = fig.nics_per_node
    section["simple_chunk_bytes"] = _g(fig.simple_chunk_bytes)
    return section


def scenario_data(fig: NcclFigures, nodes: int, gpus_per_node: int) -> dict[str, Any]:
    """A BSP run on ``nodes`` x ``gpus_per_node`` GPUs whose all-reduce is the fitted NCCL model."""
    group = {"instance": SCENARIO_INSTANCE, "count": nodes * gpus_per_node, "workers_per_node": gpus_per_node,
             "bandwidth_gbps": _g(fig.inter_bytes_per_s * 8 / 1e9),
             "intra_bandwidth_gbps": _g(fig.intra_bytes_per_s * 8 / 1e9)}
    return {
        "name": f"nccl_fit_{nodes}x{gpus_per_node}",
        "description": "BSP data parallelism on the nccl-tests cluster, its all-reduce from lbsim calibrate-nccl",
        "seed": 1,
        "workload": {"model": SCENARIO_MODEL, "global_batch": 64 * nodes * gpus_per_node, "updates": SCENARIO_UPDATES},
        "cluster": {"groups": [group]},
        "network": {"name": "ring_allreduce", "algorithm": "nccl_fitted", "nccl": nccl_section(fig)},
        "scheme": {"name": "bsp"},
    }
