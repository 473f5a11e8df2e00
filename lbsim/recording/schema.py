"""The recording format: columns, header keys, bounds and the checked in-memory form.

Per step ``k`` of rank ``r`` (all times in seconds on the rank's clock, zero at the ranks' common
start)::

    batch_ready_s <= last_bucket_s <= step_end_s <= optimizer_end_s <= batch_ready_s of step k+1

* compute (the rank's own work):   ``last_bucket_s - batch_ready_s``
* communication tail:             ``step_end_s - last_bucket_s`` (on the slowest rank: the all-reduce
  of the last bucket; on the others it includes waiting for the slowest)
* optimizer and loader (per rank): ``optimizer_end_s - step_end_s`` and the gap to the next step's
  ``batch_ready_s``.

Bounds (:data:`MAX_STEP_S`, :data:`MAX_CLOCK_S`, :data:`MAX_ROWS`, :data:`MAX_SAMPLES`) reject
values that cannot be a training step's (a step of a day, a clock past a year) and keep a hostile
file from costing more than a few seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

FORMAT = "lbsim-recording"
VERSION = 1
HEADER_FILE = "job.json"
SHARD_STEM = "rank-{rank:05d}"
SHARD_SUFFIXES = (".csv", ".parquet")

TIME_COLUMNS = ("batch_ready_s", "last_bucket_s", "step_end_s", "optimizer_end_s")
COLUMNS = ("rank", "host", "device", "step", "samples", *TIME_COLUMNS)
OPTIONAL_COLUMNS = ("tokens",)
INT_COLUMNS = ("rank", "step", "samples", "tokens")
TEXT_COLUMNS = ("host", "device")

HEADER_KEYS = {
    "format": "always 'lbsim-recording'",
    "version": "format version (1)",
    "world_size": "number of ranks (one shard each)",
    "scheme": "the scheme the job ran: {'name': 'bsp'} for plain DDP, or lbbsp with its options",
    "complete": "true once every rank has closed its shard (false or missing: the job was killed)",
    "gradient_bytes": "bytes all-reduced per step (null: unknown)",
    "global_batch": "samples per step over all ranks (null: the recorded samples)",
    "clock": "what the times count from",
    "created_by": "the tool and version that wrote the recording",
    "flush_every": "steps between a shard's flushes",
    "balancer": "the runtime balancer's own settings (decide_every, lag; null in observe mode)",
    "note": "free text",
}
REQUIRED_HEADER_KEYS = ("format", "version", "world_size")

MAX_STEP_S = 3600.0  # one step of an hour: beyond, the unit is wrong (ms or us written as s)
MAX_CLOCK_S = 366 * 86400.0  # a job clock past a year: an epoch timestamp, not seconds since the start
MAX_ROWS = 2_000_000  # rows over all shards (a 64-rank job of 31,250 steps); ~2 s to read
MAX_SAMPLES = 2**24  # per rank and step
MAX_FILE_BYTES = 512 * 2**20
CLOCK_TOLERANCE_S = 1e-6  # float round-off allowed between consecutive moments


@dataclass(frozen=True)
class Recording:
    """A checked recording: ``ranks`` x ``steps`` arrays (row r is rank r, column k its k-th step used).

    ``steps_recorded``: the most complete steps any shard holds; ``steps`` the step numbers used
    (common to every rank: a killed job is cut at its last complete step); ``notes``: what was
    dropped and why.
    """

    source: str
    hosts: tuple[str, ...]
    devices: tuple[str, ...]
    steps: np.ndarray
    samples: np.ndarray
    batch_ready_s: np.ndarray
    last_bucket_s: np.ndarray
    step_end_s: np.ndarray
    optimizer_end_s: np.ndarray
    tokens: np.ndarray | None = None
    scheme: dict[str, Any] = field(default_factory=lambda: {"name": "bsp"})
    complete: bool = True
    steps_recorded: int = 0
    gradient_bytes: int | None = None
    notes: tuple[str, ...] = ()

    @property
    def ranks(self) -> int:
        """The recorded ranks."""
        return len(self.hosts)

    @property
    def steps_used(self) -> int:
        """The steps every rank completed (the columns of the arrays)."""
        return int(self.samples.shape[1])

    @property
    def compute_s(self) -> np.ndarray:
        """Each rank's own work per step: batch ready to last bucket ready."""
        return self.last_bucket_s - self.batch_ready_s

    @property
    def tail_s(self) -> np.ndarray:
        """Last bucket ready to the end of its all-reduce (waiting included on all but the slowest)."""
        return self.step_end_s - self.last_bucket_s

    @property
    def job_s(self) -> float:
        """The recorded job's time: first batch ready (earliest rank) to the last optimizer step's end (latest rank)."""
        return float(self.optimizer_end_s[:, -1].max() - self.batch_ready_s[:, 0].min())
