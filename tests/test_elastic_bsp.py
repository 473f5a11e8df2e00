"""ElasticBSP (ZipLine barriers and budgets) and DSSP (dynamic staleness bound) in the simulator."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lbsim.schemes.dssp import controller
from lbsim.sizing.zipline import predict_ends, zipline

FAST_NET = dict(server_gbps=10_000.0, apply_s=0.0, latency_s=0.0)


def stable_cluster(sim):
    """Deterministic workers with distinct, constant iteration intervals and no queueing."""
    return [sim.group(1, 100.0, bw=10_000.0), sim.group(1, 70.0, bw=10_000.0), sim.group(1, 45.0, bw=10_000.0)]


def pushes_by_worker(result):
    times = defaultdict(list)
    for r in result.iterations:
        times[r.worker].append(result.updates[r.update].time_s)
    return {w: sorted(t) for w, t in times.items()}


def test_stable_intervals_fastest_wait_equals_ziplines_range(sim) -> None:
    res = sim.run(stable_cluster(sim), network=sim.ps(**FAST_NET), global_batch=300, updates=400,
                  gradient_bytes=1000, scheme={"name": "elastic_bsp", "lookahead": 10})
    sim.check_invariants(res)
    rows = res.decisions
    assert len(rows) >= 5
    for row in rows:
        assert row["fastest_wait_s"] == pytest.approx(row["predicted_range_s"], abs=1e-9)
        assert row["barrier_s"] == pytest.approx(row["predicted_barrier_s"], abs=1e-9)


def test_barrier_and_budgets_come_from_zipline_on_observed_pushes(sim) -> None:
    res = sim.run(stable_cluster(sim), network=sim.ps(**FAST_NET), global_batch=300, updates=300,
                  gradient_bytes=1000, scheme={"name": "elastic_bsp", "lookahead": 6}, seed=3)
    pushes = pushes_by_worker(res)
    for row in res.decisions:
        start, decided, barrier = row["start_s"], row["decided_s"], row["barrier_s"]
        budgets = [int(b) for b in row["budgets"].split()]
        for w, times in pushes.items():
            in_step = [t for t in times if start < t <= barrier + 1e-12]
            assert len(in_step) == budgets[w], (row, w)  # each worker ran exactly its budget
        # recompute ZipLine from the last two pushes each worker had made when the decision was taken
        seen = [[t for t in pushes[w] if start < t <= decided + 1e-12][-2:] for w in sorted(pushes)]
        choice = zipline(predict_ends([s[-1] for s in seen], [s[-1] - s[-2] for s in seen], 6))
        assert choice.barrier_s == pytest.approx(row["predicted_barrier_s"], abs=1e-12)
        assert choice.range_s == pytest.approx(row["predicted_range_s"], abs=1e-12)


def test_workers_wait_only_at_barriers(sim) -> None:
    res = sim.run(stable_cluster(sim), network=sim.ps(**FAST_NET), global_batch=300, updates=200,
                  gradient_bytes=1000, scheme="elastic_bsp")
    barriers = [r["barrier_s"] for r in res.decisions]
    waits = [r for r in res.iterations if r.wait_s > 1e-9]
    assert waits
    for r in waits:  # released with everyone at a barrier; the pull is near-instant on this network
        assert min(abs(r.end_s - b) for b in barriers) < 1e-6, r


def test_elastic_bsp_scenario_runs_and_logs_supersteps(tmp_path) -> None:
    from lbsim.cli import main

    assert main(["run", "scenarios/elastic_bsp.yaml", "--set", "workload.time_budget_s=60", "--out", str(tmp_path), "-q"]) == 0
    text = (tmp_path / "decisions.csv").read_text()
    assert text.startswith("superstep,start_s,decided_s,predicted_barrier_s,predicted_range_s,budgets")
    assert len(text.splitlines()) > 5


def test_dssp_controller_hand_example() -> None:
    # fastest p pushes every 1 s (last at 10), slowest every 3 s (last at 9): the slowest's next ends
    # are 12, 15, 18, ...; p's are 10, 11, 12, ... -> r = 2 lands exactly on 12.
    assert controller(10.0, 1.0, 9.0, 3.0, r_max=5) == 2
    assert controller(10.0, 1.0, 9.0, 3.0, r_max=1) == 1  # cannot reach 12: the closest allowed
    assert controller(10.0, 1.0, 10.0, 1.0, r_max=4) == 1  # equal speeds: one step aligns 11 with 11


def test_dssp_with_equal_bounds_is_ssp(sim) -> None:
    groups = [sim.group(1, 100.0), sim.group(1, 60.0), sim.group(1, 30.0)]
    kw = dict(network=sim.ps(apply_s=0.01), global_batch=300, updates=120,
              contention=[{"name": "scheduled", "workers": [0], "start_s": 5, "end_s": 12, "slowdown": 4}])
    ssp = sim.run(groups, scheme={"name": "ssp", "staleness": 2}, **kw)
    dssp = sim.run(groups, scheme={"name": "dssp", "staleness_low": 2, "staleness_high": 2}, **kw)
    key = lambda r: (r.worker, r.iteration, r.start_s, r.end_s, r.staleness)  # noqa: E731
    assert sorted(map(key, ssp.iterations)) == sorted(map(key, dssp.iterations))


def clocks_at_starts(result):
    """For every iteration start: (worker's clock, every worker's clock) from the records."""
    applied = sorted((result.updates[r.update].time_s, r.worker) for r in result.iterations)
    n = 1 + max(r.worker for r in result.iterations)
    out = []
    for r in result.iterations:
        clocks = [0] * n
        for t, w in applied:
            if t <= r.start_s + 1e-12:
                clocks[w] += 1
        out.append((clocks[r.worker], clocks))
    return out


@settings(max_examples=25, deadline=None)
@given(
    speeds=st.lists(st.sampled_from([20.0, 35.0, 50.0, 80.0, 130.0]), min_size=2, max_size=4),
    low=st.integers(0, 2),
    extra=st.integers(0, 4),
    seed=st.integers(0, 10),
)
def test_dssp_bounded_lead_never_lets_a_worker_exceed_the_upper_bound(sim, speeds, low, extra, seed) -> None:
    groups = [sim.group(1, v, jitter=0.2) for v in speeds]
    res = sim.run(groups, network=sim.ps(apply_s=0.001), global_batch=40 * len(speeds), updates=60, seed=seed,
                  scheme={"name": "dssp", "staleness_low": low, "staleness_high": low + extra, "rule": "bounded_lead"})
    for clock, clocks in clocks_at_starts(res):
        assert clock - min(clocks) <= low + extra


def test_dssp_paper_rule_lets_the_lead_grow_beyond_the_upper_bound(sim) -> None:
    """The paper's credit, spent one per push and granted again whenever the fastest runs out."""
    groups = [sim.group(1, 100.0, jitter=0.05), sim.group(1, 25.0, jitter=0.05)]
    kw = dict(network=sim.ps(apply_s=0.0), global_batch=100, updates=300)
    scheme = {"name": "dssp", "staleness_low": 1, "staleness_high": 4}
    paper = sim.run(groups, scheme=scheme, **kw)
    bounded = sim.run(groups, scheme={**scheme, "rule": "bounded_lead"}, **kw)
    asp = sim.run(groups, scheme="asp", **kw)
    assert max(c - min(cs) for c, cs in clocks_at_starts(bounded)) <= 4
    assert max(c - min(cs) for c, cs in clocks_at_starts(paper)) > 3 * 4
    assert paper.summary["throughput_samples_per_s"] >= 0.95 * asp.summary["throughput_samples_per_s"]
    assert bounded.summary["throughput_samples_per_s"] < 0.9 * asp.summary["throughput_samples_per_s"]


def test_dssp_lets_the_fastest_run_further_than_ssp_low(sim) -> None:
    groups = [sim.group(1, 100.0), sim.group(1, 25.0)]
    kw = dict(network=sim.ps(apply_s=0.0), global_batch=100, updates=200)
    ssp = sim.run(groups, scheme={"name": "ssp", "staleness": 1}, **kw)
    dssp = sim.run(groups, scheme={"name": "dssp", "staleness_low": 1, "staleness_high": 6}, **kw)
    assert dssp.summary["controller_grants"] > 0
    lead = max(c - min(cs) for c, cs in clocks_at_starts(dssp))
    assert lead > 1 + 1  # ran beyond s_L (+1: the start of the next iteration)
    assert dssp.summary["throughput_samples_per_s"] >= ssp.summary["throughput_samples_per_s"]


def test_zipline_choice_matches_predicted_ends_shape() -> None:
    ends = predict_ends([0.0, 0.5], [1.0, 1.5], 4)
    assert ends.shape == (2, 4)
    assert np.allclose(ends[1], [2.0, 3.5, 5.0, 6.5])
