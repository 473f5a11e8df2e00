"""Fitting :class:`~lbsim.network.nccl.NcclFigures` to nccl-tests rows, in two stages.

Every candidate time is linear in the figures once each row's candidate (algorithm, protocol) is
known, so the fit alternates: assign each row to the candidate the current figures make cheapest
(NCCL's pick), then solve the figures by non-negative least squares on the *relative* residuals
``(T_model − T)/T`` (every size weighs the same, from 8 B to 16 GiB); repeat until the assignment
stops changing (the best iterate is kept if it cycles). It starts from NCCL's own tuning table
(``tuning.cc``: ring base latencies 3.6 / 10 / 8.4 µs, NVLink hops 0.47 / 1.9 / 3.4 µs, network
hops 2.7 / 4 / 9.6 µs for LL / LL128 / Simple; LL at 1/4 and LL128 at 0.92 of the bandwidth).

1. **One node** (rows with ``N = 1``, ``n ≥ 2``): ``b_p``, ``a_p`` and ``1/(η_p·B_intra)`` per
   protocol (the ring is NCCL's only algorithm there). ``B_intra`` is Simple's, ``η_p`` the ratio.
2. **Across nodes** (rows with ``N ≥ 2``): with stage 1's figures fixed, ``x_p`` per protocol and
   one ``1/B_inter`` (the protocols keep stage 1's ``η_p``: a protocol's overhead is the same on
   every link).

A protocol no row picks keeps its starting figures (NCCL's table), and the fit says so. Rows with
one GPU (no communication) are not fitted.

**Search.** The alternation finds a local optimum near its start. ``local`` starts from NCCL's
table only: NCCL's own model, refined. ``global`` also starts from that table with its latencies
x {0.3, 3} and its bandwidths x {0.5, 2} and keeps the lowest fit error — lower on the fit rows,
but with 9 free figures in stage 1 a lower error can be a curve that bends to one GPU count.
``auto`` (the default) lets the fit rows decide: stage 1 is refitted with each one-node GPU count
left out in turn and scored on it (geomean |error|, averaged), and the search with the lower score
is used (``local`` on a tie or with fewer than three one-node GPU counts).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from lbsim.calibration.nccl_tests import NcclRow
from lbsim.network.nccl import (
    PROTOCOLS,
    TREE_CHUNK_BYTES,
    NcclFigures,
    ProtocolFigures,
    check_shape,
    nccl_pick,
    tree_levels,
)

US = 1e-6
NCCL_BASE_S = (3.6 * US, 10.0 * US, 8.4 * US)
NCCL_NVLINK_HOP_S = (0.47 * US, 1.9 * US, 3.4 * US)
NCCL_NET_HOP_S = (2.7 * US, 4.0 * US, 9.6 * US)
NCCL_EFFICIENCY = (0.25, 0.92, 1.0)
MAX_ROUNDS = 100
MIN_INV_BYTES_PER_S = 1e-18  # s per byte: a bandwidth the solver drives to infinity is capped at 1 EB/s
START_SCALES = tuple((lat, inv) for lat in (1.0, 0.3, 3.0) for inv in (1.0, 0.5, 2.0))
SEARCHES: dict[str, tuple[tuple[float, float], ...]] = {"local": ((1.0, 1.0),), "global": START_SCALES}
Search = Literal["auto", "local", "global"]


def nnls(a: np.ndarray, b: np.ndarray, max_iter: int = 500) -> np.ndarray:
    """``argmin ||a x − b||`` subject to ``x ≥ 0`` (Lawson & Hanson, Solving Least Squares Problems, 1974, ch. 23)."""
    m, n = a.shape
    scale = np.maximum(np.abs(a).max(axis=0), 1e-300)
    a = a / scale
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)
    tol = 1e-12 * max(1.0, float(np.abs(a).sum()))
    for _ in range(max_iter):
        w = a.T @ (b - a @ x)
        if passive.all() or not (w[~passive] > tol).any():
            break
        j = int(np.argmax(np.where(passive, -np.inf, w)))
        passive[j] = True
        while True:
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if (z[passive] > 0).all():
                x = z
                break
            neg = passive & (z <= 0)
            gap = x[neg] - z[neg]
            alpha = float(np.min(np.where(gap > 0, x[neg] / np.where(gap > 0, gap, 1.0), 0.0)))
            x = x + alpha * (z - x)
            passive &= x > tol * 1e-3
            x[~passive] = 0.0
    return x / scale


@dataclass(frozen=True)
class NcclFit:
    """The fitted figures, which protocols the fit rows informed, the rounds each stage took, the search used,
    (``auto``) each search's leave-one-GPU-count-out error, and that search's held-out ratios
    ``(gpus, size_bytes, predicted / measured)`` (:mod:`lbsim.calibration.nccl_report` makes intervals of them)."""

    figures: NcclFigures
    informed: tuple[str, ...]
    rounds: tuple[int, int]
    search: str = "local"
    cv_error: dict[str, float] = field(default_factory=dict)
    cv_ratios: tuple[tuple[int, int, float], ...] = ()


def _figures(base: Sequence[float] | np.ndarray, intra: Sequence[float] | np.ndarray,
             inter: Sequence[float] | np.ndarray, inv_bw: Sequence[float] | np.ndarray,
             inter_bw: float, nics: int, chunk: float = TREE_CHUNK_BYTES["Simple"]) -> NcclFigures:
    inv = np.maximum(np.asarray(inv_bw, dtype=float), MIN_INV_BYTES_PER_S)
    p = [ProtocolFigures(float(base[i]), float(intra[i]), float(inter[i]), float(min(1.0, inv[2] / inv[i])))
         for i in range(3)]
    return NcclFigures((p[0], p[1], p[2]), float(1.0 / inv[2]), float(min(inter_bw, 1.0 / MIN_INV_BYTES_PER_S)), nics, chunk)


def _iterate(rows: Sequence[NcclRow], start: np.ndarray, build, design) -> tuple[float, np.ndarray, int, set[str]]:  # type: ignore[no-untyped-def]
    """Alternate NCCL's pick and NNLS until the pick repeats; the best iterate by squared relative error."""
    theta = start.copy()
    seen: set[tuple[tuple[str, str], ...]] = set()
    best: tuple[float, np.ndarray, int, set[str]] | None = None
    for rnd in range(1, MAX_ROUNDS + 1):
        fig = build(theta)
        picks = [nccl_pick(fig, r.gpus, r.nodes, r.size_bytes) for r in rows]
        err = float(sum((p.time_s / r.time_s - 1.0) ** 2 for p, r in zip(picks, rows, strict=True)))
        used: set[str] = {p.protocol for p in picks}
        if best is None or err < best[0]:
            best = (err, theta.copy(), rnd, used)
        key = tuple((p.algorithm, p.protocol) for p in picks)
        if key in seen:
            break
        seen.add(key)
        a, y = design(rows, picks)
        cols = np.abs(a).max(axis=0) > 0
        new = theta.copy()
        new[cols] = nnls(a[:, cols], y)
        theta = new
    assert best is not None
    return best


def _search(rows: Sequence[NcclRow], start: np.ndarray, n_latency: int, scales: Sequence[tuple[float, float]],
            build, design) -> tuple[np.ndarray, int, set[str]]:  # type: ignore[no-untyped-def]
    """:func:`_iterate` from ``start`` with its latencies (the first ``n_latency`` entries) and inverse
    bandwidths scaled by each of ``scales``; the lowest error wins (ties: the earlier start)."""
    best: tuple[float, np.ndarray, int, set[str]] | None = None
    for lat, inv in scales:
        s = start.copy()
        s[:n_latency] *= lat
        s[n_latency:] *= inv
        got = _iterate(rows, s, build, design)
        if best is None or got[0] < best[0] * (1 - 1e-9):
            best = got
    assert best is not None
    return best[1], best[2], best[3]


class _Fitter:
    """The two stages for one set of fit rows (module docstring)."""

    def __init__(self, rows: Sequence[NcclRow], nics_per_node: int | None, simple_chunk_bytes: float) -> None:
        self.one = [r for r in rows if r.nodes == 1 and r.gpus >= 2]
        self.multi = [r for r in rows if r.nodes >= 2]
        if not self.one:
            raise ValueError("the fit needs one-node rows with 2 or more GPUs (the intra-node figures)")
        if not self.multi:
            raise ValueError("the fit needs rows on 2 or more nodes (the network figures)")
        self.nics = nics_per_node if nics_per_node is not None else max(r.gpus_per_node for r in self.multi)
        self.chunk = simple_chunk_bytes
        top2 = max(self.multi, key=lambda r: (r.size_bytes, r.gpus))
        self.inter0 = 2 * (top2.gpus - 1) / top2.gpus * top2.size_bytes / top2.time_s

    def build1(self, t: np.ndarray) -> NcclFigures:
        return _figures(t[0:3], t[3:6], NCCL_NET_HOP_S, t[6:9], self.inter0, self.nics, self.chunk)

    @staticmethod
    def design1(rs: Sequence[NcclRow], picks) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[no-untyped-def]
        a = np.zeros((len(rs), 9))
        for i, (r, p) in enumerate(zip(rs, picks, strict=True)):
            k = PROTOCOLS.index(p.protocol)
            n = r.gpus
            a[i, k], a[i, 3 + k], a[i, 6 + k] = 1.0, 2.0 * (n - 1), 2.0 * (n - 1) / n * r.size_bytes
            a[i] /= r.time_s
        return a, np.ones(len(rs))

    def stage1(self, one: Sequence[NcclRow], scales: Sequence[tuple[float, float]]) -> tuple[np.ndarray, int, set[str]]:
        top = max(one, key=lambda r: (r.size_bytes, r.gpus))
        bus0 = 2 * (top.gpus - 1) / top.gpus * top.size_bytes / top.time_s
        start = np.array([*NCCL_BASE_S, *NCCL_NVLINK_HOP_S, *(1.0 / (e * bus0) for e in NCCL_EFFICIENCY)])
        return _search(one, start, 6, scales, self.build1, self.design1)

    def stage2(self, t1: np.ndarray, scales: Sequence[tuple[float, float]]) -> tuple[NcclFigures, int, set[str]]:
        stage1 = self.build1(t1)
        eff = [pf.efficiency for pf in stage1.protocols]
        nics = self.nics

        def build2(t: np.ndarray) -> NcclFigures:
            return _figures(t1[0:3], t1[3:6], t[0:3], t1[6:9], 1.0 / max(t[3], MIN_INV_BYTES_PER_S), nics, self.chunk)

        def design2(rs: Sequence[NcclRow], picks) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[no-untyped-def]
            a = np.zeros((len(rs), 4))
            y = np.zeros(len(rs))
            for i, (r, p) in enumerate(zip(rs, picks, strict=True)):
                k = PROTOCOLS.index(p.protocol)
                pf = stage1.protocols[k]
                n, nodes = r.gpus, r.nodes
                g = check_shape(n, nodes)
                if p.algorithm == "ring":
                    known = pf.base_s + (2 * (n - 1) - 2 * (nodes - 1)) * pf.intra_hop_s
                    a[i, k] = 2.0 * (nodes - 1)
                    a[i, 3] = 2.0 * (n - 1) / n * r.size_bytes / eff[k]
                else:
                    d = tree_levels(nodes)
                    known = pf.base_s + 2 * (g - 1) * pf.intra_hop_s
                    a[i, k] = 2.0 * d
                    a[i, 3] = 2.0 * d * stage1.chunk_bytes(p.protocol) * nics + 2.0 * r.size_bytes / eff[k]
                a[i] /= r.time_s
                y[i] = 1.0 - known / r.time_s
            return a, y

        t2, rounds, used = _search(self.multi, np.array([*NCCL_NET_HOP_S, 1.0 / self.inter0]), 3, scales, build2, design2)
        return build2(t2), rounds, used

    def cv_ratios(self, scales: Sequence[tuple[float, float]]) -> list[tuple[int, int, float]] | None:
        """Leave-one-GPU-count-out on the one-node rows: ``(gpus, size_bytes, predicted / measured)`` of
        every left-out row (None with fewer than three GPU counts)."""
        counts = sorted({r.gpus for r in self.one})
        if len(counts) < 3:
            return None
        out = []
        for held in counts:
            t1, _, _ = self.stage1([r for r in self.one if r.gpus != held], scales)
            fig = self.build1(t1)
            out += [(r.gpus, r.size_bytes, nccl_pick(fig, r.gpus, 1, r.size_bytes).time_s / r.time_s)
                    for r in self.one if r.gpus == held]
        return out

    def cv_error(self, scales: Sequence[tuple[float, float]]) -> float | None:
        """:meth:`cv_ratios`' geomean |error| per left-out GPU count, averaged."""
        ratios = self.cv_ratios(scales)
        if ratios is None:
            return None
        errs = []
        for held in sorted({g for g, _, _ in ratios}):
            logs = [math.log1p(abs(q - 1.0)) for g, _, q in ratios if g == held]
            errs.append(math.expm1(sum(logs) / len(logs)))
        return sum(errs) / len(errs)


def fit_nccl(rows: Sequence[NcclRow], nics_per_node: int | None = None,
             simple_chunk_bytes: float = TREE_CHUNK_BYTES["Simple"], search: Search = "auto") -> NcclFit:
    """Fit the figures on ``rows`` (one-node rows for stage 1, multi-node rows for stage 2).

    ``search``: ``local`` refines NCCL's tuning table (one start), ``global`` keeps the best of
    :data:`START_SCALES` starts (lower error on the fit rows, not always better away from them),
    ``auto`` picks the one with the lower leave-one-GPU-count-out error on the one-node rows
    (``local`` when there are fewer than three GPU counts or on a tie). ``simple_chunk_bytes``: the
    Simple protocol's tree chunk, NCCL's 256 KiB unless an ablation asks otherwise (not fitted)."""
    f = _Fitter(rows, nics_per_node, simple_chunk_bytes)
    cv: dict[str, float] = {}
    chosen: str = search
    if search == "auto":
        chosen = "local"
        local, glob = f.cv_error(SEARCHES["local"]), f.cv_error(SEARCHES["global"])
        if local is not None and glob is not None:
            cv = {"local": local, "global": glob}
            chosen = "global" if glob < local * (1 - 1e-9) else "local"
    scales = SEARCHES[chosen]
    t1, rounds1, used1 = f.stage1(f.one, scales)
    fig, rounds2, used2 = f.stage2(t1, scales)
    informed = tuple(p for p in PROTOCOLS if p in used1 or p in used2)
    ratios = f.cv_ratios(scales)
    return NcclFit(fig, informed, (rounds1, rounds2), chosen, cv, tuple(ratios) if ratios is not None else ())
