"""Gradient aggregation rules for synchronous updates — pure numpy.

Inputs: ``grads`` of shape ``(n, d)``, row i = worker i's *mean* gradient over its batch of
``batches[i]`` samples.

* ``mean`` — the batch-weighted mean ``g = sum_i (x_i / X) g_i`` (schemes.md, "Aggregation"):
  exactly the mean gradient over the concatenated X samples. Tolerates no Byzantine worker.
* ``median`` — coordinate-wise median of the n rows (unweighted: one vote per worker). Any
  coordinate stays within the range of the honest values while fewer than half the rows are
  Byzantine: tolerance ``f`` needs ``2f < n``.
* ``trimmed_mean`` — coordinate-wise: sort the n values, drop the ``f`` largest and ``f``
  smallest, average the remaining ``n - 2f`` (unweighted). Tolerates ``f`` Byzantine rows;
  needs ``2f < n``. ``f = 0`` is the plain (unweighted) mean over workers.

The robust rules are unweighted on purpose (our choice, used by LOFT): weighting by batch would
let one worker with a large batch outvote the rest, and the rows they are meant to dampen are
the noisy gradients of very small batches.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

Rule = Literal["mean", "median", "trimmed_mean"]
RULES: tuple[str, ...] = ("mean", "median", "trimmed_mean")


def _rows(grads: np.ndarray | Sequence[Sequence[float]]) -> np.ndarray:
    g = np.asarray(grads, dtype=np.float64)
    if g.ndim == 1:
        g = g[:, None]
    if g.ndim != 2 or g.shape[0] == 0:
        raise ValueError(f"grads must be a non-empty (n, d) array, got shape {g.shape}")
    return g


def weighted_mean(grads: np.ndarray | Sequence[Sequence[float]], batches: Sequence[float] | np.ndarray) -> np.ndarray:
    """``sum_i (x_i / X) g_i``: the mean gradient over the concatenated batches."""
    g = _rows(grads)
    x = np.asarray(batches, dtype=np.float64)
    if x.shape != (g.shape[0],) or np.any(x < 0) or x.sum() <= 0:
        raise ValueError(f"batches must be n = {g.shape[0]} non-negative sizes with a positive sum, got {x.tolist()}")
    return (x / x.sum()) @ g


def coordinate_median(grads: np.ndarray | Sequence[Sequence[float]]) -> np.ndarray:
    """The median of every coordinate over the n rows (mean of the two middle values for even n)."""
    return np.median(_rows(grads), axis=0)


def trimmed_mean(grads: np.ndarray | Sequence[Sequence[float]], f: int) -> np.ndarray:
    """Per coordinate, the mean after dropping the ``f`` largest and ``f`` smallest values."""
    g = _rows(grads)
    check_tolerance("trimmed_mean", g.shape[0], f)
    s = np.sort(g, axis=0)
    return s[f : g.shape[0] - f].mean(axis=0)


def check_tolerance(rule: str, n: int, f: int) -> None:
    """Raise ValueError unless ``rule`` can tolerate ``f`` Byzantine rows out of ``n``."""
    if rule not in RULES:
        raise ValueError(f"unknown aggregation rule {rule!r}; valid: {', '.join(RULES)}")
    if f < 0:
        raise ValueError(f"tolerance f must be >= 0, got {f}")
    if rule == "mean" and f > 0:
        raise ValueError(f"the mean tolerates no Byzantine contribution (f = 0), got f = {f}; use median or trimmed_mean")
    if rule != "mean" and not 2 * f < n:
        raise ValueError(f"{rule} with n = {n} contributions tolerates f < n/2 (2f < n), got f = {f}")


def aggregate(rule: str, grads: np.ndarray | Sequence[Sequence[float]], batches: Sequence[float] | np.ndarray, f: int = 0) -> np.ndarray:
    """Apply ``rule`` (``mean``, ``median`` or ``trimmed_mean``) with tolerance ``f``."""
    g = _rows(grads)
    check_tolerance(rule, g.shape[0], f)
    if rule == "mean":
        return weighted_mean(g, batches)
    if rule == "median":
        return coordinate_median(g)
    return trimmed_mean(g, f)
