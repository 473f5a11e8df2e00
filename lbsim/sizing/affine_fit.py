"""Online fit of a worker's compute time ``t(x) = a + b x`` (LB-BSP's ``gpu_model`` variant).

Ridge regression on the most recent ``history`` observations ``(x, t)``, each weighted by
``decay ** age`` so the fit follows contention, pulled towards a prior ``(a0, b0)`` (the
catalog's ``t0`` and ``1 / samples_per_s``, scaled to the observed level) with a small ridge
strength ``prior_weight`` (default 0.01, in units of observations of a normalised batch): once
the batches vary the data decide the shape; with no batch variation yet the data only fix the
level, the prior supplies the shape and the fit becomes the prior curve scaled to the observed
level — the right answer when the worker is uniformly slowed.
"""

from __future__ import annotations

from collections import deque

import numpy as np


class AffineFit:
    def __init__(self, a0: float, b0: float, *, history: int = 20, decay: float = 0.9, prior_weight: float = 0.01) -> None:
        self.a0, self.b0 = a0, b0
        self.decay = decay
        self.prior_weight = prior_weight
        self.points: deque[tuple[float, float]] = deque(maxlen=history)

    def observe(self, batch: int, time_s: float) -> None:
        self.points.append((float(batch), float(time_s)))

    def coefficients(self) -> tuple[float, float]:
        """(a, b) with a >= 0 and b > 0."""
        if not self.points:
            return self.a0, self.b0
        pts = np.array(self.points)
        x, t = pts[:, 0], pts[:, 1]
        w = self.decay ** np.arange(len(pts))[::-1]
        # Level from the data: the prior curve scaled to the weighted observed times.
        nominal = self.a0 + self.b0 * x
        scale = float(np.sum(w * t) / np.sum(w * nominal))
        pa, pb = self.a0 * scale, self.b0 * scale
        lam = self.prior_weight
        # Weighted least squares with ridge towards the scaled prior, on centred batches.
        xs = x / max(1.0, float(np.max(x)))
        A = np.array([[np.sum(w) + lam, np.sum(w * xs)], [np.sum(w * xs), np.sum(w * xs * xs) + lam]])
        xmax = max(1.0, float(np.max(x)))
        rhs = np.array([np.sum(w * t) + lam * pa, np.sum(w * xs * t) + lam * pb * xmax])
        a, bs = np.linalg.solve(A, rhs)
        b = bs / xmax
        if not (np.isfinite(a) and np.isfinite(b)) or b <= 0:
            return pa, pb
        return max(0.0, float(a)), float(b)
