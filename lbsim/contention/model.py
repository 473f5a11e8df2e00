"""Per-worker contention: how fast each worker computes and communicates at time t.

Built once per run from the scenario's ``contention`` list (and each group's natural
``jitter_cv``). Slowdowns from several sources multiply. Both engines use it: the simulator
integrates it exactly (:meth:`WorkerContention.compute_end`), the runtime's emulated mode
stretches real steps by it, and :meth:`WorkerContention.cpu_available` is the resource reading a
real worker could take (the share of its processor the co-located load leaves it).

Compute under a time-varying slowdown f(t): work of ``w`` nominal seconds started at ``t0``
ends at the ``t1`` with ``integral_{t0}^{t1} dt / f(t) = w`` — a slowdown that starts
mid-iteration stretches only the remaining part.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from lbsim.contention import traces
from lbsim.contention.config import ContentionConfig, MarkovContention, ScheduledContention, TraceContention
from lbsim.contention.sources import (
    IterationSeries,
    MarkovSource,
    PeriodicSeries,
    StepSource,
    TimeSource,
    window,
)
from lbsim.errors import InputError
from lbsim.rng import streams
from lbsim.workers import WorkerSpec, select_workers

JITTER_BLOCK = 128  # jitter draws taken from a worker's generator at a time (one call instead of 128; both engine paths: the fast path draws one block for all workers per 128 rounds)
_STEP_TYPES = (StepSource, MarkovSource)  # piecewise constant between known change points
_NO_SEGMENT = (math.inf, -math.inf, 1.0, -1)  # (from, until, factor, sources): matches no time


def combined_factor(sources: list[TimeSource], t: float) -> tuple[float, float]:
    """``(factor, next change)`` of a list of sources at ``t``: the sources multiply; the answer holds
    until the earliest next change of any of them. The one rule, for the event path
    (:class:`WorkerContention`) and the simulator's synchronous fast path alike."""
    factor, nxt = 1.0, math.inf
    for s in sources:
        f, n = s.segment(t)
        factor *= f
        nxt = min(nxt, n)
    return factor, nxt


def jitter_block(rng: np.random.Generator, jitter_cv: float) -> np.ndarray:
    """The next :data:`JITTER_BLOCK` natural-jitter multipliers of a worker: lognormal with mean 1 and
    coefficient of variation ``jitter_cv`` (sigma^2 = ln(1 + cv^2), mu = -sigma^2 / 2). Drawn in
    blocks, the numbers are those of one draw at a time, in order, whatever the block size."""
    sigma2 = math.log1p(jitter_cv**2)
    return rng.lognormal(-sigma2 / 2, math.sqrt(sigma2), JITTER_BLOCK)


def series_multiplier(iterations: list[IterationSeries], iteration: int) -> float:
    """The product of the per-iteration series' multipliers (trace replay) for ``iteration``."""
    m = 1.0
    for series in iterations:
        m *= series.multiplier(iteration)
    return m


@dataclass(slots=True)
class WorkerContention:
    """Everything that slows one worker."""

    compute: list[TimeSource] = field(default_factory=list)
    network: list[TimeSource] = field(default_factory=list)
    iterations: list[IterationSeries] = field(default_factory=list)
    jitter_cv: float = 0.0
    rng: np.random.Generator | None = None
    # caches (no effect on any answer): the last segment of each source list, and jitter draws
    _cseg: tuple[float, float, float, int] = field(default=_NO_SEGMENT, init=False, repr=False, compare=False)
    _nseg: tuple[float, float, float, int] = field(default=_NO_SEGMENT, init=False, repr=False, compare=False)
    _jitter: list[float] = field(default_factory=list, init=False, repr=False, compare=False)
    _jitter_pos: int = field(default=0, init=False, repr=False, compare=False)
    _jittered: bool = field(default=False, init=False, repr=False, compare=False)  # jitter_cv > 0 with a stream

    def __post_init__(self) -> None:
        self._jittered = self.jitter_cv > 0 and self.rng is not None

    # ``combined_factor(sources, t)`` for the compute and network lists, remembering the answer while
    # ``t`` stays in its segment: for step sources (scheduled, Markov, simple traces) the answer
    # is the same for every time from the one it was asked at up to the next change, so it is
    # reused there (questions in any order). Other sources (periodic traces) are asked every time.
    def _compute_segment(self, t: float) -> tuple[float, float]:
        c = self._cseg
        if c[0] <= t < c[1] and c[3] == len(self.compute):
            return c[2], c[1]
        factor, nxt = combined_factor(self.compute, t)
        if all(type(s) in _STEP_TYPES for s in self.compute):
            self._cseg = (t, nxt, factor, len(self.compute))
        return factor, nxt

    def compute_factor(self, t: float) -> float:
        """The compute slowdown factor at time ``t`` (the product of the compute sources)."""
        return self._compute_segment(t)[0]

    def network_factor(self, t: float) -> float:
        """The network slowdown factor at time ``t`` (the product of the network sources)."""
        c = self._nseg
        if c[0] <= t < c[1] and c[3] == len(self.network):
            return c[2]
        factor, nxt = combined_factor(self.network, t)
        if all(type(s) in _STEP_TYPES for s in self.network):
            self._nseg = (t, nxt, factor, len(self.network))
        return factor

    def network_constant(self) -> float | None:
        """The network factor when it never changes (no network source: 1.0), else None."""
        return None if self.network else 1.0

    def cpu_available(self, t: float) -> float:
        """Share of the worker's processor left by co-located load at ``t``, in (0, 1]."""
        return min(1.0, 1.0 / self.compute_factor(t))

    def iteration_factor(self, iteration: int) -> float:
        """Multiplier on iteration ``iteration``'s compute work (trace replay x natural jitter).

        Call once per iteration, in order: the jitter draw advances this worker's own stream.
        """
        m = series_multiplier(self.iterations, iteration) if self.iterations else 1.0
        if self._jittered:
            pos, block = self._jitter_pos, self._jitter
            if pos == len(block):  # draws come in blocks: the same numbers, in order
                assert self.rng is not None  # _jittered: there is a stream
                block = self._jitter = jitter_block(self.rng, self.jitter_cv).tolist()
                pos = 0
            m *= block[pos]
            self._jitter_pos = pos + 1
        return m

    def compute_end(self, start_s: float, work_s: float) -> float:
        """When ``work_s`` nominal seconds of compute started at ``start_s`` finish."""
        since, until, f, sources = self._cseg  # the common case: the cached segment covers the start and the whole work
        if since <= start_s < until and sources == len(self.compute) and work_s * f <= until - start_s:
            return start_s + work_s * f
        t, left = start_s, work_s
        while True:
            f, nxt = self._compute_segment(t)
            if nxt == math.inf or left * f <= nxt - t:
                return t + left * f
            left -= (nxt - t) / f
            t = nxt


class ContentionSource(Protocol):
    """What the model reads of a scenario: its seed and its ``contention`` list."""

    @property
    def seed(self) -> int:
        """The seed of every random stream of the run."""

    @property
    def contention(self) -> Sequence[ContentionConfig]:
        """The contention entries, in the scenario's order."""


def build_contention(scenario: ContentionSource, workers: tuple[WorkerSpec, ...]) -> list[WorkerContention]:
    """One :class:`WorkerContention` per worker; reads and checks trace files."""
    jitter = streams(scenario.seed, [("jitter", w.index) for w in workers])  # stream(seed, "jitter", i), made at once
    out = [WorkerContention(jitter_cv=w.jitter_cv, rng=rng) for w, rng in zip(workers, jitter, strict=True)]
    for k, item in enumerate(scenario.contention):
        path = f"contention[{k}]"
        chosen = select_workers(item.workers, workers, f"{path}.workers")
        if isinstance(item, TraceContention):
            _check_trace_workers(item, len(workers), path)
        rngs: dict[int, np.random.Generator] = {}
        if isinstance(item, MarkovContention):  # stream(seed, "markov", k, "worker", w), made at once
            rngs = dict(zip(chosen, streams(scenario.seed, [("markov", k, "worker", w) for w in chosen]), strict=True))
        for w in chosen:
            time_src, iter_src = _source(item, w, path, rngs.get(w))
            if iter_src is not None:
                out[w].iterations.append(iter_src)
            if time_src is not None:
                if item.target in ("compute", "both"):
                    out[w].compute.append(time_src)
                if item.target in ("network", "both"):
                    out[w].network.append(time_src)
    return out


def _source(item: object, w: int, path: str,
            rng: np.random.Generator | None) -> tuple[TimeSource | None, IterationSeries | None]:
    """Worker ``w``'s source for contention ``item``; ``rng``: its Markov stream (a Markov item only)."""
    if isinstance(item, ScheduledContention):
        return window(item.start_s, item.end_s, item.slowdown), None
    if isinstance(item, MarkovContention):
        assert rng is not None, "a Markov source is built with its worker's stream"
        src = MarkovSource(
            rng,
            mean_off_s=item.mean_off_s,
            mean_on_s=item.mean_on_s,
            slowdown_min=item.slowdown_min,
            slowdown_max=item.slowdown_max,
            start_on=item.start_on,
        )
        return src, None
    assert isinstance(item, TraceContention)
    return _trace_source(item, w, path)


def _check_trace_workers(item: TraceContention, n_workers: int, path: str) -> None:
    """A simple trace may name only workers of the cluster (a row for another would be silently unused)."""
    try:
        fmt = traces.detect_format(item.path) if item.format == "auto" else item.format
        if fmt != "simple":
            return  # pai_minibatch rows are reused modulo the trace's workers; cluster_cpu names none
        table = _cached(item.path, fmt)
    except InputError:
        return  # reading the trace for a worker reports it at the right key
    outside = [w for w in table if w >= n_workers]
    if outside:
        raise InputError(f"{path}.path", f"{item.path}: the trace names worker {outside[0]}, but the cluster has "
                         f"workers 0..{n_workers - 1}")


def _trace_source(item: TraceContention, w: int, path: str) -> tuple[TimeSource | None, IterationSeries | None]:
    try:
        fmt = traces.detect_format(item.path) if item.format == "auto" else item.format
        if fmt == "pai_minibatch":
            if item.target != "compute":
                raise InputError(f"{path}.target", "pai_minibatch traces are per-iteration compute times; only 'compute' is allowed")
            m = _cached(item.path, fmt)
            return None, IterationSeries(m[w % m.shape[0]])
        if fmt == "cluster_cpu":
            util = _cached(item.path, fmt)
            speed = np.minimum(1.0, (1.0 - util / 100.0) / item.demand)
            slowdown = np.minimum(item.max_slowdown, 1.0 / np.maximum(speed, 1e-12))
            return PeriodicSeries(slowdown, item.bucket_s, w * item.stagger_rows), None
        table = _cached(item.path, fmt)
        if w not in table:
            return None, None
        times, factors = table[w]
        return StepSource([float(t) for t in times], [float(f) for f in factors]), None
    except InputError as err:
        if err.path.startswith(path):
            raise
        raise InputError(f"{path}.path", str(err)) from None


_CACHE: dict[tuple[str, str, int, int], object] = {}


def _cached(file: str, fmt: str):  # type: ignore[no-untyped-def]
    """Trace files parsed once per process and file version (size and mtime in the key)."""
    try:
        st = os.stat(file)
        key = (file, fmt, st.st_size, st.st_mtime_ns)
    except OSError:
        key = (file, fmt, -1, -1)  # the loader reports the missing file
    if key not in _CACHE:
        loader = {"pai_minibatch": traces.load_pai_minibatch, "cluster_cpu": traces.load_cluster_cpu, "simple": traces.load_simple}
        _CACHE[key] = loader[fmt](file)
    return _CACHE[key]
