"""The ``data:`` section: where the training data lives and what fetching it costs.

```yaml
data:
  sample_bytes: 110000            # bytes per stored sample
  placement:                      # every worker in exactly one entry
    - {workers: [0, 1], local_fraction: 0.05, local_gbps: 16, remote_gbps: 10, remote_latency_s: 0.001}
    - {workers: [2, 3], local_fraction: 0.20, local_gbps: 4, remote_gbps: 0.1, remote_latency_s: 0.04}
  storage: {bandwidth_gbps: 25, latency_s: 0.0005}   # optional: the node serving remote reads
```
``local_fraction`` is the share of the whole dataset stored on *each* worker of the entry; the
shares over all workers sum to at most 1, the rest lives only on the storage node (which holds
the whole dataset and serves every remote read). Without a ``data:`` section (the default) data
are local and free: no fetch stage at all. The cost model is in :mod:`lbsim.fetch`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from lbsim.errors import InputError
from lbsim.fetch import DataLayout, WorkerData
from lbsim.fields import param
from lbsim.workers import Workers, WorkerSpec, select_workers


@dataclass(frozen=True)
class DataPlacement:
    """One entry of ``data.placement``: the shard and links of the workers it names."""

    workers: Workers = param(help="'all' or a list of worker indices / instance types", nonempty=True)
    remote_gbps: float = param(help="bandwidth of this worker's remote reads (its link to the storage node)", gt=0)
    local_fraction: float = param(0.0, "share of the whole dataset stored locally on EACH of these workers", ge=0, le=1)
    local_gbps: float = param(16.0, "read bandwidth of local storage (16: a ~2 GB/s NVMe SSD, an assumption)", gt=0)
    remote_latency_s: float = param(0.0, "latency paid once per batch that reads remote samples", ge=0)


@dataclass(frozen=True)
class StorageNode:
    """The node that holds the whole dataset and serves remote reads through one FIFO NIC."""

    bandwidth_gbps: float = param(help="NIC bandwidth of the storage/cache node, shared by all remote reads", gt=0)
    latency_s: float = param(0.0, "latency the node adds to each remote read", ge=0)


@dataclass(frozen=True)
class DataConfig:
    sample_bytes: int = param(help="bytes per stored training sample (e.g. ~110000 for an ImageNet JPEG)", gt=0)
    placement: tuple[DataPlacement, ...] = param(help="each worker's shard and links; every worker in exactly one entry", nonempty=True)
    storage: StorageNode | None = param(None, "storage/cache node serving remote reads (null: no shared bottleneck, each worker's link only)")


def resolve_data(data: DataConfig | None, workers: tuple[WorkerSpec, ...]) -> DataLayout | None:
    """Per-worker placement; checks coverage and that the local shares sum to at most 1."""
    if data is None:
        return None
    owner: dict[int, int] = {}
    for k, entry in enumerate(data.placement):
        path = f"data.placement[{k}].workers"
        for w in select_workers(entry.workers, workers, path):
            if w in owner:
                raise InputError(path, f"worker {w} is already placed by data.placement[{owner[w]}]; each worker belongs to exactly one entry")
            owner[w] = k
    missing = [w for w in range(len(workers)) if w not in owner]
    if missing:
        raise InputError("data.placement", f"worker(s) {', '.join(map(str, missing))} are in no entry; every worker needs exactly one (workers: all covers all)")
    placed = tuple(data.placement[owner[w]] for w in range(len(workers)))
    total = math.fsum(p.local_fraction for p in placed)
    if total > 1 + 1e-9:
        raise InputError(
            "data.placement",
            f"the workers' local_fraction values sum to {total:.6g} over {len(workers)} workers; "
            "they share one dataset, so the sum must be <= 1 (the rest lives on the storage node)",
        )
    storage = data.storage
    return DataLayout(
        sample_bytes=data.sample_bytes,
        workers=tuple(WorkerData(p.local_fraction, p.local_gbps, p.remote_gbps, p.remote_latency_s) for p in placed),
        storage_gbps=storage.bandwidth_gbps if storage is not None else None,
        storage_latency_s=storage.latency_s if storage is not None else 0.0,
    )
