"""Water-filling of affine finish times (lbsim.sizing.waterfill.equalize_affine), on seeded inputs.

``equalize_affine(X, a, b, caps, min_batch)`` solves ``min max_i a_i + b_i x_i`` over integers
with ``sum x_i = X`` and ``min(min_batch, cap_i) <= x_i <= cap_i`` (schemes-research.md §1.3).
Checked here: the constraints, the orderings and symmetries the optimum must have, optimality
against brute force on small inputs and against the continuous water level on large ones, and
the GPU case that motivates it (a fixed overhead makes proportional-to-throughput wrong).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lbsim.sizing.split import InfeasibleSplit, even_split, proportional_split
from lbsim.sizing.waterfill import equalize_affine, makespan


def _lo(caps, min_batch: int) -> list[int]:
    return [min(min_batch, c) for c in caps]


@st.composite
def affine_inputs(draw, *, max_n: int = 8, zero_a: bool = False):
    n = draw(st.integers(1, max_n))
    if zero_a:
        a = [0.0] * n
    else:
        a = draw(st.lists(st.one_of(st.just(0.0), st.floats(0.0, 2.0)), min_size=n, max_size=n))
    b = draw(st.lists(st.floats(1e-4, 1.0), min_size=n, max_size=n))
    caps = draw(st.lists(st.integers(1, 500), min_size=n, max_size=n))
    min_batch = draw(st.integers(1, 4))
    lo = sum(_lo(caps, min_batch))
    total = draw(st.integers(lo, sum(caps)))
    return total, a, b, caps, min_batch


# -- constraints -------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(affine_inputs())
def test_sum_caps_and_minimum(inp) -> None:
    total, a, b, caps, min_batch = inp
    x = equalize_affine(total, a, b, caps, min_batch=min_batch)
    assert len(x) == len(caps)
    assert all(type(v) is int for v in x)
    assert sum(x) == total
    for xi, c, lo in zip(x, caps, _lo(caps, min_batch), strict=True):
        assert lo <= xi <= c, (x, caps, min_batch)


def test_cap_below_min_batch_is_the_worker_s_only_choice() -> None:
    # worker 0 can hold 2 samples, fewer than min_batch: its lower bound becomes its cap
    assert equalize_affine(50, [0.0, 0.0], [1.0, 1.0], [2, 100], min_batch=4) == (2, 48)


def test_min_batch_is_given_even_to_a_hopeless_worker() -> None:
    # worker 1 is 1000x slower: the optimum would give it nothing, the floor gives it min_batch
    x = equalize_affine(100, [0.0, 0.0], [1.0, 1000.0], [1000, 1000], min_batch=3)
    assert x == (97, 3)


# -- orderings and symmetries --------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(affine_inputs(zero_a=True))
def test_faster_worker_never_gets_fewer_samples_unless_capped(inp) -> None:
    """CPU case (a = 0): a worker with a smaller time per sample never gets a smaller batch."""
    total, a, b, caps, min_batch = inp
    x = equalize_affine(total, a, b, caps, min_batch=min_batch)
    for i in range(len(x)):
        for j in range(len(x)):
            if b[i] < b[j] and x[i] < x[j]:
                assert x[i] == caps[i], (b, caps, x)


@settings(max_examples=100, deadline=None)
@given(
    n=st.integers(1, 12),
    per=st.integers(1, 200),
    extra=st.integers(0, 11),
    a=st.floats(0.0, 5.0),
    b=st.floats(1e-4, 1.0),
)
def test_equal_curves_split_evenly(n, per, extra, a, b) -> None:
    total = n * per + extra % n
    x = equalize_affine(total, [a] * n, [b] * n, [10**6] * n)
    assert max(x) - min(x) <= 1
    assert sorted(x) == sorted(even_split(total, n))


@settings(max_examples=100, deadline=None)
@given(affine_inputs(zero_a=True), st.integers(-20, 20))
def test_scaling_time_per_sample_changes_nothing(inp, e) -> None:
    """a = 0: multiplying every b by k (a power of two: exact in floating point) changes nothing."""
    total, a, b, caps, min_batch = inp
    k = 2.0**e
    x = equalize_affine(total, a, b, caps, min_batch=min_batch)
    assert equalize_affine(total, a, [k * v for v in b], caps, min_batch=min_batch) == x


@settings(max_examples=100, deadline=None)
@given(affine_inputs(), st.integers(-20, 20))
def test_scaling_the_whole_curve_changes_nothing(inp, e) -> None:
    total, a, b, caps, min_batch = inp
    k = 2.0**e
    x = equalize_affine(total, a, b, caps, min_batch=min_batch)
    assert equalize_affine(total, [k * v for v in a], [k * v for v in b], caps, min_batch=min_batch) == x


@settings(max_examples=100, deadline=None)
@given(affine_inputs(), st.floats(1e-3, 1e3))
def test_scaling_by_any_factor_keeps_the_makespan_optimal(inp, k) -> None:
    """Any k (not only powers of two): ties may break differently, the makespan scales by k."""
    total, a, b, caps, min_batch = inp
    ka, kb = [k * v for v in a], [k * v for v in b]
    x = equalize_affine(total, a, b, caps, min_batch=min_batch)
    y = equalize_affine(total, ka, kb, caps, min_batch=min_batch)
    assert makespan(y, ka, kb) == pytest.approx(k * makespan(x, a, b), rel=1e-9)


# -- optimality -------------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(affine_inputs(), st.data())
def test_never_worse_than_the_even_split_when_it_is_feasible(inp, data) -> None:
    total, a, b, _caps, min_batch = inp
    n = len(a)
    total = max(total, n * min_batch)
    even = even_split(total, n)
    caps = data.draw(st.lists(st.integers(max(even), max(even) + 50), min_size=n, max_size=n))
    x = equalize_affine(total, a, b, caps, min_batch=min_batch)
    assert makespan(x, a, b) <= makespan(even, a, b) + 1e-12


@st.composite
def small_inputs(draw):
    n = draw(st.integers(1, 3))
    # a mix of "nice" values (exact ties between workers) and arbitrary ones
    coef = st.one_of(st.sampled_from([0.25, 0.5, 1.0, 2.0, 3.0]), st.floats(0.01, 3.0))
    a = draw(st.lists(st.one_of(st.just(0.0), coef), min_size=n, max_size=n))
    b = draw(st.lists(coef, min_size=n, max_size=n))
    caps = draw(st.lists(st.integers(1, 30), min_size=n, max_size=n))
    min_batch = draw(st.integers(1, 3))
    lo = sum(_lo(caps, min_batch))
    total = draw(st.integers(lo, min(30, sum(caps))))
    return total, a, b, caps, min_batch


def _brute_force(total, a, b, caps, min_batch) -> float:
    ranges = [range(lo, c + 1) for lo, c in zip(_lo(caps, min_batch), caps, strict=True)]
    return min(makespan(x, a, b) for x in itertools.product(*ranges) if sum(x) == total)


@settings(max_examples=100, deadline=None)
@given(small_inputs())
def test_matches_brute_force_on_small_inputs(inp) -> None:
    total, a, b, caps, min_batch = inp
    x = equalize_affine(total, a, b, caps, min_batch=min_batch)
    assert makespan(x, a, b) == pytest.approx(_brute_force(total, a, b, caps, min_batch), abs=1e-9)


def test_matches_brute_force_on_a_seeded_sweep() -> None:
    """The same comparison on a fixed seeded sample (independent of hypothesis' search)."""
    rng = np.random.default_rng(20240601)
    for _ in range(150):
        n = int(rng.integers(1, 4))
        a = np.where(rng.random(n) < 0.4, 0.0, rng.uniform(0.0, 2.0, n)).tolist()
        b = rng.uniform(0.05, 2.0, n).tolist()
        caps = rng.integers(1, 31, n).tolist()
        min_batch = int(rng.integers(1, 4))
        lo = sum(_lo(caps, min_batch))
        total = int(rng.integers(lo, min(30, sum(caps)) + 1))
        x = equalize_affine(total, a, b, caps, min_batch=min_batch)
        best = _brute_force(total, a, b, caps, min_batch)
        assert abs(makespan(x, a, b) - best) <= 1e-9, (total, a, b, caps, min_batch, x)


def _continuous_level(total, a, b, lo, hi) -> float:
    """The real water level T with sum clip((T - a) / b, lo, hi) = total (independent bisection)."""
    a, b, lo, hi = (np.asarray(v, dtype=float) for v in (a, b, lo, hi))
    t_lo, t_hi = 0.0, float(np.max(a + b * hi)) + 1.0
    for _ in range(200):
        mid = 0.5 * (t_lo + t_hi)
        if np.clip((mid - a) / b, lo, hi).sum() < total:
            t_lo = mid
        else:
            t_hi = mid
    return t_hi


@settings(max_examples=100, deadline=None)
@given(
    n=st.integers(2, 16),
    seed=st.integers(0, 2**32 - 1),
    fill=st.floats(0.05, 1.0),
)
def test_large_inputs_are_within_one_sample_of_the_water_level(n, seed, fill) -> None:
    """Integer optimum >= continuous optimum T, and greedy from floor(x(T)) stays <= T + max b."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.0, 0.5, n)
    b = 1.0 / rng.uniform(100.0, 5000.0, n)
    caps = rng.integers(100, 100_000, n)
    lo = np.ones(n, dtype=int)
    total = int(max(n, round(fill * caps.sum())))
    x = equalize_affine(total, a, b, caps)
    assert sum(x) == total
    # the continuous optimum: the water level, or a worker held at its minimum batch above it
    level = max(_continuous_level(total, a, b, lo, caps), float(np.max(a + b * lo)))
    m = makespan(x, a, b)
    assert level - 1e-9 <= m <= level + float(b.max()) + 1e-9


# -- the GPU case ------------------------------------------------------------------------------------


def test_fixed_overhead_makes_proportional_to_throughput_worse() -> None:
    """GPU 0: 1000 samples/s after a 0.1 s fixed overhead; GPU 1: 500 samples/s, no overhead.

    Proportional to throughput gives 200/100 (finish 0.3 s / 0.2 s); water-filling equalises
    0.1 + x/1000 = (300 - x)/500, i.e. x ~ 166.7, both finishing at ~0.267 s.
    """
    a, b, caps = [0.1, 0.0], [1 / 1000, 1 / 500], [1000, 1000]
    prop = proportional_split(300, [1000, 500], caps)
    assert prop == (200, 100)
    x = equalize_affine(300, a, b, caps)
    assert x in ((166, 134), (167, 133))
    assert makespan(x, a, b) == pytest.approx(0.1 + 167 / 1000)  # the integer optimum
    assert makespan(x, a, b) < makespan(prop, a, b) - 0.03
    assert makespan(prop, a, b) == pytest.approx(0.3)


def test_zero_overhead_reduces_to_proportional() -> None:
    """With a = 0 the optimum is the throughput-proportional split."""
    x = equalize_affine(300, [0.0, 0.0], [1 / 1000, 1 / 500], [1000, 1000])
    assert x == proportional_split(300, [1000, 500], [1000, 1000]) == (200, 100)


def test_capped_worker_takes_its_cap_and_the_rest_equalise() -> None:
    # fast worker 0 capped at 50; workers 1 and 2 identical share the remaining 150
    x = equalize_affine(200, [0.0, 0.0, 0.0], [0.001, 0.01, 0.01], [50, 1000, 1000])
    assert x == (50, 75, 75)


def test_makespan_is_the_largest_finish_time() -> None:
    assert makespan([10, 20], [1.0, 0.0], [0.5, 0.25]) == 6.0
    assert makespan([3], [0.0], [2.0]) == 6.0


# -- bad input ----------------------------------------------------------------------------------------


def test_infeasible_inputs_raise_infeasible_split() -> None:
    with pytest.raises(InfeasibleSplit, match="memory caps"):
        equalize_affine(31, [0.0, 0.0], [1.0, 1.0], [10, 20])
    with pytest.raises(InfeasibleSplit, match="min batch"):
        equalize_affine(3, [0.0, 0.0], [1.0, 1.0], [10, 20], min_batch=2)
    with pytest.raises(InfeasibleSplit):
        equalize_affine(0, [0.0], [1.0], [10])
    # exactly at the bounds is feasible
    assert equalize_affine(30, [0.0, 0.0], [1.0, 1.0], [10, 20]) == (10, 20)
    assert equalize_affine(4, [0.0, 0.0], [1.0, 5.0], [10, 20], min_batch=2) == (2, 2)


@pytest.mark.parametrize(
    ("a", "b", "caps"),
    [
        ([0.0, 0.0], [1.0, 0.0], [10, 10]),  # b = 0
        ([0.0, 0.0], [1.0, -1.0], [10, 10]),  # b < 0
        ([0.0, 0.0], [1.0, math.nan], [10, 10]),
        ([0.0, 0.0], [1.0, math.inf], [10, 10]),
        ([0.0, math.nan], [1.0, 1.0], [10, 10]),
        ([0.0, math.inf], [1.0, 1.0], [10, 10]),
        ([0.0, -math.inf], [1.0, 1.0], [10, 10]),
        ([0.0], [1.0, 1.0], [10, 10]),  # lengths differ
        ([0.0, 0.0], [1.0, 1.0], [10]),
        ([], [], []),  # no workers
    ],
)
def test_bad_curves_raise_value_error(a, b, caps) -> None:
    with pytest.raises(ValueError) as err:
        equalize_affine(10, a, b, caps)
    assert not isinstance(err.value, InfeasibleSplit)
