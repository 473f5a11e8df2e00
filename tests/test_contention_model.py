"""Contention: exact integration of time-varying slowdowns, stacking, Markov streams, trace replay.

``WorkerContention.compute_end(t0, w)`` is the t1 with integral_{t0}^{t1} dt / f(t) = w. The
run-level checks integrate the slowdown independently (piecewise over the source's change points)
and compare with every record's compute time.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from lbsim.contention.model import WorkerContention, build_contention
from lbsim.contention.sources import MarkovSource, window
from lbsim.contention.traces import load_cluster_cpu, load_pai_minibatch, load_simple
from lbsim.rng import stream
from lbsim.scenario.resolve import resolve_workers

# --- compute_end under scheduled windows ------------------------------------------------------

@pytest.mark.parametrize(
    ("sources", "start", "work", "end"),
    [
        ([], 3.0, 2.0, 5.0),
        ([window(1.0, None, 3.0)], 0.0, 2.0, 4.0),  # 1 s at full speed, the remaining 1 s of work x3
        ([window(1.0, 2.0, 3.0)], 0.0, 2.0, 1.0 + 1.0 + 2.0 / 3.0),  # [1, 2) does 1/3; 2/3 left at full speed
        ([window(1.0, 2.0, 3.0)], 1.5, 1.0, 2.0 + (1.0 - 0.5 / 3.0)),  # starts inside the window
        ([window(1.0, 2.0, 3.0)], 2.0, 1.0, 3.0),  # the window has ended (end is exclusive)
        ([window(0.0, 4.0, 0.5)], 1.0, 4.0, 3.0),  # factor 0.5 (a speed-up): 4 s of work in 2 s
        ([window(5.0, None, 2.0)], 0.0, 5.0, 5.0),  # ends exactly when the slowdown starts
        ([window(2.0, 3.0, 4.0), window(5.0, 6.0, 2.0)], 0.0, 4.0, 4.75),  # see the next test
    ],
)
def test_compute_end_scheduled_windows(sources, start, work, end):
    c = WorkerContention(compute=list(sources))
    assert c.compute_end(start, work) == pytest.approx(end, rel=1e-12)


def test_compute_end_two_windows_hand_computed():
    # windows x4 on [2, 3) and x2 on [5, 6); 4 s of work from 0:
    # [0, 2) -> 2 done; [2, 3) -> 0.25 done (2.25); [3, 5) -> 2 done (4.25 > 4): ends at 3 + 1.75 = 4.75
    c = WorkerContention(compute=[window(2.0, 3.0, 4.0), window(5.0, 6.0, 2.0)])
    assert c.compute_end(0.0, 4.0) == pytest.approx(4.75, rel=1e-12)
    # 6 s of work: ... [3, 5) -> 4.25; [5, 6) -> 0.5 (4.75); then 1.25 s at full speed: 7.25
    assert c.compute_end(0.0, 6.0) == pytest.approx(7.25, rel=1e-12)


def test_slowdown_starting_mid_iteration_stretches_only_the_rest():
    c = WorkerContention(compute=[window(0.4, None, 5.0)])
    # 1 s of work from 0: 0.4 s done before the slowdown, the remaining 0.6 s takes 3 s
    assert c.compute_end(0.0, 1.0) == pytest.approx(3.4, rel=1e-12)
    # the same iteration started after the slowdown: the whole 1 s is stretched
    assert c.compute_end(0.4, 1.0) == pytest.approx(5.4, rel=1e-12)


def test_sources_stack_multiplicatively():
    a, b = window(0.0, None, 2.0), window(1.0, 3.0, 3.0)
    c = WorkerContention(compute=[a, b])
    assert [c.compute_factor(t) for t in (0.0, 0.99, 1.0, 2.5, 3.0, 100.0)] == [2.0, 2.0, 6.0, 6.0, 2.0, 2.0]
    # 2 s of work from 0: [0, 1) x2 -> 0.5 done; [1, 3) x6 -> 1/3 done (0.8333); rest 1.1667 x2 = 2.3333
    assert c.compute_end(0.0, 2.0) == pytest.approx(3.0 + 2.0 * (2.0 - 0.5 - 2.0 / 6.0), rel=1e-12)
    assert c.cpu_available(2.0) == pytest.approx(1 / 6)
    assert WorkerContention(compute=[window(0.0, None, 0.5)]).cpu_available(1.0) == 1.0


def test_two_scheduled_entries_stack_in_a_run(sim):
    cont = [
        {"name": "scheduled", "workers": [0], "start_s": 0.5, "slowdown": 2.0},
        {"name": "scheduled", "workers": "all", "start_s": 0.0, "end_s": 1.0, "slowdown": 3.0},
    ]
    res = sim.run([sim.group(2, 100.0)], network=sim.ring(), scheme="bsp", global_batch=200,
                  gradient_bytes=1, updates=2, contention=cont)
    first = {r.worker: r.compute_s for r in res.iterations if r.iteration == 0}
    # worker 0: [0, 0.5) x3 -> 1/6 done; [0.5, 1) x6 -> 1/12 done (0.25); remaining 0.75 x2 = 1.5 -> 2.5
    assert first[0] == pytest.approx(2.5, rel=1e-12)
    # worker 1: [0, 1) x3 -> 1/3 done; remaining 2/3 at full speed -> 1 + 2/3
    assert first[1] == pytest.approx(5.0 / 3.0, rel=1e-12)


# --- Markov on/off ----------------------------------------------------------------------------

def markov(seed: int, worker: int, **kw) -> MarkovSource:
    args = dict(mean_off_s=3.0, mean_on_s=1.0, slowdown_min=1.5, slowdown_max=4.0) | kw
    return MarkovSource(stream(seed, "markov", 0, "worker", worker), **args)


def test_markov_answers_do_not_depend_on_query_order():
    times = [i * 0.37 for i in range(2000)]
    shuffled = times[:]
    random.Random(5).shuffle(shuffled)
    a, b = markov(11, 0), markov(11, 0)
    in_order = {t: a.segment(t) for t in times}
    out_of_order = {t: b.segment(t) for t in shuffled}
    assert in_order == out_of_order
    assert a.times == b.times and a.factors == b.factors
    # and a third copy queried far ahead first
    c = markov(11, 0)
    c.segment(10_000.0)
    assert {t: c.segment(t) for t in times} == in_order


def test_markov_streams_differ_by_worker_and_seed():
    def segments(src):
        src.segment(500.0)
        return list(zip(src.times, src.factors, strict=False))

    base = segments(markov(11, 0))
    assert segments(markov(11, 0)) == base
    assert segments(markov(11, 1)) != base
    assert segments(markov(12, 0)) != base


def test_markov_periods_have_the_configured_shape():
    src = markov(3, 2, mean_off_s=3.0, mean_on_s=1.0, slowdown_min=1.5, slowdown_max=4.0)
    horizon = 40_000.0
    src.segment(horizon)
    times = src.times + [src._horizon]
    on = [(b - a, f) for a, b, f in zip(times, times[1:], src.factors, strict=False) if f != 1.0]
    off = [b - a for a, b, f in zip(times, times[1:], src.factors, strict=False) if f == 1.0]
    assert src.factors[0] == 1.0  # start_on=False
    assert all(x != 1.0 for x in src.factors[1::2]) and all(x == 1.0 for x in src.factors[0::2])  # alternates
    assert all(1.5 <= f <= 4.0 for _, f in on)
    assert np.mean([d for d, _ in on]) == pytest.approx(1.0, rel=0.05)
    assert np.mean(off) == pytest.approx(3.0, rel=0.05)
    assert np.mean([f for _, f in on]) == pytest.approx(2.75, rel=0.03)
    assert markov(3, 2, start_on=True).segment(0.0)[0] != 1.0


def test_build_contention_markov_per_worker_streams(sim):
    cont = [{"name": "markov", "workers": "all", "mean_off_s": 2.0, "mean_on_s": 1.0}]
    sc = sim.scenario([sim.group(3, 100.0)], network=sim.ring(), scheme="bsp", global_batch=30,
                      contention=cont, seed=9)
    first = build_contention(sc, resolve_workers(sc))
    again = build_contention(sc, resolve_workers(sc))
    probe = [i * 0.5 for i in range(400)]
    per_worker = [[c.compute_factor(t) for t in probe] for c in first]
    assert [[c.compute_factor(t) for t in reversed(probe)][::-1] for c in again] == per_worker
    assert per_worker[0] != per_worker[1] != per_worker[2] != per_worker[0]
    assert all(c.network == [] for c in first)  # target: compute only


def integral_matches(factor, breakpoints, start: float, end: float, work: float) -> bool:
    """Independent check: integral_{start}^{end} dt / f(t) == work, f constant between breakpoints."""
    points = sorted({start, end, *[t for t in breakpoints if start < t < end]})
    total = sum((b - a) / factor(a) for a, b in zip(points, points[1:], strict=False))
    return math.isclose(total, work, rel_tol=1e-9)


def test_markov_compute_times_integrate_to_the_work(sim):
    cont = [{"name": "markov", "workers": "all", "mean_off_s": 0.7, "mean_on_s": 0.4, "slowdown_min": 2.0,
             "slowdown_max": 6.0}]
    sc = sim.scenario([sim.group(3, 100.0, t0=0.05)], network=sim.ps(server_gbps=1e6, apply_s=0.001),
                      scheme="asp", global_batch=150, gradient_bytes=1, updates=150, contention=cont, seed=4)
    from lbsim.simulator.run import simulate

    res = simulate(sc)
    conts = build_contention(sc, resolve_workers(sc))  # same seed: the same streams as the run's
    stretched = 0
    for r in res.iterations:
        src = conts[r.worker].compute[0]
        src.segment(r.start_s + r.compute_s)  # generate the periods up to the iteration's end
        factor = conts[r.worker].compute_factor
        assert integral_matches(factor, src.times, r.start_s, r.start_s + r.compute_s, 0.05 + 50 / 100.0), r
        stretched += r.compute_s > 0.55 + 1e-9
    assert stretched > 10


# --- trace replay ----------------------------------------------------------------------------

def test_pai_job4_trace_makes_workers_0_and_5_to_8_slower(sim):
    path = str(sim.TRACES / "pai_job_4_norm.csv")
    m = load_pai_minibatch(path)
    cont = [{"name": "trace", "path": path}]
    res = sim.run([sim.group(10, 200.0, t0=0.1)], network=sim.ring(alpha_s=0.0001), scheme="bsp",
                  global_batch=1000, gradient_bytes=10_000_000, updates=40, contention=cont)
    nominal = 0.1 + 100 / 200.0
    for r in res.iterations:  # iteration r of worker w is multiplied by m[w, r] exactly
        assert r.compute_s == pytest.approx(nominal * m[r.worker, r.iteration], rel=1e-12), r
    mean = {w: np.mean([r.compute_s for r in res.iterations if r.worker == w]) for w in range(10)}
    slow, fast = [0, 5, 6, 7, 8], [1, 2, 3, 4, 9]
    assert min(mean[w] for w in slow) > max(mean[w] for w in fast)
    assert min(mean[w] for w in slow) > 1.2 * nominal and max(mean[w] for w in fast) < nominal
    sim.check_invariants(res)


def test_pai_trace_rows_wrap_for_more_workers_than_the_trace(sim):
    path = str(sim.TRACES / "pai_job_1_norm.csv")
    m = load_pai_minibatch(path)
    sc = sim.scenario([sim.group(12, 100.0)], network=sim.ring(), scheme="bsp", global_batch=120,
                      contention=[{"name": "trace", "path": path, "workers": [0, 10, 11]}])
    conts = build_contention(sc, resolve_workers(sc))
    assert [conts[10].iteration_factor(i) for i in range(5)] == list(m[0, :5])
    assert [conts[11].iteration_factor(i) for i in (0, 300, 301)] == [m[1, 0], m[1, 0], m[1, 1]]  # wraps at 300
    assert conts[3].iteration_factor(0) == 1.0


def test_cluster_cpu_trace_turns_utilisation_into_slowdown(sim):
    path = str(sim.TRACES / "alibaba2018_cluster_cpu_300s.csv")
    util = load_cluster_cpu(path)
    demand, cap, bucket, stagger = 0.5, 2.0, 10.0, 7
    cont = [{"name": "trace", "path": path, "demand": demand, "max_slowdown": cap, "bucket_s": bucket,
             "stagger_rows": stagger, "target": "both"}]
    sc = sim.scenario([sim.group(3, 100.0)], network=sim.ring(), scheme="bsp", global_batch=30, contention=cont)
    conts = build_contention(sc, resolve_workers(sc))

    def expected(w: int, t: float) -> float:
        u = util[(w * stagger + int(t // bucket)) % len(util)]
        return min(cap, 1.0 / min(1.0, (1.0 - u / 100.0) / demand))

    regimes = set()
    for w in range(3):
        for k in range(len(util) + 5):  # past the end: wraps around
            t = k * bucket + 3.0
            f = expected(w, t)
            assert conts[w].compute_factor(t) == pytest.approx(f, rel=1e-12), (w, k)
            assert conts[w].network_factor(t) == pytest.approx(f, rel=1e-12)
            regimes.add("free" if f == 1.0 else "capped" if f == cap else "slowed")
    assert regimes == {"free", "capped", "slowed"}
    # a busy row, by hand: u = 79.07 % leaves 20.9 % of the node, the job needs 50 %: 2.39x, capped at 2
    k = int(np.argmax(util))
    assert expected(0, k * bucket) == cap and conts[0].compute_factor(k * bucket) == cap


def test_cluster_cpu_compute_times_integrate_to_the_work(sim):
    path = str(sim.TRACES / "alibaba2018_cluster_cpu_300s.csv")
    cont = [{"name": "trace", "path": path, "demand": 0.9, "bucket_s": 0.25, "stagger_rows": 100}]
    sc = sim.scenario([sim.group(2, 100.0, t0=0.05), sim.group(1, 40.0, t0=0.05)], network=sim.ring(alpha_s=0.001),
                      scheme="bsp", global_batch=150, gradient_bytes=1_000_000, updates=60, contention=cont)
    from lbsim.simulator.run import simulate

    res = simulate(sc)
    conts = build_contention(sc, resolve_workers(sc))
    buckets = [k * 0.25 for k in range(2000)]
    for r in res.iterations:
        work = 0.05 + 50 / (100.0 if r.worker < 2 else 40.0)
        assert integral_matches(conts[r.worker].compute_factor, buckets, r.start_s, r.start_s + r.compute_s, work), r
    assert max(r.compute_s for r in res.iterations if r.worker == 0) > 1.2 * 0.55


def test_simple_trace_example_file(sim):
    path = str(sim.TRACES / "example_simple.csv")
    table = load_simple(path)
    sc = sim.scenario([sim.group(4, 100.0)], network=sim.ring(), scheme="bsp", global_batch=40,
                      contention=[{"name": "trace", "path": path}])
    conts = build_contention(sc, resolve_workers(sc))
    # README: worker 1 3x slower from 20 s to 60 s, worker 3 1.5x from 30 s to 90 s, worker 2 1.2x from 45 s on
    probes = {
        0: [(0, 1.0), (50, 1.0), (1e6, 1.0)],
        1: [(0, 1.0), (19.99, 1.0), (20, 3.0), (59.99, 3.0), (60, 1.0)],
        2: [(44.99, 1.0), (45, 1.2), (1e6, 1.2)],
        3: [(29.99, 1.0), (30, 1.5), (89.99, 1.5), (90, 1.0)],
    }
    for w, pts in probes.items():
        assert [conts[w].compute_factor(t) for t, _ in pts] == [f for _, f in pts], w
        times, factors = table[w]
        assert conts[w].compute[0].times == list(times) and conts[w].compute[0].factors == list(factors)


def test_simple_trace_replayed_through_an_asp_run(sim):
    """Worker 1 (7 s per iteration, communication ~0): iterations hand-computed across the 3x window."""
    path = str(sim.TRACES / "example_simple.csv")
    groups = [sim.group(1, 100.0, bw=1e6), sim.group(1, 100.0 / 7, bw=1e6), sim.group(2, 100.0, bw=1e6)]
    res = sim.run(groups, network=sim.ps(server_gbps=1e6), scheme="asp", global_batch=400, gradient_bytes=1,
                  updates=200, contention=[{"name": "trace", "path": path}])
    w1 = sorted((r for r in res.iterations if r.worker == 1), key=lambda r: r.iteration)
    # 0-7, 7-14, 14-23 (6 s of work before 20 s, the last 1 s x3), 23-44 (7 s x3),
    # 44-61.667 (16 s at x3 = 5.333 s of work, 1.667 at full speed), then 7 s each
    ends = [7.0, 14.0, 23.0, 44.0, 60.0 + 7.0 - 16.0 / 3.0, 68.0 + 2.0 / 3.0]
    assert [r.end_s for r in w1[:6]] == pytest.approx(ends, abs=1e-9)
    assert [r.compute_s for r in w1[:6]] == pytest.approx([7.0, 7.0, 9.0, 21.0, 61.0 + 2 / 3 - 44.0, 7.0], abs=1e-9)


# --- engine bug (failing on purpose; see the report) -----------------------------------------

class _Guarded:
    """Delegates to a time source; raises instead of spinning forever if queried too often."""

    def __init__(self, src, limit: int = 10_000) -> None:
        self.src, self.calls, self.limit = src, 0, limit

    def segment(self, t: float) -> tuple[float, float]:
        self.calls += 1
        if self.calls > self.limit:
            f, nxt = self.src.segment(t)
            raise AssertionError(f"compute_end makes no progress: segment({t!r}) -> next change {nxt!r}")
        return self.src.segment(t)


def test_periodic_series_bucket_boundary_does_not_hang_compute_end():
    """``PeriodicSeries.segment`` finds the bucket with ``int(t // bucket_s)``. At a change point that
    the engine itself produced, t = (k+1) * bucket_s in floats, ``t // bucket_s`` can be k (0.5 // 0.1
    == 4.0), so the source answers "next change at t" again and ``WorkerContention.compute_end`` loops
    forever. Through a scenario: a cluster_cpu trace with ``bucket_s: 0.1`` and any iteration that
    crosses t = 0.5 hangs ``simulate``.
    """
    from lbsim.contention.sources import PeriodicSeries

    src = PeriodicSeries(np.array([1.0, 2.0, 1.5]), 0.1)
    assert WorkerContention(compute=[_Guarded(src)]).compute_end(0.0, 1.0) > 0.5
    for k in range(1, 100):  # every change point, as the engine computes it, must move time forward
        _, nxt = src.segment((k - 1) * 0.1)
        f, after = src.segment(nxt)
        assert after > nxt and f == src.factors[k % 3], (k, nxt)
