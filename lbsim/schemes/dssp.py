"""DSSP — dynamic stale synchronous parallel (Zhao, An, Liu, Chen; ICDCS 2019).

SSP whose bound is stretched for the fastest worker by a controller (schemes-research.md §2.7).
The server counts each worker's pushes (its clock t_p) and keeps a per-worker credit r_p of
extra iterations, initially 0; ``lead = t_p − t_slowest`` after the push.

``rule: paper`` (the default; the paper's rule as written) — on a push from p:

* if ``r_p > 0``: ``r_p −= 1`` and go on (the credit is spent one per push);
* else if ``lead ≤ s_L``: go on;
* else if p is the fastest: run the controller, ``r_p ← r*``; if ``r* > 0`` go on, spending one of
  it for this push (``r_p = r* − 1``: our reading of "spent one per push");
* otherwise hold p until the slowest is back within s_L — or, if p is still the fastest, until
  the controller, asked again at each later push of the slowest (while p is held), grants
  ``r* > 0`` (then p goes on, spending one of it). Our reading: r* = 0 means "the slowest is
  about to push", and the paper lets the controller grant again whenever the fastest runs out;
  held until the slowest is back within s_L instead, a fastest worker far ahead would stall
  for many of the slowest's iterations on one unlucky alignment.

The controller grants again whenever the fastest runs out, so the fastest worker's lead can keep
growing (by up to ``r_max`` per grant): with a persistent 2x speed gap DSSP runs like ASP, which is
what the paper's Table I shows (DSSP ≈ ASP in time to accuracy, far ahead of SSP(15) and BSP).

``rule: bounded_lead`` (an option; lbsim's first reading) — the credit is a credit of *lead*: on
a push, if ``lead ≤ s_L`` go on (credit reset); else if ``lead ≤ s_L + r_p`` go on; else if p is
the fastest, ``r_p ← r*`` and go on if ``lead ≤ s_L + r_p``; otherwise hold. A worker then never
starts an iteration more than ``s_L + r_max = s_U`` clocks ahead of the slowest (the bound the
paper's regret proof uses): DSSP behaves like SSP with a bound between s_L and s_U.

Controller (both rules): with I_p and I_slow the latest push intervals of p and of the slowest
worker and A their latest push times, simulate ``Sim_p[r] = A_p + r I_p`` and
``Sim_slow[k] = A_slow + I_slow + k I_slow`` for r, k in [0, r_max] (r_max = s_U − s_L) and
return the r minimising ``|Sim_slow[k] − Sim_p[r]|`` over all (r, k) (smallest r on ties — our
choice). Until a worker has two pushes its interval is unknown and the controller grants nothing
(our choice).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from lbsim.errors import InputError
from lbsim.fields import param
from lbsim.schemes.base import SchemeContext, fastest_clock, slowest_clock, slowest_worker
from lbsim.schemes.bsp import check_even_split
from lbsim.schemes.registry import register_scheme
from lbsim.sizing.split import even_split


@dataclass(frozen=True)
class DSSPConfig:
    staleness_low: int = param(3, "s_L: the bound every worker may use without asking", ge=0)
    staleness_high: int = param(15, "s_U: r_max = s_U - s_L is the most the controller grants at once", ge=0)
    rule: Literal["paper", "bounded_lead"] = param("paper", "paper: credit spent one per push, granted again whenever the fastest runs out (its lead can grow); bounded_lead: the credit bounds the lead, never beyond s_U")

    def check(self) -> None:
        """The upper staleness bound is at least the lower one."""
        if self.staleness_high < self.staleness_low:
            raise InputError("staleness_high", f"must be >= staleness_low ({self.staleness_low}), got {self.staleness_high}")


def controller(a_p: float, i_p: float, a_slow: float, i_slow: float, r_max: int) -> int:
    """Extra iterations r* for the fastest worker: align its end times with the slowest's.

    ``r* = argmin_r min_k |Sim_slow[k] - Sim_p[r]|`` with ``Sim_p[r] = a_p + r i_p`` and
    ``Sim_slow[k] = (a_slow + i_slow) + k i_slow``, ``r, k = 0..r_max`` (the smallest r on ties).
    ``Sim_slow`` is non-decreasing in k (``i_slow >= 0``, and float addition is monotone), so the
    k nearest to ``Sim_p[r]`` is one of the two neighbours of its insertion point (bisection):
    O(r_max log r_max) float operations, each the one the (r, k) matrix would hold.
    """
    base = a_slow + i_slow
    sim_slow = [base + k * i_slow for k in range(r_max + 1)]
    if i_slow < 0.0:  # not from push times (they only grow): the full matrix, same rule
        return min(range(r_max + 1), key=lambda r: min(abs(s - (a_p + r * i_p)) for s in sim_slow))
    best_r, best = 0, math.inf
    for r in range(r_max + 1):
        sim_p = a_p + r * i_p
        k = bisect_left(sim_slow, sim_p)
        gap = sim_slow[k] - sim_p if k <= r_max else math.inf  # the nearest at or above
        if k > 0:
            below = sim_p - sim_slow[k - 1]  # the nearest below
            if below < gap:
                gap = below
        if gap < best:
            best_r, best = r, gap
    return best_r


@register_scheme("dssp", DSSPConfig)
class DSSP:
    """Dynamic SSP: a bound s_L, stretched up to s_U for the fastest when it pays."""

    name: ClassVar[str]
    driver: ClassVar[str] = "async"
    admits_at_push: ClassVar[bool] = True  # on_push returns may_start's answer for the pusher
    fixed_batch: ClassVar[bool] = True  # batch(worker): the even share at every iteration

    def __init__(self, config: DSSPConfig, ctx: SchemeContext) -> None:
        self.paper = config.rule == "paper"
        self.s_low = config.staleness_low
        self.r_max = config.staleness_high - config.staleness_low
        n = ctx.workers
        self._batches = even_split(ctx.global_batch, n)
        check_even_split(self._batches, ctx, self.name)
        self.credit = [0] * n
        self.held = [False] * n
        self.refused_at = [-1] * n  # the slowest's clock when the controller last granted p nothing
        self.latest: list[float | None] = [None] * n  # each worker's last push time
        self.previous: list[float | None] = [None] * n  # and the one before (None: fewer pushes)
        self.grants = 0
        self.granted_total = 0

    def batch(self, worker: int) -> int:
        """``worker``'s batch: the even share, always."""
        return self._batches[worker]

    def on_push(self, worker: int, time_s: float, clocks: Sequence[int]) -> bool:
        """After ``worker``'s push: record its push times and decide whether it is held at its next
        start; returns whether it may go on (what :meth:`may_start` would answer now: a worker just
        refused is still refused, as nothing it reads has changed — ``admits_at_push``)."""
        latest = self.latest
        self.previous[worker] = latest[worker]
        latest[worker] = time_s
        clock = clocks[worker]
        credit = self.credit
        if self.paper:  # go on: a credit left (spent here), within s_L, or the fastest granted by the controller
            left = credit[worker]
            if left > 0:
                credit[worker] = left - 1
                go = True
            elif clock - slowest_clock(clocks) <= self.s_low:
                go = True
            elif clock == fastest_clock(clocks):
                go = self._paper_grant(worker, slowest_worker(clocks), clocks)
            else:
                go = False
            self.held[worker] = not go
            return go
        lead = clock - slowest_clock(clocks)  # the slowest worker itself is needed only by the controller
        if lead <= self.s_low:
            credit[worker] = 0
        elif lead > self.s_low + credit[worker] and clock == fastest_clock(clocks):
            credit[worker] = self._grant(worker, slowest_worker(clocks))
        go = lead <= self.s_low + credit[worker]
        self.held[worker] = not go
        return go

    def _paper_grant(self, worker: int, slowest: int, clocks: Sequence[int]) -> bool:
        self.refused_at[worker] = clocks[slowest]
        r = self._grant(worker, slowest)
        if r > 0:
            self.credit[worker] = r - 1  # this go-ahead spends one
            return True
        return False

    def _grant(self, p: int, slow: int) -> int:
        a0, b0 = self.previous[p], self.previous[slow]
        if a0 is None or b0 is None:  # a worker with fewer than two pushes: its interval is unknown
            return 0
        a_p, a_s = self.latest[p], self.latest[slow]
        assert a_p is not None and a_s is not None  # a previous push implies a latest one
        r = controller(a_p, a_p - a0, a_s, a_s - b0, self.r_max)
        if r > 0:
            self.grants += 1
            self.granted_total += r
        return r

    def may_start(self, worker: int, clocks: Sequence[int]) -> bool:
        """Whether ``worker`` may start its next iteration: within s_L, or granted extra iterations."""
        if not self.held[worker]:
            return True
        low = slowest_clock(clocks)
        if clocks[worker] - low <= self.s_low:
            return True
        # paper: the fastest is asked again once the slowest has pushed since the controller refused it
        if self.paper and low != self.refused_at[worker] and clocks[worker] == fastest_clock(clocks):
            if self._paper_grant(worker, slowest_worker(clocks), clocks):
                self.held[worker] = False
                return True
        return False

    # A blocked worker's ``held`` flag changes only at its own push, its release (and the
    # controller's second ask) only when the slowest clock changes: the slowest clock decides.
    gate_key = staticmethod(slowest_clock)

    def diagnostics(self) -> dict[str, object]:
        """How often the controller granted extra iterations, and how many in all."""
        return {"controller_grants": self.grants, "extra_iterations_granted": self.granted_total}
