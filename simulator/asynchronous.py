"""The asynchronous driver: workers push to a parameter server on their own (asp, ssp, ...).

Each worker is a SimPy process looping over: fetch its batch's samples when the scenario places
the data (uniform sampling, :mod:`lbsim.simulator.fetch`); compute on its batch; push the gradient;
wait for the server's serial apply queue (the gradient becomes an update, with staleness =
updates made since this worker's pull); ask the scheme's gate whether it may go on (SSP blocks a
worker more than s clocks ahead of the slowest); pull the freshest weights; next iteration.

The run ends when the final update is applied (update or sample target) or at the time budget;
an iteration whose gradient was applied but which had not ended then (held at the gate, pulling;
the final pusher, which does not pull) is recorded up to the end and marked ``cut``
(:mod:`lbsim.metrics.run_end`); iterations whose gradient was not applied are not recorded.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from lbsim.metrics.run_end import cut_row, stop_reached
from lbsim.schemes.base import as_async
from lbsim.schemes.gate import Gate

from .compute import iteration_end_s
from .env import SimEnv
from .fetch import Fetcher
from .network import ParameterServer


class AsyncDriver:
    def __init__(self, env: SimEnv) -> None:
        self.env = env
        self.scheme = as_async(env.scheme)
        self.ps = ParameterServer(env, env.scenario.network, lanes=True)  # type: ignore[arg-type]
        self.fetcher = Fetcher(env, env.data) if env.data is not None else None
        self.gate = Gate(self.scheme, env.n)  # clocks, held workers, releases (shared with the runtime)
        self.clocks = self.gate.clocks
        self.held: dict[int, Any] = {}  # the event each held worker waits on
        self.procs = [env.process(self.worker(w)) for w in range(env.n)]

    def _tick(self, w: int) -> None:
        """Worker w's push was applied: release, in the order they were held, workers the gate now admits."""
        for v in self.gate.push(w, self.env._now):
            self.held.pop(v).succeed()

    def _hold(self, w: int) -> Any:
        event = self.held[w] = self.env.event()
        return event

    def worker(self, w: int) -> Generator[Any, Any, None]:
        env, cont, spec = self.env, self.env.contention[w], self.env.workers[w]
        numerics, fetcher, scheme, ps = env.numerics, self.fetcher, self.scheme, self.ps
        run_end, updates = env.run_end, env.updates
        pulled_version = 0
        read = numerics.weights() if numerics is not None else None  # the weights this worker computes on
        it = 0
        while True:
            start = env.now
            batch = scheme.batch(w)
            local = batch if fetcher is None else fetcher.layout.default_local(w, batch)
            samples = numerics.draw(w, batch, local) if numerics is not None else None
            if fetcher is not None:
                yield from fetcher.fetch(w, local, batch - local)
            compute_start = env.now  # == start without a data section
            compute_end = iteration_end_s(cont, spec, compute_start, batch, it)
            yield env.timeout(compute_end - compute_start)
            yield from ps.push(w)
            comm = env.now - compute_end
            yield from ps.apply()
            if env.stopped or stop_reached(len(updates), env.samples_applied, run_end.update_target, run_end.sample_target):
                return
            update = len(updates)
            staleness = update - pulled_version
            env.record_update(batch, 1)
            pull_start = -1.0  # not pulling yet
            env.open_row(w, lambda end_s: cut_row(  # noqa: B023 - read at the end, while this iteration is open
                worker=w, iteration=it, update=update, start_s=start, end_s=end_s,  # noqa: B023
                compute_s=compute_end - compute_start, fetch_s=compute_start - start,  # noqa: B023
                comm_s=comm + (end_s - pull_start if pull_start >= 0 else 0.0),  # noqa: B023
                batch=batch, staleness=staleness, weight=1.0))  # noqa: B023
            if numerics is not None:
                assert read is not None and samples is not None  # both set whenever numerics are on
                numerics.push(w, read, samples, env.now)
            if not self.gate.free:  # a scheme that never holds anyone: the gate is not asked (Gate.free)
                self._tick(w)
            final = env.stopped or not env.may_update()
            if not final:
                if not self.gate.free and not self.gate.admit(w):
                    yield self._hold(w)
                pull_start = env.now
                pulled_version = len(updates)
                if numerics is not None:
                    read = numerics.weights()
                yield from ps.pull(w)
                comm += env.now - pull_start
            end = env.now
            compute_s = compute_end - compute_start
            fetch_s = compute_start - start
            env.close_row(w)
            env.record_row((w, it, update, start, compute_s, comm, end - start - compute_s - comm - fetch_s, end, batch,
                            staleness, False, 1.0, fetch_s, final))
            if final:
                env.finish()
                return
            it += 1
