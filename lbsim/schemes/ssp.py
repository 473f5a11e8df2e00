"""SSP — stale synchronous parallel (Ho et al., NIPS 2013), staleness bound s.

Rule (schemes.md): a worker that has completed c iterations (its clock: pushes applied) may
start iteration c+1 only if ``c - min_j c_j <= s``; otherwise it blocks until the slowest catches
up. s = 0 gives BSP's schedule, s = infinity is ASP. Read policy: pushes are applied on arrival
and the worker pulls the freshest weights when it passes the gate. Equal batches X/n.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from lbsim.fields import param
from lbsim.schemes.base import SchemeContext, slowest_clock
from lbsim.schemes.bsp import EvenShares
from lbsim.schemes.registry import register_scheme


@dataclass(frozen=True)
class SSPConfig:
    staleness: int = param(3, "bound s: a worker may be at most s clocks ahead of the slowest", ge=0)


@register_scheme("ssp", SSPConfig)
class SSP(EvenShares):
    """Stale synchronous: run ahead of the slowest by at most `staleness` clocks."""

    name: ClassVar[str]
    driver: ClassVar[str] = "async"
    fixed_batch: ClassVar[bool] = True  # batch(worker): the even share at every iteration

    def __init__(self, config: SSPConfig, ctx: SchemeContext) -> None:
        self.staleness = config.staleness
        self._share_evenly(ctx)

    def on_push(self, worker: int, time_s: float, clocks: Sequence[int]) -> None:
        """SSP keeps no state about pushes (the clocks are enough)."""
        pass

    def may_start(self, worker: int, clocks: Sequence[int]) -> bool:
        """SSP's gate: a worker at clock c may start its next iteration iff ``c - min_j c_j <= s``."""
        return clocks[worker] - slowest_clock(clocks) <= self.staleness

    def gate_key(self, clocks: Sequence[int]) -> int:
        """A blocked worker's answer depends on the slowest clock only."""
        return slowest_clock(clocks)

    def diagnostics(self) -> dict[str, object]:
        """Nothing to report."""
        return {}
