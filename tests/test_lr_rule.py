"""The learning-rate rule (lbsim.numerics.lr_rule): the same step per sample in every scheme.

Identical dedicated workers, one parameter server: BSP's update holds the global batch X, an ASP
push X/n. Under ``per_sample`` (the default, the linear scaling rule) both need the same samples
to reach the target; under ``per_update`` ASP moves n times further per sample and reaches it
with about n times fewer samples (the gap the old rule produced).
"""

from __future__ import annotations

import numpy as np
import pytest

from lbsim.numerics import SGD
from lbsim.numerics.lr_rule import update_scale

N, GLOBAL_BATCH = 4, 256


def samples_to_target(sim, scheme: str, rule: str | None) -> int:
    from lbsim.scenario.loader import scenario_from_data
    from lbsim.simulator.run import simulate

    data = sim.data([sim.group(N, 1000.0)], scheme=scheme, network=sim.ps(), global_batch=GLOBAL_BATCH,
                    updates=100 if scheme == "bsp" else 400)
    data["numerics"] = {"enabled": True, "eval_every": 1, **({"lr_rule": rule} if rule else {})}
    res = simulate(scenario_from_data(data))
    updates = res.summary["updates_to_target"]
    assert updates is not None, (scheme, rule, res.summary["final_accuracy"])
    return updates * res.updates[0].samples  # every update of these schemes holds the same samples


def test_default_rule_bsp_and_asp_need_the_same_samples(sim) -> None:
    bsp, asp = samples_to_target(sim, "bsp", None), samples_to_target(sim, "asp", None)
    assert abs(asp - bsp) <= 0.15 * bsp, (bsp, asp)


def test_per_update_rule_brings_back_the_n_fold_gap(sim) -> None:
    bsp, asp = samples_to_target(sim, "bsp", "per_update"), samples_to_target(sim, "asp", "per_update")
    assert 0.7 * N <= bsp / asp <= 1.3 * N, (bsp, asp)


def test_update_scale() -> None:
    assert update_scale("per_sample", 64, 256) == 0.25
    assert update_scale("per_sample", 256, 256) == 1.0
    assert update_scale("per_update", 64, 256) == 1.0
    with pytest.raises(ValueError, match="per_sample"):
        update_scale("per_push", 64, 256)


def test_sgd_scale_is_a_scaled_gradient_with_momentum() -> None:
    rng = np.random.default_rng(0)
    w, g1, g2 = rng.normal(size=(3, 5))
    a, b = SGD(0.1, momentum=0.9), SGD(0.1, momentum=0.9)
    wa = a.step(a.step(w, g1, 0.25), g2, 0.5)
    wb = b.step(b.step(w, 0.25 * g1), 0.5 * g2)
    np.testing.assert_allclose(wa, wb, rtol=0, atol=1e-15)


def test_runtime_sgd_applies_the_same_rule() -> None:
    torch = pytest.importorskip("torch")
    from lbsim.runtime.config import TrainingConfig
    from lbsim.runtime.model import SGDState

    rng = np.random.default_rng(1)
    w, g = rng.normal(size=(2, 7))
    for rule in ("per_sample", "per_update"):
        ref = SGD(0.3, momentum=0.5)
        expected = ref.step(w, g, update_scale(rule, 32, 128))
        state = SGDState(TrainingConfig(lr=0.3, momentum=0.5, lr_rule=rule), 128)
        wt = torch.tensor(w)
        state.step(wt, torch.tensor(g), 32)
        np.testing.assert_allclose(wt.numpy(), expected, rtol=0, atol=1e-12)
