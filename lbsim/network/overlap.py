"""Overlap of the gradient all-reduce with backward, and compute slowdown of GPUs sharing a node.

Overlap (data-parallel buckets, e.g. PyTorch DDP): gradients become ready during backward and are
reduced bucket by bucket while backward goes on, so only a tail of the communication delays the
step. With ``c`` the step's communication time (the all-reduce alone, links idle otherwise) and
``t`` the step's compute time::

    exposed(c, t) = max(tail_share · c,  c − hide_share · t)

* ``hide_share`` (0..1) — the share of compute that communication can hide under (the part of
  the step during which gradients are already flowing: roughly the backward pass after the first
  bucket is ready). 0 means no overlap: ``exposed == c``.
* ``tail_share`` (0..1) — the share of communication that can never be hidden (the last bucket,
  reduced after backward ends). 1 means no overlap whatever ``hide_share`` is.

Both limits are closed forms: ``hide_share · t >= (1 − tail_share) · c`` → only the last bucket is
exposed; ``hide_share = 0`` → everything is exposed. A scheme that cannot overlap (a parameter-
server push after the whole batch) uses the default ``OverlapParams()``.

Shared-node compute (GPUs on one node share PCIe root complex, host memory bandwidth, CPU data
loading): each worker's compute time is multiplied by::

    node_compute_factor(k, s) = 1 + s · (k − 1)

for ``k`` workers on the node and ``s`` the fractional slowdown per extra co-located worker;
exactly 1.0 for one worker per node.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class OverlapParams:
    """How much of a step's communication hides under its compute (default: none)."""

    hide_share: float = 0.0
    tail_share: float = 1.0

    def __post_init__(self) -> None:
        for name in ("hide_share", "tail_share"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"overlap.{name} must be in [0, 1], got {v}")

    @property
    def enabled(self) -> bool:
        """Whether any communication hides behind backward (a share to hide, not all of it tail)."""
        return self.hide_share > 0.0 and self.tail_share < 1.0


def exposed_comm_s(comm_s: float, compute_s: float, overlap: OverlapParams) -> float:
    """The part of ``comm_s`` not hidden under ``compute_s`` (== ``comm_s`` when overlap is off)."""
    if not overlap.enabled:
        return comm_s
    return max(overlap.tail_share * comm_s, comm_s - overlap.hide_share * compute_s)


def exposed_comm_rows_s(comm_s: np.ndarray, compute_s: np.ndarray, overlap: OverlapParams) -> np.ndarray:
    """:func:`exposed_comm_s` of each row (the same operations on the same doubles, elementwise)."""
    if not overlap.enabled:
        return comm_s
    return np.maximum(overlap.tail_share * comm_s, comm_s - overlap.hide_share * compute_s)


def node_compute_factor(workers_on_node: int, slowdown_per_extra: float) -> float:
    """Multiplier on compute time for ``workers_on_node`` GPUs sharing one node (1.0 when alone)."""
    if workers_on_node < 1:
        raise ValueError(f"workers_on_node must be >= 1, got {workers_on_node}")
    return 1.0 + slowdown_per_extra * (workers_on_node - 1)
