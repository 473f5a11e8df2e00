"""BSP — bulk synchronous parallel, optionally with backup workers.

Rule (schemes.md; Chen et al. 2016, "Revisiting Distributed Synchronous SGD", arXiv 1604.00981,
for backup workers): every worker takes an equal share X/n of the global batch; a barrier closes
every round; one global update is made from the first ``n - backup_workers`` gradients and the
rest are dropped; all workers start the next round from identical weights.

Our choice where the paper is silent: a dropped worker abandons its in-flight iteration when the
update is made (its work is recorded with ``dropped = true``) and starts the next round with the
others. Backup workers need a parameter server (the scenario loader checks that).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from lbsim.errors import InputError
from lbsim.fields import param
from lbsim.schemes.base import RoundObservation, SchemeContext
from lbsim.schemes.registry import register_scheme
from lbsim.sizing.split import even_split


@dataclass(frozen=True)
class BSPConfig:
    """BSP's one setting: backup workers (the slowest ``k`` gradients of a round are dropped)."""

    backup_workers: int = param(0, "gradients dropped per round: the update uses the first n - k", ge=0)


def check_even_split(batches: tuple[int, ...], ctx: SchemeContext, scheme: str) -> None:
    """An equal split must give every worker at least one sample and fit every worker's memory cap."""
    if batches and min(batches) < 1:
        raise InputError(
            "workload.global_batch",
            f"{ctx.global_batch} samples split evenly leave worker {batches.index(min(batches))} with none: scheme "
            f"{scheme} needs a global batch of at least one sample per worker ({len(batches)})",
        )
    for i, (b, cap) in enumerate(zip(batches, ctx.max_batch, strict=False)):
        if b > cap:
            raise InputError(
                "workload.global_batch",
                f"scheme {scheme} gives every worker {b} samples, above worker {i}'s memory cap "
                f"max_batch={cap}; lower the global batch or use a sizing scheme (static, lbbsp)",
            )


class FixedSplit:
    """A synchronous scheme whose split never changes: the same batches every round, nothing to report."""

    _batches: tuple[int, ...]

    def initial_batches(self) -> tuple[int, ...]:
        """The split, fixed when the scheme was built."""
        return self._batches

    def next_batches(self, observation: RoundObservation) -> tuple[int, ...]:
        """The same split: the observations change nothing."""
        return self._batches

    def diagnostics(self) -> dict[str, object]:
        """Nothing to report."""
        return {}


class EvenShares:
    """Every worker takes an equal share of the global batch for the whole run."""

    name: ClassVar[str]
    _batches: tuple[int, ...]

    def _share_evenly(self, ctx: SchemeContext) -> None:
        self._batches = even_split(ctx.global_batch, ctx.workers)
        check_even_split(self._batches, ctx, self.name)

    def batch(self, worker: int) -> int:
        """``worker``'s batch: the even share, always."""
        return self._batches[worker]


@register_scheme("bsp", BSPConfig)
class BSP(FixedSplit):
    """Bulk synchronous: equal batches, a barrier and one update every round."""

    name: ClassVar[str]
    driver: ClassVar[str] = "sync"

    def __init__(self, config: BSPConfig, ctx: SchemeContext) -> None:
        n = ctx.workers
        if config.backup_workers >= n:
            raise InputError("scheme.backup_workers", f"must be < the number of workers ({n})")
        self.required_gradients = n - config.backup_workers
        self._batches = even_split(ctx.global_batch, n)
        check_even_split(self._batches, ctx, "bsp")
