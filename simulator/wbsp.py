"""The WBSP driver: workers keep taking local steps; a round closes at the slowest's upload.

The scheme (:mod:`lbsim.schemes.wbsp`) says which upload closes a round; this module enacts the
timing on a parameter server (:class:`lbsim.simulator.network.ParameterServer`: shared NIC, serial apply
queue). Semantics ("paper-consistent", schemes-research.md §5.2):

* every applied upload joins the *open* round; when the scheme says an upload closes the round
  (its worker is the designated slowest), the server snapshots the model: the round becomes one
  global update (``samples`` = the batches of the round's local steps, ``gradients`` = the number
  of local steps whose deltas it holds) and every worker is flagged to pull that snapshot. Deltas
  applied after the snapshot belong to the next round.
* a worker learns of the flag in the server's reply to its next upload (the code's
  ``ok_to_pull``), then pulls the newest snapshot; the model it pulled is the *base version* of
  the steps it computes from then on.

Base variant (``overlap: false``, the code's ``wk_wbsp.py``), one SimPy process per worker::

    [fetch the batch] -> compute one local step (contention integrated exactly) -> push its delta -> serial apply
    -> the scheme: does this upload close the round? -> if flagged: pull -> next step

Overlap variant (``overlap: true``, the code's ``wk_pcc_v2.py``), two processes per worker:

* the compute loop runs local steps back to back. At a step boundary it adopts a pulled model
  that has arrived (steps compute on the model adopted at their start). With
  ``overlap_pull_blocks`` (default, as the code, whose compute thread spins while ``isoktopull``
  is set) a boundary reached after the flag came and before the pulled model is loaded waits for
  the pull: that stall is the step's ``comm_s``. Without it compute never waits and the model is
  adopted at the first boundary after the pull completed.
* the communication loop, whenever it is idle and steps have finished, pushes *one* delta for
  all of them (the code pushes ``w_local - w_last_pushed``, i.e. everything since its last push),
  waits for the serial apply, reads the flag from the reply and pulls when flagged. Our choice
  (bound): the code issues one push per finished step even when several have accumulated (the
  later ones nearly empty); a simulator doing so would queue pushes without bound whenever a push
  takes longer than a step, so we coalesce — at most one push in flight per worker, every
  finished step carried by the next push.

With a ``data:`` section every step first reads its batch's samples (uniform sampling,
:mod:`lbsim.simulator.fetch`, as the asynchronous driver; in overlap mode on the compute loop, where the
code's compute thread loads its batch).

Records: one :class:`IterationRecord` per local step, from its start to the moment its worker can
start the next step: ``fetch_s`` (0 without ``data:``); ``compute_s``; ``comm_s`` = push + pull on the step's critical path (base)
or the pull stall (overlap); ``wait_s`` = the server's apply queue (base; 0 in overlap);
``update`` = the round whose global model includes the step's delta (known only when that round
closes: records are buffered until then); ``staleness`` = that round minus the base version the
step computed on; ``weight`` = batch / samples of the round. Steps whose round has not closed when
the run ends are not recorded (their deltas are in no global update). When the final update is
made (update or sample target), its steps still pulling (or stalled on a pull) are cut at that
instant, marked ``cut``; at the time budget, so are the steps of closed rounds still pulling
(:mod:`lbsim.metrics.run_end`).

Note: a step's round usually closes *after* the step ended (a fast worker's early steps), so the
record-level invariant "update time <= iteration end" of the PS drivers does not hold here; the
update time is always after the step's compute ended.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from functools import partial
from operator import attrgetter
from typing import Any

import simpy

from lbsim.schemes.base import as_wbsp
from lbsim.schemes.wbsp_rounds import Rounds

from .compute import iteration_end_s
from .env import SimEnv
from .fetch import Fetcher
from .network import ParameterServer


class Step:
    """One local step, until its record can be written (it ended and its round closed).

    The fields that start at a default are class attributes until set: a step is made per local
    step, and most keep most of their defaults.
    """

    worker: int
    iteration: int
    start_s: float
    compute_start_s: float  # start_s + the fetch stage
    compute_end_s: float
    batch: int
    base_version: int
    comm_s: float = 0.0
    wait_s: float = 0.0
    busy_since: float | None = None  # start of a pull / pull stall in progress (to cut at the end)
    end_s: float | None = None
    update: int = -1
    delta: Any = None  # numerics: the change this step made to its worker's model
    cut: bool = False  # the run's end came before the step's (lbsim.metrics.run_end)
    opened: bool = False  # registered as an open row (in an update, not ended) with the environment

    def __init__(self, worker: int, iteration: int, start_s: float, compute_start_s: float, compute_end_s: float,
                 batch: int, base_version: int) -> None:
        self.worker, self.iteration, self.start_s, self.compute_start_s = worker, iteration, start_s, compute_start_s
        self.compute_end_s, self.batch, self.base_version = compute_end_s, batch, base_version


@dataclass
class Overlap:
    """One worker's state shared by its compute and communication loops (overlap variant)."""

    unpushed: list[Step] = field(default_factory=list)
    wake: simpy.Event | None = None  # the idle communication loop waits on it
    pulling: bool = False  # flag received, pulled model not loaded yet
    pulled: simpy.Event | None = None  # succeeds when the pull in flight completes
    ready_version: int | None = None  # a pulled snapshot waiting for the next step boundary


class WBSPBook:
    """WBSP's rounds, steps and records at the server: what both simulator paths share.

    The event path (:class:`WBSPDriver`) and the fast path (:mod:`lbsim.simulator.fast_wbsp`)
    differ only in how they order events; each calls these methods at the same moments (with
    ``env``'s clock at the event's time), so the decisions (the scheme's ``on_upload`` and
    ``observe_step``, :class:`Rounds`) and the records come from one place.
    """

    def __init__(self, env: SimEnv) -> None:
        self.env = env
        self.scheme = as_wbsp(env.scheme)
        self.rounds: Rounds[Step] = Rounds(env.n, attrgetter("batch"))  # open round, pull flags (shared with the runtime)
        self.blocking = bool(self.scheme.overlap_pull_blocks)
        self._observe_step, self._on_upload, self._join = self.scheme.observe_step, self.scheme.on_upload, self.rounds.join
        # numerics: each worker's own model copy and the global snapshot of every closed round
        self.numerics = env.numerics
        if self.numerics is not None:
            self.local = [self.numerics.weights()] * env.n
            self.snapshots = {0: self.numerics.weights()}

    # -- rounds and records ---------------------------------------------------------------------
    def _applied(self, w: int, steps: list[Step]) -> None:
        """Worker w's upload carrying ``steps`` was applied: it joins the open round, maybe closes it."""
        self._join(steps)
        if self.numerics is not None:  # the server adds the upload's delta / n (the official code)
            delta = steps[0].delta if len(steps) == 1 else sum(s.delta for s in steps)
            self.numerics.add_delta(w, delta, 1.0 / self.env.n)
        if self._on_upload(w, len(steps), self.env._now):
            self._close_round()

    def _close_round(self) -> None:
        env = self.env
        now = env._now
        _round, samples, steps = self.rounds.close()  # every worker flagged to pull
        update = env.record_update(samples, len(steps))
        if self.numerics is not None:
            self.numerics.close_round(now)
            self.snapshots[env.version] = self.numerics.weights()
        final = not env.may_update()
        rows: list[Any] = []  # the round's ended steps' records (fields end to end), added at once
        record = None if env.stopped else rows.extend  # SimEnv.record_row's rule
        row = self._row
        for s in steps:  # a step joins one round: none was registered as an open row before
            s.update = update
            end_s = s.end_s
            if end_s is None:
                if not final:  # in the update, not ended: its row if the run ends first
                    env.open_row((s.worker, s.iteration), partial(row, s, cut=True))
                    s.opened = True
                    continue
                if s.busy_since is not None:  # still pulling (or stalled on a pull): cut here
                    s.comm_s += now - s.busy_since
                    s.busy_since = None
                end_s = s.end_s = now
                s.cut = True
            if record is not None:  # ended and in this update: its record (_emit; _row written out, weight = batch / samples)
                start_s, compute_start_s, batch, wait_s = s.start_s, s.compute_start_s, s.batch, s.wait_s
                compute_s = s.compute_end_s - compute_start_s
                fetch_s = compute_start_s - start_s
                record((s.worker, s.iteration, update, start_s, compute_s, end_s - start_s - fetch_s - compute_s - wait_s,
                        wait_s, end_s, batch, update - s.base_version, False, batch / samples, fetch_s, s.cut))
        if rows:
            env.iterations.extend_flat(rows)
        if final:
            env.finish()

    def _row(self, s: Step, end_s: float, cut: bool) -> tuple[Any, ...]:
        """An IterationRecord's fields, in order."""
        start_s, compute_start_s, update, batch, wait_s = s.start_s, s.compute_start_s, s.update, s.batch, s.wait_s
        compute_s = s.compute_end_s - compute_start_s
        fetch_s = compute_start_s - start_s
        return (s.worker, s.iteration, update, start_s, compute_s, end_s - start_s - fetch_s - compute_s - wait_s,
                wait_s, end_s, batch, update - s.base_version, False, self.rounds.weight(update, batch), fetch_s, cut)

    def _emit(self, s: Step) -> None:
        """Record the step if it has ended and its round has closed (once; :meth:`SimEnv.record_row`)."""
        end_s = s.end_s
        if end_s is None or s.update < 0:
            return
        env = self.env
        if s.opened:
            env.close_row((s.worker, s.iteration))
        if not env.stopped:
            env.iterations.add(self._row(s, end_s, s.cut))

    def _end_step(self, s: Step) -> None:
        s.end_s = self.env._now
        compute_start = s.compute_start_s
        compute_s, fetch_s = s.compute_end_s - compute_start, compute_start - s.start_s
        self._observe_step(s.worker, fetch_s + compute_s + s.comm_s + s.wait_s)  # the step time alone: no object
        if s.update >= 0:  # its round has closed
            self._emit(s)

    def _step(self, w: int, it: int, start: float, compute_start: float, compute_end: float, batch: int,
              base_version: int, samples: Any) -> Step:
        """The local step whose compute just ended (numerics: one SGD step on the worker's model)."""
        step = Step(w, it, start, compute_start, compute_end, batch, base_version)
        if self.numerics is not None:  # one local SGD step on the model this step started from
            before = self.local[w]
            assert samples is not None  # drawn whenever numerics are on
            self.local[w] = self.numerics.local_step(w, before, samples)
            step.delta = self.local[w] - before
        return step

    def _adopt(self, w: int, version: int) -> None:
        """Worker w's local model becomes the global snapshot of ``version`` (numerics)."""
        if self.numerics is not None:
            self.local[w] = self.snapshots[version]



class WBSPDriver(WBSPBook):
    """WBSP's workers as SimPy processes (the event path)."""

    def __init__(self, env: SimEnv) -> None:
        super().__init__(env)
        self.ps = ParameterServer(env, env.scenario.network, lanes=True)  # type: ignore[arg-type]
        self.fetcher = Fetcher(env, env.data) if env.data is not None else None  # None: data local and free
        if self.scheme.overlap:
            self.state = [Overlap() for _ in range(env.n)]
            self.procs = [env.process(self._compute_loop(w)) for w in range(env.n)]
            self.procs += [env.process(self._comm_loop(w)) for w in range(env.n)]
        else:
            self.procs = [env.process(self._worker(w)) for w in range(env.n)]

    def _compute(self, w: int, it: int, base_version: int) -> Generator[Any, Any, Step]:
        env = self.env
        start = env.now
        batch = self.scheme.batch(w)
        local = batch if self.fetcher is None else self.fetcher.layout.default_local(w, batch)
        samples = self.numerics.draw(w, batch, local) if self.numerics is not None else None
        if self.fetcher is not None:
            yield from self.fetcher.fetch(w, local, batch - local)
        compute_start = env.now
        compute_end = iteration_end_s(env.contention[w], env.workers[w], compute_start, batch, it)
        yield env.timeout(compute_end - compute_start)
        return self._step(w, it, start, compute_start, compute_end, batch, base_version, samples)

    # -- base variant ---------------------------------------------------------------------------
    def _worker(self, w: int) -> Generator[Any, Any, None]:
        env, ps = self.env, self.ps
        base_version = 0
        it = 0
        while True:
            s = yield from self._compute(w, it, base_version)
            yield from ps.push(w)
            pushed = env.now
            yield from ps.apply()
            if not env.may_update():
                return
            s.comm_s, s.wait_s = pushed - s.compute_end_s, env.now - pushed
            self._applied(w, [s])
            if env.stopped:
                return
            if self.rounds.take_flag(w):
                version = env.version
                s.busy_since = env.now
                yield from ps.pull(w)
                if env.stopped:
                    return
                s.comm_s += env.now - s.busy_since
                s.busy_since = None
                base_version = version
                self._adopt(w, version)
            self._end_step(s)
            it += 1

    # -- overlap variant (PCC) ------------------------------------------------------------------
    def _compute_loop(self, w: int) -> Generator[Any, Any, None]:
        env, st = self.env, self.state[w]
        base_version = 0
        it = 0
        while True:
            s = yield from self._compute(w, it, base_version)
            if env.stopped:
                return
            st.unpushed.append(s)
            if st.wake is not None:
                st.wake.succeed()
                st.wake = None
            if self.blocking and st.pulling:
                assert st.pulled is not None
                s.busy_since = env.now
                yield st.pulled
                if env.stopped:
                    return
                s.comm_s = env.now - s.busy_since
                s.busy_since = None
            if st.ready_version is not None:
                base_version, st.ready_version = st.ready_version, None
                self._adopt(w, base_version)
            self._end_step(s)
            it += 1

    def _comm_loop(self, w: int) -> Generator[Any, Any, None]:
        env, st = self.env, self.state[w]
        while True:
            if not st.unpushed:
                st.wake = env.event()
                yield st.wake
                if env.stopped:
                    return
            steps, st.unpushed = st.unpushed, []
            yield from self.ps.push(w)
            yield from self.ps.apply()
            if not env.may_update():
                return
            self._applied(w, steps)
            if env.stopped:
                return
            if self.rounds.take_flag(w):
                st.pulling, st.pulled = True, env.event()
                version = env.version
                yield from self.ps.pull(w)
                if env.stopped:
                    return
                st.pulling, st.ready_version = False, version
                st.pulled.succeed()
