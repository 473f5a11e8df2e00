"""The fast path's event loop: SimPy's order of events, with the server's queues in closed form.

**The queues in closed form.** A FIFO queue of capacity one whose holder keeps it a known time
``h > 0`` (the server's NICs, ``hold_s``; its apply queue, ``apply_each_s``) needs no events of
its own: the request made at ``t`` after the previous holder's release ``r`` is granted at
``max(t, r)`` and released at ``max(t, r) + h`` — the times
:class:`lbsim.simulator.network.Lane` produces (a request is granted at once if the queue is
free, else when the release ahead of it is processed, i.e. at the release's time; the floats are
the same sums). So a push is one event, its arrival at ``release + tail_s``, where the event path
has four or five (grant, hold end, the release's grant event, the next holder's grant, tail end);
likewise the apply and the pull. Queues held for a time known only later (a node's NIC, held for a
whole transfer) or for no time (an apply queue with ``apply_s = 0``) are *lanes*: the Lane's own
rules, its grant and release events included, as zero-delay events.

**The order of events.** SimPy processes events by ``(time, priority, id)``, ids in the order they
were scheduled, i.e. in the order of the events whose processing scheduled them (their *parents*).
Here each event is kept with the time its SimPy counterpart fires and the time of that
counterpart's parent — for a compute end the event that started the iteration (processed here
too), for an arrival the server NIC's release (an event only the event path has), for an apply
end the apply queue's grant. Events at different times go in time order, as in SimPy; at one
time, the one whose parent came earlier goes first, as in SimPy; an event whose parent came
before the current instant goes before the zero-delay events of the instant (they were scheduled
later), as in SimPy. What the loop cannot tell from these is the order of two events at one time
with parents at one time (unless both parents are events it processed itself, compute ends: then
the ids order them as SimPy's do), and where an event whose parent is at its own time falls among
the zero-delay events of that instant. Those *ties* need equal floats from different sums; where
one arises (identical workers without jitter, zero latencies), the loop raises :class:`Tie`
before processing the event, and the run is redone on the event path
(:func:`lbsim.simulator.run.simulate`). A transfer whose tail is zero (no latency, the own link
done before the server's NIC) ends one zero-delay event after its hold, as in SimPy: the loop
keeps the hold's end as the event then (:meth:`EventLoop.hold_end`).

Zero-delay events — a process the gate releases or another process wakes, a lane's grant and
release events, a compute of zero length — go to a FIFO processed after the heap's events at the
current time, as SimPy's. *Run-ahead*: when a process's next event would be processed next anyway
(nothing in the FIFO, the next timed event strictly later), the process goes on at once. Events
with no effect are not scheduled (a process's start and end, the budget's process start, the
``finished`` event). After the end the event path still processes the events due at that instant;
none of them records, updates or asks the scheme anything, so the loop stops at the end and throws
:class:`RunEnded` into every process, in order, for the rows the end cuts.

A process is a generator: it schedules its own next event (:meth:`EventLoop.at`'s rules, written
out where it waits, for speed) and yields the current time (its own: it may have run ahead); it is
sent the time it resumes at; it raises :class:`Stopped` when the final update was made.
"""

from __future__ import annotations

import math
from bisect import insort
from collections import deque
from collections.abc import Callable, Generator
from heapq import heappop, heappush
from operator import itemgetter
from typing import Any

from lbsim.network.parameter_server import ServerTiming

from .env import SimEnv
from .network import server_timing

_PARENT = itemgetter(0)  # an event's parent time in a list of (parent time, code)

Process = Generator[float, float, None]
"""A process of the fast loop (see the module docstring)."""


class Stopped(Exception):
    """Raised by a process when the run ends (the final update was made), at ``time_s``."""

    def __init__(self, time_s: float) -> None:
        super().__init__(time_s)
        self.time_s = time_s


class Tie(Exception):
    """Two events at one instant whose order SimPy decides by what the fast loop does not track."""


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
    """The timed events, the FIFO, the clock and the queues of one run (see the module docstring).

    Timed events: a heap of distinct times (``times``) and, for each, its event (``slot[t]``: the
    event's code); several events at one instant are listed in ``crowd[t]`` as ``(parent time,
    code)`` in the order they were scheduled. Process ``p``'s event codes are ``2 p + 1`` for an
    event whose parent the loop processed (a compute end) and ``2 p`` for the others;
    ``parent_of[p]`` is the parent time of its pending event (a process has at most one). The
    time budget and the end of the events (the sentinel at ``inf``) are processes of the loop's
    own, after the run's. The FIFO holds process indices and lanes' grant events (``~lane``).
    State a process uses directly, for speed:

    * to schedule its next event at ``t`` (:meth:`at`): run ahead if ``not fifo and times[0] > t``
      (its clock moves to ``t``); else, for a zero delay of a compute end, ``fifo.append(p)``; else,
      if ``t in slot``, :meth:`collide`, otherwise ``slot[t] = code``, ``heappush(times, t)`` and
      ``parent_of[p] = parent time``, and yield the current time;
    * ``free[q]``: when closed-form queue ``q`` is next free;
    * a lane ``q``: :meth:`request` (``yield from``) and :meth:`release`.
    """

    def __init__(self, env: SimEnv, processes: int) -> None:
        self.env = env
        self.timing = server_timing(env, env.scenario.network)  # type: ignore[arg-type]
        self.fifo: deque[int] = deque()  # zero-delay events at the current time, in order
        self.processes = processes
        self.times: list[float] = [math.inf]  # the sentinel's: no event left
        self.slot: dict[float, int] = {math.inf: 2 * (processes + 1) + 1}
        self.crowd: dict[float, list[tuple[float, int]]] = {}
        self.parent_of = [0.0] * (processes + 2)  # the run's processes, the budget, the sentinel
        self.free: list[float] = []  # closed-form queues: next free
        self.busy: list[bool] = []  # lanes
        self.waiting: list[deque[int]] = []
        self.now = 0.0

    def add_queues(self, count: int) -> int:
        """``count`` closed-form queues; returns the first one's index."""
        self.free += [0.0] * count
        return len(self.free) - count

    def add_lanes(self, count: int) -> int:
        """``count`` lanes (:class:`lbsim.simulator.network.Lane`); returns the first one's index."""
        self.busy += [False] * count
        self.waiting += [deque() for _ in range(count)]
        return len(self.busy) - count

    # -- scheduling -----------------------------------------------------------------------------
    def at(self, t: float, parent_s: float, code: int, now: float) -> bool:
        """Schedule process ``code >> 1``'s next event at ``t`` (the clock at ``now``); True: run ahead
        (it is next anyway: the process goes on at ``t`` without yielding)."""
        if not self.fifo and self.times[0] > t:
            return True
        if t == now and code & 1:
            self.fifo.append(code >> 1)
        elif t in self.slot:
            self.collide(t, parent_s, code)
        else:
            self.slot[t] = code
            heappush(self.times, t)
            self.parent_of[code >> 1] = parent_s
        return False

    def collide(self, t: float, parent_s: float, code: int) -> None:
        """A second event at ``t``: the instant's events are listed in ``crowd[t]`` by parent time,
        in the order scheduled among equal parents (SimPy's order where it can be told)."""
        events = self.crowd.get(t)
        if events is None:
            first = self.slot[t]
            events = self.crowd[t] = [(self.parent_of[first >> 1], first)]
        if parent_s >= events[-1][0]:  # the common case: scheduled in the order of their parents
            events.append((parent_s, code))
        else:
            insort(events, (parent_s, code), key=_PARENT)  # after equal parents: the order scheduled

    def hop(self, p: int, now: float) -> Generator[float, float, float]:
        """One zero-delay event of process ``p`` (SimPy's ``timeout(0)``); returns the time it resumes."""
        if self.fifo or self.times[0] <= now:
            self.fifo.append(p)
            now = yield now
        return now

    def hold_end(self, p: int, released: float, granted: float, now: float) -> Generator[float, float, float]:
        """A transfer with no tail: its hold ends at ``released`` (held since ``granted``), its
        arrival is one zero-delay event later (SimPy's ``timeout(0)`` made at the hold's end)."""
        now = released if self.at(released, granted, 2 * p, now) else (yield now)
        return (yield from self.hop(p, now))

    # -- lanes (Lane's rules, its events as zero-delay events) ----------------------------------
    def request(self, p: int, q: int, now: float) -> Generator[float, float, float]:
        """Process ``p`` waits for lane ``q`` (:meth:`Lane.request`); returns the time it is granted."""
        busy, waiting = self.busy, self.waiting
        if busy[q] or waiting[q]:
            queue = waiting[q]
            queue.append(p)
            if not busy[q]:  # released, its grant event not processed yet: the head goes now
                busy[q] = True
                self.fifo.append(queue.popleft())
            return (yield now)
        busy[q] = True  # free: granted, a zero-delay event (timeout(0))
        return (yield from self.hop(p, now))

    def release(self, q: int) -> None:
        """Release lane ``q`` (:meth:`Lane.release`): its head is granted at the release's event."""
        self.busy[q] = False
        if self.waiting[q]:
            self.fifo.append(~q)

    # -- the loop -------------------------------------------------------------------------------
    def run(self, processes: list[Process]) -> None:
        """Run ``processes`` (started in order at 0, then the budget) until one stops the run or the budget does."""
        budget_s = self.env.run_end.budget_s
        fifo, times, slot, crowd = self.fifo, self.times, self.slot, self.crowd
        busy, waiting, parent_of = self.busy, self.waiting, self.parent_of
        popleft, slot_pop = fifo.popleft, slot.pop
        sends: list[Callable[[Any], Any]] = [p.send for p in processes] + [_budget().send, _nothing().send]
        sends[-2](None)
        sends[-1](None)
        heappush(times, -math.inf)  # while they start, none may run ahead
        slot[-math.inf] = 0
        for send in sends[:-2]:  # their start events: each runs to its first wait
            send(None)
            send(0.0)
        heappop(times)
        del slot[-math.inf]
        if budget_s is not None:  # scheduled after the processes' first events, with a parent at 0
            t, budget = 0.0 + budget_s, 2 * len(processes) + 1
            if t in slot:
                self.collide(t, 0.0, budget)
            else:
                slot[t] = budget
                heappush(times, t)
        now = 0.0
        try:
            while True:
                if fifo and times[0] != now:
                    code = popleft()
                    if code < 0:  # a lane's release event: its head is granted if the lane is still free
                        q = ~code
                        if not busy[q] and waiting[q]:
                            busy[q] = True
                            fifo.append(waiting[q].popleft())
                        continue
                else:
                    now = heappop(times)
                    code = slot_pop(now) >> 1
                    if crowd and now in crowd:
                        code = self._first(now, crowd.pop(now)) >> 1
                    elif fifo and parent_of[code] == now:
                        raise Tie(f"an event at {now!r} s among zero-delay ones")
                now = sends[code](now)  # the process's clock when it waits (it may have run ahead)
        except Stopped as stop:
            self.now = stop.time_s

    def _first(self, t: float, events: list[tuple[float, int]]) -> int:
        """The first of several events at ``t`` (listed by :meth:`collide`, in SimPy's order), or
        :class:`Tie` if it cannot be told."""
        (p0, c0), (p1, c1) = events[0], events[1]
        if p0 == p1 and not c0 & c1 & 1:
            raise Tie(f"two events at {t!r} s whose order the fast loop cannot tell")
        if self.fifo and p0 == t:
            raise Tie(f"an event at {t!r} s among zero-delay ones")
        self.slot[t] = c1
        self.parent_of[c1 >> 1] = p1  # it is the slot's event now (collide did not store its parent)
        if len(events) > 2:
            del events[0]
            self.crowd[t] = events
        heappush(self.times, t)
        return c0

    def end(self, processes: list[Process]) -> None:
        """Tell every process, in order, that the run ended at :attr:`now` (:class:`RunEnded`)."""
        for p in processes:
            try:
                p.throw(RunEnded(self.now))
            except (StopIteration, RunEnded):
                pass


def _budget() -> Generator[float, float, None]:
    """The time budget's process: at its time, the run ends (before every later-scheduled event then)."""
    now = yield 0.0
    raise Stopped(now)


def _nothing() -> Generator[float, float, None]:
    """The sentinel's process, at ``inf``: no event left, the run never ended."""
    yield 0.0
    raise RuntimeError('No scheduled events left but "until" event was not triggered')
