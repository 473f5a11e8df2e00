"""From a recording to a model of the job: compute curves, slowdowns over time, communication.

Notation: rank ``r``, step ``k``, batch ``b_rk``, compute ``c_rk = last_bucket_s - batch_ready_s``.

* **Each rank's own curve** ``t_r(b) = t0_r + b s_r``. Where the rank's batch varied (at least
  :data:`MIN_BATCHES` distinct sizes spanning a factor :data:`MIN_SPAN`), least squares of ``c`` on
  ``b``, refitted on the steps at or below the first fit (the unslowed half: a slowed step is a
  high residual, not a different curve); else its speed: ``t0_r = t0`` (0 unless given: a job whose
  batches never vary cannot show its fixed per-step cost), ``s_r = median_k (c_rk - t0) / b_rk``.
* **Device classes.** Ranks on the same device (``device`` column) share one *base* curve, the
  unslowed speed of that device: the curve of the class's lower-median rank at the class's median
  batch. A rank slower than its peers all along is a straggler of that size, not a slower device.
* **Slowdown** ``f_rk = c_rk / base_r(b_rk)``: the rank's step against its device's unslowed
  curve. Replayed as lbsim's ``simple`` trace (time-based, as contention is): rank ``r`` runs
  ``f_rk`` times slower from step k's start ``s_k = sum_{j<k} (max_r c_rj + comm_s)`` on — the
  start the replay under the recorded synchronous scheme gives it, so that replay meets every
  step's factors exactly (on the recorded clock a step whose all-reduce took longer than the mean
  would shift the next ones across their factors' boundaries). Natural noise stays in ``f``.
* **No stragglers** (the ideal; as the what-if analysis of Lin et al., OSDI'25, which sets each
  rank's work to what the typical rank did): ``f*_rk = min(f_rk, m_k)``, ``m_k`` the lower median of
  ``f`` over the class's ranks at step ``k``: no rank slower than the typical one, the noise all
  share kept.
* **Communication and per-step overhead**: ``comm_s = mean_k min_r (step_end_s - last_bucket_s)``
  (the slowest rank's tail: the all-reduce of the last bucket; the others' tails include waiting;
  the mean, so that the stalls a collective sometimes suffers count as they did in the job)
  plus the mean, over ranks and steps, of the optimizer step and the loader gap
  (``optimizer_end_s - step_end_s`` and the next ``batch_ready_s - optimizer_end_s``: work after the
  all-reduce, at the same time on every rank, not slowed by a straggler). In the scenario it is an
  all-reduce of ``S`` bytes (``gradient_bytes``, or :data:`NOMINAL_GRADIENT_BYTES` when unknown)
  over links of ``B = 2 (n-1)/n S / comm_s`` (no latency term), so a ring replays ``comm_s``
  exactly, and a parameter server derived from it (``lbsim compare --cross-family``) moves the
  same bytes over the same links.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lbsim.errors import InputError
from lbsim.recording.schema import Recording

MIN_BATCHES = 3
MIN_SPAN = 1.2
NOMINAL_GRADIENT_BYTES = 100_000_000  # only S/B matters for a ring fitted to comm_s; a stated round figure


@dataclass(frozen=True)
class Curve:
    """``t(b) = t0_s + b * per_sample_s``; ``varied``: fitted on varied batches (else a speed, ``t0_s = 0``)."""

    t0_s: float
    per_sample_s: float
    varied: bool

    def at(self, b: np.ndarray | float) -> np.ndarray:
        """``t(b)`` at the batch(es) ``b``."""
        return self.t0_s + np.asarray(b, dtype=float) * self.per_sample_s


@dataclass(frozen=True)
class Group:
    """Consecutive ranks on one host and device: one node of ``len(ranks)`` workers."""

    host: str
    device: str
    ranks: tuple[int, ...]


@dataclass(frozen=True)
class JobFit:
    """The fitted job. Arrays are ranks x steps; ``start_s[k]``: step k's start on the replay's timeline, from 0."""

    rank_curves: tuple[Curve, ...]
    base: tuple[Curve, ...]  # per rank: its device's unslowed curve
    groups: tuple[Group, ...]
    factors: np.ndarray
    ideal: np.ndarray
    start_s: np.ndarray
    comm_s: float
    tail_s: float
    overhead_s: float
    global_batch: int
    samples: int
    gradient_bytes: int
    gradient_bytes_known: bool
    link_gbps: float

    @property
    def ranks(self) -> int:
        """The job's ranks."""
        return len(self.base)

    @property
    def steps(self) -> int:
        """The steps fitted (the recording's steps used)."""
        return int(self.factors.shape[1])

    def levels(self, batches: np.ndarray) -> np.ndarray:
        """Each rank's unslowed compute at ``batches`` (ranks x steps)."""
        return np.stack([c.at(batches[r]) for r, c in enumerate(self.base)])


def rank_curve(b: np.ndarray, c: np.ndarray, t0_s: float | None = None) -> Curve:
    """One rank's t(b) (module docstring); ``t0_s``: the fixed per-step cost where the batch did not
    vary (a plain DDP job cannot show it: given, e.g. from ``lbsim profile-model``; None: 0)."""
    if len(np.unique(b)) >= MIN_BATCHES and b.max() >= MIN_SPAN * b.min():
        slope, t0 = np.polyfit(b, c, 1)
        keep = c <= t0 + slope * b  # the unslowed half
        if keep.sum() >= MIN_BATCHES and len(np.unique(b[keep])) >= 2:
            slope, t0 = np.polyfit(b[keep], c[keep], 1)
        if slope > 0 and t0 >= 0:
            return Curve(float(t0), float(slope), True)
    t0 = float(t0_s or 0.0)
    return Curve(t0, float(np.median(np.maximum(c - t0, 1e-9) / b)), False)


def _groups(rec: Recording) -> tuple[Group, ...]:
    out: list[Group] = []
    for r, key in enumerate(zip(rec.hosts, rec.devices, strict=True)):
        if out and (out[-1].host, out[-1].device) == key:
            out[-1] = Group(key[0], key[1], (*out[-1].ranks, r))
        else:
            out.append(Group(key[0], key[1], (r,)))
    return tuple(out)


def _lower_median(a: np.ndarray, axis: int = 0) -> np.ndarray:
    return np.quantile(a, 0.5, axis=axis, method="lower")


def fit_recording(rec: Recording, t0_s: float | None = None) -> JobFit:
    """The job model of ``rec`` (module docstring); ``t0_s``: see :func:`rank_curve`."""
    if rec.ranks < 2:
        raise InputError(rec.source, f"{rec.ranks} rank: a what-if of data parallelism needs at least 2 ranks")
    if rec.steps_used < 2:
        raise InputError(rec.source, f"{rec.steps_used} complete step: a what-if needs at least 2")
    b = rec.samples.astype(float)
    c = np.maximum(rec.compute_s, 1e-9)
    if t0_s is not None and not 0 <= t0_s < float(np.median(c)):
        raise InputError("--t0-s", f"must lie in [0, {float(np.median(c)):.6g}) s (the recording's median compute), got {t0_s:g}")
    own = tuple(rank_curve(b[r], c[r], t0_s) for r in range(rec.ranks))
    base: list[Curve] = [own[0]] * rec.ranks
    for device in sorted(set(rec.devices)):
        members = [r for r in range(rec.ranks) if rec.devices[r] == device]
        b_ref = float(np.median(b[members]))
        levels = np.array([float(own[r].at(b_ref)) for r in members])
        pick = members[int(np.flatnonzero(levels == _lower_median(levels))[0])]
        for r in members:
            base[r] = own[pick]
    levels = np.stack([base[r].at(b[r]) for r in range(rec.ranks)])
    factors = c / np.maximum(levels, 1e-12)
    ideal = factors.copy()
    for device in set(rec.devices):
        members = [r for r in range(rec.ranks) if rec.devices[r] == device]
        typical = _lower_median(factors[members], axis=0)
        ideal[members] = np.minimum(factors[members], typical)
    tail = float(rec.tail_s.min(axis=0).mean())
    opt = rec.optimizer_end_s - rec.step_end_s
    loader = rec.batch_ready_s[:, 1:] - rec.optimizer_end_s[:, :-1]
    overhead = float(opt.mean() + loader.mean())
    comm = max(tail + overhead, 1e-6)
    n = rec.ranks
    known = rec.gradient_bytes is not None
    grad = int(rec.gradient_bytes) if rec.gradient_bytes is not None else NOMINAL_GRADIENT_BYTES
    link_gbps = 2 * (n - 1) / n * grad * 8 / comm / 1e9
    totals = rec.samples.sum(axis=0)
    values, counts = np.unique(totals, return_counts=True)
    return JobFit(rank_curves=own, base=tuple(base), groups=_groups(rec), factors=factors, ideal=ideal,
                  start_s=np.concatenate([[0.0], np.cumsum(c.max(axis=0) + comm)[:-1]]), comm_s=comm, tail_s=tail,
                  overhead_s=overhead, global_batch=int(values[np.argmax(counts)]), samples=int(totals.sum()),
                  gradient_bytes=grad, gradient_bytes_known=known, link_gbps=link_gbps)
