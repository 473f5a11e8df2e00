"""Worker timelines as a Chrome trace-event JSON (opens in https://ui.perfetto.dev and chrome://tracing).

One process ("workers") with one track (thread) per worker, plus an "updates" track. Each
worker-iteration becomes complete events (``"ph": "X"``, times in microseconds of simulated
time) for its phases: ``fetch``, ``compute``, ``wait`` and ``comm``, back to back from the
iteration's start. The records hold how long each phase took in the iteration, not how the
phases interleaved (a parameter-server push, the barrier, then the pull), so within an
iteration the phases are drawn in that fixed order; their durations, and so every worker's
total time per phase, are exact. Each global model update is an instant event (``"ph": "i"``)
on the updates track. Phases of zero length are left out.

Counter tracks (``"ph": "C"``, one value per worker, emitted only when it changes): ``batch``
(the worker's mini-batch) and, given each worker's nominal ``t(b) = t0 + b / X``, ``slowdown``
= ``compute_s / t(b)`` (observed: contention times jitter, rounded to 0.01; a new value only
when it moves by more than 5%, so per-iteration jitter does not add an event per iteration). With a parameter
server (``apply_each_s``, the server's time per gradient), a second process "parameter server"
holds an ``apply`` track: each update's gradients applied serially, ``gradients x apply_each_s``
ending at the update's time (never before the previous one ends).

Big runs: :func:`trace_bytes` gzips the text (``trace.json.gz``, which Perfetto opens as is),
deterministically (no name, no timestamp in the gzip header).

Pure: :func:`chrome_trace` returns plain data; the caller writes it (atomically).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lbsim.metrics.records import IterationRecord, UpdateRecord

PHASES = ("fetch", "compute", "wait", "comm")
_PID = 1
_UPDATES_TID = 0  # workers are tids 1..n
_SERVER_PID = 2


def _us(t_s: float) -> float:
    return round(t_s * 1e6, 3)


def chrome_trace(
    iterations: Sequence[IterationRecord],
    updates: Sequence[UpdateRecord],
    *,
    worker_names: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
    nominal_compute_s: Sequence[Callable[[int], float]] = (),
    apply_each_s: float | None = None,
) -> dict[str, Any]:
    """The trace as a JSON-ready dict (``{"traceEvents": [...], "displayTimeUnit": "ms", ...}``).

    ``nominal_compute_s[w](batch)``: worker w's uncontended compute time (adds the slowdown
    counters); ``apply_each_s``: the parameter server's apply time per gradient (adds its track).
    """
    workers = sorted({r.worker for r in iterations} | set(range(len(worker_names))))
    events: list[dict[str, Any]] = [
        {"ph": "M", "pid": _PID, "tid": 0, "name": "process_name", "args": {"name": "workers"}},
        {"ph": "M", "pid": _PID, "tid": _UPDATES_TID, "name": "thread_name", "args": {"name": "updates"}},
        {"ph": "M", "pid": _PID, "tid": _UPDATES_TID, "name": "thread_sort_index", "args": {"sort_index": -1}},
    ]
    for w in workers:
        name = worker_names[w] if w < len(worker_names) else f"worker {w}"
        events.append({"ph": "M", "pid": _PID, "tid": w + 1, "name": "thread_name", "args": {"name": name}})
        events.append({"ph": "M", "pid": _PID, "tid": w + 1, "name": "thread_sort_index", "args": {"sort_index": w}})
    last: dict[tuple[str, int], float] = {}

    def counter(name: str, w: int, ts: float, value: float, rel: float = 0.0) -> None:
        prev = last.get((name, w))
        if prev is None or abs(value - prev) > rel * abs(prev):
            last[(name, w)] = value
            events.append({"name": f"{name} w{w}", "ph": "C", "pid": _PID, "tid": w + 1, "ts": ts, "args": {name: value}})

    for r in sorted(iterations, key=lambda r: (r.worker, r.iteration)):
        t = r.start_s
        counter("batch", r.worker, _us(t), r.batch)
        if r.worker < len(nominal_compute_s) and r.compute_s > 0:
            counter("slowdown", r.worker, _us(t), round(r.compute_s / nominal_compute_s[r.worker](r.batch), 2), 0.05)
        args = {"iteration": r.iteration, "batch": r.batch, "update": r.update, "staleness": r.staleness}
        if r.dropped:
            args["dropped"] = True
        for phase in PHASES:
            dur = getattr(r, f"{phase}_s")
            if dur > 0:  # ts and dur from rounded boundaries, so a track's events abut exactly
                ts = _us(t)
                events.append({"name": phase, "cat": phase, "ph": "X", "pid": _PID, "tid": r.worker + 1,
                               "ts": ts, "dur": round(_us(t + dur) - ts, 3), "args": args})
            t += dur
    for u in updates:
        events.append({"name": "update", "cat": "update", "ph": "i", "s": "t", "pid": _PID, "tid": _UPDATES_TID,
                       "ts": _us(u.time_s), "args": {"update": u.update, "samples": u.samples, "gradients": u.gradients}})
    if apply_each_s is not None and apply_each_s > 0:
        events += [
            {"ph": "M", "pid": _SERVER_PID, "tid": 0, "name": "process_name", "args": {"name": "parameter server"}},
            {"ph": "M", "pid": _SERVER_PID, "tid": 1, "name": "thread_name", "args": {"name": "apply"}},
        ]
        free_s = 0.0
        for u in updates:
            start = max(free_s, u.time_s - u.gradients * apply_each_s)
            if u.time_s > start:
                ts = _us(start)
                events.append({"name": "apply", "cat": "server", "ph": "X", "pid": _SERVER_PID, "tid": 1, "ts": ts,
                               "dur": round(_us(u.time_s) - ts, 3), "args": {"update": u.update, "gradients": u.gradients}})
            free_s = max(free_s, u.time_s)
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": dict(metadata or {})}


def worker_phase_totals(trace: dict[str, Any]) -> dict[int, dict[str, float]]:
    """Seconds per phase per worker (tid - 1) from a trace's complete events (for checks and tests)."""
    totals: dict[int, dict[str, float]] = {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and e["pid"] == _PID:
            per = totals.setdefault(e["tid"] - 1, dict.fromkeys(PHASES, 0.0))
            per[e["name"]] += e["dur"] / 1e6
    return totals


def trace_text(trace: dict[str, Any]) -> str:
    """Compact JSON text of a trace (one event per line, so it stays diff- and grep-friendly)."""
    import json

    events = ",\n".join(json.dumps(e, separators=(",", ":")) for e in trace["traceEvents"])
    rest = json.dumps({k: v for k, v in trace.items() if k != "traceEvents"}, separators=(",", ":"))
    return '{"traceEvents":[\n' + events + "\n]," + rest[1:] + "\n"


def trace_bytes(trace: dict[str, Any], *, gz: bool = False) -> bytes:
    """The trace's bytes: :func:`trace_text` as UTF-8, or gzipped with a fixed header (reproducible)."""
    import gzip

    data = trace_text(trace).encode("utf-8")
    return gzip.compress(data, compresslevel=6, mtime=0) if gz else data
