"""Online fit of a worker's compute time ``t(x) = a + b x`` (LB-BSP's ``gpu_model`` variant).

Ridge regression on the most recent ``history`` observations ``(x, t)``, each weighted by
``decay ** age`` so the fit follows contention, pulled towards a prior ``(a0, b0)`` (the
catalog's ``t0`` and ``1 / samples_per_s``, scaled to the observed level) with a small ridge
strength ``prior_weight`` (default 0.01, in units of observations of a normalised batch): once
the batches vary the data decide the shape; with no batch variation yet the data only fix the
level, the prior supplies the shape and the fit becomes the prior curve scaled to the observed
level — the right answer when the worker is uniformly slowed.
"""

from __future__ import annotations

from collections import deque

import numpy as np


class AffineFit:
    """The ridge fit of ``t(x) = a + b x`` described above, one per worker."""

    def __init__(self, a0: float, b0: float, *, history: int = 20, decay: float = 0.9, prior_weight: float = 0.01) -> None:
        self.a0, self.b0 = a0, b0
        self.decay = decay
        self.prior_weight = prior_weight
        self.points: deque[tuple[float, float]] = deque(maxlen=history)

    def observe(self, batch: int, time_s: float) -> None:
        """Add a step's batch and compute time (the oldest beyond ``history`` drops out)."""
        self.points.append((float(batch), float(time_s)))

    def coefficients(self) -> tuple[float, float]:
        """(a, b) with a >= 0 and b > 0."""
        if not self.points:
            return self.a0, self.b0
        pts = np.array(self.points)
        x, t = pts[:, 0], pts[:, 1]
        w = self.decay ** np.arange(len(pts))[::-1]
        # Level from the data: the prior curve scaled to the weighted observed times.
        nominal = self.a0 + self.b0 * x
        scale = float(np.sum(w * t) / np.sum(w * nominal))
        pa, pb = self.a0 * scale, self.b0 * scale
        lam = self.prior_weight
        # Weighted least squares with ridge towards the scaled prior, on centred batches.
        xs = x / max(1.0, float(np.max(x)))
        A = np.array([[np.sum(w) + lam, np.sum(w * xs)], [np.sum(w * xs), np.sum(w * xs * xs) + lam]])
        xmax = max(1.0, float(np.max(x)))
        rhs = np.array([np.sum(w * t) + lam * pa, np.sum(w * xs * t) + lam * pb * xmax])
        a, bs = np.linalg.solve(A, rhs)
        b = bs / xmax
        if not (np.isfinite(a) and np.isfinite(b)) or b <= 0:
            return pa, pb
        return max(0.0, float(a)), float(b)


def solve_2x2(a00: np.ndarray, a01: np.ndarray, a10: np.ndarray, a11: np.ndarray, b0: np.ndarray,
              b1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Many 2x2 systems ``[[a00, a01], [a10, a11]] x = [b0, b1]`` at once, bit for bit as
    ``np.linalg.solve`` solves each (LAPACK ``dgesv``: LU with partial pivoting, the multiplier
    taken as ``a10 * (1 / a00)``, then forward and back substitution — checked against
    ``np.linalg.solve`` on random systems of every scale). A system with a zero pivot goes to
    ``np.linalg.solve`` itself, which raises for a singular matrix as it always did.
    """
    swap = np.abs(a10) > np.abs(a00)  # dgetrf's pivot: the first largest |entry| of column 0
    p00, p01 = np.where(swap, a10, a00), np.where(swap, a11, a01)
    p10, p11 = np.where(swap, a00, a10), np.where(swap, a01, a11)
    q0, q1 = np.where(swap, b1, b0), np.where(swap, b0, b1)
    with np.errstate(divide="ignore", invalid="ignore"):
        lower = p10 * (1.0 / p00)
        u11 = p11 - lower * p01
        x1 = (q1 - lower * q0) / u11
        x0 = (q0 - p01 * x1) / p00
    if not (np.all(p00 != 0) and np.all(u11 != 0)):
        A = np.stack([np.stack([a00, a01], -1), np.stack([a10, a11], -1)], -2)
        sol = np.linalg.solve(A, np.stack([b0, b1], -1)[..., None])[..., 0]
        return sol[..., 0], sol[..., 1]
    return x0, x1


class AffineFitBank:
    """Many :class:`AffineFit` at once (one per worker): the same numbers, array in, array out.

    ``observe`` adds one observation to every fit (or to those a mask selects); ``coefficients``
    returns every fit's ``(a, b)`` as arrays, computed with the same floating-point operations,
    in the same order, as :meth:`AffineFit.coefficients` does for each fit on its own (sums over
    each fit's points oldest first — numpy sums a row of a C-ordered array exactly as it sums
    that row alone — and the 2x2 solves stacked in one LAPACK call), so every value is identical
    to the per-worker fits'. Fits with equally many points are computed together (usually all).
    """

    def __init__(self, a0: np.ndarray, b0: np.ndarray, *, history: int = 20, decay: float = 0.9,
                 prior_weight: float = 0.01) -> None:
        self.a0 = np.array(a0, dtype=np.float64).reshape(-1)
        self.b0 = np.array(b0, dtype=np.float64).reshape(-1)
        if self.a0.shape != self.b0.shape:
            raise ValueError("a0 and b0 must be of one length")
        self.history = history
        self.decay = decay
        self.prior_weight = prior_weight
        m = len(self.a0)
        # Each fit's points in a ring written twice (at c and c + history), so that its last
        # `history` points, oldest first, are always the contiguous columns [s, s + history).
        self._x = np.zeros((m, 2 * history))
        self._t = np.zeros((m, 2 * history))
        self._n = np.zeros(m, dtype=np.int64)  # observations so far, per fit
        self._same_n = True  # every fit has had as many observations (the usual case)
        self._buf: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.a0)

    @property
    def count(self) -> np.ndarray:
        """Points each fit currently holds (at most ``history``)."""
        return np.minimum(self._n, self.history)

    def observe(self, batches: np.ndarray, times_s: np.ndarray, mask: np.ndarray | None = None) -> None:
        """One observation (``batches[i]``, ``times_s[i]``) for fit i, for every i (or where ``mask``)."""
        batches = np.asarray(batches, dtype=np.float64)
        times_s = np.asarray(times_s, dtype=np.float64)
        h = self.history
        if mask is not None and not mask.all():
            rows = np.flatnonzero(mask)
            if not rows.size:
                return
            c = self._n[rows] % h
            self._x[rows, c] = self._x[rows, c + h] = batches[rows]
            self._t[rows, c] = self._t[rows, c + h] = times_s[rows]
            self._n[rows] += 1
            self._same_n = False
            return
        if self._same_n and self._n.size:
            c0 = int(self._n[0]) % h  # every fit writes the same columns
            self._x[:, c0] = self._x[:, c0 + h] = batches
            self._t[:, c0] = self._t[:, c0 + h] = times_s
        else:
            rows = np.arange(len(self.a0))
            c = self._n % h
            self._x[rows, c] = self._x[rows, c + h] = batches
            self._t[rows, c] = self._t[rows, c + h] = times_s
        self._n += 1

    def _window(self, rows: np.ndarray | slice, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The last ``k`` points of the fits ``rows`` (all with ``k`` points), oldest first."""
        h = self.history
        if self._same_n:
            n = int(self._n[0])
            s = n % h if n >= h else 0
            return self._x[rows, s : s + k], self._t[rows, s : s + k]
        ns = self._n[rows]
        idx = np.where(ns >= h, ns % h, 0)[:, None] + np.arange(k)
        return np.take_along_axis(self._x[rows], idx, axis=1), np.take_along_axis(self._t[rows], idx, axis=1)

    def coefficients(self) -> tuple[np.ndarray, np.ndarray]:
        """Every fit's (a, b): a >= 0 and b > 0, as AffineFit.coefficients."""
        a, b = self.a0.copy(), self.b0.copy()  # no observation yet: the prior
        counts = self.count
        if counts.size and counts.min() == counts.max():
            if counts[0] > 0:
                a, b = self._solve(slice(None), int(counts[0]))
            return a, b
        for k in np.unique(counts).tolist():
            if k:
                rows = np.flatnonzero(counts == k)
                a[rows], b[rows] = self._solve(rows, k)
        return a, b

    def _solve(self, rows: slice | np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        # AffineFit.coefficients, row by row, with the same operations in the same order (products
        # of two factors are commutative in IEEE arithmetic, so in-place forms give the same bits);
        # scratch buffers are reused: fresh (m, k) temporaries would each cost an mmap and page faults
        x, t = self._window(rows, k)
        a0, b0 = self.a0[rows], self.b0[rows]
        m = len(a0)
        if self._buf is None or self._buf.shape[1:] != (m, k):
            self._buf = np.empty((4, m, k))
        wt, wn, xs, wxs = self._buf
        w = self.decay ** np.arange(k)[::-1]
        np.multiply(w, t, out=wt)  # w * t
        np.multiply(b0[:, None], x, out=wn)  # nominal = a0 + b0 * x
        wn += a0[:, None]
        wn *= w  # w * nominal
        swt = np.sum(wt, axis=1)
        scale = swt / np.sum(wn, axis=1)
        pa, pb = a0 * scale, b0 * scale
        lam = self.prior_weight
        xmax = np.maximum(1.0, np.max(x.T.copy(), axis=0))  # == np.max(x, axis=1) (a max is exact), faster
        np.divide(x, xmax[:, None], out=xs)  # xs = x / xmax
        np.multiply(w, xs, out=wxs)  # w * xs
        s_wxs = np.sum(wxs, axis=1)
        np.multiply(wxs, xs, out=wn)  # w * xs * xs
        a11 = np.sum(wn, axis=1) + lam
        np.multiply(wxs, t, out=wt)  # w * xs * t
        r1 = np.sum(wt, axis=1) + lam * pb * xmax
        a00 = np.full(m, np.sum(w) + lam)
        r0 = swt + lam * pa
        a, bs = solve_2x2(a00, s_wxs, s_wxs, a11, r0, r1)
        b = bs / xmax
        bad = ~(np.isfinite(a) & np.isfinite(b)) | ~(b > 0)
        return np.where(bad, pa, np.maximum(0.0, a)), np.where(bad, pb, b)
