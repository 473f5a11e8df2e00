"""Comparing the runtime with the simulator: the errors ``lbsim validate`` reports (pure; no torch).

``lbsim validate`` profiles this machine, runs each scheme in the runtime with the calibrated
figures, simulates the calibrated scenario, and for every scheme compares (runtime = truth). The
profiles bracket each run (one before, one after): the runtime runs with the one before, the
simulator gets both pooled, so a machine whose speed drifts (other tenants) is not counted as
simulator error.

* ``mean_iteration_s`` and ``throughput_samples_per_s``: relative error ``(simulator - runtime) / runtime``;
* ``staleness_mean`` and ``final_accuracy`` (when the simulator ran with ``numerics``): absolute
  differences ``simulator - runtime``;
* the batch-size trajectory (synchronous schemes; a parameter-server update is one gradient): every worker's batch in every update both engines made,
  ``batch_trajectory = sum |x_sim - x_rt| / sum x_rt`` over updates and workers (0: identical
  decisions; 2: disjoint) — with measured, noisy step times the per-update decisions differ even
  when the sizing converges to the same split, so ``mean_batch`` (the same distance between each
  worker's mean batch over the run) is reported too.

``--repeats K`` runs the whole comparison K times (``repeat_1`` … ``repeat_K``, each with its own
bracketing profiles) and reports, per scheme and error, the median, min, max and the spread
(max − min) over the repeats (:func:`repeat_summary`); the sign convention is the same
(positive: the simulator is slower / higher than the runtime).

The engines' outputs are read back from their run directories (``summary.json``, ``iterations.csv``),
so a comparison can be redone from saved runs.
"""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from lbsim.schemes.registry import BASELINE_SCHEME

from .config import uses_server

METRICS = ("mean_iteration_s", "throughput_samples_per_s", "p99_iteration_s", "mean_barrier_wait_s", "wait_fraction",
           "fetch_fraction")


REPEAT_METRICS = ("mean_iteration_s", "throughput_samples_per_s", "batch_trajectory", "mean_batch", "staleness_mean",
                  "final_accuracy")


class Monotone:
    """A progress callback that never goes backwards (a restarted rank or phase reports less)."""

    def __init__(self, update: Any) -> None:
        self.update = update
        self.best = 0.0

    def __call__(self, fraction: float) -> None:
        if fraction > self.best:
            self.best = min(1.0, float(fraction))
            self.update(self.best)


def repeat_summary(scenario: str, reports: list[dict[str, Any]]) -> dict[str, Any]:
    """Median, min, max and spread of every scheme's errors over repeated validations (pure)."""
    import statistics

    schemes: dict[str, dict[str, Any]] = {}
    for name in reports[0]["schemes"]:
        stats: dict[str, Any] = {}
        for m in REPEAT_METRICS:
            vals = [r["schemes"][name]["error"].get(m) for r in reports if name in r["schemes"]]
            vals = [v for v in vals if v is not None]
            stats[m] = ({"median": float(f"{statistics.median(vals):.6g}"), "min": min(vals), "max": max(vals),
                         "spread": float(f"{max(vals) - min(vals):.6g}"), "values": vals} if vals else None)
        schemes[name] = stats
    return {
        "scenario": scenario,
        "repeats": len(reports),
        "error_definition": "errors (simulator - runtime) / runtime (staleness, accuracy: simulator - runtime); "
                            "positive = simulator slower/higher; median (min, max) over repeats",
        "schemes": schemes,
        "runs": [f"repeat_{i + 1}/validation.json" for i in range(len(reports))],
    }


def read_batches(run_dir: Path) -> dict[int, dict[int, int]]:
    """``{update: {worker: batch}}`` of the gradients in each update (iterations.csv)."""
    out: dict[int, dict[int, int]] = defaultdict(dict)
    with open(run_dir / "iterations.csv", encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            if int(row["update"]) >= 0 and row.get("dropped", "0") in ("0", "False", "false"):
                out[int(row["update"])][int(row["worker"])] = int(row["batch"])
    return dict(out)


def _rel(sim: float | None, rt: float | None) -> float | None:
    if sim is None or rt is None or rt == 0:
        return None
    return float(f"{(sim - rt) / rt:.6g}")


def compare_runs(runtime_dir: Path, simulator_dir: Path) -> dict[str, Any]:
    """Side-by-side figures and errors of one scheme."""
    rt = json.loads((runtime_dir / "summary.json").read_text(encoding="utf-8"))
    sim = json.loads((simulator_dir / "summary.json").read_text(encoding="utf-8"))
    b_rt, b_sim = read_batches(runtime_dir), read_batches(simulator_dir)
    common = sorted(set(b_rt) & set(b_sim))
    workers = sorted({w for u in common for w in b_rt[u]})
    diff = sum(abs(b_sim[u].get(w, 0) - b_rt[u].get(w, 0)) for u in common for w in workers)
    total = sum(b_rt[u].get(w, 0) for u in common for w in workers)

    def mean_batch(b: dict[int, dict[int, int]]) -> list[float]:
        return [float(f"{sum(b[u].get(w, 0) for u in common) / max(1, len(common)):.6g}") for w in workers]

    entry: dict[str, Any] = {"runtime": {}, "simulator": {}, "error": {}}
    for m in METRICS:
        entry["runtime"][m] = rt.get(m)
        entry["simulator"][m] = sim.get(m)
    entry["runtime"]["updates"], entry["simulator"]["updates"] = rt.get("updates"), sim.get("updates")
    entry["runtime"]["mean_batch"], entry["simulator"]["mean_batch"] = mean_batch(b_rt), mean_batch(b_sim)
    entry["runtime"]["final_batches"] = [b_rt[common[-1]].get(w, 0) for w in workers] if common else []
    entry["simulator"]["final_batches"] = [b_sim[common[-1]].get(w, 0) for w in workers] if common else []
    for m in ("mean_iteration_s", "throughput_samples_per_s"):
        entry["error"][m] = _rel(sim.get(m), rt.get(m))
    entry["error"]["batch_trajectory"] = float(f"{diff / total:.6g}") if total else None
    mean_rt, mean_sim = entry["runtime"]["mean_batch"], entry["simulator"]["mean_batch"]
    mean_diff = sum(abs(a - b) for a, b in zip(mean_sim, mean_rt, strict=True))
    entry["error"]["mean_batch"] = float(f"{mean_diff / sum(mean_rt):.6g}") if sum(mean_rt) else None
    entry["error"]["compared_updates"] = len(common)
    for m in ("staleness_mean", "final_accuracy"):  # absolute differences (a relative one means little near 0)
        entry["runtime"][m], entry["simulator"][m] = rt.get(m), sim.get(m)
        a, b = sim.get(m), rt.get(m)
        entry["error"][m] = float(f"{a - b:.6g}") if a is not None and b is not None else None
    if uses_server(str(rt.get("scheme"))):
        # one gradient per update, every worker at its fixed batch: the batch distances say nothing
        entry["error"]["batch_trajectory"] = entry["error"]["mean_batch"] = None
    return entry


def validation_report(scenario: str, calibrations: dict[str, dict[str, Any]], entries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The ``validation.json`` document (``calibrations``: the profile each scheme's run was calibrated with)."""
    worst = {}
    for m in ("mean_iteration_s", "throughput_samples_per_s", "batch_trajectory", "mean_batch", "staleness_mean",
              "final_accuracy"):
        vals = [abs(e["error"][m]) for e in entries.values() if e["error"].get(m) is not None]
        worst[m] = max(vals) if vals else None
    speedup = None
    if BASELINE_SCHEME in entries:
        base_rt = entries[BASELINE_SCHEME]["runtime"]["throughput_samples_per_s"]
        base_sim = entries[BASELINE_SCHEME]["simulator"]["throughput_samples_per_s"]
        speedup = {
            name: {"runtime": float(f"{e['runtime']['throughput_samples_per_s'] / base_rt:.6g}"),
                   "simulator": float(f"{e['simulator']['throughput_samples_per_s'] / base_sim:.6g}")}
            for name, e in entries.items() if base_rt and base_sim
        }
    return {
        "scenario": scenario,
        "error_definition": "(simulator - runtime) / runtime; batch_trajectory = sum|x_sim - x_rt| / sum x_rt",
        "calibration": {
            name: {"groups": cal.get("groups"), "workers": cal.get("workers"),
                   "network": cal.get("overrides", {}).get("network"), "comm_s_mean": cal.get("comm_s_mean")}
            for name, cal in calibrations.items()
        },
        "schemes": entries,
        "speedup_vs_bsp": speedup,
        "max_abs_error": worst,
    }


TABLE = (
    ("mean iter rt (s)", lambda e: f"{e['runtime']['mean_iteration_s']:.4f}"),
    ("mean iter sim (s)", lambda e: f"{e['simulator']['mean_iteration_s']:.4f}"),
    ("err", lambda e: _pct(e["error"]["mean_iteration_s"])),
    ("samples/s rt", lambda e: f"{e['runtime']['throughput_samples_per_s']:.0f}"),
    ("samples/s sim", lambda e: f"{e['simulator']['throughput_samples_per_s']:.0f}"),
    ("err", lambda e: _pct(e["error"]["throughput_samples_per_s"])),
    ("stale rt", lambda e: _num(e["runtime"].get("staleness_mean"), ".2f")),
    ("stale sim", lambda e: _num(e["simulator"].get("staleness_mean"), ".2f")),
    ("acc rt", lambda e: _num(e["runtime"].get("final_accuracy"), ".3f")),
    ("acc sim", lambda e: _num(e["simulator"].get("final_accuracy"), ".3f")),
    ("batch traj err", lambda e: _pct(e["error"]["batch_trajectory"])),
    ("mean batch err", lambda e: _pct(e["error"]["mean_batch"])),
)


def _num(x: float | None, fmt: str) -> str:
    return "n/a" if x is None else format(x, fmt)


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.1%}"
