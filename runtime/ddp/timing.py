"""Per-rank compute time of one training step, measured correctly on CPU and CUDA.

A step's *compute time* is what LB-BSP balances: from the moment the rank is handed its batch
(loading, forward, backward) until its **last gradient bucket is ready** — not until ``backward()``
returns. Under DDP the end of ``backward()`` includes waiting for the other ranks' all-reduce, so a
fast rank would measure the straggler's time and the imbalance would be invisible. The DDP
communication hook (:mod:`lbsim.runtime.ddp.hook`) calls :meth:`StepClock.mark` as each bucket becomes
ready; the last mark is the end of the rank's own work.

* CPU: ``time.perf_counter()`` at the start and at each mark (work on the calling thread is done).
* CUDA: kernels are asynchronous, so host clocks measure launch, not work. A ``torch.cuda.Event``
  is recorded on the current stream at the start and at each mark; the elapsed time is read
  (``end.synchronize(); start.elapsed_time(end)``) only when the next decision needs it, after the
  optimizer step, so measuring adds no synchronisation inside the step.
"""

from __future__ import annotations

import time
from typing import Any

import torch


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
    def marked(self) -> bool:
        return self._last_s is not None

    def elapsed_s(self) -> float:
        """Start to last mark (start to now if nothing was marked: a step without gradients)."""
        if self.cuda and self._last_ev is not None:
            self._last_ev.synchronize()
            return float(self._start_ev.elapsed_time(self._last_ev)) / 1000.0
        end = self._last_s if self._last_s is not None else time.perf_counter()
        return end - self._start_s
