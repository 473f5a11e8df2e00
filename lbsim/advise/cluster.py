"""The compact cluster line: ``--cluster "4xV100,4xT4" --network 10gbps`` as scenario data.

Grammar (case-insensitive names, spaces ignored)::

    cluster  := item ("," item)*
    item     := [COUNT ("x" | "*")] NAME          # 4xV100, 2*A100, T4, 8xg4dn.12xlarge
    network  := NUMBER [gbps | gbit/s | gb/s | mbps | mbit/s]     # 10gbps, 25, 100mbps

``NAME`` is a GPU name (:data:`GPU_INSTANCES`: the catalog instance that stands for it) or a
catalog instance name (``lbsim catalog``). ``COUNT`` is the number of *workers* (GPUs; processes
for a CPU instance). Single-GPU instances hold one worker per node; a multi-GPU instance is
filled ``gpus_per_node`` workers to a node (four A100 share one p4d.24xlarge and its NIC), which
is what a cluster of such GPUs looks like. ``--network`` sets every node's NIC to the given
bandwidth (``bandwidth_gbps`` of every group), in both the all-reduce and the parameter-server
variant of the scenario; without it each instance keeps the catalog's effective figure.

The cluster line's scenario trains ``--model`` (default :data:`DEFAULT_MODEL`) with a global
batch of :data:`BATCH_PER_WORKER` samples per worker (capped at the cluster's memory) for
``--budget-s`` simulated seconds, over an all-reduce (the baseline's network); every default used
is listed in the report's assumptions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from lbsim.errors import InputError
from lbsim.limits import MAX_SET_CHARS, MAX_WORKERS, short_repr
from lbsim.scenario import catalog

# GPU (or CPU) name -> the catalog instance that stands for it: the single-GPU instance where the
# catalog has one (one GPU per node), else the multi-GPU instance (filled gpus_per_node to a node).
GPU_INSTANCES: dict[str, str] = {
    "H200": "p5e.48xlarge",
    "A100": "p4d.24xlarge",
    "V100": "p3.2xlarge",
    "A10G": "g5.xlarge",
    "A10": "g5.xlarge",
    "T4": "g4dn.xlarge",
    "M60": "g3.4xlarge",
    "K80": "p2.xlarge",
    "CPU": "c5.18xlarge",
}
DEFAULT_MODEL = "resnet50_imagenet"
BATCH_PER_WORKER = 128
DEFAULT_BUDGET_S = 300.0

_ITEM = re.compile(r"^(?:(\d+)\s*[x*]\s*)?([A-Za-z0-9][A-Za-z0-9.\-]*)$", re.IGNORECASE)
_BANDWIDTH = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)(?:e([+-]?\d+))?\s*(gbps|gbit/s|gbit|gb/s|g|mbps|mbit/s|mbit|mb/s|m)?$",
                        re.IGNORECASE)


@dataclass(frozen=True)
class ClusterItem:
    """One item of the cluster line: ``count`` workers of ``instance`` (written as ``name``)."""

    name: str
    instance: str
    count: int

    @property
    def per_node(self) -> int:
        """Workers of this item on one node: as many as the instance has GPUs (one per CPU instance)."""
        gpus = catalog.INSTANCES[self.instance].gpus_per_node
        return max(1, min(gpus, self.count)) if gpus > 1 else 1

    def mapping(self) -> str:
        """How the item maps onto catalog instances, in words (for the report)."""
        inst = catalog.INSTANCES[self.instance]
        nodes = -(-self.count // self.per_node)
        what = inst.accelerator if inst.kind == "gpu" else f"{inst.vcpus} vCPU, no GPU"
        where = (f"{self.per_node} per node, {nodes} node{'s' if nodes != 1 else ''}" if self.per_node > 1
                 else f"one per node, {nodes} node{'s' if nodes != 1 else ''}")
        return f"{self.count}x {self.name} -> {self.instance} ({what}; {where})"


def _known_names() -> str:
    return (f"GPU names: {', '.join(GPU_INSTANCES)}; instances: {', '.join(catalog.instance_names())}")


def parse_cluster(text: str) -> list[ClusterItem]:
    """The cluster line's items; an InputError naming the item and listing the known names."""
    if len(text) > MAX_SET_CHARS:
        raise InputError("--cluster", f"{len(text)} characters, more than the bound of {MAX_SET_CHARS}")
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not p for p in parts):
        raise InputError("--cluster", f"expected COUNTxNAME items separated by commas (e.g. 4xV100,4xT4), got {short_repr(text)}")
    by_upper = {k.upper(): v for k, v in GPU_INSTANCES.items()}
    by_instance = {k.lower(): k for k in catalog.INSTANCES}
    items: list[ClusterItem] = []
    total = 0
    for part in parts:
        m = _ITEM.match(part)
        if m is None:
            raise InputError("--cluster", f"cannot read {short_repr(part)}: expected COUNTxNAME (e.g. 4xV100) or NAME")
        count = int(m.group(1)) if m.group(1) else 1
        name = m.group(2)
        instance = by_upper.get(name.upper()) or by_instance.get(name.lower())
        if instance is None:
            raise InputError("--cluster", f"unknown GPU or instance {short_repr(name)}; known {_known_names()}")
        if count < 1:
            raise InputError("--cluster", f"{short_repr(part)}: the count must be >= 1")
        total += count
        if total > MAX_WORKERS:
            raise InputError("--cluster", f"{total} workers, more than the bound of {MAX_WORKERS}")
        items.append(ClusterItem(name.upper() if name.upper() in by_upper else instance, instance, count))
    return items


def parse_bandwidth_gbps(text: str) -> float:
    """``10gbps`` / ``10 Gbit/s`` / ``100mbps`` / ``25`` (Gbit/s) as Gbit/s; InputError otherwise."""
    m = _BANDWIDTH.match(text.strip())
    if m is None:
        raise InputError("--network", f"expected a bandwidth such as 10gbps, 25Gbit/s or 100mbps, got {short_repr(text)}")
    value = float(m.group(1)) * (10.0 ** int(m.group(2)) if m.group(2) else 1.0)
    unit = (m.group(3) or "gbps").lower()
    gbps = value / 1000.0 if unit.startswith("m") else value
    if not 0 < gbps <= 1e6:
        raise InputError("--network", f"expected a bandwidth > 0 and <= 1e6 Gbit/s, got {short_repr(text)}")
    return gbps


def cluster_line(items: list[ClusterItem], bandwidth_gbps: float | None) -> str:
    """The question as the user wrote it, normalised: ``4xV100,4xT4 over 10 Gbit/s``."""
    text = ",".join(f"{i.count}x{i.name}" for i in items)
    return text + (f" over {bandwidth_gbps:g} Gbit/s" if bandwidth_gbps is not None else "")


def cluster_data(items: list[ClusterItem], *, model: str, bandwidth_gbps: float | None, budget_s: float,
                 global_batch: int | None) -> dict[str, Any]:
    """Scenario data for the cluster line (checked later, like any scenario)."""
    if model not in catalog.MODELS:
        raise InputError("--model", f"unknown model {short_repr(model)}; valid: {', '.join(catalog.model_names())}")
    for item in items:
        if catalog.performance(model, item.instance) is None:
            known = sorted(i for (m, i) in catalog.PERFORMANCE if m == model)
            raise InputError("--cluster", f"the catalog has no figures for {model} on {item.instance} ({item.name}); "
                                          f"instances with figures for it: {', '.join(known)}")
    groups: list[dict[str, Any]] = []
    for item in items:
        group: dict[str, Any] = {"instance": item.instance, "count": item.count}
        if item.per_node > 1:
            group["workers_per_node"] = item.per_node
        if bandwidth_gbps is not None:
            group["bandwidth_gbps"] = bandwidth_gbps
        groups.append(group)
    workers = sum(i.count for i in items)
    cap = sum(i.count * catalog.PERFORMANCE[(model, i.instance)].max_batch for i in items)
    batch = global_batch if global_batch is not None else min(BATCH_PER_WORKER * workers, cap)
    return {
        "name": "cluster",
        "description": cluster_line(items, bandwidth_gbps),
        "seed": 0,
        "workload": {"model": model, "global_batch": batch, "updates": None, "time_budget_s": budget_s},
        "cluster": {"groups": groups},
        "network": {"name": "ring_allreduce"},
        "contention": [],
    }
