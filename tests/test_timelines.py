"""Exact, hand-computed timelines for a two-worker fast/slow cluster under BSP, SSP(1) and ASP.

Worker 0 computes at 100 samples/s, worker 1 at 50 samples/s, t0 = 0, batch 100 each: compute
takes 1 s and 2 s. Every figure is a dyadic fraction so the engine's floats are exact:

* parameter server: S = 1.25e8 bytes, server NIC 8 Gbit/s = 1e9 B/s, 1 shard -> a transfer holds
  the server NIC h = 0.125 s; worker links 8 Gbit/s -> own time 0.125 s; apply a = 0.0625 s;
  latency 0. A push or pull that finds the NIC free therefore takes exactly 0.125 s.
* ring: alpha = 0.0625, worker 1's link 4 Gbit/s = 5e8 B/s (the slowest) ->
  T = 2(n-1) alpha + 2(n-1)/n S / B_min = 0.125 + 0.25 = 0.375 s.

Rows are ``(worker, iteration, update, start_s, end_s, staleness)``.
"""

from __future__ import annotations

import pytest

S = 125_000_000
A = 0.0625  # apply


@pytest.fixture(scope="module")
def two(sim):
    groups = [sim.group(1, 100.0), sim.group(1, 50.0)]
    net = sim.ps(server_gbps=8.0, shards=1, apply_s=A, latency_s=0.0)

    def go(scheme, updates, network=net, grps=groups, **kw):
        res = sim.run(grps, network=network, scheme=scheme, global_batch=200, gradient_bytes=S, updates=updates, **kw)
        sim.check_invariants(res)
        return res

    return go


def rows(result, *, max_update=None):
    out = [
        (r.worker, r.iteration, r.update, r.start_s, r.end_s, r.staleness)
        for r in result.iterations
        if max_update is None or r.update <= max_update
    ]
    return sorted(out, key=lambda x: (x[2], x[0], x[1]))  # by update (dropped: -1 first)


# --- BSP, ring all-reduce ---------------------------------------------------------------------

def test_bsp_ring_three_rounds(two, sim):
    groups = [sim.group(1, 100.0), sim.group(1, 50.0, bw=4.0)]
    res = two("bsp", 4, network=sim.ring(alpha_s=0.0625), grps=groups)
    # round r: both start at 2.375 r; worker 1 (2 s) is last; the ring runs 0.375 s; update at 2.375 (r+1)
    expected = []
    for r in range(3):
        t = 2.375 * r
        expected += [(0, r, r, t, t + 2.375, 0), (1, r, r, t, t + 2.375, 0)]
    assert rows(res, max_update=2) == expected
    assert [u.time_s for u in res.updates] == [2.375, 4.75, 7.125, 9.5]
    assert all(u.gradients == 2 and u.samples == 200 for u in res.updates)
    for r in res.iterations:
        if r.update <= 2:
            # fast worker: 1 s compute, waits 1 s for the slow one; both spend the ring in comm
            assert (r.compute_s, r.comm_s, r.wait_s) == ((1.0, 0.375, 1.0) if r.worker == 0 else (2.0, 0.375, 0.0))


def test_bsp_ring_network_slowdown_at_ring_start_stretches_that_ring_only(two, sim):
    # worker 0's link is 2x slower during [2.0, 2.5): only the first ring starts inside that window
    groups = [sim.group(1, 100.0), sim.group(1, 50.0, bw=8.0)]
    cont = [{"name": "scheduled", "workers": [0], "start_s": 2.0, "end_s": 2.5, "slowdown": 2.0, "target": "network"}]
    res = two("bsp", 3, network=sim.ring(alpha_s=0.0625), grps=groups, contention=cont)
    # B_min = 1e9 except at the first ring (starts at 2.0, inside the window): B_min = 5e8
    # round 0: ring 2.0 -> 2.0 + 0.125 + 0.25 = 2.375; round 1: compute 2.375 -> 4.375, ring 0.25 -> 4.625
    assert [u.time_s for u in res.updates] == [2.375, 4.625, 6.875]
    # the slowdown is on the network only: compute is untouched
    assert {r.compute_s for r in res.iterations if r.worker == 0} == {1.0}


def test_bsp_ring_single_worker_has_no_communication(sim):
    res = sim.run([sim.group(1, 100.0, t0=0.25)], network=sim.ring(alpha_s=0.5), scheme="bsp",
                  global_batch=100, gradient_bytes=S, updates=3)
    assert [u.time_s for u in res.updates] == [1.25, 2.5, 3.75]
    assert all(r.comm_s == 0 and r.wait_s == 0 for r in res.iterations)


# --- ASP on a parameter server ----------------------------------------------------------------

def test_asp_parameter_server(two):
    res = two("asp", 10)
    # worker 0 (1 s): compute, push 0.125, apply 0.0625, pull 0.125 -> 1.3125 per iteration when alone.
    # worker 1 (2 s): first push at 2.0. Staleness = updates made between the worker's pull and its push.
    expected = [
        (0, 0, 0, 0.0, 1.3125, 0),  # push 1-1.125, apply -> 1.1875 (u0), pull -> 1.3125
        (1, 0, 1, 0.0, 2.3125, 1),  # push 2-2.125, apply -> 2.1875 (u1; u0 was made since its pull at 0)
        (0, 1, 2, 1.3125, 2.625, 1),  # compute -> 2.3125, push -> 2.4375, apply -> 2.5 (u2; pulled v1, u1 since)
        (0, 2, 3, 2.625, 3.9375, 0),  # compute -> 3.625, push -> 3.75, apply -> 3.8125 (u3; pulled v3)
        (1, 1, 4, 2.3125, 4.625, 2),  # compute -> 4.3125, push -> 4.4375, apply -> 4.5 (u4; pulled v2: u2, u3 since)
        (0, 3, 5, 3.9375, 5.25, 1),  # compute -> 4.9375, push -> 5.0625, apply -> 5.125 (u5; pulled v4: u4 since)
        (0, 4, 6, 5.25, 6.5625, 0),  # compute -> 6.25, push -> 6.375, apply -> 6.4375 (u6; pulled v6)
    ]
    assert rows(res, max_update=6) == expected
    assert [u.time_s for u in res.updates[:7]] == [1.1875, 2.1875, 2.5, 3.8125, 4.5, 5.125, 6.4375]
    assert all(u.gradients == 1 and u.samples == 100 for u in res.updates)
    for r in res.iterations:
        if r.update <= 6:
            assert (r.compute_s, r.comm_s, r.wait_s) == (1.0 + r.worker, 0.25, 0.0625)


def test_asp_final_update_ends_the_run_without_a_pull(two):
    res = two("asp", 6)
    last = max(res.iterations, key=lambda r: r.update)
    assert (last.worker, last.iteration, last.update) == (0, 3, 5)
    assert last.end_s == res.updates[-1].time_s == 5.125 == res.summary["sim_time_s"]
    assert last.comm_s == 0.125  # the push only


# --- SSP, staleness 1 -------------------------------------------------------------------------

def test_ssp_staleness_one_parameter_server(two):
    res = two({"name": "ssp", "staleness": 1}, 10)
    expected = [
        (0, 0, 0, 0.0, 1.3125, 0),  # as ASP: clocks (1, 0), 1 - 0 <= 1
        (1, 0, 1, 0.0, 2.3125, 1),
        (0, 1, 2, 1.3125, 2.625, 1),  # u2 at 2.5, clocks (2, 1): 2 - 1 <= 1, passes
        # u3 at 3.8125, clocks (3, 1): 3 - 1 > 1 -> blocked until worker 1's u4 at 4.5. Worker 1 passes
        # its own gate first and pulls 4.5 - 4.625; worker 0 queues at the server NIC: 4.625 - 4.75.
        (0, 2, 3, 2.625, 4.75, 0),
        (1, 1, 4, 2.3125, 4.625, 2),
        # worker 0: compute 4.75 -> 5.75, push -> 5.875, apply -> 5.9375 (u5), clocks (4, 2): blocked.
        # worker 1: compute 4.625 -> 6.625, push -> 6.75, apply -> 6.8125 (u6), pulls 6.8125 - 6.9375,
        # worker 0 pulls 6.9375 - 7.0625.
        (0, 3, 5, 4.75, 7.0625, 0),
        (1, 2, 6, 4.625, 6.9375, 1),
    ]
    assert rows(res, max_update=6) == expected
    assert [u.time_s for u in res.updates[:7]] == [1.1875, 2.1875, 2.5, 3.8125, 4.5, 5.9375, 6.8125]
    by_key = {(r.worker, r.iteration): r for r in res.iterations}
    blocked = by_key[0, 2]
    # comm = push 0.125 + pull 0.25 (0.125 queueing behind worker 1's pull at the server NIC)
    assert (blocked.compute_s, blocked.comm_s, blocked.wait_s) == (1.0, 0.375, 0.75)
    assert (by_key[0, 3].comm_s, by_key[0, 3].wait_s) == (0.375, 0.9375)


# --- BSP with a backup worker on a parameter server -------------------------------------------

def test_bsp_backup_worker_drops_the_slow_gradient(two):
    res = two({"name": "bsp", "backup_workers": 1}, 6)
    # round 0: worker 0 computes 0-1, push -> 1.125, apply -> 1.1875: the update (1 gradient). Worker 1 is
    # interrupted mid-compute (1.1875 s of its 2 s done). Worker 0 pulls first (1.1875-1.3125), worker 1
    # queues behind it at the server NIC (1.3125-1.4375). Each later round: worker 0 starts 0.125 s
    # before worker 1, makes the update 1.1875 s later, then both pull again.
    assert [u.time_s for u in res.updates] == [1.1875 + 1.3125 * k for k in range(6)]
    assert all(u.gradients == 1 and u.samples == 100 for u in res.updates)
    fast = sorted((r for r in res.iterations if r.worker == 0), key=lambda r: r.iteration)
    slow = sorted((r for r in res.iterations if r.worker == 1), key=lambda r: r.iteration)
    assert [(r.update, r.dropped, r.start_s, r.end_s) for r in fast[:5]] == [
        (k, False, 1.3125 * k, 1.3125 * (k + 1)) for k in range(5)
    ]
    assert all((r.compute_s, r.comm_s, r.wait_s) == (1.0, 0.25, 0.0625) for r in fast[:5])
    assert slow[0].dropped and slow[0].update == -1
    assert (slow[0].start_s, slow[0].end_s, slow[0].compute_s, slow[0].comm_s) == (0.0, 1.4375, 1.1875, 0.25)
    for k, r in enumerate(slow[1:5], start=1):
        assert r.dropped and r.update == -1
        assert (r.start_s, r.end_s) == (1.3125 * k + 0.125, 1.3125 * (k + 1) + 0.125)
        assert (r.compute_s, r.comm_s, r.wait_s) == (1.0625, 0.25, 0.0)  # cut by the update
    assert res.summary["dropped_iterations"] == len(slow)
    assert res.summary["samples"] == 600


# --- regressions for engine bugs found on HEAD cf4aa0f, and one still open ------------------

def test_final_sync_round_records_every_worker(two, sim):
    """The final synchronous update contains 2 gradients: both workers' records must be kept.

    Bug on HEAD cf4aa0f: on the final round the first worker to resume called ``env.finish()``, which
    set ``stopped``; ``record_iteration`` then silently dropped the other workers' records of the same
    round, although they finished at the same instant and their gradients are in the update.
    """
    groups = [sim.group(1, 100.0), sim.group(1, 50.0, bw=4.0)]
    res = two("bsp", 2, network=sim.ring(alpha_s=0.0625), grps=groups)
    last = res.updates[-1]
    assert last.gradients == 2
    assert sorted((r.worker, r.iteration) for r in res.iterations if r.update == last.update) == [(0, 1), (1, 1)]
    assert res.summary["worker_iterations"] == 4


def _slow_link_backup(sim, updates):
    groups = [sim.group(1, 100.0), sim.group(1, 50.0, bw=0.4)]
    return sim.run(groups, network=sim.ps(server_gbps=8.0, apply_s=A), scheme={"name": "bsp", "backup_workers": 1},
                   global_batch=200, gradient_bytes=S, updates=updates)


def test_backup_worker_still_pulling_is_not_interrupted_by_the_next_round(sim):
    """A backup-worker round can end while a dropped worker is still pulling the previous round's weights.

    Worker 1's link is slow (0.4 Gbit/s: a pull takes 2.5 s). Round 0's update is at 1.1875; worker 1
    pulls from 1.1875 until 3.6875. Worker 0 pulls until 1.3125, computes round 1 and makes its update at
    2.5, while worker 1 is still pulling round 0's weights. Bug on HEAD cf4aa0f: SyncDriver._update
    interrupted every pending worker; worker 1 was inside ``ps.pull`` (outside the try block), so the
    simpy.Interrupt escaped and the whole run raised.
    """
    res = _slow_link_backup(sim, 4)
    sim.check_invariants(res)
    assert [u.time_s for u in res.updates] == [1.1875 + 1.3125 * k for k in range(4)]
    slow = [r for r in res.iterations if r.worker == 1]
    assert [(r.iteration, r.dropped, r.start_s, r.end_s, r.compute_s, r.comm_s) for r in slow] == [
        (0, True, 0.0, 3.6875, 1.1875, 2.5)
    ]


def test_sync_iteration_is_the_worker_clock_when_it_sits_out_a_round(sim):
    """records.py: ``iteration`` is "the worker's own clock: 0, 1, 2, ...".

    Open in the working tree's sync.py (the fix for the crash above): a worker whose pull ends after
    the next round closed joins the open round and records ``iteration = round index``, so the slow
    worker here records iterations 0, 2, 4, ... (each starting where the previous ended).
    """
    res = _slow_link_backup(sim, 12)
    slow = sorted((r for r in res.iterations if r.worker == 1), key=lambda r: r.start_s)
    assert len(slow) >= 4
    assert [r.iteration for r in slow] == list(range(len(slow)))
