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
* :meth:`Gate.push_admit` — both, for a push after which the worker goes on (not the run's final
  update): the released workers, and :attr:`Gate.refused` tells whether ``w`` itself is now held.
  With a scheme that declares ``admits_at_push`` (its ``on_push`` returns what ``may_start`` would
  answer right after it), the answer is ``on_push``'s and ``may_start`` is not asked for ``w``.

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

    __slots__ = ("scheme", "clocks", "held", "free", "refused", "push_admit", "_key_of", "_held_key", "_ticks", "_tick",
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
        self._tick, self._on_push, self._may_start = self.clocks.tick, scheme.on_push, scheme.may_start
        self.refused = False  # whether the worker of the last push_admit is held
        self.push_admit = self._decided_push if getattr(scheme, "admits_at_push", False) else self._push_then_admit

    def _push_then_admit(self, worker: int, time_s: float) -> list[int]:
        """:meth:`push`, then :meth:`admit` (its answer in :attr:`refused`); returns the released workers."""
        released = self.push(worker, time_s)
        self.refused = not self.admit(worker)
        return released

    def _decided_push(self, worker: int, time_s: float) -> list[int]:
        """:meth:`_push_then_admit` for a scheme whose ``on_push`` answers ``may_start`` for ``worker``
        (:meth:`push`'s re-ask, :meth:`admit`'s hold and :meth:`Clocks.tick` written out: this runs at
        every push; tests/test_fast_ps.py holds it to push, then admit)."""
        clocks = self.clocks
        if self._ticks:  # Clocks.tick
            c = clocks[worker]
            clocks[worker] = c + 1
            if c == clocks.high:
                clocks.high = c + 1
            if c == clocks.low:
                clocks.tick_low(c)
        go = self._on_push(worker, time_s, clocks)
        held = self.held
        key_of = self._key_of
        if key_of is None:
            released = self._reask(clocks) if held else []
        else:
            key = key_of(clocks)
            released = self._reask(clocks) if held and key != self._held_key else []
            if not go:  # _hold, with the key just computed (nothing has changed it)
                held = self.held
                self._held_key = key if not held or self._held_key == key else None
        if go:
            self.refused = False
        else:
            self.held.append(worker)
            self.refused = True
        return released

    def push(self, worker: int, time_s: float) -> list[int]:
        """A push of ``worker`` was applied at ``time_s``; returns the held workers it releases."""
        if self._ticks:
            self._tick(worker)
        clocks = self.clocks
        self._on_push(worker, time_s, clocks)
        if not self.held:
            return []
        return self._reask(clocks)

    def _reask(self, clocks: Clocks) -> list[int]:
        """Ask every held worker again (unless the gate key says no answer can have changed); the released."""
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

    def admit(self, worker: int) -> bool:
        """May ``worker`` start its next iteration now? If not, it is held (see :meth:`push`)."""
        if self._may_start(worker, self.clocks):
            return True
        self._hold(worker)
        return False

    def _hold(self, worker: int) -> None:
        """Hold ``worker`` (refused just now), keeping the gate key at which the held were all asked."""
        if self._key_of is not None:
            key = self._key_of(self.clocks)
            self._held_key = key if not self.held or self._held_key == key else None
        self.held.append(worker)

    def release_all(self) -> list[int]:
        """Every held worker, in the order held (the run is over); none is held afterwards."""
        out, self.held = self.held, []
        return out
