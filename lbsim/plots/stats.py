"""Interval estimates for the figures, each inside the range its quantity can take.

Three or more seeds are needed for an interval: with one or two, a figure shows each seed's
value and no interval (a 95 % t-interval from two values is ``mean ± 12.7 · s / √2``, wider than
the data and, for a positive quantity, often reaching below zero).

* A non-negative quantity (throughput, a time): the mean and its 95 % percentile **bootstrap**
  interval (the 2.5 % and 97.5 % quantiles of the means of ``B`` resamples with replacement,
  a fixed seed so figures are reproducible). Every resampled mean lies between the smallest and
  the largest value, so the interval never leaves the quantity's range. With few seeds it is
  narrower than the t-interval (its coverage is below 95 % for n < ~10): read it as the spread
  of the seeds' mean, not as a guarantee.
* A ratio (a speedup): the geometric mean ``exp(mean(log r))`` and the 95 % Student-t interval
  on the log scale, ``exp(mean(log r) ± t(0.975, n-1) · s_log / √n)``: always positive, and
  symmetric in the sense that matters for ratios (2x and 0.5x are equally far from 1x).

The t quantiles for 1..30 degrees of freedom are tabulated (to 3 decimals); beyond, the
Cornish-Fisher expansion ``t ≈ z + (z³ + z) / (4 df)`` (z = 1.95996) is within 0.001.
Pure numpy: no matplotlib, no scipy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
_Z975 = 1.959964
MIN_SEEDS = 3  # fewer values: no interval, the values themselves
BOOTSTRAP_RESAMPLES = 4000
BOOTSTRAP_SEED = 20_240_229


def t975(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` >= 1 degrees of freedom."""
    if df < 1:
        raise ValueError("df must be >= 1")
    if df <= len(_T975):
        return _T975[df - 1]
    return _Z975 + (_Z975**3 + _Z975) / (4 * df)


def mean_ci95(values: Sequence[float]) -> tuple[float, float]:
    """(mean, half-width of the 95% t-interval); half-width 0 for fewer than two values, NaN mean for none."""
    a = np.asarray(values, dtype=float)
    if len(a) == 0:
        return float("nan"), 0.0
    if len(a) == 1:
        return float(a[0]), 0.0
    return float(a.mean()), t975(len(a) - 1) * float(a.std(ddof=1)) / float(np.sqrt(len(a)))


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its 95 % interval (``lo``/``hi`` NaN: no interval, fewer than 3 values)."""

    center: float
    lo: float
    hi: float
    n: int

    @property
    def has_interval(self) -> bool:
        """Whether the estimate has an interval (too few samples give none)."""
        return not (np.isnan(self.lo) or np.isnan(self.hi))

    def errors(self) -> tuple[float, float]:
        """(below, above) distances from the center, 0 without an interval (matplotlib's ``yerr``)."""
        if not self.has_interval:
            return 0.0, 0.0
        return self.center - self.lo, self.hi - self.center


def mean_bootstrap95(values: Sequence[float], *, resamples: int = BOOTSTRAP_RESAMPLES) -> Estimate:
    """The mean and its 95 % percentile bootstrap interval (none for fewer than 3 values)."""
    a = np.asarray(values, dtype=float)
    nan = float("nan")
    if len(a) == 0:
        return Estimate(nan, nan, nan, 0)
    mean = float(a.mean())
    if len(a) < MIN_SEEDS:
        return Estimate(mean, nan, nan, len(a))
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    means = a[rng.integers(0, len(a), size=(resamples, len(a)))].mean(axis=1)
    lo, hi = np.quantile(means, [0.025, 0.975])
    return Estimate(mean, float(min(lo, mean)), float(max(hi, mean)), len(a))


def ratio_log_t95(ratios: Sequence[float]) -> Estimate:
    """The geometric mean of positive ratios and its 95 % t-interval on the log scale (none for < 3)."""
    a = np.asarray(ratios, dtype=float)
    nan = float("nan")
    if len(a) == 0:
        return Estimate(nan, nan, nan, 0)
    if (a <= 0).any():
        raise ValueError("ratios must be > 0")
    logs = np.log(a)
    center = float(np.exp(logs.mean()))
    if len(a) < MIN_SEEDS:
        return Estimate(center, nan, nan, len(a))
    half = t975(len(a) - 1) * float(logs.std(ddof=1)) / float(np.sqrt(len(a)))
    return Estimate(center, float(np.exp(logs.mean() - half)), float(np.exp(logs.mean() + half)), len(a))


def interval_note(reps: int, kind: str = "mean") -> str:
    """What a figure's error bars are, for its title."""
    if reps >= MIN_SEEDS:
        what = ("mean and 95% bootstrap interval" if kind == "mean"
                else "geometric mean and 95% t-interval on the log scale")
        return f"{what} over {reps} seeds; dots: each seed"
    if reps == 2:
        what = "the mean a bar" if kind == "mean" else "their geometric mean a marker"
        return f"2 seeds: each seed a dot, {what}; no interval from fewer than 3"
    return "one seed: no interval"
