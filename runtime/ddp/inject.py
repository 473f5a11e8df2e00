"""Emulated contention for a DDP rank: the runtime's :class:`lbsim.runtime.inject.Emulated`, applied per bucket.

The runtime's emulated mode stretches a compute step of ``d`` real seconds started at ``t`` to end
at ``compute_end(t, d)`` under the scenario's slowdown schedule (:mod:`lbsim.runtime.inject`). In a DDP
step the rank's work ends bucket by bucket, and the all-reduce of a ready bucket overlaps the rest
of backward, so the stretch is applied at every bucket: when a bucket becomes ready after ``d_k``
real seconds of work since the step started, the rank sleeps until ``compute_end(t, d_k)``. The
sleep blocks the autograd thread, so later buckets are delayed too, exactly as a processor
slowed by ``f`` would delay them, while the buckets already sent communicate meanwhile.
The CPU availability the CPU variant of LB-BSP reads is the schedule's ``1 / f`` (as in the
runtime's emulated mode).

A rank's ``d`` is its wall time of work by default. On a host with more runnable processes than
cores, wall time also holds the time the rank waited for a core, and stretching it multiplies that
wait by ``f`` too; ``work="cpu"`` counts the thread's CPU seconds instead (``time.thread_time``: CPU
tensors run forward, backward and the comm hooks on the calling thread), so a rank slowed ``f`` x
ends its compute at ``f`` times the work it did, however long it waited for a core (unless the
wait alone exceeds that: it never ends earlier than its real work).
"""

from __future__ import annotations

import time
from typing import Any

from lbsim.contention.model import WorkerContention
from lbsim.contention.sources import window

from ..inject import Emulated

WORK_CLOCKS = ("wall", "cpu")  # what a slowed rank's seconds of work are: its wall time, or its thread's CPU time


def constant_slowdown(factor: float) -> WorkerContention:
    """A worker slowed by ``factor`` from the start of the run, for ever."""
    return WorkerContention(compute=[window(0.0, None, factor)])


class SlowedRank:
    """One rank's emulated slowdown; ``begin`` at each step start, ``after_bucket`` at each ready bucket."""

    def __init__(self, cont: WorkerContention, clock_t0: float | None = None, work: str = "wall") -> None:
        if work not in WORK_CLOCKS:
            raise ValueError(f"work must be one of {', '.join(WORK_CLOCKS)}, got {work!r}")
        self.emu = Emulated(cont, time.monotonic() if clock_t0 is None else clock_t0)
        self.work = work
        self._start = 0.0
        self._slept = 0.0
        self._cpu_start = 0.0

    def restart(self, clock_t0: float | None = None) -> None:
        """Count the schedule's time from ``clock_t0`` (default: now), e.g. the ranks' common start."""
        self.emu.t0 = time.monotonic() if clock_t0 is None else clock_t0

    def begin(self) -> None:
        """A step starts: its compute is counted from now."""
        self._start = time.monotonic()
        self._slept = 0.0
        self._cpu_start = time.thread_time()

    def after_bucket(self) -> None:
        """Sleep until the emulated end of the step's compute so far: its ``real`` seconds of work (wall
        time since :meth:`begin` less what was slept, or with ``work="cpu"`` the thread's CPU seconds since
        :meth:`begin`) stretched by the slowdown schedule from the step's start
        (:meth:`lbsim.runtime.inject.Emulated.stretch`)."""
        now = time.monotonic()
        real = now - self._start - self._slept if self.work == "wall" else time.thread_time() - self._cpu_start
        self.emu.stretch(self._start - self.emu.t0, real, 1.0)
        self._slept += time.monotonic() - now

    def cpu_available(self) -> float:
        """The CPU share in (0, 1] the emulated contention leaves this rank now (what a resource reader sees)."""
        return self.emu.cpu_available(time.monotonic() - self.emu.t0)


def slowed_hook(inner: Any, slowed: SlowedRank | None) -> Any:
    """Wrap a DDP comm hook (e.g. ``default_hooks.allreduce_hook``) so that each bucket first pays the
    slowdown (None: no slowdown, the same hook on every rank)."""

    def hook(state, bucket):  # type: ignore[no-untyped-def]  # DDP checks annotations: none given
        if slowed is not None:
            slowed.after_bucket()
        return inner(state, bucket)

    return hook
