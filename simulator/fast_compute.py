"""An iteration's compute end on the parameter-server fast path: one call per iteration.

:func:`lbsim.simulator.compute.iteration_end_s` is, for worker ``w``'s iteration ``i`` on ``b``
samples started at ``t``::

    work = t(b) x m_i                         t(b): WorkerSpec.iteration_s; m_i: iteration_factor(i)
    end  = t + work x f   if the compute slowdown f in force at t holds until t + work x f,
           else the integral of WorkerContention.compute_end across the changes

(five Python calls on the event path). :func:`compute_end_of` returns worker ``w``'s version of it
as one closure, with the same floats: ``t(b)`` is ``compute_s(b)`` remembered per batch when there
is no sample-cost model (:meth:`lbsim.workers.WorkerSpec.iteration_s`'s own first branch), ``m_i``
is the trace series' product times the next jitter draw taken from the worker's stream in
blocks (:func:`lbsim.contention.model.jitter_block`, as ``iteration_factor`` takes them: the same
numbers in the same order), and the slowdown segment ``(f, next change)`` of step sources
(scheduled, Markov, simple traces: :func:`lbsim.contention.model.combined_factor`) is remembered
while the iterations start inside it, as ``compute_end`` itself does; a compute that crosses a
change, or sources that are not step sources (periodic traces), get ``compute_end`` itself.

The closure owns the worker's jitter stream from then on: the run calls it, and nothing else,
once per iteration, in order.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from lbsim.contention.model import WorkerContention, combined_factor, jitter_block, series_multiplier
from lbsim.contention.sources import StepSource
from lbsim.workers import WorkerSpec

IterationEnd = Callable[[float, int, int], float]
"""``end(start_s, batch, iteration)``: when the iteration's compute ends (``iteration_end_s``)."""


def compute_end_of(contention: WorkerContention, spec: WorkerSpec) -> IterationEnd:  # noqa: C901 - one rule, written out
    """Worker ``spec``'s :func:`lbsim.simulator.compute.iteration_end_s` as one closure (see the module docstring)."""
    cont, sources, series = contention, contention.compute, contention.iterations
    rng, cv = contention.rng, contention.jitter_cv
    jittered = cv > 0 and rng is not None
    steps = all(isinstance(s, StepSource) for s in sources)  # segments may be remembered
    per_iteration = spec.sample_cost is not None  # t(b) depends on the iteration's own samples
    nominal_of, iteration_s, compute_end = spec.compute_s, spec.iteration_s, cont.compute_end
    known_batch, nominal = -1, 0.0  # the batch whose t(b) is remembered, and t(b)
    since, until, factor = math.inf, -math.inf, 1.0  # the remembered segment: none yet
    jitter: list[float] = []  # the block of jitter draws being used
    drawn = 0  # draws used from it

    def end(start: float, batch: int, iteration: int) -> float:
        nonlocal known_batch, nominal, since, until, factor, jitter, drawn
        if per_iteration:
            work = iteration_s(batch, iteration)
        elif batch == known_batch:
            work = nominal
        else:
            work = nominal = nominal_of(batch)
            known_batch = batch
        if jittered:  # iteration_factor: the series' product, times the next draw
            m = series_multiplier(series, iteration) if series else 1.0
            if drawn == len(jitter):
                assert rng is not None  # jittered: there is a stream
                jitter, drawn = jitter_block(rng, cv).tolist(), 0
            work *= m * jitter[drawn]
            drawn += 1
        elif series:
            work *= series_multiplier(series, iteration)
        if since <= start < until and work * factor <= until - start:
            return start + work * factor
        if not steps:
            return compute_end(start, work)
        factor, until = combined_factor(sources, start)
        since = start
        if until == math.inf or work * factor <= until - start:
            return start + work * factor
        return compute_end(start, work)

    return end
