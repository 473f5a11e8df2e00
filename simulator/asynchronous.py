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
from lbsim.network.parameter_server import link_s
from lbsim.schemes.base import as_async
from lbsim.schemes.gate import Gate
from lbsim.simulator.env import SimEnv
from lbsim.simulator.fetch import Fetcher
from lbsim.simulator.network import ParameterServer, bytes_per_s


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
        # One generator per worker, the parameter server's push / apply / pull written out inline
        # (lbsim.simulator.network.ParameterServer._transfer and apply): the same events, in the same
        # order, as the nested generators, with less overhead per event. Kept because it pays
        # (issue 17, CPU seconds of simulate(), 7 alternating runs each, benchmarks/bench_simulator.py's
        # fleet at 64 workers on a 4-shard server): `yield from ps.push(w)` / `ps.apply()` / `ps.pull(w)`
        # (one flat generator each) cost +10% on asp (1.144 vs 1.042 s min) and +7..12% on wbsp (also in
        # simulator/wbsp.py); calling Lane.request()/release() instead of their free-lane branch, +3..5%.
        env, cont, spec = self.env, self.env.contention[w], self.env.workers[w]
        numerics, fetcher, scheme = env.numerics, self.fetcher, self.scheme
        ps = self.ps
        nic_in, nic_out, applier = ps.nic_in, ps.nic_out, ps.applier
        hold_s, apply_s, latency_s = ps.server_hold_s, ps.apply_each_s, ps.config.latency_s
        grad_bytes, link = env.gradient_bytes, bytes_per_s(spec.bandwidth_gbps)
        shared = ps.shared[w]  # on a node with other workers: transfers queue for its NIC
        t0, speed, curve = spec.t0_s, spec.samples_per_s, spec.compute_curve
        timeout, record, updates, target = env.timeout, env.iterations.add, env.updates, env.run_end.update_target
        sample_target = env.run_end.sample_target
        open_rows = env.open_rows
        batch_of, admit, tick = scheme.batch, self.gate.admit, self._tick  # bound once
        compute_end_of, factor_of, network_factor = cont.compute_end, cont.iteration_factor, cont.network_factor
        pulled_version = 0
        read = numerics.weights() if numerics is not None else None  # the weights this worker computes on
        it = 0
        while True:
            start = env._now
            batch = batch_of(w)
            local = batch if fetcher is None else fetcher.layout.default_local(w, batch)
            samples = numerics.draw(w, batch, local) if numerics is not None else None
            if fetcher is not None:
                yield from fetcher.fetch(w, local, batch - local)
            compute_start = env._now  # == start without a data section
            work = (t0 + batch / speed) if curve is None else curve.step_s(batch)  # spec.compute_s, inlined
            compute_end = compute_end_of(compute_start, work * factor_of(it))
            yield timeout(compute_end - compute_start)
            # push: the server's inbound NIC, then what is left of the worker's own link, + latency
            requested = env._now
            if shared:  # a node shared with other workers: queue for its NIC (ParameterServer.push)
                yield from ps.push(w)
            else:
                own_s = link_s(grad_bytes, network_factor(requested), link)
                if nic_in.busy or nic_in.waiting:
                    yield nic_in.request()
                else:  # Lane.request on a free server, inlined: granted now (timeout(0) == a succeeded event)
                    nic_in.busy = True
                    yield timeout(0)
                yield timeout(hold_s)
                if nic_in.waiting:
                    nic_in.release()
                else:
                    nic_in.busy = False  # Lane.release with nobody waiting
                yield timeout(max(0.0, requested + own_s - env._now) + latency_s)
            comm = env._now - compute_end
            # the serial apply queue
            if applier.busy or applier.waiting:
                yield applier.request()
            else:
                applier.busy = True
                yield timeout(0)
            yield timeout(apply_s)
            if applier.waiting:
                applier.release()
            else:
                applier.busy = False
            if env.stopped or stop_reached(updates._n, env.samples_applied, target, sample_target):  # not env.may_update()
                return
            update = updates._n  # env.record_update(batch, 1), inlined
            staleness = update - pulled_version
            updates.add((update, env._now, batch, 1))
            env.samples_applied += batch
            pull_start = -1.0  # not pulling yet
            open_rows[w] = lambda end_s: cut_row(  # noqa: B023 - read at the end, while this iteration is open
                worker=w, iteration=it, update=update, start_s=start, end_s=end_s,  # noqa: B023
                compute_s=compute_end - compute_start, fetch_s=compute_start - start,  # noqa: B023
                comm_s=comm + (end_s - pull_start if pull_start >= 0 else 0.0),  # noqa: B023
                batch=batch, staleness=staleness, weight=1.0)  # noqa: B023
            if env._progress is not None:
                env._progress(env.progress_fraction())
            if numerics is not None:
                assert read is not None and samples is not None  # both set whenever numerics are on
                numerics.push(w, read, samples, env._now)
            tick(w)
            final = env.stopped or stop_reached(updates._n, env.samples_applied, target, sample_target)
            if not final:
                if not admit(w):
                    yield self._hold(w)
                pull_start = env._now
                pulled_version = updates._n
                if numerics is not None:
                    read = numerics.weights()
                requested = env._now
                if shared:  # ParameterServer.pull: queue for the shared node's NIC
                    yield from ps.pull(w)
                else:
                    own_s = link_s(grad_bytes, network_factor(requested), link)
                    if nic_out.busy or nic_out.waiting:
                        yield nic_out.request()
                    else:
                        nic_out.busy = True
                        yield timeout(0)
                    yield timeout(hold_s)
                    if nic_out.waiting:
                        nic_out.release()
                    else:
                        nic_out.busy = False
                    yield timeout(max(0.0, requested + own_s - env._now) + latency_s)
                comm += env._now - pull_start
            end = env._now
            compute_s = compute_end - compute_start
            fetch_s = compute_start - start
            if not env.stopped:  # env.record_row, inlined
                del open_rows[w]
                record((w, it, update, start, compute_s, comm, end - start - compute_s - comm - fetch_s, end, batch,
                        staleness, False, 1.0, fetch_s, final))
            if final:
                env.finish()
                return
            it += 1
