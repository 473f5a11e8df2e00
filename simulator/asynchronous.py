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

from lbsim.schemes.base import Clocks
from simulator.env import SimEnv
from simulator.fetch import Fetcher
from simulator.network import ParameterServer, bytes_per_s


class AsyncDriver:
    def __init__(self, env: SimEnv) -> None:
        self.env = env
        self.scheme = env.scheme
        self.ps = ParameterServer(env, env.scenario.network, lanes=True)  # type: ignore[arg-type]
        self.fetcher = Fetcher(env, env.data) if env.data is not None else None
        self.clocks = Clocks(env.n)  # a list of ints that also tracks its min/max (O(1) gates)
        self.blocked: list[tuple[int, Any]] = []  # workers held at the gate, first blocked first
        # the scheme's gate key (if it has one) at which every blocked worker was last asked;
        # None: unknown or mixed. While the key stays there, no blocked worker can be admitted.
        self._gate_key = getattr(self.scheme, "gate_key", None)
        self._blocked_key: Any = None
        self.procs = [env.process(self.worker(w)) for w in range(env.n)]

    def _tick(self, w: int) -> None:
        """Worker w's clock advanced: release, in the order they blocked, workers the gate now admits."""
        clocks = self.clocks
        clocks.tick(w)
        self.scheme.on_push(w, self.env._now, clocks)
        if not self.blocked:
            return
        key = None
        if self._gate_key is not None:
            key = self._gate_key(clocks)
            if key == self._blocked_key:
                return  # every blocked worker was asked at this key: the answers cannot have changed
        may_start = self.scheme.may_start
        still = []
        for v, ev in self.blocked:
            if may_start(v, clocks):
                ev.succeed()
            else:
                still.append((v, ev))
        self.blocked = still
        self._blocked_key = key

    def _block(self, w: int) -> Any:
        gate = self.env.event()
        if self._gate_key is not None:
            key = self._gate_key(self.clocks)
            self._blocked_key = key if not self.blocked or self._blocked_key == key else None
        self.blocked.append((w, gate))
        return gate

    def worker(self, w: int) -> Generator[Any, Any, None]:
        # One generator per worker, the parameter server's push / apply / pull written out inline
        # (simulator.network.ParameterServer._transfer and apply): the same events, in the same
        # order, as the nested generators, with less overhead per event.
        env, cont, spec = self.env, self.env.contention[w], self.env.workers[w]
        numerics, fetcher, scheme = env.numerics, self.fetcher, self.scheme
        ps = self.ps
        nic_in, nic_out, applier = ps.nic_in, ps.nic_out, ps.applier
        hold_s, apply_s, latency_s = ps.server_hold_s, ps.apply_each_s, ps.config.latency_s
        grad_bytes, link = env.gradient_bytes, bytes_per_s(spec.bandwidth_gbps)
        t0, speed = spec.t0_s, spec.samples_per_s
        timeout, record, updates, target = env.timeout, env.iterations.add, env.updates, env.update_target
        batch_of, may_start, tick = scheme.batch, scheme.may_start, self._tick  # bound once
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
            compute_end = compute_end_of(compute_start, (t0 + batch / speed) * factor_of(it))
            yield timeout(compute_end - compute_start)
            # push: the server's inbound NIC, then what is left of the worker's own link, + latency
            requested = env._now
            own_s = grad_bytes * network_factor(requested) / link
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
            if env.stopped or (target is not None and updates._n >= target):  # not env.may_update()
                return
            update = updates._n  # env.record_update(batch, 1), inlined
            staleness = update - pulled_version
            updates.add((update, env._now, batch, 1))
            if env._progress is not None:
                env._progress(env.progress_fraction())
            if numerics is not None:
                numerics.push(w, read, samples, env._now)
            tick(w)
            final = env.stopped or (target is not None and updates._n >= target)  # not env.may_update()
            if not final:
                if not may_start(w, self.clocks):
                    yield self._block(w)
                pull_start = env._now
                pulled_version = updates._n
                if numerics is not None:
                    read = numerics.weights()
                requested = env._now
                own_s = grad_bytes * network_factor(requested) / link
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
                record((w, it, update, start, compute_s, comm, end - start - compute_s - comm - fetch_s, end, batch,
                        staleness, False, 1.0, fetch_s))
            if final:
                env.finish()
                return
            it += 1
