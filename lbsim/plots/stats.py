"""Interval estimates for the figures: the mean and its 95% Student-t confidence interval.

For n values with sample standard deviation s, the interval is ``mean ± t(0.975, n-1) · s / √n``.
The quantiles for 1..30 degrees of freedom are tabulated (to 3 decimals); beyond, the
Cornish-Fisher expansion ``t ≈ z + (z³ + z) / (4 df)`` (z = 1.95996) is within 0.001.
A single value has no interval (half-width 0). Pure numpy: no matplotlib, no scipy.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
_Z975 = 1.959964


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
