"""Repeatability of measurements (lbsim.calibration.repeatability): twins, the noise estimate, the perfect-model floor."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lbsim.calibration.compute import fit_compute_curve
from lbsim.calibration.fit import predict_rows
from lbsim.calibration.measured import Row
from lbsim.calibration.model import LinkFigures
from lbsim.calibration.repeatability import (
    Noise,
    estimate_noise,
    held_out_floor_text,
    perfect_model_floor,
    ring_key,
    rows_per_placement,
    twin_pairs,
)
from lbsim.network.overlap import OverlapParams


def test_twins_are_the_same_cycle_of_nodes() -> None:
    assert ring_key((1, 4, 2)) == ring_key((1, 2, 4)) == ring_key((2, 4, 1)) == (1, 2, 4)
    pairs = twin_pairs([(1, 2, 4), (1, 4, 2), (1, 4, 4), (1, 2, 3, 4), (1, 3, 2, 4), (4, 4), (1, 2, 4)])
    assert pairs == [((1, 2, 4), (1, 4, 2))]  # 144 is its own mirror; 1234 and 1324 are different rings
    three = twin_pairs([(2, 4, 1), (1, 2, 4), (1, 4, 2)])  # rotations count too (files that do not normalise)
    assert len(three) == 3


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 8), min_size=2, max_size=5),
       st.sampled_from(["ring", "hierarchical", "tree", "nccl"]), st.integers(0, 4), st.booleans())
def test_lbsim_predicts_twins_identically(placement: list[int], algorithm: str, shift: int, mirror: bool) -> None:
    """The floor's premise: lbsim's step time depends on the cycle of nodes, not on how it is listed."""
    p = tuple(placement)
    q = p[::-1] if mirror else p
    q = q[shift % len(q):] + q[:shift % len(q)]
    fig = LinkFigures(40.0, 2e-5, 5.0, 3e-3, 0.02, OverlapParams(hide_share=0.4, tail_share=0.2), algorithm,
                      chunk_share=0.02)
    curve = fit_compute_curve([(8, 0.1), (16, 0.18), (32, 0.35)])
    a, b = predict_rows([Row(p, 16, 1.0), Row(q, 16, 1.0)], curve, fig, 4e7)
    assert math.isclose(a, b, rel_tol=1e-12)


def _synthetic(run_sd: float, row_sd: float, pairs: int, batches: int, seed: int) -> list[Row]:
    """``pairs`` twin pairs (a 4-node placement and its reverse), each run offset and row drawn as the model says."""
    rng = np.random.default_rng(seed)
    rows, used = [], set()
    while len(used) < pairs:
        p = tuple(int(g) for g in rng.integers(1, 10, 4))
        if p == p[::-1] or ring_key(p) in used:
            continue
        used.add(ring_key(p))
        base = rng.normal(-1.0, 0.5, batches)  # μ_b: any curve
        for placement in (p, p[::-1]):
            offset = rng.normal(0.0, run_sd)
            rows += [Row(placement, 2 ** b, float(np.exp(base[b] + offset + rng.normal(0.0, row_sd))))
                     for b in range(batches)]
    return rows


def test_noise_is_recovered_from_twins() -> None:
    rows = _synthetic(run_sd=0.05, row_sd=0.03, pairs=300, batches=8, seed=1)
    noise = estimate_noise(rows)
    assert noise is not None and noise.pairs == 300
    assert abs(noise.row_sd - 0.03) < 0.002
    assert abs(noise.run_sd - 0.05) < 0.006
    quiet = estimate_noise(_synthetic(run_sd=0.0, row_sd=0.03, pairs=300, batches=8, seed=2))
    assert quiet is not None and quiet.run_sd < 0.01


def test_a_row_listed_twice_counts_as_its_mean() -> None:
    a = [Row((1, 2, 4), 8, 1.0), Row((1, 2, 4), 16, 2.0), Row((1, 4, 2), 8, 1.0), Row((1, 4, 2), 16, 2.0)]
    twice = a + [Row((1, 4, 2), 16, 2.0 * math.e ** 0.2), Row((1, 4, 2), 16, 2.0 * math.e ** -0.2)]
    for noise in (estimate_noise(a), estimate_noise(twice)):
        assert noise is not None and noise.pairs == 1
        assert noise.row_sd < 1e-9 and noise.run_sd < 1e-9


def test_no_twins_no_figures() -> None:
    rows = [Row((1, 2), 8, 1.0), Row((2, 2), 8, 1.0), Row((1, 2, 4), 8, 1.0), Row((1, 4, 2), 16, 1.0)]
    assert estimate_noise(rows) is None  # the one pair shares no batch
    assert held_out_floor_text(rows, [(2, 2)]) is None


def _expected_log_abs(sd: float) -> float:
    """E[log(1 + |exp(-x) - 1|)], x ~ N(0, sd²), by quadrature on a fine grid (the oracle)."""
    x = np.linspace(-12 * sd, 12 * sd, 200_001)
    w = np.exp(-0.5 * (x / sd) ** 2)
    return float(np.sum(np.log1p(np.abs(np.expm1(-x))) * w) / np.sum(w))


def test_floor_geomean_matches_quadrature() -> None:
    # one row per placement: run offset and row noise add, x ~ N(0, 0.04² + 0.03²)
    floor = perfect_model_floor(Noise(10, 0.03, 0.04), [1] * 400, draws=400)
    assert math.isclose(floor.geomean, math.expm1(_expected_log_abs(0.05)), rel_tol=0.01)


def test_floor_count_above_bound_matches_closed_form() -> None:
    # no row noise: a placement's error is exp(-o) - 1 on every row; above 15 % iff o < -log 1.15 or o > -log 0.85
    sd, n = 0.1, 50
    phi = lambda z: 0.5 * (1 + math.erf(z / math.sqrt(2)))  # noqa: E731
    p_over = phi(-math.log(1.15) / sd) + 1 - phi(-math.log(0.85) / sd)
    floor = perfect_model_floor(Noise(10, 1e-12, sd), [5] * n, draws=4000)
    se = math.sqrt(n * p_over * (1 - p_over) / 4000)
    assert abs(floor.over_bound_mean - n * p_over) < 4 * se
    assert math.isclose(floor.p_none_over, (1 - p_over) ** n, abs_tol=0.02)
    assert floor.over_bound_p5 <= floor.over_bound_mean <= floor.over_bound_p95


def test_floor_is_reproducible_and_grows_with_noise() -> None:
    a = perfect_model_floor(Noise(5, 0.05, 0.03), [11, 8, 5])
    assert a == perfect_model_floor(Noise(5, 0.05, 0.03), [11, 8, 5])
    b = perfect_model_floor(Noise(5, 0.10, 0.06), [11, 8, 5])
    assert b.geomean > a.geomean and b.over_bound_mean >= a.over_bound_mean


def test_held_out_floor_counts_held_out_multi_gpu_placements_only() -> None:
    rows = _synthetic(run_sd=0.02, row_sd=0.02, pairs=5, batches=4, seed=3) + [Row((1,), 1, 0.5), Row((2,), 1, 0.6)]
    fit = [rows[0].placement]
    held = {r.label: True for r in rows if r.gpus > 1 and r.placement not in fit}
    assert rows_per_placement(rows, held) == [4] * 9 + [1]  # placement 2 is multi-GPU too; 1 is not
    text = held_out_floor_text(rows, fit)
    assert text is not None and "5 twin placement pairs" in text and "of 10 above 15%" in text
