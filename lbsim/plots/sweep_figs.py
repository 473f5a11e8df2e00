"""Sweep-level figures: throughput and time-to-target per scheme, speedup vs BSP, pooled CDFs, ...

Vocabulary: the *scheme* is the ``scheme`` column of ``results.csv``; the other factor columns
make a *condition*; rows of one scheme and condition differ only in their repetition (seed).
The *x factor* of the speedup and CDF figures is ``x`` if given, else the first condition
column whose name contains "slowdown", else the first condition column. The *representative
condition* for run-level figures (timelines, LB-BSP batch sizes, accuracy) is the sweep's last
condition (the last level of every factor), first repetition.

Intervals are over seeds (repetitions) only, with every seed's value drawn as a dot: a factor is
never pooled into an interval. None is drawn from fewer than 3 seeds (:mod:`lbsim.plots.stats`);
from more, throughput and time to target get the mean's bootstrap interval and speedups the
geometric mean's t-interval on the log scale, so no interval leaves the quantity's range. In the
speedup figure every factor other than the x factor and the panel factor gets its own series (a
marker and line style per level); a numeric x factor joins a series' points with a line, a
categorical one (named levels such as ``none``, ``v100``, ``t4``) never does.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from lbsim.errors import InputError
from lbsim.plots.data import RunData, SweepData
from lbsim.plots.run_figs import (
    batches_figure,
    draw_accuracy,
    draw_cdf,
    draw_staleness,
    draw_timelines,
    iteration_times,
    nonnegative,
    timeline_window,
    timeline_workers,
    wide,
    window_text,
)
from lbsim.plots.stats import interval_note, mean_bootstrap95, ratio_log_t95
from lbsim.plots.style import LINESTYLES, MARKERS, new_figure, ordered_schemes, scheme_colors

Cond = tuple[str, ...]


def short(column: str) -> str:
    """A factor column as an axis label: the last part of a dotted key."""
    return column.split(".")[-1]


def axis_label(column: str) -> str:
    """A sweep factor as an axis label (a slowdown says its unit)."""
    name = short(column)
    return f"{name} (x slower)" if "slowdown" in name else name


def _num(label: str) -> float | None:
    try:
        return float(label)
    except ValueError:
        return None


class _Table:
    """results.csv grouped by scheme and condition."""

    def __init__(self, sweep: SweepData) -> None:
        self.sweep = sweep
        self.conds = sweep.conditions
        self.schemes = ordered_schemes([r["scheme"] for r in sweep.rows])
        self.colors = scheme_colors(self.schemes)
        self.conditions: list[Cond] = list(dict.fromkeys(self.cond(r) for r in sweep.rows))
        self.reps = max((int(r.get("repetition") or 0) for r in sweep.rows), default=0) + 1

    def cond(self, row: dict[str, str]) -> Cond:
        return tuple(row.get(c, "") for c in self.conds)

    def cond_text(self, cond: Cond, sep: str = "\n") -> str:
        return sep.join(f"{short(c)}={v}" for c, v in zip(self.conds, cond, strict=True)) or "all"

    def values(self, column: str) -> dict[tuple[str, Cond], list[float]]:
        out: dict[tuple[str, Cond], list[float]] = defaultdict(list)
        for r in self.sweep.rows:
            v = self.sweep.number(r, column)
            if not np.isnan(v):
                out[(r["scheme"], self.cond(r))].append(v)
        return out

    def rows_of(self, scheme: str, cond: Cond, rep: int | None = None) -> list[dict[str, str]]:
        return [r for r in self.sweep.rows if r["scheme"] == scheme and self.cond(r) == cond
                and (rep is None or int(r.get("repetition") or 0) == rep)]


def bars_figure(t: _Table, column: str, ylabel: str, title: str, *, missing: str | None = None) -> Any:
    """Grouped bars, the mean over repetitions and (3 seeds or more) its bootstrap interval, every seed a dot:
    a group per condition, a bar per scheme.

    With more than six conditions and at least two condition factors, one panel per level of
    the first factor (the rest of the condition on each panel's x axis). ``missing`` labels the
    place of a bar that has no value (e.g. "not reached" for a time to target).
    """
    vals = t.values(column)
    n_s = len(t.schemes)
    facet = len(t.conds) >= 2 and len(t.conditions) > 6
    levels = list(dict.fromkeys(c[0] for c in t.conditions)) if facet else [None]
    per_panel = [[c for c in t.conditions if not facet or c[0] == lv] for lv in levels]
    n_c = max(len(p) for p in per_panel)
    fig, ax = new_figure(max(7.0, 0.22 * n_c * (n_s + 1) + 3), 1.2 + 3.2 * len(levels), len(levels), 1, sharey=True)
    width = 0.8 / max(n_s, 1)
    for k, (level, conds) in enumerate(zip(levels, per_panel, strict=True)):
        a = ax[k, 0]
        x = np.arange(len(conds))
        for j, scheme in enumerate(t.schemes):
            stats = [mean_bootstrap95(vals.get((scheme, c), [])) for c in conds]
            xs = x + (j - (n_s - 1) / 2) * width
            errs = np.array([e.errors() for e in stats]).T
            a.bar(xs, [e.center for e in stats], width, yerr=errs if any(e.has_interval for e in stats) else None,
                  label=scheme, color=t.colors[scheme], capsize=2, error_kw={"elinewidth": 0.8}, alpha=0.85)
            for xi, c in zip(xs, conds, strict=True):
                seeds = vals.get((scheme, c), [])
                if len(seeds) > 1:
                    a.plot([xi] * len(seeds), seeds, linestyle="none", marker="o", markersize=2.5, color="black", zorder=3)
            for xi, e in zip(xs, stats, strict=True):
                if missing and np.isnan(e.center):
                    a.text(xi, 0, f" {missing}", rotation=90, ha="center", va="bottom", fontsize="x-small",
                           color=t.colors[scheme])
        shown = t.conds[1:] if facet else t.conds
        a.set_xticks(x)
        a.set_xticklabels(["\n".join(f"{short(col)}={v}" for col, v in zip(shown, c[1:] if facet else c, strict=True)) or "all"
                           for c in conds], fontsize="small")
        a.set_ylabel(ylabel)
        a.grid(True, axis="y", alpha=0.3)
        if facet:
            a.set_title(f"{short(t.conds[0])} = {level}", fontsize="medium")
        if k == 0:
            a.legend(title="scheme", fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
        nonnegative(a, "y")
    ax[-1, 0].set_xlabel("condition (" + ", ".join(short(c) for c in (t.conds[1:] if facet else t.conds)) + ")" if t.conds else "")
    fig.suptitle(f"{title}\n({interval_note(t.reps)})")
    return fig


def x_factor(t: _Table, x: str | None) -> str | None:
    """The factor on the x axis: the one named (full or short), else the slowdown, else the first."""
    if x is not None:
        return x if x in t.conds else next((c for c in t.conds if short(c) == x), None)
    return next((c for c in t.conds if "slowdown" in short(c)), t.conds[0] if t.conds else None)


def speedup_figure(t: _Table, x: str | None) -> Any | None:
    """Throughput over BSP's at the same condition and seed, vs the x factor; a panel per level of the next factor."""
    base = "bsp" if "bsp" in t.schemes else (t.schemes[0] if t.schemes else None)
    if base is None or len(t.schemes) < 2:
        return None
    xcol = x_factor(t, x)
    xi = t.conds.index(xcol) if xcol else None
    others = [i for i in range(len(t.conds)) if i != xi]
    facet = others[0] if others and len({c[others[0]] for c in t.conditions}) <= 4 else None
    facet_levels = list(dict.fromkeys(c[facet] for c in t.conditions)) if facet is not None else [None]
    x_levels = list(dict.fromkeys(c[xi] for c in t.conditions)) if xi is not None else ["all"]
    numeric = all(_num(v) is not None for v in x_levels)
    xpos: dict[str, float] = {v: (_num(v) or 0.0) if numeric else float(k) for k, v in enumerate(x_levels)}
    thr: dict[tuple[str, Cond, str], float] = {}
    for r in t.sweep.rows:
        thr[(r["scheme"], t.cond(r), r.get("repetition", "0"))] = t.sweep.number(r, "throughput_samples_per_s")
    rest_idx = [i for i in others if i != facet]  # factors neither on x nor a panel: a line per level, never pooled
    ratios: dict[tuple[str, Any, Cond, str], list[float]] = defaultdict(list)
    for (scheme, cond, rep), v in thr.items():
        b = thr.get((base, cond, rep))
        if b and b > 0 and not np.isnan(v):
            key = (scheme, cond[facet] if facet is not None else None, tuple(cond[i] for i in rest_idx),
                   cond[xi] if xi is not None else "all")
            ratios[key].append(v / b)
    rests = list(dict.fromkeys(tuple(c[i] for i in rest_idx) for c in t.conditions))
    series = [(scheme, rest) for scheme in t.schemes if scheme != base for rest in rests]
    fig, ax = new_figure(4.6 * len(facet_levels) + 2.4, 4.8, 1, len(facet_levels), sharey=True)
    for k, level in enumerate(facet_levels):
        a = ax[0, k]
        a.axhline(1.0, color="black", linewidth=0.8, linestyle=":")
        for s_i, (scheme, rest) in enumerate(series):
            m = rests.index(rest)
            pts = [(xpos[v], ratio_log_t95(ratios[(scheme, level, rest, v)]), ratios[(scheme, level, rest, v)])
                   for v in x_levels if ratios.get((scheme, level, rest, v))]
            if not pts:
                continue
            # dodge the series around each x position so points and intervals do not hide each other
            off = (s_i - (len(series) - 1) / 2) * (0.25 / max(len(series), 1) if not numeric else 0.012)
            if numeric:
                off *= (max(xpos.values()) - min(xpos.values())) if len(xpos) > 1 else 1.0
            label = scheme + (", " + ", ".join(f"{short(t.conds[i])}={r}" for i, r in zip(rest_idx, rest, strict=True))
                              if rest else "")
            errs = np.array([p[1].errors() for p in pts]).T
            a.errorbar([p[0] + off for p in pts], [p[1].center for p in pts],
                       yerr=errs if any(p[1].has_interval for p in pts) else None, label=label,
                       color=t.colors[scheme], marker=MARKERS[m % len(MARKERS)],
                       linestyle=LINESTYLES[m % len(LINESTYLES)] if numeric else "none", capsize=3, markersize=5)
            for p in pts:
                a.plot([p[0] + off] * len(p[2]), p[2], linestyle="none", marker=".", markersize=3,
                       color=t.colors[scheme], alpha=0.6)
        if not numeric:
            a.set_xticks(list(xpos.values()))
            a.set_xticklabels(x_levels)
            a.set_xlim(-0.5, len(x_levels) - 0.5)
        elif x_levels:
            a.set_xticks([xpos[v] for v in x_levels])
        a.set_xlabel(axis_label(xcol) if xcol else "")
        if level is not None and facet is not None:
            a.set_title(f"{short(t.conds[facet])} = {level}")
        a.grid(True, alpha=0.3)
        if k == len(facet_levels) - 1:
            a.legend(fontsize="x-small", title="scheme", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax[0, 0].set_ylabel(f"speedup over {base.upper()} (throughput ratio)")
    ax[0, 0].set_ylim(bottom=0)
    fig.suptitle(f"Speedup over {base.upper()} vs {short(xcol) if xcol else 'condition'} "
                 f"(same condition and seed; {interval_note(t.reps, 'ratio')})")
    return fig


class _Runs:
    """Run folders, read once each."""

    def __init__(self, sweep: SweepData) -> None:
        self.sweep = sweep
        self._cache: dict[str, RunData] = {}

    def get(self, run: str) -> RunData:
        if run not in self._cache:
            self._cache[run] = self.sweep.run(run)
        return self._cache[run]


def cdf_figure(t: _Table, runs: _Runs, x: str | None) -> Any:
    """Iteration-time CDFs per scheme, one panel per level of the x factor."""
    xcol = x_factor(t, x)
    xi = t.conds.index(xcol) if xcol else None
    levels = list(dict.fromkeys(c[xi] for c in t.conditions)) if xi is not None else [None]
    panels = []
    for level in levels:
        curves = {}
        for scheme in t.schemes:
            rows = [r for r in t.sweep.rows if r["scheme"] == scheme and (xi is None or t.cond(r)[xi] == level)]
            times = [iteration_times(runs.get(r["run"])) for r in rows]
            curves[scheme] = np.concatenate(times) if times else np.zeros(0)
        panels.append(curves)
    log = wide([v for curves in panels for v in curves.values()])  # one scale for every panel
    fig, ax = new_figure(4.5 * len(levels) + 1, 4.5, 1, len(levels), sharey=True, sharex=True)
    for k, (level, curves) in enumerate(zip(levels, panels, strict=True)):
        draw_cdf(ax[0, k], curves, t.colors, log=log)
        if level is not None and xcol is not None:
            ax[0, k].set_title(f"{short(xcol)} = {level}")
        if k:
            ax[0, k].set_ylabel("")
    others = [short(c) for c in t.conds if c != xcol]
    fig.suptitle("Iteration-time CDF per scheme (pooled over seeds" + (" and " + ", ".join(others) if others else "") + ")")
    return fig


def staleness_figure(t: _Table, runs: _Runs) -> Any | None:
    """Staleness histograms of the schemes that have any (None if none has)."""
    stale = []
    for scheme in t.schemes:
        rows = [r for r in t.sweep.rows if r["scheme"] == scheme]
        if any(t.sweep.number(r, "staleness_max") > 0 for r in rows):
            stale.append((scheme, [runs.get(r["run"]) for r in rows]))
    if not stale:
        return None
    fig, ax = new_figure(4.2 * len(stale) + 0.5, 4, 1, len(stale))
    for k, (scheme, rs) in enumerate(stale):
        draw_staleness(ax[0, k], rs, scheme, t.colors[scheme])
    fig.suptitle("Staleness histograms (pooled over every condition and seed)")
    return fig


def representative(t: _Table) -> tuple[Cond, dict[str, dict[str, str]]]:
    """The last condition and, per scheme, its first-repetition row."""
    cond = t.conditions[-1]
    picked = {}
    for scheme in t.schemes:
        rows = sorted(t.rows_of(scheme, cond), key=lambda r: int(r.get("repetition") or 0))
        if rows:
            picked[scheme] = rows[0]
    return cond, picked


def sweep_figures(sweep: SweepData, *, timeline_s: float | None = None, x: str | None = None) -> dict[str, Any]:
    """Every sweep-level figure that the results support, by file name."""
    if not sweep.rows:
        return {}
    t = _Table(sweep)
    if x is not None and x_factor(t, x) is None:
        raise InputError("--x", f"unknown factor {x!r}; valid: {', '.join(t.conds) or '(the sweep has no factor besides the scheme)'}")
    runs = _Runs(sweep)
    figs: dict[str, Any] = {"throughput": bars_figure(t, "throughput_samples_per_s", "throughput (samples/s)",
                                                      "Throughput per scheme")}
    if any(t.sweep.number(r, "time_to_target_s") >= 0 for r in sweep.rows):
        figs["time_to_target"] = bars_figure(t, "time_to_target_s", "time to target accuracy (simulated s)",
                                             "Time to target accuracy per scheme", missing="not reached")
        figs["time_to_target"].suptitle(figs["time_to_target"].get_suptitle().replace(
            "seeds)", "seeds that reached it)").replace("seed)", "seed, if reached)"))
    if (fig := speedup_figure(t, x)) is not None:
        figs["speedup_vs_bsp"] = fig
    figs["iteration_cdf"] = cdf_figure(t, runs, x)
    if (fig := staleness_figure(t, runs)) is not None:
        figs["staleness"] = fig
    cond, picked = representative(t)
    where = t.cond_text(cond, ", ")
    if "lbbsp" in picked:
        run = runs.get(picked["lbbsp"]["run"])
        figs["lbbsp_batches"] = batches_figure(run, f"LB-BSP per-worker batch size ({where}, seed {run.summary.get('seed')})")
    if picked:
        n = len(picked)
        shown = [runs.get(row["run"]) for row in picked.values()]
        window = timeline_window(shown, timeline_s)
        fig, ax = new_figure(10, n * (0.8 + 0.28 * max(len(timeline_workers(shown[0])), 2)) + 0.6, n, 1, sharex=True)
        draw_timelines(ax, list(zip(picked, shown, strict=True)), window)
        fig.suptitle(f"Worker timelines, {window_text(window, shown)} ({where}, first seed)")
        figs["timelines"] = fig
    with_numerics = {s: runs.get(r["run"]) for s, r in picked.items() if runs.get(r["run"]).numerics is not None}
    if with_numerics:
        has_loss = any("loss" in r.numerics for r in with_numerics.values() if r.numerics is not None)
        fig, ax = new_figure(11 if has_loss else 6, 4.5, 1, 2 if has_loss else 1)
        draw_accuracy(ax[0, 0], ax[0, 1] if has_loss else None, with_numerics, t.colors)
        fig.suptitle(f"Accuracy vs simulated time ({where}, first seed)")
        figs["accuracy"] = fig
    return figs
