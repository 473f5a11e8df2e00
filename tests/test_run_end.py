"""Records that add up, in every scheme and every way a run ends (lbsim.metrics.run_end).

Every scheme x {update target, time budget, sample target} x {ring all-reduce, parameter
server} (the parameter-server-only schemes are refused on a ring, checked too): every gradient
an update counts has its iteration row, so the batches of the non-dropped rows add up to
``summary.samples`` exactly; each row's parts add up to its span; a row the end cut ends at the
end and is marked. Two workers 2x apart with jitter, so runs end mid-iteration.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lbsim.errors import InputError
from lbsim.schemes.registry import scheme_configs

SCHEMES = sorted(scheme_configs())
STOPS = {"updates": {"updates": 23}, "budget": {"updates": None, "time_budget_s": 1.37},
         "samples": {"updates": None, "samples": 1000}}
PS_ONLY = {"asp", "ssp", "dssp", "elastic_bsp", "wbsp", "wbsp_overlap", "bsp_backup"}
VARIANTS = {"wbsp_overlap": {"name": "wbsp", "overlap": True}, "bsp_backup": {"name": "bsp", "backup_workers": 1}}


def scenario_data(sim, scheme, stop: str, network: str) -> dict:
    groups = [sim.group(2, 400.0, jitter=0.2), sim.group(2, 200.0, t0=0.01, jitter=0.2)]
    data = sim.data(groups, scheme=scheme, network=sim.ps(apply_s=0.001, latency_s=0.0005) if network == "ps" else sim.ring(),
                    global_batch=64, seed=1)
    data["workload"].update(STOPS[stop])
    return data


CASES = [(s, stop, net) for s, stop, net in itertools.product([*SCHEMES, *VARIANTS], STOPS, ("ring", "ps"))
         if net == "ps" or s not in PS_ONLY]


@pytest.mark.parametrize(("scheme", "stop", "network"), CASES)
def test_samples_identity_and_row_parts(sim, scheme: str, stop: str, network: str) -> None:
    from lbsim.scenario.loader import scenario_from_data
    from lbsim.simulator.run import simulate

    spec = VARIANTS.get(scheme, {"name": scheme, **({"lookahead": 4} if scheme == "elastic_bsp" else {})})
    res = simulate(scenario_from_data(scenario_data(sim, spec, stop, network)))
    c, s = res.iterations.columns, res.summary
    done = ~c["dropped"]
    assert int(c["batch"][done].sum()) == s["samples"] == int(res.updates.columns["samples"].sum()) > 0
    parts = c["fetch_s"] + c["compute_s"] + c["comm_s"] + c["wait_s"]
    np.testing.assert_allclose(parts, c["end_s"] - c["start_s"], rtol=0, atol=1e-9)
    assert (c["compute_s"] >= 0).all() and (c["comm_s"] >= -1e-12).all() and (c["wait_s"] >= -1e-12).all()
    assert (c["end_s"] <= s["sim_time_s"] + 1e-9).all()
    assert (np.abs(c["end_s"][c["cut"]] - s["sim_time_s"]) <= 1e-9).all()  # a cut row ends at the end
    assert (c["update"][done] >= 0).all()
    if stop == "samples":
        before_last = s["samples"] - res.updates[-1].samples
        assert before_last < 1000 <= s["samples"]  # the update that reaches the target is the last
    if stop == "budget":
        assert s["sim_time_s"] == 1.37
    # WBSP: a round usually closes after its steps ended (simulator/wbsp.py)
    sim.check_invariants(res, strict_update_times=False, update_before_end=spec["name"] != "wbsp")


@pytest.mark.parametrize("scheme", sorted(PS_ONLY))
def test_parameter_server_schemes_refuse_a_ring(sim, scheme: str) -> None:
    from lbsim.scenario.loader import scenario_from_data

    with pytest.raises(InputError, match="parameter server"):
        scenario_from_data(scenario_data(sim, VARIANTS.get(scheme, scheme), "updates", "ring"))


def test_a_budget_that_cuts_pulls_marks_the_rows(sim) -> None:
    """BSP on a parameter server, budget inside the first pull: the round's rows end at the budget, cut."""
    from lbsim.scenario.loader import scenario_from_data
    from lbsim.simulator.run import simulate

    groups = [sim.group(2, 100.0)]  # 0.5 s compute for 50 samples; 1 MB at 8 Gbit/s: 1 ms per transfer
    data = sim.data(groups, scheme="bsp", network=sim.ps(), global_batch=100, updates=None, time_budget_s=0.5025)
    res = simulate(scenario_from_data(data))
    assert res.summary["updates"] == 1 and res.summary["samples"] == 100
    rows = list(res.iterations)
    assert [(r.worker, r.cut, r.end_s) for r in rows] == [(0, True, 0.5025), (1, True, 0.5025)]


def test_run_end_rule_closed_forms() -> None:
    """RunEnd: a target is reached at >=; an update is made only strictly before the budget."""
    from lbsim.metrics.run_end import RunEnd

    end = RunEnd(update_target=5, sample_target=None, budget_s=2.0)
    assert [end.reached(u, 0) for u in (4, 5, 6)] == [False, True, True]
    assert [end.update_made(t) for t in (0.0, 1.999999, 2.0, 2.5)] == [True, True, False, False]
    assert end.fraction(1, 0, 0.5) == 0.25 and end.fraction(4, 0, 0.1) == 0.8 and end.fraction(9, 0, 9.0) == 1.0
    samples = RunEnd(sample_target=100)
    assert not samples.reached(10**6, 99) and samples.reached(0, 100) and samples.update_made(1e300)
    assert RunEnd().fraction(3, 3, 3.0) == 0.0 and not RunEnd().reached(10**9, 10**9)


@given(budget=st.floats(1e-6, 1e6), t=st.floats(0.0, 2e6))
def test_update_made_is_strictly_before_the_budget(budget: float, t: float) -> None:
    from lbsim.metrics.run_end import RunEnd

    assert RunEnd(budget_s=budget).update_made(t) == (t < budget)
    assert 0.0 <= RunEnd(budget_s=budget).fraction(0, 0, t) <= 1.0


@pytest.mark.parametrize(("network", "scheme", "fast"), [("ring", "bsp", True), ("ring", "bsp", False),
                                                          ("ps", "asp", False)])
def test_a_budget_at_an_update_moment_leaves_that_update_unmade(sim, network: str, scheme: str, fast: bool) -> None:
    """Budget B = the third update's moment: that update is not made, the run ends at B; one ulp later it is."""
    from lbsim.scenario.loader import scenario_from_data
    from lbsim.simulator.run import simulate

    groups = [sim.group(1, 100.0), sim.group(1, 50.0)]
    net = sim.ring() if network == "ring" else sim.ps(apply_s=0.001)

    def run(budget: float | None):  # -> RunResult
        data = sim.data(groups, scheme=scheme, network=net, global_batch=60, updates=None if budget else 5,
                        time_budget_s=budget)
        return simulate(scenario_from_data(data), fast=fast)

    t2 = run(None).updates[2].time_s
    at = run(t2)
    assert at.summary["updates"] == 2 and at.summary["sim_time_s"] == t2
    after = run(float(np.nextafter(t2, np.inf)))
    assert after.summary["updates"] == 3 and after.updates[2].time_s == t2
