"""Time lost to stragglers, attributed to ranks and to periods, and the rank x time slowdown map.

Per step ``k`` of a synchronous job the step waits for its slowest rank. With each rank's compute
``x_rk = base_r(b_rk) f_rk`` and its no-straggler compute ``y_rk = base_r(b_rk) f*_rk``
(:mod:`lbsim.whatif.fit`), the step's loss is ``E_k = max_r x_rk - max_r y_rk`` (>= 0 since
``x >= y``). It is split among the ranks by level: between two consecutive values of the sorted
``x_(1) >= x_(2) >= ...`` (down to ``max_r y_rk``) the ranks above share the slice equally, so a lone
straggler takes its whole lead over the next rank, and two equally slow ranks halve it (the
Shapley value of the max).

A step *straggles* when its slowest rank is at least :data:`STRAGGLE_RATIO` times its own
no-straggler compute; consecutive straggling steps (gaps of at most :data:`GAP_STEPS` steps
bridged) form a *period*, named by the rank with the largest share of its loss.

The heatmap's cell (r, bin) is the mean over the bin's steps of ``f_rk / m_k`` (the rank's slowdown
against the typical rank of its device at that step: 1 = typical), as in ByteDance's SMon maps; a
bin in which no step starts shows the step running through it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lbsim.whatif.fit import JobFit

STRAGGLE_RATIO = 1.2
GAP_STEPS = 1
MAX_PERIODS = 20
HEATMAP_BINS = 120


@dataclass(frozen=True)
class Period:
    """A run of straggling steps (module docstring): its time span and steps, the time it lost, and the rank
    with the largest share of that loss (``rank_share``), slowed ``slowdown`` x against the typical rank."""

    start_s: float
    end_s: float
    first_step: int
    last_step: int
    lost_s: float
    rank: int
    rank_share: float
    slowdown: float  # the named rank's mean f / m over the period


@dataclass(frozen=True)
class Attribution:
    """The job's straggler loss: ``E_k`` per step, its split among the ranks, the periods (longest loss
    first), and the rank x time slowdown map on ``bin_edges_s`` (module docstring)."""

    lost_per_step_s: np.ndarray
    lost_by_rank_s: np.ndarray
    periods: tuple[Period, ...]
    heat: np.ndarray  # ranks x bins
    bin_edges_s: np.ndarray

    @property
    def lost_s(self) -> float:
        """``Σ_k E_k``: the time the job lost to stragglers."""
        return float(self.lost_per_step_s.sum())


def split_loss(x: np.ndarray, floor: float) -> np.ndarray:
    """Each rank's share of ``max(x) - floor`` (module docstring)."""
    order = np.argsort(-x, kind="stable")
    v = x[order]
    share = np.zeros(len(x))
    for j in range(len(x)):
        hi = v[j]
        lo = max(v[j + 1] if j + 1 < len(x) else floor, floor)
        if hi <= lo:
            break
        share[order[: j + 1]] += (hi - lo) / (j + 1)
    return share


def _typical(fit: JobFit) -> np.ndarray:
    """``m_k`` per rank: the lower median of its device class's factors at each step."""
    out = np.ones_like(fit.factors)
    devices = [g.device for g in fit.groups for _ in g.ranks]
    for device in set(devices):
        members = [r for r in range(fit.ranks) if devices[r] == device]
        out[members] = np.quantile(fit.factors[members], 0.5, axis=0, method="lower")
    return out


def attribute(fit: JobFit, samples: np.ndarray) -> Attribution:
    """The loss of every step of the fitted job run at the batches ``samples`` (ranks x steps), split among
    the ranks by level, grouped into periods, and mapped over time (module docstring)."""
    level = fit.levels(samples.astype(float))
    x, y = level * fit.factors, level * fit.ideal
    floor = y.max(axis=0)
    lost = np.maximum(x.max(axis=0) - floor, 0.0)
    shares = np.stack([split_loss(x[:, k], float(floor[k])) for k in range(fit.steps)], axis=1)
    slowest = x.argmax(axis=0)
    ratio = x[slowest, np.arange(fit.steps)] / np.maximum(y[slowest, np.arange(fit.steps)], 1e-12)
    straggling = ratio >= STRAGGLE_RATIO
    rel = fit.factors / np.maximum(_typical(fit), 1e-12)
    step_end = np.append(fit.start_s[1:], fit.start_s[-1] + (fit.start_s[-1] - fit.start_s[-2] if fit.steps > 1 else 0.0))
    periods: list[Period] = []
    k = 0
    while k < fit.steps:
        if not straggling[k]:
            k += 1
            continue
        first = last = k
        while True:
            nxt = next((j for j in range(last + 1, min(last + 2 + GAP_STEPS, fit.steps)) if straggling[j]), None)
            if nxt is None:
                break
            last = nxt
        span = slice(first, last + 1)
        by_rank = shares[:, span].sum(axis=1)
        r = int(by_rank.argmax())
        total = float(lost[span].sum())
        periods.append(Period(float(fit.start_s[first]), float(step_end[last]), first, last, total, r,
                              float(by_rank[r] / total) if total > 0 else 0.0, float(rel[r, span].mean())))
        k = last + 1
    periods.sort(key=lambda p: -p.lost_s)
    bins = min(HEATMAP_BINS, fit.steps)
    edges = np.linspace(0.0, float(step_end[-1]), bins + 1)
    which = np.clip(np.searchsorted(edges, fit.start_s, side="right") - 1, 0, bins - 1)
    heat = np.full((fit.ranks, bins), np.nan)
    for j in range(bins):
        cols = which == j
        if cols.any():
            heat[:, j] = rel[:, cols].mean(axis=1)
        elif j > 0:  # no step starts in this bin: the step running through it
            heat[:, j] = heat[:, j - 1]
    return Attribution(lost, shares.sum(axis=1), tuple(periods[:MAX_PERIODS]), heat, edges)
