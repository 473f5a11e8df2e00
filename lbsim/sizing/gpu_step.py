"""LB-BSP's GPU rule: move samples from the straggler to the leader, window by window.

Rule (Chen et al., SoCC'20, §3.3.2 as described in schemes-research.md §1.5): every W iterations
compare each worker's mean compute time over the window; the straggler s (largest mean) gives
Δ samples to the leader ℓ (smallest mean among workers with memory headroom, i.e.
``x_ℓ + Δ <= cap_ℓ``). When a move reverses a worker's previous direction (oscillation) the step
halves and the window doubles. A dead band stops moves when the gap is small.

The paper gives none of the constants; ours, all parameters:
* ``step0`` — initial Δ; default ``max(1, X / (4 n))``: a quarter of an even share, large
  enough to converge in a few windows, small enough not to overshoot by more than one share.
* ``window`` — initial W = 5 iterations: averages out per-iteration GPU noise of a few percent.
* ``max_window`` — W stops growing at 40 iterations, so the rule still reacts to lasting changes.
* ``dead_band`` — no move while ``(τ_s − τ_ℓ) / τ_s < 5%``.
* one straggler→leader pair moves per window (the description names one pair). Known weakness
  (kept, as it is the rule): a rule that settled with its first step unhalved can, on a noisy
  window just outside the dead band, move a whole step (seen in ~2.5 % of random 4-GPU runs with
  1 % noise); the next windows undo it.
Memory headroom is checked against each worker's memory cap in samples (``max_batch``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class GpuStepRule:
    def __init__(
        self,
        batches: Sequence[int],
        caps: Sequence[int],
        *,
        step0: int,
        window: int = 5,
        max_window: int = 40,
        dead_band: float = 0.05,
        min_batch: int = 1,
    ) -> None:
        self.batches = [int(b) for b in batches]
        self.caps = [int(c) for c in caps]
        self.step = max(1, int(step0))
        self.window = window
        self.max_window = max_window
        self.dead_band = dead_band
        self.min_batch = min_batch
        self.direction = [0] * len(self.batches)  # last move: -1 gave, +1 received
        self.halvings = 0  # actual halvings (reversals at step 1 do not count)
        self._sums = np.zeros(len(self.batches))
        self._count = 0

    def observe(self, compute_s: Sequence[float]) -> tuple[int, ...]:
        """Add one iteration's compute times; returns the batches for the next iteration."""
        self._sums += np.asarray(compute_s, dtype=np.float64)
        self._count += 1
        if self._count >= self.window:
            self._decide(self._sums / self._count)
            self._sums[:] = 0.0
            self._count = 0
        return tuple(self.batches)

    def _decide(self, tau: np.ndarray) -> None:
        s = int(np.argmax(tau))
        candidates = [i for i in range(len(tau)) if i != s and self.batches[i] + 1 <= self.caps[i]]
        if not candidates or self.batches[s] <= self.min_batch:
            return
        leader = min(candidates, key=lambda i: (tau[i], i))
        if (tau[s] - tau[leader]) / tau[s] < self.dead_band:
            return
        if self.direction[s] == +1 or self.direction[leader] == -1:
            if self.step > 1:
                self.halvings += 1
            self.step = max(1, self.step // 2)
            self.window = min(self.max_window, self.window * 2)
        move = min(self.step, self.batches[s] - self.min_batch, self.caps[leader] - self.batches[leader])
        self.batches[s] -= move
        self.batches[leader] += move
        self.direction[s] = -1
        self.direction[leader] = +1
