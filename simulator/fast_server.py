"""The parameter server on the fast loop: push, apply and pull as sub-generators of a process.

The round trip of :mod:`lbsim.network.parameter_server`, enacted on
:class:`lbsim.simulator.fast_loop.EventLoop` (its module docstring says why each is exact):

* a push or pull is one event, its arrival: on a shared node, first the node's NIC (a lane, held
  until the arrival; the node's slowdown is taken when it is granted), then the server's NIC in
  closed form — granted at ``max(t, previous release)``, released ``hold_s`` later — and the tail
  ``tail_s`` (the rest of the worker's own link, + latency); the arrival's parent is the release;
* an apply is one event, its end: the apply queue in closed form, ``apply_each_s`` after its grant
  (the parent); with ``apply_s = 0`` a lane, as in SimPy (grant, zero-delay hold, release).

A process calls ``now = yield from server.push(p, w, now)`` (``pull``, ``apply`` likewise) where
the event path calls ``yield from ps.push(w)``; the sub-generator returns the time the process
resumes at.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from heapq import heappush

from lbsim.contention.model import WorkerContention, combined_factor
from lbsim.contention.sources import StepSource
from lbsim.network.parameter_server import link_s

from .fast_loop import EventLoop, node_factor


def own_link_of(contention: WorkerContention, gradient_bytes: float, link_bytes_per_s: float) -> Callable[[float], float]:
    """``now -> link_s(S, F(now), B)``: a worker's own-link time for a transfer requested at ``now``,
    one call. ``F`` is :meth:`lbsim.contention.model.WorkerContention.network_factor`; for step
    sources the segment's answer is remembered while the requests fall inside it (as
    ``network_factor`` itself does: the same float), for other sources it is asked every time.
    A primed generator's ``send``, its state in one frame (:mod:`lbsim.simulator.fast_compute` says why)."""
    links = _own_links(contention, gradient_bytes, link_bytes_per_s)
    next(links)
    return links.send


def _own_links(contention: WorkerContention, gradient_bytes: float, link_bytes_per_s: float) -> Generator[float, float, None]:
    """Sent each transfer's request time, in non-decreasing order; yields its own-link time."""
    sources, net = contention.network, contention.network_factor
    steps = all(isinstance(s, StepSource) for s in sources)
    since, until, own = math.inf, -math.inf, 0.0  # the remembered segment and its own-link time: none yet
    answer = 0.0
    while True:
        now = yield answer
        if since <= now < until:
            answer = own
        elif not steps:
            answer = link_s(gradient_bytes, net(now), link_bytes_per_s)
        else:
            f, until = combined_factor(sources, now)
            since = now
            answer = own = link_s(gradient_bytes, f, link_bytes_per_s)


class FastServer:
    """The server's queues and each worker's link on one :class:`EventLoop`.

    ``push(p, w, now)``, ``pull(p, w, now)`` and ``apply(p, now)`` are sub-generators of process
    ``p`` (for worker ``w``); each returns the time the process resumes at. They are closures over
    the loop's state (for speed: no attribute look-ups on the hot path).
    """

    def __init__(self, loop: EventLoop) -> None:  # noqa: C901, PLR0915 - the three closures, written out
        timing, contention = loop.timing, loop.env.contention
        first = loop.add_queues(3)  # the server's inbound and outbound NICs, its apply queue
        nic_in, nic_out, applier = first, first + 1, first + 2
        apply_lane = loop.add_lanes(1) if timing.apply_each_s == 0.0 else -1  # no hold: a lane
        nodes = sorted(timing.members)
        first = loop.add_lanes(2 * len(nodes))  # each shared node's NIC, inbound then outbound
        lane = {node: first + 2 * k for k, node in enumerate(nodes)}
        node_lane = [lane[node] if node >= 0 else -1 for node in timing.node_of]
        # each worker's own-link time when its network is never slowed (-1: ask its contention)
        own_fixed = []  # (alone on its node: a shared node's slowdown is its workers' largest, asked each time)
        for w, c in enumerate(contention):
            constant = c.network_constant()
            own_fixed.append(timing.own_s(w, constant) if constant is not None and node_lane[w] < 0 else -1.0)
        grad, links, node_of = timing.gradient_bytes, timing.link_bytes_per_s, timing.node_of
        own_link = [own_link_of(c, grad, links[w]) for w, c in enumerate(contention)]  # alone on its node
        hold_s, apply_s, latency_s = timing.hold_s, timing.apply_each_s, timing.latency_s
        free, fifo, times, slot, parent_of = loop.free, loop.fifo, loop.times, loop.slot, loop.parent_of
        collide, request, release, hop, hold_end = loop.collide, loop.request, loop.release, loop.hop, loop.hold_end

        def transfer(p: int, w: int, nic: int, node: int, now: float) -> Generator[float, float, float]:
            own_s = own_fixed[w]
            if own_s >= 0:
                pass
            elif node >= 0:  # a shared node: its NIC first, held to the arrival
                now = yield from request(p, node, now)
                own_s = link_s(grad, node_factor(timing, node_of[w], contention, now), links[w])
            else:
                own_s = own_link[w](now)
            f = free[nic]
            granted = f if f > now else now
            released = free[nic] = granted + hold_s
            left = now + own_s - released  # tail_s, written out: what is left of the own link, + latency
            t = released + ((left if left > 0.0 else 0.0) + latency_s)
            if t == released:  # no tail: the arrival is a zero-delay event after the hold's end
                now = yield from hold_end(p, released, granted, now)
            elif not fifo and times[0] > t:  # EventLoop.at, written out
                now = t
            else:
                if t in slot:
                    collide(t, released, 2 * p)
                else:
                    slot[t] = 2 * p
                    heappush(times, t)
                    parent_of[p] = released
                now = yield now
            if node >= 0:
                release(node)
            return now

        def push(p: int, w: int, now: float) -> Generator[float, float, float]:
            """Process ``p`` sends worker ``w``'s gradient; returns the time it has arrived."""
            return transfer(p, w, nic_in, node_lane[w], now)

        def pull(p: int, w: int, now: float) -> Generator[float, float, float]:
            """Process ``p`` fetches worker ``w``'s weights; returns the time they have arrived."""
            node = node_lane[w]
            return transfer(p, w, nic_out, node + 1 if node >= 0 else -1, now)

        def apply(p: int, now: float) -> Generator[float, float, float]:
            """Process ``p``'s gradient waits for the serial apply queue and is applied; returns the time."""
            if apply_lane >= 0:  # no hold time: SimPy's grant, zero-delay hold and release
                now = yield from request(p, apply_lane, now)
                now = yield from hop(p, now)
                release(apply_lane)
                return now
            f = free[applier]
            granted = f if f > now else now
            t = free[applier] = granted + apply_s
            if not fifo and times[0] > t:  # EventLoop.at, written out
                return t
            if t in slot:
                collide(t, granted, 2 * p)
            else:
                slot[t] = 2 * p
                heappush(times, t)
                parent_of[p] = granted
            return (yield now)

        self.push, self.pull, self.apply = push, pull, apply
        self.nic_in, self.nic_out, self.applier, self.apply_lane = nic_in, nic_out, applier, apply_lane
        self.own_fixed, self.node_lane, self.own_link = own_fixed, node_lane, own_link
