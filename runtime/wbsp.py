"""WBSP on torch.distributed: workers keep taking local steps; a round closes at the slowest's upload.

Rank ``n`` is the parameter server and holds the scheme (:class:`lbsim.schemes.wbsp.WBSP`: the
batches, the step-time EMAs, the designated slowest); ranks ``0 .. n-1`` are the workers. The rule
is the simulator's (:mod:`lbsim.simulator.wbsp`, "paper-consistent"), enacted with real messages
(:mod:`lbsim.runtime.ps_protocol`):

* every worker takes local SGD steps on its own model copy: batch ``scheme.batch(w)`` drawn from
  its own sample stream, plain SGD ``w -= lr_t g`` with ``lr_t`` the schedule's rate at the global
  update it last heard of (:meth:`lbsim.numerics.Trainer.local_step`), and pushes the *delta* of its
  finished steps (their sum ``-lr_t g``);
* the server adds each delta with share ``1/n`` on arrival (:meth:`Trainer.add_delta`, as the
  simulator and the official code), joins its steps to the *open* round and asks
  ``scheme.on_upload(worker, steps, time)``; when that closes the round the server snapshots the
  model, the round becomes one global update (``samples`` = the batches of its steps,
  ``gradients`` = its local steps; the LR schedule advances per round, :meth:`Trainer.close_round`)
  and every worker is flagged; the reply to a flagged worker's next upload carries the newest
  snapshot (REPLY ``flag`` = ``pull`` = 1), which the worker adopts as its local model.
* every step's time (``end - start``) is folded into the scheme's EMA (``scheme.observe_step``)
  when its step row reaches the server, before the upload that carries it is judged. A base step
  ends with the reply to its own push, so its row travels with the worker's next push: the server
  learns a step time one step later than the simulator's scheme, which observes each step at its
  end (the first rounds are therefore closed by the nominally slowest until rows arrive).

Base variant (``overlap: false``), one loop per worker::

    compute one local step -> push its delta -> wait for the reply [+ the snapshot] -> adopt it -> next step

Overlap variant (``overlap: true``, the paper's PCC): the rank's main thread runs the compute loop
(steps back to back) and a Python thread does every gloo send and receive (the compute thread never
touches the process group). Whenever it is idle and steps have finished, the communication thread
pushes *one* delta for all of them, waits for the reply and hands a pulled snapshot to the compute
loop, which adopts it at its next step boundary. With ``overlap_pull_blocks`` a boundary reached
after the flag came and before the snapshot is loaded waits for it: that stall is the step's
``comm_s``.

Records (server side, :class:`WBSPLog`): one :class:`~lbsim.metrics.records.IterationRecord` per
local step. Workers describe their steps in *step rows* (:data:`STEP`, tag
:data:`lbsim.runtime.ps_protocol.TAG_STEPS`) sent with their next push, once the step has ended; the
server pairs a row with the round its delta joined. ``update`` = that round, ``staleness`` = the
round minus the snapshot version the step computed on, ``weight`` = batch / samples of the round.
``comm_s`` and ``wait_s``: base — the step's post-compute time split as :class:`lbsim.runtime.ps_records.PushLog`
does (``wait_s`` = the server's own time on the push, from receiving it to sending the reply:
adding the delta, the scheme's decision, a snapshot copy; ``comm_s`` = the rest: the transfers, the
pull, and the time the push waited for the server to take it, which the simulator counts as
``wait_s`` but a worker cannot tell apart); overlap — ``comm_s`` = the pull stall, ``wait_s`` = 0.
A step's resource readings are taken inside its emulated stretch (they add nothing to it). Steps
whose round has not closed when the run ends are not recorded.

End: the update that reaches ``workload.updates`` (or ``workload.samples``) is final; with a time
budget B no round closes at or after B (the simulator's rule, :class:`lbsim.metrics.run_end.RunEnd`):
the first upload the server takes at or after B is not applied and the run ends at B. The server answers every later push with ``stop`` without
applying it; a worker told to stop ends its current step there (a step stalled on a pull is cut),
sends a last push (``final`` = 1) with its remaining step rows, and all ranks meet at the closing
barrier.

Rule: the decisions are the scheme's (shared with the simulator); this module only moves tensors
and measures durations on each rank's own clock (seconds since the common start barrier).
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from lbsim.metrics.records import IterationRecord
from lbsim.numerics import LRSchedule, SharedStream
from lbsim.rng import stream
from lbsim.schemes.wbsp_rounds import Rounds

from .dist import Comm, FailureHook, Heartbeat, RankInfo
from .driver import LoopResult, LoopSpec, injection_for, not_injected_notes, server_rank
from .inject import Injection
from .model import FlatModel, TrainData
from .ps_protocol import REPLY, TAG_REPLY, TAG_STEPS, TAG_WEIGHTS, Channel
from .ps_records import PushLog
from .resources import ResourceReader

SAMPLE_STREAM = ("runtime", "wbsp", "samples")
"""Each worker's own sample order: ``lbsim.rng.stream(seed, *SAMPLE_STREAM, worker)``."""
STEP = ("iteration", "batch", "start_s", "compute_end_s", "end_s", "comm_s", "wait_s", "base_version",
        "real_compute_s", "cpu_available", "cpu_measured", "mem_available", "loss")
"""Fields of a step row (float64): one ended local step, on its worker's clock."""
IDLE_POLL_S = 0.5  # a waiting thread re-checks for a failure of the other one this often


# -- messages -----------------------------------------------------------------------------------
class WBSPChannel(Channel):
    """:class:`Channel` plus WBSP's step rows, and a reply read in two parts (header, then the snapshot)."""

    def push_steps(self, header: dict[str, float], delta: torch.Tensor, rows: list[list[float]], round_: int) -> None:
        """Push the round's model delta, then its local steps' rows (:data:`STEP` columns)."""
        self.push({**header, "rows": len(rows)}, delta, round_)
        if rows:
            t = torch.tensor(rows, dtype=torch.float64)
            self._call("push of the step rows", round_, dist.send, t, self.server, tag=TAG_STEPS)

    def rows_of(self, worker: int, count: int, round_: int) -> list[dict[str, float]]:
        """Server: receive ``count`` step rows from ``worker``."""
        if count <= 0:
            return []
        t = torch.zeros((count, len(STEP)), dtype=torch.float64)
        self._call(f"receive of worker {worker}'s step rows", round_, dist.recv, t, worker, tag=TAG_STEPS)
        return [dict(zip(STEP, row, strict=True)) for row in t.tolist()]

    def reply_header(self, round_: int) -> dict[str, float]:
        """Wait for the server's reply header; when ``pull`` is set, :meth:`pull` must follow."""
        self._call("wait for the server's reply", round_, dist.recv, self.reply_buf, self.server, tag=TAG_REPLY)
        return {name: float(v) for name, v in zip(REPLY, self.reply_buf.tolist(), strict=True)}

    def pull(self, into: torch.Tensor, round_: int) -> None:
        """Receive the snapshot that follows a reply with ``pull`` set, into ``into``."""
        self._call("pull of the snapshot", round_, dist.recv, into, self.server, tag=TAG_WEIGHTS)


# -- worker side ----------------------------------------------------------------------------------
@dataclass
class Step:
    """One local step on a worker, until its row is sent."""

    iteration: int
    batch: int
    start_s: float
    compute_end_s: float
    base_version: int  # the snapshot version its model started from
    real_compute_s: float
    cpu_available: float
    cpu_measured: float
    mem_available: float
    loss: float
    end_s: float = math.nan
    wait_s: float = 0.0

    def end(self, end_s: float, wait_s: float = 0.0) -> list[float]:
        """The step ended at ``end_s`` (``wait_s`` of its post-compute time was the server's): its row."""
        self.end_s = end_s
        self.wait_s = min(max(0.0, end_s - self.compute_end_s), max(0.0, wait_s))
        comm_s = max(0.0, end_s - self.compute_end_s) - self.wait_s
        values = {**self.__dict__, "comm_s": comm_s}
        return [float(values[name]) for name in STEP]


class Stepper:
    """A worker's local SGD: its model copy, its sample stream (its own, as the asynchronous
    schemes'), its learning-rate schedule and its contention."""

    def __init__(self, spec: LoopSpec, model: FlatModel, data: TrainData, rank: int, dev: torch.device,
                 inj: Injection, reader: ResourceReader) -> None:
        self.model, self.data, self.inj, self.reader = model, data, inj, reader
        self.dev = dev
        dtype = getattr(torch, spec.options.dtype)
        self.w = model.initial(spec.scenario.seed, dtype=dtype, device=dev)  # the server starts from the same weights
        self.samples = SharedStream(int(data.X_train.shape[0]), stream(spec.scenario.seed, *SAMPLE_STREAM, rank))
        self.schedule = LRSchedule(spec.training.lr, **spec.training.schedule)
        self.t0 = 0.0
        self.multiplier = 1.0

    def warm_up(self, batch: int) -> None:
        """One untimed forward/backward (the model is not changed, no sample is drawn), so that the
        first timed step does not carry torch's lazy set-up, which the emulated stretch would multiply."""
        self.model.loss_and_grad(self.w, self.data.X_train[:batch], self.data.y_train[:batch])

    def start(self, t0: float) -> None:
        """The run's clock starts at ``t0`` (time.monotonic()); injection starts with it."""
        self.t0 = t0
        self.inj.start(t0)
        self.multiplier = self.inj.multiplier(0)

    def now(self) -> float:
        """Seconds since the run's clock origin."""
        return time.monotonic() - self.t0

    def step(self, k: int, batch: int, base_version: int, version: int) -> tuple[Step, torch.Tensor]:
        """Local step ``k`` on the current model (changed in place); returns it and its delta."""
        start = self.now()
        idx = torch.from_numpy(self.samples.draw(batch)).to(self.dev)
        loss, g = self.model.loss_and_grad(self.w, self.data.X_train[idx], self.data.y_train[idx])
        delta = g.mul_(-self.schedule(version))
        self.w.add_(delta)
        real = self.now() - start
        measured, mem = self.reader.cpu_available(), self.reader.mem_available()  # inside the emulated stretch
        self.inj.after_compute(start, real, self.multiplier)
        cend = self.now()
        self.multiplier = self.inj.multiplier(k + 1)
        cpu, _oracle = self.inj.readings(cend, measured, self.multiplier)
        s = Step(iteration=k, batch=batch, start_s=start, compute_end_s=cend, base_version=base_version,
                 real_compute_s=real, cpu_available=cpu, cpu_measured=measured, mem_available=mem, loss=loss)
        return s, delta


def _header(first: int, steps: int, batch: int, final: bool = False) -> dict[str, float]:
    return {"iteration": first, "batch": batch, "steps": steps, "final": 1.0 if final else 0.0}


def _work_base(chan: WBSPChannel, st: Stepper, hb: Heartbeat, hook: FailureHook, batch: int) -> tuple[int, float]:
    """Base variant: step, push, wait for the reply (and the snapshot), adopt; returns (steps, end)."""
    k, base_version, version = 0, 0, 0
    rows: list[list[float]] = []
    end = 0.0
    while True:
        hook.check(k)
        s, delta = st.step(k, batch, base_version, version)
        chan.push_steps(_header(k, 1, batch), delta, rows, k)
        reply = chan.reply_header(k)
        version = int(reply["version"])
        if reply["pull"] > 0.5:
            chan.pull(st.w, k)
            base_version = version
        end = st.now()
        rows = [s.end(end, reply["server_s"])]
        k += 1
        hb.beat(k)
        if reply["stop"] > 0.5:
            break
    chan.push_steps(_header(k, 0, batch, final=True), st.w, rows, k)
    return k, end


@dataclass
class Shared:
    """What the overlap variant's compute loop and communication thread share (under ``cond``)."""

    delta: torch.Tensor  # the sum of the unpushed steps' deltas
    cond: threading.Condition = field(default_factory=threading.Condition)
    unpushed: list[Step] = field(default_factory=list)  # finished compute, delta not pushed yet
    rows: list[list[float]] = field(default_factory=list)  # ended steps whose rows are not sent yet
    version: int = 0  # rounds closed, as the last reply said (the local steps' learning rate)
    pulling: bool = False  # flag received, snapshot not loaded yet
    ready: tuple[int, torch.Tensor] | None = None  # a pulled snapshot for the next step boundary
    stop: bool = False
    compute_exited: bool = False
    error: BaseException | None = None


def _compute_loop(sh: Shared, st: Stepper, hb: Heartbeat, hook: FailureHook, batch: int, blocking: bool) -> int:
    """Overlap variant, the rank's main thread: local steps back to back; returns the steps taken."""
    k, base_version = 0, 0
    while not sh.stop:
        hook.check(k)
        s, delta = st.step(k, batch, base_version, sh.version)
        with sh.cond:
            if sh.stop:  # its delta would join no round: dropped
                break
            sh.delta.add_(delta)
            sh.unpushed.append(s)
            sh.cond.notify_all()
            if blocking and sh.pulling:
                while sh.pulling and not sh.stop:
                    sh.cond.wait(IDLE_POLL_S)
            if sh.ready is not None and not sh.stop:
                base_version, snapshot = sh.ready
                sh.ready = None
                st.w.copy_(snapshot)
            sh.rows.append(s.end(st.now()))
        k += 1
        hb.beat(k)
    return k


def _comm_loop(sh: Shared, chan: WBSPChannel, st: Stepper, batch: int) -> None:
    """Overlap variant, a Python thread: push what has finished, read the reply, pull when flagged."""
    pulled = torch.empty_like(st.w)
    n_push = 0
    try:
        while True:
            with sh.cond:
                while not sh.unpushed and sh.error is None:
                    sh.cond.wait(IDLE_POLL_S)
                if sh.error is not None:
                    return
                steps, sh.unpushed = sh.unpushed, []
                rows, sh.rows = sh.rows, []
                delta = sh.delta.clone()
                sh.delta.zero_()
            chan.push_steps(_header(steps[0].iteration, len(steps), batch), delta, rows, n_push)
            reply = chan.reply_header(n_push)
            sh.version = int(reply["version"])
            if reply["pull"] > 0.5:
                with sh.cond:
                    sh.pulling = True
                chan.pull(pulled, n_push)
                with sh.cond:
                    sh.pulling, sh.ready = False, (int(reply["version"]), pulled.clone())
                    sh.cond.notify_all()
            n_push += 1
            if reply["stop"] > 0.5:
                _closing_push(sh, chan, st, batch, n_push)
                return
    except BaseException as err:  # handed to the main thread, which raises it
        with sh.cond:
            sh.error, sh.stop = err, True
            sh.cond.notify_all()


def _closing_push(sh: Shared, chan: WBSPChannel, st: Stepper, batch: int, n_push: int) -> None:
    """Told to stop: let the compute loop end its step, then send the remaining rows (``final``)."""
    with sh.cond:
        sh.stop = True
        sh.cond.notify_all()
        while not sh.compute_exited:
            sh.cond.wait(IDLE_POLL_S)
        rows, sh.rows = sh.rows, []
    chan.push_steps(_header(-1, 0, batch, final=True), sh.delta, rows, n_push)


def _work_overlap(chan: WBSPChannel, st: Stepper, hb: Heartbeat, hook: FailureHook, batch: int,
                  blocking: bool) -> tuple[int, float]:
    sh = Shared(delta=torch.zeros_like(st.w))
    thread = threading.Thread(target=_comm_loop, args=(sh, chan, st, batch), name="wbsp-comm", daemon=True)
    thread.start()
    try:
        k = _compute_loop(sh, st, hb, hook, batch, blocking)
    except BaseException as err:
        with sh.cond:
            sh.error, sh.stop = err, True
            sh.cond.notify_all()
        raise
    finally:
        with sh.cond:
            sh.compute_exited = True
            sh.cond.notify_all()
    thread.join()
    if sh.error is not None:
        raise sh.error
    return k, st.now()


def _work(info: RankInfo, comm: Comm, hb: Heartbeat, hook: FailureHook, spec: LoopSpec, model: FlatModel,
          data: TrainData, cores: list[int] | None) -> LoopResult:
    r = info.rank
    dtype = getattr(torch, spec.options.dtype)
    chan = WBSPChannel(r, server_rank(spec), model.n_params, dtype)
    inj = injection_for(spec, r, cores)
    try:
        st = Stepper(spec, model, data, r, info.device, inj, ResourceReader(cores))
        batch = int(chan.reply_header(-1)["batch"])  # the scheme's batch, before the clock starts
        cfg = spec.scenario.scheme  # the variant: every rank loaded the scenario
        overlap, blocking = bool(cfg.overlap), bool(getattr(cfg, "overlap_pull_blocks", True))
        st.warm_up(batch)
        comm.barrier("start barrier")
        st.start(time.monotonic())
        if overlap:
            k, end = _work_overlap(chan, st, hb, hook, batch, blocking)
        else:
            k, end = _work_base(chan, st, hb, hook, batch)
        comm.barrier("closing barrier", k)
    finally:
        inj.stop()
    return LoopResult(w=st.w, log=None, scheme=None, end_s=end, replicas_identical=False, notes=[])


# -- server side ----------------------------------------------------------------------------------
def _batch_of(step: tuple[int, int, int]) -> int:
    return step[2]


class WBSPLog(PushLog):
    """The server's WBSP records: steps join the open round; a step is recorded once it has ended
    (its row arrived) and its round has closed."""

    def __init__(self, workers: int, out: Path | None) -> None:
        super().__init__(workers, out)
        self.round_of: dict[tuple[int, int], int] = {}  # (worker, iteration) -> the round its delta joined
        # the open round's (worker, iteration, batch), closed rounds' samples, pull flags (shared with the simulator)
        self.round_book: Rounds[tuple[int, int, int]] = Rounds(workers, _batch_of)
        self.rows: dict[tuple[int, int], dict[str, float]] = {}  # ended steps whose round is still open

    @property
    def rounds(self) -> int:
        """Rounds closed (= the open round's index = the newest snapshot's version)."""
        return self.round_book.closed

    def join(self, worker: int, first: int, steps: int, batch: int) -> None:
        """``worker``'s upload of steps ``first .. first + steps - 1`` was applied: they join the open round."""
        for it in range(first, first + steps):
            self.round_of[(worker, it)] = self.rounds
        self.round_book.join((worker, it, batch) for it in range(first, first + steps))

    def ended(self, worker: int, row: dict[str, float]) -> None:
        """A step row arrived: record it now if its round has closed, else when it closes."""
        key = (worker, int(row["iteration"]))
        round_ = self.round_of.get(key)
        if round_ is not None and round_ < self.rounds:
            self._emit(worker, row, round_)
        else:
            self.rows[key] = row

    def close_round(self, time_s: float) -> int:
        """The open round closes at ``time_s`` (server clock): one update; returns its index."""
        update, samples, steps = self.round_book.close()  # every worker flagged to pull
        self.update(update, time_s, samples, len(steps))
        for w, it, _b in steps:
            row = self.rows.pop((w, it), None)
            if row is not None:
                self._emit(w, row, update)
        return update

    def _emit(self, worker: int, row: dict[str, float], update: int) -> None:
        start, cend, batch = row["start_s"], row["compute_end_s"], int(row["batch"])
        del self.round_of[(worker, int(row["iteration"]))]
        self.record(IterationRecord(
            worker=worker, iteration=int(row["iteration"]), update=update, start_s=start, compute_s=cend - start,
            comm_s=row["comm_s"], wait_s=row["wait_s"], end_s=row["end_s"], batch=batch,
            staleness=update - int(row["base_version"]), dropped=False, weight=self.round_book.weight(update, batch),
        ), row)

    def unrecorded(self) -> int:
        """Steps whose round never closed (not recorded); forgets them."""
        self.rows.clear()
        self.round_of.clear()
        return self.round_book.drop_open()


@dataclass
class Server:
    """The server's state during a run."""

    spec: LoopSpec
    scheme: Any
    chan: WBSPChannel
    log: WBSPLog
    w: torch.Tensor  # the global model
    snapshot: torch.Tensor  # the newest round's snapshot (what a flagged worker pulls)
    t0: float = 0.0
    final: bool = False
    end_s: float = 0.0
    decision_s: list[float] = field(default_factory=list)

    def now(self) -> float:
        """Seconds since the run's clock origin."""
        return time.monotonic() - self.t0

    def apply(self, src: int, h: dict[str, float], delta: torch.Tensor) -> None:
        """Add the upload's delta (share 1/n), join its steps, ask the scheme whether the round closes."""
        n = self.log.round_book.workers
        if not self.spec.run_end.update_made(self.now()):  # the budget passed: no round closes at or after it
            self.final, self.end_s = True, max(float(self.spec.run_end.budget_s or 0.0), self.end_s)
            return
        steps = int(h["steps"])
        self.w.add_(delta, alpha=1.0 / n)
        t_apply = self.now()
        self.end_s = t_apply  # the run's end so far (the final close's time once final)
        self.log.join(src, int(h["iteration"]), steps, int(h["batch"]))
        t_decide = time.monotonic()
        closes = self.scheme.on_upload(src, steps, t_apply)
        self.decision_s.append(time.monotonic() - t_decide)
        if closes:
            self.snapshot.copy_(self.w)
            update = self.log.close_round(t_apply)
            self.final = self.spec.is_last(update, t_apply, self.log.round_book.samples_applied)

    def reply(self, src: int, received_s: float) -> None:
        """Answer worker ``src``'s push: its next batch and the version, the snapshot when flagged, stop at the end,
        and the time the server held the push."""
        fields: dict[str, float] = {"batch": self.scheme.batch(src), "version": self.log.rounds}
        weights = None
        if self.final:
            fields["stop"] = 1
        elif self.log.round_book.take_flag(src):
            fields["flag"] = 1
            weights = self.snapshot
        fields["server_s"] = self.now() - received_s
        self.chan.reply(src, fields, weights, self.log.rounds)


def _serve(info: RankInfo, comm: Comm, hb: Heartbeat, hook: FailureHook, spec: LoopSpec, model: FlatModel) -> LoopResult:
    n = len(spec.workers)
    dtype = getattr(torch, spec.options.dtype)
    w = model.initial(spec.scenario.seed, dtype=dtype, device=info.device)
    scheme = spec.scheme_factory()
    log = WBSPLog(n, spec.out)
    srv = Server(spec=spec, scheme=scheme, chan=WBSPChannel(info.rank, info.rank, model.n_params, dtype), log=log,
                 w=w, snapshot=w.clone())
    notes = not_injected_notes(spec)
    try:
        for v in range(n):
            srv.chan.reply(v, {"batch": scheme.batch(v), "version": 0}, None, -1)
        comm.barrier("start barrier")
        srv.t0 = time.monotonic()
        _serve_loop(srv, hb, hook, n)
        dropped = log.unrecorded()
        if dropped:
            notes.append(f"{dropped} local steps joined the round open at the end and are not recorded")
        comm.barrier("closing barrier", log.rounds)
        log.close()
    except BaseException:
        log.close()
        raise
    return LoopResult(w=srv.snapshot, log=log, scheme=scheme, end_s=srv.end_s, replicas_identical=False, notes=notes,
                      decision_s=float(np.mean(srv.decision_s)) if srv.decision_s else 0.0)


def _serve_loop(srv: Server, hb: Heartbeat, hook: FailureHook, n: int) -> None:
    """Handle pushes in arrival order until every worker has sent its last message."""
    open_workers = n  # workers that have not sent their final push
    while open_workers:
        hook.check(srv.log.rounds)
        src, h, delta = srv.chan.next_push(srv.log.rounds)
        rows = srv.chan.rows_of(src, int(h["rows"]), srv.log.rounds)
        received = srv.now()
        for row in rows:
            if not srv.final:
                srv.scheme.observe_step(src, row["end_s"] - row["start_s"])
            srv.log.ended(src, row)
        if h["final"] > 0.5:
            open_workers -= 1
            continue
        if not srv.final:
            srv.apply(src, h, delta)
            hb.beat(srv.log.rounds)
            hb.progress(srv.spec.fraction(max(0, srv.log.rounds - 1), received))
        srv.reply(src, received)


def run_wbsp(info: RankInfo, comm: Comm, hb: Heartbeat, hook: FailureHook, spec: LoopSpec, model: FlatModel,
             data: TrainData, cores: list[int] | None) -> LoopResult:
    """This rank's part of a WBSP run (the server's result carries the records and the scheme)."""
    if info.rank == server_rank(spec):
        return _serve(info, comm, hb, hook, spec, model)
    return _work(info, comm, hb, hook, spec, model, data, cores)
