"""Whether the fit placements support the compute-noise term: leave-one-placement-out cross-validation.

The replicas' compute noise ``jitter_cv`` c (:mod:`lbsim.network.replica_wait`, step 5 of
:mod:`lbsim.calibration.fit`) is one more free figure. On some data the fit placements determine it
(the wait for the slowest replica shows as steps growing with the GPU count at large batches); on
others it is confounded with the latencies and the fit uses it to absorb whatever the other figures
miss. Whether it is identified is a property of the fit rows, so the fit rows decide
(``lbsim calibrate --jitter-cv auto``, the default):

* two candidate models, M0 (c = 0) and M1 (c fitted), each fitted as :func:`calibrate_rows` does
  on every fit placement (each picks its own all-reduce algorithm; M1 keeps M0's NICs per node);
* **leave one placement out**: for each of the K multi-GPU fit placements ``p`` in turn, each
  candidate is fitted again on the *other* fit placements (with its algorithm from the full fit;
  everything else — the shared-node slowdown, the links, the overlap, c — refitted) and predicts
  ``p``'s rows; the fold's error is the mean square ``log(predicted / measured)`` over them (the
  fit's own loss, on rows the fit did not see);
* ``CV(M)`` = the mean of the K fold errors, ``SE(M)`` = their standard deviation / √K;
* **the one-standard-error rule** (Hastie, Tibshirani & Friedman, *The Elements of Statistical
  Learning*, 2nd ed., §7.10): the simplest model whose CV is within one standard error of the
  best one's. So **M1 is kept iff CV(M1) + SE(M1) < CV(M0)**; otherwise — and when c fits 0, or
  there are fewer than two multi-GPU fit placements to leave out — M0.

Why this rule: the calibration's purpose is to predict placements it was not fitted on, and
leave-one-placement-out asks exactly that question of the fit placements alone (a placement held
out is a new placement). An information criterion (AIC/BIC) would count the extra figure but
assumes independent residuals, which model error is not (rows of a placement err together); a
"parameter at its bound" rule answers only the extreme case. The one-SE rule is the textbook guard
against keeping a figure for a gain within the folds' own scatter (a c of 1e-6 that wins by 1e-4);
no threshold of ours enters, so nothing here is tuned to a data set. Rows of placements outside the fit placements are never read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Literal

import numpy as np

from lbsim.calibration.fit import Calibration, IntraBounds, NoiseChoice, calibrate_rows, predict_rows
from lbsim.calibration.interval import NOMINAL, FitDomain, interval_from_folds, leave_one_placement_out
from lbsim.calibration.measured import Row

AUTO: Literal["auto"] = "auto"
# how the compute noise is set: AUTO (this module's rule), None (always fitted) or a fixed CV
JitterChoice = float | Literal["auto"] | None


def fold_residuals(rows: Sequence[Row], fit_placements: Sequence[tuple[int, ...]], gradient_bytes: int,
                   algorithm: str, jitter_cv: float | None, *, intra_bounds: IntraBounds | None,
                   chunk_share: float, nics_per_node: int = 1) -> list[tuple[tuple[int, ...], np.ndarray]]:
    """Each multi-GPU fit placement's ``log(measured / predicted)`` from a fit on the others (docstring)."""
    def fit_and_predict(others: Sequence[tuple[int, ...]], left: Sequence[Row]) -> np.ndarray:
        cal = calibrate_rows(rows, others, gradient_bytes, algorithms=(algorithm,), intra_bounds=intra_bounds,
                             chunk_share=chunk_share, jitter_cv=jitter_cv, nic_counts=(nics_per_node,))
        return predict_rows(left, cal.curve, cal.figures, gradient_bytes)

    return leave_one_placement_out(rows, fit_placements, fit_and_predict)


def cross_validated_error(rows: Sequence[Row], fit_placements: Sequence[tuple[int, ...]], gradient_bytes: int,
                          algorithm: str, jitter_cv: float | None, *, intra_bounds: IntraBounds | None,
                          chunk_share: float, nics_per_node: int = 1) -> tuple[float, float, int]:
    """``(CV, SE, folds)``: each multi-GPU fit placement predicted from a fit on the others (docstring)."""
    folds = fold_residuals(rows, fit_placements, gradient_bytes, algorithm, jitter_cv, intra_bounds=intra_bounds,
                           chunk_share=chunk_share, nics_per_node=nics_per_node)
    e = np.array([float(np.mean(r ** 2)) for _, r in folds])
    se = float(np.std(e, ddof=1) / np.sqrt(e.size)) if e.size > 1 else float("inf")
    return float(np.mean(e)), se, e.size


def calibrate_auto(rows: Sequence[Row], fit_placements: Sequence[tuple[int, ...]], gradient_bytes: int, *,
                   intra_bounds: IntraBounds | None = None, chunk_share: float,
                   progress: Callable[[float], None] | None = None) -> Calibration:
    """:func:`calibrate_rows` with the noise term kept only where cross-validation supports it (docstring)."""
    def part(lo: float, hi: float) -> Callable[[float], None] | None:
        return None if progress is None else (lambda f: progress(lo + (hi - lo) * f))

    without = calibrate_rows(rows, fit_placements, gradient_bytes, jitter_cv=0.0, intra_bounds=intra_bounds,
                             chunk_share=chunk_share, progress=part(0.0, 0.3))
    # M1 keeps M0's NICs per node (a property of the hardware, picked without the noise term)
    with_ = calibrate_rows(rows, fit_placements, gradient_bytes, jitter_cv=None, intra_bounds=intra_bounds,
                           chunk_share=chunk_share, nic_counts=(without.figures.nics_per_node,),
                           progress=part(0.3, 0.6))
    c = with_.figures.jitter_cv
    multi = [p for p in fit_placements if sum(p) > 1]
    if c <= 0.0 or len(multi) < 2:
        out = replace(without, noise=NoiseChoice(float("nan"), float("nan"), float("nan"), 0, c, False)) if c > 0 else without
        if progress is not None:
            progress(1.0)
        return out
    cv0, _, folds = cross_validated_error(rows, fit_placements, gradient_bytes, without.figures.algorithm, 0.0,
                                          intra_bounds=intra_bounds, chunk_share=chunk_share,
                                          nics_per_node=without.figures.nics_per_node)
    if progress is not None:
        progress(0.7)
    cv1, se1, _ = cross_validated_error(rows, fit_placements, gradient_bytes, with_.figures.algorithm, None,
                                        intra_bounds=intra_bounds, chunk_share=chunk_share,
                                        nics_per_node=with_.figures.nics_per_node)
    if progress is not None:
        progress(1.0)
    choice = NoiseChoice(cv0, cv1, se1, folds, c, cv1 + se1 < cv0)
    return replace(with_ if choice.kept else without, noise=choice)


def with_interval(cal: Calibration, rows: Sequence[Row], *, intra_bounds: IntraBounds | None, chunk_share: float,
                  nominal: float = NOMINAL) -> Calibration:
    """``cal`` with its leave-one-placement-out interval and fit domain (:mod:`lbsim.calibration.interval`).

    Each fold refits with ``cal``'s algorithm and its compute-noise choice (fitted if ``cal`` kept
    the noise, else none).
    """
    jitter: float | None = None if cal.figures.jitter_cv > 0 else 0.0
    folds = fold_residuals(rows, cal.fit_placements, cal.gradient_bytes, cal.figures.algorithm, jitter,
                           intra_bounds=intra_bounds, chunk_share=chunk_share, nics_per_node=cal.figures.nics_per_node)
    return replace(cal, interval=interval_from_folds([r for _, r in folds], nominal),
                   domain=FitDomain.of(rows, cal.fit_placements))
