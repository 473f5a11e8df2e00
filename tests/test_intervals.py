"""lbsim.stats.intervals: intervals never leave the physical range, none from too few values, exact oracles."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lbsim.stats.intervals import (
    MIN_VALUES,
    bounded_mean,
    exceedance,
    quantiles,
    ratio_mean,
    strata_mean,
    t_quantile,
    wilson,
)

positive = st.floats(min_value=1e-6, max_value=1e6, allow_nan=False, allow_infinity=False)
share = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


def inside(e, lower: float, upper: float) -> None:  # type: ignore[no-untyped-def]
    assert lower <= e.value <= upper
    if e.has_interval:
        assert lower <= e.low <= e.value <= e.high <= upper


@settings(max_examples=150, deadline=None)
@given(st.lists(share, min_size=0, max_size=40))
def test_a_share_interval_stays_in_0_1(values: list[float]) -> None:
    e = bounded_mean(values, lower=0.0, upper=1.0)
    if values:
        inside(e, 0.0, 1.0)
    assert e.has_interval == (len(values) >= MIN_VALUES)


@settings(max_examples=150, deadline=None)
@given(st.lists(positive, min_size=1, max_size=30), st.floats(min_value=1.0, max_value=10.0))
def test_a_throughput_interval_stays_in_0_and_the_ceiling(values: list[float], headroom: float) -> None:
    ceiling = max(values) * headroom
    inside(bounded_mean(values, lower=0.0, upper=ceiling), 0.0, ceiling)


@settings(max_examples=150, deadline=None)
@given(st.lists(positive, min_size=1, max_size=30))
def test_a_ratio_interval_is_positive(ratios: list[float]) -> None:
    e = ratio_mean(ratios)
    assert e.value > 0
    if e.has_interval:
        assert 0 < e.low <= e.value <= e.high


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(positive, min_size=1, max_size=8), min_size=1, max_size=5), st.booleans())
def test_a_strata_interval_never_leaves_the_data(strata: list[list[float]], ratio: bool) -> None:
    e = strata_mean(strata, ratio=ratio, resamples=300)
    flat = [x for s in strata for x in s]
    lo, hi = min(flat), max(flat)
    assert lo * (1 - 1e-9) <= e.value <= hi * (1 + 1e-9)
    if e.has_interval:
        assert lo * (1 - 1e-9) <= e.low <= e.value <= e.high <= hi * (1 + 1e-9)
    assert e.has_interval == (min(len(s) for s in strata) >= MIN_VALUES)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=500), st.integers(min_value=0, max_value=500))
def test_a_probability_interval_stays_in_0_1(k: int, extra: int) -> None:
    n = k + extra
    if n == 0:
        assert math.isnan(wilson(0, 0).value)
        return
    inside(wilson(k, n), 0.0, 1.0)


def test_no_interval_from_one_or_two_seeds() -> None:
    for values in ([5.0], [5.0, 7.0]):
        for e in (bounded_mean(values, lower=0.0), ratio_mean(values), strata_mean([values])):
            assert not e.has_interval and e.low is None and e.high is None
            assert "no interval" in e.method
    assert not wilson(1, 2).has_interval


def test_identical_values_give_a_zero_width_interval_and_say_why() -> None:
    e = bounded_mean([3.0, 3.0, 3.0], lower=0.0)
    assert (e.low, e.value, e.high) == (3.0, 3.0, 3.0) and "no random element" in e.method


def test_t_interval_oracle_clipped_at_zero() -> None:
    # Student's t with 2 degrees of freedom has a closed-form quantile: t_p = (2p - 1) / sqrt(2 p (1 - p))
    t2 = 0.95 / math.sqrt(2 * 0.975 * 0.025)  # = 4.3027
    assert t_quantile(0.95, 2) == pytest.approx(t2, rel=1e-9)
    # [1, 2, 3]: mean 2, s = 1 -> 2 +- t2 / sqrt(3) = 2 +- 2.484; the low end is clipped at 0
    e = bounded_mean([1.0, 2.0, 3.0], lower=0.0)
    assert e.value == 2.0 and e.low == 0.0
    assert e.high == pytest.approx(2 + t2 / math.sqrt(3), rel=1e-9)
    unclipped = bounded_mean([1.0, 2.0, 3.0])
    assert unclipped.low == pytest.approx(2 - t2 / math.sqrt(3), rel=1e-9) and unclipped.low < 0


def test_ratio_oracle_is_symmetric_on_the_log_scale() -> None:
    e = ratio_mean([0.5, 1.0, 2.0])  # log: -l, 0, l -> geometric mean 1, interval symmetric in log
    assert e.value == pytest.approx(1.0)
    assert e.low * e.high == pytest.approx(1.0)
    half = 0.95 / math.sqrt(2 * 0.975 * 0.025) * math.log(2) / math.sqrt(3)
    assert e.high == pytest.approx(math.exp(half))


def test_wilson_oracles() -> None:
    z2 = 1.959963984540054**2
    e = wilson(0, 10)  # k = 0: [0, z^2 / (n + z^2)]
    assert e.low == 0.0 and e.high == pytest.approx(z2 / (10 + z2), rel=1e-9)
    full = wilson(10, 10)
    assert full.high == 1.0 and full.low == pytest.approx(10 / (10 + z2), rel=1e-9)
    assert exceedance([1.0, 1.2, 1.3, 0.9], 1.1).value == 0.5


def test_strata_mean_weights_strata_equally_and_is_reproducible() -> None:
    a, b = [1.0, 1.0, 1.1, 0.9], [3.0, 3.1, 2.9]
    e = strata_mean([a, b])
    assert e.value == pytest.approx((np.mean(a) + np.mean(b)) / 2)
    assert strata_mean([a, b]) == e  # a fixed bootstrap stream
    g = strata_mean([a, b], ratio=True)
    assert g.value == pytest.approx(math.exp((np.mean(np.log(a)) + np.mean(np.log(b))) / 2))


def test_quantiles_and_map() -> None:
    q = quantiles(list(range(101)))
    assert q == {"p50": 50.0, "p90": 90.0, "p99": 99.0}
    thr = bounded_mean([20.0, 21.0, 22.0], lower=0.0)
    e = thr.map(lambda x: 630.0 / x)  # decreasing: the ends swap
    assert e.value == pytest.approx(30.0)
    assert e.low == pytest.approx(630.0 / thr.high) and e.high == pytest.approx(630.0 / thr.low)


def test_bad_values_are_refused() -> None:
    with pytest.raises(ValueError):
        ratio_mean([1.0, -1.0, 2.0])
    with pytest.raises(ValueError):
        bounded_mean([0.5, 1.5], lower=0.0, upper=1.0)
    with pytest.raises(ValueError):
        bounded_mean([float("nan"), 1.0, 2.0])
