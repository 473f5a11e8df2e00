"""Speed predictors for LB-BSP's CPU variant (lbsim.sizing.predictors): last, ema, narx via the factory.

The NARX net itself is tested in test_narx.py; here only what the factory hands LB-BSP.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lbsim.sizing.narx import NarxParams, NarxPredictor
from lbsim.sizing.predictors import EMA, LastValue, make_predictor

speeds = st.lists(st.floats(1e-3, 1e6), min_size=1, max_size=30)


def _make(name: str, *, alpha: float = 0.5, seed: int = 0, **narx):
    return make_predictor(name, ema_alpha=alpha, narx=NarxParams(**narx), rng=np.random.default_rng(seed))


# -- last value ----------------------------------------------------------------------------------------


def test_last_value_before_any_observation_is_nan() -> None:
    assert math.isnan(LastValue().predict(1.0, 1.0))


@settings(max_examples=100, deadline=None)
@given(speeds, st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_last_value_returns_the_last_speed_whatever_the_readings(vs, cpu, mem) -> None:
    p = LastValue()
    for v in vs:
        p.observe(v, 0.5, 0.5)
        assert p.predict(cpu, mem) == v


# -- EMA ---------------------------------------------------------------------------------------------------


def test_ema_exact_arithmetic() -> None:
    p = EMA(0.5)
    assert math.isnan(p.predict(1.0, 1.0))
    p.observe(10.0, 1.0, 1.0)
    assert p.predict(1.0, 1.0) == 10.0  # the first observation initialises the average
    p.observe(20.0, 1.0, 1.0)
    assert p.predict(1.0, 1.0) == 15.0
    p.observe(5.0, 0.2, 0.3)
    assert p.predict(0.1, 0.1) == 10.0  # 0.5 * 5 + 0.5 * 15; readings ignored
    q = EMA(0.25)
    for v in (8.0, 16.0, 0.0):
        q.observe(v, 1.0, 1.0)
    assert q.predict(1.0, 1.0) == 7.5  # 8 -> 0.25*16 + 0.75*8 = 10 -> 0.75*10 = 7.5


@settings(max_examples=100, deadline=None)
@given(speeds, st.floats(0.01, 1.0))
def test_ema_matches_the_recurrence_and_stays_in_range(vs, alpha) -> None:
    p = EMA(alpha)
    ref = vs[0]
    for k, v in enumerate(vs):
        p.observe(v, 1.0, 1.0)
        if k:
            ref = alpha * v + (1 - alpha) * ref
        assert p.predict(1.0, 1.0) == pytest.approx(ref, rel=1e-12)
        assert min(vs[: k + 1]) * (1 - 1e-12) <= p.predict(1.0, 1.0) <= max(vs[: k + 1]) * (1 + 1e-12)


@settings(max_examples=50, deadline=None)
@given(speeds)
def test_ema_with_alpha_one_is_last_value(vs) -> None:
    e, last = EMA(1.0), LastValue()
    for v in vs:
        e.observe(v, 1.0, 1.0)
        last.observe(v, 1.0, 1.0)
        assert e.predict(1.0, 1.0) == last.predict(1.0, 1.0)


@pytest.mark.parametrize("alpha", [0.0, -0.1, 1.0000001, 2.0, math.nan, math.inf, -math.inf])
def test_ema_rejects_alpha_outside_zero_one(alpha: float) -> None:
    with pytest.raises(ValueError, match="alpha"):
        EMA(alpha)
    with pytest.raises(ValueError, match="alpha"):
        _make("ema", alpha=alpha)


# -- the factory -----------------------------------------------------------------------------------------


def test_make_predictor_returns_the_right_kinds() -> None:
    assert type(_make("last")) is LastValue
    assert type(_make("oracle")) is LastValue  # the oracle's record-keeper; the truth comes from the engine
    ema = _make("ema", alpha=0.3)
    assert type(ema) is EMA and ema.alpha == 0.3
    narx = _make("narx", hidden=4, warmup=7)
    assert type(narx) is NarxPredictor
    assert narx.params == NarxParams(hidden=4, warmup=7)


def test_make_predictor_gives_fresh_independent_predictors() -> None:
    p, q = _make("ema"), _make("ema")
    p.observe(10.0, 1.0, 1.0)
    assert math.isnan(q.predict(1.0, 1.0))


@pytest.mark.parametrize("warmup", [1, 4, 5, 12])
def test_narx_from_the_factory_honours_warmup(warmup: int) -> None:
    """Until ``warmup`` observations (and a full lag history: 3 speeds, 3 readings) the answer
    is the last speed exactly, whatever the readings; from then on the net answers."""
    rng = np.random.default_rng(warmup)
    p = _make("narx", warmup=warmup, speed_delays=3, input_delays=3, seed=warmup)
    assert math.isnan(p.predict(1.0, 1.0))
    first_net = max(warmup, 4)  # the first training example needs 3 past speeds and readings
    for k in range(1, first_net + 3):
        v = 100.0 * float(rng.uniform(0.3, 1.0))
        p.observe(v, float(rng.uniform(0.3, 1.0)), 0.8)
        if k < first_net:
            assert not p.trained
            assert p.predict(0.2, 0.9) == v and p.predict(1.0, 0.1) == v
        else:
            assert p.trained
            assert p.predict(0.3, 0.8) != p.predict(1.0, 0.8)  # the current reading now matters


def test_narx_from_the_factory_uses_the_given_generator() -> None:
    """Same generator seed: identical predictions; another seed: another net."""
    r = np.random.default_rng(42)
    obs = [(float(100 * c), float(c), 0.8) for c in r.uniform(0.3, 1.0, 30)]
    preds = {}
    for seed in (1, 1, 2):
        p = _make("narx", warmup=5, seed=seed)
        for o in obs:
            p.observe(*o)
        preds.setdefault(seed, []).append(p.predict(0.6, 0.8))
    assert preds[1][0] == preds[1][1]
    assert preds[1][0] != preds[2][0]
