"""DSSP — dynamic stale synchronous parallel (Zhao, An, Liu, Chen; ICDCS 2019).

Rule (schemes-research.md §2.7): SSP whose bound floats in ``[s_L, s_U]``. The server counts
each worker's pushes (its clock t_p) and keeps a per-worker credit r_p of extra clocks of lead,
initially 0. On a push from p, with ``lead = t_p − t_slowest``: if ``lead ≤ s_L``, go on (and
the credit is reset); else if ``lead ≤ s_L + r_p``, go on (credit left); else if p is the
fastest, run the controller, set r_p to what it grants (0..r_max) and go on if
``lead ≤ s_L + r_p``; otherwise hold p until the slowest is back within s_L.

Our reading of the paper's "r_p −= 1 per push" as a credit of *lead* (the same when the slowest
does not move) makes the bound hold by construction: a worker never starts an iteration more
than ``s_L + r_max = s_U`` clocks ahead of the slowest, the bound the paper's regret proof uses.

Controller: with I_p and I_slow the latest push intervals of p and of the slowest worker and A
their latest push times, simulate ``Sim_p[r] = A_p + r I_p`` and
``Sim_slow[k] = A_slow + I_slow + k I_slow`` for r, k in [0, r_max] (r_max = s_U − s_L) and
return the r minimising ``|Sim_slow[k] − Sim_p[r]|`` over all (r, k) (smallest r on ties — our
choice). A worker is therefore never more than s_U clocks ahead of the slowest. Until a worker
has two pushes its interval is unknown and the controller grants nothing (our choice).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from lbsim.errors import InputError
from lbsim.scenario.fields import param
from lbsim.schemes.base import SchemeContext, fastest_clock, slowest_clock, slowest_worker
from lbsim.schemes.bsp import check_even_split
from lbsim.schemes.registry import register_scheme
from lbsim.sizing.split import even_split


@dataclass(frozen=True)
class DSSPConfig:
    staleness_low: int = param(3, "s_L: the bound every worker may use without asking", ge=0)
    staleness_high: int = param(15, "s_U: the most the controller may let the fastest run ahead", ge=0)

    def check(self) -> None:
        if self.staleness_high < self.staleness_low:
            raise InputError("staleness_high", f"must be >= staleness_low ({self.staleness_low}), got {self.staleness_high}")


def controller(a_p: float, i_p: float, a_slow: float, i_slow: float, r_max: int) -> int:
    """Extra iterations r* for the fastest worker: align its end times with the slowest's."""
    r = np.arange(r_max + 1)
    sim_p = a_p + r * i_p
    sim_slow = a_slow + i_slow + r * i_slow
    gap = np.abs(sim_slow[None, :] - sim_p[:, None])  # [r, k]
    return int(np.argmin(gap.min(axis=1)))


@register_scheme("dssp", DSSPConfig)
class DSSP:
    """Dynamic SSP: a bound s_L, stretched up to s_U for the fastest when it pays."""

    name: ClassVar[str]
    synchronous: ClassVar[bool] = False
    driver: ClassVar[str] = "async"

    def __init__(self, config: DSSPConfig, ctx: SchemeContext) -> None:
        self.s_low = config.staleness_low
        self.r_max = config.staleness_high - config.staleness_low
        n = ctx.workers
        self._batches = even_split(ctx.global_batch, n)
        check_even_split(self._batches, ctx, self.name)
        self.credit = [0] * n
        self.held = [False] * n
        self.pushes: list[list[float]] = [[] for _ in range(n)]
        self.grants = 0
        self.granted_total = 0

    def batch(self, worker: int) -> int:
        return self._batches[worker]

    def on_push(self, worker: int, time_s: float, clocks: Sequence[int]) -> None:
        self.pushes[worker] = self.pushes[worker][-1:] + [time_s]  # the last two push times
        slowest = slowest_worker(clocks)
        lead = clocks[worker] - clocks[slowest]
        if lead <= self.s_low:
            self.credit[worker] = 0
        elif lead > self.s_low + self.credit[worker] and clocks[worker] == fastest_clock(clocks):
            self.credit[worker] = self._grant(worker, slowest)
        self.held[worker] = lead > self.s_low + self.credit[worker]

    def _grant(self, p: int, slow: int) -> int:
        if len(self.pushes[p]) < 2 or len(self.pushes[slow]) < 2:
            return 0
        (a0, a_p), (b0, a_s) = self.pushes[p], self.pushes[slow]
        r = controller(a_p, a_p - a0, a_s, a_s - b0, self.r_max)
        if r > 0:
            self.grants += 1
            self.granted_total += r
        return r

    def may_start(self, worker: int, clocks: Sequence[int]) -> bool:
        return not self.held[worker] or clocks[worker] - slowest_clock(clocks) <= self.s_low

    def gate_key(self, clocks: Sequence[int]) -> int:
        """A blocked worker's ``held`` flag changes only at its own push: the slowest clock decides."""
        return slowest_clock(clocks)

    def diagnostics(self) -> dict[str, object]:
        return {"controller_grants": self.grants, "extra_iterations_granted": self.granted_total}
