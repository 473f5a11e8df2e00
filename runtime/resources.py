"""Resource readings a real worker can take, and pinning a rank to its cores.

``cpu_available`` (what :class:`~lbsim.schemes.base.WorkerObservation` carries to the sizing code)
is the share of the worker's processor that co-located load leaves it, in (0, 1]:

* **measured** (``--contention real``): over the last window of at least ``window_s`` seconds,
  ``1 - (busy time of the worker's cores - this process's own CPU time) / (window * cores)``, from
  ``/proc/stat`` per-core counters and the process's own user+system time (``psutil``). Everything
  else running on those cores counts as co-located load — a burner, another tenant, or another rank
  pinned to the same core. Clamped to [0.01, 1]; ``/proc/stat`` counts in 10 ms ticks, so a short
  window is coarse, hence the minimum window.
* **emulated** (``--contention emulated``): ``min(1, 1 / f(t))`` with ``f`` the scenario's compute
  slowdown at the reading's time — exactly what the simulator feeds the scheme, since the emulated
  tenant is a schedule, not a process. The measured value is still recorded (``observations.csv``).

``mem_available`` is always measured: ``available / total`` of ``psutil.virtual_memory()``.
"""

from __future__ import annotations

import collections
import os
import time

import psutil


def pin_to_cores(local_rank: int, threads: int, cores: list[int]) -> list[int]:
    """Pin this process to ``threads`` cores chosen round-robin by ``local_rank``; returns them."""
    chosen = sorted({cores[(local_rank * threads + j) % len(cores)] for j in range(threads)})
    os.sched_setaffinity(0, chosen)
    return chosen


class ResourceReader:
    """CPU availability of a set of cores (others' load on them) and free memory."""

    def __init__(self, cores: list[int] | None = None, *, window_s: float = 0.25) -> None:
        self.proc = psutil.Process()
        self.cores = cores if cores else sorted(os.sched_getaffinity(0))
        self.window_s = window_s
        self._samples: collections.deque[tuple[float, float, float]] = collections.deque([self._sample()])
        self.last = 1.0

    def _sample(self) -> tuple[float, float, float]:
        per_cpu = psutil.cpu_times(percpu=True)
        busy = 0.0
        for c in self.cores:
            if c < len(per_cpu):
                t = per_cpu[c]
                busy += sum(t) - t.idle - getattr(t, "iowait", 0.0)
        own = self.proc.cpu_times()
        return time.monotonic(), busy, own.user + own.system

    def cpu_available(self) -> float:
        now = self._sample()
        while len(self._samples) > 1 and now[0] - self._samples[1][0] >= self.window_s:
            self._samples.popleft()
        base = self._samples[0]
        self._samples.append(now)
        span = now[0] - base[0]
        if span < self.window_s / 2:
            return self.last
        other = (now[1] - base[1]) - (now[2] - base[2])
        self.last = min(1.0, max(0.01, 1.0 - other / (span * len(self.cores))))
        return self.last

    @staticmethod
    def mem_available() -> float:
        vm = psutil.virtual_memory()
        return max(0.01, min(1.0, vm.available / vm.total))
