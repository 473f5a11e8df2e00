"""The parameter server's gate for asynchronous schemes: clocks, held workers, releases.

An :class:`~lbsim.schemes.base.AsyncScheme` decides whether a worker may start its next
iteration (SSP's staleness bound, DSSP's controller, ElasticBSP's barrier); an engine holds the
worker until the answer is yes. The bookkeeping around that decision is the same in every engine
and lives here, so the simulator and the torch runtime enact the same rule in the same order:

* :meth:`Gate.push` — the server applied a push of worker ``w`` at ``time_s``: its clock advances,
  the scheme is told (``on_push``), and every held worker is asked again, in the order they were
  held; those now admitted are returned (in that order) and are no longer held.
* :meth:`Gate.admit` — may ``w`` start its next iteration now? If not, it is held until a later
  push releases it.
  It is asked right after ``w``'s own push; with a scheme that declares ``admits_at_push`` (its
  ``on_push`` returns what ``may_start`` would answer right after it), the answer is ``on_push``'s
  and ``may_start`` is not asked.

With a scheme that declares ``ignores_push`` (its ``on_push`` decides and records nothing) the
gate does not call ``on_push``. With one that declares ``admits_at_push``, :attr:`Gate.decided`
is set and :attr:`Gate.go` holds the pusher's answer after :meth:`Gate.push`: an engine may skip
:meth:`Gate.admit` when ``go`` is true (``admit`` would answer True and change nothing).

With a scheme that declares ``never_holds`` (:attr:`Gate.free`), an engine may skip both calls:
every worker is admitted and no push releases anyone (the gate's clocks then stay unread). With
one that declares ``reads_clocks = False`` the gate keeps no clocks (they stay 0).

With a scheme that has ``gate_key(clocks)`` (its answers for a held worker can only change when
the key does), held workers are asked again only when the key has changed since they were all
last asked: an O(1) check per push instead of one call per held worker.
"""

from __future__ import annotations

from typing import Any

from lbsim.schemes.base import Clocks


class Gate:
    """Every worker's clock and the workers an asynchronous scheme currently holds."""

    __slots__ = ("scheme", "clocks", "held", "free", "admit", "go", "decided", "_key_of", "_held_key", "_ticks",
                 "_on_push", "_may_start")

    def __init__(self, scheme: Any, workers: int) -> None:
        self.scheme = scheme
        self.clocks = Clocks(workers)  # pushes applied per worker, with O(1) min / max
        self.held: list[int] = []  # held workers, first held first
        self.free = bool(getattr(scheme, "never_holds", False))  # never holds anyone: push and admit may be skipped
        self._key_of = getattr(scheme, "gate_key", None)
        # the gate key at which every held worker was last asked (None: unknown or mixed)
        self._held_key: Any = None
        self._ticks = bool(getattr(scheme, "reads_clocks", True))  # False: the scheme never reads the clocks
        # None: the scheme declares that on_push decides and records nothing (not called)
        self._on_push = None if getattr(scheme, "ignores_push", False) else scheme.on_push
        self._may_start = scheme.may_start
        self.go: Any = None  # what the scheme's on_push returned at the last push
        # the scheme admits_at_push: after push, a true ``go`` is admit(pusher)'s answer (True, nothing held)
        self.decided = bool(getattr(scheme, "admits_at_push", False))
        # admit(worker): may ``worker`` start its next iteration now? If not, it is held (see push)
        self.admit = self._admit_decided if self.decided else self._admit_asked

    def push(self, worker: int, time_s: float) -> list[int]:
        """A push of ``worker`` was applied at ``time_s``; returns the held workers it releases."""
        clocks = self.clocks
        if self._ticks:  # Clocks.tick, written out (it runs at every push); the rare minimum move stays there
            c = clocks[worker]
            clocks[worker] = c + 1
            if c == clocks.high:
                clocks.high = c + 1
            if c == clocks.low:
                clocks.tick_low(c)
        if self._on_push is not None:
            self.go = self._on_push(worker, time_s, clocks)  # with admits_at_push: the pusher's answer
        if not self.held:
            return []
        key = None
        if self._key_of is not None:
            key = self._key_of(clocks)
            if key == self._held_key:
                return []  # every held worker was asked at this key: no answer can have changed
        may_start = self._may_start
        released: list[int] = []
        still: list[int] = []
        for v in self.held:
            (released if may_start(v, clocks) else still).append(v)
        self.held = still
        self._held_key = key
        return released

    def _admit_asked(self, worker: int) -> bool:
        """May ``worker`` start its next iteration now? If not, it is held (see :meth:`push`)."""
        if self._may_start(worker, self.clocks):
            return True
        if self._key_of is not None:
            key = self._key_of(self.clocks)
            self._held_key = key if not self.held or self._held_key == key else None
        self.held.append(worker)
        return False

    def _admit_decided(self, worker: int) -> bool:
        """:meth:`_admit_asked` for a scheme that ``admits_at_push``: the answer its ``on_push`` gave."""
        if self.go:
            return True
        self._hold(worker)
        return False

    def _hold(self, worker: int) -> None:
        """Hold ``worker`` (refused just now), keeping the gate key at which the held were all asked
        (:meth:`_admit_asked`'s hold)."""
        if self._key_of is not None:
            key = self._key_of(self.clocks)
            self._held_key = key if not self.held or self._held_key == key else None
        self.held.append(worker)

    def release_all(self) -> list[int]:
        """Every held worker, in the order held (the run is over); none is held afterwards."""
        out, self.held = self.held, []
        return out
