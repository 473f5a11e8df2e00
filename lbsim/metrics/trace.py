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
when it moves by more than 5% from the last one shown, so per-iteration jitter does not add an
event per iteration). With a parameter server (``apply_each_s``, the server's time per
gradient), a second process "parameter server" holds an ``apply`` track: each update's gradients
applied serially, ``gradients x apply_each_s`` ending at the update's time (never before the
previous one ends).

**Streaming.** :func:`trace_chunks` yields the JSON text piece by piece, ``CHUNK_ROWS``
worker-iterations at a time (sorted by worker, then iteration), formatting each piece's events
column-wise with polars, so memory is bounded by one chunk's text (tens of MB), not by the
run's millions of events; :func:`write_trace` writes the pieces to a file, gzipped for
``trace.json.gz`` (which Perfetto opens as is) in a second thread (zlib releases the GIL), with
a fixed header (no name, no timestamp: reproducible bytes) and, when it takes a while, a progress
bar. A million worker-iterations make ~3 M events, ~0.5 GB of JSON, ~60 MB gzipped
(docs/performance.md has the measured cost). :func:`chrome_trace` parses the same text back into
a dict, for checks and small runs; :func:`trace_text` prints such a dict in the same layout.
"""

from __future__ import annotations

import gzip
import io
import itertools
import json
import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from lbsim.metrics.records import IterationRecord, IterationTable, UpdateRecord, UpdateTable
from lbsim.metrics.writers import atomic_file

PHASES = ("fetch", "compute", "wait", "comm")
_PID = 1
_UPDATES_TID = 0  # workers are tids 1..n
_SERVER_PID = 2
CHUNK_ROWS = 65_536  # worker-iterations formatted at a time (bounds memory to one chunk's text)
GZIP_LEVEL = 1  # zlib's fastest level: ~3x faster than 6 on this text for a file ~1.4x larger
_SLOWDOWN_REL = 0.05


def _dumps(event: dict[str, Any]) -> str:
    return json.dumps(event, separators=(",", ":"))


def _table(records: Sequence[Any], kind: type[IterationTable] | type[UpdateTable]) -> dict[str, np.ndarray]:
    table: Any = records if isinstance(records, kind) else kind.from_records(records)
    return table.columns  # type: ignore[no-any-return]


def _us(seconds: np.ndarray) -> np.ndarray:
    return np.round(seconds * 1e6, 3)


def _slowdown_emits(workers: np.ndarray, values: np.ndarray, last: dict[int, float]) -> np.ndarray:
    """Rows whose slowdown moved more than 5 % from the worker's last shown value (``last`` is updated).

    Sequential by nature (each decision depends on the last value shown), so it runs as
    ``itertools.accumulate`` over each worker's rows: the running "last shown" value is replaced
    by a row's value exactly when that row is shown. NaN rows (no nominal time) are never shown.
    """
    keep = np.zeros(len(values), dtype=bool)
    if not len(values):
        return keep
    nan = float("nan")

    def step(shown: float, v: float) -> float:
        if v != v:  # NaN: nothing to show
            return shown
        return v if shown != shown or abs(v - shown) > _SLOWDOWN_REL * abs(shown) else shown

    vals = values.tolist()
    bounds = [*np.flatnonzero(np.diff(workers)).tolist(), len(vals) - 1]
    lo = 0
    for hi in bounds:
        w = int(workers[lo])
        seq = vals[lo:hi + 1]
        shown = list(itertools.accumulate(seq, step, initial=last.get(w, nan)))
        keep[lo:hi + 1] = [a is b for a, b in zip(shown[1:], seq, strict=True)]
        if shown[-1] == shown[-1]:
            last[w] = shown[-1]
        lo = hi + 1
    return keep


def _batch_emits(workers: np.ndarray, batches: np.ndarray, last: dict[int, int]) -> np.ndarray:
    """Rows whose batch differs from the worker's previous one (its first row always; ``last`` is updated)."""
    if not len(workers):
        return np.zeros(0, dtype=bool)
    first = np.ones(len(workers), dtype=bool)
    first[1:] = workers[1:] != workers[:-1]
    keep = np.ones(len(workers), dtype=bool)
    keep[1:] = batches[1:] != batches[:-1]
    for i in np.flatnonzero(first).tolist():
        prev = last.get(int(workers[i]))
        keep[i] = prev is None or prev != int(batches[i])
    final = np.ones(len(workers), dtype=bool)
    final[:-1] = first[1:]
    last.update(zip(workers[final].tolist(), batches[final].tolist(), strict=True))
    return keep


def _nominal(workers: np.ndarray, batches: np.ndarray, fns: Sequence[Callable[[int], float]]) -> np.ndarray:
    """Each row's nominal compute time ``fns[worker](batch)`` (NaN where there is none), one call per distinct pair."""
    out = np.full(len(workers), np.nan)
    known = workers < len(fns)
    if not known.any():
        return out
    w, b = workers[known].astype(np.int64), batches[known].astype(np.int64)
    span = int(b.max()) + 1
    keys, inverse = np.unique(w * span + b, return_inverse=True)
    values = np.array([fns[int(k // span)](int(k % span)) for k in keys.tolist()], dtype=float)
    out[known] = values[inverse.ravel()]
    return out


def _event_lines(chunk: dict[str, np.ndarray], slow: np.ndarray | None, slow_keep: np.ndarray | None,
                 batch_keep: np.ndarray) -> bytes:
    """The chunk's events as JSON, each followed by ",\n", row by row: counters, then the phases in order.

    Column-wise with polars (its string building and CSV writer run outside the GIL): one string
    per row, its events joined, written out as the lines of a headerless, unquoted CSV.
    """
    import polars as pl

    if not len(chunk["worker"]):
        return b""
    cols: dict[str, Any] = {"w": chunk["worker"], "tid": chunk["worker"] + 1, "batch": chunk["batch"],
                            "it": chunk["iteration"], "upd": chunk["update"], "stal": chunk["staleness"],
                            "dropped": chunk["dropped"], "bk": batch_keep, "ts0": _us(chunk["start_s"])}
    t = chunk["start_s"].copy()
    for phase in PHASES:
        dur = chunk[f"{phase}_s"]
        ts = _us(t)
        cols[f"{phase}_ts"] = ts
        cols[f"{phase}_dur"] = np.round(_us(t + dur) - ts, 3)  # from rounded boundaries: a track's events abut
        cols[f"{phase}_on"] = dur > 0
        t = t + dur
    if slow is not None and slow_keep is not None:
        cols["slow"], cols["sk"] = slow, slow_keep
    c, lit = pl.col, pl.lit

    def s(name: str) -> pl.Expr:
        return pl.col(name).cast(pl.Utf8)

    parts = [pl.when(c("bk")).then(pl.concat_str([
        lit('{"name":"batch w'), s("w"), lit('","ph":"C","pid":1,"tid":'), s("tid"), lit(',"ts":'), s("ts0"),
        lit(',"args":{"batch":'), s("batch"), lit("}}")]))]
    if "slow" in cols:
        parts.append(pl.when(c("sk")).then(pl.concat_str([
            lit('{"name":"slowdown w'), s("w"), lit('","ph":"C","pid":1,"tid":'), s("tid"), lit(',"ts":'), s("ts0"),
            lit(',"args":{"slowdown":'), s("slow"), lit("}}")])))
    for phase in PHASES:
        pieces = [lit(f'{{"name":"{phase}","ph":"X","pid":1,"tid":'), s("tid"), lit(',"ts":'), s(f"{phase}_ts"),
                  lit(',"dur":'), s(f"{phase}_dur")]
        if phase == "compute":  # the iteration's slice carries its identity; its other phases sit beside it
            pieces += [lit(',"args":{"iteration":'), s("it"), lit(',"batch":'), s("batch"), lit(',"update":'),
                       s("upd"), lit(',"staleness":'), s("stal"),
                       pl.when(c("dropped")).then(lit(',"dropped":true}')).otherwise(lit("}"))]
        parts.append(pl.when(c(f"{phase}_on")).then(pl.concat_str([*pieces, lit("}")])))
    rows = pl.DataFrame(cols).select(pl.concat_str(parts, separator=",\n", ignore_nulls=True).alias("row"))
    rows = rows.filter(pl.col("row") != "")
    buf = io.BytesIO()
    rows.write_csv(buf, include_header=False, quote_style="never", line_terminator=",\n")
    return buf.getvalue()


def trace_chunks(
    iterations: Sequence[IterationRecord],
    updates: Sequence[UpdateRecord],
    *,
    worker_names: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
    nominal_compute_s: Sequence[Callable[[int], float]] = (),
    apply_each_s: float | None = None,
    chunk_rows: int = CHUNK_ROWS,
    on_progress: Callable[[float], None] | None = None,
) -> Iterator[bytes]:
    """The trace's JSON (UTF-8) in pieces: concatenated, one JSON document with an event per line.

    ``nominal_compute_s[w](batch)``: worker w's uncontended compute time (adds the slowdown
    counters); ``apply_each_s``: the parameter server's apply time per gradient (adds its track);
    ``on_progress(fraction)`` after each piece of worker-iterations.
    """
    it = _table(iterations, IterationTable)
    up = _table(updates, UpdateTable)
    n_rows = len(it["worker"])
    workers = sorted(set(np.unique(it["worker"]).tolist()) | set(range(len(worker_names))))
    head = [{"ph": "M", "pid": _PID, "tid": 0, "name": "process_name", "args": {"name": "workers"}},
            {"ph": "M", "pid": _PID, "tid": _UPDATES_TID, "name": "thread_name", "args": {"name": "updates"}},
            {"ph": "M", "pid": _PID, "tid": _UPDATES_TID, "name": "thread_sort_index", "args": {"sort_index": -1}}]
    for w in workers:
        name = worker_names[w] if w < len(worker_names) else f"worker {w}"
        head.append({"ph": "M", "pid": _PID, "tid": w + 1, "name": "thread_name", "args": {"name": name}})
        head.append({"ph": "M", "pid": _PID, "tid": w + 1, "name": "thread_sort_index", "args": {"sort_index": w}})
    yield _lines(head, first=True)

    order = np.lexsort((it["iteration"], it["worker"]))
    last_slow: dict[int, float] = {}
    last_batch: dict[int, int] = {}
    for lo in range(0, n_rows, chunk_rows):
        idx = order[lo:lo + chunk_rows]
        chunk = {k: v[idx] for k, v in it.items()}
        w, b = chunk["worker"], chunk["batch"]
        batch_keep = _batch_emits(w, b, last_batch)
        slow = slow_keep = None
        if nominal_compute_s:
            nominal = _nominal(w, b, nominal_compute_s)
            valid = (chunk["compute_s"] > 0) & (nominal > 0)
            slow = np.full(len(w), np.nan)
            slow[valid] = np.round(chunk["compute_s"][valid] / nominal[valid], 2)
            slow_keep = _slowdown_emits(w, slow, last_slow)
        yield _event_lines(chunk, slow, slow_keep, batch_keep)
        if on_progress is not None:
            on_progress(min(lo + chunk_rows, n_rows) / max(n_rows, 1))

    yield _lines({"name": "update", "ph": "i", "s": "t", "pid": _PID, "tid": _UPDATES_TID, "ts": round(ts * 1e6, 3),
                  "args": {"update": u, "samples": sa, "gradients": g}}
                 for u, ts, sa, g in zip(up["update"].tolist(), up["time_s"].tolist(), up["samples"].tolist(),
                                         up["gradients"].tolist(), strict=True))
    if apply_each_s is not None and apply_each_s > 0:
        server = [{"ph": "M", "pid": _SERVER_PID, "tid": 0, "name": "process_name", "args": {"name": "parameter server"}},
                  {"ph": "M", "pid": _SERVER_PID, "tid": 1, "name": "thread_name", "args": {"name": "apply"}}]
        free_s = 0.0
        for u, time_s, g in zip(up["update"].tolist(), up["time_s"].tolist(), up["gradients"].tolist(), strict=True):
            start = max(free_s, time_s - g * apply_each_s)
            if time_s > start:
                ts = round(start * 1e6, 3)
                server.append({"name": "apply", "cat": "server", "ph": "X", "pid": _SERVER_PID, "tid": 1, "ts": ts,
                               "dur": round(round(time_s * 1e6, 3) - ts, 3), "args": {"update": u, "gradients": g}})
            free_s = max(free_s, time_s)
        yield _lines(server)
    # the last event carries no comma: the workers' sort order, then the rest of the document
    rest = json.dumps({"displayTimeUnit": "ms", "otherData": dict(metadata or {})}, separators=(",", ":"))
    end = {"ph": "M", "pid": _PID, "tid": 0, "name": "process_sort_index", "args": {"sort_index": 0}}
    yield (_dumps(end) + "\n]," + rest[1:] + "\n").encode("utf-8")


def _lines(events: Iterable[dict[str, Any]], *, first: bool = False) -> bytes:
    """Events as JSON lines, each followed by ",\n" (after the document's opening if ``first``)."""
    text = "".join(_dumps(e) + ",\n" for e in events)
    return (('{"traceEvents":[\n' if first else "") + text).encode("utf-8")


def chrome_trace(
    iterations: Sequence[IterationRecord],
    updates: Sequence[UpdateRecord],
    *,
    worker_names: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
    nominal_compute_s: Sequence[Callable[[int], float]] = (),
    apply_each_s: float | None = None,
) -> dict[str, Any]:
    """The trace as a JSON-ready dict (``{"traceEvents": [...], "displayTimeUnit": "ms", ...}``): the
    text of :func:`trace_chunks`, parsed (for checks and small runs; big runs stream with :func:`write_trace`)."""
    text = b"".join(trace_chunks(iterations, updates, worker_names=worker_names, metadata=metadata,
                                 nominal_compute_s=nominal_compute_s, apply_each_s=apply_each_s))
    return json.loads(text)  # type: ignore[no-any-return]


def worker_phase_totals(trace: dict[str, Any]) -> dict[int, dict[str, float]]:
    """Seconds per phase per worker (tid - 1) from a trace's complete events (for checks and tests)."""
    totals: dict[int, dict[str, float]] = {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and e["pid"] == _PID:
            per = totals.setdefault(e["tid"] - 1, dict.fromkeys(PHASES, 0.0))
            per[e["name"]] += e["dur"] / 1e6
    return totals


def trace_text(trace: dict[str, Any]) -> str:
    """Compact JSON text of a trace dict, in :func:`trace_chunks`' layout (one event per line)."""
    events = ",\n".join(_dumps(e) for e in trace["traceEvents"])
    rest = json.dumps({k: v for k, v in trace.items() if k != "traceEvents"}, separators=(",", ":"))
    return '{"traceEvents":[\n' + events + "\n]," + rest[1:] + "\n"


def trace_bytes(trace: dict[str, Any], *, gz: bool = False) -> bytes:
    """The trace's bytes: :func:`trace_text` as UTF-8, or gzipped with a fixed header (reproducible)."""
    data = trace_text(trace).encode("utf-8")
    return gzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0) if gz else data


class _Sink:
    """Writes byte pieces to ``fh`` (gzipped if asked) in a second thread, so compressing overlaps formatting."""

    def __init__(self, fh: IO[bytes], gz: bool) -> None:
        self._out: Any = gzip.GzipFile(filename="", mode="wb", fileobj=fh, compresslevel=GZIP_LEVEL, mtime=0) \
            if gz else fh
        self._gz = gz
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=2)  # at most two pieces wait: bounded memory
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="lbsim-trace-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (piece := self._queue.get()) is not None:
            if self._error is None:
                try:
                    self._out.write(piece)
                except BaseException as err:  # noqa: BLE001 — re-raised in the caller's thread
                    self._error = err

    def write(self, piece: bytes) -> None:
        if self._error is not None:
            raise self._error
        self._queue.put(piece)

    def abort(self) -> None:
        """Stop the writer thread, dropping what is queued (the file is being discarded)."""
        self._error = self._error or RuntimeError("aborted")
        self._queue.put(None)
        self._thread.join()

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error
        if self._gz:
            self._out.close()  # the gzip trailer; the underlying file stays open for the caller


def write_trace(path: str | Path, iterations: Sequence[IterationRecord], updates: Sequence[UpdateRecord], *,
                gz: bool = False, on_progress: Callable[[float], None] | None = None, **kw: Any) -> None:
    """Stream the trace (:func:`trace_chunks`) into ``path``, atomically; gzipped if ``gz``."""
    with atomic_file(path, "wb") as fh:
        sink = _Sink(fh, gz)
        try:
            for piece in trace_chunks(iterations, updates, on_progress=on_progress, **kw):
                sink.write(piece)
        except BaseException:
            sink.abort()
            raise
        sink.close()  # a write error (a full disk) is raised here, and the atomic file is not swapped in
