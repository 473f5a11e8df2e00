"""LB-BSP's ``gpu_model`` variant sizing from measured curves (the H200 entry of the catalog).

``scenarios/lbbsp_h200_mixed.yaml``: one H200 (t(b) measured by ``lbsim profile-model``) beside A100,
V100 and T4 (Pollux/Sia fits). Without contention the best split equalises the workers' step times:
``t0_i + b_i / X_i = T`` for every worker below its cap, ``sum b_i = B`` — solved here by bisection on
``T`` from the catalog's figures (an oracle independent of lbsim's water-filling code). After the
online fits settle (60 updates, 3 % per-iteration jitter), the split's step — the slowest worker's
``t_i(b_i)`` — is within 2 % of ``T`` and every batch within 2 % (or 3 samples) of the oracle's.
"""

from __future__ import annotations

from pathlib import Path

import lbsim
from lbsim.scenario.catalog import performance

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "lbbsp_h200_mixed.yaml"
INSTANCES = ["p5e.48xlarge"] + ["p4d.24xlarge"] * 2 + ["p3.2xlarge"] * 2 + ["g4dn.xlarge"] * 2


CURVES = [performance("resnet50_imagenet", i) for i in INSTANCES]


def _equal_finish(total: int) -> tuple[float, list[float]]:
    """``(T, b)``: the common step time and the batches of the equal-finish split."""
    lo, hi = 0.0, 10.0
    for _ in range(200):
        t = (lo + hi) / 2
        b = [min(c.max_batch, max(0.0, (t - c.t0_s) * c.samples_per_s)) for c in CURVES]  # type: ignore[union-attr]
        lo, hi = (t, hi) if sum(b) < total else (lo, t)
    return t, b


def test_gpu_model_settles_on_the_equal_finish_split_of_the_measured_curves() -> None:
    run = lbsim.simulate(SCENARIO, overrides={"workload.updates": 60})
    it = run.iterations
    last = it[it["update"] == it["update"].max()].sort_values("worker")
    t, want = _equal_finish(700)
    got = list(last["batch"])
    assert sum(got) == 700
    step = max(c.t0_s + b / c.samples_per_s for c, b in zip(CURVES, got, strict=True))  # type: ignore[union-attr]
    assert t <= step <= 1.02 * t, (got, want)
    assert all(abs(g - w) <= max(3, 0.02 * w) for g, w in zip(got, want, strict=True)), (got, want)
    assert want[0] > 5 * want[-1]  # the measured H200 takes the lion's share (the T4s ~22 samples each)
