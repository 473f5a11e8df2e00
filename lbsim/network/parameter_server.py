"""The parameter server's round trip: the one definition of its timing rules (pure, no engine).

The server (``k`` shards) sits on its own node; each shard's NIC moves ``B_ps`` bytes/s per
direction. A worker's push (or pull) of ``S`` bytes crosses two links:

* the server's NIC, a FIFO per direction shared by every worker, held for
  ``hold_s = S / (k · B_ps)`` per transfer — the shared bottleneck;
* the worker's node's NIC, at ``B_node / F`` with ``F`` the node's network slowdown sampled when
  the transfer is requested: ``own_s = S · F / B_node``. A node's NIC is shared by its workers:
  on a node of several workers a transfer first queues for the node's NIC (a FIFO per node and
  direction, held for the whole crossing), and ``F`` is then the largest slowdown of the node's
  workers at the moment the node's NIC is granted.

Round trip of worker ``w`` (every queue FIFO; ``t_req`` the moment the transfer is requested, or
the node's NIC granted on a shared node)::

    push:   t_grant  = when the server's inbound NIC is granted        (>= t_req)
            t_rel    = t_grant + hold_s                                 (the NIC is released)
            t_pushed = t_rel + tail_s,  tail_s = max(0, t_req + own_s − t_rel) + latency_s
    apply:  the serial apply queue, held apply_each_s = apply_s / k per gradient
    pull:   as push, on the server's outbound NIC

so a transfer alone ends at ``max(hold_s, own_s) + latency_s`` after it was requested, and with
``n`` workers pushing at once the last push ends at ``max(n S / (k B_ps), S / B_w)`` — the textbook
PS bound. Times are added in exactly this order (both engines produce the same floats).

No overlap with compute: a push starts after the whole batch's gradient is ready (the schemes
that use a server apply one gradient per push), so ``workload.overlap`` is not applied here.

Both simulator paths enact these rules: the SimPy event path
(:class:`lbsim.simulator.network.ParameterServer`, a SimPy process per transfer) and the
parameter-server fast path (:mod:`lbsim.simulator.fast_ps`, an event queue of its own); a test
runs both on random scenarios and requires identical records.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from lbsim.network.collectives import bytes_per_s


def server_hold_s(gradient_bytes: float, shards: int, server_bytes_per_s: float) -> float:
    """Time one transfer holds the server's NIC: ``S / (k · B_ps)``."""
    return gradient_bytes / (shards * server_bytes_per_s)


def link_s(gradient_bytes: float, network_factor: float, node_bytes_per_s: float) -> float:
    """Time the transfer needs on its node's NIC under contention ``F``: ``S · F / B_node``."""
    return gradient_bytes * network_factor / node_bytes_per_s


def tail_s(requested_s: float, own_s: float, released_s: float, latency_s: float) -> float:
    """From the server NIC's release to the transfer's end: what is left of the node link, + latency."""
    left = requested_s + own_s - released_s
    return (left if left > 0.0 else 0.0) + latency_s  # max(0.0, left) + latency, without a call


class _Worker(Protocol):
    @property
    def index(self) -> int: ...
    @property
    def bandwidth_gbps(self) -> float: ...
    @property
    def node(self) -> int: ...
    @property
    def node_size(self) -> int: ...


@dataclass(frozen=True, slots=True)
class ServerTiming:
    """The round trip's figures for one run: server hold, apply, latency, each worker's link.

    ``node_of[w]`` is worker ``w``'s node when that node holds several workers (their transfers
    queue for its NIC), ``-1`` when ``w`` is alone on its node; ``members[node]`` lists the
    workers of each shared node, in worker order.
    """

    hold_s: float
    apply_each_s: float
    latency_s: float
    gradient_bytes: float
    link_bytes_per_s: tuple[float, ...]
    node_of: tuple[int, ...]
    members: dict[int, tuple[int, ...]]

    @classmethod
    def of(cls, *, gradient_bytes: float, shards: int, server_bandwidth_gbps: float, apply_s: float,
           latency_s: float, workers: Sequence[_Worker]) -> ServerTiming:
        """The figures of a server of ``shards`` shards at ``server_bandwidth_gbps`` each."""
        members: dict[int, list[int]] = {}
        for w in workers:
            if w.node_size > 1:
                members.setdefault(w.node, []).append(w.index)
        return cls(
            hold_s=server_hold_s(gradient_bytes, shards, bytes_per_s(server_bandwidth_gbps)),
            apply_each_s=apply_s / shards,
            latency_s=latency_s,
            gradient_bytes=gradient_bytes,
            link_bytes_per_s=tuple(bytes_per_s(w.bandwidth_gbps) for w in workers),
            node_of=tuple(w.node if w.node_size > 1 else -1 for w in workers),
            members={k: tuple(v) for k, v in members.items()},
        )

    def own_s(self, worker: int, network_factor: float) -> float:
        """``own_s``: the transfer's time on ``worker``'s node NIC under slowdown ``F``."""
        return link_s(self.gradient_bytes, network_factor, self.link_bytes_per_s[worker])

    def node_factor(self, node: int, network_factor: Callable[[int], float]) -> float:
        """A shared node's slowdown: the largest of its workers' (``network_factor(worker)`` each, now)."""
        return max(network_factor(m) for m in self.members[node])
