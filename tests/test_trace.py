"""``trace.json``: Chrome trace-event JSON, one track per worker, phases summing to each worker's busy time."""

from __future__ import annotations

import io
import json
from collections import defaultdict
from contextlib import redirect_stdout
from pathlib import Path

import pytest

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
    from simulator.run import simulate

    result = simulate(load_scenario(EC2, ["workload.time_budget_s=40"], scheme=scheme))
    trace = json.loads(trace_text(chrome_trace(result.iterations, result.updates, metadata={"scheme": scheme})))
    assert trace["displayTimeUnit"] == "ms" and trace["otherData"] == {"scheme": scheme}
    events = trace["traceEvents"]
    for e in events:
        assert {"ph", "pid", "tid", "name"} <= set(e)
        if e["ph"] == "X":
            assert e["name"] in PHASES and e["cat"] == e["name"]
            assert isinstance(e["ts"], float) and e["ts"] >= 0 and e["dur"] >= 0
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
                     "w5 g4dn.xlarge", "w6 g4dn.xlarge", "w7 g4dn.xlarge", "w8 c5.18xlarge", "w9 c5.18xlarge"]
    assert trace["otherData"]["scheme"] == "bsp" and trace["otherData"]["seed"] == 42
    assert not list(out.glob(".*.tmp"))
    with redirect_stdout(io.StringIO()):
        assert main(["run", str(EC2), "--set", "workload.time_budget_s=20", "--out", str(tmp_path / "plain"), "-q"]) == 0
    assert not (tmp_path / "plain" / "trace.json").exists()
