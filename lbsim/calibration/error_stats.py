"""Errors users can read: |error| quantiles, the error of ratios, and interval coverage.

With ``e = predicted / measured − 1`` per row:

* **median and p90 |e|** — half the rows err less than the median, nine in ten less than p90
  (linear interpolation between order statistics, numpy's default); beside the geomean
  ``exp(mean log(1 + |e|)) − 1`` (:func:`geomean_abs`), which weighs a 10 % miss either way alike
  and lets no single wild row dominate as an arithmetic mean would.
* **Error of ratios** — "how much faster is placement p than q?" needs the ratio right, not each
  time: for every pair of rows of different placements at the same per-GPU batch (both in the
  selected set: e.g. held out), with ``p`` the slower one as measured, the measured speedup is
  ``m_p / m_q ≥ 1``, the predicted one ``ŷ_p / ŷ_q``, and the ratio error
  ``(ŷ_p / ŷ_q) / (m_p / m_q) − 1 = (1 + e_p) / (1 + e_q) − 1``. A common bias of the two cancels.
  Its median and p90 |·| over all such pairs are reported.
* **Coverage** — the share of rows whose measured time lies in ``[predicted_low, predicted_high]``
  (:mod:`lbsim.calibration.interval`), against the interval's nominal level.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def geomean_abs(errors: Sequence[float] | np.ndarray) -> float:
    """Geometric-mean absolute relative error ``exp(mean(log(1 + |e|))) − 1`` (NaN for none)."""
    e = np.abs(np.asarray(errors, dtype=np.float64))
    return float(np.exp(np.mean(np.log1p(e))) - 1.0) if e.size else float("nan")


def abs_quantile(errors: Sequence[float] | np.ndarray, q: float) -> float:
    """The ``q`` quantile of ``|e|`` (NaN for none)."""
    e = np.abs(np.asarray(errors, dtype=np.float64))
    return float(np.quantile(e, q)) if e.size else float("nan")


def abs_error_stats(errors: Sequence[float] | np.ndarray) -> tuple[float, float, float]:
    """``(median, p90, geomean)`` of ``|e|``, the three figures every error table reports (NaNs for none)."""
    return abs_quantile(errors, 0.5), abs_quantile(errors, 0.9), geomean_abs(errors)


def ratio_errors(labels: Sequence[str], batches: Sequence[int], measured: np.ndarray, errors: np.ndarray,
                 mask: np.ndarray) -> np.ndarray:
    """Ratio errors over every pair of rows of different placements at one batch, both in ``mask`` (docstring)."""
    lab = np.asarray(labels)
    bat = np.asarray(batches)
    out = []
    for b in sorted(set(bat[mask].tolist())):
        sel = np.flatnonzero(mask & (bat == b))
        if sel.size < 2:
            continue
        m = measured[sel]
        d = np.log1p(errors[sel])
        i, j = np.triu_indices(sel.size, k=1)
        keep = lab[sel][i] != lab[sel][j]
        i, j = i[keep], j[keep]
        slow_first = m[i] >= m[j]
        num = np.where(slow_first, d[i], d[j])
        den = np.where(slow_first, d[j], d[i])
        out.append(np.expm1(num - den))
    return np.concatenate(out) if out else np.empty(0)


def coverage(measured: np.ndarray, low: np.ndarray, high: np.ndarray) -> float:
    """Share of rows with ``low <= measured <= high`` among rows that have an interval (NaN bounds: none)."""
    ok = np.isfinite(low) & np.isfinite(high)
    if not ok.any():
        return float("nan")
    return float(np.mean((low[ok] <= measured[ok]) & (measured[ok] <= high[ok])))
