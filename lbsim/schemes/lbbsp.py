"""LB-BSP — load-balanced BSP (Chen, Weng, Wang, B. Li, B. Li; SoCC'20, arXiv 1806.02508).

Rule (schemes.md): BSP's barrier and statistics, but at every iteration boundary each worker's
batch is re-sized so that all workers finish computing together, keeping ``sum x_i = X``; the
update is the batch-weighted mean ``g = sum_i (x_i / X) g_i``. Variants:

* ``cpu`` — predict each worker's next sample speed v̂_i from its history and its CPU/memory
  readings (predictor ``narx``, ``ema``, ``last``, or the ``oracle`` ablation), then
  ``x_i = X v̂_i / sum_j v̂_j``, integerised by largest remainders within ``[min_batch, cap_i]``.
* ``gpu`` — the windowed straggler→leader step rule with step halving, window widening and a
  dead band (:mod:`lbsim.sizing.gpu_step`).
* ``gpu_model`` — fit each worker's ``t_i(x) = a_i + b_i x`` online (:mod:`lbsim.sizing.affine_fit`)
  and water-fill ``min max_i t_i(x_i)`` under the caps (:mod:`lbsim.sizing.waterfill`).
* ``auto`` — per worker kind: CPU workers as in ``cpu`` (``t = x / v̂``), GPU workers as in
  ``gpu_model``; one water-filling over all.

Dead band (``split_dead_band`` = δ, an option; 0 by default, the paper's rule): with the predicted
curves ``t_i(x) = a_i + b_i x``, the new split x' replaces the current x only if
``max_i t_i(x'_i) < (1 - δ) max_i t_i(x_i)`` — a re-split that would gain less than δ of the step is
noise-chasing (a shared machine's speeds move a few percent from step to step) and is skipped.
When the current split's predicted times already lie within δ of each other (``(max - min) / max
<= δ``, a bound on any re-split's gain) no split is computed at all.

Rhythm (options ``decide_every`` m, ``decision_lag`` L; 1 and 0 by default, the paper's rule): one
observation per window of m rounds (the mean of its compute times) and its decision taking effect
L windows later — how :mod:`lbsim.runtime.ddp`'s balancer runs it (m = 4, L = 2 by default), so the
simulator can predict what the library buys.

Cost balance (``balance: cost``, with ``workload.sample_cost``; beyond the paper, which counts
samples): the curves are fitted on each batch's *work* ``U_i = sum_j c(L_j) / c(L_ref)`` instead of
its count, and at the barrier, knowing the next round's samples and their lengths, the scheme
partitions them so the predicted ``t_i(U_i) = a_i + b_i U_i`` equalise within the caps in samples and
tokens (:mod:`lbsim.sizing.length_partition`). With every sample of a round costing the same it
keeps the count split, which then is exactly the same decision.

Our choices where the paper is silent (all parameters): the first round uses the nominal
catalog curves (``initial: nominal``) or an even split (``initial: even``); prediction error is
reported as the error of the predicted compute time of the batch actually given (for ``gpu``,
which does not predict, the ``gpu_model`` fit's prediction is reported for comparison).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from lbsim.errors import InputError
from lbsim.fields import param
from lbsim.limits import MAX_HISTORY
from lbsim.rng import stream
from lbsim.samples.rounds import RoundSamples, contiguous_owner, per_worker
from lbsim.schemes.base import RoundObservation, SchemeContext, observation_columns
from lbsim.schemes.registry import register_scheme
from lbsim.sizing.affine_fit import AffineFitBank
from lbsim.sizing.gpu_step import GpuStepRule
from lbsim.sizing.length_partition import cost_partition
from lbsim.sizing.narx import NarxParams
from lbsim.sizing.predictors import PredictorBank
from lbsim.sizing.split import InfeasibleSplit, even_split, proportional_split
from lbsim.sizing.waterfill import equalize_affine


@dataclass(frozen=True)
class LBBSPConfig:
    """LB-BSP's settings: the variant, the CPU speed predictor and its NARX net, the GPU step rule's window."""

    variant: Literal["auto", "cpu", "gpu", "gpu_model"] = param("auto", "auto (per worker kind), cpu, gpu (step rule) or gpu_model (fitted t(x))")
    predictor: Literal["narx", "ema", "last", "oracle"] = param("narx", "CPU speed predictor; oracle = the engine's true next speed (ablation bound)")
    initial: Literal["nominal", "even"] = param("nominal", "first round: equalise the catalog's nominal t(b), or split evenly")
    min_batch: int = param(1, "smallest batch any worker is given", ge=1)
    ema_alpha: float = param(0.5, "ema: weight of the newest speed", gt=0, le=1)
    narx_speed_delays: int = param(3, "narx: past speeds fed to the net (d_v)", ge=1, le=MAX_HISTORY)
    narx_input_delays: int = param(3, "narx: past CPU/memory readings fed besides the current one (d_u)", ge=0, le=MAX_HISTORY)
    narx_hidden: int = param(10, "narx: tanh units in the hidden layer", ge=1, le=MAX_HISTORY)
    narx_warmup: int = param(20, "narx: observations before the net is used (until then: last value)", ge=1, le=MAX_HISTORY)
    narx_learning_rate: float = param(0.01, "narx: learning rate of online training", gt=0)
    step0: int | None = param(None, "gpu: initial step in samples (null: max(1, X / (4 n)))", gt=0)
    window: int = param(5, "gpu: initial window in iterations", ge=1, le=MAX_HISTORY)
    max_window: int = param(40, "gpu: the window stops doubling here", ge=1, le=MAX_HISTORY)
    dead_band: float = param(0.05, "gpu: no move while (slowest - leader) / slowest is below this", ge=0, le=1)
    fit_history: int = param(20, "gpu_model: observations kept per worker for the fit", ge=2, le=MAX_HISTORY)
    fit_decay: float = param(0.8, "gpu_model: weight decay per iteration of age in the fit", gt=0, le=1)
    balance: Literal["count", "cost"] = param(
        "count", "count: equalise t(batch) over sample counts (the paper's rule); cost: fit t(work) on each batch's "
                 "work in reference samples and partition the next round's samples by their lengths so predicted "
                 "times equalise (LPT + moves, within the caps; needs workload.sample_cost)")
    split_dead_band: float = param(0.0, "cpu, gpu_model, auto: keep the current split unless the new one shortens the predicted "
                                   "step (slowest worker) by more than this fraction (0: re-split every round, the paper's rule)",
                                   ge=0, le=1)
    decide_every: int = param(1, "rounds per observation window: one decision per window, from its mean compute times "
                                 "(1: every round, the paper's rule; lbsim.runtime.ddp: 4)", ge=1, le=MAX_HISTORY)
    decision_lag: int = param(0, "windows between a window's end and its decision taking effect (0: the next round, the "
                                 "paper's rule; lbsim.runtime.ddp: 2, its decisions travel in flight)", ge=0, le=MAX_HISTORY)


WARM_ROUNDS = 4  # windowed rhythm: the first rounds are one-round windows (the library's first gathers, every step)


@register_scheme("lbbsp", LBBSPConfig)
class LBBSP:
    """Load-balanced BSP: re-size every worker's batch at each barrier to equalise finish times."""

    name: ClassVar[str]
    driver: ClassVar[str] = "sync"

    def __init__(self, config: LBBSPConfig, ctx: SchemeContext) -> None:
        self.cfg = config
        self.ctx = ctx
        n = ctx.workers
        self.required_gradients = n
        self.t0 = np.array(ctx.t0_s)
        self.inv_speed = 1.0 / np.array(ctx.samples_per_s)
        self.kinds = ctx.kinds
        narx = NarxParams(
            speed_delays=config.narx_speed_delays, input_delays=config.narx_input_delays,
            hidden=config.narx_hidden, warmup=config.narx_warmup, learning_rate=config.narx_learning_rate,
        )
        # Which workers' curves come from a speed predictor (t = x / v̂) and which from the affine
        # fit; only those predictors and fits are kept (the others would never be asked).
        oracle = config.predictor == "oracle"
        self.cpu_like = np.array([config.variant == "cpu" or (config.variant == "auto" and k == "cpu") for k in ctx.kinds],
                                 dtype=bool) & (not oracle)
        self.fitted = ~self.cpu_like & (not oracle)
        self.pred_idx = np.flatnonzero(self.cpu_like)
        self.fit_idx = np.flatnonzero(self.fitted)
        self.predictors = PredictorBank(
            config.predictor, len(self.pred_idx), ema_alpha=config.ema_alpha, narx=narx,
            rngs=[stream(ctx.seed, "narx", int(i)) for i in self.pred_idx] if config.predictor == "narx" else None,
        )
        self.fits = AffineFitBank(self.t0[self.fit_idx], self.inv_speed[self.fit_idx], history=config.fit_history,
                                  decay=config.fit_decay)
        # CPU/memory readings at the start of each worker's current iteration
        self.readings = (np.ones(n), np.ones(n))
        # what a decision reads from the observation (fewer fields: less to extract from objects)
        self._fields = ("batch", "compute_s") + (("cpu_available", "mem_available") if self.pred_idx.size else ()) \
            + (("oracle_slowdown",) if oracle else ())
        self.predicted_s: np.ndarray | None = None
        self._abs_err: list[np.ndarray] = []  # per round, kept as arrays (diagnostics average them all)
        self._rel_err: list[np.ndarray] = []
        try:
            if config.initial == "even":
                self._batches = even_split(ctx.global_batch, n)
                if any(b > c for b, c in zip(self._batches, ctx.max_batch, strict=False)):
                    raise InfeasibleSplit("an even split exceeds a worker's memory cap; use initial: nominal")
            else:
                self._batches = self._equalize(self.t0, self.inv_speed)
        except InfeasibleSplit as err:
            raise InputError("workload.global_batch", str(err)) from None
        self.predicted_s = self.t0 + self.inv_speed * np.array(self._batches)
        self.cost_aware = config.balance == "cost"
        self._curves = (self.t0, self.inv_speed)  # the predicted t_i(work) = a_i + b_i work of the next round
        if self.cost_aware:
            if ctx.sample_cost is None:
                raise InputError("scheme.balance", "cost needs workload.sample_cost (the samples' lengths); valid here: count")
            if config.variant == "gpu":
                raise InputError("scheme.balance", "cost needs predicted t(work) curves: variant cpu, gpu_model or auto, not gpu")
            if config.decide_every > 1 or config.decision_lag > 0:
                raise InputError("scheme.balance", "cost partitions each round's own samples with the curves of the round "
                                 "before: it needs decide_every 1 and decision_lag 0; valid with a slower rhythm: count")
        step0 = config.step0 or max(1, ctx.global_batch // (4 * n))
        self.step_rule = GpuStepRule(
            self._batches, ctx.max_batch, step0=step0, window=config.window,
            max_window=config.max_window, dead_band=config.dead_band, min_batch=config.min_batch,
        )
        self._windowed = config.decide_every > 1 or config.decision_lag > 0
        self._round = 0
        self._window: list[dict[str, np.ndarray | None]] = []
        self._pending: list[tuple[int, tuple[int, ...]]] = []  # (first round it runs, split)
        self._running = self._batches

    def _equalize(self, a: np.ndarray, b: np.ndarray) -> tuple[int, ...]:
        return equalize_affine(self.ctx.global_batch, a, b, self.ctx.max_batch, min_batch=self.cfg.min_batch)

    def initial_batches(self) -> tuple[int, ...]:
        """The first round's batches (``initial``: the nominal curves equalised, or an even split)."""
        return self._batches

    def next_batches(self, observation: RoundObservation) -> tuple[int, ...]:
        """The next round's batches from the round observed (its work in place of its count when cost-aware)."""
        obs = observation_columns(observation.workers, self._fields + (("work",) if self.cost_aware else ()))
        if self.cost_aware:  # the curves are fitted on each batch's work, not its sample count
            obs = {**obs, "batch": obs["work"]}
        if self._windowed:
            return self._window_round(obs)
        return self._decide(obs)

    def _window_round(self, obs: dict[str, np.ndarray | None]) -> tuple[int, ...]:
        """The library's rhythm (``decide_every`` m, ``decision_lag`` L): round k joins the window; a
        window of w rounds (w = 1 for the first :data:`WARM_ROUNDS`, then m) ending at round e gives one
        observation (its mean compute times), decided at once and run from round ``e + 1 + L w``; a
        window a new split interrupts is dropped (its rounds ran two splits)."""
        k = self._round
        self._round += 1
        self._window.append({f: (None if v is None else v.copy()) for f, v in obs.items()})
        if len(self._window) >= (1 if k < WARM_ROUNDS else self.cfg.decide_every):
            mean = dict(self._window[-1])
            mean["compute_s"] = np.mean([w["compute_s"] for w in self._window if w["compute_s"] is not None], axis=0)
            rounds = len(self._window)
            self._window = []
            self._batches = self._running  # the split that ran: the dead band compares against it
            self._pending.append((k + 1 + self.cfg.decision_lag * rounds, self._decide(mean)))
        while self._pending and self._pending[0][0] <= k + 1:
            split = self._pending.pop(0)[1]
            if split != self._running:
                self._running = split
                self._window = []
        self._batches = self._running
        return self._running

    def _decide(self, obs: dict[str, np.ndarray | None]) -> tuple[int, ...]:
        """The rule on one observation: the next split (and the split in effect becomes it)."""
        measured = obs["compute_s"]
        assert measured is not None  # compute_s is always observed (only oracle_slowdown may be None)
        if self.predicted_s is not None:
            err = np.abs(self.predicted_s - measured)
            self._abs_err.append(err)
            self._rel_err.append(err / measured)
        a, b = self._predict_curves(obs)
        variant = self.cfg.variant
        band = self.cfg.split_dead_band
        if variant == "gpu":
            batches = self.step_rule.observe(measured.tolist())
        elif band > 0 and self._spread(a, b) <= band:  # no split can gain more than the band: none is computed
            batches = self._batches
        else:
            if variant == "cpu":
                batches = proportional_split(self.ctx.global_batch, 1.0 / b, self.ctx.max_batch, min_batch=self.cfg.min_batch)
            else:
                batches = self._equalize(a, b)
            if band > 0 and not self._gains(a, b, batches, band):
                batches = self._batches
        self._batches = tuple(batches)
        self.predicted_s = a + b * np.array(self._batches)
        self._curves = (a, b)
        return self._batches

    def assign_samples(self, samples: RoundSamples) -> np.ndarray:
        """Who computes which of the round's samples (:class:`~lbsim.schemes.base.LengthAware`).

        Count balance hands them out in draw order by the decided batches. Cost balance partitions
        them so the predicted ``a_i + b_i U_i`` equalise (:func:`lbsim.sizing.length_partition.lpt_partition`),
        except when every sample costs the same: then the count split already is the equal-finish
        split, and it is kept (so equal lengths give exactly the count rule's run)."""
        if not self.cost_aware:
            return contiguous_owner(self._batches)
        a, b = self._curves
        try:
            owner = cost_partition(samples, a, b, self.ctx.max_batch, self._batches, self.cfg.min_batch)
        except InfeasibleSplit as err:
            raise RuntimeError(f"lbbsp cost balance: {err}") from None
        u = samples.units
        if u.size and not bool(np.all(u == u[0])):  # equal costs keep the count split and its prediction
            plan = per_worker(samples, owner, self.ctx.workers)
            self._batches = plan.batches
            self.predicted_s = a + b * plan.work
        return owner

    @property
    def curves(self) -> tuple[np.ndarray, np.ndarray]:
        """The predicted ``t_i(U) = a_i + b_i U`` of the next round, as ``(a, b)`` (U: work in reference samples)."""
        return self._curves

    def _gains(self, a: np.ndarray, b: np.ndarray, batches: tuple[int, ...], band: float) -> bool:
        """The split ``batches`` shortens the predicted step of the current one by more than ``band`` of it."""
        now = float(np.max(a + b * np.array(self._batches)))
        new = float(np.max(a + b * np.array(batches)))
        return new < (1.0 - band) * now

    def _spread(self, a: np.ndarray, b: np.ndarray) -> float:
        """``(max - min) / max`` of the current split's predicted times: a bound on any re-split's gain.

        Any split x' of the same total has ``max_i t_i(x'_i) >= min_i t_i(x_i)`` (the t_i increase
        with x; were every t_i(x'_i) below the smallest current time, every x'_i would be below x_i
        and the total short), so no re-split gains more than this spread."""
        t = a + b * np.array(self._batches)
        hi = float(np.max(t))
        return (hi - float(np.min(t))) / hi if hi > 0 else 0.0

    def _predict_curves(self, obs: dict[str, np.ndarray | None]) -> tuple[np.ndarray, np.ndarray]:
        """Each worker's predicted next compute time as ``a + b x`` (every worker at once).

        Per worker this is: observe the speed ``batch / compute_s`` of the round (with the
        readings taken at its start) and the point (batch, compute_s); then the oracle's
        ``t0 s, s / v`` with s its true slowdown, or for CPU-like workers ``0, 1 / v̂`` with v̂
        the predictor's answer for the readings now, or else the affine fit's ``(a, b)``.
        """
        n = self.ctx.workers
        batch, compute_s = obs["batch"], obs["compute_s"]
        if self.cfg.predictor == "oracle":
            slow = obs["oracle_slowdown"]
            if slow is None:
                raise RuntimeError("predictor 'oracle' needs an engine that knows the future (the simulator)")
            return self.t0 * slow, self.inv_speed * slow
        p, f = self.pred_idx, self.fit_idx
        if f.size == n:  # every worker fitted (gpu, gpu_model, auto on GPUs): no indexing
            self.fits.observe(batch, compute_s)  # type: ignore[arg-type]
            return self.fits.coefficients()
        a = np.zeros(n)
        b = np.zeros(n)
        if p.size:  # the readings matter only to the speed predictors
            cpu, mem = obs["cpu_available"], obs["mem_available"]
            cpu_then, mem_then = self.readings
            self.readings = (cpu.copy(), mem.copy())  # type: ignore[union-attr]
            self.predictors.observe(batch[p] / compute_s[p], cpu_then[p], mem_then[p])  # type: ignore[index]
            b[p] = 1.0 / self.predictors.predict(cpu[p], mem[p])  # type: ignore[index]
        if f.size:
            self.fits.observe(batch[f], compute_s[f])  # type: ignore[index]
            a[f], b[f] = self.fits.coefficients()
        return a, b

    def diagnostics(self) -> dict[str, object]:
        """Summary figures: the prediction errors (MAE, MAPE) and the GPU step rule's final state."""
        out: dict[str, object] = {"variant": self.cfg.variant, "predictor": self.cfg.predictor}
        if self._abs_err:
            out["prediction_mae_s"] = float(f"{np.mean(np.concatenate(self._abs_err)):.12g}")
            out["prediction_mape"] = float(f"{np.mean(np.concatenate(self._rel_err)):.12g}")
        if self.cfg.variant == "gpu":
            out["gpu_step_halvings"] = self.step_rule.halvings
            out["gpu_final_step"] = self.step_rule.step
            out["gpu_final_window"] = self.step_rule.window
        return out
