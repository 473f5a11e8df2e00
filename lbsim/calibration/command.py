"""The ``lbsim calibrate`` command: arguments -> :func:`lbsim.calibration.run.calibrate_to` -> a summary.

The CLI passes the engine in (an :class:`lbsim.engine.Engine`; core modules import no engine).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lbsim.calibration.error_stats import abs_quantile, geomean_abs
from lbsim.calibration.fit import CV_MAX
from lbsim.calibration.measured import parse_fit_placements, placement_label, read_measurements
from lbsim.calibration.repeatability import held_out_floor_text
from lbsim.calibration.run import Prediction, calibrate_to
from lbsim.calibration.select import AUTO, JitterChoice
from lbsim.engine import Engine
from lbsim.errors import InputError


def parse_jitter_cv(text: str | None) -> JitterChoice:
    """``--jitter-cv``: ``"auto"`` (the default), None (fit) for ``fit``, else a CV >= 0."""
    if text is None or text.strip() == AUTO:
        return AUTO
    if text.strip() == "fit":
        return None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.0 <= value <= CV_MAX:
        raise InputError("--jitter-cv", f"must be `auto`, `fit` or a number in [0, {CV_MAX:g}], got {text!r}")
    return value


def run(args: argparse.Namespace, simulate: Engine) -> int:
    """Fit on the fit placements, predict every row with ``simulate``, write ``fit.yaml`` and ``predictions.csv``
    (the scenario checked before anything is written); 0 on success."""
    from lbsim.lifecycle.guards import check_out
    from lbsim.progress import LazyProgress
    from lbsim.scenario.loader import scenario_from_data

    if args.gradient_bytes <= 0:
        raise InputError("--gradient-bytes", f"must be a positive number of bytes, got {args.gradient_bytes}")
    if args.gpus_per_node is not None and args.gpus_per_node <= 0:
        raise InputError("--gpus-per-node", f"must be >= 1, got {args.gpus_per_node}")
    if args.chunk_share is not None and not 0.0 <= args.chunk_share <= 1.0:
        raise InputError("--chunk-share", f"must be in [0, 1], got {args.chunk_share}")
    jitter_cv = parse_jitter_cv(args.jitter_cv)
    fit = parse_fit_placements(args.fit_placements)
    out = check_out(Path(args.out))
    rows = read_measurements(args.measured, gpus_per_node=args.gpus_per_node)

    def simulate_mean_s(data: dict[str, Any]) -> float:
        return float(simulate(scenario_from_data(data)).summary["mean_iteration_s"])

    floor = held_out_floor_text(rows, fit)
    with LazyProgress("calibrate") as bar:
        cal, preds = calibrate_to(rows, fit, args.gradient_bytes, out, simulate_mean_s, instance=args.instance,
                                  source=Path(args.measured).name, progress=bar.update, floor_text=floor,
                                  jitter_cv=jitter_cv,
                                  **({} if args.chunk_share is None else {"chunk_share": args.chunk_share}))
    if not args.quiet:
        print_summary(cal, preds, out, floor)
    return 0


def print_summary(cal: Any, preds: Sequence[Prediction], out: Path, floor_text: str | None = None) -> None:
    """The error table per role (geomean, median, p90, interval coverage, worst placement) and the figures."""
    from rich.table import Table

    f = cal.figures
    table = Table(title=f"lbsim calibrate: fitted on {','.join(placement_label(p) for p in cal.fit_placements)}")
    for col in ("rows", "n", "geomean |error|", "median |error|", "p90 |error|", "in interval",
                "worst placement (geomean)"):
        table.add_column(col, justify="left" if col == "rows" else "right")
    for role in ("single", "fit", "held_out"):
        sel = [p for p in preds if p.role == role]
        by_p: dict[str, list[float]] = {}
        for p in sel:
            by_p.setdefault(p.row.label, []).append(p.relative_error)
        worst = max(by_p, key=lambda k: geomean_abs(by_p[k])) if by_p else None
        errs = [p.relative_error for p in sel]
        inside = [p for p in sel if p.low_s is not None and p.high_s is not None]
        cover = (sum(p.low_s <= p.row.step_time_s <= p.high_s for p in inside)  # type: ignore[operator]
                 / len(inside)) if inside else None
        table.add_row(role, str(len(sel)), f"{geomean_abs(errs):.1%}" if sel else "—",
                      f"{abs_quantile(errs, 0.5):.1%}" if sel else "—", f"{abs_quantile(errs, 0.9):.1%}" if sel else "—",
                      f"{cover:.1%}" if cover is not None else "—",
                      f"{worst} ({geomean_abs(by_p[worst]):.1%})" if worst else "—")
    from lbsim.tables import console as make_console
    from lbsim.tables import table_width

    console = make_console(table_width() or 160)
    console.print(table)
    console.print(f"algorithm {f.algorithm}; NIC {f.nic_bandwidth_gbps:.3g} Gbit/s + {f.nic_latency_s:.3g} s; "
                  f"intra {f.intra_bandwidth_gbps:.3g} Gbit/s + {f.intra_latency_s:.3g} s; shared-node slowdown "
                  f"{f.shared_node_slowdown:.3g}; NICs per node {f.nics_per_node}; chunk share {f.chunk_share:.3g}; overlap hide {f.overlap.hide_share:.3g}, tail {f.overlap.tail_share:.3g}; "
                  f"compute noise {f.jitter_cv:.3g}")
    if cal.noise is not None:
        console.print(cal.noise.text())
    if floor_text is not None:
        console.print(floor_text)
    if cal.interval is not None:
        console.print(cal.interval.text())
    flagged: dict[str, int] = {}
    for p in preds:
        for reason in p.extrapolates:
            flagged[reason] = flagged.get(reason, 0) + 1
    if flagged:
        console.print(f"{sum(1 for p in preds if p.extrapolates)} of {len(preds)} rows extrapolate beyond the fit "
                      f"placements ({', '.join(f'{k} {v}' for k, v in flagged.items())}): column extrapolates")
    console.print(f"wrote {out / 'fit.yaml'} and {out / 'predictions.csv'}")
