"""The fast path's event loop: SimPy's order of events, for plain generator processes and FIFO queues.

SimPy processes events by ``(time, priority, id)``, ids in the order events were scheduled. Every
event here is scheduled at the point of the event path where its SimPy counterpart is, so ids keep
their relative order (only the order matters, so an id need not be SimPy's own number). A process
is a generator that yields what its SimPy twin waits for: the absolute time of its next event (a
timeout of ``d`` made at ``t`` is the time ``t + d``, the float SimPy computes), a queue, or
nothing (:data:`WAIT`: the gate holds it; :data:`STOP`: the run ends); it is sent the time at which
it resumes. Three rules make it cheap:

* *zero-delay events* (a free queue granted at once — SimPy's ``timeout(0)`` —, a queued request
  granted, a process released by another, a queue's release event) are scheduled at the current
  time with a newer id than every event already waiting at that time: they go to a FIFO processed
  after the heap's events at the current time — the same order, with no heap operation;
* *run-ahead*: when the event a process is about to schedule would be processed next anyway
  (nothing in the FIFO, the heap's next event strictly later), the process goes on at once —
  what SimPy would do next, without the round trip through the queue;
* *events with no effect* are not scheduled at all (a process's start and end, the budget's
  process start, the ``finished`` event): removing them leaves the others' order unchanged.

The queues follow :class:`lbsim.simulator.network.Lane` to the event: a request is granted at
once if the queue is free and nobody waits, else when the release ahead of it is processed (a
release with a waiting queue schedules a zero-delay grant event); a request made between a release
and its grant event, with the queue free, grants the head on the spot. The processes start at 0
in order (each runs to its first yield, as SimPy's start events), then the time budget's event is
scheduled (the event path's budget process starts after the drivers'); the budget ends the run
before any event at its time scheduled after it. After the end the event path still processes the
events due at that instant; none of them records, updates or asks the scheme anything, so the loop
stops at the end and throws :class:`RunEnded` into every process, in order, for the rows the end
cuts.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Generator
from heapq import heappop, heappush
from typing import Any

from lbsim.network.parameter_server import ServerTiming
from lbsim.simulator.env import SimEnv
from lbsim.simulator.network import server_timing

WAIT = -1
"""Yielded by a process: wait until something else resumes it (a queue's grant is not this: yield the queue)."""
STOP = -2
"""Yielded by a process: the run ends now (the final update was made)."""
_BUDGET = -(1 << 40)  # the budget's event
_NOTHING = -(1 << 41)  # the heap's sentinel: no event left

Process = Generator[float | int, float, None]
"""A process of the fast loop: yields the absolute time of its next event (a timeout: a float),
a queue to wait for (its index: an int >= 0), :data:`WAIT` or :data:`STOP`; is sent the time at
which it resumes."""


class RunEnded(Exception):
    """Thrown into every process once the run has ended, in process order: an iteration the end
    cuts records its row (the event path's ``SimEnv.finish``)."""

    def __init__(self, time_s: float) -> None:
        super().__init__(time_s)
        self.time_s = time_s


def node_factor(timing: ServerTiming, node: int, contention: Any, now: float) -> float:
    """A shared node's network slowdown at ``now`` (:meth:`ServerTiming.node_factor`)."""
    return timing.node_factor(node, lambda m: contention[m].network_factor(now))


class EventLoop:
    """SimPy's order of events for generator processes, with FIFO queues (see the module docstring).

    A process's index is its event code; a queue's grant event is the code ``~queue``. The state is
    public, so that a process can act without a round trip through the loop:

    * release queue ``q``: ``busy[q] = False`` and, if ``waiting[q]``, ``fifo.append(~q)``
      (:meth:`lbsim.simulator.network.Lane.release`); make a process ``v`` go on (the gate
      releases it): ``fifo.append(v)``;
    * run ahead: a timeout ending at ``t`` needs no yield when ``not fifo and heap[0][0] > t``
      (it would be the next event): the process sets ``clock[0] = t`` and goes on; a request of a
      free queue (``not busy[q] and not waiting[q]``) under the same test with ``t = now`` is
      granted by setting ``busy[q] = True``.
    """

    def __init__(self, env: SimEnv) -> None:
        self.env = env
        self.timing = server_timing(env, env.scenario.network)  # type: ignore[arg-type]
        self.fifo: deque[int] = deque()  # zero-delay events at the current time, in order
        self.heap: list[tuple[float, int, int]] = [(math.inf, 0, _NOTHING)]  # (time, id, code); the sentinel
        self.clock = [0.0]  # the current time (a process that runs ahead moves it)
        self.busy: list[bool] = []
        self.waiting: list[deque[int]] = []
        self.now = 0.0

    def add_queues(self, count: int) -> int:
        """``count`` new FIFO queues of capacity one; returns the first one's index."""
        first = len(self.busy)
        self.busy += [False] * count
        self.waiting += [deque() for _ in range(count)]
        return first

    def run(self, processes: list[Process]) -> None:  # noqa: C901, PLR0912 - the loop, inlined for speed
        """Run ``processes`` (started in order at 0, then the budget) until one yields STOP or the budget."""
        budget_s = self.env.run_end.budget_s
        fifo, busy, waiting, clock = self.fifo, self.busy, self.waiting, self.clock
        popleft, fifo_add = fifo.popleft, fifo.append
        sends: list[Callable[[Any], Any]] = [p.send for p in processes]
        heap = self.heap
        eid = 1
        now = 0.0
        heappush(heap, (-math.inf, 0, _NOTHING))  # while they start, no process may run ahead
        for code, send in enumerate(sends):  # their start events: each runs to its first yield
            send(None)
            cmd = send(0.0)
            if cmd.__class__ is float:
                if cmd == now:
                    fifo_add(code)
                else:
                    heappush(heap, (cmd, eid, code))
                    eid += 1
            elif cmd >= 0:
                raise ValueError("a process must not ask for a queue when it starts")
        heappop(heap)
        if budget_s is not None:
            heappush(heap, (0.0 + budget_s, eid, _BUDGET))
            eid += 1
        while True:
            if fifo and heap[0][0] != now:
                code = popleft()
            else:
                now, _, code = heappop(heap)
                clock[0] = now
            if code < 0:
                if code == _BUDGET:
                    break
                if code == _NOTHING:
                    raise RuntimeError('No scheduled events left but "until" event was not triggered')
                q = ~code  # a queue's release event: grant its head if the queue is still free
                if not busy[q] and waiting[q]:
                    busy[q] = True
                    fifo_add(waiting[q].popleft())
                continue
            send = sends[code]
            while True:  # this process until it waits; at once while its next event comes first
                cmd = send(now)
                now = clock[0]  # moved if the process ran ahead
                if cmd.__class__ is float:  # a timeout, ending at cmd
                    if cmd == now:  # zero delay (or too small to move the clock): after the FIFO's
                        if not fifo and heap[0][0] > now:
                            continue
                        fifo_add(code)
                        break
                    if not fifo and heap[0][0] > cmd:  # next anyway: run ahead
                        now = clock[0] = cmd
                        continue
                    heappush(heap, (cmd, eid, code))
                    eid += 1
                    break
                if cmd >= 0:  # request queue cmd (Lane.request)
                    if not busy[cmd] and not waiting[cmd]:
                        busy[cmd] = True
                        if not fifo and heap[0][0] > now:
                            continue
                        fifo_add(code)
                        break
                    q_ = waiting[cmd]
                    q_.append(code)
                    if not busy[cmd]:  # released, its grant event not processed yet: the head goes now
                        busy[cmd] = True
                        fifo_add(q_.popleft())
                    break
                break  # WAIT or STOP
            if cmd == STOP:
                break
        self.now = now

    def end(self, processes: list[Process]) -> None:
        """Tell every process, in order, that the run ended at :attr:`now` (:class:`RunEnded`)."""
        for p in processes:
            try:
                p.throw(RunEnded(self.now))
            except (StopIteration, RunEnded):
                pass
