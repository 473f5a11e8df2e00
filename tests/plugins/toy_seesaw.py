"""A toy scheme for tests/test_toy_scheme.py: one module and one registration, nothing else.

Two halves of the workers see-saw: at update ``u`` the first half takes ``shift`` samples more
than an equal split per worker when ``u`` is even, ``shift`` fewer when it is odd (the second half
the opposite), so every round's batches are known in closed form. It runs on the existing ``sync``
driver of both engines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from lbsim.fields import param
from lbsim.schemes.base import RoundObservation, SchemeContext
from lbsim.schemes.registry import register_scheme
from lbsim.sizing.split import even_split


@dataclass(frozen=True)
class ToySeesawConfig:
    shift: int = param(4, "samples each worker of the first half gains (even updates) or loses (odd updates)", ge=0)


def seesaw(global_batch: int, n: int, shift: int, update: int) -> tuple[int, ...]:
    """Every worker's batch at ``update`` (the oracle the test checks the engines against)."""
    sign = 1 if update % 2 == 0 else -1
    base = even_split(global_batch, n)
    return tuple(b + sign * shift * (1 if i < n // 2 else -1) for i, b in enumerate(base))


@register_scheme("toy_seesaw", ToySeesawConfig)
class ToySeesaw:
    """See-saw: two halves trade a fixed number of samples every round (a test's toy)."""

    name: ClassVar[str]
    driver: ClassVar[str] = "sync"

    def __init__(self, config: ToySeesawConfig, ctx: SchemeContext) -> None:
        self.cfg, self.ctx = config, ctx
        self.required_gradients = ctx.workers
        self.rounds = 0

    def initial_batches(self) -> tuple[int, ...]:
        return seesaw(self.ctx.global_batch, self.ctx.workers, self.cfg.shift, 0)

    def next_batches(self, observation: RoundObservation) -> tuple[int, ...]:
        self.rounds += 1
        return seesaw(self.ctx.global_batch, self.ctx.workers, self.cfg.shift, observation.update + 1)

    def diagnostics(self) -> dict[str, object]:
        return {"toy_rounds": self.rounds}
