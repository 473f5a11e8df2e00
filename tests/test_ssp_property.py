"""Property: SSP never lets a worker run more than s clocks ahead of the slowest (schemes.md).

A worker that has completed c iterations (clock c: c of its pushes applied) may start iteration
c + 1 only if ``c - min_j clock_j <= s``. The clocks are rebuilt from the records alone: worker j's
clock at time t is the number of its gradients whose update (``result.updates[u].time_s``, the
apply time) is at or before t. Clocks only grow, so checking at the iteration's start (after the
gate and the pull) is implied by the gate; a broken gate would show (see the ASP control below).
"""

from __future__ import annotations

import bisect
from collections import defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


def violations(result, staleness: int) -> tuple[list[tuple], int]:
    """(worker, iteration, start_s, clock, min clock) of every start past the bound; starts checked."""
    its, ups = result.iterations, result.updates
    n = 1 + max(r.worker for r in its)
    applied = defaultdict(list)  # worker -> apply times of its gradients
    for r in its:
        applied[r.worker].append(ups[r.update].time_s)
    for times in applied.values():
        times.sort()
    # gradients applied whose iteration was still in flight at the end have no record: clocks are
    # only known exactly before the first such update
    recorded = {r.update for r in its}
    cutoff = min((u.time_s for u in ups if u.update not in recorded), default=float("inf"))
    bad, checked = [], 0
    for r in its:
        if r.iteration == 0 or r.start_s >= cutoff:
            continue
        clocks = [bisect.bisect_right(applied[j], r.start_s) for j in range(n)]
        assert clocks[r.worker] == r.iteration  # its own pushes 0..c-1 were applied before its pull
        checked += 1
        if r.iteration - min(clocks) > staleness:
            bad.append((r.worker, r.iteration, r.start_s, r.iteration, min(clocks)))
    return bad, checked


cluster = st.integers(2, 5).flatmap(
    lambda n: st.tuples(
        st.lists(st.sampled_from([15.0, 20.0, 33.0, 50.0, 64.0, 80.0, 100.0, 150.0, 200.0]), min_size=n, max_size=n),
        st.lists(st.sampled_from([0.0, 0.01, 0.05, 0.2]), min_size=n, max_size=n),
    )
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cluster=cluster,
    staleness=st.integers(0, 3),
    markov=st.booleans(),
    seed=st.integers(0, 2**16),
    gradient_bytes=st.sampled_from([1_000, 5_000_000, 50_000_000]),
    apply_s=st.sampled_from([0.0, 0.002, 0.02]),
)
def test_ssp_never_exceeds_the_staleness_bound(sim, cluster, staleness, markov, seed, gradient_bytes, apply_s):
    speeds, t0s = cluster
    n = len(speeds)
    groups = [sim.group(1, s, t0=t0, bw=10.0) for s, t0 in zip(speeds, t0s, strict=False)]
    contention = (
        [{"name": "markov", "workers": "all", "mean_off_s": 2.0, "mean_on_s": 1.0, "slowdown_min": 1.5,
          "slowdown_max": 5.0, "target": "both"}]
        if markov else []
    )
    res = sim.run(groups, network=sim.ps(server_gbps=25.0, apply_s=apply_s, latency_s=0.0005),
                  scheme={"name": "ssp", "staleness": staleness}, global_batch=32 * n,
                  gradient_bytes=gradient_bytes, updates=12 * n, contention=contention, seed=seed)
    bad, checked = violations(res, staleness)
    assert not bad, bad
    assert checked >= n  # the property was actually exercised
    sim.check_invariants(res, strict_update_times=apply_s > 0)


def test_checker_catches_asp_running_ahead(sim):
    """Control: ASP on a 5:1 cluster breaks any small bound, and the checker sees it."""
    groups = [sim.group(1, 100.0), sim.group(1, 20.0)]
    kw = dict(network=sim.ps(server_gbps=25.0, apply_s=0.001), global_batch=64, gradient_bytes=1_000, updates=40)
    asp = sim.run(groups, scheme="asp", **kw)
    assert len(violations(asp, 3)[0]) > 0
    for s in (0, 1, 3):
        ssp = sim.run(groups, scheme={"name": "ssp", "staleness": s}, **kw)
        bad, checked = violations(ssp, s)
        assert not bad and checked > 10
        # and the bound is tight: the fast worker does get s clocks ahead
        assert violations(ssp, s - 1)[0] if s > 0 else True
