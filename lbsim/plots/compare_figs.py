"""Compare-folder figures (``lbsim plot runs/<scenario>/compare``): one scenario and seed, several schemes.

``throughput`` (a bar per scheme, its speedup over the first written on it; one seed, so no
interval), ``phases`` (the share of worker time each scheme spends computing, communicating,
waiting and fetching), ``iteration_cdf`` (per scheme), ``timelines`` (a panel per scheme, workers
capped as in run timelines) and ``staleness`` (the schemes that have any).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lbsim.plots.data import CompareData
from lbsim.plots.run_figs import (
    draw_cdf,
    draw_phases,
    draw_staleness,
    draw_timelines,
    iteration_times,
    timeline_window,
    timeline_workers,
    window_text,
)
from lbsim.plots.style import new_figure, scheme_colors


def compare_figures(cmp: CompareData, *, timeline_s: float | None = None) -> dict[str, Any]:
    """The figures of a compare folder, by name."""
    schemes = list(cmp.runs)
    colors = scheme_colors(schemes)
    first = cmp.runs[schemes[0]]
    where = f"{first.summary.get('workers', '?')} workers, seed {first.summary.get('seed', '?')}"
    figs: dict[str, Any] = {}

    fig, ax = new_figure(max(5.0, 1.1 * len(schemes) + 2.5), 4.2)
    a = ax[0, 0]
    thr = [cmp.number(s, "throughput_samples_per_s") for s in schemes]
    bars = a.bar(range(len(schemes)), thr, color=[colors[s] for s in schemes])
    for b, s in zip(bars, schemes, strict=True):
        sp = cmp.number(s, "speedup_vs_first")
        if not np.isnan(sp):
            a.annotate(f"{sp:.2f}x", (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom",
                       fontsize="small")
    a.set_xticks(range(len(schemes)))
    a.set_xticklabels(schemes)
    a.set_xlabel("scheme")
    a.set_ylabel("throughput (samples/s)")
    a.grid(True, axis="y", alpha=0.3)
    a.set_title(f"Throughput per scheme; on each bar its speedup over {schemes[0]} ({where}; one seed: no interval)",
                fontsize="medium")
    figs["throughput"] = fig

    fractions = {s: {p: cmp.number(s, f"{p}_fraction") for p in ("fetch", "compute", "comm", "wait")} for s in schemes}
    fractions = {s: {p: (0.0 if np.isnan(v) else v) for p, v in f.items()} for s, f in fractions.items()}
    fig, ax = new_figure(8, 1.6 + 0.45 * len(schemes))
    draw_phases(ax[0, 0], fractions, xlabel="fraction of worker time")
    ax[0, 0].set_title(f"Where the workers' time goes, per scheme ({where})", fontsize="medium")
    figs["phases"] = fig

    fig, ax = new_figure(7, 4.5)
    draw_cdf(ax[0, 0], {s: iteration_times(r) for s, r in cmp.runs.items()}, colors)
    ax[0, 0].set_title(f"Iteration-time CDF per scheme ({where})", fontsize="medium")
    figs["iteration_cdf"] = fig

    rows = max(len(timeline_workers(r)) for r in cmp.runs.values())
    n = len(schemes)
    window = timeline_window(list(cmp.runs.values()), timeline_s)
    fig, ax = new_figure(10, n * (0.8 + 0.28 * max(rows, 2)) + 0.6, n, 1, sharex=True)
    draw_timelines(ax, [(s, cmp.runs[s]) for s in schemes], window)
    fig.suptitle(f"Worker timelines, {window_text(window, list(cmp.runs.values()))} ({where})")
    figs["timelines"] = fig

    stale = [s for s, r in cmp.runs.items() if r.it["staleness"].max(initial=0) > 0]
    if stale:
        fig, ax = new_figure(4.2 * len(stale) + 0.5, 4, 1, len(stale))
        for k, s in enumerate(stale):
            draw_staleness(ax[0, k], [cmp.runs[s]], s, colors[s])
        fig.suptitle(f"Staleness of applied gradients ({where})")
        figs["staleness"] = fig
    return figs
