"""Slowdown sources: piecewise-constant factors over time, or per-iteration multipliers.

A *time source* answers ``segment(t) -> (factor, next_change_s)``: the slowdown factor in force
at time ``t`` (1 = full speed, 2 = twice as slow) and when it next changes (``inf`` if never).
Sources that are random (Markov on/off) generate their future lazily from their own RNG stream,
so the answer for a given ``t`` never depends on the order of queries.

An *iteration source* answers ``multiplier(iteration)``: a factor on one worker iteration's
compute time (the Alibaba PAI mini-batch replay).
"""

from __future__ import annotations

import bisect
import math
from typing import Protocol

import numpy as np

INF = math.inf


class TimeSource(Protocol):
    def segment(self, t: float) -> tuple[float, float]:
        """``(factor, next change)`` at time ``t``: the factor holds from ``t`` until the next change."""


class StepSource:
    """Factor ``factors[i]`` from ``times[i]`` until ``times[i+1]``; 1.0 before ``times[0]``."""

    def __init__(self, times: list[float], factors: list[float]) -> None:
        if len(times) != len(factors) or any(b <= a for a, b in zip(times, times[1:], strict=False)):
            raise ValueError("times must be strictly increasing and match factors")
        self.times = list(times)
        self.factors = list(factors)

    def segment(self, t: float) -> tuple[float, float]:
        """``(factor, next change)`` at ``t``: the step in force and when the next one starts."""
        i = bisect.bisect_right(self.times, t) - 1
        factor = self.factors[i] if i >= 0 else 1.0
        nxt = self.times[i + 1] if i + 1 < len(self.times) else INF
        return factor, nxt


def window(start_s: float, end_s: float | None, factor: float) -> StepSource:
    """``factor`` between ``start_s`` and ``end_s`` (forever if None), 1.0 elsewhere."""
    if end_s is None:
        return StepSource([start_s], [factor])
    return StepSource([start_s, end_s], [factor, 1.0])


class MarkovSource(StepSource):
    """On/off interference: exponential off/on periods; each on period draws a uniform slowdown."""

    def __init__(
        self,
        rng: np.random.Generator,
        *,
        mean_off_s: float,
        mean_on_s: float,
        slowdown_min: float,
        slowdown_max: float,
        start_on: bool = False,
    ) -> None:
        super().__init__([], [])
        self._rng = rng
        self._means = (mean_off_s, mean_on_s)
        self._range = (slowdown_min, slowdown_max)
        self._on = start_on
        self._horizon = 0.0
        self._push_period()

    def _push_period(self) -> None:
        on = self._on
        factor = float(self._rng.uniform(*self._range)) if on else 1.0
        self.times.append(self._horizon)
        self.factors.append(factor)
        self._horizon += float(self._rng.exponential(self._means[1] if on else self._means[0]))
        self._on = not on

    def segment(self, t: float) -> tuple[float, float]:
        """``(factor, next change)`` at ``t``, drawing the chain's periods up to ``t`` on demand."""
        while self._horizon <= t:
            self._push_period()
        i = bisect.bisect_right(self.times, t) - 1
        nxt = self.times[i + 1] if i + 1 < len(self.times) else self._horizon
        return self.factors[i], nxt


class PeriodicSeries:
    """A series of factors, one per bucket of ``bucket_s`` seconds, starting at ``offset`` and wrapping."""

    def __init__(self, factors: np.ndarray, bucket_s: float, offset: int = 0) -> None:
        self.factors = [float(f) for f in factors]
        self.bucket_s = bucket_s
        self.offset = offset

    def segment(self, t: float) -> tuple[float, float]:
        """``(factor, next change)`` at ``t``: the bucket ``t`` falls in and the bucket's end."""
        k = int(t // self.bucket_s)
        if (k + 1) * self.bucket_s <= t:  # t // b can fall one short at a boundary the engine computed as (k+1) * b
            k += 1
        return self.factors[(self.offset + k) % len(self.factors)], (k + 1) * self.bucket_s


class IterationSeries:
    """Per-iteration compute multipliers, wrapping around when the run outlasts the trace."""

    def __init__(self, multipliers: np.ndarray) -> None:
        self.multipliers = [float(m) for m in multipliers]

    def multiplier(self, iteration: int) -> float:
        """The multiplier of iteration ``iteration`` (the series repeats)."""
        return self.multipliers[iteration % len(self.multipliers)]
