"""``trace.json``: Chrome trace-event JSON, one track per worker, phases summing to each worker's busy time."""

from __future__ import annotations

import io
import json
from collections import defaultdict
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lbsim.metrics.records import IterationRecord, UpdateRecord
from lbsim.metrics.trace import PHASES, chrome_trace, trace_text, worker_phase_totals
from lbsim.scenario.loader import load_scenario

REPO = Path(__file__).resolve().parents[1]
EC2 = REPO / "scenarios" / "ec2_mixed.yaml"


def test_exact_events_for_one_iteration() -> None:
    rec = IterationRecord(worker=1, iteration=0, update=0, start_s=0.5, compute_s=1.0, comm_s=0.25, wait_s=0.125,
                          end_s=1.875, batch=32, staleness=0, fetch_s=0.0)
    trace = json.loads(trace_text(chrome_trace([rec], [UpdateRecord(0, 1.6, 32, 1)], worker_names=["a", "b"])))
    xs = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert [(e["name"], e["tid"], e["ts"], e["dur"]) for e in xs] == [
        ("compute", 2, 500_000.0, 1_000_000.0), ("wait", 2, 1_500_000.0, 125_000.0), ("comm", 2, 1_625_000.0, 250_000.0)]
    assert xs[0]["args"] == {"iteration": 0, "batch": 32, "update": 0, "staleness": 0}
    (inst,) = [e for e in trace["traceEvents"] if e["ph"] == "i"]
    assert inst["ts"] == 1_600_000.0 and inst["tid"] == 0 and inst["s"] == "t"
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == {0: "updates", 1: "a", 2: "b"}


@pytest.mark.parametrize("scheme", ["bsp", "asp", "lbbsp"])
def test_simulated_run_trace(scheme: str) -> None:
    from lbsim.simulator.run import simulate

    result = simulate(load_scenario(EC2, ["workload.time_budget_s=40"], scheme=scheme))
    trace = json.loads(trace_text(chrome_trace(result.iterations, result.updates, metadata={"scheme": scheme})))
    assert trace["displayTimeUnit"] == "ms" and trace["otherData"] == {"scheme": scheme}
    events = trace["traceEvents"]
    for e in events:
        assert {"ph", "pid", "tid", "name"} <= set(e)
        if e["ph"] == "X":
            assert e["name"] in PHASES
            assert isinstance(e["ts"], float) and e["ts"] >= 0 and e["dur"] >= 0
            # the compute slice names its iteration; the other phases of the iteration sit beside it
            assert set(e.get("args", {})) == ({"iteration", "batch", "update", "staleness"} if e["name"] == "compute"
                                               else set()) or e.get("args", {}).get("dropped")
    assert sum(e["ph"] == "i" for e in events) == len(result.updates)
    assert {e["tid"] for e in events if e["ph"] == "X"} == set(range(1, result.summary["workers"] + 1))
    # per worker track: the phases add up to the worker's busy time, phase by phase
    busy: dict[int, float] = defaultdict(float)
    per_phase: dict[int, dict[str, float]] = defaultdict(lambda: dict.fromkeys(PHASES, 0.0))
    for r in result.iterations:
        busy[r.worker] += r.end_s - r.start_s
        for phase in PHASES:
            per_phase[r.worker][phase] += getattr(r, f"{phase}_s")
    totals = worker_phase_totals(trace)
    for w, seconds in busy.items():
        assert sum(totals[w].values()) == pytest.approx(seconds, rel=1e-9, abs=1e-6)
        assert totals[w] == pytest.approx(per_phase[w], rel=1e-9, abs=1e-6)
    # events of one track never overlap
    by_tid = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            by_tid[e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_tid.values():
        spans.sort()
        assert all(b[0] >= a[1] - 1e-6 for a, b in zip(spans, spans[1:], strict=False))


def test_run_trace_flag_writes_trace_json(tmp_path: Path) -> None:
    from lbsim.cli import main

    out = tmp_path / "run"
    with redirect_stdout(io.StringIO()):
        assert main(["run", str(EC2), "--set", "workload.time_budget_s=20", "--trace", "--out", str(out), "-q"]) == 0
    trace = json.loads((out / "trace.json").read_text(encoding="utf-8"))
    names = [e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"]
    assert names == ["updates", "w0 p4d.24xlarge", "w1 p4d.24xlarge", "w2 p3.2xlarge", "w3 p3.2xlarge", "w4 g4dn.xlarge",
                     "w5 g4dn.xlarge", "w6 g4dn.xlarge", "w7 g4dn.xlarge", "w8 c5.18xlarge", "w9 c5.18xlarge",
                     "apply"]  # ec2_mixed has a parameter server: its apply track
    assert trace["otherData"]["scheme"] == "bsp" and trace["otherData"]["seed"] == 42
    assert not list(out.glob(".*.tmp"))
    with redirect_stdout(io.StringIO()):
        assert main(["run", str(EC2), "--set", "workload.time_budget_s=20", "--out", str(tmp_path / "plain"), "-q"]) == 0
    assert not (tmp_path / "plain" / "trace.json").exists()


def test_counter_tracks_emit_batch_and_slowdown_on_change_only() -> None:
    """Batch 32, 32, 48 and compute 2x, 2x, 1x nominal t(b) = 0.5 + b/64: counters change twice each."""
    def rec(i: int, batch: int, compute_s: float) -> IterationRecord:
        return IterationRecord(worker=0, iteration=i, update=i, start_s=float(i), compute_s=compute_s, comm_s=0.0,
                               wait_s=0.0, end_s=i + compute_s, batch=batch, staleness=0)

    nominal = [lambda b: 0.5 + b / 64]
    recs = [rec(0, 32, 2.0), rec(1, 32, 2.0), rec(2, 48, 1.25)]
    trace = chrome_trace(recs, [], nominal_compute_s=nominal)
    counters = [(e["name"], e["ts"], e["args"]) for e in trace["traceEvents"] if e["ph"] == "C"]
    assert counters == [("batch w0", 0.0, {"batch": 32}), ("slowdown w0", 0.0, {"slowdown": 2.0}),
                        ("batch w0", 2e6, {"batch": 48}), ("slowdown w0", 2e6, {"slowdown": 1.0})]


def test_server_track_applies_serially_and_gzip_is_reproducible() -> None:
    from lbsim.metrics.trace import trace_bytes

    ups = [UpdateRecord(0, 1.0, 32, 1), UpdateRecord(1, 1.01, 32, 1), UpdateRecord(2, 3.0, 64, 2)]
    trace = chrome_trace([], ups, apply_each_s=0.05)
    spans = [(e["ts"], e["dur"], e["args"]["update"]) for e in trace["traceEvents"] if e["ph"] == "X"]
    # update 1 could start at 0.96 s but the server is busy until 1.0 s; update 2 applies 2 gradients
    assert spans == [(950_000.0, 50_000.0, 0), (1_000_000.0, 10_000.0, 1), (2_900_000.0, 100_000.0, 2)]
    assert worker_phase_totals(trace) == {}  # the server's slices are not a worker's phases
    gz = trace_bytes(trace, gz=True)
    assert gz == trace_bytes(trace, gz=True) and gz[:2] == b"\x1f\x8b"
    import gzip

    assert gzip.decompress(gz) == trace_bytes(trace)


def test_run_trace_gz_on_a_parameter_server(tmp_path: Path) -> None:
    import gzip

    from lbsim.cli import main

    out = tmp_path / "ps"
    with redirect_stdout(io.StringIO()):
        assert main(["run", str(EC2), "--scheme", "asp", "--set", "workload.time_budget_s=5",
                     "--set", "network={name: parameter_server}", "--trace", "gz", "--out", str(out), "-q"]) == 0
    assert not (out / "trace.json").exists()
    trace = json.loads(gzip.decompress((out / "trace.json.gz").read_bytes()))
    procs = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert procs == {"workers", "parameter server"}
    applies = [e for e in trace["traceEvents"] if e.get("cat") == "server"]
    n_updates = sum(e["ph"] == "i" for e in trace["traceEvents"])
    assert 0 < len(applies) <= n_updates
    assert any(e["ph"] == "C" and e["name"].startswith("slowdown") for e in trace["traceEvents"])


def test_streamed_in_pieces_equals_one_piece_and_parses() -> None:
    """The trace is written piece by piece (bounded memory): any chunk size gives the same bytes, and
    the bytes are one JSON document in the layout of trace_text."""
    from lbsim.metrics.trace import trace_chunks
    from lbsim.scenario.resolve import resolve_workers
    from lbsim.simulator.run import simulate

    sc = load_scenario(EC2, ["workload.time_budget_s=30"], scheme="lbbsp")
    result = simulate(sc)
    workers = resolve_workers(sc)
    kw = {"worker_names": [f"w{w.index}" for w in workers], "nominal_compute_s": [w.compute_s for w in workers],
          "metadata": {"scheme": "lbbsp"}}
    whole = b"".join(trace_chunks(result.iterations, result.updates, chunk_rows=10**9, **kw))
    for rows in (1, 7, 64):
        assert b"".join(trace_chunks(result.iterations, result.updates, chunk_rows=rows, **kw)) == whole
    assert trace_text(json.loads(whole)).encode() == whole


def test_write_trace_is_atomic_and_gzip_reproducible(tmp_path: Path) -> None:
    import gzip

    from lbsim.metrics.trace import write_trace

    recs = [IterationRecord(worker=w, iteration=i, update=i, start_s=float(i), compute_s=0.5, comm_s=0.25, wait_s=0.25,
                            end_s=i + 1.0, batch=32, staleness=0) for w in range(3) for i in range(50)]
    ups = [UpdateRecord(i, i + 1.0, 96, 3) for i in range(50)]
    write_trace(tmp_path / "a.json.gz", recs, ups, gz=True, chunk_rows=16)
    write_trace(tmp_path / "b.json.gz", recs, ups, gz=True)
    a, b = (tmp_path / "a.json.gz").read_bytes(), (tmp_path / "b.json.gz").read_bytes()
    assert a == b
    trace = json.loads(gzip.decompress(a))
    assert sum(e["ph"] == "X" for e in trace["traceEvents"]) == 3 * 50 * 3
    # a write that fails leaves no file (and no temporary one)
    seen = []

    def boom(fraction: float) -> None:
        seen.append(fraction)
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        write_trace(tmp_path / "c.json.gz", recs, ups, gz=True, chunk_rows=16, on_progress=boom)
    assert seen and sorted(p.name for p in tmp_path.iterdir()) == ["a.json.gz", "b.json.gz"]


def test_gzip_blocks_form_one_member_whatever_the_pieces() -> None:
    """Text cut into deflate blocks compressed apart is one gzip member of the whole text; the bytes
    depend on the text and the block size only, not on how the text arrived."""
    import gzip
    import zlib

    from lbsim.metrics.trace import _Sink

    text = b"".join(b'{"name":"compute","ph":"X","pid":1,"tid":%d,"ts":%d.5,"dur":%d},\n' % (i % 7, i * 997, i % 13)
                    for i in range(4000))

    def gz(cuts: list[int], block: int) -> bytes:
        out = io.BytesIO()
        sink = _Sink(out, True, block_bytes=block)
        for lo, hi in zip([0, *cuts], [*cuts, len(text)], strict=True):
            sink.write(text[lo:hi])
        sink.close()
        return out.getvalue()

    one = gz([], 10_000)
    assert gz([1, 9_999, 10_000, 10_001, 77_777], 10_000) == one and gz([5_000], 10_000) == one
    d = zlib.decompressobj(31)
    assert d.decompress(one) == text and d.eof and d.unused_data == b""
    assert gzip.decompress(gz([3], 1 << 20)) == text and gz([], 1 << 20) != one


@given(st.lists(st.tuples(st.integers(0, 40), st.floats(0.5, 2.0) | st.just(float("nan"))), max_size=120),
       st.dictionaries(st.integers(0, 40), st.floats(0.5, 2.0), max_size=5))
@settings(max_examples=60, deadline=None)
def test_slowdown_counters_lockstep_equal_row_by_row(rows: list[tuple[int, float]], last: dict[int, float]) -> None:
    """The slowdown rule run for many workers side by side shows exactly the rows shown worker by worker."""
    import numpy as np

    from lbsim.metrics import trace

    rows.sort(key=lambda r: r[0])
    workers = np.array([w for w, _ in rows], dtype=np.int64)
    values = np.round(np.array([v for _, v in rows], dtype=float), 2)
    starts = np.flatnonzero(np.r_[True, np.diff(workers) != 0]) if len(rows) else np.zeros(0, dtype=np.int64)
    lengths = np.diff(np.append(starts, len(rows)))
    by_rows, side = dict(last), dict(last)
    want = np.zeros(len(rows), dtype=bool)
    for lo, n in zip(starts.tolist(), lengths.tolist(), strict=True):  # one worker at a time: row by row
        want[lo:lo + n] = trace._slowdown_emits(workers[lo:lo + n], values[lo:lo + n], by_rows)
    got = trace._slowdown_lockstep(workers, values, side, starts, lengths) if len(rows) else want
    assert np.array_equal(got, want) and side == by_rows
