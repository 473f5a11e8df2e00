"""Per-rank compute time of one training step, measured correctly on CPU and CUDA.

A step's *compute time* is what LB-BSP balances: from the moment the rank is handed its batch
(loading, forward, backward) until its **last gradient bucket is ready** — not until ``backward()``
returns. Under DDP the end of ``backward()`` includes waiting for the other ranks' all-reduce, so a
fast rank would measure the straggler's time and the imbalance would be invisible. The DDP
communication hook (:mod:`lbsim.runtime.ddp.hook`) calls :meth:`StepClock.mark` as each bucket becomes
ready; the last mark is the end of the rank's own work.

* CPU: ``time.perf_counter()`` at the start and at each mark (work on the calling thread is done).
* CUDA: kernels are asynchronous, so host clocks measure launch, not work. A ``torch.cuda.Event``
  is recorded on the current stream at the start and at each mark; the elapsed time
  (``end.synchronize(); start.elapsed_time(end)``) is the GPU's time from the start to the last
  bucket, host-side gaps (Python, data loading) included, as a rank's work should be.

Reading a CUDA time waits for the GPU to reach the step's last mark: a host-GPU synchronisation
that drains the launch queue. :meth:`StepClock.lap` therefore ends a step *without* reading it; the
:class:`Lap` is read (:meth:`Lap.seconds`) when a decision needs it — the balancer reads a window's
laps once per window (``decide_every`` steps), when the older ones are long done, so the clock
costs one synchronisation per window instead of one per step (benchmarks/bench_cuda_clock.py).
"""

from __future__ import annotations

import time
from typing import Any

import torch


class Lap:
    """One step's compute time, read on demand: a float on the CPU, an event pair on CUDA."""

    __slots__ = ("_s", "_start_ev", "_end_ev")

    def __init__(self, seconds: float | None = None, start_ev: Any = None, end_ev: Any = None) -> None:
        self._s, self._start_ev, self._end_ev = seconds, start_ev, end_ev

    def seconds(self) -> float:
        """The step's compute time (waits for the GPU to reach the step's last mark if it has not)."""
        if self._s is None:
            self._end_ev.synchronize()
            self._s = float(self._start_ev.elapsed_time(self._end_ev)) / 1000.0
            self._start_ev = self._end_ev = None
        return self._s


class StepClock:
    """Start/mark/read of one step's compute time on ``device`` (CPU or CUDA)."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.device = device
        self._start_s = 0.0
        self._last_s: float | None = None
        self._start_ev: Any = None
        self._last_ev: Any = None

    def start(self) -> None:
        """A step's compute begins: the wall clock now and, on CUDA, an event on the current stream."""
        self._start_s = time.perf_counter()
        self._last_s = None
        self._last_ev = None
        if self.cuda:
            self._start_ev = torch.cuda.Event(enable_timing=True)
            self._start_ev.record(torch.cuda.current_stream(self.device))

    def mark(self) -> None:
        """This rank's work so far is done (called from the communication hook, per bucket)."""
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record(torch.cuda.current_stream(self.device))
            self._last_ev = ev
        self._last_s = time.perf_counter()

    @property
    def started_s(self) -> float:
        """``time.perf_counter()`` at the current step's :meth:`start`."""
        return self._start_s

    @property
    def start_event(self) -> Any:
        """The CUDA event recorded at the current step's start (None on the CPU)."""
        return self._start_ev

    @property
    def marked(self) -> bool:
        """Whether the current step has reached a :meth:`mark` (a gradient bucket was ready)."""
        return self._last_s is not None

    def lap(self) -> Lap:
        """This step's compute time, start to last mark (to now if nothing was marked: a step
        without gradients), to be read later; on CUDA reading it is the only synchronisation."""
        if self.cuda and self._last_ev is not None:
            return Lap(start_ev=self._start_ev, end_ev=self._last_ev)
        end = self._last_s if self._last_s is not None else time.perf_counter()
        return Lap(end - self._start_s)

    def elapsed_s(self) -> float:
        """Start to last mark, read now (:meth:`lap` then :meth:`Lap.seconds`)."""
        return self.lap().seconds()
