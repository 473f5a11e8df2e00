"""Run-level figures: time CDFs, phase breakdown, worker timeline, batch sizes, staleness, accuracy.

Each ``draw_*`` function draws into one matplotlib ``Axes`` (so the sweep and compare figures
reuse them); :func:`run_figures` builds the figures for one run folder, keyed by file name.

Figures that say something under BSP too: under a barrier every worker's iteration takes the
same time, so iteration-time curves per instance type coincide; the CDF figure adds compute
time per instance type, and ``phases`` breaks each instance type's mean iteration into compute,
communication, waiting and fetching. Bounded size and time: a timeline of more than
:data:`~lbsim.plots.style.MAX_TIMELINE_WORKERS` workers shows the first workers of each
instance type (the axis says how many of how many); coinciding batch-size trajectories are drawn
once, labelled with the workers they stand for, and beyond 16 distinct trajectories each
instance type is drawn as its median with a min-max band.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from lbsim.plots.data import RunData
from lbsim.plots.style import LINESTYLES, MAX_TIMELINE_WORKERS, PALETTE, PHASE_COLORS, PHASE_LABELS, new_figure

DEFAULT_TIMELINE_S = 20.0


def worker_label(run: RunData, w: int) -> str:
    """A worker's legend label: its index and instance type."""
    return f"w{w} {run.instances[w]}" if w < len(run.instances) else f"w{w}"


def ecdf(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The empirical CDF of ``values``: sorted values and their cumulative shares."""
    x = np.sort(values)
    return x, np.arange(1, len(x) + 1) / len(x)


def iteration_times(run: RunData) -> np.ndarray:
    """The run's iteration durations, dropped iterations left out."""
    keep = run.col("dropped") == 0
    return (run.it["end_s"] - run.it["start_s"])[keep]


def wide(values: Sequence[np.ndarray]) -> bool:
    """Whether positive values span more than a factor 20 (then a log axis reads better)."""
    pos = np.concatenate([v[v > 0] for v in values if len(v)]) if values else np.zeros(0)
    return bool(len(pos) and pos.max() / pos.min() > 20)


def nice_log_ticks(lo: float, hi: float) -> list[float]:
    """Tick values for a log axis over [lo, hi]: the 1-2-5 series (1-2-3-5 within two decades),
    from the largest one <= lo to the smallest one >= hi, so both ends carry a labelled tick."""
    span = np.log10(hi / lo) if lo > 0 and hi > lo else 0.0
    mantissas = (1.0, 2.0, 5.0) if span > 2 else (1.0, 2.0, 3.0, 5.0)
    series = [m * 10.0**e for e in range(int(np.floor(np.log10(lo))) - 1, int(np.ceil(np.log10(hi))) + 2) for m in mantissas]
    first = max(v for v in series if v <= lo * (1 + 1e-9))
    last = min(v for v in series if v >= hi * (1 - 1e-9))
    return [v for v in series if first <= v <= last]


def log_axis(ax: Any, values: Sequence[np.ndarray], axis: str = "x") -> None:
    """A log scale over the positive ``values`` with a labelled tick at each end and between (no bare decades)."""
    from matplotlib.ticker import FixedLocator, FormatStrFormatter, NullFormatter, NullLocator

    pos = np.concatenate([v[v > 0] for v in values if len(v)])
    ticks = nice_log_ticks(float(pos.min()), float(pos.max()))
    target = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    target.set_major_locator(FixedLocator(ticks))
    target.set_major_formatter(FormatStrFormatter("%g"))
    target.set_minor_locator(NullLocator())
    target.set_minor_formatter(NullFormatter())
    (ax.set_xlim if axis == "x" else ax.set_ylim)(ticks[0], ticks[-1])


def nonnegative(ax: Any, axis: str = "y") -> None:
    """Keep a linear axis of a non-negative quantity from showing values below zero (call after drawing)."""
    if axis == "x" and ax.get_xscale() == "linear" and ax.get_xlim()[0] < 0:
        ax.set_xlim(left=0)
    if axis == "y" and ax.get_yscale() == "linear" and ax.get_ylim()[0] < 0:
        ax.set_ylim(bottom=0)


def draw_cdf(ax: Any, curves: dict[str, np.ndarray], colors: dict[str, str] | None = None, *, log: bool | None = None,
             overall: str | None = None) -> None:
    """One empirical CDF per label (times in seconds); a log x axis if ``log`` (None: if they span > 20x).

    Curves that coincide (under a barrier every instance type's iteration times are the same) stay
    visible: earlier curves are drawn wider, underneath later ones, and the ``overall`` curve (all
    workers) is a thin dashed black line on top of them all.
    """
    parts = [(k, v) for k, v in curves.items() if k != overall]
    for i, (label, values) in enumerate(parts):
        if len(values):
            x, y = ecdf(values)
            ax.step(x, y, where="post", label=label, color=(colors or {}).get(label, PALETTE[i % len(PALETTE)]),
                    linewidth=min(1.4 + 0.9 * (len(parts) - 1 - i), 4.0), zorder=2 + i)
    if overall is not None and len(curves.get(overall, ())):
        x, y = ecdf(curves[overall])
        ax.step(x, y, where="post", label=overall, color="black", linestyle=(0, (4, 2)), linewidth=1.1,
                zorder=3 + len(parts))
    if wide(list(curves.values())) if log is None else log:
        log_axis(ax, list(curves.values()))
    else:
        nonnegative(ax, "x")
    ax.set_xlabel("iteration time (s)")
    ax.set_ylabel("fraction of worker-iterations")
    ax.set_ylim(0, 1.02)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="lower right")


def timeline_workers(run: RunData) -> list[int]:
    """The workers a timeline shows: all up to MAX_TIMELINE_WORKERS, else the first of each instance type."""
    n = run.workers
    if n <= MAX_TIMELINE_WORKERS:
        return list(range(n))
    types = list(dict.fromkeys(run.instances)) if len(run.instances) == n else []
    if not types:
        return list(range(MAX_TIMELINE_WORKERS))
    per = max(1, MAX_TIMELINE_WORKERS // len(types))
    return sorted(w for inst in types for w in [k for k, i in enumerate(run.instances) if i == inst][:per])


def timeline_window(runs: Sequence[RunData], window_s: float | None) -> float:
    """The seconds a timeline shows: ``window_s`` if given, else the first 20 s or the whole run if shorter."""
    if window_s is not None:
        return window_s
    end = max((r.end_s for r in runs), default=0.0)
    return min(DEFAULT_TIMELINE_S, end) if end > 0 else DEFAULT_TIMELINE_S


def phase_handles(phases: Sequence[str]) -> list[Any]:
    """Legend entries for these phases (compute, wait, communication, ...)."""
    from matplotlib.patches import Patch

    return [Patch(facecolor=PHASE_COLORS[p], label=PHASE_LABELS[p]) for p in phases]


def draw_timeline(ax: Any, run: RunData, window_s: float, *, legend: bool = True) -> list[str]:
    """Each shown worker's phases (fetch / compute / wait / communicate) during the first ``window_s`` seconds.

    Returns the phases drawn (for a shared legend)."""
    shown = timeline_workers(run)
    slot = {w: k for k, w in enumerate(shown)}
    n = len(shown)
    start = run.it["start_s"]
    rows = np.nonzero((start < window_s) & np.isin(run.it["worker"], shown))[0]
    phases = [p for p in ("fetch", "compute", "wait", "comm") if f"{p}_s" in run.it and (run.it[f"{p}_s"][rows] > 0).any()]
    t = start[rows].copy()
    for phase in ("fetch", "compute", "wait", "comm"):
        if phase not in phases:
            t = t + run.it.get(f"{phase}_s", np.zeros(len(start)))[rows]
            continue
        dur = run.it[f"{phase}_s"][rows]
        for w in shown:
            sel = (run.it["worker"][rows] == w) & (dur > 0)
            if sel.any():
                ax.broken_barh(list(zip(t[sel], dur[sel], strict=True)), (slot[w] - 0.4, 0.8),
                               facecolors=PHASE_COLORS[phase], edgecolor="none")
        t = t + dur
    ax.set_xlim(0, window_s)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_yticks(range(n))
    ax.set_yticklabels([worker_label(run, w) for w in shown], fontsize="x-small")
    ax.set_xlabel(run.time_axis)
    ax.set_ylabel("worker" if n == run.workers else f"worker ({n} of {run.workers}: first of each type)")
    if legend:
        ax.legend(handles=phase_handles(phases), fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0),
                  title="phase")
    return phases


def batch_groups(run: RunData, *, tolerance: float = 0.01, limit: int | None = None) -> list[tuple[list[int], np.ndarray, np.ndarray]]:
    """Workers whose batch trajectories coincide, grouped: (workers, t, batch) with the first one's line.

    Two trajectories coincide when they have the same number of iterations and every batch differs
    by at most ``max(1, tolerance x the largest batch)`` samples (drawn, they would be one line).
    With ``limit``, stops as soon as there are more than ``limit`` groups (the caller draws bands).
    """
    order = np.lexsort((run.it["start_s"], run.it["worker"]))
    workers = run.it["worker"][order]
    bounds = np.flatnonzero(np.diff(workers)) + 1
    groups: list[tuple[list[int], np.ndarray, np.ndarray]] = []
    for idx in np.split(order, bounds) if len(order) else []:
        w = int(run.it["worker"][idx[0]])
        b = run.it["batch"][idx]
        slack = max(1.0, tolerance * float(np.abs(b).max(initial=0)))
        for ws, _t, rep in groups:
            if len(rep) == len(b) and float(np.abs(rep - b).max(initial=0)) <= slack:
                ws.append(w)
                break
        else:
            groups.append(([w], run.it["start_s"][idx], b))
            if limit is not None and len(groups) > limit:
                break
    return groups


def _workers_text(ws: list[int]) -> str:
    if len(ws) == 1:
        return f"w{ws[0]}"
    if ws == list(range(ws[0], ws[-1] + 1)):
        return f"w{ws[0]}–w{ws[-1]}"
    return ",".join(f"w{w}" for w in ws[:4]) + (f",… ({len(ws)})" if len(ws) > 4 else "")


def batches_figure(run: RunData, title: str) -> Any:
    """Per-worker batch size over time: a panel per instance type (each with its own y range).

    In a panel every distinct trajectory has its own colour and line style; coinciding ones
    (:func:`batch_groups`) are drawn once, labelled with the workers they stand for, so no worker
    hides under another. With more than 16 distinct trajectories: one panel, each instance type's
    median and min-max band.
    """
    groups = batch_groups(run, limit=16)
    if len(groups) > 16:
        fig, ax = new_figure(8, 4.5)
        draw_batch_bands(ax[0, 0], run)
        ax[0, 0].set_title(title)
        return fig
    by_type: dict[str, list[tuple[list[int], np.ndarray, np.ndarray]]] = {}
    for g in groups:
        ws = g[0]
        types = {run.instances[w] if w < len(run.instances) else "" for w in ws}
        by_type.setdefault(types.pop() if len(types) == 1 else "mixed types", []).append(g)
    n = len(by_type)
    fig, ax = new_figure(8, 1.0 + 1.9 * n, n, 1, sharex=True)
    for k, (inst, gs) in enumerate(by_type.items()):
        a = ax[k, 0]
        for j, (ws, t, b) in enumerate(gs):
            label = _workers_text(ws) + (f" ({len(ws)} alike)" if len(ws) > 1 else "")
            a.step(t, b, where="post", label=label, color=PALETTE[j % len(PALETTE)],
                   linestyle=LINESTYLES[(j // len(PALETTE)) % len(LINESTYLES)], linewidth=1.6)
        a.set_ylabel("batch size (samples)")
        a.set_title(inst or "workers", fontsize="small", loc="left")
        a.grid(True, alpha=0.3)
        a.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.0, 1.0), title="worker", title_fontsize="x-small")
        a.set_ylim(bottom=0)  # a magnitude: from zero, so a change reads at its true size
        if k < n - 1:
            a.set_xlabel("")
    ax[-1, 0].set_xlabel(run.time_axis)
    nonnegative(ax[-1, 0], "x")
    fig.suptitle(title)
    return fig


def draw_batch_bands(ax: Any, run: RunData) -> None:
    """Each instance type's median batch over time and its min-max band (runs with many distinct trajectories)."""
    by_type: dict[str, list[int]] = {}
    for w in range(run.workers):
        by_type.setdefault(run.instances[w] if w < len(run.instances) else "?", []).append(w)
    for k, (inst, ws) in enumerate(by_type.items()):
        sel = np.isin(run.it["worker"], ws)
        upd = run.it["update"][sel]
        keep = upd >= 0
        ups, inv = np.unique(upd[keep], return_inverse=True)
        if not len(ups):
            continue
        b = run.it["batch"][sel][keep].astype(float)
        t = np.full(len(ups), np.inf)
        np.minimum.at(t, inv, run.it["start_s"][sel][keep])
        lo, hi = np.full(len(ups), np.inf), np.full(len(ups), -np.inf)
        np.minimum.at(lo, inv, b)
        np.maximum.at(hi, inv, b)
        med = np.array([np.median(b[inv == i]) for i in range(len(ups))]) if len(ups) <= 5000 else (lo + hi) / 2
        color = PALETTE[k % len(PALETTE)]
        ax.fill_between(t, lo, hi, step="post", color=color, alpha=0.25, linewidth=0)
        ax.step(t, med, where="post", color=color, label=f"{inst} ({len(ws)} workers)")
    ax.set_xlabel(run.time_axis)
    ax.set_ylabel("batch size (samples)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.0, 1.0), title="median, min-max band")
    nonnegative(ax, "x")
    nonnegative(ax, "y")


def phase_seconds(run: RunData) -> dict[str, dict[str, float]]:
    """Mean seconds per iteration in each phase, per instance type (kept iterations)."""
    keep = run.col("dropped") == 0
    workers = run.it["worker"][keep]
    out: dict[str, dict[str, float]] = {}
    types = list(dict.fromkeys(run.instances)) if run.instances else ["all workers"]
    for inst in types:
        ws = [w for w, i in enumerate(run.instances) if i == inst] if run.instances else list(range(run.workers))
        sel = np.isin(workers, ws)
        if sel.any():
            out[f"{inst} ({len(ws)})"] = {p: float(run.col(f"{p}_s")[keep][sel].mean()) for p in PHASE_COLORS}
    return out


def draw_phases(ax: Any, rows: dict[str, dict[str, float]], *, xlabel: str = "mean time per iteration (s)") -> None:
    """Horizontal stacked bars: a bar per row label, a segment per phase (fetch, compute, communicate, wait)."""
    labels = list(rows)
    left = np.zeros(len(labels))
    order = ("fetch", "compute", "comm", "wait")
    for phase in order:
        vals = np.array([rows[k].get(phase, 0.0) for k in labels])
        if (vals > 0).any():
            ax.barh(range(len(labels)), vals, left=left, color=PHASE_COLORS[phase], label=PHASE_LABELS[phase], height=0.7)
        left += vals
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize="small")
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.set_ylabel("instance type (workers)" if "fraction" not in xlabel else "scheme")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0), title="phase")


def staleness_counts(runs: Sequence[RunData]) -> tuple[np.ndarray, np.ndarray]:
    """(staleness values, fraction of applied gradients) pooled over ``runs``."""
    vals = [r.it["staleness"][(r.col("dropped") == 0) & (r.it["update"] >= 0)] for r in runs]
    allv = np.concatenate(vals).astype(int) if vals else np.zeros(0, dtype=int)
    if not len(allv):
        return np.zeros(0), np.zeros(0)
    counts = np.bincount(allv)
    return np.arange(len(counts)), counts / counts.sum()


def draw_staleness(ax: Any, runs: Sequence[RunData], label: str, color: str) -> None:
    """A histogram of the runs' staleness on ``ax``, its long tail cut at 99.5 % of the mass."""
    x, frac = staleness_counts(runs)
    ax.bar(x, frac, color=color, label=label, width=0.85)
    title = None
    if len(frac):  # a long tail of rare values would squeeze the bulk: cut the axis at 99.5% of the mass
        top = int(np.searchsorted(np.cumsum(frac), 0.995)) + 1
        if top < len(frac) - 1:
            ax.set_xlim(-0.6, top + 0.6)
            title = f"max {len(frac) - 1}; axis cut at 99.5%"
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("staleness (updates between pull and apply)")
    ax.set_ylabel("fraction of applied gradients")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize="small", title=title, title_fontsize="x-small")


def draw_accuracy(ax_acc: Any, ax_loss: Any | None, curves: dict[str, RunData], colors: dict[str, str]) -> None:
    """Test accuracy (and loss, if ``ax_loss``) against time for each run in numerics mode."""
    for i, (label, run) in enumerate(curves.items()):
        num = run.numerics
        if num is None:
            continue
        color = colors.get(label, PALETTE[i % len(PALETTE)])
        ax_acc.plot(num["time_s"], num["accuracy"], label=label, color=color, marker=".")
        if ax_loss is not None and "loss" in num:
            ax_loss.plot(num["time_s"], num["loss"], label=label, color=color, marker=".")
    first = next(iter(curves.values()), None)
    time_axis = first.time_axis if first is not None else "simulated time (s)"
    panels = [(ax_acc, "held-out accuracy (fraction)", "lower right")]
    if ax_loss is not None:
        panels.append((ax_loss, "held-out loss (nats)", "upper right"))
    for ax, ylabel, corner in panels:
        ax.set_xlabel(time_axis)
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small", loc=corner)
        nonnegative(ax, "x")
        nonnegative(ax, "y")


def batches_vary(run: RunData) -> bool:
    """Whether any worker's batch size changes during the run."""
    b = run.it["batch"]
    w = run.it["worker"]
    return any(len(np.unique(b[w == k])) > 1 for k in np.unique(w))


def run_title(run: RunData) -> str:
    """A run's figure title: scheme, seed, and whether it was measured."""
    return f"{run.scheme}, seed {run.summary.get('seed', '?')}" + (", measured" if run.measured else "")


def draw_timelines(ax: Any, labelled: Sequence[tuple[str, RunData]], window_s: float) -> None:
    """Stacked worker timelines, one run per panel ``ax[k, 0]`` titled by its label: the x label on the
    last panel only, and one legend of every phase drawn, beside the first."""
    phases: list[str] = []
    for k, (label, run) in enumerate(labelled):
        phases += [p for p in draw_timeline(ax[k, 0], run, window_s, legend=False) if p not in phases]
        ax[k, 0].set_title(label, fontsize="medium", loc="left")
        if k < len(labelled) - 1:
            ax[k, 0].set_xlabel("")
    ax[0, 0].legend(handles=phase_handles(phases), fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0),
                    title="phase")


def window_text(window_s: float, runs: Sequence[RunData]) -> str:
    """'first 20 s', or 'the whole run (8.2 s)' when the window covers every run."""
    end = max((r.end_s for r in runs), default=0.0)
    return f"the whole run ({end:.3g} s)" if 0 < end <= window_s else f"first {window_s:g} s"


def run_figures(run: RunData, *, timeline_s: float | None = None) -> dict[str, Any]:
    """The figures for one run, by file name: always a CDF and a timeline; batches, staleness, accuracy when meaningful."""
    figs: dict[str, Any] = {}
    fig, ax = new_figure(12, 4.5, 1, 2)
    keep = run.col("dropped") == 0
    curves: dict[str, np.ndarray] = {"all workers": iteration_times(run)}
    compute: dict[str, np.ndarray] = {"all workers": run.col("compute_s")[keep]}
    if run.instances:
        wk = run.it["worker"][keep]
        for inst in dict.fromkeys(run.instances):
            ws = np.isin(wk, [w for w, i in enumerate(run.instances) if i == inst])
            curves[inst] = curves["all workers"][ws]
            compute[inst] = compute["all workers"][ws]
    colors = {"all workers": "black", **{k: PALETTE[i % len(PALETTE)] for i, k in enumerate(list(curves)[1:])}}
    draw_cdf(ax[0, 0], curves, colors, overall="all workers")
    ax[0, 0].set_title("iteration time (start to next start)", fontsize="medium")
    draw_cdf(ax[0, 1], compute, colors, overall="all workers")
    ax[0, 1].set_xlabel("compute time per iteration (s)")
    ax[0, 1].set_title("compute time (differs per type even under a barrier)", fontsize="medium")
    fig.suptitle(f"Time CDFs by instance type ({run_title(run)})")
    figs["iteration_cdf"] = fig

    phases = phase_seconds(run)
    fig, ax = new_figure(8, 1.6 + 0.45 * len(phases))
    draw_phases(ax[0, 0], phases)
    ax[0, 0].set_title(f"Where an iteration's time goes, per instance type ({run_title(run)})")
    figs["phases"] = fig

    window = timeline_window([run], timeline_s)
    fig, ax = new_figure(10, 1.2 + 0.35 * max(len(timeline_workers(run)), 2))
    draw_timeline(ax[0, 0], run, window)
    ax[0, 0].set_title(f"Worker timeline, {window_text(window, [run])} ({run_title(run)})")
    figs["timeline"] = fig

    if run.scheme == "lbbsp" or batches_vary(run):
        figs["batch_sizes"] = batches_figure(run, f"Per-worker batch size over time ({run_title(run)})")

    if run.it["staleness"].max(initial=0) > 0:
        fig, ax = new_figure(6, 4)
        draw_staleness(ax[0, 0], [run], run.scheme, PALETTE[1])
        ax[0, 0].set_title(f"Staleness of applied gradients ({run_title(run)})")
        figs["staleness"] = fig

    if run.numerics is not None:
        has_loss = "loss" in run.numerics
        fig, ax = new_figure(11 if has_loss else 6, 4, 1, 2 if has_loss else 1)
        draw_accuracy(ax[0, 0], ax[0, 1] if has_loss else None, {run.scheme: run}, {})
        fig.suptitle(f"Accuracy{' and loss' if has_loss else ''} vs simulated time ({run_title(run)})")
        figs["accuracy"] = fig
    return figs
