"""LOFT — locality-aware and fault-tolerant batching (Liu, Ding, Cheng, Zhou; IEEE TCC 12(2) 2024).

Only the paper's abstract is public (schemes-research.md §4). It says: when the dataset is spread
over workers, data fetching is often the real straggler; LOFT sizes each worker's batch from
performance models of fetch and gradient-computation time, with an adaptive grid search, keeps
accuracy, and aggregates with a Byzantine-robust rule on ring all-reduce because the very small
batches of slow workers give Byzantine-like gradients. **Every concrete choice below is ours**,
a reconstruction that fits the abstract, not the paper's method:

1. Round structure: BSP's barrier; all n gradients per update; batches re-planned at every
   barrier from the round's measurements (no dead band).
2. Time model per worker: ``T_i(b, l) = a_i + c_i b + u_i l + v_i (b - l) + lat_i [b > l]``
   (:mod:`lbsim.sizing.locality`): compute ``a_i + c_i b`` fitted online by the same weighted
   ridge fit as LB-BSP's ``gpu_model`` (:class:`~lbsim.sizing.affine_fit.AffineFit`, prior = the
   catalog curve) for GPU *and* CPU workers; per-sample local/remote read times ``u_i, v_i``
   start from the scenario's nominal figures (``lbsim.fetch``) and follow measurements by an
   EMA (``fetch_ema``): ``v_i`` from ``(fetch_s - u_i l - lat_i) / r`` (storage-node queueing
   therefore shows up in ``v_i``), ``u_i`` from batches read wholly locally; ``lat_i`` stays the
   nominal latency.
3. Representative sampling: shard k (each worker's, and the storage node's rest) contributes
   ``q_k`` = largest-remainder integerisation of ``X share_k`` samples to every global batch
   (``sum_k q_k = X``). Worker i reads ``l_i <= min(b_i, q_i)`` of them itself; the other
   ``q_i - l_i`` of its shard, and all of the storage-only rest, are read remotely by the
   workers with remote samples (every remote read is served by the storage node, so which
   worker reads which remote sample does not change any time).
4. Search: minimise the predicted makespan subject to ``sum b_i = X``, memory caps, ``min_batch``
   and (3), by a coarse-to-fine grid search on the common finish time T (``grid_points`` per
   level, to ``search_rel_tol``); per worker the best local count is an end of
   ``[0, min(b, q_i)]`` (the time is linear in l), so both ends are evaluated, not a grid.
   Without a ``data:`` section (data local and free) this is LB-BSP ``gpu_model``'s
   water-filling (:func:`~lbsim.sizing.waterfill.equalize_affine`) on all workers.
5. Aggregation: ``trimmed_mean`` (default), ``median`` or the batch-weighted ``mean``
   (:mod:`lbsim.aggregation`), unweighted for the robust rules, tolerating ``tolerance_f``
   Byzantine contributions (``2f < n``). In throughput mode it changes no simulated time; the
   cost of a robust reduce on the ring (each chunk owner gathers n contributions instead of a
   sum) is not modelled. The rule and f are reported in ``summary.json``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from lbsim.aggregation import check_tolerance
from lbsim.errors import InputError
from lbsim.fields import param
from lbsim.limits import MAX_HISTORY
from lbsim.metrics.records import ColumnRows
from lbsim.schemes.base import RoundObservation, SchemeContext, observation_columns
from lbsim.schemes.registry import register_scheme
from lbsim.sizing.affine_fit import AffineFitBank
from lbsim.sizing.locality import LocalityModel, plan_locality
from lbsim.sizing.split import InfeasibleSplit
from lbsim.sizing.waterfill import equalize_affine


@dataclass(frozen=True)
class LOFTConfig:
    """LOFT's settings: the robust aggregation and its tolerance, the search for the round time T, the fetch
    and compute fits."""

    aggregation: Literal["trimmed_mean", "median", "mean"] = param("trimmed_mean", "gradient aggregation: trimmed_mean, median (coordinate-wise) or the batch-weighted mean")
    tolerance_f: int = param(1, "Byzantine contributions the robust rule tolerates (2f < n; 0 for mean)", ge=0)
    min_batch: int = param(1, "smallest batch any worker is given", ge=1)
    grid_points: int = param(16, "search: T values per level of the coarse-to-fine grid", ge=2, le=MAX_HISTORY)
    search_rel_tol: float = param(1e-9, "search: stop when the bracket on T is this narrow (relative)", gt=0, le=0.1)
    fetch_ema: float = param(0.5, "weight of the newest measured per-sample read time", gt=0, le=1)
    fit_history: int = param(20, "compute fit: observations kept per worker", ge=2, le=MAX_HISTORY)
    fit_decay: float = param(0.8, "compute fit: weight decay per iteration of age", gt=0, le=1)


_FIELDS = ("batch", "compute_s", "fetch_s")  # what a decision reads from the observation arrays


def _round12(x: float) -> float:
    return float(f"{x:.12g}")


@register_scheme("loft", LOFTConfig)
class LOFT:
    """LOFT (reconstructed): fetch+compute-aware batch and locality sizing, robust aggregation."""

    name: ClassVar[str]
    driver: ClassVar[str] = "sync"

    def __init__(self, config: LOFTConfig, ctx: SchemeContext) -> None:
        self.cfg = config
        self.ctx = ctx
        n = ctx.workers
        self.required_gradients = n
        try:
            check_tolerance(config.aggregation, n, config.tolerance_f)
        except ValueError as err:
            raise InputError("scheme.tolerance_f", str(err)) from None
        t0, inv = np.array(ctx.t0_s), 1.0 / np.array(ctx.samples_per_s)
        self.fits = AffineFitBank(t0, inv, history=config.fit_history, decay=config.fit_decay)  # one fit per worker
        self.data = ctx.data
        self.caps = np.array(ctx.max_batch, dtype=np.int64)
        if self.data is None:  # data local and free: nothing to fetch, every sample local
            self.u, self.v, self.lat = np.zeros(n), np.zeros(n), np.zeros(n)
            self.quota = self.caps.astype(np.float64)
            self.shard_quotas: tuple[int, ...] = ()
        else:
            d = self.data
            self.u = np.array([d.local_s_per_sample(i) for i in range(n)])
            self.v = np.array([max(d.remote_s_per_sample(i), d.storage_s_per_sample()) for i in range(n)])
            self.lat = np.array([d.remote_latency_s(i) for i in range(n)])
            self.shard_quotas = d.quotas(ctx.global_batch)
            self.quota = np.array(self.shard_quotas[:n], dtype=np.float64)
        self._plans: list[tuple[int, tuple[int, ...], tuple[int, ...], np.ndarray]] = []  # (update, batches, local, predicted)
        self._abs_err: list[np.ndarray] = []  # per round, kept as arrays (diagnostics average them all)
        self._rel_err: list[np.ndarray] = []
        self.evaluations: list[int] = []
        try:
            self._plan(t0, inv, update=-1)
        except (InfeasibleSplit, ValueError) as err:
            raise InputError("workload.global_batch", str(err)) from None

    def _plan(self, a: np.ndarray, c: np.ndarray, *, update: int) -> None:
        X = self.ctx.global_batch
        if self.data is None:
            batches = equalize_affine(X, a, c, self.caps, min_batch=self.cfg.min_batch)
            local = batches
            predicted = a + c * np.array(batches)
        else:
            model = LocalityModel(a=a, c=c, u=self.u, v=self.v, lat=self.lat, quota=self.quota)
            plan = plan_locality(X, model, self.caps, min_batch=self.cfg.min_batch,
                                 grid_points=self.cfg.grid_points, rel_tol=self.cfg.search_rel_tol)
            batches, local, predicted = plan.batches, plan.local, np.array(plan.finish_s, dtype=np.float64)
            self.evaluations.append(plan.evaluations)
        self._batches, self._local, self._predicted = tuple(batches), tuple(local), predicted
        self._plans.append((update, self._batches, self._local, predicted))

    @property
    def rounds(self) -> ColumnRows:
        """One row per worker per plan (see :meth:`decision_rows`)."""
        return self.decision_rows()

    def initial_batches(self) -> tuple[int, ...]:
        """The first round's batches."""
        return self._batches

    def local_samples(self) -> tuple[int, ...]:
        """How many samples of each worker's batch come from its local shard."""
        return self._local

    def next_batches(self, observation: RoundObservation) -> tuple[int, ...]:
        """The next round's batches and local counts, from each worker's measured fetch and compute."""
        alpha = self.cfg.fetch_ema
        obs = observation_columns(observation.workers, _FIELDS)
        compute_s, fetch_s = obs["compute_s"], obs["fetch_s"]
        measured = fetch_s + compute_s  # type: ignore[operator]
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(measured) & (measured > 0)
        err = np.abs(self._predicted[ok] - measured[ok])
        self._abs_err.append(err)
        self._rel_err.append(err / measured[ok])
        self.fits.observe(obs["batch"], compute_s, np.isfinite(compute_s))  # type: ignore[arg-type]
        if self.data is not None:
            for i, o in enumerate(observation.workers):
                if np.isfinite(o.fetch_s):
                    if o.remote_samples > 0:
                        per = max(0.0, o.fetch_s - self.u[i] * o.local_samples - self.lat[i]) / o.remote_samples
                        self.v[i] += alpha * (per - self.v[i])
                    elif o.local_samples > 0:
                        self.u[i] += alpha * (o.fetch_s / o.local_samples - self.u[i])
        a, c = self.fits.coefficients()
        self._plan(a, c, update=observation.update)
        return self._batches

    def decision_rows(self) -> ColumnRows:
        """One row per worker per plan: batch, local/remote split, its shard's quota, predicted time."""
        n = self.ctx.workers
        k = len(self._plans)
        batch = np.array([p[1] for p in self._plans], dtype=np.int64).reshape(-1)
        local = np.array([p[2] for p in self._plans], dtype=np.int64).reshape(-1)
        quota = np.tile(self.quota.astype(np.int64), k) if self.data is not None else batch
        return ColumnRows(
            {"update": np.repeat(np.array([p[0] for p in self._plans], dtype=np.int64), n),
             "worker": np.tile(np.arange(n, dtype=np.int64), k), "batch": batch, "local": local,
             "remote": batch - local, "quota": quota,
             "predicted_s": np.concatenate([p[3] for p in self._plans]) if k else np.zeros(0)},
            convert={"predicted_s": _round12},
        )

    @property
    def aggregation_rule(self) -> tuple[str, int]:
        """How an update combines the workers' gradients: (rule, tolerance f) for lbsim.aggregation."""
        return self.cfg.aggregation, self.cfg.tolerance_f

    def diagnostics(self) -> dict[str, object]:
        """Aggregation rule, tolerance, share of local samples, prediction errors."""
        out: dict[str, object] = {"aggregation": self.cfg.aggregation, "tolerance_f": self.cfg.tolerance_f}
        total = sum(sum(p[1]) for p in self._plans)
        local = sum(sum(p[2]) for p in self._plans)
        out["local_share"] = float(f"{local / total:.12g}") if total else 0.0
        abs_err = np.concatenate(self._abs_err) if self._abs_err else np.zeros(0)
        if abs_err.size:
            out["prediction_mae_s"] = float(f"{np.mean(abs_err):.12g}")
            out["prediction_mape"] = float(f"{np.mean(np.concatenate(self._rel_err)):.12g}")
        if self.evaluations:
            out["search_evaluations_mean"] = float(f"{np.mean(self.evaluations):.12g}")
        return out
