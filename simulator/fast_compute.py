"""An iteration's compute end on the parameter-server fast path: one call per iteration.

:func:`lbsim.simulator.compute.iteration_end_s` is, for worker ``w``'s iteration ``i`` on ``b``
samples started at ``t``::

    work = t(b) x m_i                         t(b): WorkerSpec.iteration_s; m_i: iteration_factor(i)
    end  = t + work x f   if the compute slowdown f in force at t holds until t + work x f,
           else the integral of WorkerContention.compute_end across the changes

(five Python calls on the event path). :func:`compute_end_of` returns worker ``w``'s version of it
as one call, with the same floats: ``t(b)`` is ``compute_s(b)`` remembered per batch when there
is no sample-cost model (:meth:`lbsim.workers.WorkerSpec.iteration_s`'s own first branch), ``m_i``
is the trace series' product times the next jitter draw taken from the worker's stream in
blocks (:func:`lbsim.contention.model.jitter_block`, as ``iteration_factor`` takes them: the same
numbers in the same order), and the slowdown segment ``(f, next change)`` of step sources
(scheduled, Markov, simple traces: :func:`lbsim.contention.model.combined_factor`) is remembered
while the iterations start inside it, as ``compute_end`` itself does; a compute that crosses a
change, or sources that are not step sources (periodic traces), get ``compute_end`` itself.

**Why a generator.** At 1,024 workers each iteration finds its worker's state out of the CPU's
caches (the other workers' iterations ran in between), so what it costs is mostly the cache lines
it touches. The state is kept as the locals of one generator frame — a few contiguous lines — and
the jitter block as an ``array('d')`` (8 bytes a draw, read as a fresh float), not as a closure's
cells and a list of float objects, each of its own line; the call is the generator's ``send`` of
``(start_s, batch, iteration)``. ``benchmarks/callgrind_ratio.py --cache-mib 1 asp@1024``
measures the lines missed (docs/performance.md).

The generator owns the worker's jitter stream from then on: the run calls it, and nothing else,
once per iteration, in order.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Generator

from lbsim.contention.model import WorkerContention, combined_factor, jitter_block, series_multiplier
from lbsim.contention.sources import StepSource
from lbsim.workers import WorkerSpec

IterationEnd = Callable[[tuple[float, int, int]], float]
"""``end((start_s, batch, iteration))``: when the iteration's compute ends (``iteration_end_s``)."""


def compute_end_of(contention: WorkerContention, spec: WorkerSpec) -> IterationEnd:
    """Worker ``spec``'s :func:`lbsim.simulator.compute.iteration_end_s` as one call (see the module docstring)."""
    ends = _compute_ends(contention, spec)
    next(ends)  # primed: waits for the first iteration
    return ends.send


def _compute_ends(contention: WorkerContention, spec: WorkerSpec) -> Generator[float, tuple[float, int, int], None]:  # noqa: C901 - one rule, written out
    """Sent each iteration's ``(start_s, batch, iteration)`` in order; yields its compute end."""
    cont, sources, series = contention, contention.compute, contention.iterations
    rng, cv = contention.rng, contention.jitter_cv
    jittered = cv > 0 and rng is not None
    steps = all(isinstance(s, StepSource) for s in sources)  # segments may be remembered
    per_iteration = spec.sample_cost is not None  # t(b) depends on the iteration's own samples
    nominal_of, iteration_s, compute_end = spec.compute_s, spec.iteration_s, cont.compute_end
    known_batch, nominal = -1, 0.0  # the batch whose t(b) is remembered, and t(b)
    since, until, factor = math.inf, -math.inf, 1.0  # the remembered segment: none yet
    jitter = array("d")  # the block of jitter draws being used
    drawn = 0  # draws used from it
    end = 0.0
    while True:
        start, batch, iteration = yield end
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
                jitter, drawn = array("d", jitter_block(rng, cv).tobytes()), 0
            work *= m * jitter[drawn]
            drawn += 1
        elif series:
            work *= series_multiplier(series, iteration)
        if since <= start < until and work * factor <= until - start:
            end = start + work * factor
        elif not steps:
            end = compute_end(start, work)
        else:
            factor, until = combined_factor(sources, start)
            since = start
            end = start + work * factor if until == math.inf or work * factor <= until - start else compute_end(start, work)
