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
    from simulator.run import simulate

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
    from simulator.run import simulate

    groups = [sim.group(2, 100.0)]  # 0.5 s compute for 50 samples; 1 MB at 8 Gbit/s: 1 ms per transfer
    data = sim.data(groups, scheme="bsp", network=sim.ps(), global_batch=100, updates=None, time_budget_s=0.5025)
    res = simulate(scenario_from_data(data))
    assert res.summary["updates"] == 1 and res.summary["samples"] == 100
    rows = list(res.iterations)
    assert [(r.worker, r.cut, r.end_s) for r in rows] == [(0, True, 0.5025), (1, True, 0.5025)]
