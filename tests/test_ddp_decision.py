"""The decision core shared by lbsim.runtime.ddp.LoadBalancer and lbsim's sync loop (runtime/ddp/decision.py).

Torch-free and single-process: the observation it builds from per-rank columns, the decisions it
takes (those of the scheme itself, timed), and the sync loop's record rows going through it.
"""

from __future__ import annotations

import math

import numpy as np

from lbsim.runtime.ddp.decision import Decider, round_observation
from lbsim.schemes.base import SchemeContext
from lbsim.schemes.lbbsp import LBBSP, LBBSPConfig

CTX = SchemeContext(global_batch=60, t0_s=(0.0,) * 3, samples_per_s=(10.0, 10.0, 20.0), max_batch=(60,) * 3,
                    kinds=("cpu",) * 3)


def _scheme() -> LBBSP:
    return LBBSP(LBBSPConfig(variant="cpu", predictor="ema"), CTX)


def test_round_observation_maps_the_columns() -> None:
    obs = round_observation(7, 1.5, [10.0, 20.0, 30.0], [0.5, 1.0, 2.0], [1.0, 0.5, 0.25], [0.9, 0.8, 0.7],
                            oracle_slowdown=[math.nan, 2.0, 1.0], fetch_s=[0.0, 0.1, 0.2], local=[10.0, 5.0, 0.0])
    assert obs.update == 7 and obs.time_s == 1.5
    w = obs.workers
    assert [o.batch for o in w] == [10, 20, 30] and [o.compute_s for o in w] == [0.5, 1.0, 2.0]
    assert [o.cpu_available for o in w] == [1.0, 0.5, 0.25] and [o.mem_available for o in w] == [0.9, 0.8, 0.7]
    assert [o.oracle_slowdown for o in w] == [None, 2.0, 1.0]  # NaN: the engine cannot know
    assert [(o.local_samples, o.remote_samples) for o in w] == [(10, 0), (5, 15), (0, 30)]
    plain = round_observation(0, 0.0, [4.0], [1.0], [1.0], [1.0]).workers[0]
    assert (plain.local_samples, plain.remote_samples, plain.fetch_s, plain.oracle_slowdown) == (0, 0, 0.0, None)


def test_the_decider_takes_the_schemes_decisions_and_times_them() -> None:
    decider, twin = Decider(_scheme()), _scheme()
    assert decider.initial() == (twin.initial_batches(), twin.initial_batches())  # no data layout: all local
    batches = decider.initial()[0]
    assert batches == (15, 15, 30)  # nominal speeds 10 : 10 : 20
    for k, speeds in enumerate([(10.0, 5.0, 20.0), (10.0, 5.0, 20.0), (20.0, 5.0, 10.0)]):
        obs = round_observation(k, 0.0, batches, [b / v for b, v in zip(batches, speeds, strict=True)], [1.0] * 3, [1.0] * 3)
        got, local = decider.decide(obs)
        assert got == twin.next_batches(obs) and local == got and sum(got) == 60
        batches = got
    assert decider.decisions == 3 and len(decider.decision_s) == 3 and decider.mean_decision_s > 0


def test_the_sync_loop_builds_its_observation_with_the_library() -> None:
    from lbsim.runtime.loop import _observation
    from lbsim.runtime.records import FIELDS, F

    table = np.zeros((2, len(FIELDS)))
    for name, values in (("batch", (8, 12)), ("start_s", (1.0, 1.0)), ("compute_end_s", (1.5, 2.25)),
                         ("fetch_s", (0.1, 0.25)), ("cpu_available", (1.0, 0.5)), ("mem_available", (0.75, 1.0)),
                         ("oracle_slowdown", (math.nan, 3.0)), ("local", (8, 2))):
        table[:, F[name]] = values
    got = _observation(table, 4, 2.5)
    want = round_observation(4, 2.5, [8, 12], [0.4, 1.0], [1.0, 0.5], [0.75, 1.0], oracle_slowdown=[math.nan, 3.0],
                             fetch_s=[0.1, 0.25], local=[8, 2])
    assert got == want  # compute time = compute end - start - fetch
