"""The single-GPU compute curve t(b), fitted from the single-GPU rows (placement ``1``).

Affine where it fits: ``t(b) = t0 + b / v`` by least squares on relative error (weights ``1/t``,
so every batch counts alike); kept when every single-GPU row is within ``affine_tolerance``
(default 1.5 %, half the 3 % the single-GPU rows must meet) and ``t0 >= 0``, ``v > 0``.
Otherwise (overhead-bound or non-monotone curves: NCF, YOLOv3) the table of measured means,
one point per batch. Either is written as the scenario key ``compute_curve`` (piecewise-linear,
extrapolated linearly beyond its ends): an affine fit as its two end points, which the engines
extrapolate to the same line (never below 0). :meth:`ComputeCurve.__call__` evaluates exactly that rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

AFFINE_TOLERANCE = 0.015


@dataclass(frozen=True)
class ComputeCurve:
    """Points ``(batch, step_s)``, batches increasing; ``affine`` when the points lie on one line."""

    points: tuple[tuple[float, float], ...]
    affine: bool
    t0_s: float
    samples_per_s: float

    def __call__(self, batch: float | np.ndarray) -> np.ndarray:
        b = np.asarray(batch, dtype=np.float64)
        xs = np.array([p[0] for p in self.points])
        ys = np.array([p[1] for p in self.points])
        out = np.interp(b, xs, ys)
        lo_slope = (ys[1] - ys[0]) / (xs[1] - xs[0])
        hi_slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
        out = np.where(b < xs[0], ys[0] + (b - xs[0]) * lo_slope, out)
        return np.maximum(0.0, np.where(b > xs[-1], ys[-1] + (b - xs[-1]) * hi_slope, out))


def affine_fit(batches: np.ndarray, times: np.ndarray) -> tuple[float, float]:
    """``(t0, 1/v)`` minimising the squared relative error of ``t0 + b/v``."""
    w = 1.0 / times
    a = np.column_stack([w, batches * w])
    coef, *_ = np.linalg.lstsq(a, np.ones_like(times), rcond=None)
    return float(coef[0]), float(coef[1])


def fit_compute_curve(samples: Sequence[tuple[int, float]], affine_tolerance: float = AFFINE_TOLERANCE) -> ComputeCurve:
    """The curve through single-GPU ``(batch, step_s)`` samples (module docstring); needs >= 2 batches."""
    by_batch: dict[int, list[float]] = {}
    for b, t in samples:
        by_batch.setdefault(int(b), []).append(float(t))
    batches = np.array(sorted(by_batch), dtype=np.float64)
    times = np.array([float(np.mean(by_batch[int(b)])) for b in batches])
    if len(batches) < 2:
        raise ValueError("need single-GPU rows at two or more batch sizes")
    t0, inv_v = affine_fit(batches, times)
    if t0 >= 0 and inv_v > 0:
        fitted = t0 + batches * inv_v
        if float(np.max(np.abs(fitted / times - 1.0))) <= affine_tolerance:
            ends = ((float(batches[0]), float(fitted[0])), (float(batches[-1]), float(fitted[-1])))
            return ComputeCurve(ends, True, t0, 1.0 / inv_v)
    # table; the affine figures still size the schemes (t0_s / samples_per_s), clipped to be valid
    t0 = max(t0, 0.0)
    v = 1.0 / inv_v if inv_v > 0 else float(batches[-1] / times[-1])
    return ComputeCurve(tuple(zip(batches.tolist(), times.tolist(), strict=True)), False, t0, v)
