"""Contention injection: the scenario's slowdown schedule, emulated or made real.

Both modes use the same per-worker model as the simulator (:func:`lbsim.contention.model.build_contention`),
on the run's clock (seconds since the ranks' common start barrier).

* ``emulated`` (deterministic): after a real compute step of ``d`` seconds that started at ``t``,
  the rank sleeps until ``compute_end(t, d * m)`` — the end the simulator would give work of ``d``
  nominal seconds under the slowdown schedule, ``m`` being the iteration's replayed-trace multiplier
  (``pai_minibatch``). A slowdown that starts mid-step stretches only the rest of it. The scenario's
  ``jitter_cv`` is *not* added: it is the simulator's model of natural noise, which a real machine
  has already (``lbsim profile`` measures it). Only compute contention is emulated; network
  contention is reported as not applied.
* ``real``: a co-located process (:mod:`lbsim.runtime.burner`) pinned to the rank's cores burns CPU while
  the schedule says the worker is slowed: for a factor ``f`` it runs ``ceil(f - 1)`` busy loops per
  core, the last one duty-cycled, so the scheduler leaves the worker about ``1/f`` of each core.
  Per-iteration multipliers (trace replay, jitter) are not applied in this mode. The slowdown the
  worker really suffers is whatever the kernel's scheduler makes of it; ``observations.csv`` shows
  the measured CPU availability next to the step times.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time

from lbsim.contention.model import WorkerContention


def time_factor(cont: WorkerContention, t: float) -> tuple[float, float]:
    """Compute slowdown in force at ``t`` and when it next changes (the product of the time sources)."""
    factor, nxt = 1.0, math.inf
    for src in cont.compute:
        f, n = src.segment(t)
        factor *= f
        nxt = min(nxt, n)
    return factor, nxt


def max_factor(cont: WorkerContention, horizon_s: float) -> float:
    """Largest compute slowdown of the schedule in ``[0, horizon_s]`` (walks its segments)."""
    t, worst, steps = 0.0, 1.0, 0
    while t <= horizon_s and steps < 100_000:
        f, nxt = time_factor(cont, t)
        worst = max(worst, f)
        if nxt == math.inf:
            break
        t, steps = nxt, steps + 1
    return worst


class Emulated:
    """Stretch each compute step to what the slowdown schedule makes of it."""

    def __init__(self, cont: WorkerContention, clock_t0: float) -> None:
        self.cont = cont
        self.t0 = clock_t0

    def iteration_multiplier(self, iteration: int) -> float:
        """The replayed trace's factor on this iteration (natural jitter is not added: it is real here)."""
        m = 1.0
        for series in self.cont.iterations:
            m *= series.multiplier(iteration)
        return m

    def stretch(self, start_s: float, real_s: float, multiplier: float) -> None:
        """Sleep until the emulated end of a step that started at ``start_s`` and took ``real_s``."""
        end = self.cont.compute_end(start_s, real_s * multiplier)
        left = self.t0 + end - time.monotonic()
        if left > 0:
            time.sleep(left)

    def cpu_available(self, t: float) -> float:
        """The CPU share in (0, 1] the schedule leaves the worker at ``t``."""
        return self.cont.cpu_available(t)

    def oracle(self, t: float, next_multiplier: float) -> float:
        """The true slowdown of the next step: the schedule's compute factor at ``t`` times the trace's."""
        return self.cont.compute_factor(t) * next_multiplier


class RealBurner:
    """The co-located CPU burner of one worker (a no-op if its schedule never slows it).

    :meth:`prepare` starts it before the ranks' start barrier and waits until it has loaded the
    scenario; :meth:`start` hands it the run's clock origin, so it burns from the first round on.
    """

    def __init__(self, *, scenario: str, overrides: list[str], worker: int, cores: list[int],
                 cont: WorkerContention, horizon_s: float) -> None:
        self.args = {"scenario": scenario, "overrides": overrides, "worker": worker, "cores": cores}
        self.needed = bool(cont.compute) and bool(cores) and max_factor(cont, horizon_s) > 1.0
        self.proc: subprocess.Popen[str] | None = None

    def prepare(self, timeout_s: float = 60.0) -> None:
        """Start the burner process and wait for its ``ready`` (RuntimeError if it says anything else)."""
        if not self.needed:
            return
        self.proc = subprocess.Popen([sys.executable, "-m", "lbsim.runtime.burner", json.dumps(self.args)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()  # "ready" once it has built the schedule
        if line != "ready":
            self.stop()
            raise RuntimeError(f"the CPU burner of worker {self.args['worker']} did not start (said {line!r})")

    def start(self, clock_t0: float) -> None:
        """Hand the burner the run's clock origin: it burns its schedule from then on."""
        if self.proc is not None and self.proc.stdin is not None:
            self.proc.stdin.write(f"{clock_t0!r}\n")
            self.proc.stdin.flush()

    def stop(self) -> None:
        """End the burner (terminate, then kill if it does not exit within 5 s)."""
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - the burner ignores SIGTERM only if wedged
            self.proc.kill()
            self.proc.wait()
        self.proc = None


class Injection:
    """One rank's contention for a run, whichever the mode: set up, started at the clock origin,
    applied after each compute step (the training loops' one interface to this module)."""

    def __init__(self, cont: WorkerContention, *, mode: str | None, scenario: str, overrides: list[str], worker: int,
                 cores: list[int] | None, horizon_s: float) -> None:
        """``mode``: ``emulated``, ``real`` or None (no contention: profiling)."""
        self.cont = cont
        self.mode = mode
        self.emu: Emulated | None = None
        self.burner: RealBurner | None = None
        if mode == "real":
            self.burner = RealBurner(scenario=scenario, overrides=overrides, worker=worker, cores=cores or [],
                                     cont=cont, horizon_s=horizon_s)
            self.burner.prepare()

    def start(self, clock_t0: float) -> None:
        """The ranks passed their start barrier at ``clock_t0`` (time.monotonic())."""
        if self.mode == "emulated":
            self.emu = Emulated(self.cont, clock_t0)
        elif self.burner is not None:
            self.burner.start(clock_t0)

    def multiplier(self, iteration: int) -> float:
        """The replayed trace's factor on ``iteration`` (1 unless emulated)."""
        return self.emu.iteration_multiplier(iteration) if self.emu is not None else 1.0

    def after_compute(self, start_s: float, real_s: float, multiplier: float) -> None:
        """A step that started at ``start_s`` took ``real_s`` of real compute: stretch it (emulated)."""
        if self.emu is not None:
            self.emu.stretch(start_s, real_s, multiplier)

    def readings(self, t: float, measured_cpu: float, next_multiplier: float) -> tuple[float, float]:
        """``(cpu_available, oracle_slowdown)`` at ``t``: the schedule's when emulated, else the measured (no oracle)."""
        if self.emu is not None:
            return self.emu.cpu_available(t), self.emu.oracle(t, next_multiplier)
        return measured_cpu, math.nan

    def stop(self) -> None:
        """Stop the burner, if any."""
        if self.burner is not None:
            self.burner.stop()
