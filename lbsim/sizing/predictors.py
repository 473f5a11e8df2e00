"""Speed predictors for LB-BSP's CPU variant: what will worker i's sample speed be next?

Every predictor is per worker, sees what a real worker can measure — the speed of its last
iteration (samples / compute seconds) and the CPU and memory availability readings (in (0, 1])
taken at that iteration's start — and is asked for the next speed given the readings now.

* ``last`` — the last measured speed.
* ``ema`` — exponential moving average of measured speeds, weight ``alpha`` on the newest.
* ``narx`` — a small nonlinear autoregressive net with exogenous inputs (:mod:`lbsim.sizing.narx`),
  trained online; it answers like ``last`` until warmed up.
* ``oracle`` — not a predictor: the engine's true next speed, passed in by the engine. An
  ablation bound, only the simulator can supply it.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from lbsim.sizing.narx import NarxParams, NarxPredictor


class SpeedPredictor(Protocol):
    def observe(self, speed: float, cpu: float, mem: float) -> None: ...

    def predict(self, cpu_now: float, mem_now: float) -> float: ...


class LastValue:
    def __init__(self) -> None:
        self.last = float("nan")

    def observe(self, speed: float, cpu: float, mem: float) -> None:
        self.last = speed

    def predict(self, cpu_now: float, mem_now: float) -> float:
        return self.last


class EMA:
    def __init__(self, alpha: float) -> None:
        if not 0 < alpha <= 1:
            raise ValueError("alpha must be in (0, 1]")
        self.alpha = alpha
        self.value = float("nan")

    def observe(self, speed: float, cpu: float, mem: float) -> None:
        self.value = speed if self.value != self.value else self.alpha * speed + (1 - self.alpha) * self.value

    def predict(self, cpu_now: float, mem_now: float) -> float:
        return self.value


def make_predictor(name: str, *, ema_alpha: float, narx: NarxParams, rng: np.random.Generator) -> SpeedPredictor:
    """A fresh per-worker predictor (``oracle`` uses ``last`` as its record-keeper)."""
    if name == "ema":
        return EMA(ema_alpha)
    if name == "narx":
        return NarxPredictor(narx, rng)
    if name in ("last", "oracle"):
        return LastValue()
    raise ValueError(f"unknown predictor {name!r}; valid: last, ema, narx, oracle")
