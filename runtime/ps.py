"""The parameter-server loop: asp, ssp, dssp and elastic_bsp on torch.distributed.

Rank ``n`` is the server; ranks ``0 .. n-1`` are the workers (messages: :mod:`lbsim.runtime.ps_protocol`).

A worker's iteration (as the simulator's asynchronous driver, :mod:`lbsim.simulator.asynchronous`)::

    start    draw its batch (its own shuffled stream over the training set)
             forward/backward on the weights it last pulled -> mean gradient g
             [emulated contention: sleep until compute_end(start, real step time x multiplier)]
    push     header (measurements) + g to the server
    reply    wait: the server applies the push, the scheme's gate may hold the worker (SSP's bound,
             DSSP's controller, ElasticBSP's barrier); the reply brings the next batch and the
             server's current weights (the pull)
    end      = the start of its next iteration

The server handles one push at a time in arrival order: ``w -= lr_t g`` (momentum as
:class:`lbsim.numerics.SGD`, the schedule advancing per update), staleness = updates made since the
pusher's pull, then the same :class:`lbsim.schemes.gate.Gate` as the simulator: the worker's clock
advances, the scheme is told (``on_push``), held workers the scheme now admits are released (in the
order held) and the pusher is admitted or held. The run ends with the update that reaches
``workload.updates`` (or ``workload.samples``): the server tells every worker to stop — the pusher
and the held workers at once (their iterations end there), the others when their next push arrives
(it is not applied). With a time budget B the rule is the simulator's (:class:`lbsim.metrics.run_end.RunEnd`):
no update at or after B — the first push the server takes at or after B is not applied, the run
ends at B, and the workers held then end their iterations at B.

Records are the server's (:mod:`lbsim.runtime.ps_records`); rank ``n`` writes the run.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from lbsim.numerics import SharedStream
from lbsim.rng import stream
from lbsim.schemes.gate import Gate

from .dist import Comm, FailureHook, Heartbeat, RankInfo
from .driver import LoopResult, LoopSpec, injection_for, not_injected_notes, server_rank
from .model import FlatModel, SGDState, TrainData
from .ps_protocol import Channel
from .ps_records import PushLog
from .resources import ResourceReader

SAMPLE_STREAM = ("runtime", "ps", "samples")
"""Each worker's own sample order: ``lbsim.rng.stream(seed, *SAMPLE_STREAM, worker)``."""


def run_ps(info: RankInfo, comm: Comm, hb: Heartbeat, hook: FailureHook, spec: LoopSpec, model: FlatModel,
           data: TrainData, cores: list[int] | None) -> LoopResult:
    """This rank's part of a parameter-server run (the server's result carries the records)."""
    if info.rank == server_rank(spec):
        return _serve(info, comm, hb, hook, spec, model)
    return _work(info, comm, hb, hook, spec, model, data, cores)


def _work(info: RankInfo, comm: Comm, hb: Heartbeat, hook: FailureHook, spec: LoopSpec, model: FlatModel,
          data: TrainData, cores: list[int] | None) -> LoopResult:
    r, dev = info.rank, info.device
    dtype = getattr(torch, spec.options.dtype)
    seed = spec.scenario.seed
    w = model.initial(seed, dtype=dtype, device=dev)  # the server starts from the same weights
    chan = Channel(r, server_rank(spec), model.n_params, dtype)
    samples = SharedStream(int(data.X_train.shape[0]), stream(seed, *SAMPLE_STREAM, r))
    reader = ResourceReader(cores)
    inj = injection_for(spec, r, cores)
    try:
        reply = chan.reply_of(w, -1)  # the first batch, before the clock starts
        first = torch.from_numpy(np.arange(min(int(reply["batch"]), int(data.X_train.shape[0])))).to(dev)
        model.loss_and_grad(w, data.X_train[first], data.y_train[first])  # untimed warm-up (torch's first step is slow)
        comm.barrier("start barrier")
        t0 = time.monotonic()
        inj.start(t0)
        k, prev_end, multiplier = 0, math.nan, inj.multiplier(0)
        while reply["stop"] < 0.5:
            hook.check(k)
            batch = int(reply["batch"])
            start = time.monotonic() - t0
            idx = torch.from_numpy(samples.draw(batch)).to(dev)
            loss, g = model.loss_and_grad(w, data.X_train[idx], data.y_train[idx])
            real = time.monotonic() - t0 - start
            inj.after_compute(start, real, multiplier)
            cend = time.monotonic() - t0
            measured = reader.cpu_available()
            multiplier = inj.multiplier(k + 1)
            cpu, _oracle = inj.readings(cend, measured, multiplier)
            chan.push({"iteration": k, "batch": batch, "start_s": start, "compute_end_s": cend, "prev_end_s": prev_end,
                       "cpu_available": cpu, "mem_available": reader.mem_available(), "cpu_measured": measured,
                       "real_compute_s": real, "loss": loss, "steps": 1}, g, k)
            reply = chan.reply_of(w, k)
            prev_end = time.monotonic() - t0
            k += 1
            hb.beat(k)
        comm.barrier("closing barrier", k)
    finally:
        inj.stop()
    return LoopResult(w=w, log=None, scheme=None, end_s=prev_end, replicas_identical=False, notes=[])


def _serve(info: RankInfo, comm: Comm, hb: Heartbeat, hook: FailureHook, spec: LoopSpec, model: FlatModel) -> LoopResult:
    n, dev = len(spec.workers), info.device
    dtype = getattr(torch, spec.options.dtype)
    w = model.initial(spec.scenario.seed, dtype=dtype, device=dev)
    opt = SGDState(spec.training, spec.scenario.workload.global_batch)
    scheme = spec.scheme_factory()
    gate = Gate(scheme, n)
    chan = Channel(info.rank, info.rank, model.n_params, dtype)
    log = PushLog(n, spec.out)
    pulled = [0] * n  # the version each worker computes on
    received = [0.0] * n  # when the server took each worker's pending push (server clock)
    decision_s: list[float] = []
    try:
        for v in range(n):
            chan.reply(v, {"batch": scheme.batch(v), "version": 0}, None, -1)
        comm.barrier("start barrier")
        t0 = time.monotonic()
        updates, final, end_s = 0, False, 0.0
        budget_end = False  # the run ended at the time budget (not at a target)
        t_apply = 0.0  # when the last update was applied
        applied = 0  # samples in the updates so far
        running = n  # workers that have not been told to stop
        while running:
            hook.check(updates)
            src, h, g = chan.next_push(updates)
            now = time.monotonic() - t0
            if not final and not spec.run_end.update_made(now):  # the budget passed: the run ended at it
                # (an update taken just before B whose apply ended after it moves the end to that apply)
                final, end_s, budget_end = True, max(float(spec.run_end.budget_s or now), t_apply), True
                for v in gate.release_all():  # held at the budget: their iterations end there (cut)
                    log.served(v, end_s - received[v])
                    log.complete(v, end_s, cut=True)
                    chan.reply(v, {"stop": 1, "version": updates}, None, updates)
                    running -= 1
            if math.isfinite(h["prev_end_s"]):  # its previous iteration, cut at the budget if it ended later
                cut = budget_end and h["prev_end_s"] > end_s
                log.complete(src, min(h["prev_end_s"], end_s) if cut else h["prev_end_s"], cut=cut)
            if final:  # a push computed while the run ended: not applied
                chan.reply(src, {"stop": 1, "version": updates}, None, updates)
                running -= 1
                continue
            received[src] = now
            opt.step(w, g, int(h["batch"]))
            t_apply = time.monotonic() - t0
            update = updates
            updates += 1
            log.update(update, t_apply, int(h["batch"]), 1)
            log.begin(src, h, update=update, staleness=update - pulled[src])
            t_decide = time.monotonic()
            released = gate.push(src, t_apply)
            applied += int(h["batch"])
            final = spec.is_last(update, t_apply, applied)
            admitted = final or gate.admit(src)
            decision_s.append(time.monotonic() - t_decide)
            hb.beat(updates)
            hb.progress(spec.fraction(update, t_apply, applied))
            if final:
                end_s = t_apply
                log.served(src, t_apply - now)
                log.complete(src, t_apply)  # the final pusher does not pull (as in the simulator)
                waiting = [*released, *gate.release_all()]
                for v in waiting:  # held when the run ended: their iterations end now (see lbsim.runtime.ps_records)
                    log.served(v, t_apply - received[v])
                    log.complete(v, t_apply)
                for v in [src, *waiting]:
                    chan.reply(v, {"stop": 1, "version": updates}, None, updates)
                    running -= 1
                continue
            for v in ([src] if admitted else []) + released:
                t = time.monotonic() - t0
                log.served(v, t - received[v])
                pulled[v] = updates
                chan.reply(v, {"batch": scheme.batch(v), "version": updates}, w, updates)
        log.drop_pending()
        comm.barrier("closing barrier", updates)
        log.close()
    except BaseException:
        log.close()
        raise
    return LoopResult(w=w, log=log, scheme=scheme, end_s=end_s, replicas_identical=False,
                      notes=not_injected_notes(spec), decision_s=float(np.mean(decision_s)) if decision_s else 0.0)
