"""The records engines emit. Metrics are observed, never computed inside the model.

An :class:`IterationRecord` is one worker-iteration, from the moment the worker started it to
the moment it could start the next (after its pull). ``fetch_s + compute_s + comm_s + wait_s =
end_s - start_s``: ``fetch_s`` is reading the batch's samples (the stage before compute, from
``start_s`` to ``start_s + fetch_s``; 0 without a ``data:`` section), ``comm_s`` is time moving
gradient bytes (push, pull, all-reduce, queueing at a NIC included), ``wait_s`` the rest
(barriers, gates, the server's apply queue).

An :class:`UpdateRecord` is one global model update: which gradients it contains and how many
samples. Synchronous updates are batch-weighted: ``g = sum_i (x_i / X) g_i`` where X is the
samples in the update, so each record's ``weight`` is ``x_i / X`` (the weights of an update sum
to 1). ``staleness`` of an iteration is the number of server updates between the worker's
pull and its push being applied (0 for synchronous schemes).
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True, slots=True)
class IterationRecord:
    worker: int
    iteration: int  # the worker's own clock: 0, 1, 2, ...
    update: int  # global update that contains this gradient (-1: dropped)
    start_s: float
    compute_s: float
    comm_s: float
    wait_s: float
    end_s: float
    batch: int
    staleness: int
    dropped: bool = False
    weight: float = 1.0  # this gradient's share in its update: x_i / (samples in the update); 0 if dropped
    fetch_s: float = 0.0  # reading the batch's samples before compute (0 when data are local and free)

    @property
    def iteration_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True, slots=True)
class UpdateRecord:
    update: int  # 0, 1, 2, ...
    time_s: float
    samples: int
    gradients: int


ITERATION_COLUMNS = tuple(f.name for f in fields(IterationRecord))
UPDATE_COLUMNS = tuple(f.name for f in fields(UpdateRecord))
