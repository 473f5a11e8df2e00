"""The synchronous driver: rounds with a barrier and one global update each (bsp, static, ...).

Each worker is a SimPy process: take the batch the scheme decided for this round, fetch its
samples when the scenario places the data (:mod:`lbsim.simulator.fetch`; which samples are local is
the scheme's choice or uniform sampling), compute (integrating its contention exactly), then
communicate:

* all-reduce (``ring_allreduce``) — arrive at the barrier; when the round's last worker arrives
  the all-reduce over the nodes and links runs (:mod:`lbsim.network`) and the update is made at
  its end. With overlap (``workload.overlap``, :func:`lbsim.network.overlap.exposed_comm_s`) the
  buckets were already being reduced during the last worker's backward: only the exposed tail,
  ``exposed(T, compute_s of the last worker)``, follows its compute;
* parameter server — push the gradient through the server NIC, wait for the serial apply queue;
  when ``required_gradients`` are applied the update is made, workers still computing or
  pushing are dropped (backup workers), and every worker pulls the new weights, then starts the
  next round at once.

At every update the scheme is asked for the next round's batches, with the round's observations
(what each worker measured). The run ends at the final update (update or sample target; the
final round's rows end there, marked ``cut`` on a parameter server, whose pull is skipped) or at the
time budget: a contributor whose gradient is in an update but whose pull has not ended is then
recorded up to the budget, marked ``cut`` (:mod:`lbsim.metrics.run_end`); a round without an update
by then is not recorded.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import simpy

from lbsim.metrics.records import IterationRecord
from lbsim.metrics.run_end import cut_row
from lbsim.network.overlap import exposed_comm_s
from lbsim.samples.rounds import RoundPlan
from lbsim.scenario.sections import ParameterServerConfig
from lbsim.schemes.base import RoundObservation, WorkerObservation, as_sync
from lbsim.schemes.sample_plan import plan_round, update_weights

from .env import SimEnv
from .fetch import Fetcher
from .network import ParameterServer, allreduce_plan, ring_allreduce_s


@dataclass
class Round:
    """One synchronous round in flight: its batches and compute factors, who has yet to finish, what each
    measured, and the update it makes."""

    index: int
    batches: tuple[int, ...]
    factors: tuple[float, ...]  # each worker's per-iteration compute multiplier (trace x jitter)
    done: simpy.Event
    pending: set[int]
    contributed: list[int] = field(default_factory=list)
    measured: dict[int, tuple[float, float, float]] = field(default_factory=dict)  # worker -> (compute_s, comm_s, fetch_s)
    ring_start_s: float = 0.0
    update: int = -1
    samples: int = 0
    final: bool = False
    entered: set[int] = field(default_factory=set)
    recorded: int = 0
    starts: dict[int, tuple[float, int]] = field(default_factory=dict)  # worker -> (its start, its iteration)
    pulls: dict[int, float] = field(default_factory=dict)  # worker -> when its pull started
    local: tuple[int, ...] = ()  # each worker's local samples (the rest of its batch is remote)
    plan: RoundPlan | None = None  # the round's samples by worker (workload.sample_cost), else None
    weights: dict[int, float] | None = None  # the update's weight of each contributor (with a plan)


class SyncDriver:
    """The synchronous driver of the event path: rounds of compute, then the all-reduce (or the parameter
    server), the scheme deciding the next round's batches from the one observed."""

    def __init__(self, env: SimEnv) -> None:
        self.env = env
        self.scheme = as_sync(env.scheme)
        net = env.scenario.network
        self.ps = ParameterServer(env, net) if isinstance(net, ParameterServerConfig) else None
        self.plan = allreduce_plan(env, net) if self.ps is None else None  # type: ignore[arg-type]
        self.overlap = env.resolved.overlap
        self.fetcher = Fetcher(env, env.data) if env.data is not None else None
        self.samples = env.resolved.context.sample_cost
        self._next_batches = tuple(self.scheme.initial_batches())
        self._next_plan = self._plan(0)
        self._next_local = self._local(self._next_batches)
        self._next_factors = self._draw_factors(0)
        self.open = self._open_round(0)
        self.active: list[Round | None] = [None] * env.n  # the round a worker is computing/pushing for
        self.procs = [env.process(self.worker(w)) for w in range(env.n)]

    def _draw_factors(self, r: int) -> tuple[float, ...]:
        """Round r's compute multipliers, drawn when the round is decided (each worker's own stream)."""
        return tuple(c.iteration_factor(r) for c in self.env.contention)

    def _plan(self, r: int) -> RoundPlan | None:
        """Round r's samples by worker (:func:`lbsim.schemes.sample_plan.plan_round`); sets the round's batches."""
        if self.samples is None:
            return None
        plan = plan_round(self.samples, r, self.scheme, self._next_batches, self.env.resolved.context.max_batch)
        self._next_batches = plan.batches
        return plan

    def _local(self, batches: tuple[int, ...]) -> tuple[int, ...]:
        """Each worker's local samples for ``batches`` (all of them when data are local and free)."""
        return batches if self.fetcher is None else self.fetcher.local_samples(batches, self.scheme)

    def _open_round(self, r: int) -> Round:
        return Round(r, self._next_batches, self._next_factors, self.env.event(), set(range(self.env.n)),
                     local=self._next_local, plan=self._next_plan)

    def worker(self, w: int) -> Generator[Any, Any, None]:
        """Worker ``w``'s process: pull, compute, push, wait at the barrier, round after round."""
        env, cont, spec = self.env, self.env.contention[w], self.env.workers[w]
        it = 0  # the worker's own iteration count (it may sit out a round it was too late for)
        while env.may_update():
            rs = self.open  # a worker whose pull ended after a round closed joins the open one
            rs.entered.add(w)
            batch = rs.batches[w]
            start = env.now
            rs.starts[w] = (start, it)
            work_s = (spec.compute_s(batch) if rs.plan is None else spec.compute_work_s(float(rs.plan.work[w]))) \
                * rs.factors[w]
            compute_start = start  # compute starts when the batch's samples are in
            compute_end = cont.compute_end(start, work_s) if self.fetcher is None else math.inf
            comm = 0.0
            dropped = False
            self.active[w] = rs
            try:
                if self.fetcher is not None:
                    yield from self.fetcher.fetch(w, rs.local[w], batch - rs.local[w])
                    compute_start = env.now
                    compute_end = cont.compute_end(compute_start, work_s)
                yield env.timeout(compute_end - compute_start)
                if self.ps is not None:
                    yield from self.ps.push(w)
                    comm = env.now - compute_end
                    yield from self.ps.apply()
                self.active[w] = None
                self._contribute(rs, w, compute_end - compute_start, comm, compute_start - start)
            except simpy.Interrupt:
                self.active[w] = None
                dropped = True
                if compute_end == math.inf:  # dropped while fetching
                    compute_start = compute_end = env.now
                comm = max(0.0, env.now - compute_end)
            compute_s = min(env.now, compute_end) - compute_start
            fetch_s = compute_start - start
            if not rs.done.triggered:  # the worker whose gradient made the update goes on first
                yield rs.done
            if self.ps is None:
                comm = env.now - rs.ring_start_s
            elif not rs.final:
                pull_start = rs.pulls[w] = env.now
                yield from self.ps.pull(w)
                comm += env.now - pull_start
            end = env.now
            if not dropped:
                env.close_row(w)
            env.record_iteration(
                IterationRecord(
                    worker=w, iteration=it, update=-1 if dropped else rs.update, start_s=start,
                    compute_s=compute_s, comm_s=comm, wait_s=end - start - compute_s - comm - fetch_s,
                    end_s=end, batch=batch, staleness=0, dropped=dropped,
                    weight=0.0 if dropped else self._weight(rs, w), fetch_s=fetch_s,
                    cut=rs.final and self.ps is not None,
                )
            )
            if rs.final:
                rs.recorded += 1
                if rs.recorded == len(rs.entered):
                    env.finish()
                return
            it += 1

    def _contribute(self, rs: Round, w: int, compute_s: float, comm_s: float, fetch_s: float) -> None:
        rs.pending.discard(w)
        rs.contributed.append(w)
        rs.measured[w] = (compute_s, comm_s, fetch_s)
        if len(rs.contributed) < self.scheme.required_gradients:
            return
        if self.ps is not None:
            self._update(rs)
        else:
            self.env.process(self._ring(rs))

    def _ring(self, rs: Round) -> Generator[Any, Any, None]:
        rs.ring_start_s = self.env.now
        assert self.plan is not None
        comm_s = ring_allreduce_s(self.env, self.plan)
        if self.overlap.enabled:  # hidden under the backward of the worker that closed the round
            comm_s = exposed_comm_s(comm_s, rs.measured[rs.contributed[-1]][0], self.overlap)
        yield self.env.timeout(comm_s)
        self._update(rs)

    def _update(self, rs: Round) -> None:
        env = self.env
        if not env.may_update():
            return
        rs.samples = sum(rs.batches[w] for w in rs.contributed)
        rs.update = env.record_update(rs.samples, len(rs.contributed))
        if rs.plan is not None:
            rs.weights = update_weights(self.samples, rs.batches, rs.plan.tokens, rs.contributed)
        if env.numerics is not None:
            env.numerics.sync_update([(w, rs.batches[w], rs.local[w]) for w in rs.contributed], env.now)
        rs.final = not env.may_update()
        for w in rs.contributed:  # their rows, should the run end before their iterations do
            env.open_row(w, self._cut(rs, w))
        for w in sorted(rs.pending):
            if self.active[w] is rs and self.procs[w].is_alive:
                self.procs[w].interrupt("dropped by the update")
        if not rs.final:
            self._next_factors = self._draw_factors(rs.index + 1)
            self._next_batches = tuple(self.scheme.next_batches(self._observe(rs)))
            self._next_plan = self._plan(rs.index + 1)
            self._next_local = self._local(self._next_batches)
            self.open = self._open_round(rs.index + 1)
        rs.done.succeed()

    def _cut(self, rs: Round, w: int) -> Any:
        """Worker w's row in round ``rs`` (its gradient in the update) if the run ends at T first."""
        compute_s, comm_s, fetch_s = rs.measured[w]
        start, it = rs.starts[w]

        def row(end_s: float) -> tuple[Any, ...]:
            pull = rs.pulls.get(w)
            comm = end_s - rs.ring_start_s if self.ps is None else comm_s + (end_s - pull if pull is not None else 0.0)
            return cut_row(worker=w, iteration=it, update=rs.update, start_s=start, end_s=end_s,
                           compute_s=compute_s, comm_s=comm, fetch_s=fetch_s, batch=rs.batches[w], staleness=0,
                           weight=self._weight(rs, w))
        return row

    @staticmethod
    def _weight(rs: Round, w: int) -> float:
        """Worker w's weight in round ``rs``'s update (it contributed)."""
        return rs.batches[w] / rs.samples if rs.weights is None else rs.weights[w]

    def _observe(self, rs: Round) -> RoundObservation:
        env = self.env
        obs = []
        for w in range(env.n):
            nan = float("nan")
            compute_s, comm_s, fetch_s = rs.measured.get(w, (nan, nan, nan))
            cont = env.contention[w]
            obs.append(
                WorkerObservation(
                    worker=w, batch=rs.batches[w], compute_s=compute_s, comm_s=comm_s, wait_s=0.0,
                    cpu_available=cont.cpu_available(env.now),
                    oracle_slowdown=cont.compute_factor(env.now) * self._next_factors[w],
                    fetch_s=fetch_s, local_samples=rs.local[w], remote_samples=rs.batches[w] - rs.local[w],
                    work=None if rs.plan is None else float(rs.plan.work[w]),
                )
            )
        return RoundObservation(rs.update, env.now, tuple(obs))
