"""``lbsim whatif``: the recorded job fitted, replayed through the run lifecycle, its losses attributed.

The folder it writes (swapped in whole, :mod:`lbsim.run_folder`)::

    scenario.yaml, slowdown.csv, ideal_slowdown.csv   the fitted job (lbsim.whatif.scenario): edit and run it
    replay/     the job under its own scheme (must reproduce the recorded job time)
    ideal/      the same without stragglers (every rank no slower than its device's typical rank)
    compare/    every scheme, each on its family's network (lbsim compare --cross-family), vs plain DDP
    lbbsp_library/   LB-BSP as lbsim.runtime.ddp deploys it (predictor ema, split_dead_band 0.1, a decision
                per 4 steps taking effect 2 windows later)
    whatif.json the figures below; heatmap.csv (+ heatmap.png with matplotlib): slowdown by rank x time

Every replay is a plan (:func:`lbsim.lifecycle.plan_run`, :func:`~lbsim.lifecycle.plan_compare`)
run by :func:`lbsim.lifecycle.run` / :func:`~lbsim.lifecycle.compare`, so the guards and the files
are those of ``lbsim run`` and ``lbsim compare``.

**Intervals.** The speedup of each scheme over the baseline comes with a moving-block bootstrap
over steps (Künsch 1989): ``bootstrap`` replicates, each a trace of the recording's step factors
resampled in blocks of ``L = ceil(sqrt(steps))`` consecutive steps (the same blocks for every rank, so a
straggler's correlation across ranks and over time survives), replayed under every scheme and the
baseline; the interval is the 2.5-97.5 % percentile range of the replicates' speedups (the point
estimate, from the recorded order, is kept inside it).
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lbsim import lifecycle
from lbsim.errors import InputError
from lbsim.recording import read_recording
from lbsim.run_folder import staged_run
from lbsim.schemes.registry import BASELINE_SCHEME, not_applicable, scheme_names
from lbsim.stats.intervals import Estimate
from lbsim.whatif.attribution import attribute
from lbsim.whatif.fit import fit_recording
from lbsim.whatif.outcome import SchemeRow, WhatifOutcome
from lbsim.whatif.report import write_report
from lbsim.whatif.scenario import IDEAL_TRACE_FILE, TRACE_FILE, scenario_data, scenario_yaml, trace_csv

LIBRARY_LBBSP = "lbbsp_library"
# lbsim.runtime.ddp's defaults: predictor ema, split_dead_band 0.1, one decision per 4 steps, in flight (lag 2)
LIBRARY_OPTIONS = {"scheme.predictor": "ema", "scheme.split_dead_band": 0.1, "scheme.decide_every": 4, "scheme.decision_lag": 2}
MAX_BOOTSTRAP = 200
BOOTSTRAP_SEED = 20_261_127


def default_schemes() -> tuple[str, ...]:
    """Every registered scheme that applies to a recording (LOFT without a ``data:`` section, which a
    recording has not, sizes batches as LB-BSP's ``gpu_model`` and keeps its robust aggregation; a
    recorded job has no sample-cost model, so a scheme that would only repeat BSP without one is left out)."""
    return tuple(n for n in scheme_names() if not_applicable(n, sample_cost=False) is None)


def block_resample(steps: int, rng: np.random.Generator, block: int) -> np.ndarray:
    """Step indices of one moving-block bootstrap replicate of ``steps`` steps."""
    starts = rng.integers(0, max(1, steps - block + 1), size=math.ceil(steps / block))
    return np.concatenate([np.arange(s, s + block) for s in starts])[:steps]


def _speedups(scenario: Path, schemes: Sequence[str], overrides: Sequence[str]) -> dict[str, float]:
    """Each scheme's throughput over the baseline's (in memory: nothing written)."""
    plan = lifecycle.plan_compare(scenario, list(schemes), overrides=list(overrides), baseline=BASELINE_SCHEME,
                                  cross_family=True)
    done = lifecycle.compare(plan)
    out = {spec.label: float(row["speedup_vs_baseline"]) for row, spec in zip(done.rows, plan.runs, strict=True)}
    base = next(r for r in done.runs if r.spec.label == plan.baseline).summary["throughput_samples_per_s"]
    lib = lifecycle.run(lifecycle.plan_run(scenario, scheme="lbbsp", overrides=[*overrides, *_library()]))
    out[LIBRARY_LBBSP] = float(lib.summary["throughput_samples_per_s"]) / base if base else 0.0
    return out


def _library() -> list[str]:
    return [f"{k}={v}" for k, v in LIBRARY_OPTIONS.items()]


def _interval(value: float, replicates: list[float], level: float = 0.95) -> Estimate:
    if len(replicates) < 3:
        return Estimate(value, None, None, len(replicates), f"no interval from {len(replicates)} bootstrap replicates (needs 3)")
    lo, hi = (float(q) for q in np.quantile(replicates, [(1 - level) / 2, (1 + level) / 2]))
    return Estimate(value, min(lo, value), max(hi, value), len(replicates),
                    f"{level:.0%} moving-block bootstrap over steps ({len(replicates)} replicates)")


def _rewrite_paths(folder: Path, stage: Path, out: Path) -> None:
    """The runs' scenario.resolved.yaml name the traces by the staging folder's path: name the final one."""
    for p in folder.rglob("scenario.resolved.yaml"):
        p.write_text(p.read_text(encoding="utf-8").replace(str(stage), str(out)), encoding="utf-8")


def whatif(job: str | Path, out: Path, *, scheme: str | None = None, schemes: Sequence[str] | None = None,
           bootstrap: int = 20, t0_s: float | None = None, argv: Sequence[str] | None = None,
           finish: Any = None) -> WhatifOutcome:
    """Read, fit, replay and compare the recorded job ``job`` into ``out`` (module docstring)."""
    if not 0 <= bootstrap <= MAX_BOOTSTRAP:
        raise InputError("--bootstrap", f"must lie in [0, {MAX_BOOTSTRAP}], got {bootstrap}")
    names = list(schemes) if schemes is not None else list(default_schemes())
    lifecycle.check_scheme_names("--schemes", names)
    if BASELINE_SCHEME not in names:
        names.insert(0, BASELINE_SCHEME)
    if scheme is not None:
        lifecycle.check_scheme_names("--scheme", [scheme])
    rec = read_recording(job, scheme={"name": scheme} if scheme is not None else None)
    fit = fit_recording(rec, t0_s)
    attribution = attribute(fit, rec.samples)
    name = Path(job).name.split(".")[0] or "job"
    data = scenario_data(rec, fit, name=f"whatif_{name}")
    out = Path(out).absolute()
    with staged_run(lifecycle.check_out(out)) as stage:
        scenario = stage / "scenario.yaml"
        (stage / TRACE_FILE).write_text(trace_csv(fit.start_s, fit.factors), encoding="utf-8")
        (stage / IDEAL_TRACE_FILE).write_text(trace_csv(fit.start_s, fit.ideal), encoding="utf-8")
        scenario.write_text(scenario_yaml(rec, fit, data), encoding="utf-8")
        replay = lifecycle.run(lifecycle.plan_run(scenario), stage / "replay", argv=argv)
        ideal = lifecycle.run(lifecycle.plan_run(scenario, overrides=[f"contention.0.path={IDEAL_TRACE_FILE}"]),
                              stage / "ideal", argv=argv)
        plan = lifecycle.plan_compare(scenario, names, baseline=BASELINE_SCHEME, cross_family=True)
        compared = lifecycle.compare(plan, stage / "compare", argv=argv)
        lib = lifecycle.run(lifecycle.plan_run(scenario, scheme="lbbsp", overrides=_library()), stage / LIBRARY_LBBSP,
                            argv=argv)
        base_tp = compared.rows[plan.labels.index(plan.baseline)]["throughput_samples_per_s"]
        point = {spec.label: float(row["speedup_vs_baseline"]) for row, spec in zip(compared.rows, plan.runs, strict=True)}
        point[LIBRARY_LBBSP] = float(lib.summary["throughput_samples_per_s"]) / base_tp if base_tp else 0.0
        replicates: dict[str, list[float]] = {k: [] for k in point}
        if bootstrap:
            rng = np.random.default_rng(BOOTSTRAP_SEED)
            block = max(1, math.ceil(math.sqrt(fit.steps)))
            with tempfile.TemporaryDirectory(prefix="lbsim-whatif-") as tmp:
                for i in range(bootstrap):
                    idx = block_resample(fit.steps, rng, block)
                    trace = Path(tmp) / f"bootstrap_{i}.csv"
                    trace.write_text(trace_csv(fit.start_s, fit.factors[:, idx]), encoding="utf-8")
                    for label, value in _speedups(scenario, names, [f"contention.0.path={trace}"]).items():
                        replicates[label].append(value)
        rows = []
        for spec, row in zip(plan.runs, compared.rows, strict=True):
            rows.append(SchemeRow(spec.label, spec.network, float(row["throughput_samples_per_s"]), float(row["sim_time_s"]),
                                  _interval(point[spec.label], replicates[spec.label])))
        rows.append(SchemeRow(LIBRARY_LBBSP, lib.spec.network, float(lib.summary["throughput_samples_per_s"]),
                              float(lib.summary["sim_time_s"]), _interval(point[LIBRARY_LBBSP], replicates[LIBRARY_LBBSP])))
        outcome = WhatifOutcome(rec, fit, attribution, float(replay.summary["sim_time_s"]), float(ideal.summary["sim_time_s"]),
                                plan.describe_baseline(), tuple(rows), out, rec.notes)
        write_report(stage, outcome)
        _rewrite_paths(stage, stage, out)
        if finish is not None:
            finish(stage, outcome)
    return outcome
