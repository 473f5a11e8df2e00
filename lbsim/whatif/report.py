"""The what-if's files: ``whatif.json`` (every figure), ``heatmap.csv`` and ``heatmap.png`` (slowdown by
rank x time; the figure needs matplotlib, the CSV does not), and the lines the command prints."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from lbsim.whatif.outcome import WhatifOutcome


def _r(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(f"{x:.6g}")


def report_data(o: WhatifOutcome) -> dict[str, Any]:
    """``whatif.json``: the job, the fit (curves, communication), the replay, the loss attribution and every
    scheme's prediction."""
    rec, fit, att = o.recording, o.fit, o.attribution
    job_s = rec.job_s
    return {
        "job": {"source": rec.source, "ranks": rec.ranks, "hosts": list(rec.hosts), "devices": list(rec.devices),
                "scheme": rec.scheme, "complete": rec.complete, "steps_recorded": rec.steps_recorded,
                "steps_used": rec.steps_used, "recorded_job_s": _r(job_s), "notes": list(o.notes)},
        "fit": {"global_batch": fit.global_batch, "comm_s": _r(fit.comm_s), "allreduce_tail_s": _r(fit.tail_s),
                "optimizer_and_loader_s": _r(fit.overhead_s), "link_gbps": _r(fit.link_gbps),
                "gradient_bytes": fit.gradient_bytes, "gradient_bytes_known": fit.gradient_bytes_known,
                "rank_curves": [{"rank": r, "t0_s": _r(c.t0_s), "per_sample_s": _r(c.per_sample_s), "varied_batches": c.varied}
                                for r, c in enumerate(fit.rank_curves)],
                "base_curves": [{"rank": r, "t0_s": _r(c.t0_s), "per_sample_s": _r(c.per_sample_s)} for r, c in enumerate(fit.base)]},
        "replay": {"sim_job_s": _r(o.replay_s), "recorded_job_s": _r(job_s), "error": _r(o.replay_error),
                   "within_5_percent": o.replay_ok},
        "stragglers": {
            "ideal_job_s": _r(o.ideal_s), "lost_share": _r(o.lost_share),
            "lost_s_measured": _r(att.lost_s), "lost_share_measured": _r(att.lost_s / job_s if job_s > 0 else 0.0),
            "by_rank": [{"rank": r, "lost_s": _r(float(v)), "share_of_lost": _r(float(v) / att.lost_s if att.lost_s > 0 else 0.0)}
                        for r, v in enumerate(att.lost_by_rank_s)],
            "periods": [{"start_s": _r(p.start_s), "end_s": _r(p.end_s), "first_step": p.first_step, "last_step": p.last_step,
                         "lost_s": _r(p.lost_s), "rank": p.rank, "rank_share": _r(p.rank_share), "slowdown": _r(p.slowdown)}
                        for p in att.periods],
        },
        "baseline": o.baseline,
        "schemes": [{"scheme": row.label, "network": row.network, "throughput_samples_per_s": _r(row.throughput_samples_per_s),
                     "sim_job_s": _r(row.sim_time_s), "speedup_vs_baseline": _r(row.speedup.value),
                     "low": _r(row.speedup.low) if row.speedup.low is not None else None,
                     "high": _r(row.speedup.high) if row.speedup.high is not None else None,
                     "interval": row.speedup.method} for row in o.rows],
    }


def heatmap_csv(o: WhatifOutcome) -> str:
    """``heatmap.csv``: one line per rank, one column per time bin (its start in s), the mean slowdown."""
    att = o.attribution
    lines = ["rank," + ",".join(f"{t:.3f}" for t in att.bin_edges_s[:-1]) + "\n"]
    for r in range(att.heat.shape[0]):
        lines.append(f"{r}," + ",".join("" if not np.isfinite(v) else f"{v:.4g}" for v in att.heat[r]) + "\n")
    return "".join(lines)


def heatmap_png(path: Path, o: WhatifOutcome) -> bool:
    """The rank x time map (False: matplotlib is not installed)."""
    try:
        import matplotlib  # noqa: F401

        from lbsim.plots.style import new_figure
    except ImportError:
        return False
    att = o.attribution
    fig, axes = new_figure(8.0, 1.2 + 0.3 * att.heat.shape[0])
    ax = axes[0][0]
    edges = att.bin_edges_s
    image = ax.imshow(att.heat, aspect="auto", interpolation="nearest", cmap="magma_r", vmin=1.0,
                      vmax=max(2.0, float(np.nanmax(att.heat)) if np.isfinite(att.heat).any() else 2.0),
                      extent=(float(edges[0]), float(edges[-1]), att.heat.shape[0] - 0.5, -0.5))
    ax.set_xlabel("job time (s)")
    ax.set_ylabel("rank")
    ax.set_title(f"slowdown against the typical rank — {o.lost_share:.1%} of the job lost to stragglers")
    fig.colorbar(image, ax=ax, label="slowdown")
    fig.savefig(path, dpi=120)
    return True


def write_report(folder: Path, o: WhatifOutcome) -> None:
    """Write ``heatmap.csv``, ``heatmap.png`` (with matplotlib) and ``whatif.json`` into ``folder``."""
    (folder / "heatmap.csv").write_text(heatmap_csv(o), encoding="utf-8")
    heatmap_png(folder / "heatmap.png", o)
    (folder / "whatif.json").write_text(json.dumps(report_data(o), indent=1) + "\n", encoding="utf-8")


def summary_lines(o: WhatifOutcome) -> list[str]:
    """What the command prints: the job, the replay's error, the loss and who caused it, the worst periods,
    each scheme's speedup."""
    rec, att = o.recording, o.attribution
    lines = [f"{rec.source}: {rec.ranks} ranks x {rec.steps_used} steps (of {rec.steps_recorded} recorded), "
             f"scheme {rec.scheme.get('name')}, recorded {rec.job_s:.3f} s",
             *o.notes,
             f"replay under its own scheme: {o.replay_s:.3f} s ({o.replay_error:+.1%} vs recorded"
             f"{'' if o.replay_ok else ': more than 5 %, read the predictions with care'})",
             f"without stragglers: {o.ideal_s:.3f} s: {o.lost_share:.1%} of the job lost to stragglers"]
    if att.lost_s > 0:
        ranks = sorted(range(len(att.lost_by_rank_s)), key=lambda r: -att.lost_by_rank_s[r])
        lines.append("lost by rank: " + ", ".join(f"rank {r} {att.lost_by_rank_s[r] / att.lost_s:.0%}"
                                                  for r in ranks if att.lost_by_rank_s[r] > 0.005 * att.lost_s))
    for p in att.periods[:5]:
        lines.append(f"  {p.start_s:8.2f}-{p.end_s:8.2f} s (steps {p.first_step}-{p.last_step}): rank {p.rank} "
                     f"{p.slowdown:.2f}x slower, {p.lost_s:.3f} s lost")
    lines.append(f"speedup over {o.baseline} (95 % interval):")
    for row in o.rows:
        s = row.speedup
        band = f" [{s.low:.2f}, {s.high:.2f}]" if s.low is not None and s.high is not None else ""
        lines.append(f"  {row.label:<14} {row.network:<17} {s.value:5.2f}x{band}")
    return lines
