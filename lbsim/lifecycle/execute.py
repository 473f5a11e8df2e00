"""Running a plan: engine, files, outcome — the part of the lifecycle after the guards.

* :func:`simulate` — one planned run on an engine (default: the simulator); nothing written.
* :func:`write_run` — a run's files into a folder the caller stages: :func:`write_header`
  (``scenario.resolved.yaml``, + ``invocation.json`` when the caller gives its command line; written
  before the engine starts) and :func:`write_results` (the tables, ``provenance.json``,
  ``summary.json`` last: :mod:`lbsim.output`; the Perfetto trace when asked).
* :func:`run` — :func:`simulate` and :func:`write_run` into ``out``, staged and swapped in whole
  (:func:`lbsim.run_folder.staged_run`); :func:`run_into` the same into a folder the caller stages.
* :func:`compare` — every run of a :class:`~lbsim.lifecycle.plan.ComparePlan`, its table rows
  (:func:`compare_rows`) and, with ``out``, ``out/<label>/`` per run and ``out/compare.csv``, staged whole.
* :func:`save_run` / :func:`save_compare` — write an outcome computed earlier (the Python API's ``.save``).
* :func:`run_files` — a sweep's task: run a resolved scenario, return the run folder's files as bytes.

Every function returns typed outcomes (:class:`RunOutcome`, :class:`CompareOutcome`).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lbsim import progress as progress_bars
from lbsim.engine import Engine, ProgressFn, RunResult
from lbsim.lifecycle.engines import default_engine
from lbsim.lifecycle.guards import check_out
from lbsim.lifecycle.plan import ComparePlan, RunSpec
from lbsim.metrics.summary import add_speedups, speedups, time_to_target_speedups
from lbsim.metrics.trace import write_trace as stream_trace
from lbsim.metrics.writers import Format
from lbsim.output import write_compare_table, write_run_header, write_scenario
from lbsim.output import write_run as write_tables
from lbsim.run_folder import staged_run
from lbsim.scenario.loader import scenario_from_data
from lbsim.scenario.overrides import parse_yaml
from lbsim.scenario.resolve import resolve_workers
from lbsim.scenario.schema import Scenario

if TYPE_CHECKING:
    from lbsim.progress import LazyProgress

SIMULATE_SHARE = 0.7
"""Share of a run's progress bar that simulating takes; writing the files is the rest."""
TRACE_SHARE = 0.5
"""With a trace, the share of the bar that streaming it takes (the last part)."""

Finish = Callable[[Path], None]
"""A last step on the staged run folder before it is swapped in (e.g. writing figures)."""


@dataclass(frozen=True)
class RunOutcome:
    """A finished run: its plan, ``summary`` (summary.json's mapping), ``result`` (the records; None
    where they were written and dropped to save memory) and ``path`` (its folder; None if unwritten)."""

    spec: RunSpec
    summary: dict[str, Any]
    result: RunResult | None = None
    path: Path | None = None

    @property
    def label(self) -> str:
        """The run's label: its scheme (and network in a cross-family compare)."""
        return self.spec.label


@dataclass(frozen=True)
class CompareOutcome:
    """A finished comparison: its plan, every run (in the plan's order), ``rows`` (compare.csv's
    rows: each run's summary with the speedups, ``network`` and ``baseline``) and ``path``."""

    plan: ComparePlan
    runs: tuple[RunOutcome, ...]
    rows: tuple[dict[str, Any], ...]
    path: Path | None = None


def _engine(engine: Engine | None) -> Engine:
    return default_engine() if engine is None else engine


def simulate(spec: RunSpec | Scenario, *, engine: Engine | None = None,
             progress: ProgressFn | None = None) -> RunResult:
    """Run one planned scenario on ``engine`` (default: the simulator); nothing is written."""
    scenario = spec.scenario if isinstance(spec, RunSpec) else spec
    run_on = _engine(engine)
    return run_on(scenario) if progress is None else run_on(scenario, progress)


def write_trace(out: Path, scenario: Scenario, result: RunResult, kind: str = "json",
                on_progress: Callable[[float], None] | None = None) -> None:
    """``out/trace.json`` (or ``trace.json.gz``): the worker timelines in Chrome trace-event format
    (Perfetto), streamed in bounded memory (:func:`lbsim.metrics.trace.write_trace`)."""
    workers = resolve_workers(scenario)
    names = [f"w{w.index} {w.instance}" for w in workers]
    meta = {k: result.summary.get(k) for k in ("scheme", "seed", "engine", "workers")}
    net = scenario.network
    apply_each_s = net.apply_s / net.shards if getattr(net, "kind", "") == "parameter_server" else None  # type: ignore[union-attr]
    stream_trace(out / ("trace.json.gz" if kind == "gz" else "trace.json"), result.iterations, result.updates,
                 gz=kind == "gz", on_progress=on_progress, worker_names=names,
                 metadata={"scenario": scenario.name, **meta}, nominal_compute_s=[w.compute_s for w in workers],
                 apply_each_s=apply_each_s)


def write_header(folder: Path, scenario: Scenario, argv: Sequence[str] | None = None) -> None:
    """What a run folder says before its results (written before the engine starts, so a failed run
    still says what it ran): the scenario as run and, when ``argv`` is given, ``invocation.json``."""
    if argv is None:
        write_scenario(folder, scenario)
    else:
        write_run_header(folder, scenario, argv)


def write_results(folder: Path, scenario: Scenario, result: RunResult, *, fmt: Format = "csv",
                  trace: str | None = None, on_file: Callable[[str], None] | None = None,
                  on_trace: Callable[[float], None] | None = None) -> None:
    """A run's results into ``folder``: the tables as ``fmt``, ``provenance.json``, ``summary.json``
    (:func:`lbsim.output.write_run`), then the Perfetto trace when ``trace`` is ``json`` or ``gz``
    (``on_trace(fraction)`` as it streams)."""
    write_tables(folder, result.iterations, result.updates, result.summary, result.decisions, result.numerics,
                 fmt=fmt, on_file=on_file)
    if trace:
        if on_file is not None:
            on_file("trace")
        write_trace(folder, scenario, result, trace, on_progress=on_trace)


def write_run(folder: Path, scenario: Scenario, result: RunResult, *, argv: Sequence[str] | None = None,
              fmt: Format = "csv", trace: str | None = None, on_file: Callable[[str], None] | None = None) -> None:
    """One run's files into ``folder`` (which the caller stages): :func:`write_header` then :func:`write_results`."""
    write_header(folder, scenario, argv)
    write_results(folder, scenario, result, fmt=fmt, trace=trace, on_file=on_file)


def _bar(label: str, progress: bool | None) -> AbstractContextManager[LazyProgress | None]:
    """A lazily shown progress bar (``progress`` None: on a terminal only; False: none)."""
    if progress is False:
        return nullcontext(None)

    return progress_bars.LazyProgress(label, enabled=progress)  # looked up on call: a test records the bar


def run_into(folder: Path, spec: RunSpec, *, engine: Engine | None = None, argv: Sequence[str] | None = None,
             fmt: Format = "csv", trace: str | None = None, label: str | None = None,
             progress: bool | None = False, keep_result: bool = True) -> RunOutcome:
    """Simulate ``spec`` and write its files into ``folder`` (which the caller stages; created if missing).

    ``label`` titles the progress bar (default: the spec's label); ``keep_result=False`` drops the
    records once written (a comparison of big runs keeps only the summaries).
    """
    label = spec.label if label is None else label
    folder.mkdir(parents=True, exist_ok=True)
    write_header(folder, spec.scenario, argv)
    with _bar(f"{label}: simulate", progress) as bar:
        if bar is None:
            result = simulate(spec, engine=engine)
            write_results(folder, spec.scenario, result, fmt=fmt, trace=trace)
        else:
            scale = 1.0 - TRACE_SHARE if trace else 1.0  # with a trace, streaming it is the bar's last half
            result = simulate(spec, engine=engine, progress=lambda f: bar.update(scale * SIMULATE_SHARE * f))
            shares = iter((SIMULATE_SHARE, 0.95, 0.97, 0.99))  # iterations is by far the largest table
            write_results(folder, spec.scenario, result, fmt=fmt, trace=trace,
                          on_file=lambda name: bar.update(scale * next(shares, 0.99), f"{label}: write {name}"),
                          on_trace=lambda f: bar.update(scale + 0.99 * TRACE_SHARE * f))
    return RunOutcome(spec, result.summary, result if keep_result else None, folder)


def run(spec: RunSpec, out: Path | None = None, *, engine: Engine | None = None, argv: Sequence[str] | None = None,
        fmt: Format = "csv", trace: str | None = None, progress: bool | None = False,
        finish: Finish | None = None) -> RunOutcome:
    """One run: simulated and, with ``out``, written there whole (staged, swapped in at the end;
    ``finish(stage)`` runs last, e.g. figures). Without ``out`` nothing is written."""
    if out is None:
        return RunOutcome(spec, (result := simulate(spec, engine=engine)).summary, result)
    with staged_run(check_out(out)) as stage:  # the folder holds this whole run, or the previous one
        done = run_into(stage, spec, engine=engine, argv=argv, fmt=fmt, trace=trace, progress=progress)
        if finish is not None:
            finish(stage)
    return RunOutcome(spec, done.summary, done.result, out)


def compare_rows(plan: ComparePlan, summaries: Sequence[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    """compare.csv's rows: each summary (copied), then ``speedup_vs_first`` (and in numerics mode
    ``speedup_time_to_target_vs_first``), then ``network`` (the kind each run used), ``baseline`` (the
    baseline's label) and ``speedup_vs_baseline`` (``speedup_time_to_target_vs_baseline``): throughput
    ratios over the baseline's run, on the same seed."""
    rows = [dict(s) for s in summaries]
    numerics = add_speedups(rows)
    base = plan.labels.index(plan.baseline)
    vs_base = speedups(rows, base)
    tta = time_to_target_speedups(rows, base) if numerics else None
    for i, (row, spec) in enumerate(zip(rows, plan.runs, strict=True)):
        row["network"] = spec.network
        row["baseline"] = plan.baseline
        row["speedup_vs_baseline"] = vs_base[i]
        if tta is not None:
            row["speedup_time_to_target_vs_baseline"] = tta[i]
    return tuple(rows)


def compare(plan: ComparePlan, out: Path | None = None, *, engine: Engine | None = None,
            argv: Sequence[str] | None = None, fmt: Format = "csv", progress: bool | None = False,
            keep_results: bool | None = None) -> CompareOutcome:
    """Every run of ``plan``, in order, and the comparison's rows.

    With ``out``: ``out/<label>/`` per run and ``out/compare.csv``, staged and swapped in together;
    the records are dropped once written unless ``keep_results``. Without ``out`` nothing is written
    and the records are kept (``keep_results`` defaults to ``out is None``).
    """
    keep = out is None if keep_results is None else keep_results
    if out is None:
        runs = tuple(RunOutcome(s, (r := simulate(s, engine=engine)).summary, r if keep else None) for s in plan.runs)
        return CompareOutcome(plan, runs, compare_rows(plan, [r.summary for r in runs]))
    with staged_run(check_out(out)) as stage:  # every scheme's run and compare.csv, swapped in together
        done = [run_into(stage / s.label, s, engine=engine, argv=argv, fmt=fmt, progress=progress, keep_result=keep)
                for s in plan.runs]
        rows = compare_rows(plan, [r.summary for r in done])
        write_compare_table(stage, rows)
    runs = tuple(RunOutcome(r.spec, r.summary, r.result, out / r.label) for r in done)
    return CompareOutcome(plan, runs, rows, out)


def save_run(out: Path, outcome: RunOutcome, *, argv: Sequence[str] | None = None, fmt: Format = "csv",
             option: str = "--out") -> Path:
    """Write a simulated run (records kept) into ``out`` as :func:`run` would have; returns ``out``
    (``option`` names ``out`` in errors)."""
    if outcome.result is None:
        raise ValueError("only a run whose records are kept can be saved")
    with staged_run(check_out(out, option)) as stage:
        write_run(stage, outcome.spec.scenario, outcome.result, argv=argv, fmt=fmt)
    return out


def save_compare(out: Path, outcome: CompareOutcome, *, argv: Sequence[str] | None = None,
                 fmt: Format = "csv", option: str = "--out") -> Path:
    """Write a computed comparison (records kept) into ``out`` as :func:`compare` would have."""
    if any(r.result is None for r in outcome.runs):
        raise ValueError("only a comparison whose records are kept can be saved")
    with staged_run(check_out(out, option)) as stage:
        for r in outcome.runs:
            (stage / r.label).mkdir()
            write_run(stage / r.label, r.spec.scenario, r.result, argv=argv, fmt=fmt)  # type: ignore[arg-type]
        write_compare_table(stage, outcome.rows)
    return out


def run_files(engine: Engine | None, resolved_yaml: str, fmt: Format = "csv") -> dict[str, bytes]:
    """A sweep's task: run the resolved scenario ``resolved_yaml``; the run folder's files (tables as
    ``fmt``; no ``invocation.json``: a sweep run is named by its content), name -> bytes."""
    scenario = scenario_from_data(parse_yaml(resolved_yaml))
    result = simulate(scenario, engine=engine)
    with tempfile.TemporaryDirectory(prefix="lbsim-run-") as tmp:
        folder = Path(tmp)
        write_run(folder, scenario, result, fmt=fmt)
        return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and not p.name.startswith(".")}
