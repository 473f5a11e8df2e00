"""The asynchronous driver's fast path: :class:`lbsim.simulator.asynchronous.AsyncDriver` without SimPy.

Each worker is a plain generator run by :class:`lbsim.simulator.fast_loop.EventLoop`: it yields
where the event path's SimPy process yields (the time of its next event, a queue, the gate's
hold) and computes every time by the same expressions, so the records are the event path's. The
decisions are the gate's (:class:`lbsim.schemes.gate.Gate`: the scheme's ``on_push`` /
``may_start``) and the scheme's ``batch``, asked at the same moments as the event path asks them.
"""

from __future__ import annotations

from lbsim.metrics.run_end import cut_row, stop_reached
from lbsim.network.parameter_server import link_s, tail_s
from lbsim.schemes.base import as_async
from lbsim.schemes.gate import Gate
from lbsim.simulator.env import SimEnv
from lbsim.simulator.fast_loop import STOP, WAIT, EventLoop, Process, RunEnded, node_factor

_FLUSH_MASK = (1 << 16) - 1  # buffered rows move to the record logs every 65,536 updates


class FastAsync:
    """Runs an asynchronous scheme's scenario to its end (see the module docstring)."""

    def __init__(self, env: SimEnv) -> None:
        self.env = env
        self.scheme = as_async(env.scheme)
        self.gate = Gate(self.scheme, env.n)  # clocks, held workers, releases (shared with the runtime)
        self.loop = EventLoop(env)
        loop, timing = self.loop, self.loop.timing
        first = loop.add_queues(3)  # the server's inbound and outbound NICs, its apply queue
        self.nic_in, self.nic_out, self.applier = first, first + 1, first + 2
        nodes = sorted(timing.members)
        first = loop.add_queues(2 * len(nodes))  # each shared node's NIC, inbound then outbound
        lane = {node: first + 2 * k for k, node in enumerate(nodes)}
        self.node_lane = [lane[node] if node >= 0 else -1 for node in timing.node_of]
        self.updates = 0  # updates made
        self.samples_applied = 0
        self.update_rows: list[tuple] = []  # type: ignore[type-arg]  # buffered for env.updates, in order
        self.rows: list[tuple] = []  # type: ignore[type-arg]  # buffered for env.iterations, in order

    def run(self) -> None:
        env = self.env
        processes = [self.worker(w) for w in range(env.n)]
        self.loop.run(processes)
        env._now = self.loop.now
        env.samples_applied = self.samples_applied
        self._flush()
        self.loop.end(processes)
        env.stopped = True

    def _flush(self) -> None:
        """Move the buffered update and iteration rows to the run's record logs (in order)."""
        self.env.updates.extend_rows(self.update_rows)
        self.env.iterations.extend_rows(self.rows)
        self.update_rows.clear()
        self.rows.clear()

    def worker(self, w: int) -> Process:  # noqa: C901, PLR0912, PLR0915 - one iteration, as the event path's
        """Worker w's iterations (:meth:`lbsim.simulator.asynchronous.AsyncDriver.worker`).

        Where the next event would be processed next anyway (:class:`EventLoop`'s run-ahead test:
        ``not fifo and heap[0][0] > t``), the worker goes on without yielding (and moves the clock).
        """
        env, loop, timing = self.env, self.loop, self.loop.timing
        cont, spec, numerics = env.contention[w], env.workers[w], env.numerics
        run_end, progress = env.run_end, env._progress
        fraction, update_target, sample_target = run_end.fraction, run_end.update_target, run_end.sample_target
        add_update, add_row, flush = self.update_rows.append, self.rows.append, self._flush
        gate_push, admit = self.gate.push, self.gate.admit
        batch_of, compute_s_of = self.scheme.batch, spec.compute_s
        compute_end_of, factor_of, net = cont.compute_end, cont.iteration_factor, cont.network_factor
        fifo, heap, busy, waiting, clock = loop.fifo, loop.heap, loop.busy, loop.waiting, loop.clock
        fifo_add = fifo.append
        nic_in, nic_out, applier = self.nic_in, self.nic_out, self.applier
        hold_s, apply_s, latency_s = timing.hold_s, timing.apply_each_s, timing.latency_s
        grad, link = timing.gradient_bytes, timing.link_bytes_per_s[w]
        constant = cont.network_constant()
        own_fixed = link_s(grad, constant, link) if constant is not None else -1.0  # the same own_s every time
        node_in = self.node_lane[w]
        node_out = node_in + 1
        shared, node, contention = node_in >= 0, timing.node_of[w], env.contention
        pulled_version = 0
        read = numerics.weights() if numerics is not None else None
        it = 0
        # the open iteration's row, should the run end before it does (gradient applied, not ended)
        is_open = False
        update = staleness = batch = 0
        start = compute_end = comm = 0.0
        pull_start = -1.0
        try:
            now = yield WAIT  # primed; then sent the start time
            while True:
                start = now
                batch = batch_of(w)
                samples = numerics.draw(w, batch, batch) if numerics is not None else None
                compute_end = compute_end_of(start, compute_s_of(batch) * factor_of(it))
                t = start + (compute_end - start)
                if not fifo and heap[0][0] > t:
                    now = clock[0] = t
                else:
                    now = yield t
                # push: the node's NIC (a shared node), the server's inbound NIC, the rest of the own link
                if shared:
                    now = yield node_in
                    own_s = link_s(grad, node_factor(timing, node, contention, now), link)
                elif own_fixed >= 0:
                    own_s = own_fixed
                else:
                    own_s = link_s(grad, net(now), link)
                requested = now
                if busy[nic_in] or waiting[nic_in] or fifo or heap[0][0] <= now:
                    now = yield nic_in
                else:
                    busy[nic_in] = True  # free: granted, and nothing else comes first
                t = now + hold_s
                if not fifo and heap[0][0] > t:
                    now = clock[0] = t
                else:
                    now = yield t
                busy[nic_in] = False  # Lane.release
                if waiting[nic_in]:
                    fifo_add(~nic_in)
                t = now + tail_s(requested, own_s, now, latency_s)
                if not fifo and heap[0][0] > t:
                    now = clock[0] = t
                else:
                    now = yield t
                if shared:
                    busy[node_in] = False
                    if waiting[node_in]:
                        fifo_add(~node_in)
                comm = now - compute_end
                # the serial apply queue
                if busy[applier] or waiting[applier] or fifo or heap[0][0] <= now:
                    now = yield applier
                else:
                    busy[applier] = True
                t = now + apply_s
                if not fifo and heap[0][0] > t:
                    now = clock[0] = t
                else:
                    now = yield t
                busy[applier] = False
                if waiting[applier]:
                    fifo_add(~applier)
                update = self.updates
                staleness = update - pulled_version
                add_update((update, now, batch, 1))
                made = self.updates = update + 1
                applied = self.samples_applied = self.samples_applied + batch
                is_open, pull_start = True, -1.0
                if progress is not None:
                    progress(fraction(made, applied, now))
                if numerics is not None:
                    numerics.push(w, read, samples, now)  # type: ignore[arg-type]
                released = gate_push(w, now)
                if released:  # held workers the gate now admits, in the order held
                    fifo.extend(released)
                if stop_reached(made, applied, update_target, sample_target):  # the final update: no pull, cut here
                    is_open = False
                    compute_s = compute_end - start
                    add_row((w, it, update, start, compute_s, comm, now - start - compute_s - comm - 0.0, now, batch,
                             staleness, False, 1.0, 0.0, True))
                    yield STOP
                if not made & _FLUSH_MASK:
                    flush()
                if not admit(w):
                    now = yield WAIT  # held: a later push releases it
                pull_start = now
                pulled_version = self.updates
                if numerics is not None:
                    read = numerics.weights()
                if shared:
                    now = yield node_out
                    own_s = link_s(grad, node_factor(timing, node, contention, now), link)
                elif own_fixed >= 0:
                    own_s = own_fixed
                else:
                    own_s = link_s(grad, net(now), link)
                requested = now
                if busy[nic_out] or waiting[nic_out] or fifo or heap[0][0] <= now:
                    now = yield nic_out
                else:
                    busy[nic_out] = True
                t = now + hold_s
                if not fifo and heap[0][0] > t:
                    now = clock[0] = t
                else:
                    now = yield t
                busy[nic_out] = False
                if waiting[nic_out]:
                    fifo_add(~nic_out)
                t = now + tail_s(requested, own_s, now, latency_s)
                if not fifo and heap[0][0] > t:
                    now = clock[0] = t
                else:
                    now = yield t
                if shared:
                    busy[node_out] = False
                    if waiting[node_out]:
                        fifo_add(~node_out)
                comm += now - pull_start
                is_open = False
                compute_s = compute_end - start
                add_row((w, it, update, start, compute_s, comm, now - start - compute_s - comm - 0.0, now, batch,
                         staleness, False, 1.0, 0.0, False))
                it += 1
        except RunEnded as end:
            if is_open:  # applied, not ended: recorded up to the end, cut
                t = end.time_s
                self.rows.append(cut_row(worker=w, iteration=it, update=update, start_s=start, end_s=t,
                                         compute_s=compute_end - start, fetch_s=0.0,
                                         comm_s=comm + (t - pull_start if pull_start >= 0 else 0.0),
                                         batch=batch, staleness=staleness, weight=1.0))
                self._flush()
