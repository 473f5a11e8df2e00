"""LB-BSP's ``split_dead_band`` (an option; 0, the paper's rule, by default): closed forms and a property.

Three CPU workers at 100 samples/s nominal, X = 300 (nominal split 100 each), predictor ``last``
(the predicted speed is the last measured one), so every decision has a closed form: speeds
v = (100, 100, v_2) give the paper's split x_i = X v_i / sum v (largest remainders) and a
predicted step max_i x_i / v_i.
"""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from lbsim.schemes.base import RoundObservation, SchemeContext, WorkerObservation
from lbsim.schemes.lbbsp import LBBSP, LBBSPConfig
from lbsim.sizing.split import proportional_split

CTX = SchemeContext(global_batch=300, t0_s=(0.0,) * 3, samples_per_s=(100.0,) * 3, max_batch=(300,) * 3,
                    kinds=("cpu",) * 3)


def _scheme(band: float, variant: str = "cpu") -> LBBSP:
    return LBBSP(LBBSPConfig(variant=variant, predictor="last", split_dead_band=band), CTX)  # type: ignore[arg-type]


def _observe(scheme: LBBSP, batches: tuple[int, ...], speeds: tuple[float, ...], k: int = 0) -> tuple[int, ...]:
    obs = tuple(WorkerObservation(worker=i, batch=b, compute_s=b / v, comm_s=0.0, wait_s=0.0, cpu_available=1.0)
                for i, (b, v) in enumerate(zip(batches, speeds, strict=True)))
    return scheme.next_batches(RoundObservation(update=k, time_s=0.0, workers=obs))


def test_a_small_predicted_gain_keeps_the_split() -> None:
    # rank 2 at 95.24/s: the paper's split (102, 101, 97) would shorten the step from 1.05 s to 1.02 s, under 10 %
    assert _observe(_scheme(0.0), (100, 100, 100), (100.0, 100.0, 100 / 1.05)) == (102, 101, 97)
    assert _observe(_scheme(0.1), (100, 100, 100), (100.0, 100.0, 100 / 1.05)) == (100, 100, 100)


def test_a_large_predicted_gain_re_splits_as_the_paper() -> None:
    # rank 2 at 50/s: (120, 120, 60) shortens the step from 2.0 s to 1.2 s (40 %): re-split, the same as with no band
    for band in (0.0, 0.1, 0.39):
        assert _observe(_scheme(band), (100, 100, 100), (100.0, 100.0, 50.0)) == (120, 120, 60)
    assert _observe(_scheme(0.41), (100, 100, 100), (100.0, 100.0, 50.0)) == (100, 100, 100)


def test_the_band_applies_to_the_water_filled_variants() -> None:
    scheme = _scheme(0.1, "auto")  # CPU workers: t = x / v, water-filled: the same split as cpu here
    assert _observe(scheme, (100, 100, 100), (100.0, 100.0, 100 / 1.05)) == (100, 100, 100)
    assert _observe(scheme, (100, 100, 100), (100.0, 100.0, 50.0), 1) == (120, 120, 60)


@settings(max_examples=30, deadline=None)
@given(band=st.sampled_from([0.0, 0.02, 0.1, 0.3]), speeds=st.lists(st.floats(10.0, 200.0), min_size=6, max_size=6))
@example(band=0.0, speeds=[127.0, 129.0, 10.0, 10.0, 10.0, 127.0])  # the paper's split that gains nothing
def test_a_decision_keeps_the_split_or_gains_more_than_the_band(band: float, speeds: list[float]) -> None:
    scheme = _scheme(band)
    batches = scheme.initial_batches()
    for k, v in enumerate(zip(speeds[::2], speeds[1::2], speeds[::-2], strict=False)):  # 3 rounds of 3 speeds
        new = _observe(scheme, batches, v, k)
        assert sum(new) == 300
        before = max(b / s for b, s in zip(batches, v, strict=True))
        after = max(b / s for b, s in zip(new, v, strict=True))
        if band > 0.0:
            assert new == batches or after < (1 - band) * before
        else:  # no band: always the paper's split (of the speeds as the scheme computes them: x / (x / v)), even
            # one whose rounding gains nothing (speeds 127, 129, 127 from 100 each: (100, 101, 99), the same step)
            measured = [1.0 / (1.0 / (x / (x / s))) for x, s in zip(batches, v, strict=True)]
            assert new == proportional_split(300, measured, (300,) * 3)
        batches = new
