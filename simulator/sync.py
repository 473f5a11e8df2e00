"""The synchronous driver: rounds with a barrier and one global update each (bsp, static, ...).

Each worker is a SimPy process: take the batch the scheme decided for this round, compute
(integrating its contention exactly), then communicate:

* ring all-reduce — arrive at the barrier; when the round's last worker arrives the ring runs
  for ``T_ring`` and the update is made at its end;
* parameter server — push the gradient through the server NIC, wait for the serial apply queue;
  when ``required_gradients`` are applied the update is made, workers still computing or
  pushing are dropped (backup workers), and every worker pulls the new weights, then starts the
  next round at once.

At every update the scheme is asked for the next round's batches, with the round's observations
(what each worker measured). The run ends at the final update; iterations are cut there.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import simpy

from lbsim.metrics.records import IterationRecord
from lbsim.scenario.sections import ParameterServerConfig
from lbsim.schemes.base import RoundObservation, WorkerObservation
from simulator.env import SimEnv
from simulator.network import ParameterServer, ring_allreduce_s


@dataclass
class Round:
    index: int
    batches: tuple[int, ...]
    done: simpy.Event
    pending: set[int]
    contributed: list[int] = field(default_factory=list)
    measured: dict[int, tuple[float, float]] = field(default_factory=dict)  # worker -> (compute_s, comm_s)
    ring_start_s: float = 0.0
    update: int = -1
    final: bool = False


class SyncDriver:
    def __init__(self, env: SimEnv) -> None:
        self.env = env
        self.scheme = env.scheme
        net = env.scenario.network
        self.ps = ParameterServer(env, net) if isinstance(net, ParameterServerConfig) else None
        self.rounds: dict[int, Round] = {}
        self._next_batches = tuple(self.scheme.initial_batches())
        self.procs = [env.process(self.worker(w)) for w in range(env.n)]

    def round(self, r: int) -> Round:
        if r not in self.rounds:
            self.rounds.pop(r - 2, None)  # keep memory flat: nobody looks two rounds back
            self.rounds[r] = Round(r, self._next_batches, self.env.event(), set(range(self.env.n)))
        return self.rounds[r]

    def worker(self, w: int) -> Generator[Any, Any, None]:
        env, cont, spec = self.env, self.env.contention[w], self.env.workers[w]
        r = 0
        while env.may_update():
            rs = self.round(r)
            batch = rs.batches[w]
            start = env.now
            compute_end = cont.compute_end(start, spec.compute_s(batch) * cont.iteration_factor(r))
            comm = 0.0
            dropped = False
            try:
                yield env.timeout(compute_end - start)
                if self.ps is not None:
                    yield from self.ps.push(w)
                    comm = env.now - compute_end
                    yield from self.ps.apply()
                self._contribute(rs, w, compute_end - start, comm)
            except simpy.Interrupt:
                dropped = True
                comm = max(0.0, env.now - compute_end)
            compute_s = min(env.now, compute_end) - start
            yield rs.done
            if self.ps is None:
                comm = env.now - rs.ring_start_s
            elif not rs.final:
                pull_start = env.now
                yield from self.ps.pull(w)
                comm += env.now - pull_start
            end = env.now
            env.record_iteration(
                IterationRecord(
                    worker=w, iteration=r, update=-1 if dropped else rs.update, start_s=start,
                    compute_s=compute_s, comm_s=comm, wait_s=end - start - compute_s - comm,
                    end_s=end, batch=batch, staleness=0, dropped=dropped,
                )
            )
            if rs.final:
                env.finish()
                return
            r += 1

    def _contribute(self, rs: Round, w: int, compute_s: float, comm_s: float) -> None:
        rs.pending.discard(w)
        rs.contributed.append(w)
        rs.measured[w] = (compute_s, comm_s)
        if len(rs.contributed) < self.scheme.required_gradients:
            return
        if self.ps is not None:
            self._update(rs)
        else:
            self.env.process(self._ring(rs))

    def _ring(self, rs: Round) -> Generator[Any, Any, None]:
        rs.ring_start_s = self.env.now
        yield self.env.timeout(ring_allreduce_s(self.env, self.env.scenario.network, range(self.env.n)))
        self._update(rs)

    def _update(self, rs: Round) -> None:
        env = self.env
        if not env.may_update():
            return
        samples = sum(rs.batches[w] for w in rs.contributed)
        rs.update = env.record_update(samples, len(rs.contributed))
        rs.final = not env.may_update()
        for w in sorted(rs.pending):
            proc = self.procs[w]
            if proc.is_alive:
                proc.interrupt("dropped by the update")
        if not rs.final:
            self._next_batches = tuple(self.scheme.next_batches(self._observe(rs)))
        rs.done.succeed()

    def _observe(self, rs: Round) -> RoundObservation:
        env = self.env
        obs = []
        for w in range(env.n):
            compute_s, comm_s = rs.measured.get(w, (float("nan"), float("nan")))
            obs.append(
                WorkerObservation(
                    worker=w, batch=rs.batches[w], compute_s=compute_s, comm_s=comm_s,
                    wait_s=0.0, cpu_available=env.contention[w].cpu_available(env.now),
                )
            )
        return RoundObservation(rs.update, env.now, tuple(obs))
