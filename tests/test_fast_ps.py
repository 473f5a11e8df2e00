"""The parameter-server fast path (simulator/fast_ps.py) gives exactly the event path's results.

Every case runs one scenario twice — ``simulate(sc)`` (fast path where it applies) and
``simulate(sc, fast=False)`` (SimPy events) — and compares every field of every iteration and
update record (exact float equality, same order), the summary, the decisions, the progress
callback's readings and, with numerics on, the learning curve. Cases cover ASP, SSP, DSSP (both
rules), ElasticBSP and WBSP (base, overlap, overlap without blocking pulls); jitter, Markov on
compute and network, scheduled windows, the three trace formats; nodes shared by several
workers; numerics; the update and sample targets and the time budget (one hit exactly at an
update); identical workers without jitter (exact ties, which the fast path hands to the event
path: :class:`lbsim.simulator.fast_loop.Tie`); and random scenarios (hypothesis). Speed is
never asserted here (benchmarks/bench_simulator.py measures it).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lbsim.simulator.run as run_module
from lbsim.metrics.records import ITERATION_COLUMNS
from lbsim.scenario.loader import load_scenario, scenario_from_data
from lbsim.simulator.env import SimEnv
from lbsim.simulator.fast_ps import Reported, ineligible
from lbsim.simulator.run import simulate

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO / "scenarios" / "traces"


def _group(count, speed, *, t0=0.0, bw=8.0, jitter=0.0, per_node=1):
    g = {"instance": "g4dn.xlarge", "count": count, "t0_s": t0, "samples_per_s": speed, "max_batch": 100_000,
         "bandwidth_gbps": bw, "jitter_cv": jitter}
    if per_node > 1:
        g.update(instance="g4dn.12xlarge", workers_per_node=per_node)
    return g


def _ps(shards=2, server_gbps=10.0, apply_s=0.002, latency_s=1e-4):
    return {"name": "parameter_server", "shards": shards, "server_bandwidth_gbps": server_gbps, "apply_s": apply_s,
            "latency_s": latency_s}


def _scenario(groups, *, scheme="asp", updates=60, samples=None, budget=None, contention=(), seed=3, network=None,
              numerics=None, gradient_bytes=4_000_000):
    n = sum(g["count"] for g in groups)
    data = {
        "seed": seed,
        "workload": {"model": "resnet50_imagenet", "global_batch": 32 * n, "updates": updates, "samples": samples,
                     "time_budget_s": budget, "gradient_bytes": gradient_bytes},
        "cluster": {"groups": list(groups)},
        "network": network or _ps(),
        "contention": list(contention),
        "scheme": {"name": scheme} if isinstance(scheme, str) else scheme,
    }
    if numerics is not None:
        data["numerics"] = numerics
    return scenario_from_data(data)


MIXED = [_group(3, 120.0, t0=0.02, bw=10.0, jitter=0.1), _group(2, 45.0, t0=0.05, bw=5.0, jitter=0.05),
         _group(2, 300.0, bw=2.0, jitter=0.02)]
MARKOV_BOTH = {"name": "markov", "workers": "all", "mean_off_s": 2.0, "mean_on_s": 1.0, "slowdown_min": 1.5,
               "slowdown_max": 4.0, "target": "both"}
SCHEDULED = {"name": "scheduled", "workers": [1, 4], "start_s": 1.0, "end_s": 3.5, "slowdown": 2.5}
SCHEDULED_NET = {"name": "scheduled", "workers": [0], "start_s": 0.5, "slowdown": 3.0, "target": "network"}
EVERYTHING = [MARKOV_BOTH, SCHEDULED, SCHEDULED_NET]

SCHEMES = [
    "asp",
    {"name": "ssp", "staleness": 0},
    {"name": "ssp", "staleness": 2},
    {"name": "dssp", "staleness_low": 1, "staleness_high": 4},
    {"name": "dssp", "staleness_low": 1, "staleness_high": 4, "rule": "bounded_lead"},
    {"name": "elastic_bsp", "lookahead": 4},
    "wbsp",
    {"name": "wbsp", "overlap": True},
    {"name": "wbsp", "overlap": True, "overlap_pull_blocks": False},
]


def _name(scheme) -> str:
    return scheme if isinstance(scheme, str) else "-".join(str(v) for v in scheme.values())


@pytest.fixture
def fast_runs(monkeypatch):
    """Whether each fast attempt ran to the end (True) or met a tie and handed the run back (False)."""
    seen: list[bool] = []
    inner = run_module.run_fast_ps

    def counting(env):
        ok = inner(env)
        seen.append(ok)
        return ok

    monkeypatch.setattr(run_module, "run_fast_ps", counting)
    return seen


def assert_same(fast, slow) -> None:
    assert len(fast.iterations) == len(slow.iterations)
    for name in ITERATION_COLUMNS:  # column by column: exact equality, same order
        a, b = fast.iterations.columns[name], slow.iterations.columns[name]
        assert np.array_equal(a, b), (name, np.flatnonzero(a != b)[:5])
    assert fast.updates == slow.updates
    assert fast.summary == slow.summary
    assert fast.decisions == slow.decisions
    assert fast.numerics == slow.numerics


def check(sc):
    seen: dict[bool, list[float]] = {True: [], False: []}
    fast = simulate(sc, seen[True].append)
    slow = simulate(sc, seen[False].append, fast=False)
    assert seen[True] == seen[False]
    assert_same(fast, slow)
    assert fast.iterations, "the case must produce records"
    return fast


@pytest.mark.parametrize("scheme", SCHEMES, ids=_name)
def test_every_scheme_with_every_contention(scheme, fast_runs) -> None:
    updates = 12 if _name(scheme).startswith("wbsp") else 80
    check(_scenario(MIXED, scheme=scheme, contention=EVERYTHING, updates=updates))
    assert fast_runs == [True]


@pytest.mark.parametrize("scheme", ["asp", {"name": "ssp", "staleness": 1}, "wbsp", {"name": "wbsp", "overlap": True}],
                         ids=_name)
@pytest.mark.parametrize("end", ["samples", "budget"])
def test_sample_target_and_budget(scheme, end, fast_runs) -> None:
    kw = {"updates": None, "samples": 4_000} if end == "samples" else {"updates": None, "budget": 2.5}
    check(_scenario(MIXED, scheme=scheme, contention=[MARKOV_BOTH, SCHEDULED], **kw))
    assert fast_runs == [True]


def test_wbsp_final_round_cuts_a_pull_in_flight(fast_runs) -> None:
    """Pulls longer than steps (400 MB over 2-10 Gbps): the round that makes the last update closes
    while another worker is still pulling; that step is cut there, as on the event path."""
    import lbsim.simulator.fast_wbsp as fast_wbsp

    pulling_at_close: list[int] = []
    close = fast_wbsp.FastWBSP._close_flat

    def counting(self):  # type: ignore[no-untyped-def]
        pulling_at_close.append(sum(s[fast_wbsp.END] is None for s in self.flat_rounds.open) - 1)  # but the closer's
        close(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fast_wbsp.FastWBSP, "_close_flat", counting)
        fast = check(_scenario(MIXED, scheme="wbsp", updates=5, gradient_bytes=400_000_000))
    assert fast_runs == [True]
    assert len(pulling_at_close) == 5 and pulling_at_close[-1] >= 1
    assert fast.iterations.columns["cut"].any()


@pytest.mark.parametrize("scheme", ["asp", "wbsp"])
def test_budget_hit_exactly_at_an_update(scheme) -> None:
    """A budget equal to update 3's time: the budget comes first (SimPy's order), no update 3."""
    free = simulate(_scenario(MIXED, scheme=scheme, contention=[MARKOV_BOTH], updates=6))
    at = free.updates[3].time_s
    fast = check(_scenario(MIXED, scheme=scheme, contention=[MARKOV_BOTH], updates=None, budget=at))
    assert fast.updates == free.updates[:3]


@pytest.mark.parametrize("trace", ["pai", "cluster_cpu", "simple"])
def test_trace_contention(trace, fast_runs) -> None:
    item = {
        "pai": {"name": "trace", "path": str(TRACES / "pai_job_1_norm.csv")},
        "cluster_cpu": {"name": "trace", "path": str(TRACES / "alibaba2018_cluster_cpu_300s.csv"), "bucket_s": 0.7,
                        "stagger_rows": 3, "target": "both"},
        "simple": {"name": "trace", "path": str(TRACES / "example_simple.csv"), "target": "both"},
    }[trace]
    for scheme in ("ssp", {"name": "wbsp", "overlap": True}):
        check(_scenario(MIXED, scheme=scheme, contention=[item, SCHEDULED], updates=40))
    assert fast_runs == [True, True]


@pytest.mark.parametrize("scheme", ["asp", {"name": "dssp", "staleness_low": 0, "staleness_high": 3}, "wbsp",
                                    {"name": "wbsp", "overlap": True}], ids=_name)
def test_numerics(scheme, fast_runs) -> None:
    fast = check(_scenario(MIXED, scheme=scheme, contention=[MARKOV_BOTH], updates=15,
                           numerics={"enabled": True, "eval_every": 4}))
    assert fast.numerics and fast_runs == [True]


# nodes of 3 + 1 (one group) and 2 + 2 (another): transfers queue for their node's NIC
NODES = [_group(4, 120.0, t0=0.02, bw=4.0, jitter=0.1, per_node=3), _group(4, 45.0, t0=0.05, bw=2.0, jitter=0.05, per_node=2)]


@pytest.mark.parametrize("scheme", SCHEMES[::2], ids=_name)
def test_shared_nodes(scheme, fast_runs) -> None:
    updates = 12 if _name(scheme).startswith("wbsp") else 80
    check(_scenario(NODES, scheme=scheme, contention=[MARKOV_BOTH, SCHEDULED_NET], updates=updates))
    assert fast_runs == [True]


@pytest.mark.parametrize("scheme", ["asp", {"name": "ssp", "staleness": 1}, "wbsp", {"name": "wbsp", "overlap": True}],
                         ids=_name)
def test_identical_workers_tie_and_match(scheme, fast_runs) -> None:
    """Identical workers without jitter, no apply time, no latency: events fall on one instant. Where
    the fast loop cannot tell SimPy's order it hands the run to the event path (same results, and
    the progress readings go on where they were)."""
    sc = _scenario([_group(4, 100.0, bw=5.0), _group(2, 100.0, bw=5.0, per_node=2)], scheme=scheme,
                   network=_ps(shards=1, server_gbps=8.0, apply_s=0.0, latency_s=0.0), updates=30)
    check(sc)
    assert len(fast_runs) == 1


@pytest.mark.parametrize(("scheme", "seed"), [("asp", 5), ("wbsp", 10)])
def test_a_tie_mid_run_hands_the_run_to_the_event_path(scheme, seed, fast_runs) -> None:
    """Round figures, two identical workers without jitter, no apply or latency time: two transfers
    end at one instant with parents at one instant, after some updates. The fast path stops there
    (Tie), the event path redoes the run, and the progress readings continue without a repeat."""
    groups = [_group(2, 100.0, bw=2.0), _group(1, 100.0, t0=0.01, bw=5.0, jitter=0.05), _group(1, 100.0, t0=0.02, bw=8.0)]
    sc = _scenario(groups, scheme=scheme, network=_ps(3, 1.0, 0.0, 0.0), seed=seed, gradient_bytes=2_000_000,
                   updates=8 if scheme == "wbsp" else 60)
    check(sc)
    assert fast_runs == [False]


def test_shipped_parameter_server_scenarios(fast_runs) -> None:
    for name in ("dssp_table1", "elastic_bsp", "wbsp_h2", "ec2_mixed", "staleness_proxy"):
        path = REPO / "scenarios" / f"{name}.yaml"
        sc = load_scenario(path, ["workload.updates=40"] if name != "wbsp_h2" else ["workload.updates=8"])
        if isinstance(sc.network, dict) or ineligible(_env(sc)) is not None:
            continue
        check(sc)
    assert fast_runs and all(fast_runs)


def _env(sc) -> SimEnv:
    from lbsim.contention.model import build_contention
    from lbsim.scenario.resolve import build_scheme_for, resolve_workers

    ws = resolve_workers(sc)
    return SimEnv(sc, ws, build_contention(sc, ws), build_scheme_for(sc, ws))


def test_which_scenarios_take_the_fast_path() -> None:
    assert ineligible(_env(_scenario(MIXED))) is None
    assert ineligible(_env(_scenario(MIXED, scheme={"name": "wbsp", "overlap": True}))) is None
    assert "driver 'sync'" in ineligible(_env(_scenario(MIXED, scheme="bsp")))  # backup workers on a server too
    loft = load_scenario(REPO / "scenarios" / "loft_edge.yaml", ["scheme={name: asp}", "network={name: parameter_server}"])
    assert "data section" in ineligible(_env(loft))


def test_the_collector_is_suspended_during_the_run_and_restored() -> None:
    """The fast path runs with the cyclic collector off and leaves it as it found it (on or off)."""
    import gc

    seen: list[bool] = []
    sc = _scenario(MIXED, updates=5)
    for before in (True, False):
        (gc.enable if before else gc.disable)()
        try:
            simulate(sc, lambda _f: seen.append(gc.isenabled()))
            assert gc.isenabled() is before
        finally:
            gc.enable()
    assert seen and not any(seen)


def test_a_redone_run_repeats_no_progress_reading() -> None:
    readings: list[float] = []
    reported = Reported(readings.append)
    assert reported.callback is not None
    for f in (0.1, 0.2, 0.3):
        reported.callback(f)
    resumed = reported.resumed()
    assert resumed is not None
    for f in (0.1, 0.2, 0.3, 0.4, 0.5):  # the redone run reads the same first three
        resumed(f)
    assert readings == [0.1, 0.2, 0.3, 0.4, 0.5]
    assert Reported(None).callback is None and Reported(None).resumed() is None


CONTENTION = {
    "markov": MARKOV_BOTH,
    "window": {"name": "scheduled", "workers": "all", "start_s": 0.3, "end_s": 1.1, "slowdown": 2.0},
    "net": {"name": "scheduled", "workers": [0], "start_s": 0.2, "slowdown": 1.5, "target": "network"},
    "pai": {"name": "trace", "path": str(TRACES / "pai_job_1_norm.csv")},
}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    layout=st.lists(st.tuples(st.integers(1, 4), st.sampled_from([40.0, 100.0, 250.0]), st.sampled_from([0.0, 0.05]),
                              st.integers(1, 3)), min_size=1, max_size=3),
    scheme=st.sampled_from(SCHEMES),
    network=st.tuples(st.integers(1, 3), st.sampled_from([1.0, 8.0]), st.sampled_from([0.0, 0.001]),
                      st.sampled_from([0.0, 1e-4])),
    contention=st.sets(st.sampled_from(sorted(CONTENTION))),
    end=st.sampled_from(["updates", "samples", "budget"]),
    seed=st.integers(0, 30),
)
def test_random_scenarios_match_the_event_path(layout, scheme, network, contention, end, seed) -> None:
    groups = [_group(count, speed, t0=0.01 * i, bw=2.0 + 3 * i, jitter=jitter, per_node=per_node)
              for i, (count, speed, jitter, per_node) in enumerate(layout)]
    shards, server_gbps, apply_s, latency_s = network
    wbsp = _name(scheme).startswith("wbsp")
    kw = {"updates": 6 if wbsp else 40}
    if end == "samples":
        kw = {"updates": None, "samples": 1_500}
    elif end == "budget":
        kw = {"updates": None, "budget": 1.5}
    sc = _scenario(groups, scheme=scheme, network=_ps(shards, server_gbps, apply_s, latency_s), seed=seed,
                   contention=[CONTENTION[k] for k in sorted(contention)], gradient_bytes=2_000_000, **kw)
    seen: dict[bool, list[float]] = {True: [], False: []}
    fast = simulate(sc, seen[True].append)
    slow = simulate(sc, seen[False].append, fast=False)
    assert seen[True] == seen[False]
    assert_same(fast, slow)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 12), picks=st.lists(st.integers(0, 11), min_size=1, max_size=200))
def test_clocks_keep_their_minimum_maximum_and_slowest(n, picks) -> None:
    """Clocks.tick's bookkeeping (the gate asks it at every push) against min / max / argmin."""
    from lbsim.schemes.base import Clocks, fastest_clock, slowest_clock, slowest_worker

    clocks = Clocks(n)
    for k, pick in enumerate(picks):
        clocks.tick(pick % n if k % 3 else slowest_worker(clocks))
        plain = list(clocks)
        assert slowest_clock(clocks) == min(plain) and fastest_clock(clocks) == max(plain)
        assert slowest_worker(clocks) == min(range(n), key=lambda i: (plain[i], i))


@given(updates=st.integers(0, 50), samples=st.integers(0, 5000),
       update_target=st.one_of(st.none(), st.integers(1, 40)), sample_target=st.one_of(st.none(), st.integers(1, 4000)))
def test_run_end_thresholds_are_its_rule(updates, samples, update_target, sample_target) -> None:
    """The fast path compares with RunEnd.thresholds; it must say what RunEnd.reached says."""
    from lbsim.metrics.run_end import RunEnd

    end = RunEnd(update_target, sample_target)
    u, s = end.thresholds()
    assert (updates >= u or samples >= s) == end.reached(updates, samples)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 8), picks=st.lists(st.integers(0, 7), min_size=1, max_size=100))
def test_a_free_gate_never_holds(n, picks) -> None:
    """A scheme declaring ``never_holds`` (ASP), whose gate the engines skip (Gate.free): asked anyway,
    the gate admits every worker and releases no one, whatever the pushes; SSP's gate is not free."""
    from lbsim.schemes.asp import ASP, ASPConfig
    from lbsim.schemes.base import SchemeContext
    from lbsim.schemes.gate import Gate
    from lbsim.schemes.ssp import SSP, SSPConfig

    ctx = SchemeContext(global_batch=8 * n, t0_s=(0.0,) * n, samples_per_s=(1.0,) * n, max_batch=(100,) * n,
                        kinds=("gpu",) * n)
    gate = Gate(ASP(ASPConfig(), ctx), n)
    assert gate.free
    for k, pick in enumerate(picks):
        assert gate.push(pick % n, float(k)) == [] and gate.admit(pick % n)
    assert not Gate(SSP(SSPConfig(staleness=0), ctx), n).free


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 6), staleness=st.integers(0, 3), picks=st.lists(st.integers(0, 5), min_size=1, max_size=120))
def test_a_push_ignoring_scheme_decides_the_same_when_told(n, staleness, picks) -> None:
    """SSP and ASP declare ``ignores_push``: their ``on_push`` returns None and changes nothing (the
    scheme's state is equal before and after), and a gate that skips it releases and admits exactly
    as one that calls it (random pushes, each pusher asked to go on as the engines do)."""
    from lbsim.schemes.asp import ASP, ASPConfig
    from lbsim.schemes.base import SchemeContext
    from lbsim.schemes.gate import Gate
    from lbsim.schemes.ssp import SSP, SSPConfig

    ctx = SchemeContext(global_batch=8 * n, t0_s=(0.0,) * n, samples_per_s=(1.0,) * n, max_batch=(100,) * n,
                        kinds=("gpu",) * n)
    for make in (lambda: SSP(SSPConfig(staleness=staleness), ctx), lambda: ASP(ASPConfig(), ctx)):
        lean, told = Gate(make(), n), Gate(make(), n)
        told._on_push = told.scheme.on_push
        assert lean._on_push is None and type(lean.scheme).ignores_push
        held: set[int] = set()
        for k, pick in enumerate(picks):
            w = pick % n
            if w in held:
                continue
            before = dict(vars(told.scheme))
            released = told.push(w, float(k))
            assert told.go is None and vars(told.scheme) == before
            assert lean.push(w, float(k)) == released
            held -= set(released)
            go = lean.admit(w)
            assert go == told.admit(w)
            if not go:
                held.add(w)
        assert lean.held == told.held and list(lean.clocks) == list(told.clocks)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 6), picks=st.lists(st.integers(0, 5), min_size=1, max_size=120))
def test_a_gate_without_clocks_decides_the_same(n, picks) -> None:
    """ElasticBSP declares ``reads_clocks = False``: its gate keeps no clocks, and releases and admits
    exactly as a gate that keeps them (random pushes, each pusher asked to go on as the engines do)."""
    from lbsim.schemes.base import SchemeContext
    from lbsim.schemes.elastic_bsp import ElasticBSP, ElasticBSPConfig
    from lbsim.schemes.gate import Gate

    ctx = SchemeContext(global_batch=8 * n, t0_s=(0.0,) * n, samples_per_s=(1.0,) * n, max_batch=(100,) * n,
                        kinds=("gpu",) * n)
    lean, full = (Gate(ElasticBSP(ElasticBSPConfig(lookahead=3), ctx), n) for _ in range(2))
    full._ticks = True
    assert not lean._ticks
    held: set[int] = set()
    for k, pick in enumerate(picks):
        w = pick % n
        if w in held:
            continue
        t = k * (1.0 + 0.37 * w)
        released = lean.push(w, t)
        assert released == full.push(w, t)
        held -= set(released)
        go = lean.admit(w)
        assert go == full.admit(w)
        if not go:
            held.add(w)
    assert list(lean.clocks) == [0] * n and sum(full.clocks) > 0


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 6), rule=st.sampled_from(["paper", "bounded_lead"]),
       picks=st.lists(st.integers(0, 5), min_size=1, max_size=150), speeds=st.lists(st.floats(0.2, 3.0), min_size=6, max_size=6))
def test_dssp_answers_at_its_push_as_asked_after(n, rule, picks, speeds) -> None:
    """DSSP declares ``admits_at_push``: the gate's admit takes the pusher's answer from ``on_push``.
    Random pushes, each pusher asked to go on as the engines do: the same releases, refusals, held
    workers and controller decisions as a gate that asks ``may_start``."""
    from lbsim.schemes.base import SchemeContext
    from lbsim.schemes.dssp import DSSP, DSSPConfig
    from lbsim.schemes.gate import Gate

    ctx = SchemeContext(global_batch=8 * n, t0_s=(0.0,) * n, samples_per_s=(1.0,) * n, max_batch=(100,) * n,
                        kinds=("gpu",) * n)
    cfg = DSSPConfig(staleness_low=1, staleness_high=4, rule=rule)
    fused, asked = Gate(DSSP(cfg, ctx), n), Gate(DSSP(cfg, ctx), n)
    asked.admit = asked._admit_asked  # type: ignore[method-assign]
    assert fused.admit == fused._admit_decided
    pushes = [0] * n
    for w in _push_alike(fused, asked, picks, speeds, n):
        pushes[w] += 1  # the gate's clocks (Clocks.tick, written out in Gate.push) count every push
        assert list(fused.clocks) == pushes and (fused.clocks.low, fused.clocks.high) == (min(pushes), max(pushes))
    assert fused.scheme.diagnostics() == asked.scheme.diagnostics()
    assert fused.scheme.credit == asked.scheme.credit


def _push_alike(fused, asked, picks, speeds, n):  # type: ignore[no-untyped-def]
    """Drive two gates with the same random pushes (a held worker sits out until released), asserting
    after each that they release, admit and hold alike; yields each pusher."""
    held: set[int] = set()
    t = [0.0] * n
    for pick in picks:
        w = pick % n
        if w in held:
            continue
        t[w] += speeds[w]
        released = fused.push(w, t[w])
        assert released == asked.push(w, t[w])
        held -= set(released)
        skipped, held_before = fused.decided and fused.go, list(fused.held)  # what the fast path skips
        go = fused.admit(w)
        assert go == asked.admit(w)
        if skipped:  # a true go after the push: admit answers True and holds no one (the engine need not ask)
            assert go is True and fused.held == held_before
        if not go:
            held.add(w)
        assert fused.held == asked.held
        yield w


def _controller_matrix(a_p, i_p, a_slow, i_slow, r_max):  # DSSP's controller as the (r, k) matrix, in numpy
    r = np.arange(r_max + 1)
    gap = np.abs((a_slow + i_slow + r * i_slow)[None, :] - (a_p + r * i_p)[:, None])
    return int(np.argmin(gap.min(axis=1)))


_times = st.floats(0.0, 1e4, allow_nan=False) | st.sampled_from([0.0, 1.0, 2.5, 10.0])


@settings(max_examples=200, deadline=None)
@given(a_p=_times, i_p=_times, a_slow=_times, i_slow=_times, r_max=st.integers(0, 20))
def test_dssp_controller_is_the_matrix_argmin(a_p, i_p, a_slow, i_slow, r_max) -> None:
    """DSSP's controller by bisection picks the r of the full (r, k) gap matrix, ties included
    (round figures make equal gaps; equal intervals make equal predicted times)."""
    from lbsim.schemes.dssp import controller

    assert controller(a_p, i_p, a_slow, i_slow, r_max) == _controller_matrix(a_p, i_p, a_slow, i_slow, r_max)
    assert controller(a_p, i_p, a_slow, -i_slow, r_max) == _controller_matrix(a_p, i_p, a_slow, -i_slow, r_max)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 5), monitor=st.integers(2, 3), lookahead=st.integers(1, 4),
       picks=st.lists(st.integers(0, 4), min_size=1, max_size=150), speeds=st.lists(st.floats(0.2, 3.0), min_size=5, max_size=5))
def test_elastic_bsp_answers_at_its_push_as_asked_after(n, monitor, lookahead, picks, speeds) -> None:
    """ElasticBSP declares ``admits_at_push`` too: random pushes through a gate that takes the
    pusher's answer from ``on_push`` and one that asks ``may_start`` release, refuse and hold alike,
    and the supersteps planned are the same."""
    from lbsim.schemes.base import SchemeContext
    from lbsim.schemes.elastic_bsp import ElasticBSP, ElasticBSPConfig
    from lbsim.schemes.gate import Gate

    ctx = SchemeContext(global_batch=8 * n, t0_s=(0.0,) * n, samples_per_s=(1.0,) * n, max_batch=(100,) * n,
                        kinds=("gpu",) * n)
    cfg = ElasticBSPConfig(lookahead=lookahead, monitor_pushes=monitor)
    fused, asked = Gate(ElasticBSP(cfg, ctx), n), Gate(ElasticBSP(cfg, ctx), n)
    asked.admit = asked._admit_asked  # type: ignore[method-assign]
    assert fused.admit == fused._admit_decided
    for _ in _push_alike(fused, asked, picks, speeds, n):
        pass
    assert fused.scheme.decision_rows() == asked.scheme.decision_rows()


def _crowd_order(scheduled):  # type: ignore[no-untyped-def]
    """Events ``(process, parent time, kept)`` all at t = 5, scheduled in this order on a bare
    EventLoop: the processes in the order the loop pops them (its main loop's pop, by hand)."""
    import math
    from collections import deque
    from heapq import heappop, heappush

    from lbsim.simulator.fast_loop import EventLoop

    loop = EventLoop.__new__(EventLoop)  # the scheduling state only: no environment needed
    loop.fifo, loop.times, loop.slot, loop.crowd = deque(), [math.inf], {math.inf: -1}, {}
    loop.parent_of = [0.0] * (len(scheduled) + 2)
    for p, parent, kept in scheduled:
        code = 2 * p + kept
        if 5.0 in loop.slot:
            loop.collide(5.0, parent, code)
        else:
            loop.slot[5.0], loop.parent_of[p] = code, parent
            heappush(loop.times, 5.0)
    order = []
    while loop.times[0] == 5.0:
        now = heappop(loop.times)
        code = loop.slot.pop(now)
        if now in loop.crowd:
            code = loop._first(now, loop.crowd.pop(now))
        order.append(code >> 1)
    return order


def test_events_at_one_instant_go_by_parent_then_as_scheduled() -> None:
    """SimPy's order at one instant, as the fast loop keeps it: earlier parent first (an event
    scheduled out of its parents' order is placed by its parent), equal parents of compute ends
    in the order scheduled; equal parents of other events are a tie the loop cannot order."""
    from lbsim.simulator.fast_loop import Tie

    scheduled = [(0, 3.0, 0), (2, 4.0, 0), (3, 2.0, 1), (1, 1.0, 0), (4, 2.0, 1), (5, 2.0, 1), (6, 4.5, 0)]
    assert _crowd_order(scheduled) == [1, 3, 4, 5, 0, 2, 6]
    assert _crowd_order([(0, 1.0, 0), (1, 2.0, 0)]) == [0, 1]
    assert _crowd_order([(0, 2.0, 0), (1, 1.0, 0)]) == [1, 0]
    with pytest.raises(Tie):
        _crowd_order([(0, 3.0, 0), (1, 2.0, 0), (2, 2.0, 0)])


_part = st.one_of(st.integers(0, 2**33), st.text(max_size=8))


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**40), names=st.lists(_part, max_size=5))
def test_a_named_stream_is_seed_sequence_of_its_list(seed, names) -> None:
    """lbsim.rng.stream hands SeedSequence a uint32 array when every part fits one word: the
    stream is the one of the plain list of ints (seed, then each name's key), above 2**32 too."""
    import zlib

    from lbsim.rng import stream
    entropy = [seed, *(n if isinstance(n, int) else zlib.crc32(n.encode("utf-8")) for n in names)]
    ours, reference = stream(seed, *names), np.random.default_rng(np.random.SeedSequence(entropy))
    assert ours.bit_generator.state == reference.bit_generator.state
    assert ours.random(3).tolist() == reference.random(3).tolist()



@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**33), width=st.integers(0, 6), names=st.lists(st.lists(_part, min_size=6, max_size=6),
                                                                           min_size=1, max_size=6))
def test_streams_made_at_once_are_the_named_streams(seed, width, names) -> None:
    """lbsim.rng.streams (the SeedSequence hash for many streams at once, numpy's constants) gives
    each name list the generator of lbsim.rng.stream: the same state, the same numbers."""
    from lbsim.rng import stream, streams

    lists = [tuple(n[:width]) for n in names]
    for ours, name in zip(streams(seed, lists), lists, strict=True):
        reference = stream(seed, *name)
        assert ours.bit_generator.state == reference.bit_generator.state
        assert ours.lognormal(0.0, 1.0, 4).tolist() == reference.lognormal(0.0, 1.0, 4).tolist()

_FLOATS = st.floats(allow_nan=False, width=64)
_ROWS = st.lists(st.tuples(st.integers(-1, 2**40), st.integers(0, 2**40), st.integers(-1, 2**40), _FLOATS, _FLOATS,
                           _FLOATS, _FLOATS, _FLOATS, st.integers(0, 2**20), st.integers(0, 2**20), st.booleans(),
                           _FLOATS, _FLOATS, st.booleans()), max_size=40)


@settings(max_examples=40, deadline=None)
@given(rows=_ROWS, ways=st.lists(st.integers(0, 3), min_size=40, max_size=40), chunk=st.integers(1, 9))
def test_record_log_columns_are_the_rows_exactly(rows, ways, chunk) -> None:
    """Rows added one by one, in lists, laid end to end or as column blocks, with a flush every
    ``chunk`` rows, give the columns a structured array reads from the same tuples (bit for bit:
    -0.0, infinities, subnormals, integers up to 2**40)."""
    import lbsim.metrics.records as records

    saved = records._CHUNK
    records._CHUNK = chunk
    try:
        log = records.IterationLog()
    finally:
        records._CHUNK = saved
    i = 0
    while i < len(rows):
        way, take = ways[i % len(ways)], rows[i:i + 1 + ways[(i + 1) % len(ways)]]
        if way == 0:
            log.add(rows[i])
            i += 1
            continue
        if way == 1:
            log.extend_rows(list(take))
        elif way == 2:
            log.extend_flat([v for r in take for v in r])
        else:
            block = np.array(take, dtype=records.IterationTable.ROW_DTYPE)
            log.extend_columns({c: np.ascontiguousarray(block[c]) for c in ITERATION_COLUMNS})
        i += len(take)
        assert len(log) == i
    expected = np.array(rows, dtype=records.IterationTable.ROW_DTYPE)
    table = log.table()
    assert len(table) == len(rows)
    for c in ITERATION_COLUMNS:
        assert table.columns[c].dtype == expected[c].dtype
        assert table.columns[c].tobytes() == expected[c].tobytes(), c


def test_columns_from_flat_reads_what_float_does_not_take_as_numpy_does() -> None:
    """A value ``struct.pack`` refuses (None, a numeric string) is read by numpy, as before: NaN, 2.5."""
    from lbsim.metrics.records import columns_from_flat

    cols = columns_from_flat([1, None, "2.5", 2, 0.5, "1e3"], ["a", "b", "c"],
                             {"a": np.int64, "b": np.float64, "c": np.float64})
    assert cols["a"].tolist() == [1, 2] and cols["a"].dtype == np.int64
    assert np.isnan(cols["b"][0]) and cols["b"][1] == 0.5 and cols["c"].tolist() == [2.5, 1000.0]


def test_record_log_refuses_an_integer_a_float64_does_not_hold() -> None:
    from lbsim.metrics.records import IterationLog

    log = IterationLog()
    log.add((2**53, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 1, 0, False, 1.0, 0.0, False))
    with pytest.raises(ValueError, match="'worker'"):
        log.table()


@pytest.mark.parametrize("bound", [1, 10**12], ids=["large", "small"])
def test_a_large_table_gives_its_parts_memory_back_column_by_column(monkeypatch, bound) -> None:
    """A table merged from parts that take at least the bound gives the parts' memory back once per
    column as they are dropped (glibc keeps freed small blocks resident otherwise); a smaller one
    does not ask. The columns are the rows either way."""
    import lbsim.metrics.records as records

    calls: list[int] = []
    monkeypatch.setattr(records, "give_back_memory", lambda: calls.append(1))
    monkeypatch.setattr(records, "_GIVE_BACK_BYTES", bound)
    monkeypatch.setattr(records, "_CHUNK", 3)
    log = records.IterationLog()
    rows = [(w % 4, w, w, 0.5 * w, 1.0, 0.25, 0.0, 0.5 * w + 1.25, 8, 0, False, 1.0, 0.0, w == 9) for w in range(10)]
    for r in rows:
        log.add(r)
    table = log.table()
    assert len(calls) == (len(ITERATION_COLUMNS) if bound == 1 else 0)
    expected = np.array(rows, dtype=records.IterationTable.ROW_DTYPE)
    for c in ITERATION_COLUMNS:
        assert table.columns[c].tobytes() == expected[c].tobytes(), c


def test_giving_memory_back_is_safe_to_call() -> None:
    """Where the C library has ``malloc_trim`` (glibc) it is called, elsewhere nothing happens; either
    way the call returns and the process's data stay as they were."""
    from lbsim.metrics.records import give_back_memory

    data = np.arange(1_000_000, dtype=np.float64)
    give_back_memory()
    assert data.sum() == 499_999_500_000.0
