"""Static proportional sizing — the careful user's hand-tuned baseline.

Rule (schemes.md): batches proportional to each worker's nominal sample speed (the catalog's
``samples_per_s`` after inline overrides), clamped to memory caps with the remainder
re-distributed, integerised so they sum to the global batch, and fixed for the whole run. BSP's
barrier and update otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from lbsim.errors import InputError
from lbsim.fields import param
from lbsim.schemes.base import SchemeContext
from lbsim.schemes.bsp import FixedSplit
from lbsim.schemes.registry import register_scheme
from lbsim.sizing.split import InfeasibleSplit, proportional_split


@dataclass(frozen=True)
class StaticConfig:
    """Static sizing's one setting: the smallest batch a worker is given."""

    min_batch: int = param(1, "smallest batch any worker is given", ge=1)


@register_scheme("static", StaticConfig)
class Static(FixedSplit):
    """Static split: batches proportional to nominal speed, fixed for the run."""

    name: ClassVar[str]
    driver: ClassVar[str] = "sync"

    def __init__(self, config: StaticConfig, ctx: SchemeContext) -> None:
        self.required_gradients = ctx.workers
        try:
            self._batches = proportional_split(
                ctx.global_batch, ctx.samples_per_s, ctx.max_batch, min_batch=config.min_batch
            )
        except InfeasibleSplit as err:
            raise InputError("workload.global_batch", f"{err} (scheme static, min_batch {config.min_batch})") from None
