"""The parameter-server fast path: the asynchronous and WBSP drivers without SimPy, same records.

The event path (:mod:`lbsim.simulator.asynchronous`, :mod:`lbsim.simulator.wbsp`) runs each
worker as a SimPy process; each push, apply and pull is a handful of SimPy events (a ``Timeout``
object, callbacks, a generator resume through ``yield from``): nine to eleven per iteration. The
fast path enacts the same model on an event loop of its own (:mod:`lbsim.simulator.fast_loop`:
plain generators, a heap of distinct times, a FIFO for zero-delay events, no event objects) with
the server's queues in closed form (:mod:`lbsim.simulator.fast_server`: four events per
iteration, three where a pull in closed form is merged with the next compute), and produces
**exactly** the records, updates, scheme calls, numerics calls and progress readings of the event
path: a test runs both on random scenarios and compares every field.
:func:`lbsim.simulator.run.simulate` takes it when it applies; ``simulate(scenario, fast=False)``
forces the event path. Where SimPy's order of two events at one
instant would turn on what the fast loop does not track (a :class:`~lbsim.simulator.fast_loop.Tie`),
:func:`run_fast_ps` returns False and ``simulate`` redoes the run on the event path
(:class:`Reported` passes on only the progress readings not yet given).

The run suspends Python's cyclic garbage collector (``gc.disable``, restored afterwards): what the
loop makes per event forms no reference cycles (records are tuples of numbers, steps are freed by
reference counting; the run's few hundred objects that do refer to each other — the environment,
its processes and closures — are made once and collected after the run), so the collector's
periodic passes over the growing record buffers would find nothing to free.

Conditions (:func:`ineligible` says which one fails): the scheme's driver is ``async`` or
``wbsp`` (ASP, SSP, DSSP, ElasticBSP, WBSP with or without overlap), the network is a parameter
server, and there is no ``data:`` section (the fetch stage's storage NIC is a ``simpy.Resource``,
left to the event path). Everything else is handled: every contention kind (scheduled, Markov,
the three trace formats, jitter), nodes shared by several workers, numerics, the update and
sample targets and the time budget, progress callbacks.

What is shared with the event path, so that one change reaches both: the round trip's timing rules
(:mod:`lbsim.network.parameter_server`), an iteration's compute time
(:meth:`lbsim.workers.WorkerSpec.compute_s` under
:class:`lbsim.contention.model.WorkerContention`), the run's end (:mod:`lbsim.metrics.run_end`),
the decisions (:class:`lbsim.schemes.gate.Gate` and the scheme; WBSP's
:class:`lbsim.schemes.wbsp_rounds.Rounds`) and, for WBSP, the step records
(:class:`lbsim.simulator.wbsp.WBSPBook`). What each path writes itself: the order of events (SimPy's
scheduler, or the fast loop's reproduction of it). Two rules are written out a second time for
speed, each held to its original float for float by tests/test_fast_compute.py: an iteration's
compute end as one call (:mod:`lbsim.simulator.fast_compute`: the segment and jitter caches of
``WorkerContention``, kept per worker) and a worker's own-link time
(:func:`lbsim.simulator.fast_server.own_link_of`); the transfer's tail (``tail_s``) is written out
where a transfer is timed.
"""

from __future__ import annotations

import gc
from collections.abc import Callable

from lbsim.scenario.sections import ParameterServerConfig

from .env import SimEnv
from .fast_async import FastAsync
from .fast_loop import Tie
from .fast_wbsp import FastWBSP

# Which fast loop enacts a scheme's decisions, by the scheme's ``driver`` attribute.
FAST_DRIVERS: dict[str, type[FastAsync] | type[FastWBSP]] = {"async": FastAsync, "wbsp": FastWBSP}


def ineligible(env: SimEnv) -> str | None:
    """Why the scenario must take the event path, or None when the parameter-server fast path reproduces it."""
    driver = getattr(env.scheme, "driver", None)
    if driver not in FAST_DRIVERS:
        return f"driver {driver!r} is not one of {', '.join(FAST_DRIVERS)}"
    if not isinstance(env.scenario.network, ParameterServerConfig):
        return "the network is not a parameter server"
    if env.data is not None:
        return "a data section (fetch stage)"
    return None


def run_fast_ps(env: SimEnv) -> bool:
    """Run a qualifying scenario to its end on the fast path (see the module docstring).

    False: the run met a tie (:class:`lbsim.simulator.fast_loop.Tie`) and stopped there; ``env``
    is spent, and the run is to be redone on the event path.
    """
    reason = ineligible(env)
    if reason is not None:
        raise ValueError(f"the parameter-server fast path does not apply: {reason}")
    collecting = gc.isenabled()
    gc.disable()  # no cycles per event: the collector's passes over the record buffers are overhead
    try:
        FAST_DRIVERS[env.scheme.driver](env).run()
    except Tie:
        return False
    finally:
        if collecting:
            gc.enable()
    return True


class Reported:
    """A progress callback that counts its readings, so that a run redone after a tie repeats none.

    The fast path is exact up to a tie, so its readings are the event path's first ones; the
    redone run's callback (:meth:`resumed`) passes on only the readings after those.
    """

    def __init__(self, progress: Callable[[float], None] | None) -> None:
        self.progress = progress
        self.count = 0
        self.callback = self._report if progress is not None else None

    def _report(self, fraction: float) -> None:
        self.count += 1
        assert self.progress is not None  # _report is the callback only when there is one
        self.progress(fraction)

    def resumed(self) -> Callable[[float], None] | None:
        """The callback for the run redone from the start: silent for the readings already passed on."""
        if self.progress is None:
            return None
        skip, progress = self.count, self.progress

        def report(fraction: float) -> None:
            nonlocal skip
            if skip:
                skip -= 1
            else:
                progress(fraction)
        return report
