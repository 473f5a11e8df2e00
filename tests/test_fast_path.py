"""The synchronous fast path (simulator/fast_sync.py) gives exactly the event path's results.

Every case runs one scenario twice — ``simulate(sc)`` (fast path where it applies) and
``simulate(sc, fast=False)`` (SimPy events) — and compares every field of every iteration and
update record (exact float equality, same order), the summary, the decisions, the progress
callback's readings and, with numerics on, the learning curve. Scenarios cover heterogeneous
fleets, every contention kind (jitter, Markov on compute and network, scheduled, the three trace
formats), exact-arithmetic ties, time budgets (one hit exactly at an update), fixed ring
bandwidth, one worker, nodes (shared NICs, intra links, ring and hierarchical, tabulated compute
curves, shared-node slowdown, overlap), and bsp / static / every LB-BSP variant and predictor / LOFT without data.
Speed is never asserted here (benchmarks/bench_simulator.py measures it).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lbsim.metrics.records import ITERATION_COLUMNS, IterationRecord, IterationTable
from lbsim.scenario.loader import load_scenario, scenario_from_data
from lbsim.schemes.base import WorkerColumns, observation_columns
from lbsim.simulator.env import SimEnv
from lbsim.simulator.fast_sync import ineligible
from lbsim.simulator.run import simulate

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO / "scenarios" / "traces"


def _group(count, speed, *, t0=0.0, bw=8.0, jitter=0.0, max_batch=100_000, instance="g4dn.xlarge"):
    return {"instance": instance, "count": count, "t0_s": t0, "samples_per_s": speed, "max_batch": max_batch,
            "bandwidth_gbps": bw, "jitter_cv": jitter}


def _scenario(groups, *, scheme="bsp", global_batch=None, updates=40, budget=None, contention=(), seed=3,
              network=None, numerics=None, gradient_bytes=2_000_000):
    n = sum(g["count"] for g in groups)
    data = {
        "seed": seed,
        "workload": {"model": "resnet50_imagenet", "global_batch": global_batch or 32 * n, "updates": updates,
                     "time_budget_s": budget, "gradient_bytes": gradient_bytes},
        "cluster": {"groups": groups},
        "network": network or {"name": "ring_allreduce", "alpha_s": 1e-5},
        "contention": list(contention),
        "scheme": {"name": scheme} if isinstance(scheme, str) else scheme,
    }
    if numerics is not None:
        data["numerics"] = numerics
    return scenario_from_data(data)


MIXED = [_group(3, 120.0, t0=0.02, bw=10.0, jitter=0.1), _group(2, 45.0, t0=0.05, bw=5.0, jitter=0.05),
         _group(2, 300.0, t0=0.0, bw=2.0, jitter=0.0, instance="c5.xlarge")]
MARKOV_BOTH = {"name": "markov", "workers": "all", "mean_off_s": 2.0, "mean_on_s": 1.0, "slowdown_min": 1.5,
               "slowdown_max": 4.0, "target": "both"}
SCHEDULED = {"name": "scheduled", "workers": [1, 4], "start_s": 1.0, "end_s": 3.5, "slowdown": 2.5}
SCHEDULED_NET = {"name": "scheduled", "workers": [0], "start_s": 0.5, "slowdown": 3.0, "target": "network"}
EVERYTHING = [MARKOV_BOTH, SCHEDULED, SCHEDULED_NET]


def assert_same(fast, slow) -> None:
    assert isinstance(fast.iterations, IterationTable)
    assert len(fast.iterations) == len(slow.iterations)
    for name in ITERATION_COLUMNS:  # column by column: exact equality, same order
        a, b = fast.iterations.columns[name], slow.iterations.columns[name]
        assert np.array_equal(a, b), (name, np.flatnonzero(a != b)[:5])
    assert list(fast.iterations) == list(slow.iterations)
    assert fast.updates == slow.updates
    assert fast.summary == slow.summary
    assert fast.decisions == slow.decisions
    assert fast.numerics == slow.numerics


def both(sc):
    seen: dict[bool, list[float]] = {True: [], False: []}
    fast = simulate(sc, seen[True].append)
    slow = simulate(sc, seen[False].append, fast=False)
    assert seen[True] == seen[False]
    return fast, slow


def check(sc):
    workers = __import__("lbsim.scenario.resolve", fromlist=["x"]).resolve_workers(sc)
    fast, slow = both(sc)
    assert_same(fast, slow)
    assert fast.iterations, "the case must produce records"
    return fast, workers


SCHEMES = [
    "bsp",
    "static",
    {"name": "lbbsp", "variant": "cpu", "predictor": "last"},
    {"name": "lbbsp", "variant": "cpu", "predictor": "ema"},
    {"name": "lbbsp", "variant": "cpu", "predictor": "oracle"},
    {"name": "lbbsp", "variant": "cpu", "predictor": "narx", "narx_warmup": 5},
    {"name": "lbbsp", "variant": "gpu", "window": 2},
    {"name": "lbbsp", "variant": "gpu_model"},
    {"name": "lbbsp", "variant": "auto", "predictor": "narx", "narx_warmup": 5},
    {"name": "lbbsp", "variant": "auto", "initial": "even", "predictor": "ema"},
    {"name": "loft", "aggregation": "mean", "tolerance_f": 0},
]


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda s: s if isinstance(s, str) else "-".join(str(v) for v in s.values()))
def test_every_sync_scheme_with_every_contention(scheme) -> None:
    check(_scenario(MIXED, scheme=scheme, contention=EVERYTHING, updates=60))


@pytest.mark.parametrize("scheme", ["bsp", {"name": "lbbsp", "variant": "cpu", "predictor": "last"}])
def test_exact_ties_keep_the_event_order(scheme) -> None:
    """Identical workers without jitter finish at the same instants: order must follow SimPy's."""
    groups = [_group(4, 100.0), _group(2, 50.0), _group(2, 100.0, t0=0.0)]
    cont = [{"name": "scheduled", "workers": [2, 5], "start_s": 0.5, "end_s": 2.0, "slowdown": 2.0}]
    fast, _ = check(_scenario(groups, scheme=scheme, contention=cont, global_batch=400, updates=30))
    ends = fast.iterations.columns["start_s"] + fast.iterations.columns["compute_s"]
    assert len(set(ends.tolist())) < len(ends)  # the case really has ties


@pytest.mark.parametrize("budget", [2.0, 0.2, 1e-4])
def test_time_budget(budget) -> None:
    """Budgets that end the run mid-round, after a few rounds and before the first update."""
    fast, slow = both(_scenario(MIXED, contention=EVERYTHING, updates=None, budget=budget))
    assert_same(fast, slow)
    assert fast.summary["sim_time_s"] == budget


def test_budget_hit_exactly_at_an_update() -> None:
    """A budget equal to update 2's time: the budget's timeout wins (SimPy order), no update 2."""
    free = simulate(_scenario(MIXED, contention=EVERYTHING, updates=5))
    at = free.updates[2].time_s
    fast, slow = both(_scenario(MIXED, contention=EVERYTHING, updates=None, budget=at))
    assert_same(fast, slow)
    assert fast.updates == free.updates[:2] and fast.summary["sim_time_s"] == float(f"{at:.12g}")


@pytest.mark.parametrize("trace", ["pai", "cluster_cpu", "simple"])
def test_trace_contention(trace) -> None:
    item = {
        "pai": {"name": "trace", "path": str(TRACES / "pai_job_1_norm.csv")},
        "cluster_cpu": {"name": "trace", "path": str(TRACES / "alibaba2018_cluster_cpu_300s.csv"), "bucket_s": 0.7,
                        "stagger_rows": 3, "target": "both"},
        "simple": {"name": "trace", "path": str(TRACES / "example_simple.csv"), "target": "both"},
    }[trace]
    for scheme in ("bsp", {"name": "lbbsp", "variant": "gpu_model"}):
        check(_scenario(MIXED, scheme=scheme, contention=[item, SCHEDULED], updates=50))


def test_fixed_ring_bandwidth_and_one_worker() -> None:
    net = {"name": "ring_allreduce", "alpha_s": 1e-4, "bandwidth_gbps": 3.0}
    check(_scenario(MIXED, contention=EVERYTHING, network=net))
    check(_scenario([_group(1, 80.0, jitter=0.2)], contention=[MARKOV_BOTH]))


def test_numerics_are_called_as_the_event_path_calls_them() -> None:
    num = {"enabled": True, "eval_every": 5}
    fast, _ = check(_scenario(MIXED, contention=EVERYTHING, updates=20, numerics=num,
                              scheme={"name": "lbbsp", "variant": "cpu", "predictor": "last"}))
    assert fast.numerics


def test_shipped_ring_scenarios() -> None:
    for name, extra in (("lbbsp_cpu", ["workload.updates=60"]), ("lbbsp_gpu", ["workload.updates=60"]),
                        ("bench/large", ["workload.updates=4", "cluster.groups.0.count=16", "cluster.groups.1.count=16",
                                         "cluster.groups.2.count=16", "cluster.groups.3.count=16",
                                         "workload.global_batch=4096"])):
        for scheme in ("bsp", "static", "lbbsp"):
            check(load_scenario(REPO / "scenarios" / f"{name}.yaml", extra, scheme=scheme))


def test_which_scenarios_take_the_fast_path() -> None:
    from lbsim.contention.model import build_contention
    from lbsim.scenario.resolve import build_scheme_for, resolve_workers

    def reason(**kw):
        sc = _scenario(MIXED, **kw)
        ws = resolve_workers(sc)
        return ineligible(SimEnv(sc, ws, build_contention(sc, ws), build_scheme_for(sc, ws)))

    ps = {"name": "parameter_server", "shards": 1, "server_bandwidth_gbps": 8.0, "apply_s": 0.0, "latency_s": 0.0}
    assert reason() is None
    assert reason(scheme="static") is None
    assert "ring_allreduce" in reason(network=ps)
    assert "backup" in reason(network=ps, scheme={"name": "bsp", "backup_workers": 1})
    assert "driver" in reason(network=ps, scheme="asp")


def test_parameter_server_runs_are_unchanged_by_the_switch() -> None:
    """Not eligible: both calls take the event path (and agree, as every run is deterministic)."""
    ps = {"name": "parameter_server", "shards": 2, "server_bandwidth_gbps": 8.0, "apply_s": 0.001, "latency_s": 0.0}
    assert_same(*both(_scenario(MIXED, network=ps, contention=EVERYTHING, updates=20)))


def test_worker_columns_read_as_the_observations() -> None:
    wc = WorkerColumns(worker=np.arange(3), batch=np.array([4, 5, 6]), compute_s=np.array([0.5, 0.25, 1.0]),
                       comm_s=np.zeros(3), wait_s=np.zeros(3), cpu_available=np.array([1.0, 0.5, 0.25]),
                       oracle_slowdown=np.array([1.0, 2.0, 4.0]), fetch_s=np.zeros(3), local_samples=np.array([4, 5, 6]),
                       remote_samples=np.zeros(3, dtype=int))
    objs = tuple(wc)
    assert objs[1].batch == 5 and type(objs[1].batch) is int and objs[2].cpu_available == 0.25
    assert wc[-1] == objs[2] and wc[0:2] == objs[0:2]
    cols = observation_columns(objs)
    for name, arr in observation_columns(wc).items():
        assert np.array_equal(arr, cols[name]), name


def test_iteration_table_behaves_as_a_sequence_of_records() -> None:
    recs = [IterationRecord(w, i, i, 0.5 * i, 0.25, 0.125, 0.0, 0.5 * i + 0.375, 8, 0, False, 0.5, 0.0)
            for i in range(3) for w in range(2)]
    recs.append(IterationRecord(0, 3, -1, 1.5, 0.1, 0.0, 0.0, 1.6, 8, 0, True, 0.0, 0.0))
    table = IterationTable.from_records(recs)
    assert len(table) == len(recs) and table == recs and list(table) == recs and table[-1] == recs[-1]
    assert table[1:4] == tuple(recs[1:4]) and table[::2] == tuple(recs[::2])
    assert dataclasses.astuple(table[2]) == dataclasses.astuple(recs[2])
    assert sorted(table, key=lambda r: (r.worker, r.iteration)) == sorted(recs, key=lambda r: (r.worker, r.iteration))
    assert table != recs[:-1] and table == IterationTable.from_records(recs)
    with pytest.raises(IndexError):
        table[len(recs)]
    from lbsim.metrics.summary import summarize

    kw = dict(scheme="bsp", seed=0, engine="simulator", workers=2, end_s=2.0, synchronous=True)
    assert summarize(table, [], **kw) == summarize(recs, [], **kw)


def _nodes(group: dict, per_node: int, **links) -> dict:
    return {**group, "instance": "g4dn.12xlarge", "workers_per_node": per_node, **links}


# nodes of 4, 4, 2 (one group) and 3, 1 (another): multi-worker nodes, a partial node, one alone;
# a tabulated compute curve and a shared-node slowdown on the second group
NODES = [_nodes(_group(10, 120.0, t0=0.02, bw=4.0, jitter=0.1), 4, intra_bandwidth_gbps=30.0, intra_latency_s=2e-5),
         _nodes(_group(4, 45.0, t0=0.05, bw=2.0, jitter=0.05), 3, nic_latency_s=3e-4, shared_node_slowdown=0.05,
                compute_curve=[[8, 0.2], [32, 0.5], [64, 1.4]])]


@pytest.mark.parametrize("algorithm", ["ring", "hierarchical", "tree", "nccl"])
@pytest.mark.parametrize("overlap", [None, {"hide_share": 0.6, "tail_share": 0.2}])
def test_nodes_links_curves_and_overlap(algorithm, overlap) -> None:
    from lbsim.contention.model import build_contention
    from lbsim.fields import to_data
    from lbsim.scenario.resolve import build_scheme_for, resolve_workers

    net = {"name": "ring_allreduce", "alpha_s": 1e-5, "algorithm": algorithm}
    for scheme in ("bsp", {"name": "lbbsp", "variant": "cpu", "predictor": "ema"}):
        sc = _scenario(NODES, scheme=scheme, contention=EVERYTHING, network=net, gradient_bytes=40_000_000)
        if overlap is not None:
            data = to_data(sc)
            data["workload"]["overlap"] = overlap
            sc = scenario_from_data(data)
        fast, workers = check(sc)
        assert [w.node for w in workers] == [0] * 4 + [1] * 4 + [2] * 2 + [3] * 3 + [4]
        ws = resolve_workers(sc)
        assert ineligible(SimEnv(sc, ws, build_contention(sc, ws), build_scheme_for(sc, ws))) is None


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    layout=st.lists(st.tuples(st.integers(1, 5), st.integers(1, 4)), min_size=1, max_size=3),
    algorithm=st.sampled_from(["ring", "hierarchical", "tree", "nccl"]),
    hide=st.sampled_from([0.0, 0.3, 1.0]),
    seed=st.integers(0, 50),
)
def test_random_node_layouts_match_the_event_path(layout, algorithm, hide, seed) -> None:
    from lbsim.fields import to_data

    groups = [_nodes(_group(count, 50.0 + 20 * i, t0=0.01, bw=3.0 + i, jitter=0.1), min(per_node, 4),
                     intra_bandwidth_gbps=40.0 / (i + 1), intra_latency_s=1e-5)
              for i, (count, per_node) in enumerate(layout)]
    net = {"name": "ring_allreduce", "alpha_s": 2e-5, "algorithm": algorithm}
    sc = _scenario(groups, contention=[MARKOV_BOTH], network=net, seed=seed, updates=15, gradient_bytes=20_000_000)
    data = to_data(sc)
    data["workload"]["overlap"] = {"hide_share": hide, "tail_share": 0.1}
    check(scenario_from_data(data))


@pytest.mark.parametrize("n", [0, 1, 2, 3, 1000, 70_000])
def test_column_total_is_the_exact_sum_bit_for_bit(n: int) -> None:
    """The summary's column totals are ``math.fsum`` of the values (zero as +0.0), whatever the passes."""
    import math

    from lbsim.metrics.summary import _column_total, total

    rng = np.random.default_rng(n)
    values = rng.lognormal(0.0, 3.0, n) * rng.choice([1e-6, 1.0, 1e6], n)
    if n:
        values[0] = -0.0
    want = math.fsum(values.tolist()) + 0.0
    for passes in (0, 1, 4):
        got = _column_total(values, passes=passes)
        assert got == want == total(iter(values.tolist())) and type(got) is float and str(got) == str(want)
    assert str(_column_total(np.array([-0.0, -0.0]))) == str(total([])) == "0.0"


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300), max_size=60),
       st.integers(0, 5))
@settings(max_examples=200, deadline=None)
def test_column_total_equals_fsum_on_any_finite_values(values: list[float], passes: int) -> None:
    """Cancellation, subnormals, exponents far apart: the array extraction still gives fsum's sum."""
    import math

    from lbsim.metrics.summary import _column_total

    got = _column_total(np.array(values, dtype=np.float64), passes=passes)
    want = math.fsum(values) + 0.0
    assert got == want and str(got) == str(want)


def test_totals_do_not_depend_on_the_python_versions_sum() -> None:
    """One long iteration, then 30,000 very short ones: adding left to right (the builtin ``sum`` up
    to Python 3.11) loses every short one, the exact sum (and 3.12's compensated ``sum``) keeps them;
    the summary takes the exact sum whatever the Python version, on records and on columns alike."""
    import functools
    import math
    import operator

    from lbsim.metrics.summary import summarize

    compute = [1.0] + [1e-16] * 30_000
    left_to_right = functools.reduce(operator.add, compute, 0)
    exact = math.fsum(compute)
    assert left_to_right == 1.0 and exact == 1.000000000003
    recs = [IterationRecord(0, i, i, 2.0 * i, c, 0.0, float(i == 0), 2.0 * i + 1.0, 8, 0) for i, c in enumerate(compute)]
    kw = dict(scheme="bsp", seed=0, engine="simulator", workers=1, end_s=1e5)
    for iterations in (recs, IterationTable.from_records(recs)):
        shares = summarize(iterations, [], **kw)
        assert (shares["compute_fraction"], shares["wait_fraction"]) == (0.500000000001, 0.499999999999)
