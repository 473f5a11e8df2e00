"""Analytic oracles (design.md, Testing recipe) and record invariants on a few runs.

* Homogeneous deterministic BSP on a ring: exactly ``n b / (t(b) + t_comm)`` samples/s.
* Homogeneous deterministic BSP on a parameter server: the round length from the PS model
  (FIFO server NIC per direction, worker-link floor, serial apply) worked out independently.
* ASP with negligible communication: throughput = sum of the workers' own rates.
* SSP with staleness 0 = BSP's schedule on a parameter server, worker by worker.
"""

from __future__ import annotations

import pytest

from lbsim.scenario.loader import load_scenario
from lbsim.simulator.run import simulate


def bytes_per_s(gbps: float) -> float:
    return gbps * 1e9 / 8


def throughput(res) -> float:
    """Samples in updates over the run's end (the last update here): computed from the records."""
    return sum(u.samples for u in res.updates) / res.updates[-1].time_s


# --- BSP, ring all-reduce ---------------------------------------------------------------------

@pytest.mark.parametrize(
    ("n", "b", "t0", "speed", "alpha", "gbps", "grad"),
    [
        (1, 32, 0.1, 100.0, 0.001, 8.0, 1_000_000),
        (2, 64, 0.1, 100.0, 0.0, 8.0, 1_000_000),
        (2, 100, 0.0, 37.0, 0.0005, 10.0, 97_000_000),
        (4, 100, 0.03, 250.0, 0.00005, 25.0, 102_000_000),
        (16, 256, 0.2, 900.0, 0.0001, 3.0, 44_000_000),
        (16, 7, 0.01, 50.0, 0.002, 100.0, 5_000),
    ],
)
def test_bsp_ring_throughput_is_nb_over_t_plus_comm(sim, n, b, t0, speed, alpha, gbps, grad):
    updates = 40
    res = sim.run([sim.group(n, speed, t0=t0, bw=gbps)], network=sim.ring(alpha_s=alpha), scheme="bsp",
                  global_batch=n * b, gradient_bytes=grad, updates=updates)
    t_b = t0 + b / speed
    t_comm = 0.0 if n == 1 else 2 * (n - 1) * alpha + 2 * (n - 1) / n * grad / bytes_per_s(gbps)
    expected = n * b / (t_b + t_comm)
    assert throughput(res) == pytest.approx(expected, rel=1e-12)
    # the summary rounds to 12 significant digits
    assert res.summary["throughput_samples_per_s"] == pytest.approx(expected, rel=1e-11)
    assert res.summary["sim_time_s"] == pytest.approx(updates * (t_b + t_comm), rel=1e-11)
    assert [u.time_s for u in res.updates] == pytest.approx([(k + 1) * (t_b + t_comm) for k in range(updates)], rel=1e-12)
    assert res.summary["samples"] == updates * n * b
    sim.check_invariants(res)


def test_bsp_ring_explicit_bandwidth_overrides_worker_links(sim):
    n, b, grad = 4, 50, 80_000_000
    res = sim.run([sim.group(2, 100.0, bw=1.0), sim.group(2, 100.0, bw=100.0)],
                  network=sim.ring(alpha_s=0.0, bandwidth_gbps=16.0), scheme="bsp",
                  global_batch=n * b, gradient_bytes=grad, updates=5)
    t_comm = 2 * 3 / 4 * grad / bytes_per_s(16.0)
    assert throughput(res) == pytest.approx(n * b / (0.5 + t_comm), rel=1e-12)


def test_bsp_ring_runs_at_the_slowest_link(sim):
    n, b, grad = 3, 50, 80_000_000
    res = sim.run([sim.group(2, 100.0, bw=10.0), sim.group(1, 100.0, bw=2.5)], network=sim.ring(),
                  scheme="bsp", global_batch=n * b, gradient_bytes=grad, updates=5)
    t_comm = 2 * 2 / 3 * grad / bytes_per_s(2.5)
    assert throughput(res) == pytest.approx(n * b / (0.5 + t_comm), rel=1e-12)


# --- BSP, parameter server --------------------------------------------------------------------

def first_update_s(n, t_b, h, o, apply_each, latency_s):
    """All n pushes are requested at t_b; the k-th (FIFO) holds the server NIC until k h and cannot
    beat the worker link o: it arrives at t_b + max(k h, o) + L. Applies are serial."""
    applied = 0.0
    for k in range(1, n + 1):
        applied = max(applied, t_b + max(k * h, o) + latency_s) + apply_each
    return applied


@pytest.mark.parametrize(
    ("n", "worker_gbps", "server_gbps", "shards", "apply_s", "latency_s"),
    [
        (1, 10.0, 25.0, 1, 0.005, 0.0001),
        (4, 10.0, 100.0, 2, 0.02, 0.0),  # n h <= o: every transfer is bound by the worker link
        (8, 2.0, 100.0, 4, 0.001, 0.0005),
        (3, 4.0, 12.0, 1, 0.0, 0.001),  # n h == o exactly
    ],
)
def test_bsp_parameter_server_worker_link_bound_throughput(sim, n, worker_gbps, server_gbps, shards, apply_s, latency_s):
    """Worker-link bound (n h <= o): all transfers of a round end together, rounds are identical:
    round = t(b) + (o + L) + n a / k + (o + L), throughput n b / round."""
    b, t0, speed, grad, updates = 64, 0.05, 200.0, 50_000_000, 6
    h, o = grad / (shards * bytes_per_s(server_gbps)), grad / bytes_per_s(worker_gbps)
    assert n * h <= o * (1 + 1e-12)
    res = sim.run([sim.group(n, speed, t0=t0, bw=worker_gbps)],
                  network=sim.ps(server_gbps=server_gbps, shards=shards, apply_s=apply_s, latency_s=latency_s),
                  scheme="bsp", global_batch=n * b, gradient_bytes=grad, updates=updates)
    t_b = t0 + b / speed
    round_s = t_b + 2 * (o + latency_s) + n * apply_s / shards
    pull_s = o + latency_s
    assert [u.time_s for u in res.updates] == pytest.approx([(k + 1) * round_s - pull_s for k in range(updates)], rel=1e-12)
    assert sum(u.samples for u in res.updates[:-1]) / ((updates - 1) * round_s) == pytest.approx(n * b / round_s, rel=1e-12)
    for r in res.iterations:
        if r.update < updates - 1:
            assert r.comm_s == pytest.approx(2 * pull_s, rel=1e-12)
            assert r.end_s == pytest.approx((r.iteration + 1) * round_s, rel=1e-12)
    sim.check_invariants(res)


@pytest.mark.parametrize(("n", "apply_s", "latency_s"), [(4, 0.005, 0.0001), (6, 0.05, 0.0), (3, 0.0, 0.002)])
def test_bsp_parameter_server_nic_bound_first_round(sim, n, apply_s, latency_s):
    """Server-NIC bound (h > o): pushes and pulls queue FIFO at the server, one h apart."""
    b, t0, speed, grad, worker_gbps, server_gbps = 64, 0.05, 200.0, 50_000_000, 40.0, 10.0
    h, o = grad / bytes_per_s(server_gbps), grad / bytes_per_s(worker_gbps)
    assert h > o
    res = sim.run([sim.group(n, speed, t0=t0, bw=worker_gbps)],
                  network=sim.ps(server_gbps=server_gbps, apply_s=apply_s, latency_s=latency_s),
                  scheme="bsp", global_batch=n * b, gradient_bytes=grad, updates=3)
    t_b = t0 + b / speed
    u0 = first_update_s(n, t_b, h, o, apply_s, latency_s)
    assert res.updates[0].time_s == pytest.approx(u0, rel=1e-12)
    # everyone pulls at u0, FIFO: the k-th pull ends at u0 + k h + L; the same k-th worker pushed k-th
    ends = sorted(r.end_s for r in res.iterations if r.iteration == 0)
    assert ends == pytest.approx([u0 + k * h + latency_s for k in range(1, n + 1)], rel=1e-12)


# --- ASP: throughput is the sum of the workers' own rates ---------------------------------------

def test_asp_throughput_is_sum_of_worker_rates(sim):
    speeds, t0, b = (100.0, 61.0, 37.0, 23.0), 0.05, 50
    groups = [sim.group(1, s, t0=t0, bw=1e6) for s in speeds]
    res = sim.run(groups, network=sim.ps(server_gbps=1e6, apply_s=0.0, latency_s=0.0), scheme="asp",
                  global_batch=b * len(speeds), gradient_bytes=1, updates=3000)
    rates = [b / (t0 + b / s) for s in speeds]
    assert throughput(res) == pytest.approx(sum(rates), rel=0.01)
    # and each worker contributes its own rate (iterations counted from the records)
    end = res.updates[-1].time_s
    for w, rate in enumerate(rates):
        done = sum(1 for r in res.iterations if r.worker == w)
        assert done * b / end == pytest.approx(rate, rel=0.01)
    sim.check_invariants(res, strict_update_times=False)  # apply_s = 0: simultaneous updates allowed


def test_asp_is_far_from_bsp_rate_on_the_same_cluster(sim):
    """Sanity of the oracle's teeth: BSP is paced by the slowest worker, ASP is not."""
    speeds, b = (100.0, 20.0), 50
    kw = dict(network=sim.ps(server_gbps=1e6, apply_s=0.0, latency_s=0.0), global_batch=2 * b, gradient_bytes=1)
    groups = [sim.group(1, s, bw=1e6) for s in speeds]
    asp = sim.run(groups, scheme="asp", updates=600, **kw)
    bsp = sim.run(groups, scheme="bsp", updates=100, **kw)
    assert throughput(asp) == pytest.approx(sum(speeds), rel=0.01)
    assert throughput(bsp) == pytest.approx(2 * 20.0, rel=1e-6)  # 2 b per round of b / 20 s


# --- SSP(0) = BSP on a parameter server -------------------------------------------------------

SSP0_GROUPS = [(100.0, 0.05, 8.0), (70.0, 0.05, 4.0), (40.0, 0.02, 8.0)]
SSP0_CONTENTION = [
    {"name": "scheduled", "workers": [0], "start_s": 1.3, "end_s": 4.1, "slowdown": 3.0},
    {"name": "scheduled", "workers": [2], "start_s": 6.0, "end_s": 9.0, "slowdown": 0.5},
    {"name": "scheduled", "workers": [1], "start_s": 3.0, "end_s": 5.0, "slowdown": 2.0, "target": "network"},
]


def timeline(res):
    return {(r.worker, r.iteration): (r.start_s, r.end_s, r.compute_s) for r in res.iterations}


def _ssp0_vs_bsp(sim, server_gbps):
    groups = [sim.group(1, s, t0=t0, bw=bw) for s, t0, bw in SSP0_GROUPS]
    n, rounds = len(groups), 8
    kw = dict(network=sim.ps(server_gbps=server_gbps, apply_s=0.01, latency_s=0.001), global_batch=300,
              gradient_bytes=10_000_000, contention=SSP0_CONTENTION)
    bsp = sim.run(groups, scheme="bsp", updates=rounds, **kw)
    ssp = sim.run(groups, scheme={"name": "ssp", "staleness": 0}, updates=n * rounds, **kw)
    sim.check_invariants(bsp)
    sim.check_invariants(ssp)
    tb, ts = timeline(bsp), timeline(ssp)
    # the last round is cut differently (each run ends at its final update): compare the rest
    common = sorted(set(tb) & set(ts))
    assert set(common) >= {(w, i) for w in range(n) for i in range(rounds - 1)}
    return tb, ts, common


def test_ssp_staleness_zero_matches_bsp_timeline(sim):
    # the server NIC is fast (800 Gbit/s): every transfer is bound by its worker's own link, so the order
    # in which simultaneous pulls queue at the server does not matter
    tb, ts, common = _ssp0_vs_bsp(sim, server_gbps=800.0)
    for k in common:
        assert ts[k] == pytest.approx(tb[k], abs=1e-9), k
    # non-trivial: the contention window stretched some iterations, and workers waited for each other
    assert len({round(tb[w, 1][2], 9) for w in range(3)}) == 3
    assert tb[0, 1][2] > tb[0, 3][2]


def test_ssp_staleness_zero_matches_bsp_timeline_when_server_nic_is_the_bottleneck(sim):
    """Same, with the server NIC the bottleneck (8 Gbit/s: pulls queue behind each other).

    Failed on HEAD cf4aa0f: at the barrier BSP released workers in contribution order (the fastest
    pulled first, the slowest last) while SSP let the worker whose push completed the clock pull first
    (the slowest). Both are FIFO, but the tie-break differed, so SSP(0) rounds were shorter than BSP's.
    """
    tb, ts, common = _ssp0_vs_bsp(sim, server_gbps=8.0)
    diff = {k: (tb[k], ts[k]) for k in common if max(abs(a - b) for a, b in zip(tb[k], ts[k], strict=False)) > 1e-9}
    first = dict(sorted(diff.items())[:3])
    assert not diff, f"{len(diff)} (worker, iteration) differ; first: ((BSP start, end, compute), (SSP0 ...)): {first}"


# --- invariants on every record of a few runs -------------------------------------------------

def _runs(sim):
    hetero = [sim.group(2, 120.0, t0=0.02, bw=10.0, jitter=0.1), sim.group(2, 45.0, t0=0.05, bw=5.0)]
    markov = [{"name": "markov", "workers": "all", "mean_off_s": 3.0, "mean_on_s": 1.0, "slowdown_min": 1.5,
               "slowdown_max": 4.0, "target": "both"}]
    net = sim.ps(server_gbps=10.0, shards=2, apply_s=0.004, latency_s=0.0002)
    common = dict(global_batch=200, gradient_bytes=20_000_000, contention=markov, seed=3)
    yield "bsp-ring", sim.scenario(hetero, network=sim.ring(alpha_s=0.0001), scheme="bsp", updates=60, **common)
    yield "bsp-ps", sim.scenario(hetero, network=net, scheme="bsp", updates=60, **common)
    yield "static-ps", sim.scenario(hetero, network=net, scheme="static", updates=60, **common)
    yield "ssp2", sim.scenario(hetero, network=net, scheme={"name": "ssp", "staleness": 2}, updates=200, **common)
    yield "asp", sim.scenario(hetero, network=net, scheme="asp", updates=200, **common)
    yield "asp-budget", sim.scenario(hetero, network=net, scheme="asp", updates=None, time_budget_s=20.0, **common)
    yield "ec2_mixed", load_scenario(sim.REPO / "scenarios" / "ec2_mixed.yaml")


def test_record_invariants(sim):
    for name, scenario in _runs(sim):
        res = simulate(scenario)
        sim.check_invariants(res)
        if scenario.workload.time_budget_s is not None:
            assert res.summary["sim_time_s"] <= scenario.workload.time_budget_s
            assert all(r.end_s <= scenario.workload.time_budget_s for r in res.iterations), name
        else:
            assert res.summary["sim_time_s"] == pytest.approx(res.updates[-1].time_s, rel=1e-11), name
            assert len(res.updates) == scenario.workload.updates, name
        if scenario.scheme.kind in ("asp", "ssp"):
            assert {u.gradients for u in res.updates} == {1}, name
        else:
            assert all(r.staleness == 0 for r in res.iterations), name
