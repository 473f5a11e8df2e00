"""Aggregation rules (lbsim.aggregation): weighted mean, coordinate-wise median and trimmed mean."""

from __future__ import annotations

import numpy as np
import pytest

from lbsim.aggregation import aggregate, check_tolerance, coordinate_median, trimmed_mean, weighted_mean


def test_weighted_mean_equals_the_concatenated_batch_mean() -> None:
    rng = np.random.default_rng(0)
    batches = [1, 7, 30, 250, 12]
    samples = [rng.normal(size=(b, 6)) for b in batches]  # per-sample gradients
    worker_means = np.stack([s.mean(axis=0) for s in samples])
    concatenated = np.concatenate(samples).mean(axis=0)
    np.testing.assert_allclose(weighted_mean(worker_means, batches), concatenated, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(aggregate("mean", worker_means, batches), concatenated, rtol=1e-12, atol=1e-15)
    # the plain mean over workers is not it (schemes.md: "a plain mean over workers is wrong")
    assert not np.allclose(worker_means.mean(axis=0), concatenated)


def _honest_and_one_byzantine(n: int = 7, d: int = 50) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    truth = rng.normal(size=d)
    grads = truth + 0.05 * rng.normal(size=(n, d))
    grads[2] = -1e6 * truth  # huge, sign-flipped
    return truth, grads, np.full(n, 32)


@pytest.mark.parametrize("rule", ["median", "trimmed_mean"])
def test_robust_rules_resist_one_byzantine_vector(rule: str) -> None:
    truth, grads, batches = _honest_and_one_byzantine()
    honest = np.delete(grads, 2, axis=0)
    g = aggregate(rule, grads, batches, f=1)
    assert np.all(g >= honest.min(axis=0) - 1e-12) and np.all(g <= honest.max(axis=0) + 1e-12)
    assert np.linalg.norm(g - truth) < 0.1 * np.linalg.norm(truth)
    assert np.dot(g, truth) > 0


def test_the_mean_does_not_resist_it() -> None:
    truth, grads, batches = _honest_and_one_byzantine()
    g = aggregate("mean", grads, batches)
    assert np.linalg.norm(g - truth) > 1e4 * np.linalg.norm(truth)
    assert np.dot(g, truth) < 0  # the attacker flipped the update


def test_trimmed_mean_drops_f_largest_and_f_smallest_per_coordinate() -> None:
    grads = np.array([[1.0, 10.0], [2.0, -5.0], [3.0, 0.0], [100.0, 1.0], [-50.0, 2.0]])
    np.testing.assert_allclose(trimmed_mean(grads, 1), [(1 + 2 + 3) / 3, (0 + 1 + 2) / 3])
    np.testing.assert_allclose(trimmed_mean(grads, 2), [2.0, 1.0])
    np.testing.assert_allclose(trimmed_mean(grads, 0), grads.mean(axis=0))  # f = 0: unweighted mean
    np.testing.assert_allclose(coordinate_median(grads), [2.0, 1.0])
    np.testing.assert_allclose(coordinate_median(grads[:4]), [2.5, 0.5])  # even n: middle two averaged


@pytest.mark.parametrize("rule,n,f,ok", [
    ("trimmed_mean", 3, 1, True), ("trimmed_mean", 2, 1, False), ("trimmed_mean", 4, 2, False),
    ("trimmed_mean", 5, 2, True), ("median", 4, 1, True), ("median", 4, 2, False), ("median", 1, 0, True),
    ("mean", 4, 0, True), ("mean", 4, 1, False), ("trimmed_mean", 4, -1, False), ("krum", 4, 1, False),
])
def test_tolerance_needs_2f_below_n(rule: str, n: int, f: int, ok: bool) -> None:
    if ok:
        check_tolerance(rule, n, f)
    else:
        with pytest.raises(ValueError):
            check_tolerance(rule, n, f)


def test_loft_rejects_a_tolerance_the_cluster_cannot_give(sim) -> None:  # type: ignore[no-untyped-def]
    from lbsim.errors import InputError

    groups = [sim.group(4)]
    with pytest.raises(InputError) as err:
        sim.scenario(groups, network=sim.ring(), scheme={"name": "loft", "tolerance_f": 2}, global_batch=64)
    assert err.value.path == "scheme.tolerance_f" and "2f < n" in err.value.message
    with pytest.raises(InputError) as err:
        sim.scenario(groups, network=sim.ring(), scheme={"name": "loft", "aggregation": "mean", "tolerance_f": 1}, global_batch=64)
    assert err.value.path == "scheme.tolerance_f"
    sim.scenario(groups, network=sim.ring(), scheme={"name": "loft", "aggregation": "median", "tolerance_f": 1}, global_batch=64)
