"""Numerics mode in the simulator: real gradients on the weight versions the schedule produces."""

from __future__ import annotations

import numpy as np
import pytest

from lbsim.cli import main

NUM = {"enabled": True, "eval_every": 5}


def with_numerics(sim, groups, *, scheme, numerics=None, **kw):
    data = sim.data(groups, scheme=scheme, **kw)
    data["numerics"] = {**NUM, **(numerics or {})}
    from lbsim.scenario.loader import scenario_from_data
    from lbsim.simulator.run import simulate

    return simulate(scenario_from_data(data))


def accuracy_by_update(result):
    return {row["update"]: row["accuracy"] for row in result.numerics}


def test_bsp_and_lbbsp_learn_identically_per_update(sim) -> None:
    """Same data order, batch-weighted aggregation: LB-BSP's update is BSP's (to rounding)."""
    groups = [sim.group(1, 300.0), sim.group(1, 150.0), sim.group(2, 60.0)]
    kw = dict(network=sim.ring(), global_batch=128, updates=60, seed=5)
    bsp = with_numerics(sim, groups, scheme="bsp", **kw)
    lb = with_numerics(sim, groups, scheme={"name": "lbbsp", "variant": "cpu", "predictor": "last"}, **kw)
    assert {r.batch for r in lb.iterations} != {32}  # LB-BSP really split unevenly
    a, b = accuracy_by_update(bsp), accuracy_by_update(lb)
    assert a.keys() == b.keys()
    for u in a:
        assert a[u] == pytest.approx(b[u], abs=1e-12)
    losses = [(x["loss"], y["loss"]) for x, y in zip(bsp.numerics, lb.numerics, strict=True)]
    assert all(abs(x - y) < 1e-9 for x, y in losses)
    # and LB-BSP got there sooner in simulated time
    assert lb.summary["sim_time_s"] < 0.8 * bsp.summary["sim_time_s"]


def test_asp_staleness_grows_with_workers_and_hurts_accuracy_per_update(sim) -> None:
    out = {}
    for n in (2, 16):
        res = with_numerics(sim, [sim.group(n, 100.0, jitter=0.1)], scheme="asp", network=sim.ps(apply_s=0.0),
                            global_batch=16 * n, updates=120, seed=1,
                            numerics={"model": "mlp", "learning_rate": 0.5})
        out[n] = (res.summary["staleness_mean"], accuracy_by_update(res))
    assert out[16][0] > 5 * out[2][0]
    early = [u for u in out[2][1] if 20 <= u <= 120]
    mean_2 = np.mean([out[2][1][u] for u in early])
    mean_16 = np.mean([out[16][1][u] for u in early])
    assert mean_2 > mean_16 + 0.05, (mean_2, mean_16)


@pytest.mark.parametrize("rule", ["median", "trimmed_mean"])
def test_one_byzantine_worker_breaks_the_mean_not_robust_rules(sim, rule) -> None:
    groups = [sim.group(8, 100.0)]
    byz = {"byzantine": {"workers": [3], "attack": "sign_flip", "scale": 20.0}}
    kw = dict(network=sim.ring(), global_batch=256, updates=150, seed=2)
    clean = with_numerics(sim, groups, scheme={"name": "loft", "aggregation": "mean", "tolerance_f": 0}, **kw)
    mean = with_numerics(sim, groups, scheme={"name": "loft", "aggregation": "mean", "tolerance_f": 0}, numerics=byz, **kw)
    robust = with_numerics(sim, groups, scheme={"name": "loft", "aggregation": rule, "tolerance_f": 1}, numerics=byz, **kw)
    assert clean.summary["final_accuracy"] > 0.9
    assert mean.summary["final_accuracy"] < 0.5
    assert robust.summary["final_accuracy"] > 0.88
    assert robust.summary["time_to_target_s"] is not None and mean.summary["time_to_target_s"] is None


def test_wbsp_trains_by_model_averaging(sim) -> None:
    groups = [sim.group(1, 400.0), sim.group(1, 100.0)]
    res = with_numerics(sim, groups, scheme="wbsp", network=sim.ps(), global_batch=64, updates=60, seed=3)
    assert res.summary["final_accuracy"] > 0.9
    assert res.summary["updates_to_target"] is not None


def test_summary_fields_and_numerics_csv(tmp_path) -> None:
    assert main(["run", "scenarios/ec2_mixed.yaml", "--set", "numerics.enabled=true", "--set", "workload.time_budget_s=120",
                 "--out", str(tmp_path), "-q"]) == 0
    import json

    s = json.loads((tmp_path / "summary.json").read_text())
    for key in ("final_loss", "final_accuracy", "time_to_target_s", "updates_to_target"):
        assert key in s
    lines = (tmp_path / "numerics.csv").read_text().splitlines()
    assert lines[0] == "update,time_s,loss,accuracy"
    assert len(lines) >= 4  # update 0, every 10 updates, and the final state


def test_numerics_off_writes_no_curve_and_changes_no_timing(sim, tmp_path) -> None:
    groups = [sim.group(1, 200.0), sim.group(1, 50.0, jitter=0.2)]
    kw = dict(network=sim.ps(apply_s=0.01), global_batch=100, updates=40, seed=4)
    for scheme in ("bsp", "ssp", "wbsp"):
        plain = sim.run(groups, scheme=scheme, **kw)
        learned = with_numerics(sim, groups, scheme=scheme, **kw)
        assert plain.numerics == ()
        assert plain.iterations == learned.iterations and plain.updates == learned.updates


def test_determinism_with_numerics(tmp_path) -> None:
    outs = []
    for i in range(2):
        d = tmp_path / str(i)
        assert main(["run", "scenarios/ec2_mixed.yaml", "--scheme", "ssp", "--set", "numerics.enabled=true",
                     "--set", "workload.time_budget_s=60", "--out", str(d), "-q"]) == 0
        outs.append([(d / f).read_bytes() for f in ("summary.json", "numerics.csv", "iterations.csv")])
    assert outs[0] == outs[1]


def test_compare_reports_time_to_target_speedup(tmp_path) -> None:
    assert main(["compare", "scenarios/ec2_mixed.yaml", "--schemes", "bsp,lbbsp", "--set", "numerics.enabled=true",
                 "--out", str(tmp_path), "-q"]) == 0
    header, bsp, lb = (tmp_path / "compare.csv").read_text().splitlines()
    cols = header.split(",")
    i = cols.index("speedup_time_to_target_vs_first")
    assert float(bsp.split(",")[i]) == 1.0
    assert float(lb.split(",")[i]) > 1.5
