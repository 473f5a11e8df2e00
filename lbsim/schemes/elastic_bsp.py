"""ElasticBSP with ZipLine (Zhao et al., ICDM 2019; ZipLine: Machine Learning 2021).

Rule (schemes.md, schemes-research.md §2): the next barrier's time is chosen at run time and
workers may run different numbers of iterations between barriers. After a barrier the server
watches ``monitor_pushes`` (≥ 2) pushes per worker; then it takes each worker's latest iteration
interval I_p (between its last two pushes) and predicts its next R end times
``e_j = last_push_p + j I_p`` (j = 1..R, R = ``lookahead``). ZipLine
(:func:`lbsim.sizing.zipline.zipline`) picks one predicted time per worker so that max − min —
the fastest worker's wait — is smallest (earliest set on ties). Worker p's budget for the
superstep is its pushes so far plus its chosen j; a worker that has used its budget waits; when
every worker has, that is the barrier: all are released and pull the same weights. Between
barriers pushes are applied on arrival and workers pull the latest weights (ASP-like).

Decisions use predicted end times only (never the engine's future). Our choices where the paper
is silent: the run starts as if a barrier had just passed; a worker keeps running freely during
monitoring; the chosen barrier, budgets and the fastest worker's actual wait are recorded per
superstep (``decisions.csv``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from lbsim.fields import param
from lbsim.limits import MAX_HISTORY
from lbsim.schemes.base import SchemeContext
from lbsim.schemes.bsp import check_even_split
from lbsim.schemes.registry import register_scheme
from lbsim.sizing.split import even_split
from lbsim.sizing.zipline import zipline_ahead


@dataclass(frozen=True)
class ElasticBSPConfig:
    lookahead: int = param(15, "R: future iterations per worker ZipLine may choose from (paper: 15-240)", ge=1, le=MAX_HISTORY)
    monitor_pushes: int = param(2, "pushes per worker watched after a barrier before predicting", ge=2, le=MAX_HISTORY)


@register_scheme("elastic_bsp", ElasticBSPConfig)
class ElasticBSP:
    """ElasticBSP: ZipLine picks each superstep's barrier from predicted iteration end times."""

    name: ClassVar[str]
    driver: ClassVar[str] = "async"
    reads_clocks: ClassVar[bool] = False  # it counts pushes since the barrier itself: the gate keeps no clocks
    admits_at_push: ClassVar[bool] = True  # on_push returns may_start's answer for the pusher
    fixed_batch: ClassVar[bool] = True  # batch(worker): the even share at every iteration

    def __init__(self, config: ElasticBSPConfig, ctx: SchemeContext) -> None:
        self.cfg = config
        n = ctx.workers
        self._batches = even_split(ctx.global_batch, n)
        check_even_split(self._batches, ctx, self.name)
        self.since = [0] * n  # pushes since the last barrier
        self._monitoring = n  # workers with fewer than monitor_pushes pushes since the barrier
        self._short = 0  # workers that have not used their budget (while one is set)
        self._monitor = config.monitor_pushes
        self.latest: list[float] = [0.0] * n  # each worker's last push time since the barrier
        self.previous: list[float] = [0.0] * n  # and the one before (both set once monitoring is over)
        self.budget: list[int] | None = None  # None while monitoring
        self.barrier_s = 0.0
        self.plan: dict[str, Any] = {}
        self.rows: list[dict[str, Any]] = []

    def batch(self, worker: int) -> int:
        """``worker``'s batch: the even share, always."""
        return self._batches[worker]

    def on_push(self, worker: int, time_s: float, clocks: Sequence[int]) -> bool:
        """Count ``worker``'s push; when every worker used its budget, plan the next superstep.
        Returns whether ``worker`` may go on (:meth:`may_start` now: ``admits_at_push``)."""
        # counters stand for min(since) >= monitor_pushes and all(since >= budget): O(1) per push
        since = self.since
        pushes = since[worker] = since[worker] + 1
        if pushes == self._monitor:
            self._monitoring -= 1
        budget = self.budget
        if budget is not None and pushes == budget[worker]:
            self._short -= 1
        self.previous[worker] = self.latest[worker]  # the last two push times
        self.latest[worker] = time_s
        if budget is None and self._monitoring == 0:
            self._decide(time_s)
        budget = self.budget
        if budget is not None and self._short == 0:
            self._barrier(time_s)
            return True  # every worker is released at the barrier
        return budget is None or pushes < budget[worker]

    def _decide(self, now_s: float) -> None:
        last = list(self.latest)
        interval = [t - t0 for t, t0 in zip(self.latest, self.previous, strict=True)]
        choice = zipline_ahead(last, interval, self.cfg.lookahead)  # zipline(predict_ends(...))
        self.budget = [s + j + 1 for s, j in zip(self.since, choice.indices, strict=True)]
        self._short = sum(s < b for s, b in zip(self.since, self.budget, strict=True))
        fastest = choice.times.index(min(choice.times))  # the first earliest (numpy's argmin)
        self.plan = {
            "superstep": len(self.rows), "start_s": self.barrier_s, "decided_s": now_s,
            "predicted_barrier_s": choice.barrier_s, "predicted_range_s": choice.range_s,
            "budgets": " ".join(map(str, self.budget)), "fastest_worker": fastest,
        }

    def _barrier(self, now_s: float) -> None:
        fastest = self.plan["fastest_worker"]
        self.rows.append({**self.plan, "barrier_s": now_s, "fastest_wait_s": now_s - self.latest[fastest]})
        self.barrier_s = now_s
        self.since = [0] * len(self.since)
        self._monitoring = len(self.since)
        self.budget = None

    def may_start(self, worker: int, clocks: Sequence[int]) -> bool:
        """Whether ``worker`` has iterations left in this superstep's budget."""
        return self.budget is None or self.since[worker] < self.budget[worker]

    def gate_key(self, clocks: Sequence[int]) -> tuple[int, bool]:
        """A blocked worker's answer changes only when a budget is set or a barrier passes."""
        return len(self.rows), self.budget is None

    def decision_rows(self) -> list[dict[str, Any]]:
        """One row per superstep: the budgets and the predicted range."""
        return list(self.rows)

    def diagnostics(self) -> dict[str, object]:
        """Supersteps, mean predicted range, mean wait of the fastest worker."""
        if not self.rows:
            return {"supersteps": 0}
        return {
            "supersteps": len(self.rows),
            "mean_predicted_range_s": float(f"{np.mean([r['predicted_range_s'] for r in self.rows]):.12g}"),
            "mean_fastest_wait_s": float(f"{np.mean([r['fastest_wait_s'] for r in self.rows]):.12g}"),
        }
