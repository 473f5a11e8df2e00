"""The asynchronous driver's fast path: :class:`lbsim.simulator.asynchronous.AsyncDriver` without SimPy.

Each worker is a plain generator run by :class:`lbsim.simulator.fast_loop.EventLoop`, with the
server's queues in closed form (:class:`lbsim.simulator.fast_server.FastServer`): an iteration is
four events — compute end, push arrival, apply end, pull arrival — where the event path has nine
to eleven. Every time is computed by the event path's expressions, so the records are the event
path's. The decisions are the gate's (:class:`lbsim.schemes.gate.Gate`: the scheme's ``on_push``
/ ``may_start``) and the scheme's ``batch``, asked at the same moments as the event path asks them.
"""

from __future__ import annotations

from heapq import heappush

from lbsim.metrics.run_end import cut_row, stop_reached
from lbsim.schemes.base import as_async
from lbsim.schemes.gate import Gate
from lbsim.simulator.compute import iteration_end_s
from lbsim.simulator.env import SimEnv
from lbsim.simulator.fast_loop import STOP, EventLoop, Process, RunEnded
from lbsim.simulator.fast_server import FastServer

_FLUSH_MASK = (1 << 16) - 1  # buffered rows move to the record logs every 65,536 updates


class FastAsync:
    """Runs an asynchronous scheme's scenario to its end (see the module docstring)."""

    def __init__(self, env: SimEnv) -> None:
        self.env = env
        self.scheme = as_async(env.scheme)
        self.gate = Gate(self.scheme, env.n)  # clocks, held workers, releases (shared with the runtime)
        self.loop = EventLoop(env, env.n)
        self.server = FastServer(self.loop)
        self.updates = 0  # updates made
        self.samples_applied = 0
        self.update_rows: list[tuple] = []  # type: ignore[type-arg]  # buffered for env.updates, in order
        self.rows: list[tuple] = []  # type: ignore[type-arg]  # buffered for env.iterations, in order

    def run(self) -> None:
        """Run to the end; :class:`lbsim.simulator.fast_loop.Tie` if the order of events is not certain."""
        env = self.env
        processes = [self.worker(w) for w in range(env.n)]
        self.loop.run(processes)
        env._now = self.loop.now
        env.samples_applied = self.samples_applied
        self._flush()
        self.loop.end(processes)
        self._flush()
        env.stopped = True

    def _flush(self) -> None:
        """Move the buffered update and iteration rows to the run's record logs (in order)."""
        self.env.updates.extend_rows(self.update_rows)
        self.env.iterations.extend_rows(self.rows)
        self.update_rows.clear()
        self.rows.clear()

    def worker(self, w: int) -> Process:  # noqa: PLR0915 - one iteration, written out as the event path's
        """Worker w's iterations (:meth:`lbsim.simulator.asynchronous.AsyncDriver.worker`)."""
        env, loop, server = self.env, self.loop, self.server
        cont, spec, numerics = env.contention[w], env.workers[w], env.numerics
        run_end, progress = env.run_end, env._progress
        fraction, update_target, sample_target = run_end.fraction, run_end.update_target, run_end.sample_target
        add_update, add_row, flush = self.update_rows.append, self.rows.append, self._flush
        gate_push, admit, batch_of = self.gate.push, self.gate.admit, self.scheme.batch
        push, pull, apply = server.push, server.pull, server.apply
        fifo, times, slot, clock, parent_of = loop.fifo, loop.times, loop.slot, loop.clock, loop.parent_of
        me_kept = 2 * w + 1  # a compute end's code (odd: its parent is an event of the loop's)
        pulled_version = 0
        read = numerics.weights() if numerics is not None else None
        it = 0
        # the open iteration's row, should the run end before it does (gradient applied, not ended)
        is_open = False
        update = staleness = batch = 0
        start = compute_end = comm = 0.0
        pull_start = -1.0
        try:
            now = yield  # primed; then sent the start time
            while True:
                start = now
                batch = batch_of(w)
                samples = numerics.draw(w, batch, batch) if numerics is not None else None
                compute_end = iteration_end_s(cont, spec, start, batch, it)
                t = start + (compute_end - start)
                if not fifo and times[0] > t:  # EventLoop.at, written out
                    now = clock[0] = t
                else:
                    if t == now:
                        fifo.append(w)
                    elif t in slot:
                        loop.collide(t, now, me_kept)
                    else:
                        slot[t] = me_kept
                        heappush(times, t)
                        parent_of[w] = now
                    now = yield
                now = yield from push(w, w, now)
                comm = now - compute_end
                now = yield from apply(w, now)
                update = self.updates
                staleness = update - pulled_version
                add_update((update, now, batch, 1))
                made = self.updates = update + 1
                applied = self.samples_applied = self.samples_applied + batch
                is_open, pull_start = True, -1.0
                if progress is not None:
                    progress(fraction(made, applied, now))
                if numerics is not None:
                    numerics.push(w, read, samples, now)  # type: ignore[arg-type]
                released = gate_push(w, now)
                if released:  # held workers the gate now admits, in the order held (zero-delay events)
                    fifo.extend(released)
                if stop_reached(made, applied, update_target, sample_target):  # the final update: no pull, cut here
                    is_open = False
                    compute_s = compute_end - start
                    add_row((w, it, update, start, compute_s, comm, now - start - compute_s - comm - 0.0, now, batch,
                             staleness, False, 1.0, 0.0, True))
                    yield STOP
                if not made & _FLUSH_MASK:
                    flush()
                if not admit(w):
                    now = yield  # held: a later push releases it
                pull_start = now
                pulled_version = self.updates
                if numerics is not None:
                    read = numerics.weights()
                now = yield from pull(w, w, now)
                comm += now - pull_start
                is_open = False
                compute_s = compute_end - start
                add_row((w, it, update, start, compute_s, comm, now - start - compute_s - comm - 0.0, now, batch,
                         staleness, False, 1.0, 0.0, False))
                it += 1
        except RunEnded as end:
            if is_open:  # applied, not ended: recorded up to the end, cut
                t = end.time_s
                self.rows.append(cut_row(worker=w, iteration=it, update=update, start_s=start, end_s=t,
                                         compute_s=compute_end - start, fetch_s=0.0,
                                         comm_s=comm + (t - pull_start if pull_start >= 0 else 0.0),
                                         batch=batch, staleness=staleness, weight=1.0))
