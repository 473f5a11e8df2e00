"""The synchronous worker loop: one round per global update, batch-weighted all-reduce, SGD.

One round on rank ``r`` (all ranks run the same code; rank 0 also holds the scheme)::

    start    [data: section: sleep for the emulated read of l_r local + x_r - l_r remote samples]
             draw the global batch from the shared stream, keep this rank's x_r samples
             (data: section: l_r from its own shard, the rest from the shared stream)
             forward/backward: g_r = mean gradient of the local loss (L2 penalty included)
             [emulated contention: sleep until compute_end(start, real step time x multiplier)]
    compute end: read CPU/memory availability
    all_gather  one observation row per rank (batch, times, readings) -> rank 0's
                lbsim.runtime.ddp.Decider builds the RoundObservation and calls scheme.next_batches
                (the DDP library's decision core in its lag-0 mode, lbsim's sizing code)
    all_reduce  SUM of [ g_r * x_r / X | the next batches and a stop flag, written by rank 0 only ]
                (the DDP library's weighting, lbsim.runtime.ddp.hook.weighted_gradient)
                -> every rank has g = sum_r (x_r / X) g_r, the mean gradient over the X samples
                   (exactly the concatenated batch's), and rank 0's decision
    step     w -= lr_t * g (momentum as lbsim.numerics.SGD); every replica applies the same update

Data placement, LOFT's robust aggregation (chunked all_to_all + all_gather instead of the
all-reduce) and Byzantine ranks are in :mod:`lbsim.runtime.loft`; the tail then also carries the next
round's local counts l_r (rank 0's decision: the scheme's if it is LocalityAware, else uniform).

The decided batches travel in the tail of the gradient all-reduce (the other ranks contribute
zeros there, so the sum is rank 0's values: a broadcast without a third collective per round).
Batch sizes are integers below 2**24, exact in float32. All ranks therefore use the batch sizes
rank 0's scheme decided, and the records show it.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import torch

from lbsim.contention.model import build_contention
from lbsim.schemes.base import RoundObservation, aggregation_of

from .ddp.decision import Decider, round_observation
from .dist import Comm, FailureHook, Heartbeat, RankInfo
from .driver import LoopResult, LoopSpec, injection_for, not_injected
from .loft import Byzantine, DataFetch, GradientExchange, LocalitySampler
from .model import FlatModel, SGDState, TrainData
from .records import FIELDS, F, RoundLog
from .resources import ResourceReader
from .tokens import SampleRounds, TokenModel


def _observation(table: np.ndarray, k: int, t: float, work: Any = None) -> RoundObservation:
    """Round k's observation from the all-gathered rows (compute time: compute end - start - fetch);
    ``work``: each rank's work in reference samples (a sample-cost run: rank 0's plan of the round)."""
    col = {name: table[:, F[name]].tolist() for name in
           ("batch", "start_s", "compute_end_s", "fetch_s", "cpu_available", "mem_available", "oracle_slowdown", "local")}
    compute_s = [float(e - s) - f for s, e, f in zip(col["start_s"], col["compute_end_s"], col["fetch_s"], strict=True)]
    return round_observation(k, t, col["batch"], compute_s, col["cpu_available"], col["mem_available"],
                             oracle_slowdown=col["oracle_slowdown"], fetch_s=col["fetch_s"], local=col["local"],
                             work=None if work is None else [float(v) for v in work])


def run_loop(info: RankInfo, comm: Comm, hb: Heartbeat, hook: FailureHook, spec: LoopSpec, model: FlatModel | TokenModel,
             data: TrainData, cores: list[int] | None) -> LoopResult:
    r, n, dev = info.rank, info.world, info.device
    dtype = getattr(torch, spec.options.dtype)
    seed = spec.scenario.seed
    w = model.initial(seed, dtype=dtype, device=dev)
    opt = SGDState(spec.training, spec.scenario.workload.global_batch)
    conts = build_contention(spec.scenario, spec.workers)
    cont = conts[r]
    fetcher = DataFetch(spec.scenario, spec.workers, r, cont, spec.inject)
    layout = fetcher.layout
    fractions = [wd.local_fraction for wd in layout.workers] if layout is not None else [0.0] * n
    sampler = LocalitySampler(int(data.X_train.shape[0]), seed, r, fractions)  # no shards: the shared stream's draws, in worker order
    byzantine = Byzantine(spec.scenario, spec.workers, r)
    notes = not_injected(conts, spec.options.contention, layout is not None) if spec.inject and r == 0 else []
    if r == 0 and byzantine.note():
        notes.append(str(byzantine.note()))
    decider = Decider(spec.scheme_factory(), layout) if r == 0 else None
    scheme = decider.scheme if decider is not None else None
    # every rank asks a scheme of its own for the rule, as the simulator does (rank 0's, which decides, is separate)
    rule, tolerance_f = aggregation_of(spec.scheme_factory())
    if scheme is not None and getattr(scheme, "aggregation_rule", (rule, tolerance_f)) != (rule, tolerance_f):
        raise RuntimeError(f"scheme aggregation {scheme.aggregation_rule} differs from its config's {(rule, tolerance_f)}")
    exchange = GradientExchange(comm, rule, tolerance_f, model.n_params)
    costs = SampleRounds(spec.scenario, n)  # workload.sample_cost: each round's samples and who computes them
    X = costs.width
    bt = torch.zeros(2 * n + X, dtype=torch.int64, device=dev)
    if decider is not None:
        first, first_local = decider.initial()
        first, owner0 = costs.plan(0, decider.scheme, first)
        bt[:] = torch.tensor([*first, *(first if X else first_local), *owner0], dtype=torch.int64)
    comm.broadcast(bt, "broadcast of the initial batches")
    batches, local = [int(v) for v in bt[:n].tolist()], [int(v) for v in bt[n:2 * n].tolist()]
    owner = bt[2 * n:].cpu().numpy()
    reader = ResourceReader(cores)
    n_params = model.n_params
    cuda = dev.type == "cuda"
    inj = injection_for(spec, r, cores, cont)
    comm.barrier("start barrier")
    t0 = time.monotonic()
    inj.start(t0)
    log = RoundLog(n, spec.out) if r == 0 else None
    multiplier = inj.multiplier(0)
    k = 0
    applied = 0  # samples in the updates so far (rank 0)
    budget_s, missed = spec.run_end.budget_s, False
    try:
        while True:
            hook.check(k)
            start = time.monotonic() - t0
            fend = fetcher.read(t0, start, batches, local)
            idx = sampler.next(batches, local)
            x_r, total = batches[r], sum(batches)
            w_r, w_total = x_r, total  # this rank's weight in the update: samples (or tokens)
            if X:
                seqs, w_r, w_total = costs.mine(k, owner, r)
                assert isinstance(model, TokenModel)
                loss, g = model.loss_and_grad(w, seqs) if seqs else (math.nan, torch.zeros(n_params, dtype=dtype, device=dev))
            elif x_r > 0:
                assert isinstance(model, FlatModel)
                ii = torch.from_numpy(idx).to(dev)
                loss, g = model.loss_and_grad(w, data.X_train[ii], data.y_train[ii])
            else:
                loss, g = math.nan, torch.zeros(n_params, dtype=dtype, device=dev)
            if cuda:
                torch.cuda.synchronize(dev)
            real = time.monotonic() - t0 - fend
            inj.after_compute(fend, real, multiplier)
            cend = time.monotonic() - t0
            cpu_measured, mem = reader.cpu_available(), reader.mem_available()
            next_multiplier = inj.multiplier(k + 1)
            cpu, oracle = inj.readings(cend, cpu_measured, next_multiplier)
            row = [0.0] * len(FIELDS)
            for name, value in (("round", k), ("batch", x_r), ("start_s", start), ("compute_end_s", cend),
                                ("cpu_available", cpu), ("mem_available", mem), ("cpu_measured", cpu_measured),
                                ("oracle_slowdown", oracle), ("real_compute_s", real), ("loss", loss),
                                ("fetch_s", fend - start), ("local", local[r])):
                row[F[name]] = float(value)
            table = comm.all_gather(torch.tensor(row, dtype=torch.float64, device=dev),
                                    "all_gather of the observations", k).cpu().numpy()
            fetcher.observe(table[:, F["compute_end_s"]])
            tail = torch.zeros(2 * n + 1 + X, dtype=dtype, device=dev)  # [next batches | next local | stop | next owners]
            if r == 0:
                assert log is not None and decider is not None
                log.add(table)
                applied += sum(batches)
                stop = spec.is_last(k, None, applied)
                work = costs.work_of(k) if X else None
                nxt, nxt_local = decider.with_local(tuple(batches)) if stop else decider.decide(_observation(table, k, cend, work))
                if X and not stop:
                    nxt, nxt_owner = costs.plan(k + 1, decider.scheme, nxt)
                    nxt_local = nxt
                    tail[2 * n + 1:] = torch.tensor(nxt_owner, dtype=dtype)
                tail[:2 * n] = torch.tensor([*nxt, *nxt_local], dtype=dtype)
                tail[2 * n] = 1.0 if stop else 0.0
                hb.progress(spec.fraction(k, cend, applied))
            g_agg, tail = exchange.exchange(byzantine.apply(g), w_r, w_total, tail, k)
            if budget_s is not None:  # the update is made at the all-reduce's end, and only before the budget
                late = torch.zeros(1, dtype=dtype, device=dev)
                if r == 0:
                    assert log is not None
                    t_update = time.monotonic() - t0
                    late[0] = 0.0 if spec.run_end.update_made(t_update) else 1.0
                    log.stamp(k, t_update)
                comm.broadcast(late, "broadcast of the budget check", k)
                if late.item() > 0:  # no update: the run ends at the budget, this round is not recorded
                    missed = True
                    break
            opt.step(w, g_agg, total)
            decided = [int(round(v)) for v in tail.tolist()]
            batches, local = decided[:n], decided[n:2 * n]
            owner = np.array(decided[2 * n + 1:], dtype=np.int64)
            multiplier = next_multiplier
            k += 1
            hb.beat(k)
            if decided[2 * n] > 0:
                break
        end = time.monotonic() - t0
        closing = [math.nan] * len(FIELDS)
        closing[F["start_s"]] = end
        table = comm.all_gather(torch.tensor(closing, dtype=torch.float64, device=dev), "closing all_gather", k).cpu().numpy()
        if log is not None and missed:
            log.forget_last_round()
        end_s = log.finish(table[:, F["start_s"]]) if log is not None else end
        if missed:  # the run ends at B; rows of the last update still running then are cut at B
            assert budget_s is not None
            end_s = budget_s
            if log is not None:
                log.cut_at(budget_s)
        wd = w.detach().double()
        check = torch.stack([wd.sum(), (wd * torch.arange(1, wd.numel() + 1, dtype=torch.float64, device=dev)).sum()])
        checks = comm.all_gather(check, "all_gather of the replica checksums", k).cpu().numpy()
        identical = bool(np.all(checks == checks[0]))
    except BaseException:
        if log is not None:
            log.close()
        raise
    finally:
        inj.stop()
    return LoopResult(w=w, log=log, scheme=scheme, end_s=end_s, replicas_identical=identical, notes=notes,
                      decision_s=decider.mean_decision_s if decider is not None else 0.0)
