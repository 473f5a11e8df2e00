"""Interval estimates that never leave the range a quantity can physically take.

Pure functions over plain sequences of numbers (numpy and scipy only), for any front end that
reports a figure over seeds or replays (``lbsim advise``, figures, what-if replays). Each returns
an :class:`Estimate`: the point value, the interval ``[low, high]`` (``None`` when there is none),
how many values it rests on, and a one-line ``method``.

Rules (95 % by default, ``level`` to change it):

* **No interval from too few values.** Fewer than :data:`MIN_VALUES` (3) values give the point
  value and no interval: a t-interval from two values is ``mean ± 12.7 s / √2``, wider than the
  data, and says nothing. With one seed the report says there is no interval.
* **Identical values** (a run with no random element: scheduled contention, no jitter) give a
  zero-width interval with the method saying so, never a spread that is not there.
* **A bounded mean** (``lower <= x <= upper``: a time share in ``[0, 1]``, a throughput in
  ``[0, ideal]``): the Student-t interval ``mean ± t(1 - α/2, n - 1) · s / √n`` intersected with
  ``[lower, upper]``. The true mean lies in the range whatever the data, so the intersection
  covers it at least as often as the t-interval does: clipping loses no coverage.
* **A ratio** (a speedup ``r_i = x_i / y_i`` of paired runs, > 0): the geometric mean
  ``exp(mean(log r))`` and the t-interval on the log scale, ``exp(mean(log r) ± t · s_log / √n)``:
  always > 0, and 2x and 0.5x are equally far from 1x. Intersected with ``[lower, upper]`` too.
* **A mean over strata** (the average over the varied unknowns of each one's mean over seeds,
  every stratum weighted equally): the percentile bootstrap, resampling the values within each
  stratum (a fixed seed: the same data give the same interval). Every resampled mean lies between
  the smallest and the largest value, so the interval never leaves the range of the data.
* **A probability** (k of n runs): the Wilson score interval, always inside ``[0, 1]`` and not
  degenerate at k = 0 or k = n (Wilson 1927; Brown, Cai & DasGupta 2001 recommend it over the
  Wald interval for small n).
* **Quantiles** (P50, P90, P99 of iteration times): numpy's linear-interpolation percentiles.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

MIN_VALUES = 3  # fewer values: a point value and no interval
LEVEL = 0.95
BOOTSTRAP_RESAMPLES = 4000
BOOTSTRAP_SEED = 20_240_229  # a fixed stream: the same values give the same interval


@dataclass(frozen=True)
class Estimate:
    """A point value with its interval (``low``/``high`` ``None``: no interval) over ``n`` values."""

    value: float
    low: float | None
    high: float | None
    n: int
    method: str

    @property
    def has_interval(self) -> bool:
        """Whether the estimate has both ends of an interval."""
        return self.low is not None and self.high is not None

    def as_dict(self) -> dict[str, object]:
        """The estimate as plain data."""
        return {"value": self.value, "low": self.low, "high": self.high, "n": self.n, "method": self.method}

    def map(self, fn: Callable[[float], float]) -> Estimate:
        """The estimate of ``fn(x)`` for a monotone ``fn`` (a decreasing one swaps the ends: ``N / throughput``)."""
        v = float(fn(self.value))
        if self.low is None or self.high is None:
            return Estimate(v, None, None, self.n, self.method)
        a, b = float(fn(self.low)), float(fn(self.high))
        return Estimate(v, min(a, b), max(a, b), self.n, self.method)


def _clean(values: Sequence[float] | np.ndarray) -> np.ndarray:
    a = np.asarray(values, dtype=float)
    if a.ndim != 1:
        raise ValueError("values must be one-dimensional")
    if not np.all(np.isfinite(a)):
        raise ValueError("values must be finite")
    return a


def t_quantile(level: float, df: int) -> float:
    """The ``(1 + level) / 2`` quantile of Student's t with ``df`` >= 1 degrees of freedom."""
    if df < 1:
        raise ValueError("df must be >= 1")
    from scipy.special import stdtrit  # the t quantile scipy.stats.t.ppf computes (scipy.stats: ~2 s to import)

    return float(stdtrit(df, (1.0 + level) / 2.0))


def _clip(x: float, lower: float, upper: float) -> float:
    return min(max(x, lower), upper)


def _few(a: np.ndarray, value: float) -> Estimate:
    what = "no values" if len(a) == 0 else f"no interval from {len(a)} value{'s' if len(a) != 1 else ''} (needs {MIN_VALUES})"
    return Estimate(value, None, None, len(a), what)


def bounded_mean(values: Sequence[float], *, lower: float = -math.inf, upper: float = math.inf,
                 level: float = LEVEL) -> Estimate:
    """The mean and its t-interval intersected with ``[lower, upper]`` (every value must lie in it)."""
    a = _clean(values)
    if len(a) and (a.min() < lower or a.max() > upper):
        raise ValueError(f"values outside [{lower}, {upper}]")
    if len(a) == 0:
        return _few(a, math.nan)
    mean = _clip(float(a.mean()), lower, upper)
    if len(a) < MIN_VALUES:
        return _few(a, mean)
    if np.all(a == a[0]):
        return Estimate(mean, mean, mean, len(a), f"all {len(a)} values equal (no random element)")
    half = t_quantile(level, len(a) - 1) * float(a.std(ddof=1)) / math.sqrt(len(a))
    return Estimate(mean, _clip(mean - half, lower, upper), _clip(mean + half, lower, upper), len(a),
                    f"{level:.0%} t-interval over {len(a)} values, within [{lower:g}, {upper:g}]")


def ratio_mean(ratios: Sequence[float], *, lower: float = 0.0, upper: float = math.inf,
               level: float = LEVEL) -> Estimate:
    """The geometric mean of positive ratios and its t-interval on the log scale, within ``[lower, upper]``."""
    a = _clean(ratios)
    if len(a) and a.min() <= 0:
        raise ValueError("ratios must be > 0")
    if len(a) == 0:
        return _few(a, math.nan)
    logs = np.log(a)
    geo = _clip(float(math.exp(logs.mean())), lower, upper)
    if len(a) < MIN_VALUES:
        return _few(a, geo)
    if np.all(a == a[0]):
        return Estimate(geo, geo, geo, len(a), f"all {len(a)} ratios equal (no random element)")
    half = t_quantile(level, len(a) - 1) * float(logs.std(ddof=1)) / math.sqrt(len(a))
    lo, hi = math.exp(float(logs.mean()) - half), math.exp(float(logs.mean()) + half)
    return Estimate(geo, _clip(lo, lower, upper), _clip(hi, lower, upper), len(a),
                    f"geometric mean, {level:.0%} t-interval on the log scale over {len(a)} ratios")


def strata_mean(strata: Sequence[Sequence[float]], *, level: float = LEVEL, ratio: bool = False,
                resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> Estimate:
    """The equal-weight average over strata of each stratum's mean, with a percentile bootstrap
    interval that resamples within each stratum (``ratio``: geometric means, averaged on the log scale).

    No interval when a stratum has fewer than :data:`MIN_VALUES` values.
    """
    arrays = [_clean(s) for s in strata]
    if not arrays or any(len(a) == 0 for a in arrays):
        return Estimate(math.nan, None, None, sum(len(a) for a in arrays), "no values")
    if ratio:
        if any(a.min() <= 0 for a in arrays):
            raise ValueError("ratios must be > 0")
        arrays = [np.log(a) for a in arrays]
    def back(x: float) -> float:
        return float(np.exp(x)) if ratio else float(x)

    n = sum(len(a) for a in arrays)
    value = float(back(np.mean([a.mean() for a in arrays])))
    smallest = min(len(a) for a in arrays)
    if smallest < MIN_VALUES:
        return Estimate(value, None, None, n, f"no interval: a stratum has {smallest} value{'s' if smallest != 1 else ''} (needs {MIN_VALUES})")
    if all(np.all(a == a[0]) for a in arrays):
        return Estimate(value, value, value, n, f"all values equal within each of {len(arrays)} strata (no random element)")
    rng = np.random.default_rng(seed)
    means = np.zeros(resamples)
    for a in arrays:
        idx = rng.integers(0, len(a), size=(resamples, len(a)))
        means += a[idx].mean(axis=1)
    means /= len(arrays)
    alpha = (1.0 - level) / 2.0
    lo, hi = (float(back(q)) for q in np.quantile(means, [alpha, 1.0 - alpha]))
    lo, hi = min(lo, value), max(hi, value)  # a skewed resampling can put the point just outside
    kind = "geometric means, " if ratio else ""
    return Estimate(value, lo, hi, n, f"{kind}{level:.0%} percentile bootstrap over {len(arrays)} strata "
                                      f"({resamples} resamples within each)")


def wilson(k: int, n: int, *, level: float = LEVEL) -> Estimate:
    """The share ``k / n`` and its Wilson score interval (inside ``[0, 1]``)."""
    if n < 0 or not 0 <= k <= n:
        raise ValueError("need 0 <= k <= n")
    if n == 0:
        return Estimate(math.nan, None, None, 0, "no values")
    p = k / n
    if n < MIN_VALUES:
        return Estimate(p, None, None, n, f"no interval from {n} value{'s' if n != 1 else ''} (needs {MIN_VALUES})")
    from scipy.special import ndtri  # the standard normal quantile, as scipy.stats.norm.ppf

    z = float(ndtri((1.0 + level) / 2.0))
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    low = 0.0 if k == 0 else min(_clip(centre - half, 0.0, 1.0), p)  # exact ends: rounding must not cut p off
    high = 1.0 if k == n else max(_clip(centre + half, 0.0, 1.0), p)
    return Estimate(p, low, high, n,
                    f"{level:.0%} Wilson score interval over {n} runs")


def exceedance(ratios: Sequence[float], threshold: float, *, level: float = LEVEL) -> Estimate:
    """The probability that a ratio exceeds ``threshold`` (share of values above it, Wilson interval)."""
    a = _clean(ratios)
    return wilson(int(np.count_nonzero(a > threshold)), len(a), level=level)


def quantiles(values: Sequence[float] | np.ndarray, qs: Sequence[float] = (50, 90, 99)) -> dict[str, float]:
    """``{"p50": .., "p90": .., "p99": ..}``: percentiles with linear interpolation (NaN for no values)."""
    a = _clean(values)
    if len(a) == 0:
        return {f"p{q:g}": math.nan for q in qs}
    return {f"p{q:g}": float(v) for q, v in zip(qs, np.percentile(a, list(qs)), strict=True)}
