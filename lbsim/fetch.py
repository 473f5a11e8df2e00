"""Where the training data lives and what reading it costs — the pure fetch model.

Both engines and the schemes use it (the simulator enacts it as a stage before compute, LOFT
plans with it, the runtime can charge the same costs). Units: bytes, seconds, Gbit/s.

Placement: worker i stores a share ``f_i`` of the dataset locally (its *shard*, e.g. an edge
node's own data or a cache partition); ``sum_i f_i <= 1`` and the rest, ``1 - sum_i f_i``, lives
only on the *storage node*. The storage node holds the whole dataset and serves every remote
read (the workers' shards are local copies of parts of it). A batch of ``l`` local and ``r``
remote samples of ``s`` bytes each takes, for a worker alone::

    fetch_s = l s / B_local + max(r s f_net(t) / B_remote, r s / B_storage) + [r > 0] (L_remote + L_storage)

``f_net(t)`` is the worker's network slowdown (contention with ``target: network``); the
``B_storage`` term appears only when a storage node with a NIC is configured (in the simulator
that NIC is a FIFO queue shared by all readers, like the parameter server's). Remote samples
are read first, then local ones (the sum above).

Which samples are local: a scheme that samples uniformly from the whole dataset (every scheme
but LOFT) gets, in expectation, ``l = round(b f_i)`` of its ``b`` samples from its own shard
(:meth:`DataLayout.default_local`). A locality-aware scheme decides ``l`` itself.

The storage node's queue is written twice on purpose: :func:`fetch_schedule` (requests made
together, the runtime's rounds) and the simulator's event-path ``Fetcher``, which cannot call it
and keep shipped results byte-identical because it times a read on the simulation clock —
``t_grant + hold + ((t_req + link) − now) + latency``, its requests arriving at different moments in
SimPy's event order — which rounds differently from the schedule's ``t_req + max(link, queued) +
latency`` (about one read in four in a random check); both take every per-read figure from
:class:`DataLayout`.

Representative sampling (:meth:`DataLayout.quotas`): shard k (each worker's, and the storage
node's rest) contributes ``q_k`` samples to every global batch of X samples, where ``q`` is the
largest-remainder integerisation of ``X * share_k`` (so ``sum_k q_k = X``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def bytes_per_s(gbps: float) -> float:
    """A link's rate in bytes per second from gigabits per second."""
    return gbps * 1e9 / 8.0


@dataclass(frozen=True)
class WorkerData:
    """One worker's shard and links."""

    local_fraction: float
    local_gbps: float
    remote_gbps: float
    remote_latency_s: float


@dataclass(frozen=True)
class DataLayout:
    """The resolved ``data:`` section: per-worker placement and the storage node."""

    sample_bytes: int
    workers: tuple[WorkerData, ...]
    storage_gbps: float | None = None  # None: no shared NIC (remote reads limited by each worker's link only)
    storage_latency_s: float = 0.0

    @property
    def storage_share(self) -> float:
        """Share of the dataset held only by the storage node."""
        return max(0.0, 1.0 - math.fsum(w.local_fraction for w in self.workers))

    def local_s_per_sample(self, worker: int) -> float:
        """Seconds for ``worker`` to read one sample from its local shard."""
        return self.sample_bytes / bytes_per_s(self.workers[worker].local_gbps)

    def remote_s_per_sample(self, worker: int, network_factor: float = 1.0) -> float:
        """Seconds per remote sample on the worker's own link (slowed by ``network_factor``)."""
        return self.sample_bytes * network_factor / bytes_per_s(self.workers[worker].remote_gbps)

    def storage_s_per_sample(self) -> float:
        """Seconds the storage node's NIC is busy per remote sample (0 without a storage NIC)."""
        return 0.0 if self.storage_gbps is None else self.sample_bytes / bytes_per_s(self.storage_gbps)

    def remote_latency_s(self, worker: int) -> float:
        """Latency paid once per batch that reads anything remotely."""
        return self.workers[worker].remote_latency_s + self.storage_latency_s

    def fetch_s(self, worker: int, local: int, remote: int, network_factor: float = 1.0) -> float:
        """Fetch time of ``local`` + ``remote`` samples for this worker alone (no queueing)."""
        t = local * self.local_s_per_sample(worker)
        if remote > 0:
            link = remote * self.remote_s_per_sample(worker, network_factor)
            t += max(link, remote * self.storage_s_per_sample()) + self.remote_latency_s(worker)
        return t

    def default_local(self, worker: int, batch: int) -> int:
        """Local samples of a uniformly sampled batch, in expectation: round(b f_i) (halves up)."""
        return min(batch, int(math.floor(batch * self.workers[worker].local_fraction + 0.5)))

    def quotas(self, total: int) -> tuple[int, ...]:
        """Samples each shard contributes to a global batch of ``total``: one per worker, then storage."""
        shares = [w.local_fraction for w in self.workers] + [self.storage_share]
        return largest_remainder(total, shares)


def largest_remainder(total: int, shares: list[float]) -> tuple[int, ...]:
    """Integers ``floor(total * share_k)`` plus one for the largest remainders, summing to ``total``.

    Shares are normalised by their sum; ties go to the larger share, then the lower index.
    """
    s = math.fsum(shares)
    if s <= 0:
        raise ValueError("shares must have a positive sum")
    real = [total * x / s for x in shares]
    out = [int(math.floor(r + 1e-9)) for r in real]
    short = total - sum(out)
    order = sorted(range(len(real)), key=lambda k: (-(real[k] - out[k]), -shares[k], k))
    for k in order[: max(0, short)]:
        out[k] += 1
    for k in reversed(order):  # rounding surplus (only from the 1e-9 guard): smallest remainders give back
        if short >= 0:
            break
        if out[k] > 0:
            out[k] -= 1
            short += 1
    return tuple(out)


# -- the storage node's queue, for requests made together (the runtime's rounds) --------------------
def fetch_schedule(layout: DataLayout, local: Sequence[int], remote: Sequence[int], order: Sequence[int],
                   network_factors: Sequence[float]) -> np.ndarray:
    """Seconds each worker spends reading its batch when all request at once, the NIC serving ``order``.

    The storage node's FIFO queue (the simulator's event-path ``Fetcher``) for simultaneous requests: remote reads first
    (own link ``r s f_net / B_remote`` in parallel with the FIFO storage NIC, ``r s / B_storage`` per
    request, then the latency), then the local ones.
    """
    n = len(local)
    out = np.zeros(n)
    nic_s = layout.storage_s_per_sample()
    queued_s = 0.0
    for i in order:
        t = 0.0
        if remote[i] > 0:
            queued_s += remote[i] * nic_s
            link_s = remote[i] * layout.remote_s_per_sample(i, network_factors[i])
            t = max(link_s, queued_s) + layout.remote_latency_s(i)
        out[i] = t + local[i] * layout.local_s_per_sample(i)
    return out


def arrival_order(compute_end_s: np.ndarray) -> list[int]:
    """Ranks in the order they reached the barrier (ties: lower rank first)."""
    return [int(i) for i in np.lexsort((np.arange(len(compute_end_s)), compute_end_s))]
