"""Communication: a parameter server with a shared NIC and serial apply queue, or a ring.

Parameter server: :class:`ParameterServer` enacts, with SimPy processes, the round trip whose
timing rules are defined once in :mod:`lbsim.network.parameter_server` (:class:`ServerTiming`:
the server NIC's FIFO per direction held ``S / (k B_ps)`` per transfer, the worker's own link
``S F / B_node`` running meanwhile, one latency, a FIFO per shared node and direction, the serial
apply queue of ``apply_s / k`` per gradient). The parameter-server fast path
(:mod:`lbsim.simulator.fast_ps`) enacts the same rules without SimPy.

All-reduce (``network: ring_allreduce``): the duration over the cluster's nodes and links is
:class:`lbsim.network.topology.AllReducePlan` (formulas in :mod:`lbsim.network.collectives`),
with each node's links slowed by its workers' network contention at the moment it starts. With
one worker per node the flat ring is ``T = 2(n-1) alpha + 2 (n-1)/n * S / B_min``, ``B_min`` the
slowest worker's effective bandwidth (the ring runs at its slowest hop).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator
from typing import Any

import simpy

from lbsim.network.collectives import bytes_per_s
from lbsim.network.parameter_server import ServerTiming, tail_s
from lbsim.network.topology import AllReducePlan, topology_of
from lbsim.scenario.sections import AllReduceConfig, ParameterServerConfig

__all__ = ["AllReducePlan", "Lane", "ParameterServer", "allreduce_plan", "bytes_per_s", "ring_allreduce_s", "server_timing"]


class Lane:
    """A FIFO server of capacity one: ``simpy.Resource(env, capacity=1)``'s schedule, lighter.

    ``yield lane.request()`` waits for the server; ``lane.release()`` frees it. The events are
    those simpy's resource schedules, in the same order, so a run is the same event for event:
    a request is granted (its event triggered) when it is made if the server is free and nobody
    waits, else when the release ahead of it is *processed* (simpy grants on processing its
    Release event, not when ``release`` is called; a request made in between, with the server
    free, is granted on the spot). A release with nobody waiting schedules no event: simpy's
    would be processed while the server is still free or held by a later request (granted after
    it), i.e. do nothing. Not for processes that can be interrupted while they wait or hold.
    """

    __slots__ = ("env", "busy", "waiting", "_grant_cb")

    def __init__(self, env: Any) -> None:
        self.env = env
        self.busy = False
        self.waiting: deque[simpy.Event] = deque()
        self._grant_cb = self._grant  # bound once

    def request(self) -> simpy.Event:
        """An event that fires when the lane is this request's (at once if it is free)."""
        if not self.busy and not self.waiting:  # granted on the spot: a timeout of 0 is scheduled
            self.busy = True  # exactly as a succeeded event (now, NORMAL, next id), value None
            return self.env.timeout(0)
        ev = simpy.Event(self.env)
        self.waiting.append(ev)
        self._grant()  # the server may be free with requests still waiting for a release's event
        return ev

    def _grant(self, _event: Any = None) -> None:
        if not self.busy and self.waiting:
            self.busy = True
            ev = self.waiting.popleft()  # ev.succeed(), inlined
            ev._ok = True
            ev._value = None
            self.env.schedule(ev)

    def release(self) -> None:
        """Free the lane; the first waiting request gets it."""
        self.busy = False
        if self.waiting:  # simpy's Release event: the head is granted when it is processed
            self.env.timeout(0).callbacks.append(self._grant_cb)  # scheduled as a succeeded event


def server_timing(env: Any, config: ParameterServerConfig) -> ServerTiming:
    """The round trip's figures (:class:`ServerTiming`) of ``config``'s server for ``env``'s workers."""
    return ServerTiming.of(gradient_bytes=env.gradient_bytes, shards=config.shards,
                           server_bandwidth_gbps=config.server_bandwidth_gbps, apply_s=config.apply_s,
                           latency_s=config.latency_s, workers=env.workers)


class ParameterServer:
    """The server's inbound and outbound NIC queues, its serial apply queue, the shared nodes' NICs.

    Each transfer is the round trip of :mod:`lbsim.network.parameter_server`, as SimPy events:
    on a shared node, queue for the node's NIC (held to the end of the transfer); then queue for
    the server's NIC, hold it ``hold_s``, release it, wait ``tail_s`` (the rest of the own link,
    + latency). ``lanes=True`` uses :class:`Lane` (same schedule, less overhead) for drivers whose
    processes are never interrupted; the synchronous driver, which drops backup workers by
    interrupting them mid-transfer, keeps ``simpy.Resource``.
    """

    def __init__(self, env: Any, config: ParameterServerConfig, *, lanes: bool = False) -> None:
        self.env = env
        self.config = config
        self.lanes = lanes
        self.timing = server_timing(env, config)
        self.nic_in: Any = self._queue()
        self.nic_out: Any = self._queue()
        self.applier: Any = self._queue()
        # nodes shared by several workers: a FIFO per node and direction for its NIC
        nodes = self.timing.members
        self.node_in: dict[int, Any] = {k: self._queue() for k in nodes}
        self.node_out: dict[int, Any] = {k: self._queue() for k in nodes}

    def _queue(self) -> Any:
        return Lane(self.env) if self.lanes else simpy.Resource(self.env, capacity=1)

    def _factor(self, worker: int) -> float:
        return self.env.contention[worker].network_factor(self.env.now)

    def _transfer(self, worker: int, nic: Any, node_nics: dict[int, Any]) -> Generator[Any, Any, None]:
        node = self.timing.node_of[worker]
        if node < 0:
            yield from self._cross(worker, nic, self._factor(worker))
            return
        queue = node_nics[node]
        if self.lanes:
            yield queue.request()
            yield from self._cross(worker, nic, self.timing.node_factor(node, self._factor))
            queue.release()
        else:
            with queue.request() as req:
                yield req
                yield from self._cross(worker, nic, self.timing.node_factor(node, self._factor))

    def _cross(self, worker: int, nic: Any, factor: float) -> Generator[Any, Any, None]:
        """The server's NIC (queued) and the node's NIC at once, then one latency."""
        env, timing = self.env, self.timing
        requested = env.now
        own_s = timing.own_s(worker, factor)
        if self.lanes:
            yield nic.request()
            yield env.timeout(timing.hold_s)
            nic.release()
        else:
            with nic.request() as req:
                yield req
                yield env.timeout(timing.hold_s)
        yield env.timeout(tail_s(requested, own_s, env.now, timing.latency_s))

    def push(self, worker: int) -> Generator[Any, Any, None]:
        """Send one gradient to the server (returns when it has arrived)."""
        yield from self._transfer(worker, self.nic_in, self.node_in)

    def pull(self, worker: int) -> Generator[Any, Any, None]:
        """Fetch the current weights from the server."""
        yield from self._transfer(worker, self.nic_out, self.node_out)

    def apply(self) -> Generator[Any, Any, None]:
        """Wait for the serial apply queue, then apply one gradient."""
        if self.lanes:
            yield self.applier.request()
            yield self.env.timeout(self.timing.apply_each_s)
            self.applier.release()
            return
        with self.applier.request() as req:
            yield req
            yield self.env.timeout(self.timing.apply_each_s)


def allreduce_plan(env: Any, config: AllReduceConfig) -> AllReducePlan:
    """The all-reduce over the scenario's nodes and links (``config.bandwidth_gbps`` sets every NIC)."""
    topo = topology_of(env.workers, nic_gbps=config.bandwidth_gbps, nic_latency_s=config.alpha_s)
    return AllReducePlan(topo, config.algorithm, config.chunk_share,
                         nccl=config.nccl.figures if config.nccl is not None else None, ring_latency=config.ring_latency)


def ring_allreduce_s(env: Any, plan: AllReducePlan) -> float:
    """Duration of one all-reduce among all workers starting now (their network contention now)."""
    now = env.now
    return plan.duration_s(env.gradient_bytes, [c.network_factor(now) for c in env.contention])
