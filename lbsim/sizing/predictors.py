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
    """One worker's predictor: told each iteration's speed and readings, asked for the next speed."""

    def observe(self, speed: float, cpu: float, mem: float) -> None:
        """The last iteration's speed (samples / compute s) and the CPU / memory readings at its start."""

    def predict(self, cpu_now: float, mem_now: float) -> float:
        """The next iteration's speed given the readings now (NaN before any observation)."""


class LastValue:
    """``v̂ = v_last``."""

    def __init__(self) -> None:
        self.last = float("nan")

    def observe(self, speed: float, cpu: float, mem: float) -> None:
        """Keep ``speed``."""
        self.last = speed

    def predict(self, cpu_now: float, mem_now: float) -> float:
        """The last speed kept."""
        return self.last


class EMA:
    """``v̂ ← α v + (1 − α) v̂``, starting at the first speed."""

    def __init__(self, alpha: float) -> None:
        if not 0 < alpha <= 1:
            raise ValueError("alpha must be in (0, 1]")
        self.alpha = alpha
        self.value = float("nan")

    def observe(self, speed: float, cpu: float, mem: float) -> None:
        """Fold ``speed`` into the average (the first speed starts it)."""
        self.value = speed if self.value != self.value else self.alpha * speed + (1 - self.alpha) * self.value

    def predict(self, cpu_now: float, mem_now: float) -> float:
        """The average so far."""
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


class PredictorBank:
    """One predictor per worker of a set, observed and asked together (arrays in, arrays out).

    ``last`` and ``ema`` are vectorised (the same arithmetic as :class:`LastValue` / :class:`EMA`
    element by element, hence the same numbers); ``narx`` keeps one :class:`NarxPredictor` per
    worker (each with its own generator, ``rngs[j]``) and loops over them.
    """

    def __init__(self, name: str, size: int, *, ema_alpha: float, narx: NarxParams,
                 rngs: list[np.random.Generator] | None = None) -> None:
        if name not in ("last", "ema", "narx", "oracle"):
            raise ValueError(f"unknown predictor {name!r}; valid: last, ema, narx, oracle")
        if name == "ema" and not 0 < ema_alpha <= 1:
            raise ValueError("alpha must be in (0, 1]")
        self.name = "last" if name == "oracle" else name
        self.alpha = ema_alpha
        self.value = np.full(size, np.nan)
        self.nets: list[NarxPredictor] = []
        if self.name == "narx":
            if rngs is None or len(rngs) != size:
                raise ValueError("narx needs one generator per worker")
            self.nets = [NarxPredictor(narx, rng) for rng in rngs]

    def __len__(self) -> int:
        return len(self.value)

    def observe(self, speed: np.ndarray, cpu: np.ndarray, mem: np.ndarray) -> None:
        """Every worker's last speed and readings, element by element as the per-worker predictors would."""
        if self.name == "last":
            self.value = np.array(speed, dtype=np.float64)
        elif self.name == "ema":
            v = self.value
            self.value = np.where(v != v, speed, self.alpha * speed + (1 - self.alpha) * v)
        else:
            for p, s, c, m in zip(self.nets, speed.tolist(), cpu.tolist(), mem.tolist(), strict=True):
                p.observe(s, c, m)

    def predict(self, cpu_now: np.ndarray, mem_now: np.ndarray) -> np.ndarray:
        """Every worker's next speed given its readings now."""
        if self.name != "narx":
            return self.value.copy()
        return np.array([p.predict(c, m) for p, c, m in zip(self.nets, cpu_now.tolist(), mem_now.tolist(), strict=True)])
