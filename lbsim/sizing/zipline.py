"""ZipLine: choose ElasticBSP's next barrier from predicted iteration end times (pure Python + numpy).

Source: X. Zhao, M. Papagelis, A. An, B. X. Chen, J. Liu, Y. Hu, "Elastic Bulk Synchronous Parallel
Model for Distributed Deep Learning", ICDM 2019, pp. 1504-1509 (arXiv 2001.01347), Alg. 2 and
Table II; and X. Zhao et al., "ZipLine: an optimized algorithm for the elastic bulk synchronous
parallel model", Machine Learning (Springer), 2021, doi 10.1007/s10994-021-06064-w.
See docs/schemes.md (ElasticBSP) and docs/reference/schemes-research.md §2.3-2.5.

Problem
-------
``n`` workers; worker ``p`` pushed last at ``last_push[p]`` and its latest iteration took
``interval[p]``, so its next ``R`` (the lookahead) iterations are predicted to end at
``e[p][j] = last_push[p] + (j + 1) * interval[p]``, ``j = 0..R-1`` (:func:`predict_ends`; each row
ascending). Pick one time per worker, ``Z = {e[p][j_p]}``, so that ``max(Z) - min(Z)`` -- the wait
of the fastest worker; every other worker's wait overlaps it -- is smallest. The barrier is at
``max(Z)``; worker ``p`` runs ``j_p + 1`` more iterations and then waits. This is the classic
"smallest range covering one element of each of n sorted lists" problem.

Algorithm (:func:`zipline`)
---------------------------
A min-heap with one cursor per worker. Start with every worker's first time in the heap and ``hi``
their maximum. Repeat: the current set is the heap, its range ``[heap min, hi]``; record it if its
range is *strictly* smaller than the best so far; pop the minimum, advance that worker's cursor and
push its next time (raising ``hi`` if larger); stop when the popped worker has no next time (no
later set can contain that worker any more), or as soon as a range of 0 is found. Every optimal
window is reached: when all times below its ``min`` have been popped, each cursor sits on that
worker's first time ``>= min``, which is ``<=`` the window's max. The pop order is the global order
of all ``n*R`` times, so ``min`` and ``hi`` never decrease from one set to the next.

The heap's pops are a k-way merge: the ``k``-th pop is the ``k``-th of all ``n*R`` triples
``(time, worker, j)`` in sorted order, which is a stable sort of the flattened matrix (row-major:
equal times in worker, then cursor order). :func:`zipline` computes the sets from that order in
numpy instead of popping: set ``k``'s min is the ``k``-th time, its max the running maximum of the
first times and of the next time of each worker popped before ``k``, up to and including the first
pop of a worker's last time; the record is the first set of smallest ``fl(max - min)``.

Cost: ``O(n R log(n R))`` time and ``O(n R)`` space, in C (a sort and a few array passes). The
paper's ZipLine is ``O(R n^2)``; its ZipLineOpt / ZipLineOptBS are ``O(R n log n)``.
:func:`zipline_bruteforce` enumerates all ``R**n`` choices (for tests only).

Tie rule ("earliest set")
-------------------------
Ranges are compared as computed, ``fl(max - min)`` in float64. Among all choices whose range is the
smallest, the chosen one is the *chronologically first*: the smallest ``max`` (the earliest
barrier), then the smallest ``min``. (In exact arithmetic equal ranges make the two orders the
same; comparing ``max`` first keeps the rule well defined under rounding.) All choices with that
same window ``[min, max]`` differ only in workers with several times inside it; each such worker
takes its earliest one, ``j_p = first j with e[p][j] >= min`` -- equivalently, the lexicographically
smallest index tuple. In key form, the choice minimises ``(range, max, min, indices)``.

The heap (and so :func:`zipline`) meets this rule because sets are visited with non-decreasing ``min`` and ``max`` and only a
strictly better range replaces the record: the first optimal set visited is the earliest window, and
at that moment each cursor is the first index ``>= min`` (no time equal to ``min`` has been popped yet,
else an equal-range set with the same window would have been visited before). The indices are
therefore rebuilt from the recorded ``min`` (the times below it, counted per row), and the brute force applies the key above.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: :func:`zipline_bruteforce` refuses inputs with more choices than this (``R**n``).
BRUTEFORCE_MAX_CHOICES = 2_000_000
_NO_OVERFLOW = 1e300  # predicted ends whose magnitude bound is below this cannot overflow float64


@dataclass(frozen=True)
class ZipLineChoice:
    """One chosen end time per worker and the barrier they imply."""

    indices: tuple[int, ...]  # chosen j per worker (0-based: the worker runs j+1 more iterations)
    times: tuple[float, ...]  # the chosen end time per worker
    barrier_s: float  # max(times)
    range_s: float  # max(times) - min(times): the fastest worker's wait


def predict_ends(last_push_s: Sequence[float], interval_s: Sequence[float], lookahead: int) -> np.ndarray:
    """(n, R) matrix of predicted end times e[p, j] = last_push[p] + (j+1)*interval[p].

    ``interval_s`` must be finite and ``>= 0`` (0 gives a constant row: every prediction equals the
    last push), ``lookahead`` (R) an integer ``>= 1``. Rows are non-decreasing by construction.
    """
    if isinstance(lookahead, bool) or not isinstance(lookahead, (int, np.integer)) or lookahead < 1:
        raise ValueError(f"lookahead must be an integer >= 1, got {lookahead!r}")
    last = np.asarray(last_push_s, dtype=np.float64)
    interval = np.asarray(interval_s, dtype=np.float64)
    if last.ndim != 1 or interval.ndim != 1 or len(last) != len(interval) or len(last) == 0:
        raise ValueError(f"last_push_s and interval_s must be non-empty 1-D sequences of equal length, "
                         f"got shapes {last.shape} and {interval.shape}")
    steps = np.arange(1, int(lookahead) + 1, dtype=np.float64)
    # |e[p, j]| <= |last[p]| + R * interval[p] (up to two roundings): far below float64's maximum,
    # nothing can overflow, and the floating-point error state need not be switched. The bound is
    # NaN or infinite, and the least interval NaN or negative, unless every input is finite and
    # every interval >= 0: the common case passes on these three reductions, the rest is checked
    if interval.min() >= 0.0 and float(np.abs(last).max()) + float(steps[-1]) * float(interval.max()) < _NO_OVERFLOW:
        return last[:, None] + steps[None, :] * interval[:, None]
    if not (np.isfinite(last).all() and np.isfinite(interval).all()):
        raise ValueError("last_push_s and interval_s must be finite")
    if (interval < 0).any():
        raise ValueError(f"interval_s must be >= 0, got {interval.tolist()}")
    with np.errstate(over="ignore", invalid="ignore"):
        ends = last[:, None] + steps[None, :] * interval[:, None]
    if not np.isfinite(ends).all():
        raise ValueError("predicted end times overflow float64")
    return ends


def _validated(ends: np.ndarray) -> np.ndarray:
    arr = np.asarray(ends)
    if arr.dtype.kind not in "iuf":
        raise ValueError(f"ends must be a real numeric (n, R) array, got dtype {arr.dtype}")
    arr = arr.astype(np.float64, copy=False)
    if arr.ndim != 2:
        raise ValueError(f"ends must be 2-D (n workers, R lookahead), got shape {arr.shape}")
    if arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(f"ends needs n >= 1 workers and R >= 1 times each, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError("ends must be finite")
    if arr.shape[1] > 1 and (arr[:, 1:] < arr[:, :-1]).any():
        bad = int(np.flatnonzero((arr[:, 1:] < arr[:, :-1]).any(axis=1))[0])
        raise ValueError(f"each row of ends must be sorted ascending; row {bad} is not: {arr[bad].tolist()}")
    return arr


def _choice(rows: list[list[float]], indices: list[int]) -> ZipLineChoice:
    times = tuple(row[j] for row, j in zip(rows, indices, strict=True))
    hi, lo = max(times), min(times)
    return ZipLineChoice(indices=tuple(indices), times=times, barrier_s=hi, range_s=hi - lo)


def zipline(ends: np.ndarray) -> ZipLineChoice:
    """The heap's sets, carried out in numpy: O(n R log(n R)). ends: (n, R), each row sorted ascending.

    Returns the choice with the smallest range, ties to the earliest set (module docstring).
    Raises ValueError unless ``ends`` is a finite 2-D array with n >= 1, R >= 1 and sorted rows.
    """
    return _zipline(_validated(ends))


def zipline_ahead(last_push_s: Sequence[float], interval_s: Sequence[float], lookahead: int) -> ZipLineChoice:
    """``zipline(predict_ends(last_push_s, interval_s, lookahead))``: :func:`predict_ends` checks
    its inputs and its rows are finite and sorted by construction, so they are not checked again."""
    return _zipline(predict_ends(last_push_s, interval_s, lookahead))


def _zipline(arr: np.ndarray) -> ZipLineChoice:
    """:func:`zipline` of a checked ``arr`` (float64, finite, (n, R), rows sorted)."""
    n, r = arr.shape
    flat = arr.ravel()
    order = flat.argsort(kind="stable")  # the heap's pop order: by time, then worker, then cursor
    stop = int((order % r == r - 1).argmax())  # the first pop of a worker's last time (every row has one)
    pops = order[: stop + 1]
    lo = flat[pops]  # each set's min
    # each set's max: the first times' max, raised by every next time pushed so far
    hi = np.maximum.accumulate(np.concatenate((arr[:, :1].max(axis=0), flat[pops[:-1] + 1])))
    best_lo = lo[int((hi - lo).argmin())]  # the first smallest range (a later equal one never replaces it)
    # the first optimal set has each cursor on the worker's first time >= its min (module docstring)
    below = (arr < best_lo).sum(axis=1)
    indices: list[int] = below.tolist()
    times: list[float] = arr[np.arange(n), below].tolist()
    top, bottom = max(times), min(times)
    return ZipLineChoice(indices=tuple(indices), times=tuple(times), barrier_s=top, range_s=top - bottom)


def zipline_bruteforce(ends: np.ndarray) -> ZipLineChoice:
    """Enumerate all R**n choices (tests only; small n, R).

    Minimises the key ``(range, max, min, indices)`` -- the same tie rule as :func:`zipline`.
    Refuses inputs with more than :data:`BRUTEFORCE_MAX_CHOICES` choices.
    """
    arr = _validated(ends)
    n, r = arr.shape
    if r**n > BRUTEFORCE_MAX_CHOICES:
        raise ValueError(f"brute force over {r}**{n} choices is too large (limit {BRUTEFORCE_MAX_CHOICES})")
    rows: list[list[float]] = arr.tolist()
    best_key: tuple[float, float, float] | None = None
    best_idx: tuple[int, ...] = ()
    for idx in itertools.product(range(r), repeat=n):  # lexicographic order: strict < keeps the smallest
        times = [row[j] for row, j in zip(rows, idx, strict=True)]
        hi, lo = max(times), min(times)
        key = (hi - lo, hi, lo)
        if best_key is None or key < best_key:
            best_key, best_idx = key, idx
    return _choice(rows, list(best_idx))
