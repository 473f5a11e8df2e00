"""Prediction intervals from the fit's own residuals, and where a prediction extrapolates.

**Interval** (leave one placement out on the fit placements, the question a held-out placement
asks): for each multi-GPU fit placement ``p`` in turn, the calibration is fitted again on the other
fit placements (its all-reduce algorithm and compute-noise choice fixed to the full fit's,
everything else refitted) and predicts ``p``'s rows. Their log ratios ``r = log(measured /
predicted)`` over all folds are the out-of-placement residuals. Each fold's rows weigh ``1 /
(rows of p)`` (every left-out placement counts alike, as every held-out placement is one more
topology), and the nominal ``q`` interval of a prediction ``ŷ`` is::

    [ŷ · exp(r_lo), ŷ · exp(r_hi)]    r_lo, r_hi = the weighted (1 − q)/2 and (1 + q)/2 quantiles of r

(weighted quantiles interpolated between the rows' mid-cumulative weights). Nothing but the fit
placements' rows is read; :data:`NOMINAL` = 0.8. The interval is one multiplicative band for every
prediction of the calibration: with few fit placements (five folds) a band per placement kind
could not be estimated. A fold whose remaining placements cannot be fitted (no multi-GPU placement
left) is skipped; with fewer than two folds there is no interval.

**Extrapolation** (:class:`FitDomain`): a prediction is flagged when its placement or batch lies
outside what the fit placements' multi-GPU rows exercised:

* ``nodes`` — more nodes than any fit placement (more NIC hops, a deeper tree);
* ``gpus_per_node`` — a node with more GPUs than any fit placement *of its kind* (one node, or
  several nodes) had: on several nodes the node's NIC and intra-node link carry traffic at once,
  which a one-node fit placement never shows;
* ``batch`` — a per-GPU batch outside the fit rows' range (the overlap's hidden share scales with
  compute).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from lbsim.calibration.measured import Row
from lbsim.scenario.calibration_config import extrapolation_reasons

NOMINAL = 0.8


@dataclass(frozen=True)
class Interval:
    """A multiplicative band ``[ŷ·exp(low_log), ŷ·exp(high_log)]`` of nominal coverage ``nominal``."""

    nominal: float
    low_log: float
    high_log: float
    folds: int

    def bounds(self, predicted: float) -> tuple[float, float]:
        """``(ŷ·exp(low_log), ŷ·exp(high_log))`` for the prediction ``ŷ``."""
        return predicted * float(np.exp(self.low_log)), predicted * float(np.exp(self.high_log))

    def text(self) -> str:
        """The band in words, as ``fit.yaml`` and the run line report it."""
        return (f"{self.nominal:.0%} interval x{np.exp(self.low_log):.3f} to x{np.exp(self.high_log):.3f} of each "
                f"prediction (leave-one-placement-out residuals over {self.folds} fit placements)")


def weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The ``q`` quantile of ``values`` with ``weights``, interpolated between mid-cumulative weights."""
    order = np.argsort(values, kind="stable")
    v, w = values[order], weights[order]
    mid = (np.cumsum(w) - w / 2.0) / np.sum(w)
    return float(np.interp(q, mid, v))


def interval_from_folds(folds: Sequence[np.ndarray], nominal: float = NOMINAL) -> Interval | None:
    """The band from each fold's log residuals ``log(measured / predicted)`` (module docstring)."""
    folds = [np.asarray(f, dtype=np.float64) for f in folds if len(f)]
    if len(folds) < 2:
        return None
    r = np.concatenate(folds)
    w = np.concatenate([np.full(f.size, 1.0 / f.size) for f in folds])
    lo = weighted_quantile(r, w, (1.0 - nominal) / 2.0)
    hi = weighted_quantile(r, w, (1.0 + nominal) / 2.0)
    return Interval(nominal, lo, hi, len(folds))


FoldFit = Callable[[Sequence[tuple[int, ...]], Sequence[Row]], np.ndarray]


def leave_one_placement_out(rows: Sequence[Row], fit_placements: Sequence[tuple[int, ...]],
                            fit_and_predict: FoldFit) -> list[tuple[tuple[int, ...], np.ndarray]]:
    """``(p, log(measured / predicted))`` for each multi-GPU fit placement ``p`` predicted from the others.

    ``fit_and_predict(others, left_rows)`` fits on ``others`` and returns the left-out rows'
    predicted step times; a fold whose fit is impossible (ValueError, e.g. no multi-GPU placement
    left) is skipped.
    """
    from lbsim.errors import InputError

    out = []
    for p in fit_placements:
        if sum(p) <= 1:
            continue
        others = [q for q in fit_placements if q != p]
        if not any(sum(q) > 1 for q in others):
            continue
        left = [r for r in rows if r.placement == p]
        try:
            pred = fit_and_predict(others, left)
        except (InputError, ValueError):
            continue
        out.append((p, np.log(np.array([r.step_time_s for r in left]) / pred)))
    return out


@dataclass(frozen=True)
class FitDomain:
    """What the fit placements' multi-GPU rows exercised (module docstring, "Extrapolation")."""

    max_nodes: int
    max_gpus_one_node: int  # the largest one-node fit placement (0: none)
    max_gpus_per_node_multi: int  # the largest node of a multi-node fit placement (0: none)
    min_local_bsz: int
    max_local_bsz: int

    @classmethod
    def of(cls, rows: Sequence[Row], fit_placements: Sequence[tuple[int, ...]]) -> FitDomain:
        """The domain of the multi-GPU rows of ``fit_placements``: the most nodes, the largest one-node
        placement, the largest node of a multi-node one, and the per-GPU batch range."""
        fit = set(fit_placements)
        use = [r for r in rows if r.placement in fit and r.gpus > 1]
        if not use:
            raise ValueError("no multi-GPU fit rows")
        single = [max(r.placement) for r in use if len(r.placement) == 1]
        multi = [max(r.placement) for r in use if len(r.placement) > 1]
        return cls(max(len(r.placement) for r in use), max(single, default=0), max(multi, default=0),
                   min(r.local_bsz for r in use), max(r.local_bsz for r in use))

    def reasons(self, placement: tuple[int, ...], local_bsz: float) -> tuple[str, ...]:
        """Why a prediction extrapolates (empty: inside the fit domain; the rule: ``extrapolation_reasons``)."""
        return extrapolation_reasons(self.max_nodes, self.max_gpus_one_node, self.max_gpus_per_node_multi,
                                     (self.min_local_bsz, self.max_local_bsz), placement, local_bsz)

    def data(self) -> dict[str, object]:
        """The domain as ``fit.yaml``'s ``calibration.domain`` section."""
        return {"max_nodes": self.max_nodes, "max_gpus_one_node": self.max_gpus_one_node,
                "max_gpus_per_node_multi": self.max_gpus_per_node_multi,
                "local_bsz": [self.min_local_bsz, self.max_local_bsz]}
