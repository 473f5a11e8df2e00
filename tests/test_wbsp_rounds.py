"""WBSP's round bookkeeping (lbsim/schemes/wbsp_rounds.py), shared by the simulator and the runtime."""

from __future__ import annotations

from lbsim.schemes.wbsp_rounds import Rounds


def test_rounds_close_with_samples_weights_and_one_flag_per_worker() -> None:
    r: Rounds[tuple[int, int, int]] = Rounds(3, lambda step: step[2])  # (worker, iteration, batch)
    assert r.closed == 0 and not any(r.take_flag(w) for w in range(3))  # nobody flagged before a round closes
    r.join([(0, 0, 10), (0, 1, 10)])
    r.join([(2, 0, 30)])
    update, samples, steps = r.close()
    assert (update, samples, steps) == (0, 50, [(0, 0, 10), (0, 1, 10), (2, 0, 30)])
    assert r.closed == 1 and r.open == []
    assert r.weight(0, 10) == 0.2 and r.weight(0, 30) == 0.6
    assert r.take_flag(1) is True and r.take_flag(1) is False  # the flag is answered once
    r.join([(1, 0, 20)])
    assert r.close()[:2] == (1, 20) and r.samples_of == [50, 20]
    assert r.take_flag(1) is True and r.take_flag(0) is True  # a new round flags everyone again
    r.join([(0, 2, 10), (2, 1, 30)])
    assert r.drop_open() == 2 and r.open == [] and r.closed == 2
