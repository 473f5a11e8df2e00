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
run's millions of events (the counters' show/hide rules run once over all rows first: ~10 bytes a
worker-iteration, beside the records' 97); :func:`write_trace` writes the pieces to a file, gzipped for
``trace.json.gz`` (which Perfetto opens as is) with ISA-L's deflate (``isal``: the same DEFLATE
format, ~4x zlib's fastest level on this text and a smaller file) on two threads (it releases the
GIL; fixed blocks deflated apart and joined into one gzip member, as pigz does, with a fixed
header: no name, no timestamp, reproducible bytes) and, when it takes a while, a progress bar. A million
worker-iterations make ~3 M events, ~0.35 GB of JSON, ~60 MB gzipped (docs/performance.md has the
measured cost). :func:`chrome_trace` parses the same text back into a dict, for checks and small
runs; :func:`trace_text` prints such a dict in the same layout.
"""

from __future__ import annotations

import io
import itertools
import json
import struct
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

import numpy as np
from isal import isal_zlib

from lbsim.metrics.records import IterationRecord, IterationTable, UpdateRecord, UpdateTable
from lbsim.metrics.writers import atomic_file

PHASES = ("fetch", "compute", "wait", "comm")
_PID = 1
_UPDATES_TID = 0  # workers are tids 1..n
_SERVER_PID = 2
CHUNK_ROWS = 65_536  # worker-iterations formatted at a time (bounds memory to one chunk's text)
GZIP_LEVEL = 1  # ISA-L's level 1 (of 0-3): 460 MB/s on this text, 6.0x smaller; zlib's level 1: 110 MB/s, 5.4x
_SLOWDOWN_REL = 0.05
_TRACED = ("worker", "iteration", "update", "staleness", "batch", "dropped", "start_s",
           *(f"{phase}_s" for phase in PHASES))  # the iteration columns a trace shows


def _dumps(event: dict[str, Any]) -> str:
    return json.dumps(event, separators=(",", ":"))


def _table(records: Sequence[Any], kind: type[IterationTable] | type[UpdateTable]) -> dict[str, np.ndarray]:
    table: Any = records if isinstance(records, kind) else kind.from_records(records)
    return table.columns  # type: ignore[no-any-return]


def _us(seconds: np.ndarray) -> np.ndarray:
    return np.round(seconds * 1e6, 3)


def _slowdown_emits(workers: np.ndarray, values: np.ndarray, last: dict[int, float]) -> np.ndarray:
    """Rows whose slowdown moved more than 5 % from the worker's last shown value (``last`` is updated).

    Rows come sorted by worker, then iteration. Row ``v`` is shown when it is not NaN (NaN: no
    nominal time) and the worker has shown nothing yet or ``|v - shown| > 0.05 |shown|``; ``shown``
    then becomes ``v``. Sequential within a worker (each decision depends on the last value shown),
    independent across workers: many workers step in lockstep, one array operation per iteration
    for all of them (:func:`_slowdown_lockstep`); a few long ones go row by row.
    """
    keep = np.zeros(len(values), dtype=bool)
    if not len(values):
        return keep
    starts = np.flatnonzero(np.diff(workers)) + 1
    starts = np.concatenate(([0], starts))
    lengths = np.diff(np.append(starts, len(values)))
    if 16 * int(lengths.max()) <= len(values):
        return _slowdown_lockstep(workers, values, last, starts, lengths)
    nan = float("nan")

    def step(shown: float, v: float) -> float:
        if v != v:  # NaN: nothing to show
            return shown
        return v if shown != shown or abs(v - shown) > _SLOWDOWN_REL * abs(shown) else shown

    vals = values.tolist()
    for lo, n in zip(starts.tolist(), lengths.tolist(), strict=True):
        w = int(workers[lo])
        seq = vals[lo:lo + n]
        shown = list(itertools.accumulate(seq, step, initial=last.get(w, nan)))
        keep[lo:lo + n] = [a is b for a, b in zip(shown[1:], seq, strict=True)]
        if shown[-1] == shown[-1]:
            last[w] = shown[-1]
    return keep


def _slowdown_lockstep(workers: np.ndarray, values: np.ndarray, last: dict[int, float], starts: np.ndarray,
                       lengths: np.ndarray) -> np.ndarray:
    """:func:`_slowdown_emits` with the workers side by side: a (workers x iterations) grid, NaN-padded."""
    rows = np.repeat(np.arange(len(starts)), lengths)
    cols = np.arange(len(values)) - np.repeat(starts, lengths)
    grid = np.full((len(starts), int(lengths.max())), np.nan)
    grid[rows, cols] = values
    present = ~np.isnan(grid)
    shown = np.array([last.get(w, np.nan) for w in workers[starts].tolist()])
    taken = np.zeros(grid.shape, dtype=bool)
    for j in range(grid.shape[1]):
        v = grid[:, j]
        take = present[:, j] & (np.isnan(shown) | (np.abs(v - shown) > _SLOWDOWN_REL * np.abs(shown)))
        shown = np.where(take, v, shown)
        taken[:, j] = take
    for w, value in zip(workers[starts].tolist(), shown.tolist(), strict=True):
        if value == value:
            last[w] = value
    return taken[rows, cols]


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
                 batch_keep: np.ndarray) -> memoryview:
    """The chunk's events as JSON, each followed by ",\n", row by row: counters, then the phases in order.

    Column-wise with polars (its string building runs outside the GIL): each kind of event is
    built as one string column, only for the rows that show it (a counter changes on few rows, a
    phase of zero length is left out), each number turned into text once; each row's events are
    joined into one string ending in ",\n", and the rows' strings, which Arrow keeps back to back
    in one buffer, are that buffer (no copy).
    """
    import polars as pl

    t = chunk["start_s"].copy()
    cols: dict[str, Any] = {"w": chunk["worker"], "tid": chunk["worker"] + 1, "batch": chunk["batch"],
                            "it": chunk["iteration"], "upd": chunk["update"], "stal": chunk["staleness"],
                            "dropped": chunk["dropped"]}
    shows: dict[str, np.ndarray] = {"batch": batch_keep}
    ts = _us(t)
    cols["ts0"] = ts
    for phase in PHASES:
        dur = chunk[f"{phase}_s"]
        t = t + dur
        end = _us(t)
        cols[f"{phase}_ts"], cols[f"{phase}_dur"] = ts, np.round(end - ts, 3)  # rounded boundaries: events abut
        shows[phase] = dur > 0
        ts = end
    if slow is not None and slow_keep is not None:
        cols["slow"] = slow
        shows["slowdown"] = slow_keep
    shown = np.logical_or.reduce(list(shows.values()))
    if not shown.any():
        return memoryview(b"")
    if not shown.all():  # a row without events would leave an empty line
        cols = {k: v[shown] for k, v in cols.items()}
        shows = {k: v[shown] for k, v in shows.items()}
    c, lit = pl.col, pl.lit
    kinds: dict[str, list[pl.Expr]] = {
        "batch": [lit('{"name":"batch w'), c("w"), lit('","ph":"C","pid":1,"tid":'), c("tid"), lit(',"ts":'),
                  c("ts0"), lit(',"args":{"batch":'), c("batch"), lit("}}")],
        "slowdown": [lit('{"name":"slowdown w'), c("w"), lit('","ph":"C","pid":1,"tid":'), c("tid"), lit(',"ts":'),
                     c("ts0"), lit(',"args":{"slowdown":'), c("slow"), lit("}}")]}
    for phase in PHASES:
        pieces = [lit(f'{{"name":"{phase}","ph":"X","pid":1,"tid":'), c("tid"), lit(',"ts":'), c(f"{phase}_ts"),
                  lit(',"dur":'), c(f"{phase}_dur")]
        if phase == "compute":  # the iteration's slice carries its identity; its other phases sit beside it
            pieces += [lit(',"args":{"iteration":'), c("it"), lit(',"batch":'), c("batch"), lit(',"update":'),
                       c("upd"), lit(',"staleness":'), c("stal"),
                       pl.when(c("dropped")).then(lit(',"dropped":true}')).otherwise(lit("}"))]
        kinds[phase] = [*pieces, lit("}")]
    frame = pl.DataFrame(cols)
    n = frame.height
    events: list[pl.Series] = []
    for kind in ("batch", "slowdown", *PHASES):  # a row's events in this order
        if kind not in shows or not shows[kind].any():
            continue
        text = pl.concat_str(kinds[kind]).alias(kind)
        if shows[kind].all():
            events.append(frame.select(text).to_series())
        else:  # built on the rows that show it; null elsewhere (skipped when the row is joined)
            rows_shown = np.flatnonzero(shows[kind])
            part = frame[rows_shown].select(text).to_series()
            events.append(pl.repeat(None, n, dtype=pl.Utf8, eager=True).alias(kind).scatter(rows_shown, part))
    # the trailing "" gives every row a final separator; a row's absent events are nulls, skipped
    rows = (pl.DataFrame(events).select(pl.concat_str([*(c(e.name) for e in events), lit("")], separator=",\n",
                                                      ignore_nulls=True)).to_series().to_arrow())
    return _string_data(rows)


def _string_data(array: Any) -> memoryview:
    """The characters of an Arrow string array, all its values back to back, as a view of its data buffer."""
    import pyarrow as pa

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if array.type != pa.large_string():
        array = array.cast(pa.large_string())
    _validity, offsets, data = array.buffers()
    bounds = np.frombuffer(offsets, dtype=np.int64)
    return memoryview(data)[int(bounds[array.offset]) : int(bounds[array.offset + len(array)])]


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
) -> Iterator[bytes | memoryview]:
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

    # rows by worker, then iteration; the counters' rules run once over all rows (sequential within a
    # worker: all workers in lockstep at once), ~10 bytes a row beside the records' 97
    order = np.lexsort((it["iteration"], it["worker"]))
    w_all, b_all = it["worker"][order], it["batch"][order]
    batch_keep_all = _batch_emits(w_all, b_all, {})
    slow_all = slow_keep_all = None
    if nominal_compute_s:
        compute_all = it["compute_s"][order]
        nominal = _nominal(w_all, b_all, nominal_compute_s)
        valid = (compute_all > 0) & (nominal > 0)
        slow_all = np.full(n_rows, np.nan)
        slow_all[valid] = np.round(compute_all[valid] / nominal[valid], 2)
        slow_keep_all = _slowdown_emits(w_all, slow_all, {})
    for lo in range(0, n_rows, chunk_rows):
        idx = order[lo:lo + chunk_rows]
        chunk = {k: it[k][idx] for k in _TRACED}
        rows = slice(lo, lo + chunk_rows)
        batch_keep = batch_keep_all[rows]
        slow = slow_keep = None
        if slow_all is not None and slow_keep_all is not None:
            slow, slow_keep = slow_all[rows], slow_keep_all[rows]
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
    """The trace's bytes: :func:`trace_text` as UTF-8, or gzipped as :func:`write_trace` writes them (reproducible)."""
    data = trace_text(trace).encode("utf-8")
    if not gz:
        return data
    out = io.BytesIO()
    sink = _Sink(out, True)
    sink.write(data)
    sink.close()
    return out.getvalue()


GZIP_BLOCK_BYTES = 4 << 20
"""Bytes of trace text deflated as one block by :class:`_Sink` (a fixed cut of the text, so the
``.gz`` bytes do not depend on how the text arrived in pieces)."""
_WINDOW_BYTES = 32 << 10  # deflate's window: each block is primed with the previous block's last 32 KiB
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x04\xff"  # deflate, no name, mtime 0, fastest, unknown OS


def _deflate_block(block: bytes | memoryview, primer: bytes) -> bytes:
    """``block`` as raw deflate data ending on a byte boundary (a sync flush), so that blocks deflated
    apart and put one after another form one deflate stream; ``primer`` is the text just before it."""
    kw = {"zdict": primer} if primer else {}
    c = isal_zlib.compressobj(GZIP_LEVEL, isal_zlib.DEFLATED, -isal_zlib.MAX_WBITS, isal_zlib.DEF_MEM_LEVEL,
                              isal_zlib.Z_DEFAULT_STRATEGY, **kw)
    return c.compress(block) + c.flush(isal_zlib.Z_SYNC_FLUSH)


class _Sink:
    """Writes byte pieces to ``fh``, gzipped if asked, compressing on two threads (ISA-L releases the GIL).

    Gzip as pigz writes it: the text is cut into blocks of ``block_bytes``, each deflated on its own
    (primed with the previous block's last 32 KiB, so matches reach back as in one stream) and ended
    with a sync flush; one after another, then a final empty block, they are one deflate stream in
    one gzip member (RFC 1951/1952) with the CRC-32 and length of the whole text. The bytes depend
    only on the text and the block size, not on how the text arrived in pieces or on the threads'
    timing. At most ``2 x threads`` blocks are in flight (bounded memory).
    """

    def __init__(self, fh: IO[bytes], gz: bool, *, block_bytes: int = GZIP_BLOCK_BYTES, threads: int = 2) -> None:
        self._fh, self._gz, self._block = fh, gz, block_bytes
        self._buf = bytearray()
        self._primer = b""
        self._crc = 0
        self._size = 0
        self._pending: deque[Future[bytes]] = deque()
        self._limit = 2 * threads
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="lbsim-trace-gzip") if gz else None
        if gz:
            fh.write(_GZIP_HEADER)

    def write(self, piece: bytes | memoryview) -> None:
        if not self._gz:
            self._fh.write(piece)
            return
        view = memoryview(piece)
        if self._buf:  # complete the block begun by earlier pieces
            take = self._block - len(self._buf)
            self._buf += view[:take]
            view = view[take:]
            if len(self._buf) < self._block:
                return
            self._submit(bytes(self._buf))
            self._buf.clear()
        while len(view) >= self._block:
            self._submit(view[: self._block])
            view = view[self._block :]
        self._buf += view

    def _submit(self, block: bytes | memoryview) -> None:
        assert self._pool is not None
        self._crc = isal_zlib.crc32(block, self._crc)
        self._size += len(block)
        self._pending.append(self._pool.submit(_deflate_block, block, self._primer))
        self._primer = bytes(block[-_WINDOW_BYTES:])
        while len(self._pending) >= self._limit:
            self._fh.write(self._pending.popleft().result())

    def abort(self) -> None:
        """Stop the compressing threads, dropping what is in flight (the file is being discarded)."""
        if self._pool is not None:
            for future in self._pending:
                future.cancel()
            self._pool.shutdown(wait=True)

    def close(self) -> None:
        """Write what is left, the final block and the gzip trailer (the file itself stays open)."""
        if self._pool is None:
            return
        if self._buf:
            self._submit(bytes(self._buf))
            self._buf.clear()
        while self._pending:
            self._fh.write(self._pending.popleft().result())
        self._pool.shutdown(wait=True)
        self._fh.write(b"\x03\x00")  # a final, empty block (fixed Huffman codes: end of block only)
        self._fh.write(struct.pack("<II", self._crc, self._size & 0xFFFFFFFF))


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
        sink.close()  # a write error (a full disk) is raised here or above, and the atomic file is not swapped in
