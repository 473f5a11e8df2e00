"""Pure summaries of a run's records (the ``summary.json`` contract, docs/references.md §9).

Definitions:
* ``sim_time_s`` — the run's end: the time budget when one was given and reached, else the time
  of the last update.
* ``samples`` — samples in gradients that made it into an update; throughput = samples / sim_time_s.
* ``mean_iteration_s`` / ``p99_iteration_s`` — over worker-iterations that were not dropped,
  from start to the moment the worker could start the next.
* ``wait_fraction`` / ``compute_fraction`` / ``comm_fraction`` / ``fetch_fraction`` — shares of
  total worker time (fetch: reading samples before compute; 0 when data are local and free).
* ``staleness_*`` — over gradients applied.
* ``mean_barrier_wait_s`` (synchronous schemes) — mean over worker-iterations in an update of
  (the update's last compute end − this worker's compute end; compute ends after the fetch
  stage): the gradient-production imbalance a barrier costs, which batch sizing tries to
  remove (communication queueing excluded).

Totals over worker-iterations are exact sums (``math.fsum``, rounded once), so a summary does not
depend on the order of the records nor on the Python version's ``sum``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from lbsim.metrics.records import IterationRecord, IterationTable, UpdateRecord, UpdateTable


def _r(x: float) -> float:
    """Round for stable, readable JSON (12 significant digits)."""
    return float(f"{x:.12g}")


def summarize(
    iterations: Sequence[IterationRecord],
    updates: Sequence[UpdateRecord],
    *,
    scheme: str,
    seed: int,
    engine: str,
    workers: int,
    end_s: float,
    synchronous: bool = False,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The run's ``summary.json`` figures from its records (module docstring), with ``extra`` merged in."""
    if isinstance(iterations, IterationTable):
        return _summarize_table(iterations, updates, scheme=scheme, seed=seed, engine=engine, workers=workers,
                                end_s=end_s, synchronous=synchronous, extra=extra)
    done = [r for r in iterations if not r.dropped]
    applied = [r for r in done if r.update >= 0]
    it_s = np.array([r.iteration_s for r in done]) if done else np.zeros(1)
    compute = total(r.compute_s for r in iterations)
    comm = total(r.comm_s for r in iterations)
    wait = total(r.wait_s for r in iterations)
    fetch = total(r.fetch_s for r in iterations)
    stale = np.array([r.staleness for r in applied]) if applied else np.zeros(1, dtype=int)
    barrier = barrier_wait(applied) if synchronous else 0.0
    return _assemble(updates, len(iterations), len(done), it_s, (compute, comm, wait, fetch), stale, barrier,
                     scheme=scheme, seed=seed, engine=engine, workers=workers, end_s=end_s,
                     synchronous=synchronous, extra=extra)


def _summarize_table(
    table: IterationTable,
    updates: Sequence[UpdateRecord],
    *,
    scheme: str,
    seed: int,
    engine: str,
    workers: int,
    end_s: float,
    synchronous: bool,
    extra: dict[str, Any] | None,
) -> dict[str, Any]:
    """:func:`summarize` on columns: the same figures, bit for bit (totals are exact sums, :func:`total`)."""
    col = table.columns
    done = ~col["dropped"]
    n_done = int(np.count_nonzero(done))
    it_s = (col["end_s"] - col["start_s"])[done] if n_done else np.zeros(1)
    compute, comm, wait, fetch = (_column_total(col[c]) for c in ("compute_s", "comm_s", "wait_s", "fetch_s"))
    totals = (compute, comm, wait, fetch)
    applied = done & (col["update"] >= 0)
    stale = col["staleness"][applied] if applied.any() else np.zeros(1, dtype=int)
    barrier = 0.0
    if synchronous:
        update = col["update"][applied]
        ends = (col["start_s"][applied] + col["fetch_s"][applied]) + col["compute_s"][applied]
        barrier = _barrier_wait_columns(update, ends)
    return _assemble(updates, len(table), n_done, it_s, totals, stale, barrier, scheme=scheme, seed=seed,
                     engine=engine, workers=workers, end_s=end_s, synchronous=synchronous, extra=extra)


def total(values: Iterable[float]) -> float:
    """The exact sum of ``values``, rounded once (``math.fsum``), as ``+0.0`` when it is zero.

    Exact, so independent of the order of the additions and of the Python version: the builtin
    ``sum`` of floats adds left to right up to Python 3.11 and compensates its rounding (Neumaier)
    from 3.12, which moves totals in their last digits. A sum over records and the same sum over a
    column are therefore equal bit for bit.
    """
    return math.fsum(values) + 0.0


def _column_total(column: np.ndarray, passes: int = 4) -> float:
    """:func:`total` of a float column (``math.fsum`` of its values, bit for bit), mostly in array operations.

    Error-free extraction (``ExtractVector``, Rump, Ogita & Oishi, "Accurate floating-point
    summation part I", SIAM J. Sci. Comput. 31(1), 2008, Lemma 3.3): with ``2**M >= n + 2`` and
    ``sigma = 2**(M + e)``, ``|p_i| < 2**e``, the high parts ``q_i = (sigma + p_i) - sigma`` are
    exact, multiples of ``2**-53 sigma``, and sum exactly in any order; the rests ``p_i - q_i`` are
    exact and below ``2**-53 sigma``. Each pass so takes the top ``53 - M`` bits of every value;
    after a few passes the pass sums and the few rests still non-zero go to ``fsum``, whose exact
    sum is the column's.
    """
    values = np.asarray(column, dtype=np.float64)
    if not len(values) or not np.isfinite(values).all():
        return total(values.tolist())
    m = math.ceil(math.log2(len(values) + 2))
    sums: list[float] = []
    for _ in range(passes):
        top = float(np.max(np.abs(values)))
        if top == 0.0:
            break
        k = m + math.frexp(top)[1]
        if not -960 <= k <= 1023:  # sigma out of the normal range: leave the rest to fsum
            break
        sigma = math.ldexp(1.0, k)
        high = (sigma + values) - sigma
        sums.append(float(np.sum(high)))
        values = values - high
    return total(itertools.chain(sums, values[values != 0].tolist()))


def _assemble(
    updates: Sequence[UpdateRecord],
    n_iterations: int,
    n_done: int,
    it_s: np.ndarray,
    totals: tuple[float, float, float, float],
    stale: np.ndarray,
    barrier: float,
    *,
    scheme: str,
    seed: int,
    engine: str,
    workers: int,
    end_s: float,
    synchronous: bool,
    extra: dict[str, Any] | None,
) -> dict[str, Any]:
    if isinstance(updates, UpdateTable):
        samples = int(updates.columns["samples"].sum())
    else:
        samples = int(sum(u.samples for u in updates))
    compute, comm, wait, fetch = totals
    busy = compute + comm + wait + fetch
    out: dict[str, Any] = {
        "scheme": scheme,
        "seed": seed,
        "engine": engine,
        "workers": workers,
        "updates": len(updates),
        "sim_time_s": _r(end_s),
        "samples": samples,
        "throughput_samples_per_s": _r(samples / end_s) if end_s > 0 else 0.0,
        "updates_per_s": _r(len(updates) / end_s) if end_s > 0 else 0.0,
        "worker_iterations": n_done,
        "dropped_iterations": n_iterations - n_done,
        "mean_iteration_s": _r(float(it_s.mean())),
        "p50_iteration_s": _r(float(np.percentile(it_s, 50))),
        "p99_iteration_s": _r(float(np.percentile(it_s, 99))),
        "compute_fraction": _r(compute / busy) if busy > 0 else 0.0,
        "comm_fraction": _r(comm / busy) if busy > 0 else 0.0,
        "wait_fraction": _r(wait / busy) if busy > 0 else 0.0,
        "fetch_fraction": _r(fetch / busy) if busy > 0 else 0.0,
        "staleness_mean": _r(float(stale.mean())),
        "staleness_max": int(stale.max()),
    }
    if synchronous:
        out["mean_barrier_wait_s"] = _r(barrier)
    if extra:
        out.update(extra)
    return out


def barrier_wait(records: Sequence[IterationRecord]) -> float:
    """Mean of (last compute end in the record's update − its own compute end), fetch included."""
    last: dict[int, float] = {}
    for r in records:
        end = r.start_s + r.fetch_s + r.compute_s
        last[r.update] = max(last.get(r.update, end), end)
    if not records:
        return 0.0
    return float(np.mean([last[r.update] - (r.start_s + r.fetch_s + r.compute_s) for r in records]))


def _barrier_wait_columns(update: np.ndarray, ends: np.ndarray) -> float:
    """:func:`barrier_wait` on columns (update index and compute end of each applied record)."""
    if not len(update):
        return 0.0
    last = np.full(int(update.max()) + 1, -np.inf)
    np.maximum.at(last, update, ends)
    return float(np.mean(last[update] - ends))


def speedups(summaries: Sequence[dict[str, Any]], base_index: int = 0) -> list[float]:
    """Throughput of each summary relative to the one at ``base_index`` (default: the first)."""
    base = summaries[base_index]["throughput_samples_per_s"] if summaries else 0.0
    return [_r(s["throughput_samples_per_s"] / base) if base else 0.0 for s in summaries]


def time_to_target_speedups(summaries: Sequence[dict[str, Any]], base_index: int = 0) -> list[float | None]:
    """How many times sooner each run reached the target accuracy than the one at ``base_index``
    (default: the first; None if either never did)."""
    base = summaries[base_index].get("time_to_target_s") if summaries else None
    out: list[float | None] = []
    for s in summaries:
        t = s.get("time_to_target_s")
        out.append(_r(base / t) if base and t else None)
    return out


def add_speedups(summaries: Sequence[dict[str, Any]]) -> bool:
    """A compare's speedups, in place: ``speedup_vs_first`` and, in numerics mode (the first run
    has ``time_to_target_s``), ``speedup_time_to_target_vs_first``; returns whether numerics."""
    for s, speedup in zip(summaries, speedups(summaries), strict=True):
        s["speedup_vs_first"] = speedup
    numerics = bool(summaries) and "time_to_target_s" in summaries[0]
    if numerics:
        for s, tta in zip(summaries, time_to_target_speedups(summaries), strict=True):
            s["speedup_time_to_target_vs_first"] = tta
    return numerics


COMPARE_TAIL = ("network", "baseline", "speedup_vs_baseline", "speedup_time_to_target_vs_baseline")
"""compare.csv's last columns, after every summary field: the network each run used, the baseline's
name and the speedups over it (columns added after compare.csv's first form, kept last so the
earlier columns keep their places)."""


def compare_columns(summaries: Sequence[dict[str, Any]]) -> list[str]:
    """``compare.csv``'s columns: every run's summary fields, first seen first, then :data:`COMPARE_TAIL`'s."""
    keys = dict.fromkeys(k for s in summaries for k in s)
    return [k for k in keys if k not in COMPARE_TAIL] + [k for k in COMPARE_TAIL if k in keys]
