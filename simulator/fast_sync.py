"""The synchronous fast path: whole rounds computed with numpy, no SimPy events.

With ring all-reduce, no backup workers and no data section, a synchronous round has no
asynchrony left to simulate: every worker starts the round at the previous update, computes its
batch under its contention, and the ring starts when the last one is done. :class:`FastSync`
computes that round for all workers at once and produces **exactly** the records, updates,
scheme calls and numerics calls of :class:`lbsim.simulator.sync.SyncDriver` on the same scenario (a
test runs both on many scenarios and compares every field and the summary). Conditions
(:func:`ineligible` says which one fails):

* the scheme's ``driver`` is ``sync`` and it uses every gradient (``required_gradients == n``:
  no backup workers, which need a parameter server anyway);
* the network is ``ring_allreduce``;
* no ``data:`` section (data local and free, no fetch stage).

Numerics may be on (the trainer is called as the event path calls it); a time budget, a progress
callback and any contention (scheduled, Markov, trace, jitter, compute or network) are handled.

How the event path's arithmetic is reproduced, bit for bit:

* compute: worker w's work ``(t0 + b / v) * factor`` ends where
  :meth:`~lbsim.contention.model.WorkerContention.compute_end` says. Contention sources are
  piecewise constant; for step sources (scheduled, Markov, simple traces) the segment
  ``(factor, next change)`` in force at a time is cached per worker and reused while the round
  starts before the change, so the common case is ``T + work * f`` for all workers at once (the
  method's own first step). A worker whose compute crosses a change, or whose sources are not
  step sources (periodic ``cluster_cpu`` traces), gets the method itself.
* SimPy times: a compute timeout fires at ``T + (end - T)``; ties between workers fire in the
  order their timeouts were made, which is the order the workers resumed after the previous
  update, i.e. the previous round's contribution order (worker order in round 0). Records are
  appended in that order.
* per-iteration factors (trace multipliers x jitter) are drawn once per round in round order, by
  the rules of :mod:`lbsim.contention.model` (``series_multiplier``, ``jitter_block``: one block
  size for both paths), and the slowdown segments by its ``combined_factor``; only the vectorised
  bookkeeping around them is this module's (the fast path pays: benchmarks/bench_simulator.py).
* a time budget B ends the run at B: a round whose update would come at or after B makes no
  update and no records (the budget's timeout precedes every same-time event of a round).
"""

from __future__ import annotations

import math

import numpy as np

from lbsim.contention.model import WorkerContention, combined_factor, jitter_block, series_multiplier
from lbsim.contention.sources import StepSource
from lbsim.metrics.records import ITERATION_COLUMNS, ITERATION_DTYPES
from lbsim.network.overlap import exposed_comm_s
from lbsim.samples.model import SampleModel
from lbsim.samples.rounds import RoundPlan
from lbsim.scenario.sections import AllReduceConfig
from lbsim.schemes.base import RoundObservation, WorkerColumns, as_sync
from lbsim.schemes.sample_plan import plan_round, update_weights

from .env import SimEnv
from .network import allreduce_plan


def ineligible(env: SimEnv) -> str | None:
    """Why the scenario must take the event path, or None when the fast path reproduces it."""
    scheme = env.scheme
    if getattr(scheme, "driver", None) != "sync":
        return f"driver {getattr(scheme, 'driver', None)!r} is not 'sync'"
    if getattr(scheme, "required_gradients", None) != env.n:
        return "backup workers (an update uses fewer than n gradients)"
    if not isinstance(env.scenario.network, AllReduceConfig):
        return "the network is not ring_allreduce"
    if env.data is not None:
        return "a data section (fetch stage)"
    return None


class _Segments:
    """Per-worker cache of the combined slowdown ``(factor, next change)`` of a source list."""

    def __init__(self, sources: list[list]) -> None:
        self.sources = sources
        n = len(sources)
        self.step = np.array([all(isinstance(s, StepSource) for s in src) for src in sources], dtype=bool)
        self.none = np.array([not src for src in sources], dtype=bool)
        self.factor = np.ones(n)
        self.nxt = np.where(self.none, math.inf, -math.inf)  # -inf: not looked up yet
        self.other = np.flatnonzero(~self.step)  # asked every time (not step sources)

    def at(self, t: float) -> np.ndarray:
        """Every worker's factor at ``t`` (times asked must not decrease)."""
        stale = np.flatnonzero(self.nxt <= t)  # includes every worker with other sources
        if stale.size:
            f, nxt, src = self.factor, self.nxt, self.sources
            for w in stale.tolist():
                f[w], nxt[w] = combined_factor(src[w], t)
            if self.other.size:
                nxt[self.other] = -math.inf  # not step sources: never trusted beyond this call
        return self.factor


class _Factors:
    """Each worker's per-iteration compute multiplier, round by round, as ``iteration_factor``."""

    def __init__(self, contention: list[WorkerContention]) -> None:
        self.n = len(contention)
        self.series = [(w, c.iterations) for w, c in enumerate(contention) if c.iterations]
        jit = [w for w, c in enumerate(contention) if c.jitter_cv > 0 and c.rng is not None]
        self.jw = np.array(jit, dtype=np.intp)
        self.params: list[tuple[np.random.Generator, float]] = []
        for w in jit:
            rng = contention[w].rng
            assert rng is not None  # jittered workers have their stream (filtered above)
            self.params.append((rng, contention[w].jitter_cv))
        self.block: np.ndarray | None = None
        self.base = 0
        self.next_round = 0

    def draw(self, r: int) -> np.ndarray:
        assert r == self.next_round, "factors are drawn once per round, in order"
        self.next_round += 1
        m = np.ones(self.n)
        for w, series in self.series:
            m[w] = series_multiplier(series, r)
        if self.jw.size:
            k = r - self.base
            if self.block is None or k >= self.block.shape[1]:
                self.block = np.stack([jitter_block(rng, cv) for rng, cv in self.params])
                self.base, k = r, 0
            m[self.jw] *= self.block[:, k]
        return m


class FastSync:
    """Runs a qualifying synchronous scenario to its end (see the module docstring)."""

    def __init__(self, env: SimEnv) -> None:
        reason = ineligible(env)
        if reason is not None:
            raise ValueError(f"the synchronous fast path does not apply: {reason}")
        self.env = env
        self.scheme = as_sync(env.scheme)
        ws = env.workers
        self.n = len(ws)
        self.t0 = np.array([w.t0_s for w in ws], dtype=np.float64)
        self.speed = np.array([w.samples_per_s for w in ws], dtype=np.float64)
        self.curves = [w.index for w in ws if w.compute_curve is not None]  # tabulated t(b): per worker
        self.plan = allreduce_plan(env, env.scenario.network)  # type: ignore[arg-type]
        self.overlap = env.resolved.overlap
        self.cont = env.contention
        self.compute = _Segments([c.compute for c in env.contention])
        self.network = _Segments([c.network for c in env.contention])
        self.factors = _Factors(env.contention)

    @staticmethod
    def _weights(model: SampleModel | None, batches: tuple[int, ...], plan: RoundPlan, order: np.ndarray) -> np.ndarray:
        """The update's weights in record order (:func:`lbsim.schemes.sample_plan.update_weights`, as SyncDriver)."""
        weights = update_weights(model, batches, plan.tokens, order.tolist())
        return np.array([weights[w] for w in order.tolist()])

    def _ring_s(self, now: float) -> float:
        """:func:`lbsim.simulator.network.ring_allreduce_s` (the same plan), starting at ``now``."""
        if self.n <= 1:
            return 0.0
        return self.plan.duration_s(self.env.gradient_bytes, self.network.at(now))

    def run(self) -> None:
        env, n, scheme = self.env, self.n, self.scheme
        run_end = env.run_end
        numerics = env.numerics
        workers = np.arange(n, dtype=np.int64)
        order = workers.copy()  # the order the workers' compute events fire in on ties
        model = self.env.resolved.context.sample_cost
        max_batch = self.env.resolved.context.max_batch
        batch_tuple = tuple(scheme.initial_batches())
        plan = None if model is None else plan_round(model, 0, scheme, batch_tuple, max_batch)
        if plan is not None:
            batch_tuple = plan.batches
        batches = np.array(batch_tuple, dtype=np.int64)
        factors = self.factors.draw(0)
        t = 0.0
        r = 0
        zeros = np.zeros(n)
        while env.may_update():
            # -- compute: every worker starts at t ------------------------------------------
            units = batches if plan is None else plan.work  # the batch's work (lbsim.samples: units of c(L_ref))
            work = (self.t0 + units / self.speed) * factors
            for w in self.curves:  # WorkerSpec.compute_s with a tabulated curve
                spec = self.env.workers[w]
                work[w] = (spec.compute_s(int(batches[w])) if plan is None else spec.compute_work_s(float(units[w]))) \
                    * factors[w]
            f = self.compute.at(t)
            lf = work * f
            end = t + lf
            slow = np.flatnonzero(~(lf <= self.compute.nxt - t))  # crosses a change, or not a step source
            if slow.size:
                cont = self.cont
                for w in slow.tolist():
                    end[w] = cont[w].compute_end(t, float(work[w]))
            fired = t + (end - t)  # when SimPy's timeout fires
            order = order[np.argsort(fired[order], kind="stable")]
            last = int(order[-1])
            ring_start = float(fired[last])
            comm_s = self._ring_s(ring_start)
            if self.overlap.enabled:  # hidden under the last worker's backward, as SyncDriver._ring
                comm_s = exposed_comm_s(comm_s, float(end[last] - t), self.overlap)
            update_s = ring_start + comm_s
            if not run_end.update_made(update_s):
                assert run_end.budget_s is not None
                env._now = run_end.budget_s  # the budget's timeout ends the run first
                env.stopped = True
                return
            # -- the update -----------------------------------------------------------------
            env._now = update_s
            samples = int(batches.sum())
            update = env.record_update(samples, n)
            if numerics is not None:
                numerics.sync_update([(w, batch_tuple[w], batch_tuple[w]) for w in order.tolist()], update_s)
            final = not env.may_update()
            compute_s = np.minimum(fired, end) - t
            comm = update_s - ring_start
            b = batches[order]
            cs = compute_s[order]
            env.iterations.extend_columns({
                "worker": order, "iteration": np.full(n, r, dtype=np.int64),
                "update": np.full(n, update, dtype=np.int64), "start_s": np.full(n, t),
                "compute_s": cs, "comm_s": np.full(n, comm), "wait_s": ((update_s - t) - cs - comm) - 0.0,
                "end_s": np.full(n, update_s), "batch": b, "staleness": np.zeros(n, dtype=np.int64),
                "dropped": np.zeros(n, dtype=bool), "fetch_s": zeros,
                "weight": b / samples if plan is None else self._weights(model, batch_tuple, plan, order),
                "cut": np.zeros(n, dtype=bool),  # the ring ends at the update: nothing is cut
            })
            if final:
                env.stopped = True
                return
            # -- the scheme decides the next round at the barrier ------------------------------
            factors = self.factors.draw(r + 1)
            f_next = self.compute.at(update_s)
            obs = WorkerColumns(
                worker=workers, batch=batches, compute_s=end - t, comm_s=zeros, wait_s=zeros,
                cpu_available=np.minimum(1.0, 1.0 / f_next), oracle_slowdown=f_next * factors,
                fetch_s=zeros, local_samples=batches, remote_samples=np.zeros(n, dtype=np.int64),
                work=None if plan is None else plan.work,
            )
            new = tuple(scheme.next_batches(RoundObservation(update, update_s, obs)))
            if model is not None:
                plan = plan_round(model, r + 1, scheme, new, max_batch)
                new = plan.batches
            if new != batch_tuple:
                batch_tuple = new
                batches = np.array(new, dtype=np.int64)
            t = update_s
            r += 1


assert set(ITERATION_DTYPES) == set(ITERATION_COLUMNS)
