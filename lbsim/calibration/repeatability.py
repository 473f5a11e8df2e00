"""Repeatability of the measurements: the error a perfect model would still show.

A measured file holds one run per placement (Pollux: the mean of iterations 5–20 of one trace run
per row). Two placements that list the same cycle of nodes — **twins**: one is a rotation of the
other or of its reverse, e.g. ``124`` and ``142`` (the Pollux files normalise a placement to its
smallest rotation, so their twins are mirror images) — are the same topology to every model whose
all-reduce cost depends neither on which node comes first nor on the direction the ring walks the
nodes; lbsim's collectives are such a model (``tests/test_repeatability.py`` checks that it
predicts twins identically). At a batch both were measured at, their difference is
therefore measurement, not model. Model of a measurement (``y`` = log step time, ``p`` a
placement's run, ``b`` a batch)::

    y_pb = μ_b(topology) + o_p + ε_pb      o_p ~ N(0, σ_run²)  the run's offset, shared by its rows
                                           ε_pb ~ N(0, σ_row²) the row's own noise

For a twin pair, ``d_b = y_pb − y_qb = (o_p − o_q) + (ε_pb − ε_qb)`` over its ``n`` common batches,
and by the method of moments (pooled over pairs)::

    σ_row² = mean_pairs( var_b(d) ) / 2                       (sample variance, n − 1)
    σ_run² = max(0, (mean_pairs( mean_b(d)² ) − 2 σ_row² · mean_pairs(1/n)) / 2)

**Floor**: a perfect model predicts ``μ_b`` and errs ``e_pb = exp(−(o_p + ε_pb)) − 1``
(predicted / measured − 1). Its p90 |error| over the rows, its per-placement geomean |error| (``exp(mean log(1 + |e|)) − 1``, as
the validation reports), its pooled geomean over the placements, and how many placements exceed a
bound (the validation target, 15 %) are drawn by Monte Carlo for the held-out placements' own row counts, from
a seeded generator, so the figures are reproducible. A model whose held-out error is near the
floor is as good as these measurements can show; the excess over the floor is the model's.

A placement that is its own mirror image (``144``: its reverse ``441`` is a rotation of it) has no
twin. A placement and batch listed twice count as the mean of their log times. No twin pair with two or
more common batches: no figures.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from lbsim.calibration.measured import Row, role_of

FLOOR_DRAWS = 2000
FLOOR_SEED = 20260


def ring_key(placement: tuple[int, ...]) -> tuple[int, ...]:
    """The same cycle of nodes whichever node is listed first and whichever way it is walked:
    the smallest of the placement's rotations and its reverse's rotations."""
    rotations = [p[i:] + p[:i] for p in (placement, placement[::-1]) for i in range(len(placement))]
    return min(rotations)


def twin_pairs(placements: Sequence[tuple[int, ...]]) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Pairs of distinct measured placements with the same :func:`ring_key` (module docstring), in sorted order."""
    groups: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
    for p in dict.fromkeys(placements):
        groups.setdefault(ring_key(p), []).append(p)
    return [(ps[i], ps[j]) for _, ps in sorted(groups.items()) for i in range(len(ps)) for j in range(i + 1, len(ps))]


@dataclass(frozen=True)
class Noise:
    """Measurement noise in log step time: ``row_sd`` within a run, ``run_sd`` between runs (module docstring)."""

    pairs: int
    row_sd: float
    run_sd: float


def estimate_noise(rows: Sequence[Row]) -> Noise | None:
    """``σ_row`` and ``σ_run`` from the twin pairs' common batches; None without a pair of 2+ common batches."""
    logs: dict[tuple[int, ...], dict[int, list[float]]] = {}
    for r in rows:  # a placement and batch listed twice: the mean of its log times
        logs.setdefault(r.placement, {}).setdefault(r.local_bsz, []).append(float(np.log(r.step_time_s)))
    log_t = {p: {b: float(np.mean(v)) for b, v in by_b.items()} for p, by_b in logs.items()}
    within, means_sq, inv_n = [], [], []
    for p, q in twin_pairs(list(log_t)):
        common = sorted(set(log_t[p]) & set(log_t[q]))
        if len(common) < 2:
            continue
        d = np.array([log_t[p][b] - log_t[q][b] for b in common])
        within.append(float(np.var(d, ddof=1)) / 2.0)
        means_sq.append(float(np.mean(d)) ** 2)
        inv_n.append(1.0 / len(common))
    if not within:
        return None
    row_var = float(np.mean(within))
    run_var = max(0.0, (float(np.mean(means_sq)) - 2.0 * row_var * float(np.mean(inv_n))) / 2.0)
    return Noise(len(within), float(np.sqrt(row_var)), float(np.sqrt(run_var)))


@dataclass(frozen=True)
class Floor:
    """What a perfect model would show on placements with these row counts (module docstring)."""

    geomean: float  # pooled geomean |error| over every row (mean over draws)
    over_bound_mean: float  # placements whose geomean |error| exceeds the bound, mean over draws
    over_bound_p5: int
    over_bound_p95: int
    p_none_over: float  # probability that no placement exceeds the bound
    p90: float = float("nan")  # the 90th percentile of |error| over the rows (mean over draws)


def perfect_model_floor(noise: Noise, rows_per_placement: Sequence[int], bound: float = 0.15,
                        draws: int = FLOOR_DRAWS, seed: int = FLOOR_SEED) -> Floor:
    """Monte Carlo of a perfect model's errors ``exp(−(o + ε)) − 1`` (module docstring)."""
    if not rows_per_placement or min(rows_per_placement) < 1:
        raise ValueError("rows_per_placement: need one or more placements, each with one or more rows")
    rng = np.random.default_rng(seed)
    counts = np.asarray(rows_per_placement, dtype=np.int64)
    owner = np.repeat(np.arange(counts.size), counts)
    x = (rng.normal(0.0, noise.run_sd, (draws, counts.size))[:, owner]
         + rng.normal(0.0, noise.row_sd, (draws, owner.size)))
    log_abs = np.log1p(np.abs(np.expm1(-x)))  # log(1 + |e|), e = exp(-x) - 1
    per_placement = np.add.reduceat(log_abs, np.r_[0, np.cumsum(counts)[:-1]], axis=1) / counts
    over = np.sum(np.expm1(per_placement) > bound, axis=1)
    return Floor(
        geomean=float(np.mean(np.expm1(np.mean(log_abs, axis=1)))),
        over_bound_mean=float(np.mean(over)),
        over_bound_p5=int(np.percentile(over, 5)),
        over_bound_p95=int(np.percentile(over, 95)),
        p_none_over=float(np.mean(over == 0)),
        p90=float(np.mean(np.quantile(np.expm1(log_abs), 0.9, axis=1))),
    )


def rows_per_placement(rows: Sequence[Row], keep: Collection[str] | None = None) -> list[int]:
    """Row count of each placement (in first-seen order), only the labels in ``keep`` when given."""
    counts: dict[str, int] = {}
    for r in rows:
        if keep is None or r.label in keep:
            counts[r.label] = counts.get(r.label, 0) + 1
    return list(counts.values())


def held_out_floor_text(rows: Sequence[Row], fit_placements: Sequence[tuple[int, ...]],
                        bound: float = 0.15) -> str | None:
    """One line for ``lbsim calibrate``: the input's noise and the floor on its held-out multi-GPU placements."""
    noise = estimate_noise(rows)
    fit = set(fit_placements)
    held = {r.label for r in rows if role_of(r, fit) == "held_out"}
    if noise is None or not held:
        return None
    floor = perfect_model_floor(noise, rows_per_placement(rows, held), bound)
    return (f"measurement repeatability ({noise.pairs} twin placement pairs): row noise {noise.row_sd:.1%}, "
            f"run offset {noise.run_sd:.1%} (log sd); a perfect model would err {floor.geomean:.1%} geomean "
            f"(p90 {floor.p90:.1%}) on the held-out placements, {floor.over_bound_mean:.2g} of {len(held)} above "
            f"{bound:.0%} on average")
