"""Contention sections: what slows which worker, when (``contention:`` is a list).

* ``scheduled`` — workers W are ``slowdown`` times slower from ``start_s`` to ``end_s``.
* ``markov`` — random on/off interference: exponential off and on periods with the given means;
  each on period draws a slowdown uniformly in ``[slowdown_min, slowdown_max]``.
* ``trace`` — replay a real or user trace: Alibaba PAI per-worker mini-batch times (a
  multiplier per worker *iteration*), the Alibaba 2018 cluster CPU series (co-located load over
  time) or lbsim's simple ``time_s,worker,slowdown`` CSV.

``target`` says what the slowdown hits: ``compute``, ``network`` or ``both``. Slowdowns from
several entries multiply. ``workers`` is ``all`` or a list of worker indices and instance-type
names (``[0, 3, c5.xlarge]``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from lbsim.errors import InputError
from lbsim.fields import param
from lbsim.workers import Workers

Target = Literal["compute", "network", "both"]


@dataclass(frozen=True)
class ScheduledContention:
    """Workers are `slowdown` times slower from `start_s` to `end_s`."""

    kind: ClassVar[str] = "scheduled"
    workers: Workers = param(help="'all' or a list of worker indices / instance types", nonempty=True)
    start_s: float = param(0.0, "when the slowdown starts", ge=0)
    end_s: float | None = param(None, "when it ends (null: never)", gt=0)
    slowdown: float = param(2.0, "factor: 2 means twice as slow", gt=0)
    target: Target = param("compute", "what is slowed: compute, network or both")

    def check(self) -> None:
        """The window ends after it starts."""
        if self.end_s is not None and self.end_s <= self.start_s:
            raise InputError("end_s", f"must be > start_s ({self.start_s:g}), got {self.end_s:g}")


@dataclass(frozen=True)
class MarkovContention:
    """Random on/off interference: exponential off/on periods, a uniform slowdown per on period."""

    kind: ClassVar[str] = "markov"
    workers: Workers = param("all", "'all' or a list of worker indices / instance types", nonempty=True)
    mean_off_s: float = param(60.0, "mean length of an interference-free period", gt=0)
    mean_on_s: float = param(20.0, "mean length of an interference period", gt=0)
    slowdown_min: float = param(1.5, "smallest slowdown of an interference period", ge=1)
    slowdown_max: float = param(3.0, "largest slowdown of an interference period", ge=1)
    target: Target = param("compute", "what is slowed: compute, network or both")
    start_on: bool = param(False, "start in an interference period")

    def check(self) -> None:
        """The slowdown range is not empty."""
        if self.slowdown_max < self.slowdown_min:
            raise InputError("slowdown_max", f"must be >= slowdown_min ({self.slowdown_min:g})")


TraceFormat = Literal["auto", "pai_minibatch", "cluster_cpu", "simple"]


@dataclass(frozen=True)
class TraceContention:
    """Replay a trace: PAI per-iteration mini-batch times, the Alibaba cluster CPU series, or `time_s,worker,slowdown`."""

    kind: ClassVar[str] = "trace"
    path: str = param(help="CSV file (.csv or .csv.gz), relative to the scenario file", nonempty=True)
    format: TraceFormat = param("auto", "auto (from the header), pai_minibatch, cluster_cpu or simple")
    workers: Workers = param("all", "'all' or a list of worker indices / instance types", nonempty=True)
    target: Target = param("compute", "what is slowed (pai_minibatch: compute only)")
    demand: float = param(0.6, "cluster_cpu: CPU share the training job needs; speed = min(1, (1 - u) / demand)", gt=0, le=1)
    bucket_s: float = param(300.0, "cluster_cpu: simulated seconds per trace row (300 = real time)", gt=0)
    stagger_rows: int = param(0, "cluster_cpu: worker w starts reading at row w * stagger_rows", ge=0)
    max_slowdown: float = param(10.0, "cluster_cpu: cap on the slowdown when the node is saturated", ge=1)


def contention_configs() -> dict[str, type]:
    """The ``contention`` entries by ``name``: scheduled, markov, trace."""
    return {c.kind: c for c in (ScheduledContention, MarkovContention, TraceContention)}


ContentionConfig = ScheduledContention | MarkovContention | TraceContention
