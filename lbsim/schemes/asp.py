"""ASP — asynchronous parallel on a parameter server.

Rule (schemes.md): every worker pushes its gradient after each iteration; the server applies
it on arrival (one at a time); the worker pulls the latest weights and continues, never waiting
for other workers. Each update's staleness is the number of server updates between the worker's
pull and its push. Every worker takes an equal share X/n of the global batch per iteration.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from lbsim.schemes.base import SchemeContext
from lbsim.schemes.bsp import EvenShares
from lbsim.schemes.registry import register_scheme


@dataclass(frozen=True)
class ASPConfig:
    pass


@register_scheme("asp", ASPConfig)
class ASP(EvenShares):
    """Asynchronous: push, apply on arrival, pull, never wait."""

    name: ClassVar[str]
    driver: ClassVar[str] = "async"
    never_holds: ClassVar[bool] = True  # may_start is always True, on_push does nothing: no gate to ask
    fixed_batch: ClassVar[bool] = True  # batch(worker): the even share at every iteration

    def __init__(self, config: ASPConfig, ctx: SchemeContext) -> None:
        self._share_evenly(ctx)

    def on_push(self, worker: int, time_s: float, clocks: Sequence[int]) -> None:
        """ASP keeps no state about pushes."""
        pass

    def may_start(self, worker: int, clocks: Sequence[int]) -> bool:
        """ASP never holds a worker back."""
        return True

    def diagnostics(self) -> dict[str, object]:
        """Nothing to report."""
        return {}
