"""The tables of ``docs/validation.md``: lbsim, Pollux and the catalog model against the Pollux traces.

For each of the six Pollux models (``data/pollux_t4/``, shipped with its licence and source):

1. ``lbsim calibrate`` on the fit placements (its command, on the lifecycle's default engine: fit, then
   one simulation per row);
   its ``predictions.csv`` gives lbsim's calibrated error of every row;
2. Pollux's model (:mod:`lbsim.calibration.pollux`) fitted on the same rows;
3. the uncalibrated catalog model: the ``g4dn.12xlarge`` catalog links, the default algorithm
   (ring), no overlap, no shared-node slowdown, t(b) from the single-GPU rows (lbsim's formulas:
   the same functions the engines run).

4. **Robustness**: the same fit on other fit subsets (:data:`ALT_SUBSETS`), held-out errors from
   the fitted model's formulas (the engine reproduces them: step 1 checks it on every row).

Errors are ``predicted / measured − 1`` (positive: predicted too slow); geomean |error| =
``exp(mean(log(1 + |e|))) − 1``. :func:`document_text` puts the tables after the document's
``<!-- generated -->`` marker and keeps the method text above it (``docs/tools/validation_tables.py``
writes the page).
"""

from __future__ import annotations

import argparse
import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lbsim.calibration import pollux
from lbsim.calibration.arguments import calibrate_arguments
from lbsim.calibration.command import run as calibrate
from lbsim.calibration.compute import fit_compute_curve
from lbsim.calibration.error_stats import abs_quantile, coverage, geomean_abs, ratio_errors
from lbsim.calibration.fit import DEFAULT_CHUNK_SHARE, calibrate_rows, intra_bounds_for, predict_rows
from lbsim.calibration.interval import NOMINAL
from lbsim.calibration.measured import Row, parse_fit_placements, read_measurements, role_of
from lbsim.calibration.model import LinkFigures
from lbsim.calibration.repeatability import estimate_noise, perfect_model_floor, rows_per_placement
from lbsim.calibration.run import check_instance
from lbsim.calibration.select import AUTO, JitterChoice, calibrate_auto, with_interval
from lbsim.lifecycle.engines import default_engine
from lbsim.network.overlap import OverlapParams
from lbsim.scenario import catalog
from lbsim.scenario.sections import AllReduceConfig

MARK = "<!-- generated -->"
FIT_PLACEMENTS = "2,4,11,22,1111"
# gradient bytes = parameters x 4 (fp32), parameter counts from the traces README §6; the held-out geomean |error| target
MODELS: dict[str, tuple[int, float]] = {
    "cifar10": (11_173_962 * 4, 0.10), "imagenet": (25_557_032 * 4, 0.10), "bert": (108_893_186 * 4, 0.10),
    "ncf": (1_602_657 * 4, 0.15), "deepspeech2": (41_187_968 * 4, 0.15), "yolov3": (61_626_049 * 4, 0.15),
}
CATALOG_INSTANCE = "g4dn.12xlarge"
# other fit subsets (robustness): a model that is right generalises whichever small placements it is fitted on
ALT_SUBSETS = ("2,4,11,22,111", "2,4,22,44,11")


@dataclass(frozen=True)
class ModelResult:
    """One model's rows with each row's role and relative error under lbsim, Pollux and the catalog model,
    the fitted ``fit.yaml``, and lbsim's interval and extrapolation flags per row."""

    model: str
    rows: list[Row]
    role: list[str]
    lbsim: np.ndarray  # relative errors, engine predictions
    pollux: np.ndarray
    catalog: np.ndarray
    fit_text: str
    low: np.ndarray | None = None  # the interval of each row (NaN: none); None: not read
    high: np.ndarray | None = None
    extrapolates: tuple[str, ...] = ()  # per row: why it extrapolates ("" inside the fit domain)

    def measured(self) -> np.ndarray:
        """The measured step times, in row order."""
        return np.array([r.step_time_s for r in self.rows])

    def ratio(self, errors: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The ratio errors of ``errors`` over the rows in ``mask`` (:func:`~lbsim.calibration.error_stats.ratio_errors`)."""
        return ratio_errors([r.label for r in self.rows], [r.local_bsz for r in self.rows], self.measured(),
                            errors, mask)

    def covered(self, mask: np.ndarray) -> float:
        """The interval coverage of the rows in ``mask`` (NaN: no interval read)."""
        if self.low is None or self.high is None:
            return float("nan")
        return coverage(self.measured()[mask], self.low[mask], self.high[mask])


def catalog_errors(rows: Sequence[Row], gradient_bytes: int) -> np.ndarray:
    """Relative errors of the uncalibrated catalog model (module docstring, step 3)."""
    inst = catalog.INSTANCES[CATALOG_INSTANCE]
    fig = LinkFigures(
        intra_bandwidth_gbps=inst.intra_bandwidth_gbps or inst.bandwidth_gbps, intra_latency_s=inst.intra_latency_s or 0.0,
        nic_bandwidth_gbps=inst.bandwidth_gbps, nic_latency_s=AllReduceConfig().alpha_s,
        shared_node_slowdown=inst.shared_node_slowdown, overlap=OverlapParams(), algorithm="ring",
        ring_latency="slowest_hop",  # the engines' default: an uncalibrated scenario
    )
    curve = fit_compute_curve([(r.local_bsz, r.step_time_s) for r in rows if r.placement == (1,)])
    pred = predict_rows(rows, curve, fig, gradient_bytes)
    return pred / np.array([r.step_time_s for r in rows]) - 1.0


def run_model(model: str, data_dir: Path, out: Path, jitter_cv: str = AUTO) -> ModelResult:
    """Steps 1-3 of the module docstring for one model: ``lbsim calibrate`` into ``out/model``, Pollux, the catalog."""
    gradient_bytes, _ = MODELS[model]
    src = data_dir / f"{model}_placements.csv"
    dest = out / model
    parser = argparse.ArgumentParser(prog="lbsim calibrate")
    calibrate_arguments(parser)
    args = parser.parse_args([str(src), "--fit-placements", FIT_PLACEMENTS, "--gradient-bytes", str(gradient_bytes),
                              "--out", str(dest), "--jitter-cv", jitter_cv, "-q"])
    code = calibrate(args, default_engine())
    if code != 0:
        raise SystemExit(code)
    with (dest / "predictions.csv").open(newline="", encoding="utf-8") as fh:
        pred = list(csv.DictReader(fh))
    rows = read_measurements(src)
    fit = list(parse_fit_placements(FIT_PLACEMENTS))
    pp = pollux.fit(rows, fit)
    measured = np.array([r.step_time_s for r in rows])

    def col(name: str) -> np.ndarray:
        return np.array([float(p[name]) if p[name] != "" else float("nan") for p in pred])

    return ModelResult(
        model, rows, [p["role"] for p in pred], col("relative_error"),
        pollux.predict(pp, rows) / measured - 1.0, catalog_errors(rows, gradient_bytes),
        (dest / "fit.yaml").read_text(encoding="utf-8"), col("predicted_low"), col("predicted_high"),
        tuple(p["extrapolates"] for p in pred),
    )


@dataclass(frozen=True)
class SubsetResult:
    """One fit subset's held-out errors for one model (module docstring, step 4)."""

    subset: str
    model: str
    held_geomean: float
    held_median: float
    held_p90: float
    ratio_median: float
    ratio_p90: float
    coverage: float  # of the nominal interval, held-out rows
    held_mean: float
    worst: str
    worst_geomean: float
    placements: int
    algorithm: str
    jitter_cv: float


def held_out_summary(subset: str, model: str, rows: Sequence[Row], err: np.ndarray, algorithm: str,
                     jitter_cv: float = 0.0, low: np.ndarray | None = None,
                     high: np.ndarray | None = None) -> SubsetResult:
    """The held-out figures of ``err`` when ``subset`` is fitted: geomean, median, p90, ratio errors, coverage,
    mean, and the worst placement."""
    fit = set(parse_fit_placements(subset))
    held = np.array([role_of(r, fit) == "held_out" for r in rows])
    labels = np.array([r.label for r in rows])
    measured = np.array([r.step_time_s for r in rows])
    per = {p: geomean_abs(err[held & (labels == p)]) for p in sorted(set(labels[held]))}
    worst = max(per, key=lambda p: per[p])
    ratio = ratio_errors(list(labels), [r.local_bsz for r in rows], measured, err, held)
    cov = coverage(measured[held], low[held], high[held]) if low is not None and high is not None else float("nan")
    return SubsetResult(subset, model, geomean_abs(err[held]), abs_quantile(err[held], 0.5), abs_quantile(err[held], 0.9),
                        abs_quantile(ratio, 0.5), abs_quantile(ratio, 0.9), cov, float(np.mean(err[held])), worst,
                        per[worst], len(per), algorithm, jitter_cv)


def robustness(model: str, data_dir: Path, subsets: Sequence[str] = ALT_SUBSETS,
               jitter_cv: JitterChoice = AUTO) -> list[SubsetResult]:
    """``lbsim calibrate``'s fit on each subset; held-out errors of the fitted model (module docstring, step 4)."""
    gradient_bytes, _ = MODELS[model]
    rows = read_measurements(data_dir / f"{model}_placements.csv")
    bounds = intra_bounds_for(check_instance(None, rows))
    measured = np.array([r.step_time_s for r in rows])
    out = []
    for subset in subsets:
        fit = list(parse_fit_placements(subset))
        if jitter_cv == AUTO:
            cal = calibrate_auto(rows, fit, gradient_bytes, intra_bounds=bounds, chunk_share=DEFAULT_CHUNK_SHARE)
        else:
            cal = calibrate_rows(rows, fit, gradient_bytes, intra_bounds=bounds, jitter_cv=jitter_cv)
        cal = with_interval(cal, rows, intra_bounds=bounds, chunk_share=DEFAULT_CHUNK_SHARE)
        pred = predict_rows(rows, cal.curve, cal.figures, gradient_bytes)
        low, high = (pred * np.exp(cal.interval.low_log), pred * np.exp(cal.interval.high_log)) \
            if cal.interval is not None else (None, None)
        out.append(held_out_summary(subset, model, rows, pred / measured - 1.0, cal.figures.algorithm,
                                    cal.figures.jitter_cv, low, high))
    return out


def robustness_table(results: Sequence[SubsetResult]) -> list[str]:
    """The robustness table, one line per subset and model."""
    lines = ["| fit placements | model | bound | held-out geomean % | median \\|e\\| % | p90 \\|e\\| % | ratio \\|e\\| "
             "median % | ratio \\|e\\| p90 % | interval coverage % | held-out mean e % | worst held-out placement "
             "(geomean %) | algorithm | compute noise c |", "|" + "---|" * 13]
    for r in results:
        lines.append(f"| {r.subset} | {r.model} | {_pct(MODELS[r.model][1]) if r.model in MODELS else '—'} "
                     f"| {_pct(r.held_geomean)} | {_pct(r.held_median)} | {_pct(r.held_p90)} | {_pct(r.ratio_median)} "
                     f"| {_pct(r.ratio_p90)} | {_pct(r.coverage)} | {_pct(r.held_mean)} | {r.worst} "
                     f"({_pct(r.worst_geomean)}) | {r.algorithm} | {r.jitter_cv:.3g} |")
    return lines


def _pct(x: float) -> str:
    return "—" if not np.isfinite(x) else f"{100 * x:.1f}"


def held_out_per_placement(r: ModelResult) -> dict[str, float]:
    """lbsim's geomean |error| of each held-out placement (by label, sorted)."""
    held = np.array(r.role) == "held_out"
    labels = np.array([row.label for row in r.rows])
    return {p: geomean_abs(r.lbsim[held & (labels == p)]) for p in sorted(set(labels[held]))}


SUMMARY_HEAD = ("| model | bound | single-GPU max \\|e\\| % | fit geomean % | **held-out geomean %** | median \\|e\\| % "
                "| p90 \\|e\\| % | mean e % | ratio \\|e\\| median % | ratio \\|e\\| p90 % | {nominal} interval coverage % "
                "| worst held-out placement (geomean %) | Pollux geomean % | Pollux p90 % | Pollux ratio median % "
                "| catalog geomean % |")


def summary_table(results: Sequence[ModelResult], nominal: float = NOMINAL) -> list[str]:
    """Held-out errors per model and pooled: geomean, median, p90, ratios, coverage (module docstring)."""
    lines = [SUMMARY_HEAD.format(nominal=f"{nominal:.0%}"), "|" + "---|" * 16]
    pooled: dict[str, list[np.ndarray]] = {k: [] for k in ("lbsim", "pollux", "catalog", "ratio", "pratio")}
    cover: list[np.ndarray] = []
    for r in results:
        role = np.array(r.role)
        held, fit, single = role == "held_out", role == "fit", role == "single"
        per = held_out_per_placement(r)
        worst = max(per, key=lambda p: per[p])
        ratio, pratio = r.ratio(r.lbsim, held), r.ratio(r.pollux, held)
        for k, v in (("lbsim", r.lbsim[held]), ("pollux", r.pollux[held]), ("catalog", r.catalog[held]),
                     ("ratio", ratio), ("pratio", pratio)):
            pooled[k].append(v)
        if r.low is not None and r.high is not None:
            m = r.measured()[held]
            cover.append((r.low[held] <= m) & (m <= r.high[held]))
        lines.append(
            f"| {r.model} | {_pct(MODELS[r.model][1]) if r.model in MODELS else '—'} "
            f"| {_pct(float(np.max(np.abs(r.lbsim[single]))) if single.any() else float('nan'))} "
            f"| {_pct(geomean_abs(r.lbsim[fit]))} | **{_pct(geomean_abs(r.lbsim[held]))}** "
            f"| {_pct(abs_quantile(r.lbsim[held], 0.5))} | {_pct(abs_quantile(r.lbsim[held], 0.9))} "
            f"| {_pct(float(np.mean(r.lbsim[held])))} | {_pct(abs_quantile(ratio, 0.5))} | {_pct(abs_quantile(ratio, 0.9))} "
            f"| {_pct(r.covered(held))} | {worst} ({_pct(per[worst])}) | {_pct(geomean_abs(r.pollux[held]))} "
            f"| {_pct(abs_quantile(r.pollux[held], 0.9))} | {_pct(abs_quantile(pratio, 0.5))} "
            f"| {_pct(geomean_abs(r.catalog[held]))} |")
    cat = {k: np.concatenate(v) if v else np.empty(0) for k, v in pooled.items()}
    cov = float(np.mean(np.concatenate(cover))) if cover else float("nan")
    lines.append(f"| pooled | | | | **{_pct(geomean_abs(cat['lbsim']))}** | {_pct(abs_quantile(cat['lbsim'], 0.5))} "
                 f"| {_pct(abs_quantile(cat['lbsim'], 0.9))} | | {_pct(abs_quantile(cat['ratio'], 0.5))} "
                 f"| {_pct(abs_quantile(cat['ratio'], 0.9))} | {_pct(cov)} | | {_pct(geomean_abs(cat['pollux']))} "
                 f"| {_pct(abs_quantile(cat['pollux'], 0.9))} | {_pct(abs_quantile(cat['pratio'], 0.5))} "
                 f"| {_pct(geomean_abs(cat['catalog']))} |")
    return lines


def interval_table(results: Sequence[ModelResult]) -> list[str]:
    """Each model's interval and its held-out coverage, inside the fit domain and where it extrapolates."""
    lines = ["| model | interval (x low – x high) | held-out coverage % (rows) | inside the fit domain % (rows) "
             "| extrapolating % (rows) | by reason: % (rows) |", "|---|---|---|---|---|---|"]
    for r in results:
        held = np.array(r.role) == "held_out"
        ext = np.array([bool(x) for x in r.extrapolates]) if r.extrapolates else np.zeros(len(r.rows), bool)
        reasons = sorted({k for x in r.extrapolates for k in x.split("+") if k})
        by = "; ".join(f"{k} {_pct(r.covered(held & np.array([k in x.split('+') for x in r.extrapolates])))} "
                       f"({int(np.sum(held & np.array([k in x.split('+') for x in r.extrapolates])))})" for k in reasons)
        band = "—"
        if r.low is not None and r.high is not None:
            m = r.measured()
            pred = m * (1.0 + r.lbsim)
            ok = np.isfinite(r.low)
            if ok.any():
                band = f"x{float(np.median(r.low[ok] / pred[ok])):.3f} – x{float(np.median(r.high[ok] / pred[ok])):.3f}"
        lines.append(f"| {r.model} | {band} | {_pct(r.covered(held))} ({int(held.sum())}) "
                     f"| {_pct(r.covered(held & ~ext))} ({int(np.sum(held & ~ext))}) "
                     f"| {_pct(r.covered(held & ext))} ({int(np.sum(held & ext))}) | {by or '—'} |")
    return lines


def repeatability_table(results: Sequence[ModelResult]) -> list[str]:
    """The data's own floor beside lbsim's held-out figures (:mod:`lbsim.calibration.repeatability`)."""
    lines = ["| model | twin pairs | row noise sd % | run offset sd % | perfect model: held-out geomean % "
             "| perfect model: p90 \\|e\\| % | lbsim held-out geomean % | lbsim p90 \\|e\\| % |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        noise = estimate_noise(r.rows)
        held = np.array(r.role) == "held_out"
        per = held_out_per_placement(r)
        lbsim_cells = f"{_pct(geomean_abs(r.lbsim[held]))} | {_pct(abs_quantile(r.lbsim[held], 0.9))} |"
        if noise is None:
            lines.append(f"| {r.model} | 0 | — | — | — | — | {lbsim_cells}")
            continue
        floor = perfect_model_floor(noise, rows_per_placement(r.rows, per))
        lines.append(f"| {r.model} | {noise.pairs} | {_pct(noise.row_sd)} | {_pct(noise.run_sd)} | {_pct(floor.geomean)} "
                     f"| {_pct(floor.p90)} | {lbsim_cells}")
    return lines


def placement_table(r: ModelResult) -> list[str]:
    """One model's errors per placement (single, fit, then held out) under the three models."""
    role = np.array(r.role)
    labels = np.array([row.label for row in r.rows])
    order = sorted(set(labels), key=lambda p: ({"single": 0, "fit": 1, "held_out": 2}[role[labels == p][0]], len(p), p))
    lines = [f"#### {r.model}", "",
             "| placement | role | rows | lbsim geomean \\|e\\| % | lbsim mean e % | lbsim per row e % (by local_bsz) "
             "| Pollux geomean % | catalog geomean % |", "|---|---|---|---|---|---|---|---|"]
    for p in order:
        m = labels == p
        per_row = " ".join(f"{100 * e:+.0f}" for e in r.lbsim[m])
        lines.append(f"| {p} | {role[m][0]} | {int(m.sum())} | {_pct(geomean_abs(r.lbsim[m]))} "
                     f"| {_pct(float(np.mean(r.lbsim[m])))} | {per_row} | {_pct(geomean_abs(r.pollux[m]))} "
                     f"| {_pct(geomean_abs(r.catalog[m]))} |")
    return lines


def render(results: Sequence[ModelResult], robust: Sequence[SubsetResult] = ()) -> str:
    """The generated part of the page: the marker, then every table with its explanation."""
    out = [MARK, "", "### Summary (held out = every multi-GPU placement not among the fit placements)", ""]
    out += summary_table(results)
    out += ["", "### Intervals: held-out coverage of the nominal interval", "",
            "Each prediction's interval is the fit's leave-one-placement-out band (`lbsim.calibration.interval`); "
            "coverage = the share of held-out rows whose measured time lies inside it. Rows are split by whether "
            "`predictions.csv` flags them as extrapolating (more nodes, more GPUs per node of their kind, or a "
            "batch outside the fit rows' range).", ""]
    out += interval_table(results)
    out += ["", "### Repeatability of the measurements: what a perfect model would show", "",
            "Twin placements (the same cycle of nodes, e.g. `124` and `142`) are one topology measured in two runs; "
            "their differences give the row noise and the run-to-run offset (log sd), and from them the error a "
            "perfect model would have on the held-out placements (`lbsim.calibration.repeatability`).", ""]
    out += repeatability_table(results)
    if robust:
        out += ["", "### Robustness: the same fit on other fit placements", "",
                "Held out = every multi-GPU placement outside that subset; errors of the fitted model's formulas "
                "(the engine reproduces them, as the tables above check row by row).", ""]
        out += robustness_table(robust)
    out += ["", "### Compute noise: the cross-validation rule's decision (`lbsim.calibration.select`)", ""]
    for r in results:
        line = next((x[2:] for x in r.fit_text.splitlines()
                     if x.startswith(("# compute noise kept", "# compute noise not kept"))),
                    "compute noise not kept: c fits 0")
        out.append(f"* {r.model}: {line}")
    out += ["", "### Fitted figures (`fit.yaml` of each model)", ""]
    for r in results:
        out += [f"<details><summary>{r.model}</summary>", "", "```yaml", r.fit_text.rstrip(), "```", "", "</details>", ""]
    out += ["### Per model and placement", "",
            "Roles: `single` = placement 1 (fits t(b)), `fit` = a fit placement, `held_out` = predicted only. "
            "Per-row errors are in the order of the file's rows (increasing local_bsz).", ""]
    for r in results:
        out += placement_table(r) + [""]
    return "\n".join(out)


def document_text(old: str | None, results: Sequence[ModelResult], robust: Sequence[SubsetResult] = ()) -> str:
    """The page with its generated part replaced: ``old``'s text above :data:`MARK` (a bare title when
    there is no page yet), then :func:`render`'s tables."""
    head = old.split(MARK)[0] if old is not None else "# Validation\n\n"
    return head + render(results, robust) + "\n"
