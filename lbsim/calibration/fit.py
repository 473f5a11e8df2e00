"""Fitting the step-time model (:mod:`lbsim.calibration.model`) to measured rows.

1. **Compute** ``t(b)`` from the single-GPU rows (:mod:`lbsim.calibration.compute`).
2. **Shared-node slowdown** ``s``: when the fit rows carry ``sync_time`` (the non-overlapped
   tail), ``step − sync`` is the local compute of the slowest GPU, so
   ``s = argmin Σ log²((step − sync) / (t(b)·(1 + s(k_max − 1))))`` over the multi-GPU fit rows
   (golden-section on [0, 1]); without ``sync_time`` it is fitted with the rest (and is 0 when
   no fit placement shares a node: nothing informs it).
3. **Links and overlap**: ``B_intra, α_intra, B_nic, α_nic, hide_share, tail_share`` by
   bounded least squares on ``log(predicted / measured)`` step time over the multi-GPU rows of
   the fit placements only, for every all-reduce algorithm in
   :data:`lbsim.network.algorithms.ALGORITHMS`, from a few fixed starting points; the algorithm
   with the smallest residual is kept — or the first listed (``nccl``: NCCL's own rule, then the
   others) whose residual is within 2 % of it, as fit placements often cannot tell two forms
   apart — so the collective is picked by the data.

   **NICs per node** are picked the same way, before the algorithm: one NIC per node, shared by
   its GPUs (Ethernet nodes: the node's inter-node bandwidth is one figure whatever GPUs it uses),
   or one NIC beside each GPU (InfiniBand HGX/DGX nodes, where NCCL runs a channel per NIC: a
   node of ``g`` GPUs sends through ``g`` NICs, its bandwidth ``g · B_nic``), tried when a
   multi-node fit placement has a node of two or more GPUs (``44`` beside ``11`` tells them
   apart). One per node is kept unless one per GPU fits more than 2 % better. This is what
   carries a fit on ``11`` and ``44`` to ``88``: with one NIC per GPU, ``88`` has twice ``44``'s
   inter-node bandwidth; with one per node, the same. Bandwidths and latencies are fitted in log
   space (positive, scale-free).

   **Physical bounds on the intra-node link** (:class:`IntraBounds`, from the catalog instance,
   :func:`intra_bounds_for`): the fit placements rarely pin the intra-node link down (most of a
   one-node all-reduce hides under backward), and a free fit drifts to unphysical figures (a
   100,000 Gbit/s link with a 64 ms hop). So its bandwidth is bounded by the link's *rated*
   figure (PCIe generation × lanes, NVLink) and its per-hop latency by
   :data:`INTRA_LATENCY_MAX_S`: an NCCL hop over PCIe/NVLink costs microseconds per call, and
   DDP makes one call per ~25 MiB bucket, so a few hundred µs per gradient is a generous bound.

4. **Pipeline fill** ``chunk_share`` φ (:mod:`lbsim.network.collectives`) is *not* fitted: the
   fit placements cannot tell it (tried: fitted freely it wanders from 0 to 0.17 between fit
   subsets). It is a property of the software stack with a sourced default,
   :data:`DEFAULT_CHUNK_SHARE` = NCCL's pipeline step (``NCCL_BUFFSIZE`` 4 MiB / ``NCCL_STEPS`` 8
   = 512 KiB; NCCL for smaller calls shrinks the chunk with the call) over PyTorch DDP's bucket
   (``bucket_cap_mb`` = 25 MiB) = 0.02 (stated from the NCCL source and PyTorch docs as
   remembered; not re-checked here); ``lbsim calibrate --chunk-share`` overrides it for another
   stack.

5. **Compute noise** ``jitter_cv`` c (``jitter_cv=None``: fitted; a value: fixed; ``lbsim calibrate``'s
   default ``--jitter-cv auto`` keeps it only where the fit placements support it:
   :mod:`lbsim.calibration.select`, leave-one-placement-out cross-validation): a synchronous step
   waits for the slowest of its n replicas, and
   with per-iteration compute noise the mean of that maximum grows with n
   (:mod:`lbsim.network.replica_wait`: ``E[max of n lognormals]``, with the overlap applied to the
   slowest one's compute as the engines do, exactly). Fitted, c is one more free figure of step 3
   (bounded [0, :data:`CV_MAX`]) and goes to ``fit.yaml`` as the groups' ``jitter_cv``, so the
   engine simulates the wait. Always fitting it is not safe: on ncf (overhead-bound, ms steps) the
   fit profile is flat in c and c ran to its bound, making ncf worse on one robustness subset
   (``docs/validation.md``) — hence the cross-validation rule.
   The shared-node slowdown of step 2 stays the estimator from ``step − sync``: ``sync_time``
   holds the wait for slower replicas, so ``step − sync`` is the GPU's own mean compute, which is
   what ``s`` is — the wait goes to c, not to ``s``.

Nothing else is assumed about the hardware: no GPU count per node, no GPU type, no network.
Rows of other placements are never read by the fit (``tests/test_calibration.py`` perturbs them).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from lbsim.calibration.compute import ComputeCurve, fit_compute_curve
from lbsim.calibration.error_stats import geomean_abs
from lbsim.calibration.interval import FitDomain, Interval
from lbsim.calibration.measured import Row, placement_label
from lbsim.calibration.model import LinkFigures, steps_s
from lbsim.calibration.residual import LogResidual
from lbsim.errors import InputError
from lbsim.network.algorithms import ALGORITHMS
from lbsim.network.overlap import OverlapParams
from lbsim.scenario import catalog

# (log10 Gbit/s intra, log10 s intra, log10 Gbit/s NIC, log10 s NIC): starting points of the fit
STARTS = ((1.0, -4.0, 0.5, -3.0), (2.0, -5.0, 1.0, -4.0), (0.5, -2.0, 0.0, -2.0))
GBPS_BOUNDS = (-3.0, 5.0)  # log10 Gbit/s
LATENCY_BOUNDS = (-9.0, 0.0)  # log10 s
# the order the fit prefers them in (module docstring): NCCL's own rule first
PREFERENCE = ("nccl", "ring", "tree", "hierarchical")
FIT_ORDER = tuple(a for a in PREFERENCE if a in ALGORITHMS) + tuple(a for a in ALGORITHMS if a not in PREFERENCE)
PREFER_WITHIN = 0.02  # an algorithm listed earlier is kept if its residual is within 2 % of the best
PREFER_ABS = 1e-6  # ... or within this rms log error of it (a millionth: forms that both fit exactly are a tie)
# NCCL pipeline step (4 MiB buffer / 8 steps) over a PyTorch DDP bucket (25 MiB): docstring step 4
DEFAULT_CHUNK_SHARE = (4 * 2**20 / 8) / (25 * 2**20)
# an NCCL hop inside a node costs microseconds per call; a gradient is ~S / 25 MiB calls
INTRA_LATENCY_MAX_S = 3e-4
# the replicas' compute noise (CV of a lognormal per-iteration factor): bounds and start of the fit
CV_MAX = 0.5
CV_START = 0.02


@dataclass(frozen=True)
class IntraBounds:
    """Upper bounds on the intra-node link the fit may use (module docstring, step 3)."""

    max_gbps: float = 10 ** GBPS_BOUNDS[1]
    max_latency_s: float = INTRA_LATENCY_MAX_S

    def __post_init__(self) -> None:
        if not (10 ** GBPS_BOUNDS[0] < self.max_gbps <= 10 ** GBPS_BOUNDS[1]):
            raise ValueError(f"intra bandwidth bound {self.max_gbps!r} Gbit/s outside the fit's range")
        if not (10 ** LATENCY_BOUNDS[0] < self.max_latency_s <= 10 ** LATENCY_BOUNDS[1]):
            raise ValueError(f"intra latency bound {self.max_latency_s!r} s outside the fit's range")

    @property
    def log10_max_gbps(self) -> float:
        """The bandwidth bound on the fit's scale: the fit searches ``log10`` of Gbit/s."""
        return float(np.log10(self.max_gbps))

    @property
    def log10_max_latency_s(self) -> float:
        """The latency bound on the fit's scale: the fit searches ``log10`` of seconds."""
        return float(np.log10(self.max_latency_s))


def intra_bounds_for(instance: str) -> IntraBounds:
    """The intra link's bounds on ``instance``: its rated bandwidth (if the catalog knows one), the latency bound."""
    inst = catalog.INSTANCES[instance]
    rated = inst.intra_rated_gbps or inst.intra_bandwidth_gbps
    return IntraBounds(max_gbps=rated) if rated else IntraBounds()


@dataclass(frozen=True)
class NoiseChoice:
    """The leave-one-placement-out comparison of the fit without (M0) and with (M1) compute noise."""

    cv_without: float  # CV(M0): mean over folds of the mean square log error of the left-out rows (NaN: not run)
    cv_with: float  # CV(M1)
    se_with: float  # SE(M1): the fold errors' standard deviation / sqrt(folds)
    folds: int  # multi-GPU fit placements left out in turn (0: not run)
    fitted_cv: float  # c of M1 fitted on every fit placement
    kept: bool  # M1 chosen

    def text(self) -> str:
        """The decision in one line, as ``fit.yaml`` records it: both CV errors, the SE and the rule."""
        if self.folds == 0:
            return (f"compute noise not kept: c fitted {self.fitted_cv:.4g}, but there are fewer than two multi-GPU "
                    "fit placements to cross-validate it on")
        verdict = "kept" if self.kept else "not kept"
        return (f"compute noise {verdict}: leave-one-placement-out mean square log error over {self.folds} fit "
                f"placements {self.cv_without:.3g} without, {self.cv_with:.3g} ± {self.se_with:.2g} with "
                f"(c fitted {self.fitted_cv:.4g}; kept iff with + SE < without)")


@dataclass(frozen=True)
class Calibration:
    """A fitted model: the compute curve ``t(b)``, the link figures, and how well and how surely they fit.

    ``fit_error`` is the geomean |relative error| over the multi-GPU fit rows; ``residuals`` each
    algorithm's root-mean-square log error (the fit keeps the smallest); ``noise``, ``interval`` and
    ``domain`` say whether compute noise was kept, the leave-one-placement-out band of a prediction,
    and the placements and batches the fit rows exercised (beyond them a prediction extrapolates)."""

    curve: ComputeCurve
    figures: LinkFigures
    gradient_bytes: int
    fit_placements: tuple[tuple[int, ...], ...]
    fit_error: float  # geomean |relative error| of the model over the multi-GPU fit rows
    residuals: dict[str, float]  # per algorithm: the fit's root-mean-square log error (with the chosen NICs)
    slowdown_from_sync: bool
    noise: NoiseChoice | None = None  # how the noise term was kept or dropped (lbsim.calibration.select)
    interval: Interval | None = None  # leave-one-placement-out band (lbsim.calibration.interval)
    domain: FitDomain | None = None  # what the fit placements exercised: extrapolation flags
    nic_residuals: tuple[tuple[int, float], ...] = ()  # per NIC count tried: the best algorithm's residual


def _golden(f: Callable[[float], float], lo: float, hi: float, iters: int = 60) -> float:
    g = (np.sqrt(5.0) - 1.0) / 2.0
    a, b = lo, hi
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(iters):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
    return (a + b) / 2.0


def slowdown_from_sync(rows: Sequence[Row], curve: ComputeCurve) -> float | None:
    """``s`` from ``step − sync`` of multi-GPU rows sharing nodes (module docstring); None if not identifiable."""
    use = [r for r in rows if r.sync_time_s is not None and r.gpus > 1 and r.step_time_s > r.sync_time_s]
    if not use or max(max(r.placement) for r in use) < 2:
        return None
    local = np.array([r.step_time_s - (r.sync_time_s or 0.0) for r in use])
    t = curve(np.array([r.local_bsz for r in use], dtype=np.float64))
    extra = np.array([max(r.placement) - 1 for r in use], dtype=np.float64)
    return float(_golden(lambda s: float(np.sum(np.log(local / (t * (1.0 + s * extra))) ** 2)), 0.0, 1.0))


def _figures(x: np.ndarray, slowdown: float | None, algorithm: str, chunk_share: float,
             jitter_cv: float | None, nics_per_node: int = 1) -> LinkFigures:
    i = 6
    cv = jitter_cv
    if cv is None:
        cv, i = float(x[i]), i + 1
    s = float(x[i]) if slowdown is None else slowdown
    return LinkFigures(
        intra_bandwidth_gbps=float(10 ** x[0]), intra_latency_s=float(10 ** x[1]),
        nic_bandwidth_gbps=float(10 ** x[2]), nic_latency_s=float(10 ** x[3]),
        shared_node_slowdown=s, overlap=OverlapParams(float(x[4]), float(x[5])), algorithm=algorithm,
        chunk_share=chunk_share, jitter_cv=cv, nics_per_node=nics_per_node,
    )


def _predict(placements: Sequence[tuple[int, ...]], t: np.ndarray, figures: LinkFigures,
             gradient_bytes: float) -> np.ndarray:
    out = np.empty(len(placements))
    idx: dict[tuple[int, ...], list[int]] = {}
    for i, p in enumerate(placements):
        idx.setdefault(p, []).append(i)
    for p, ii in idx.items():
        out[ii] = steps_s(p, t[ii], gradient_bytes, figures)
    return out


def predict_rows(rows: Sequence[Row], curve: ComputeCurve, figures: LinkFigures, gradient_bytes: float) -> np.ndarray:
    """The model's (mean) step time (s) for every row (numpy; the CLI confirms with simulations)."""
    t = curve(np.array([r.local_bsz for r in rows], dtype=np.float64))
    return _predict([r.placement for r in rows], t, figures, gradient_bytes)


def check_curve_covers(curve: ComputeCurve, rows: Sequence[Row]) -> None:
    """Every row's t(b) must be > 0: a curve extrapolated (linearly, beyond the single-GPU batches) to 0 or
    below predicts nothing there. InputError naming the first such row and the single-GPU batch range."""
    batches = np.array([r.local_bsz for r in rows], dtype=np.float64)
    bad = np.flatnonzero(~(curve(batches) > 0))
    if bad.size:
        r = rows[int(bad[0])]
        lo, hi = curve.points[0][0], curve.points[-1][0]
        raise InputError("local_bsz", f"placement {r.label} at local_bsz {r.local_bsz}: the single-GPU rows (batches "
                                      f"{lo:g}-{hi:g}) extrapolate to a compute time <= 0 there; measure placement 1 "
                                      "at that batch or drop the row")


# fits kept for reuse (a pure function of its arguments): leave-one-placement-out refits the same folds for the
# noise rule and the interval; bounded, oldest dropped first
MEMO_ENTRIES = 64
_MEMO: OrderedDict[tuple[object, ...], Calibration] = OrderedDict()


def calibrate_rows(
    rows: Sequence[Row],
    fit_placements: Sequence[tuple[int, ...]],
    gradient_bytes: int,
    *,
    algorithms: Sequence[str] = FIT_ORDER,
    intra_bounds: IntraBounds | None = None,
    chunk_share: float = DEFAULT_CHUNK_SHARE,
    jitter_cv: float | None = 0.0,
    nic_counts: Sequence[int] | None = None,
    progress: Callable[[float], None] | None = None,
) -> Calibration:
    """Fit t(b), then the links, overlap and collective from the fit placements' rows only.

    ``jitter_cv``: the replicas' compute noise — a fixed value (default 0: none), or None to fit it.
    ``nic_counts``: the NICs-per-node forms to try (None: :func:`nic_candidates`, module docstring step 3).
    The same arguments give the same fit; the last :data:`MEMO_ENTRIES` are kept and handed out again
    (keyed on every row, not only the fit rows, and every argument but ``progress``).
    """
    key = (tuple(rows), tuple(fit_placements), gradient_bytes, tuple(algorithms), intra_bounds, chunk_share,
           jitter_cv, None if nic_counts is None else tuple(nic_counts))
    cal = _MEMO.get(key)
    if cal is None:
        cal = _calibrate_rows(rows, fit_placements, gradient_bytes, algorithms=algorithms, intra_bounds=intra_bounds,
                              chunk_share=chunk_share, jitter_cv=jitter_cv, nic_counts=nic_counts, progress=progress)
        _MEMO[key] = cal
        while len(_MEMO) > MEMO_ENTRIES:
            _MEMO.popitem(last=False)
    else:
        _MEMO.move_to_end(key)
        if progress is not None:
            progress(1.0)
    return replace(cal, residuals=dict(cal.residuals))  # a caller's dict of its own


def _calibrate_rows(
    rows: Sequence[Row],
    fit_placements: Sequence[tuple[int, ...]],
    gradient_bytes: int,
    *,
    algorithms: Sequence[str],
    intra_bounds: IntraBounds | None,
    chunk_share: float,
    jitter_cv: float | None,
    nic_counts: Sequence[int] | None,
    progress: Callable[[float], None] | None,
) -> Calibration:
    from scipy.optimize import least_squares  # bounded trust-region least squares

    single = [(r.local_bsz, r.step_time_s) for r in rows if r.placement == (1,)]
    if len({b for b, _ in single}) < 2:
        raise InputError("placement", "no single-GPU rows (placement 1) at two or more local_bsz: "
                                      "the compute curve t(b) is fitted from them")
    present = {r.placement for r in rows}
    for p in fit_placements:
        if p not in present:
            raise InputError("--fit-placements", f"placement {placement_label(p)} has no rows in the measurements "
                                                 f"(present: {', '.join(sorted(placement_label(q) for q in present))})")
    fit_set = set(fit_placements)
    fit_rows = [r for r in rows if r.placement in fit_set and r.gpus > 1]
    if not fit_rows:
        raise InputError("--fit-placements", "no multi-GPU placement among the fit placements: the links cannot be fitted")
    curve = fit_compute_curve(single)
    check_curve_covers(curve, rows)
    s_sync = slowdown_from_sync(fit_rows, curve)
    shares_node = max(max(r.placement) for r in fit_rows) > 1
    slowdown = s_sync if s_sync is not None else (None if shares_node else 0.0)
    y = np.log(np.array([r.step_time_s for r in fit_rows]))
    t_fit = curve(np.array([r.local_bsz for r in fit_rows], dtype=np.float64))
    placements = [r.placement for r in fit_rows]

    ib = intra_bounds or IntraBounds()
    lo = [GBPS_BOUNDS[0], LATENCY_BOUNDS[0], GBPS_BOUNDS[0], LATENCY_BOUNDS[0], 0.0, 0.0]
    hi = [ib.log10_max_gbps, ib.log10_max_latency_s, GBPS_BOUNDS[1], LATENCY_BOUNDS[1], 1.0, 1.0]
    x_extra = [0.3, 0.3]
    if jitter_cv is None:  # the replicas' compute noise (module docstring, step 5)
        lo, hi, x_extra = [*lo, 0.0], [*hi, CV_MAX], [*x_extra, CV_START]
    if slowdown is None:
        lo, hi, x_extra = [*lo, 0.0], [*hi, 1.0], [*x_extra, 0.05]

    nics_tried = tuple(nic_counts) if nic_counts is not None else nic_candidates(rows, fit_placements)
    fitted: dict[tuple[int, str], LinkFigures] = {}
    residuals: dict[tuple[int, str], float] = {}
    total = len(nics_tried) * len(algorithms) * len(STARTS)
    done = 0
    for nics in nics_tried:
        for algorithm in algorithms:
            def figures_of(x: np.ndarray, algorithm: str = algorithm, nics: int = nics) -> LinkFigures:
                return _figures(x, slowdown, algorithm, chunk_share, jitter_cv, nics)

            resid = LogResidual(placements, t_fit, y, gradient_bytes, figures_of)

            algo_best: tuple[float, LinkFigures] | None = None
            for start in STARTS:
                x0 = np.clip(np.array([*start, *x_extra]), np.array(lo) + 1e-9, np.array(hi) - 1e-9)
                res = least_squares(resid, x0, bounds=(lo, hi), x_scale=1.0, max_nfev=400)
                cost = float(np.sqrt(np.mean(res.fun ** 2)))
                if algo_best is None or cost < algo_best[0] - 1e-12:
                    algo_best = (cost, _figures(res.x, slowdown, algorithm, chunk_share, jitter_cv, nics))
                done += 1
                if progress is not None:
                    progress(done / total)
            assert algo_best is not None
            residuals[(nics, algorithm)] = algo_best[0]
            fitted[(nics, algorithm)] = algo_best[1]
    best_cost = min(residuals.values())
    # the first listed form whose fit is within PREFER_WITHIN of the best: one NIC per node before one per
    # GPU, NCCL's own rule before the other algorithms, unless the fit rows clearly say otherwise (fit
    # placements often cannot tell two forms apart)
    chosen = next(k for k in residuals if residuals[k] <= best_cost * (1.0 + PREFER_WITHIN) + PREFER_ABS)
    figures = fitted[chosen]
    pred = predict_rows(fit_rows, curve, figures, gradient_bytes)
    fit_error = geomean_abs(pred / np.exp(y) - 1.0)
    by_algorithm = {a: residuals[(chosen[0], a)] for a in algorithms}
    by_nics = tuple((n, min(v for (m, _), v in residuals.items() if m == n)) for n in nics_tried)
    return Calibration(curve, figures, gradient_bytes, tuple(fit_placements), fit_error, by_algorithm,
                       s_sync is not None, nic_residuals=by_nics)


def nic_candidates(rows: Sequence[Row], fit_placements: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    """NICs per node to try (module docstring, step 3): one per node, and one per GPU (as many as the
    largest fit node) when a multi-node fit placement has a node of two or more GPUs to tell them apart."""
    biggest = max(max(p) for p in fit_placements)
    tells = any(len(p) > 1 and max(p) > 1 for p in fit_placements)
    return (1, biggest) if biggest > 1 and tells else (1,)
