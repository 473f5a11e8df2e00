"""Partition one round's samples across workers so predicted compute times equalise, within caps.

Worker i computing work U (the sum of its samples' costs, in reference-sample units) is predicted to
take ``t_i(U) = a_i + b_i U``. Minimising ``max_i t_i`` over assignments is makespan scheduling on
uniform machines (Q||C_max, NP-hard); we use **LPT** (longest processing time first: take samples
in decreasing cost, give each to the worker that would finish it earliest, ``argmin_i a_i + b_i
(U_i + u_j)``, among the workers it fits), which is within 4/3 of the optimum on identical machines
(Graham 1969) and within ~1.52 on uniform ones (Gonzalez, Ibarra, Sahni 1977), followed by a
**move pass**: while moving one sample off the slowest worker to another shortens the slowest
time, make the best such move. The pass never lengthens the step, so the result is at most LPT's;
with hundreds of samples per round a sample is a small part of a worker's work and the result is
within one sample's cost of the ideal ``equal finish`` split.

Caps: at most ``max_count[i]`` samples, and at most ``max_tokens`` tokens per worker (packed: the sum
of lengths; padded: count times the longest). Padding: a worker's work is ``k_i · u_max,i`` (its
samples are padded to its longest), so spreading the longest samples one per worker (what LPT
does) pads every batch to a long sample. Under padding we instead give each worker a contiguous
run of the samples sorted by decreasing length (:func:`padded_runs`: the longest run to the
fastest worker) and find the smallest step T whose runs cover the batch by bisection: worker i
takes ``k_i = min(cap_i, (T - a_i) / (b_i u_first), max_tokens / L_first)`` samples, u_first and
L_first those of its run's first (longest) sample.
:class:`~lbsim.sizing.split.InfeasibleSplit` when a sample fits no worker.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from lbsim.samples.rounds import RoundSamples, contiguous_owner
from lbsim.sizing.split import InfeasibleSplit


def lpt_partition(
    units: np.ndarray,
    lengths: np.ndarray,
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    max_count: Sequence[int],
    max_tokens: int | None = None,
    padding: bool = False,
    refine: bool = True,
    min_count: int = 0,
) -> np.ndarray:
    """``owner[j]``: the worker given sample j (int64), by LPT plus the move pass (padding:
    :func:`padded_runs`); then every worker gets at least ``min_count`` samples (:func:`_fill_min`)."""
    if padding:
        return _fill_min(padded_runs(units, lengths, a, b, max_count, max_tokens), units, len(a), min_count)
    return _fill_min(_lpt(units, lengths, a, b, max_count, max_tokens, refine), units, len(a), min_count)


def _lpt(units: np.ndarray, lengths: np.ndarray, a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray,
         max_count: Sequence[int], max_tokens: int | None, refine: bool) -> np.ndarray:
    """Packing: LPT within the caps, then the move pass."""
    n = len(a)
    u = units.tolist()
    ln = lengths.tolist()
    order = np.argsort(-units, kind="stable").tolist()  # longest first; ties in draw order
    cap_tok = math.inf if max_tokens is None else max_tokens
    av, bv, caps = [float(x) for x in a], [float(x) for x in b], [int(c) for c in max_count]
    work = [0.0] * n
    count = [0] * n
    tokens = [0] * n
    owner = [0] * len(u)
    for j in order:
        best, best_t = -1, math.inf
        uj, lj = u[j], ln[j]
        for i in range(n):
            if count[i] >= caps[i] or tokens[i] + lj > cap_tok:
                continue
            t = av[i] + bv[i] * (work[i] + uj)
            if t < best_t:
                best, best_t = i, t
        if best < 0:
            raise InfeasibleSplit(f"a sample of {lj} tokens fits no worker (caps: {caps} samples, {max_tokens} tokens)")
        work[best] += uj
        tokens[best] += lj
        count[best] += 1
        owner[j] = best
    if refine:
        _move_pass(owner, u, ln, av, bv, caps, cap_tok, work, count, tokens)
    return np.array(owner, dtype=np.int64)


def _fill_min(owner: np.ndarray, units: np.ndarray, n: int, min_count: int) -> np.ndarray:
    """Give every worker at least ``min_count`` samples (a real rank cannot run an empty batch): a
    worker short of it takes the cheapest sample of the worker holding the most. With ``min_count``
    1 the receiver was empty, so its caps hold (no sample is above the token cap; a cap in samples is
    at least 1); the donor only loses a sample."""
    if min_count <= 0 or len(owner) < n * min_count:
        return owner
    counts = np.bincount(owner, minlength=n)
    for w in range(n):
        while counts[w] < min_count:
            donor = int(np.argmax(counts))
            held = np.flatnonzero(owner == donor)
            j = int(held[np.argmin(units[held])])
            owner[j] = w
            counts[donor] -= 1
            counts[w] += 1
    return owner


def _move_pass(owner: list[int], u: list[float], ln: list[int], a: list[float], b: list[float], caps: list[int],
               cap_tok: float, work: list[float], count: list[int], tokens: list[int]) -> None:
    """Move single samples off the slowest worker while that shortens the step (packing only)."""
    n = len(a)
    for _ in range(len(u)):  # each move strictly lowers the slowest time: bounded by the samples, for safety
        t = [a[i] + b[i] * work[i] for i in range(n)]
        top = max(range(n), key=lambda i: (t[i], -i))
        t_top = t[top]
        best: tuple[float, int, int] | None = None  # (new max of the two, sample, destination)
        for j, w in enumerate(owner):
            if w != top:
                continue
            new_top = a[top] + b[top] * (work[top] - u[j])
            for k in range(n):
                if k == top or count[k] >= caps[k] or tokens[k] + ln[j] > cap_tok:
                    continue
                m = max(new_top, a[k] + b[k] * (work[k] + u[j]))
                if m < t_top and (best is None or m < best[0]):
                    best = (m, j, k)
        if best is None:
            return
        _, j, k = best
        owner[j] = k
        work[top] -= u[j]
        work[k] += u[j]
        count[top] -= 1
        count[k] += 1
        tokens[top] -= ln[j]
        tokens[k] += ln[j]


def padded_runs(
    units: np.ndarray,
    lengths: np.ndarray,
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    max_count: Sequence[int],
    max_tokens: int | None = None,
) -> np.ndarray:
    """``owner[j]`` under padding: contiguous runs of the length-sorted samples, the smallest step T."""
    k_total = len(units)
    order = np.argsort(-units, kind="stable").tolist()
    u = [float(units[j]) for j in order]
    ln = [int(lengths[j]) for j in order]
    n = len(a)
    workers = sorted(range(n), key=lambda i: (float(b[i]), i))  # fastest first: it takes the longest run
    def runs(t: float) -> list[int] | None:
        sizes = [0] * n
        idx = 0
        for i in workers:
            if idx == k_total:
                break
            by_time = (t - float(a[i])) / (float(b[i]) * u[idx]) if u[idx] > 0 else math.inf
            k = min(int(max_count[i]), k_total - idx, k_total if max_tokens is None else max_tokens // ln[idx],
                    k_total if by_time == math.inf else max(0, math.floor(by_time)))
            sizes[i] = k
            idx += k
        return sizes if idx == k_total else None

    # twice the time of any worker taking everything: every worker then covers the batch by time,
    # whatever the rounding of (T - a) / (b u)
    hi = 2.0 * max(float(a[i]) + float(b[i]) * k_total * (u[0] if u else 0.0) for i in range(n)) + 1e-12
    best = runs(hi)
    if best is None:
        raise InfeasibleSplit(f"the padded batch fits no split (caps: {list(max_count)} samples, {max_tokens} tokens)")
    lo = 0.0
    for _ in range(60):  # bisection on the step: runs(t) covers the batch for every t above the optimum
        mid = 0.5 * (lo + hi)
        got = runs(mid)
        if got is None:
            lo = mid
        else:
            hi, best = mid, got
    owner = np.empty(k_total, dtype=np.int64)
    idx = 0
    for i in workers:
        for j in order[idx:idx + best[i]]:
            owner[j] = i
        idx += best[i]
    return owner


def cost_partition(samples: RoundSamples, a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray,
                   max_count: Sequence[int], count_batches: Sequence[int], min_count: int = 0) -> np.ndarray:
    """LB-BSP's cost balance: ``owner[j]`` for a round's samples given the predicted curves ``a + b U``.

    When every sample costs the same the count split ``count_batches`` already equalises the curves
    (it was computed from them) and the samples are handed out in draw order by it; otherwise
    :func:`lpt_partition` (LPT and moves, or padded runs). A pure function of its arguments, so every
    rank of a job computes the same partition from the same curves."""
    u = samples.units
    if not u.size or bool(np.all(u == u[0])):
        return contiguous_owner(tuple(int(c) for c in count_batches))
    return lpt_partition(u, samples.lengths, a, b, max_count, samples.max_tokens, samples.padding, min_count=min_count)
