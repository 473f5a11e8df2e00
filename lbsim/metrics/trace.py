"""Worker timelines as a Chrome trace-event JSON (opens in https://ui.perfetto.dev and chrome://tracing).

One process ("workers") with one track (thread) per worker, plus an "updates" track. Each
worker-iteration becomes complete events (``"ph": "X"``, times in microseconds of simulated
time) for its phases: ``fetch``, ``compute``, ``wait`` and ``comm``, back to back from the
iteration's start. The records hold how long each phase took in the iteration, not how the
phases interleaved (a parameter-server push, the barrier, then the pull), so within an
iteration the phases are drawn in that fixed order; their durations, and so every worker's
total time per phase, are exact. Each global model update is an instant event (``"ph": "i"``)
on the updates track. Phases of zero length are left out.

Pure: :func:`chrome_trace` returns plain data; the caller writes it (atomically).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lbsim.metrics.records import IterationRecord, UpdateRecord

PHASES = ("fetch", "compute", "wait", "comm")
_PID = 1
_UPDATES_TID = 0  # workers are tids 1..n


def _us(t_s: float) -> float:
    return round(t_s * 1e6, 3)


def chrome_trace(
    iterations: Sequence[IterationRecord],
    updates: Sequence[UpdateRecord],
    *,
    worker_names: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The trace as a JSON-ready dict (``{"traceEvents": [...], "displayTimeUnit": "ms", ...}``)."""
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
    for r in sorted(iterations, key=lambda r: (r.worker, r.iteration)):
        t = r.start_s
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
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": dict(metadata or {})}


def worker_phase_totals(trace: dict[str, Any]) -> dict[int, dict[str, float]]:
    """Seconds per phase per worker (tid - 1) from a trace's complete events (for checks and tests)."""
    totals: dict[int, dict[str, float]] = {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X":
            per = totals.setdefault(e["tid"] - 1, dict.fromkeys(PHASES, 0.0))
            per[e["name"]] += e["dur"] / 1e6
    return totals


def trace_text(trace: dict[str, Any]) -> str:
    """Compact JSON text of a trace (one event per line, so it stays diff- and grep-friendly)."""
    import json

    events = ",\n".join(json.dumps(e, separators=(",", ":")) for e in trace["traceEvents"])
    rest = json.dumps({k: v for k, v in trace.items() if k != "traceEvents"}, separators=(",", ":"))
    return '{"traceEvents":[\n' + events + "\n]," + rest[1:] + "\n"
