"""The asynchronous driver: workers push to a parameter server on their own (asp, ssp, ...).

Each worker is a SimPy process looping over: fetch its batch's samples when the scenario places
the data (uniform sampling, :mod:`simulator.fetch`); compute on its batch; push the gradient;
wait for the server's serial apply queue (the gradient becomes an update, with staleness =
updates made since this worker's pull); ask the scheme's gate whether it may go on (SSP blocks a
worker more than s clocks ahead of the slowest); pull the freshest weights; next iteration.

The run ends when the final update is applied; iterations still in flight then are not
recorded (they did not finish).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from lbsim.metrics.records import IterationRecord
from simulator.env import SimEnv
from simulator.fetch import Fetcher
from simulator.network import ParameterServer


class AsyncDriver:
    def __init__(self, env: SimEnv) -> None:
        self.env = env
        self.scheme = env.scheme
        self.ps = ParameterServer(env, env.scenario.network)  # type: ignore[arg-type]
        self.fetcher = Fetcher(env, env.data) if env.data is not None else None
        self.clocks = [0] * env.n
        self.blocked: list[tuple[int, Any]] = []  # workers held at the gate, first blocked first
        self.procs = [env.process(self.worker(w)) for w in range(env.n)]

    def _tick(self, w: int) -> None:
        """Worker w's clock advanced: release, in the order they blocked, workers the gate now admits."""
        self.clocks[w] += 1
        self.scheme.on_push(w, self.env.now, self.clocks)
        still = []
        for v, ev in self.blocked:
            if self.scheme.may_start(v, self.clocks):
                ev.succeed()
            else:
                still.append((v, ev))
        self.blocked = still

    def worker(self, w: int) -> Generator[Any, Any, None]:
        env, cont, spec = self.env, self.env.contention[w], self.env.workers[w]
        numerics = env.numerics
        pulled_version = 0
        read = numerics.weights() if numerics is not None else None  # the weights this worker computes on
        it = 0
        while True:
            start = env.now
            batch = self.scheme.batch(w)
            local = batch if self.fetcher is None else self.fetcher.layout.default_local(w, batch)
            samples = numerics.draw(w, batch, local) if numerics is not None else None
            if self.fetcher is not None:
                yield from self.fetcher.fetch(w, local, batch - local)
            compute_start = env.now  # == start without a data section
            compute_end = cont.compute_end(compute_start, spec.compute_s(batch) * cont.iteration_factor(it))
            yield env.timeout(compute_end - compute_start)
            yield from self.ps.push(w)
            comm = env.now - compute_end
            yield from self.ps.apply()
            if not env.may_update():
                return
            staleness = env.version - pulled_version
            update = env.record_update(batch, 1)
            if numerics is not None:
                numerics.push(w, read, samples, env.now)
            self._tick(w)
            final = not env.may_update()
            if not final:
                if not self.scheme.may_start(w, self.clocks):
                    gate = env.event()
                    self.blocked.append((w, gate))
                    yield gate
                pull_start = env.now
                pulled_version = env.version
                if numerics is not None:
                    read = numerics.weights()
                yield from self.ps.pull(w)
                comm += env.now - pull_start
            end = env.now
            compute_s = compute_end - compute_start
            fetch_s = compute_start - start
            env.record_iteration(
                IterationRecord(
                    worker=w, iteration=it, update=update, start_s=start, compute_s=compute_s,
                    comm_s=comm, wait_s=end - start - compute_s - comm - fetch_s, end_s=end, batch=batch,
                    staleness=staleness, fetch_s=fetch_s,
                )
            )
            if final:
                env.finish()
                return
            it += 1
