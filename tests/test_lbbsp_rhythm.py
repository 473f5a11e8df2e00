"""LB-BSP's rhythm options (``decide_every`` m, ``decision_lag`` L; 1 and 0 by default): which round runs
which split, in closed form, with predictor ``last`` and three CPU workers at 100 samples/s (X = 300)."""

from __future__ import annotations

from lbsim.schemes.base import RoundObservation, SchemeContext, WorkerObservation
from lbsim.schemes.lbbsp import LBBSP, WARM_ROUNDS, LBBSPConfig

CTX = SchemeContext(global_batch=300, t0_s=(0.0,) * 3, samples_per_s=(100.0,) * 3, max_batch=(300,) * 3,
                    kinds=("cpu",) * 3)
EVEN, SLOW2 = (100, 100, 100), (120, 120, 60)  # rank 2 at 50/s: the paper's split is SLOW2


def _runs(m: int, lag: int, rounds: int = 16, slow_from: int = 0) -> list[tuple[int, ...]]:
    """The split each round runs (round 0: the initial one), rank 2 at 50/s from round ``slow_from``."""
    scheme = LBBSP(LBBSPConfig(variant="cpu", predictor="last", decide_every=m, decision_lag=lag), CTX)  # type: ignore[arg-type]
    runs = [scheme.initial_batches()]
    for k in range(rounds - 1):
        speeds = (100.0, 100.0, 50.0 if k >= slow_from else 100.0)
        obs = tuple(WorkerObservation(worker=i, batch=b, compute_s=b / v, comm_s=0.0, wait_s=0.0, cpu_available=1.0)
                    for i, (b, v) in enumerate(zip(runs[-1], speeds, strict=True)))
        runs.append(scheme.next_batches(RoundObservation(update=k, time_s=0.0, workers=obs)))
    return runs


def test_defaults_decide_every_round_for_the_next() -> None:
    assert _runs(1, 0)[:3] == [EVEN, SLOW2, SLOW2]


def test_lag_two_windows_of_one_round_apply_three_rounds_after_the_observed_one() -> None:
    runs = _runs(1, 2)
    assert runs[:3] == [EVEN] * 3 and runs[3] == SLOW2  # round 0 observed, decided, run from round 0 + 1 + 2


def test_windows_of_four_after_the_warm_rounds_and_a_late_change() -> None:
    slow_from = WARM_ROUNDS + 2  # mid-way through the first 4-round window
    runs = _runs(4, 2, rounds=24, slow_from=slow_from)
    assert all(r == EVEN for r in runs[: slow_from + 1])
    # the window of rounds 4-7 (two of them slow: mean speed of rank 2 = 2/3 of 100) ends at 7 and runs from 7 + 1 + 8 = 16
    assert runs[15] == EVEN and runs[16] != EVEN and runs[16][2] < 100
    assert runs[20] == SLOW2  # the next window (8-11, all slow) runs from 11 + 1 + 8
