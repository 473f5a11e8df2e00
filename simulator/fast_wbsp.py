"""WBSP's fast path: :class:`lbsim.simulator.wbsp.WBSPDriver` without SimPy.

The workers (base variant: one process each; overlap variant: a compute and a communication
process each) are plain generators run by :class:`lbsim.simulator.fast_loop.EventLoop`, with the
server's queues in closed form (:class:`lbsim.simulator.fast_server.FastServer`). Rounds, steps
and records are the event path's own (:class:`lbsim.simulator.wbsp.WBSPBook`: the scheme's
``on_upload`` / ``observe_step``, :class:`lbsim.schemes.wbsp_rounds.Rounds`), called at the same
moments with the environment's clock set to the event's time. The base variant without numerics
keeps each local step as a flat list (the fields of :class:`lbsim.simulator.wbsp.Step`, no object
per step) and closes its rounds with :meth:`FastWBSP._close_flat`, the book's round close and
records for such lists (the same expressions, the same order); it asks the scheme's ``on_upload``
of the designated slowest worker's uploads only (:meth:`lbsim.schemes.base.WBSPScheme.slowest`:
another worker's upload closes nothing and changes nothing). It also merges a pulled step's pull in
closed form with the next compute, as :mod:`lbsim.simulator.fast_async` does: the arrival is no
event; the step's end (its record's end and remainder, the scheme's ``observe_step``) is made at
the worker's next apply, or earlier by :meth:`FastWBSP._settle` when a round's close reads the
estimates and which steps have ended; a step whose round closed during its pull has its record
written at its arrival's place among the records (``awaiting``, in the arrivals' order). Every
time is computed by the event path's expressions (:func:`lbsim.simulator.compute.iteration_end_s`
in its one-call form :func:`lbsim.simulator.fast_compute.compute_end_of`, the server's rules).
"""

from __future__ import annotations

from collections.abc import Generator
from functools import partial
from heapq import heappush
from operator import itemgetter
from typing import Any

from lbsim.metrics.records import ITERATION_COLUMNS
from lbsim.schemes.wbsp_rounds import Rounds

from .env import SimEnv
from .fast_compute import IterationEnd, compute_end_of
from .fast_loop import EventLoop, Process, RunEnded, Stopped, Tie
from .fast_server import FastServer
from .wbsp import Step, WBSPBook

# A flat step (base variant without numerics): its record's fields in column order, in a list (no
# object per local step), filled in as they become known: the end and comm_s (the record's remainder
# end - start - fetch - compute - wait) at the step's end, the update, the staleness (until then the
# base version) and the weight at its round's close; fetch_s = 0 and compute_start_s = start_s (no data:)
W, IT, UPDATE, START, COMPUTE, COMM, WAIT, END, BATCH, STALE, DROPPED, WEIGHT, FETCH, CUT = range(14)
assert ITERATION_COLUMNS == ("worker", "iteration", "update", "start_s", "compute_s", "comm_s", "wait_s", "end_s",
                             "batch", "staleness", "dropped", "weight", "fetch_s", "cut")
FlatStep = list[Any]
_ARRIVAL = itemgetter(0, 1)  # a merged pull's arrival and its parent: SimPy's order of the arrivals


class FastWBSP(WBSPBook):
    """Runs a WBSP scenario to its end (see the module docstring)."""

    def __init__(self, env: SimEnv) -> None:
        super().__init__(env)
        n = env.n
        self.overlap = bool(self.scheme.overlap)
        self.loop = EventLoop(env, 2 * n if self.overlap else n)
        self.server = FastServer(self.loop)
        # overlap: each worker's steps not pushed yet, and its two loops' hand-overs
        self.unpushed: list[list[Step]] = [[] for _ in range(n)]
        self.comm_idle = [False] * n  # the communication loop waits for a finished step
        self.pulling = [False] * n  # flagged: the pull is in flight
        self.stalled = [False] * n  # the compute loop waits for that pull (overlap_pull_blocks)
        self.ready: list[int | None] = [None] * n  # a pulled snapshot waiting for the next step boundary
        # each worker's iteration_end_s as one call (it owns the worker's jitter stream)
        self.end_of: list[IterationEnd] = [compute_end_of(c, spec) for c, spec in zip(env.contention, env.workers, strict=True)]
        # base variant without numerics: the open round holds flat steps (the book's rules, lists for objects)
        self.flat_rounds: Rounds[FlatStep] = Rounds(n, itemgetter(BATCH))
        # the designated slowest (WBSPScheme.slowest): asked again after each round's close; the
        # scheme's on_upload is asked of its uploads only (any other's leaves everything as it is)
        self.lead = [self.scheme.slowest()]
        # base variant without numerics, a pull in closed form merged with the next compute (no event
        # at its arrival): each worker's step whose pull arrived (or arrives) so, not yet ended here,
        # as (arrival, its parent, step, comm_s, step time); and the merged steps whose round closed
        # during their pull, whose records wait for their arrival, as (arrival, parent, step)
        self.arrival: list[tuple[float, float, FlatStep, float, float] | None] = [None] * n
        self.awaiting: list[tuple[float, float, FlatStep]] = []

    def run(self) -> None:
        """Run to the end; :class:`lbsim.simulator.fast_loop.Tie` if the order of events is not certain."""
        env, n = self.env, self.env.n
        if self.overlap:
            processes = [self._compute_loop(w) for w in range(n)] + [self._comm_loop(w) for w in range(n)]
        else:
            processes = [self._worker(w) for w in range(n)]
        self.loop.run(processes)
        env._now = self.loop.now
        self._settle(self.loop.now, final=True)
        self.loop.end(processes)
        env.finish()  # at the budget: the steps the end cuts (after the final update: nothing left)

    def _compute(self, p: int, w: int, it: int, base_version: int, now: float) -> Generator[float, float, tuple[Step, float]]:
        """Process ``p`` computes worker ``w``'s local step ``it``; returns it and the time it ended
        (:meth:`lbsim.simulator.wbsp.WBSPDriver._compute`)."""
        loop = self.loop
        start = now
        batch = self.scheme.batch(w)
        samples = self.numerics.draw(w, batch, batch) if self.numerics is not None else None
        compute_end = self.end_of[w]((start, batch, it))
        t = start + (compute_end - start)
        fifo, times, slot = loop.fifo, loop.times, loop.slot
        if not fifo and times[0] > t:  # EventLoop.at, written out (odd code: the parent is this event)
            now = t
        else:
            if t == now:
                fifo.append(p)
            elif t in slot:
                loop.collide(t, now, 2 * p + 1)
            else:
                slot[t] = 2 * p + 1
                heappush(times, t)
                loop.parent_of[p] = now
            now = yield now
        return self._step(w, it, start, start, compute_end, batch, base_version, samples), now

    # -- base variant ---------------------------------------------------------------------------
    def _worker(self, w: int) -> Process:  # noqa: PLR0915 - one step, written out as fast_async's iteration
        """Worker w's local steps, base variant (:meth:`lbsim.simulator.wbsp.WBSPDriver._worker`).

        The compute, the push, the apply and the pull of a worker alone on its node are
        :meth:`_compute` and :class:`FastServer`'s push / apply / pull written out (as
        :meth:`lbsim.simulator.fast_async.FastAsync.worker` does; the same expressions)."""
        env, loop, server = self.env, self.loop, self.server
        numerics, end_of = self.numerics, self.end_of[w]
        step = self._step
        batch = self.scheme.batch(w)  # the batch of every local step of w (WBSPScheme.batch), asked once
        push, pull, apply = server.push, server.pull, server.apply
        applied, end_step, adopt = self._applied, self._end_step, self._adopt
        on_upload, close_flat, observe, emit_flat = self._on_upload, self._close_flat, self._observe_step, self._emit_flat
        lead, slowest = self.lead, self.scheme.slowest
        rounds: Rounds[Any] = self.rounds if numerics is not None else self.flat_rounds
        versions = rounds.samples_of  # one entry per closed round, i.e. per update: env.version is its length
        fifo, times, slot, parent_of, collide = loop.fifo, loop.times, loop.slot, loop.parent_of, loop.collide
        me, me_kept = 2 * w, 2 * w + 1  # event codes (odd: a compute end, whose parent is an event of the loop's)
        timing, free, hold_end = loop.timing, loop.free, loop.hold_end
        nic_in, nic_out, applier, apply_lane = server.nic_in, server.nic_out, server.applier, server.apply_lane
        hold_s, apply_s, latency_s = timing.hold_s, timing.apply_each_s, timing.latency_s
        own_fixed, node_in, own_link = server.own_fixed[w], server.node_lane[w], server.own_link[w]
        arrival, settle, awaiting = self.arrival, self._settle, self.awaiting
        merged = False  # the current step started at a merged pull's arrival (its compute's parent)
        base_version = 0
        it = 0
        try:
            now = start = yield 0.0  # primed; then sent the start time
            while True:
                samples = numerics.draw(w, batch, batch) if numerics is not None else None
                compute_end = end_of((start, batch, it))
                t = start + (compute_end - start)
                if not fifo and times[0] > t:  # EventLoop.at, written out
                    now = t
                else:
                    # after a merged pull the compute's parent is the arrival, not an event of the loop's
                    code, parent = (me, start) if merged else (me_kept, now)
                    if t == parent:  # a compute of no length: a zero-delay event (after a merged pull: a tie)
                        if merged:
                            raise Tie(f"a compute of no length at {t!r} s after a merged pull")
                        fifo.append(w)
                    elif t in slot:
                        collide(t, parent, code)
                    else:
                        slot[t] = code
                        heappush(times, t)
                        parent_of[w] = parent
                    now = yield now
                if numerics is not None:
                    s = step(w, it, start, start, compute_end, batch, base_version, samples)
                # push: FastServer.push, written out for a worker alone on its node
                if node_in >= 0:
                    now = yield from push(w, w, now)
                else:
                    own_s = own_fixed if own_fixed >= 0 else own_link(now)
                    f = free[nic_in]
                    granted = f if f > now else now
                    released = free[nic_in] = granted + hold_s
                    left = now + own_s - released  # tail_s, written out: what is left of the own link, + latency
                    t = released + ((left if left > 0.0 else 0.0) + latency_s)
                    if t == released:
                        now = yield from hold_end(w, released, granted, now)
                    elif not fifo and times[0] > t:
                        now = t
                    else:
                        if t in slot:
                            collide(t, released, me)
                        else:
                            slot[t] = me
                            heappush(times, t)
                            parent_of[w] = released
                        now = yield now
                pushed = now
                if apply_lane >= 0:
                    now = yield from apply(w, now)
                else:  # FastServer.apply, written out
                    f = free[applier]
                    granted = f if f > now else now
                    t = free[applier] = granted + apply_s
                    if not fifo and times[0] > t:
                        now = t
                    else:
                        if t in slot:
                            collide(t, granted, me)
                        else:
                            slot[t] = me
                            heappush(times, t)
                            parent_of[w] = granted
                        now = yield now
                if numerics is None:  # WBSPBook._step and _applied for one step without numerics, written out: a flat step
                    a = arrival[w]
                    if a is not None:  # the previous step's merged pull arrived: it ends before this step's estimate
                        arrival[w] = None  # (_end_merged, written out)
                        ended = a[2]
                        ended[END], ended[COMM] = a[0], a[3]
                        observe(w, a[4])
                    compute_s, comm_s, wait_s = compute_end - start, pushed - compute_end, now - pushed
                    f_s: FlatStep = [w, it, -1, start, compute_s, 0.0, wait_s, None, batch, base_version, False, 0.0, 0.0, False]
                    rounds.open.append(f_s)
                    if w == lead[0]:  # only the designated slowest's upload can close the round (WBSPScheme.slowest)
                        env._now = now
                        settle(now)  # the merged pulls that arrived before now: their steps' ends
                        if on_upload(w, 1, now):
                            close_flat()
                            lead[0] = slowest()
                            if env.stopped:
                                raise Stopped(now)
                else:
                    env._now = now
                    s.comm_s, s.wait_s = pushed - compute_end, now - pushed
                    applied(w, [s])
                    if env.stopped:
                        raise Stopped(now)
                flagged = rounds.flagged  # Rounds.take_flag, written out (a round's close replaces the list)
                if flagged[w]:
                    flagged[w] = False
                    version = len(versions)
                    busy_since = now
                    if numerics is not None:
                        s.busy_since = busy_since
                    if node_in >= 0:
                        now = yield from pull(w, w, now)
                    else:  # FastServer.pull, written out likewise
                        own_s = own_fixed if own_fixed >= 0 else own_link(now)
                        f = free[nic_out]
                        granted = f if f > now else now
                        released = free[nic_out] = granted + hold_s
                        left = now + own_s - released  # tail_s, written out: what is left of the own link, + latency
                        t = released + ((left if left > 0.0 else 0.0) + latency_s)
                        if t == released:
                            now = yield from hold_end(w, released, granted, now)
                        elif numerics is None:  # merged with the next compute (no event at the arrival)
                            comm_s += t - busy_since
                            base_version = version
                            arrival[w] = (t, released, f_s, t - start - 0.0 - compute_s - wait_s,
                                          0.0 + compute_s + comm_s + wait_s)
                            if f_s[UPDATE] >= 0:  # its round has closed (this upload closed it): its record at its arrival
                                awaiting.append((t, released, f_s))
                            it += 1
                            start, merged = t, True
                            continue
                        elif not fifo and times[0] > t:
                            now = t
                        else:
                            if t in slot:
                                collide(t, released, me)
                            else:
                                slot[t] = me
                                heappush(times, t)
                                parent_of[w] = released
                            now = yield now
                    base_version = version
                    if numerics is None:
                        comm_s += now - busy_since
                        if awaiting:  # the records of merged steps that arrived before now go first
                            settle(now, records_only=True)
                    else:
                        env._now = now
                        s.comm_s += now - busy_since
                        s.busy_since = None
                        adopt(w, version)
                if numerics is None:  # WBSPBook._end_step, written out (the same step time: fetch_s = 0.0)
                    f_s[END] = now
                    f_s[COMM] = now - start - 0.0 - compute_s - wait_s  # the record's remainder (fetch_s = 0.0)
                    observe(w, 0.0 + compute_s + comm_s + wait_s)
                    if f_s[UPDATE] >= 0:  # its round has closed
                        emit_flat(f_s)
                else:
                    end_step(s)
                it += 1
                start, merged = now, False
        except RunEnded:
            return  # the steps the end cuts are the environment's open rows (SimEnv.finish)

    def _settle(self, now: float, final: bool = False, records_only: bool = False) -> None:
        """The ends of the steps whose merged pulls arrived before ``now``, as :meth:`_worker`'s step
        end makes them at the arrival (the same values, computed at the pull's start): the record's
        end and remainder and the scheme's ``observe_step`` (every worker's, before a round's close
        reads the estimates and which steps have ended), and the records of those whose round closed
        during the pull (``awaiting``), in the order of the arrivals (time, then parent: the server
        NIC's release). ``records_only``: those records alone (before another step's record).
        ``final``: the run ended at ``now``; the pulls still in flight never end. An arrival at
        ``now``, or two at one instant with one parent, is a :class:`Tie`."""
        arrival, end_merged = self.arrival, self._end_merged
        if not records_only:
            for w, a in enumerate(arrival):
                if a is not None and a[0] <= now:
                    if a[0] == now:
                        raise Tie(f"a merged pull arrives at {now!r} s, an event's instant")
                    end_merged(w)
        awaiting = self.awaiting
        if awaiting:
            due = [e for e in awaiting if e[0] <= now]
            if due:
                due.sort(key=_ARRIVAL)
                for k, (t, parent, f_s) in enumerate(due):
                    if t == now or (k and t == due[k - 1][0] and parent == due[k - 1][1]):
                        raise Tie(f"a merged pull's arrival at {t!r} s: its order is not certain")
                    if f_s[END] is None:  # its worker has not reached its next apply: it ends here
                        held = arrival[f_s[W]]
                        assert held is not None and held[2] is f_s
                        end_merged(f_s[W])
                    self._emit_flat(f_s)
                awaiting[:] = [e for e in awaiting if e[0] > now]
        if final:
            arrival[:] = [None] * len(arrival)
            awaiting.clear()

    def _end_merged(self, w: int) -> None:
        """End worker ``w``'s step whose merged pull arrived: the record's end and remainder, the
        scheme's ``observe_step``, as the step's end at the arrival makes them. ``arrival[w]`` holds
        exactly the step of ``w`` whose end is still to be made, and is emptied here."""
        a = self.arrival[w]
        assert a is not None, "a merged step is ended once"
        t, _parent, f_s, comm_s, step_s = a
        self.arrival[w] = None
        f_s[END], f_s[COMM] = t, comm_s
        self._observe_step(w, step_s)

    # -- flat steps: WBSPBook's round close and records, for lists -------------------------------
    def _close_flat(self) -> None:
        """:meth:`lbsim.simulator.wbsp.WBSPBook._close_round` without numerics, for flat steps."""
        env = self.env
        now = env._now
        _round, samples, steps = self.flat_rounds.close()  # every worker flagged to pull
        update = env.record_update(samples, len(steps))
        final = not env.may_update()
        rows: list[Any] = []  # the round's ended steps' records (fields end to end), added at once
        record = None if env.stopped else rows.extend  # SimEnv.record_row's rule
        cut_row, arrival, awaiting = self._cut_flat, self.arrival, self.awaiting
        for s in steps:  # a step joins one round: none was registered as an open row before
            s[UPDATE] = update
            s[STALE] = update - s[STALE]  # the base version until now
            s[WEIGHT] = s[BATCH] / samples  # WBSPBook._row's weight, batch / samples
            if s[END] is None:
                if not final:  # in the update, not ended: its row if the run ends first
                    env.open_row((s[W], s[IT]), partial(cut_row, s))
                    a = arrival[s[W]]
                    if a is not None and a[2] is s:  # a merged pull in flight: its record at its arrival
                        awaiting.append((a[0], a[1], s))
                elif record is not None:  # still pulling (or the closer's own step): cut here
                    record(cut_row(s, now))
                continue
            if record is not None:  # ended and in this update: its record
                record(s)
        if rows:
            env.iterations.extend_flat(rows)
        if final:
            env.finish()

    @staticmethod
    def _cut_flat(s: FlatStep, end_s: float) -> tuple[Any, ...]:
        """The record of a flat step in a closed round, cut at ``end_s`` (:meth:`lbsim.simulator.wbsp.WBSPBook._row`)."""
        start_s, compute_s, wait_s = s[START], s[COMPUTE], s[WAIT]
        return (*s[:COMM], end_s - start_s - 0.0 - compute_s - wait_s, wait_s, end_s, *s[BATCH:CUT], True)

    def _emit_flat(self, s: FlatStep) -> None:
        """Record a flat step that ended after its round closed (:meth:`lbsim.simulator.wbsp.WBSPBook._emit`)."""
        env = self.env
        env.close_row((s[W], s[IT]))  # registered as an open row at the close
        if not env.stopped:
            env.iterations.extend_flat(s)

    # -- overlap variant (PCC) ------------------------------------------------------------------
    def _compute_loop(self, w: int) -> Process:
        """Worker w's compute loop (:meth:`lbsim.simulator.wbsp.WBSPDriver._compute_loop`)."""
        env, loop, n, compute = self.env, self.loop, self.env.n, self._compute
        end_step, adopt, fifo = self._end_step, self._adopt, loop.fifo
        unpushed, comm_idle, pulling, stalled, ready = self.unpushed, self.comm_idle, self.pulling, self.stalled, self.ready
        blocking = self.blocking
        base_version = 0
        it = 0
        try:
            now = yield 0.0  # primed; then sent the start time
            while True:
                s, now = yield from compute(w, w, it, base_version, now)
                unpushed[w].append(s)
                if comm_idle[w]:  # wake the idle communication loop (a zero-delay event)
                    comm_idle[w] = False
                    fifo.append(n + w)
                if blocking and pulling[w]:  # wait for the pulled model
                    s.busy_since = now
                    stalled[w] = True
                    now = yield now
                    s.comm_s = now - s.busy_since
                    s.busy_since = None
                version = ready[w]
                if version is not None:
                    base_version, ready[w] = version, None
                    adopt(w, version)
                env._now = now
                end_step(s)
                it += 1
        except RunEnded:
            return

    def _comm_loop(self, w: int) -> Process:
        """Worker w's communication loop (:meth:`lbsim.simulator.wbsp.WBSPDriver._comm_loop`)."""
        env, fifo, server = self.env, self.loop.fifo, self.server
        push, pull, apply = server.push, server.pull, server.apply
        applied, take_flag = self._applied, self.rounds.take_flag
        unpushed, comm_idle, pulling, stalled, ready = self.unpushed, self.comm_idle, self.pulling, self.stalled, self.ready
        p = env.n + w  # this process
        try:
            now = yield 0.0  # primed; then sent the start time
            while True:
                if not unpushed[w]:
                    comm_idle[w] = True
                    now = yield now  # woken by the compute loop
                steps, unpushed[w] = unpushed[w], []
                now = yield from push(p, w, now)
                now = yield from apply(p, now)
                env._now = now
                applied(w, steps)
                if env.stopped:
                    raise Stopped(now)
                if take_flag(w):
                    pulling[w] = True
                    version = env.version
                    now = yield from pull(p, w, now)
                    pulling[w], ready[w] = False, version
                    if stalled[w]:  # the compute loop waits for this pull: it goes on (a zero-delay event)
                        stalled[w] = False
                        fifo.append(w)
        except RunEnded:
            return
