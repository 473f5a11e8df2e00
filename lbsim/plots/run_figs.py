"""Run-level figures: iteration-time CDF, worker timeline, batch sizes, staleness, accuracy.

Each ``draw_*`` function draws into one matplotlib ``Axes`` (so the sweep figures reuse them);
:func:`run_figures` builds the figures for one run folder, keyed by file name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from lbsim.plots.data import RunData
from lbsim.plots.style import PALETTE, PHASE_COLORS, PHASE_LABELS, new_figure

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


def draw_timeline(ax: Any, run: RunData, window_s: float, *, legend: bool = True) -> None:
    """Each worker's phases (fetch / compute / wait / communicate) during the first ``window_s`` seconds."""
    n = run.workers
    start = run.it["start_s"]
    rows = np.nonzero(start < window_s)[0]
    phases = [p for p in ("fetch", "compute", "wait", "comm") if f"{p}_s" in run.it and (run.it[f"{p}_s"][rows] > 0).any()]
    t = start[rows].copy()
    for phase in ("fetch", "compute", "wait", "comm"):
        if phase not in phases:
            t = t + run.it.get(f"{phase}_s", np.zeros(len(start)))[rows]
            continue
        dur = run.it[f"{phase}_s"][rows]
        for w in range(n):
            sel = (run.it["worker"][rows] == w) & (dur > 0)
            if sel.any():
                ax.broken_barh(list(zip(t[sel], dur[sel], strict=True)), (w - 0.4, 0.8), facecolors=PHASE_COLORS[phase],
                               edgecolor="none")
        t = t + dur
    for phase in phases:  # legend entries, once each
        ax.bar(0, 0, color=PHASE_COLORS[phase], label=PHASE_LABELS[phase])
    ax.set_xlim(0, window_s)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_yticks(range(n))
    ax.set_yticklabels([worker_label(run, w) for w in range(n)], fontsize="x-small")
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("worker")
    if legend:
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0), title="phase")


def draw_batches(ax: Any, run: RunData) -> None:
    """Per-worker batch size over simulated time (one step line per worker)."""
    for w in range(run.workers):
        sel = run.it["worker"] == w
        if sel.any():
            order = np.argsort(run.it["start_s"][sel])
            ax.step(run.it["start_s"][sel][order], run.it["batch"][sel][order], where="post",
                    label=worker_label(run, w), color=PALETTE[w % len(PALETTE)],
                    linestyle="-" if w < len(PALETTE) else "--")
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("batch size (samples)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.0, 1.0), title="worker")


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
    fig, ax = new_figure(7, 4.5)
    curves: dict[str, np.ndarray] = {"all workers": iteration_times(run)}
    if run.instances:
        keep = run.col("dropped") == 0
        wk = run.it["worker"][keep]
        for inst in dict.fromkeys(run.instances):
            ws = [w for w, i in enumerate(run.instances) if i == inst]
            curves[inst] = curves["all workers"][np.isin(wk, ws)]
    colors = {"all workers": "black", **{k: PALETTE[i % len(PALETTE)] for i, k in enumerate(list(curves)[1:])}}
    draw_cdf(ax[0, 0], curves, colors)
    ax[0, 0].set_title(f"Iteration-time CDF by instance type ({run_title(run)})")
    figs["iteration_cdf"] = fig

    fig, ax = new_figure(10, 1.2 + 0.35 * max(run.workers, 2))
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
