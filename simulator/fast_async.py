"""The asynchronous driver's fast path: :class:`lbsim.simulator.asynchronous.AsyncDriver` without SimPy.

Each worker is a plain generator run by :class:`lbsim.simulator.fast_loop.EventLoop`, with the
server's queues in closed form (:class:`lbsim.simulator.fast_server.FastServer`): an iteration is
three events — compute end, push arrival, apply end — where the event path has nine to eleven.

**The pull merged with the next compute.** A pull's arrival does nothing another worker can see:
it records the iteration's row and starts the next compute, whose end depends on the worker's own
contention only. With a fixed batch and no numerics the next start asks nothing that could change
before the arrival, so a pull in closed form is no event: at its start the worker records the row
(ending at the arrival ``a``) and schedules the next compute's end, whose parent is ``a``. Rows are
buffered with their arrival's parent (the server NIC's release) and move to the record log in the
order of (end, parent) — SimPy's order of the arrivals — once they end before the loop's clock.
Two rows at one instant whose order that does not tell, a row ending at the run's end, and a
compute of no length after a merged pull are :class:`lbsim.simulator.fast_loop.Tie`.

The push and pull of a worker alone on its node, the common case, are
``FastServer.push`` / ``pull`` written out (they are a tenth of the run's work); the two agree
(both are held to the event path's records by tests/test_fast_ps.py). Every time is computed by
the event path's expressions (an iteration's compute end by its one-call form,
:func:`lbsim.simulator.fast_compute.compute_end_of`), so the records are the event path's. The decisions are the gate's (:class:`lbsim.schemes.gate.Gate`: the scheme's ``on_push``
/ ``may_start``) and the scheme's ``batch``, asked at the same moments as the event path asks them
(``batch`` once per worker of a scheme that declares ``fixed_batch``: the same answer every time);
neither path asks the gate of a scheme that declares it never holds a worker (``Gate.free``).
"""

from __future__ import annotations

import math
from heapq import heappush

import numpy as np

from lbsim.metrics.records import ITERATION_COLUMNS, ITERATION_DTYPES, RecordLog, columns_from_flat
from lbsim.metrics.run_end import cut_row
from lbsim.schemes.base import as_async
from lbsim.schemes.gate import Gate

from .env import SimEnv
from .fast_compute import compute_end_of
from .fast_loop import EventLoop, Process, RunEnded, Stopped, Tie
from .fast_server import FastServer

_FLUSH_MASK = (1 << 10) - 1  # buffered rows move to the record logs every 1,024 updates (records._CHUNK's reason)
_VARYING = ITERATION_COLUMNS[:10]  # an iteration row's fields up to ``staleness``; the rest are constant
_CONSTANT = {"dropped": False, "weight": 1.0, "fetch_s": 0.0, "cut": False}  # an iteration that ran to its end
assert _VARYING + tuple(_CONSTANT) == ITERATION_COLUMNS
_UPDATE = ("time_s", "samples")  # an update row's buffered fields
# an iteration row as buffered: _VARYING, then the time of its arrival's parent (the release of the
# server NIC that sent its pull; NaN: not known), which orders rows ending at one instant
_BUFFERED = (*_VARYING, "parent_s")
_BUFFERED_DTYPES = {**ITERATION_DTYPES, "parent_s": np.float64}


def _add_columns(log: RecordLog, flat: list, names: tuple[str, ...], extra: dict) -> None:  # type: ignore[type-arg]
    """Append the rows in ``flat`` (the fields ``names`` of each row, laid end to end) to ``log`` as
    columns, with the columns ``extra`` (name -> a constant, or an array of one value per row), in
    the log's column order."""
    _add_block(log, columns_from_flat(flat, names, log.kind.DTYPES), len(flat) // len(names), extra)


def _add_block(log: RecordLog, cols: dict[str, np.ndarray], n: int, extra: dict) -> None:  # type: ignore[type-arg]
    """Append ``n`` rows given as columns ``cols`` to ``log``, with the columns ``extra`` (name -> a
    constant, or an array of one value per row), in the log's column order."""
    dtypes = log.kind.DTYPES
    block = {}
    for c in log.kind.COLUMNS:
        if c in extra:
            v = extra[c]
            block[c] = v if isinstance(v, np.ndarray) else np.full(n, v, dtype=dtypes[c])
        else:
            block[c] = cols[c]
    log.extend_columns(block)


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
        # buffered for the run's record logs, in order, each row's fields laid end to end (no tuple
        # per row): updates as time_s, samples (the update's number is its place; one gradient
        # each), iterations that ran to their end as their first ten fields (_VARYING; the rest
        # _CONSTANT); and the rows the run's end cuts, in full
        self.update_rows: list[float | int] = []
        self.rows: list[float | int] = []
        self.cut_rows: list[tuple] = []  # type: ignore[type-arg]
        # a pull in closed form is merged with the next compute (no event at its arrival) when the
        # next start asks nothing that could change before the arrival: a fixed batch, no numerics
        self.fixed = bool(getattr(self.scheme, "fixed_batch", False))  # batch(w) is the same at every iteration
        self.merging = self.fixed and env.numerics is None

    def run(self) -> None:
        """Run to the end; :class:`lbsim.simulator.fast_loop.Tie` if the order of events is not certain."""
        env = self.env
        processes = [self.worker(w) for w in range(env.n)]
        self.loop.run(processes)
        env._now = self.loop.now
        env.samples_applied = self.samples_applied
        self._flush(self.loop.now, final=True)
        self.loop.end(processes)
        self._flush()
        env.stopped = True

    def _flush(self, until_s: float = math.inf, final: bool = False) -> None:
        """Move the buffered update and iteration rows to the run's record logs, in order.

        Iteration rows go in the order of their ends (``end_s``), the order of the pull arrivals
        the event path records them at: a row whose pull was merged with the next compute
        (:meth:`worker`) is buffered when its pull starts, before rows that end earlier. Those
        that end before ``until_s`` (the loop's clock: every later row ends after it) move; the
        rest wait. Rows ending at one instant go by their arrivals' parents (SimPy's order of two
        events at one time); where that does not tell (equal parents, or a merged row beside one
        recorded at its event, whose parent is not kept) it is a :class:`Tie`. ``final``: the run
        ended at ``until_s``; rows ending after it are pulls the end cuts, dropped here (each
        worker records its cut row), and one ending at it is a tie (the end and the arrival at one
        instant). The rows the end cuts come after every other."""
        env, updates, rows = self.env, self.update_rows, self.rows
        if updates:
            first = len(env.updates)
            numbers = np.arange(first, first + len(updates) // len(_UPDATE), dtype=np.int64)
            _add_columns(env.updates, updates, _UPDATE, {"update": numbers, "gradients": 1})
            updates.clear()
        if rows:
            cols = columns_from_flat(rows, _BUFFERED, _BUFFERED_DTYPES)
            rows.clear()
            n = len(cols["end_s"])
            if self.merging:
                end, parent = cols["end_s"], cols["parent_s"]
                order = np.lexsort((parent, end))  # by end, then by the parent of the arrival
                end, parent = end[order], parent[order]
                same = end[1:] == end[:-1]
                if same.any():  # rows ending at one instant: merged ones go by their parents
                    a, b = parent[:-1][same], parent[1:][same]
                    # NaN: a row recorded at its arrival, in the loop's order (kept by the stable sort)
                    known_a, known_b = a == a, b == b
                    if ((known_a != known_b) | (known_a & known_b & ~(b > a))).any():
                        raise Tie("two iterations end at one instant: the order of their arrivals is not certain")
                done = int(np.searchsorted(end, until_s, side="left"))
                if final and done < n and end[done] == until_s:
                    raise Tie(f"an iteration ends at the run's end ({until_s!r} s)")
                if not final and done < n:  # ending after the clock: they wait for the next flush
                    waiting = order[done:]
                    rows.extend(np.stack([cols[c][waiting].astype(np.float64) for c in _BUFFERED], axis=1).ravel().tolist())
                cols = {c: v[order[:done]] for c, v in cols.items()}
                n = done
            if n:
                _add_block(env.iterations, cols, n, _CONSTANT)
        if self.cut_rows:
            env.iterations.extend_rows(self.cut_rows)
            self.cut_rows.clear()

    def worker(self, w: int) -> Process:  # noqa: PLR0915 - one iteration, written out as the event path's
        """Worker w's iterations (:meth:`lbsim.simulator.asynchronous.AsyncDriver.worker`)."""
        env, loop, server = self.env, self.loop, self.server
        cont, numerics = env.contention[w], env.numerics
        end_of = compute_end_of(cont, env.workers[w])  # iteration_end_s, one call
        run_end, progress = env.run_end, env._progress
        fraction, (final_updates, final_samples) = run_end.fraction, run_end.thresholds()
        add_update, add_row, flush, add_cut = self.update_rows.extend, self.rows.extend, self._flush, self.cut_rows.append
        gate = self.gate
        gate_push, admit, batch_of = gate.push, gate.admit, self.scheme.batch
        decided = gate.decided  # admits_at_push: a true gate.go after the push is admit's True (not asked)
        gated = not self.gate.free  # a scheme that never holds anyone: the gate is not asked (Gate.free)
        push, pull, apply = server.push, server.pull, server.apply
        fifo, times, slot, parent_of = loop.fifo, loop.times, loop.slot, loop.parent_of
        me, me_kept = 2 * w, 2 * w + 1  # event codes (odd: a compute end, whose parent is an event of the loop's)
        timing, free, hold_end = loop.timing, loop.free, loop.hold_end
        nic_in, nic_out, applier, apply_lane = server.nic_in, server.nic_out, server.applier, server.apply_lane
        hold_s, apply_s, latency_s = timing.hold_s, timing.apply_each_s, timing.latency_s
        own_fixed, node_in, own_link = server.own_fixed[w], server.node_lane[w], server.own_link[w]
        pulled_version = 0
        read = numerics.weights() if numerics is not None else None
        it = 0
        fixed = self.fixed
        merging, nan, inf, flush_mask = self.merging, math.nan, math.inf, _FLUSH_MASK
        merged = False  # the current iteration started at a merged pull's arrival
        # the open iteration (gradient applied, not ended), should the run end before it ends: open,
        # its pull's start (-1: not started) and, merged, its arrival, start and compute time
        is_open = False
        pull_start, pull_end, open_start, open_compute_s = -1.0, math.inf, 0.0, 0.0
        update = staleness = 0
        batch = batch_of(w) if fixed else 0
        start = compute_end = comm = 0.0
        try:
            now = start = yield 0.0  # primed; then sent the start time
            while True:
                if not fixed:
                    batch = batch_of(w)
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
                        loop.collide(t, parent, code)
                    else:
                        slot[t] = code
                        heappush(times, t)
                        parent_of[w] = parent
                    now = yield now
                # push: FastServer.push, written out for a worker alone on its node (a shared node's NIC: the server's)
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
                            loop.collide(t, released, me)
                        else:
                            slot[t] = me
                            heappush(times, t)
                            parent_of[w] = released
                        now = yield now
                comm = now - compute_end
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
                            loop.collide(t, granted, me)
                        else:
                            slot[t] = me
                            heappush(times, t)
                            parent_of[w] = granted
                        now = yield now
                update = self.updates
                staleness = update - pulled_version
                add_update((now, batch))
                made = self.updates = update + 1
                applied = self.samples_applied = self.samples_applied + batch
                is_open, pull_start, pull_end = True, -1.0, inf
                if progress is not None:
                    progress(fraction(made, applied, now))
                if numerics is not None:
                    numerics.push(w, read, samples, now)  # type: ignore[arg-type]
                if gated:
                    admitted = gate_push(w, now)
                    if admitted:  # held workers the gate now admits, in the order held (zero-delay events)
                        fifo.extend(admitted)
                if made >= final_updates or applied >= final_samples:  # the final update (RunEnd.reached): no pull, cut here
                    is_open = False
                    compute_s = compute_end - start
                    add_cut((w, it, update, start, compute_s, comm, now - start - compute_s - comm, now, batch,
                             staleness, False, 1.0, 0.0, True))
                    raise Stopped(now)
                if not made & flush_mask:
                    flush(now)
                if gated and not (decided and gate.go) and not admit(w):
                    now = yield now  # held: a later push releases it
                pull_start = now
                pulled_version = self.updates
                if numerics is not None:
                    read = numerics.weights()
                # pull: FastServer.pull, written out likewise
                if node_in >= 0:
                    now = yield from pull(w, w, now)
                else:
                    own_s = own_fixed if own_fixed >= 0 else own_link(now)
                    f = free[nic_out]
                    granted = f if f > now else now
                    released = free[nic_out] = granted + hold_s
                    left = now + own_s - released  # tail_s, written out: what is left of the own link, + latency
                    t = released + ((left if left > 0.0 else 0.0) + latency_s)
                    if t == released:
                        now = yield from hold_end(w, released, granted, now)
                    elif merging:  # merged with the next compute: the row now (ordered by its end), no event
                        compute_s = compute_end - start
                        spent = comm + (t - pull_start)
                        add_row((w, it, update, start, compute_s, spent, t - start - compute_s - spent, t, batch,
                                 staleness, released))
                        pull_end, open_start, open_compute_s = t, start, compute_s
                        it += 1
                        start, merged = t, True
                        continue
                    elif not fifo and times[0] > t:
                        now = t
                    else:
                        if t in slot:
                            loop.collide(t, released, me)
                        else:
                            slot[t] = me
                            heappush(times, t)
                            parent_of[w] = released
                        now = yield now
                comm += now - pull_start
                is_open = False
                compute_s = compute_end - start
                add_row((w, it, update, start, compute_s, comm, now - start - compute_s - comm, now, batch, staleness,
                         nan))
                it += 1
                start, merged = now, False
        except RunEnded as end:
            t = end.time_s
            if is_open and t < pull_end:  # applied, not ended: recorded up to the end, cut
                if pull_end < math.inf:  # a merged pull in flight: the iteration before the current one
                    it, start, compute_s = it - 1, open_start, open_compute_s
                else:
                    compute_s = compute_end - start
                add_cut(cut_row(worker=w, iteration=it, update=update, start_s=start, end_s=t,
                                compute_s=compute_s, fetch_s=0.0,
                                comm_s=comm + (t - pull_start if pull_start >= 0 else 0.0),
                                batch=batch, staleness=staleness, weight=1.0))
