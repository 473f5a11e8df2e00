"""LB-BSP for an ordinary DDP script: each rank's batch for the next step, decided by lbsim's scheme.

The decision is lbsim's own: the ``lbbsp`` scheme (:mod:`lbsim.schemes.lbbsp`) with its sizing
code (:mod:`lbsim.sizing` — speed predictors, affine fits, water-filling, the GPU step rule), the
same objects the simulator and the runtime call. One step, on every rank::

    step k starts      the batch sampler hands rank r its b_r samples; clock starts
    forward/backward   the DDP hook marks the clock at each ready bucket and sends b_r/B * bucket
    step k+1 starts    all_gather (async) one row per rank: [b_r, compute_s_r, cpu_available_r, mem_available_r | 0...]
    step k+2 starts    rank 0: scheme.next_batches(RoundObservation) -> (b_0', ..., b_{n-1}'), written in
                       rank 0's row of this step's all_gather: identical batches on every rank
                       (whatever each rank's floating-point library would have computed)
    step k+3 starts    the decision is in effect on every rank

``lag=0`` (LB-BSP's own timing, the mode lbsim's synchronous loop runs in): the call at the start
of step k+1 all-gathers step k's observations and waits, rank 0 decides, a broadcast gives every
rank the decision, and step k+1 already runs it — two blocking collectives per step instead of one
in flight. Both modes decide with :class:`lbsim.runtime.ddp.decision.Decider`, the code ``lbsim train``
decides with.

Library defaults (differing from the scheme's, which keep the paper's rule): predictor ``ema``,
``split_dead_band`` 0.1 (no re-split that would gain less than 10 % of the predicted step) and
``decide_every`` 4 (one observation, the mean of 4 steps, and one decision per 4 steps): a DDP
job's speeds move from step to step with the machine's scheduling, following that noise costs more
than it balances, and a collective and a decision per step cost ~1-2 % of a 35 ms step
(docs/library.md). ``predictor="narx", split_dead_band=0.0, decide_every=1`` give the scheme's rule
at every step.

``compute_s`` is the rank's own work (:mod:`lbsim.runtime.ddp.timing`), never the wait for the others,
plus the rank's time in the balancer before the step (rank 0's decision included): the scheme then
balances the decision's cost like any other work.
``cpu_available`` is measured from ``/proc/stat`` and ``psutil`` (:class:`lbsim.runtime.resources.ResourceReader`)
or, under an emulated slowdown, the schedule's ``1/f``; ``mem_available`` is ``psutil``'s. They are
read only when the variant has CPU-like workers (``cpu``, or ``auto`` on CPU ranks) and the
predictor is ``narx`` (``ema`` and ``last`` ignore them).

The variants are the scheme's: ``cpu`` (x_i ∝ predicted speed; predictors ``narx``, ``ema``,
``last``), ``gpu`` (the windowed step rule), ``gpu_model`` (fitted ``t_i(x) = a_i + b_i x``,
water-filled) and ``auto`` (per rank: ``cpu`` on CPU ranks, ``gpu_model`` on CUDA ranks). Memory
caps (``max_batch``) are the scheme's bounds: no rank is ever given more than its cap. The
``oracle`` predictor needs the future and exists only in the simulator.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from lbsim.samples.rounds import RoundSamples, per_worker
from lbsim.schemes.base import SchemeContext
from lbsim.schemes.lbbsp import LBBSPConfig
from lbsim.schemes.registry import build_scheme
from lbsim.sizing.length_partition import cost_partition
from lbsim.sizing.split import proportional_split

from ..resources import ResourceReader
from .decision import Decider, round_observation
from .hook import weighted_sum_hook
from .inject import SlowedRank
from .lengths import Lengths, SampleCosts
from .timing import Lap, StepClock

VARIANTS = ("auto", "cpu", "gpu", "gpu_model")
PREDICTORS = ("narx", "ema", "last")
READ_EVERY_S = 0.1  # CPU/memory readings are refreshed at most this often
UNCAPPED = 2**24  # a batch larger than any real one (batch sizes travel as exact float32/int64)
LAGS = (0, 2)
LIBRARY_OPTIONS = {"split_dead_band": 0.1}  # the library's defaults for LBBSPConfig fields (the scheme's: 0)
_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor  # its newer name, where it exists


class LoadBalancer:
    """Per-rank batch sizes by LB-BSP, the weighted gradient hook and the step clock, for one process group.

    Create it on every rank after ``init_process_group`` (it makes collectives). ``global_batch``:
    ``B``, kept exact at every step. ``max_batch``: this rank's memory cap in samples (None:
    uncapped). ``samples_per_s``: this rank's nominal speed (the first step's split and the fits'
    prior; None: all equal). ``options``: any other :class:`~lbsim.schemes.lbbsp.LBBSPConfig`
    field (``min_batch``, ``ema_alpha``, ``narx_*``, ``window``, ...). ``slowed``: an emulated
    slowdown for this rank (benchmarks and tests; :mod:`lbsim.runtime.ddp.inject`). ``decide_every``:
    steps per observation window (1: every step, as LB-BSP; m > 1: one collective and one decision
    every m steps, from the window's mean compute time — the overhead divided by m; the first
    decision is still taken from the first step, as with m = 1). ``lag``: 2
    (default: decisions in flight, nothing waits) or 0 (decided before the next step starts, see above).
    """

    def __init__(self, global_batch: int, *, variant: str = "auto", predictor: str = "ema", seed: int = 0,
                 max_batch: int | None = None, samples_per_s: float | None = None, group: Any = None,
                 device: torch.device | None = None, slowed: SlowedRank | None = None, decide_every: int = 4,
                 lag: int = 2, lengths: Lengths | None = None, cost_linear: float = 1.0, cost_quadratic: float = 0.0,
                 cost_per_sample: float = 0.0,
                 reference_tokens: float | None = None, max_tokens: int | None = None, batching: str = "packing",
                 gradient_mean: str = "per_sample", **options: Any) -> None:
        if predictor == "oracle":
            raise ValueError("predictor 'oracle' needs the future and exists only in the simulator; "
                             "valid here: narx, ema, last")
        if predictor not in PREDICTORS or variant not in VARIANTS:
            raise ValueError(f"variant {variant!r} / predictor {predictor!r}: valid variants {', '.join(VARIANTS)}; "
                             f"predictors {', '.join(PREDICTORS)}")
        if decide_every < 1:
            raise ValueError(f"decide_every must be >= 1, got {decide_every}")
        if "decision_lag" in options:  # the scheme's simulated rhythm: here the balancer's own lag and decide_every
            raise ValueError("decision_lag is the simulator's model of the balancer's rhythm: give lag=0 or lag=2 here")
        if lag not in LAGS:
            raise ValueError(f"lag must be one of {LAGS}, got {lag}")
        if not dist.is_initialized():
            raise RuntimeError("LoadBalancer needs torch.distributed to be initialised (init_process_group) first")
        self.group = group
        self.rank = dist.get_rank(group)
        self.world = dist.get_world_size(group)
        backend = dist.get_backend(group)
        self.device = device if device is not None else (
            torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu"))
        self.comm_device = self.device if backend == "nccl" else torch.device("cpu")
        self.costs = None if lengths is None else SampleCosts(
            lengths, cost_linear=cost_linear, cost_quadratic=cost_quadratic, cost_per_sample=cost_per_sample,
            reference_tokens=reference_tokens,
            max_tokens=max_tokens, batching=batching, gradient_mean=gradient_mean, seed=seed)
        if self.costs is not None:  # every rank partitions each step's samples with curves known before it: lag 0
            lag, options = 0, {**options, "balance": "cost"}
        self.config = LBBSPConfig(variant=variant, predictor=predictor, initial="nominal",  # type: ignore[arg-type]
                                  **{**LIBRARY_OPTIONS, **options})
        self.lag = lag
        # the first decision comes as early as with decide_every=1: gather at each of the first calls
        # (lag 2: the first five, the fourth decides from step 1 and the fifth adopts it; lag 0: the
        # first three, the third decides from step 1), then every m
        self._warm_calls = 5 if lag == 2 else 3
        self.global_batch = int(global_batch)
        mine = [1.0 if self.device.type == "cuda" else 0.0, float(max_batch or UNCAPPED), float(samples_per_s or 1.0)]
        table = self._gather(mine)
        kinds = tuple("gpu" if row[0] > 0 else "cpu" for row in table)
        caps = tuple(int(row[1]) for row in table)
        ctx = SchemeContext(global_batch=self.global_batch, t0_s=(0.0,) * self.world,
                            samples_per_s=tuple(float(row[2]) for row in table), max_batch=caps,
                            kinds=kinds, seed=seed,  # type: ignore[arg-type]
                            sample_cost=None if self.costs is None else self.costs.model)
        self.caps = caps
        low = self.world * self.config.min_batch
        if not low <= self.global_batch <= sum(caps):  # checked on every rank: no rank waits for a failed one
            raise ValueError(f"global_batch {self.global_batch} must lie in [{low}, {sum(caps)}] "
                             f"({self.world} ranks x min_batch {self.config.min_batch}, the sum of the ranks' max_batch)")
        self.decider = Decider(build_scheme(self.config, ctx)) if self.rank == 0 else None
        self.scheme = self.decider.scheme if self.decider is not None else None
        self.batches = self._broadcast(list(self.decider.initial()[0]) if self.decider is not None else None)
        # cost balance: the predicted t_r(U) = a_r + b_r U every rank partitions with (the scheme's nominal curves first)
        self.curves = (np.zeros(self.world), 1.0 / np.array(ctx.samples_per_s))
        self.step_tokens: tuple[int, ...] | None = None
        self._step_work = (0.0, 0.0)  # cost balance: the step's (samples, work) on this rank
        self._work_window = [0.0, 0.0]  # cost balance: the window's observed steps' samples and work
        self.readings = self.config.predictor == "narx" and (  # ema and last ignore the readings: none taken
            self.config.variant == "cpu" or (self.config.variant == "auto" and "cpu" in kinds))
        self.reader = ResourceReader() if self.readings else None
        self.clock = StepClock(self.device)
        self.slowed = slowed
        self.weight = 1.0 / self.world
        self.step_batches: tuple[int, ...] | None = None  # the batches of the step in progress
        self.steps = 0
        self.overhead_s = 0.0  # wall time in next_batches (all steps): bookkeeping, rank 0's decision, collectives
        self.overhead_cpu_s = 0.0  # the same, CPU time of this thread (not inflated by other processes' load)
        self.history: list[tuple[int, ...]] = []  # the batches of every step, in order
        self._observable = False
        self._pre_s = 0.0  # this rank's time in next_batches before the current step (counted as its work)
        self._read_at = -1e9
        self._last_readings = (1.0, 1.0)
        self.decide_every = decide_every
        self.batches_run = self.batches  # the batches of the current observation window
        self._calls = 0
        self._window = [0.0, 0.0, 0.0]  # steps observed, their bookkeeping time, a shortened step among them
        self._laps: list[Lap] = []  # the window's steps' compute times, read when the window is
        self._inflight: tuple[Any, torch.Tensor] | None = None  # in flight: all_gather of the last observation
        self._decision: tuple[int, ...] | None = None  # rank 0: decided, not yet sent

    # -- collectives -----------------------------------------------------------------------------------
    def _gather(self, row: Sequence[float]) -> list[list[float]]:
        t = torch.tensor(list(row), dtype=torch.float64, device=self.comm_device)
        out = [torch.empty_like(t) for _ in range(self.world)]
        dist.all_gather(out, t, group=self.group)
        return [o.tolist() for o in out]

    @property
    def _root(self) -> int:
        return dist.get_global_rank(self.group, 0) if self.group is not None else 0

    def _broadcast(self, batches: list[int] | None) -> tuple[int, ...]:
        t = torch.tensor(batches if batches is not None else [0] * self.world, dtype=torch.int64, device=self.comm_device)
        dist.broadcast(t, self._root, group=self.group)
        return tuple(int(v) for v in t.tolist())

    # -- the step cycle ----------------------------------------------------------------------------------
    def next_batches(self) -> tuple[int, ...]:
        """Every rank's batch for the next step (collective: call on every rank, once per step).

        ``lag=2``: one asynchronous ``all_gather`` per window of ``decide_every`` steps (below, m = 1)
        and no wait inside a step: the call at the start of step k launches the gather of step k-1's
        observations (rank 0's row also carries its latest decision); the call at step k+1 finds it
        done, and rank 0 decides from it; that decision rides the next gather and is applied at step
        k+2 on every rank (a lag of two steps; of two windows for m > 1). The
        scheme always learns from the batch a rank really ran, so only the ``gpu`` variant's step
        rule (which attributes a measurement to its latest decision) is affected by the lag.
        ``lag=0``: the gather of step k-1's observations is waited for, rank 0 decides and broadcasts,
        and step k runs the decision.
        """
        t, cpu0 = time.perf_counter(), time.thread_time()
        if self.step_batches is not None:  # the step just finished joins this window's observation
            if self._observable:
                self._window[0] += 1.0
                self._window[1] += self._pre_s  # its share of the bookkeeping, counted as its work
                self._laps.append(self.clock.lap())  # its compute time, read when the window is (one GPU sync)
                self._work_window[0] += self._step_work[0]
                self._work_window[1] += self._step_work[1]
            else:
                self._window[2] = 1.0  # an epoch's shortened last step: the window teaches nothing
            self.step_batches = None
        self._calls += 1
        shared_s = 0.0  # lag 0: the blocking gather, rank 0's decision and the broadcast hold every rank alike
        if self._calls <= self._warm_calls or self._calls % self.decide_every == 0:  # a gathering step
            if self.lag == 0:
                t_shared = time.perf_counter()
                self._gather_and_decide()
                shared_s = time.perf_counter() - t_shared
            else:
                self._exchange()
        self._pre_s = time.perf_counter() - t - shared_s  # counted as this rank's work in the next observation
        self.overhead_s += self._pre_s + shared_s
        self.overhead_cpu_s += time.thread_time() - cpu0
        return self.batches

    def _observation_row(self, width: int) -> list[float]:
        """[b, mean compute_s, cpu, mem | 0 ...] of the window just ended (zeros: nothing to learn), and a new window.

        Cost balance: [mean b, mean compute_s, cpu, mem, mean work] (the steps' samples differ; the mean
        of points on an affine t(U) lies on it)."""
        row = [0.0] * width
        steps, busy_s, spoilt = self._window
        if steps > 0 and not spoilt:  # one step's batch and mean compute time over the window (same batches)
            busy_s += sum(lap.seconds() for lap in self._laps)
            row[:4] = [float(self.batches_run[self.rank]), busy_s / steps, *self._readings()]
            if self.costs is not None:
                row[0] = self._work_window[0] / steps
                row[4] = self._work_window[1] / steps
        self._window = [0.0, 0.0, 0.0]
        self._work_window = [0.0, 0.0]
        self._laps = []
        self.batches_run = self.batches
        return row

    def _exchange(self) -> None:
        """lag 2: finish the gather in flight (adopt rank 0's decision in it, rank 0 decides anew), launch the next."""
        n = self.world
        if self._inflight is not None:
            work, out = self._inflight
            work.wait()
            self._inflight = None
            table = out.view(n, 4 + n).tolist()
            if table[0][4] > 0:  # rank 0's decision from the gather before
                self.batches = tuple(int(v) for v in table[0][4:])
            self._decision = self._decide(table)
        row = self._observation_row(4 + n)
        if self._decision is not None:
            row[4:] = [float(v) for v in self._decision]
            self._decision = None
        mine = torch.tensor(row, dtype=torch.float64, device=self.comm_device)
        out = torch.empty(n * (4 + n), dtype=torch.float64, device=self.comm_device)  # flat: what gloo accepts
        self._inflight = (_gather_single(out, mine, group=self.group, async_op=True), out)

    def _gather_and_decide(self) -> None:
        """lag 0: gather the window's observations, rank 0 decides, every rank takes the decision now."""
        n = self.world
        width = 4 if self.costs is None else 5
        mine = torch.tensor(self._observation_row(width), dtype=torch.float64, device=self.comm_device)
        out = torch.empty(n * width, dtype=torch.float64, device=self.comm_device)
        _gather_single(out, mine, group=self.group)
        decided = self._decide(out.view(n, width).tolist())
        if self.costs is None:
            learnt = self._broadcast(list(decided) if decided is not None else None)
        else:  # the batches and rank 0's curves in one broadcast (float64: batches exact), bit for bit on every rank
            a, b = self.scheme.curves if self.scheme is not None else (np.zeros(n), np.zeros(n))
            head = [float(v) for v in decided] if decided is not None else [0.0] * n
            t = torch.tensor(head + np.concatenate([a, b]).tolist(), dtype=torch.float64, device=self.comm_device)
            dist.broadcast(t, self._root, group=self.group)
            flat = t.cpu().numpy()
            learnt = tuple(int(v) for v in flat[:n])
            self.curves = (flat[n:2 * n].copy(), flat[2 * n:].copy())
        if learnt[0] > 0:  # zeros: nothing was decided (a window that taught nothing)
            self.batches = self.batches_run = learnt  # the next window runs the decision

    def _readings(self) -> tuple[float, float]:
        """(cpu_available, mem_available): the schedule's under an emulated slowdown, else measured at
        most every ``READ_EVERY_S`` (``/proc/stat`` is counted in 10 ms ticks; reading it costs ~0.2 ms)."""
        if self.reader is None:
            return 1.0, 1.0
        now = time.monotonic()
        if now - self._read_at >= READ_EVERY_S:
            cpu = self.reader.cpu_available() if self.slowed is None else 1.0
            self._last_readings = (cpu, self.reader.mem_available())
            self._read_at = now
        if self.slowed is not None:
            return self.slowed.cpu_available(), self._last_readings[1]
        return self._last_readings

    def _decide(self, table: list[list[float]]) -> tuple[int, ...] | None:
        """Rank 0: the scheme's next batches from one gathered row per rank (None elsewhere, and when a
        rank's window taught nothing: an epoch's shortened step, or no step yet)."""
        if self.decider is None or not all(row[0] > 0 for row in table):
            return None
        cols = list(zip(*table, strict=True))
        obs = round_observation(self.decider.decisions, 0.0, cols[0], [max(v, 1e-9) for v in cols[1]], cols[2], cols[3],
                                work=cols[4] if self.costs is not None else None)
        return self.decider.decide(obs)[0]

    def finish(self) -> None:
        """Wait for the balancer's collectives still in flight (call on every rank before destroying the group)."""
        if self._inflight is not None:
            self._inflight[0].wait()
        self._inflight = None

    def split(self, total: int, like: Sequence[int]) -> tuple[int, ...]:
        """``total`` samples split in proportion to ``like`` within the caps (an epoch's last step)."""
        if total == sum(like):
            return tuple(like)
        return proportional_split(total, [max(b, 1) for b in like], self.caps, min_batch=1)

    def assign(self, indices: Sequence[int]) -> tuple[np.ndarray, RoundSamples]:
        """Cost balance: the owner rank of each of a step's samples (dataset ``indices``), the same on
        every rank (:func:`lbsim.sizing.length_partition.cost_partition` with the curves every rank holds)."""
        assert self.costs is not None, "assign needs lengths"
        samples = self.costs.samples(indices)
        owner = cost_partition(samples, self.curves[0], self.curves[1], self.caps,
                               self.split(len(indices), self.batches), self.config.min_batch)
        return owner, samples

    def begin_cost_step(self, owner: np.ndarray, samples: RoundSamples, *, full: bool = True) -> None:
        """Cost balance: the step whose samples ``owner`` assigns starts now (``full``: a step of the
        global batch, observed; an epoch's shortened step is not)."""
        plan = per_worker(samples, owner, self.world)
        self._step_work = (float(plan.batches[self.rank]), float(plan.work[self.rank]))
        self.step_tokens = tuple(int(t) for t in plan.tokens)
        self.begin_step(plan.batches, observable=full)

    def begin_step(self, batches: Sequence[int], *, observable: bool | None = None) -> None:
        """Step with ``batches`` starts now on this rank: set the hook's weight, start the clock."""
        self.step_batches = tuple(batches)
        # DDP's first step is not a rank's speed (lazy initialisation, allocator warm-up, DDP rebuilds
        # its buckets after it): it is not observed
        same = self.step_batches == self.batches if observable is None else observable
        self._observable = same and self.steps > 0
        self.history.append(self.step_batches)
        if self.costs is not None and self.costs.model.per_token and self.step_tokens is not None:
            self.weight = self.step_tokens[self.rank] / sum(self.step_tokens)  # per-token mean over the global batch
        else:
            self.weight = self.step_batches[self.rank] / sum(self.step_batches)
        self.steps += 1
        if self.slowed is not None:
            self.slowed.begin()
        self.clock.start()

    def on_bucket(self) -> None:
        """A gradient bucket is ready (called by the hook): emulated slowdown, then mark the clock."""
        if self.slowed is not None:
            self.slowed.after_bucket()
        self.clock.mark()

    # -- wiring --------------------------------------------------------------------------------------------
    def attach(self, ddp_model: torch.nn.parallel.DistributedDataParallel) -> None:
        """Register the batch-weighted comm hook on a DDP model (instead of DDP's averaging)."""
        ddp_model.register_comm_hook(self, weighted_sum_hook)

    def sampler(self, dataset_size: int, *, seed: int = 0, shuffle: bool = True, drop_last: bool = False) -> Any:
        """A batch sampler for ``DataLoader(dataset, batch_sampler=...)`` (see :class:`lbsim.runtime.ddp.sampler.BalancedBatchSampler`)."""
        from .sampler import BalancedBatchSampler

        return BalancedBatchSampler(self, dataset_size, seed=seed, shuffle=shuffle, drop_last=drop_last)
