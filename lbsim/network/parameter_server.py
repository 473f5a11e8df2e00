"""Parameter-server transfers over nodes and links: the pieces of a push or pull (pure formulas).

The server (``k`` shards) sits on its own node; each shard's NIC moves ``B_ps`` bytes/s per
direction. A worker's push (or pull) of ``S`` bytes crosses two links:

* the server's NIC, a FIFO per direction shared by every worker:
  ``server_hold_s = S / (k · B_ps)`` — the shared bottleneck (the engine queues it);
* the worker's node's NIC, at ``B_node / F`` with ``F`` the node's network slowdown:
  ``link_s = S · F / B_node``. A node's NIC is shared by its workers: when several workers sit on
  one node their transfers queue for it (the engine holds a FIFO per node and direction while a
  transfer crosses it), so co-located workers share the NIC's bandwidth, never each get all of it.

A transfer ends ``latency_s`` after both links are done: ``max(queue + server_hold_s, link_s)``
after it was requested (alone: ``max(S / (k B_ps), S F / B_node) + latency`` — the textbook PS
bound ``max(n S / (k B_ps), S / B_w)`` with n workers pushing at once).

No overlap with compute: a push starts after the whole batch's gradient is ready (the schemes
that use a server apply one gradient per push), so ``workload.overlap`` is not applied here.
"""

from __future__ import annotations


def server_hold_s(gradient_bytes: float, shards: int, server_bytes_per_s: float) -> float:
    """Time one transfer holds the server's NIC: ``S / (k · B_ps)``."""
    return gradient_bytes / (shards * server_bytes_per_s)


def link_s(gradient_bytes: float, network_factor: float, node_bytes_per_s: float) -> float:
    """Time the transfer needs on its node's NIC under contention ``F``: ``S · F / B_node``."""
    return gradient_bytes * network_factor / node_bytes_per_s
