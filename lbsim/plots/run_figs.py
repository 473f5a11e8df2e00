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
    return f"w{w} {run.instances[w]}" if w < len(run.instances) else f"w{w}"


def ecdf(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.sort(values)
    return x, np.arange(1, len(x) + 1) / len(x)


def iteration_times(run: RunData) -> np.ndarray:
    keep = run.col("dropped") == 0
    return (run.it["end_s"] - run.it["start_s"])[keep]


def wide(values: Sequence[np.ndarray]) -> bool:
    """Whether positive values span more than a factor 20 (then a log axis reads better)."""
    pos = np.concatenate([v[v > 0] for v in values if len(v)]) if values else np.zeros(0)
    return bool(len(pos) and pos.max() / pos.min() > 20)


def draw_cdf(ax: Any, curves: dict[str, np.ndarray], colors: dict[str, str] | None = None, *, log: bool | None = None) -> None:
    """One empirical CDF per label (iteration times in seconds); a log x axis if ``log`` (None: if they span > 20x)."""
    for i, (label, values) in enumerate(curves.items()):
        if len(values):
            x, y = ecdf(values)
            ax.step(x, y, where="post", label=label, color=(colors or {}).get(label, PALETTE[i % len(PALETTE)]))
    if wide(list(curves.values())) if log is None else log:
        from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter

        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.xaxis.set_minor_formatter(NullFormatter())
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


def draw_timeline(ax: Any, run: RunData, window_s: float, *, legend: bool = True) -> None:
    """Each shown worker's phases (fetch / compute / wait / communicate) during the first ``window_s`` seconds."""
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
    for phase in phases:  # legend entries, once each
        ax.bar(0, 0, color=PHASE_COLORS[phase], label=PHASE_LABELS[phase])
    ax.set_xlim(0, window_s)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_yticks(range(n))
    ax.set_yticklabels([worker_label(run, w) for w in shown], fontsize="x-small")
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("worker" if n == run.workers else f"worker ({n} of {run.workers}: first of each type)")
    if legend:
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0), title="phase")


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


def draw_batches(ax: Any, run: RunData) -> None:
    """Per-worker batch size over simulated time: a colour per instance type, a line style per
    trajectory within it; coinciding trajectories (:func:`batch_groups`) drawn once (thicker),
    labelled with their workers, so no worker hides under another.
    With more than 16 distinct trajectories, each instance type's median and min-max band."""
    groups = batch_groups(run, limit=16)
    if len(groups) <= 16:
        types = list(dict.fromkeys(run.instances)) or [""]
        seen: dict[str, int] = {}
        for ws, t, b in groups:
            inst = run.instances[ws[0]] if ws[0] < len(run.instances) else ""
            same = len({run.instances[w] for w in ws if w < len(run.instances)}) <= 1
            k = seen[inst] = seen.get(inst, -1) + 1
            label = f"{_workers_text(ws)} {inst if same else '(mixed types)'}".strip()
            ax.step(t, b, where="post", label=label + (f" ({len(ws)} alike)" if len(ws) > 1 else ""),
                    color=PALETTE[types.index(inst) % len(PALETTE)] if inst in types else "black",
                    linestyle=LINESTYLES[k % len(LINESTYLES)], linewidth=1.2 + 1.3 * (len(ws) > 1))
        title = "worker"
    else:
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
        title = "median, min-max band"
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("batch size (samples)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.0, 1.0), title=title)


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
    for i, (label, run) in enumerate(curves.items()):
        num = run.numerics
        if num is None:
            continue
        color = colors.get(label, PALETTE[i % len(PALETTE)])
        ax_acc.plot(num["time_s"], num["accuracy"], label=label, color=color, marker=".")
        if ax_loss is not None and "loss" in num:
            ax_loss.plot(num["time_s"], num["loss"], label=label, color=color, marker=".")
    ax_acc.set_xlabel("simulated time (s)")
    ax_acc.set_ylabel("held-out accuracy (fraction)")
    ax_acc.grid(True, alpha=0.3)
    ax_acc.legend(fontsize="small", loc="lower right")
    if ax_loss is not None:
        ax_loss.set_xlabel("simulated time (s)")
        ax_loss.set_ylabel("held-out loss (nats)")
        ax_loss.grid(True, alpha=0.3)
        ax_loss.legend(fontsize="small", loc="upper right")


def batches_vary(run: RunData) -> bool:
    b = run.it["batch"]
    w = run.it["worker"]
    return any(len(np.unique(b[w == k])) > 1 for k in np.unique(w))


def run_title(run: RunData) -> str:
    return f"{run.scheme}, seed {run.summary.get('seed', '?')}"


def run_figures(run: RunData, *, timeline_s: float = DEFAULT_TIMELINE_S) -> dict[str, Any]:
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
    draw_cdf(ax[0, 0], curves, colors)
    ax[0, 0].set_title("iteration time (start to next start)", fontsize="medium")
    draw_cdf(ax[0, 1], compute, colors)
    ax[0, 1].set_xlabel("compute time per iteration (s)")
    ax[0, 1].set_title("compute time (differs per type even under a barrier)", fontsize="medium")
    fig.suptitle(f"Time CDFs by instance type ({run_title(run)})")
    figs["iteration_cdf"] = fig

    phases = phase_seconds(run)
    fig, ax = new_figure(8, 1.6 + 0.45 * len(phases))
    draw_phases(ax[0, 0], phases)
    ax[0, 0].set_title(f"Where an iteration's time goes, per instance type ({run_title(run)})")
    figs["phases"] = fig

    fig, ax = new_figure(10, 1.2 + 0.35 * max(len(timeline_workers(run)), 2))
    draw_timeline(ax[0, 0], run, timeline_s)
    ax[0, 0].set_title(f"Worker timeline, first {timeline_s:g} s ({run_title(run)})")
    figs["timeline"] = fig

    if run.scheme == "lbbsp" or batches_vary(run):
        fig, ax = new_figure(8, 4.5)
        draw_batches(ax[0, 0], run)
        ax[0, 0].set_title(f"Per-worker batch size over time ({run_title(run)})")
        figs["batch_sizes"] = fig

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
