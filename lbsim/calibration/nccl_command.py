"""``lbsim calibrate-nccl LOGS... --fit-nodes 1,2 --out DIR``: fit the collective figures on nccl-tests logs.

Reads ``all_reduce_perf`` logs (:mod:`lbsim.calibration.nccl_tests`), fits the figures on the rows
whose node count is in ``--fit-nodes`` (:mod:`lbsim.calibration.nccl_fit`), predicts every row with
NCCL's pick (:mod:`lbsim.network.nccl`) and writes into ``DIR``:

* ``fit.yaml`` — the figures (per protocol: base, intra hop, network hop latencies, bandwidth
  efficiency; the bus bandwidths), which rows they were fitted on, the errors;
* ``predictions.csv`` — every row: nodes, gpus, size_bytes, measured_s, predicted_s, its interval
  (predicted_lo_s, predicted_hi_s; ``--interval`` nominal coverage), error (predicted / measured − 1),
  the algorithm and protocol the model picks, role (fit / held_out / single) and extrapolates
  (nodes, gpus_per_node, size: beyond the fit rows; :mod:`lbsim.calibration.nccl_report`);
* ``report.md`` — the error tables (per node count, ≥ 1 MiB and < 1 MiB; per size);
* ``scenario.yaml`` — a BSP data-parallel run (ResNet-50) on the largest logged cluster whose
  all-reduce the engines time with the fitted model (``network.algorithm: nccl_fitted``;
  :mod:`lbsim.calibration.nccl_scenario`; ``lbsim run DIR/scenario.yaml``).

Bad input (a malformed line, an unknown node count, a fit without one-node or multi-node rows)
exits 2 with one line naming the file and line or the option; nothing is written.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from lbsim.calibration.error_stats import abs_error_stats
from lbsim.calibration.nccl_fit import NcclFit, fit_nccl
from lbsim.calibration.nccl_report import (
    DEFAULT_NOMINAL,
    SUMMARY_HEADER,
    NcclPrediction,
    coverage,
    csv_rows,
    interval_bounds,
    markdown,
    per_size_table,
    predict_rows,
    summary_table,
)
from lbsim.calibration.nccl_scenario import SCENARIO_MODEL, scenario_data
from lbsim.calibration.nccl_tests import NcclRow, read_logs
from lbsim.errors import InputError
from lbsim.limits import MAX_WORKERS
from lbsim.network.nccl import PROTOCOLS, NcclFigures, allreduce_time_s
from lbsim.scenario import catalog

MAX_LOGS = 256


def parse_fit_nodes(text: str, rows: Sequence[NcclRow]) -> tuple[int, ...]:
    """``--fit-nodes`` as sorted node counts, each one the logs have, including a one-node log of 2 or more
    GPUs (the intra-node figures) and a count of 2 or more (the network figures); InputError otherwise."""
    try:
        nodes = tuple(sorted({int(t) for t in text.split(",") if t.strip()}))
    except ValueError:
        raise InputError("--fit-nodes", f"expected node counts like 1,2, got {text!r}") from None
    have = sorted({r.nodes for r in rows})
    if not nodes:
        raise InputError("--fit-nodes", "give at least one node count, e.g. 1,2")
    for k in nodes:
        if k not in have:
            raise InputError("--fit-nodes", f"no log has {k} node(s); the logs have {', '.join(map(str, have))}")
    if not any(r.nodes == 1 and r.gpus >= 2 for r in rows if r.nodes in nodes):
        raise InputError("--fit-nodes", "the fit needs a one-node log with 2 or more GPUs (node count 1): "
                                        "the intra-node figures come from it")
    if not any(k >= 2 for k in nodes):
        raise InputError("--fit-nodes", "the fit needs a node count >= 2: the network figures come from it")
    return nodes


def coverage_lines(preds: Sequence[NcclPrediction], nominal: float) -> list[str]:
    """One comment line per role and size class: the share of rows whose measurement lies in its interval."""
    out = []
    for role in ("fit", "held_out"):
        for label, large in (("≥ 1 MiB", True), ("< 1 MiB", False)):
            n, share = coverage(preds, role, large)
            if n:
                out.append(f"# {nominal:.0%} intervals, {role} rows {label}: {share:.0%} of {n} inside")
    if not out:
        out.append("# no intervals: fewer than three one-node GPU counts to leave out")
    return out


def _g(x: float) -> float:
    return float(f"{x:.6g}")


def figures_data(fig: NcclFigures) -> dict[str, Any]:
    """The figures as the scenario's ``network.nccl`` section writes them (bus bandwidths in Gbit/s, 6 significant digits)."""
    return {
        "intra_bus_gbps": _g(fig.intra_bytes_per_s * 8 / 1e9),
        "inter_bus_gbps": _g(fig.inter_bytes_per_s * 8 / 1e9),
        "nics_per_node": fig.nics_per_node,
        "protocols": {name: {"base_s": _g(pf.base_s), "intra_hop_s": _g(pf.intra_hop_s),
                             "inter_hop_s": _g(pf.inter_hop_s), "efficiency": _g(pf.efficiency)}
                      for name, pf in zip(PROTOCOLS, fig.protocols, strict=True)},
    }


def fit_yaml_text(fit: NcclFit, fit_nodes: Sequence[int], sources: Sequence[str], preds: Sequence[NcclPrediction],
                  nominal: float = DEFAULT_NOMINAL) -> str:
    """``fit.yaml``: comment lines (sources, search, uninformed protocols, errors, interval coverage), then the
    fit node counts and the figures."""
    lines = [f"# lbsim calibrate-nccl {' '.join(sources)}",
             f"# fitted on the rows with {','.join(map(str, fit_nodes))} node(s); NCCL's ring/tree x LL/LL128/Simple "
             "structure (docs/collectives.md); rounds per stage " + ", ".join(map(str, fit.rounds)) + "."]
    if fit.cv_error:
        lines.append(f"# search {fit.search}: leave-one-GPU-count-out geomean |error| on the one-node rows "
                     + ", ".join(f"{k} {v:.1%}" for k, v in fit.cv_error.items()) + ".")
    else:
        lines.append(f"# search {fit.search} (fewer than three one-node GPU counts: no cross-validation).")
    uninformed = [p for p in PROTOCOLS if p not in fit.informed]
    if uninformed:
        lines.append(f"# no fit row picks {', '.join(uninformed)}: its figures are NCCL's tuning-table defaults.")
    for role in ("fit", "held_out"):
        for label, big in (("≥ 1 MiB", True), ("< 1 MiB", False)):
            errs = [p.error for p in preds if p.role == role and (p.row.size_bytes >= 2**20) == big]
            if errs:
                med, p90, geo = abs_error_stats(errs)
                lines.append(f"# {role} rows {label}: {len(errs)}, |error| median {med:.1%}, p90 {p90:.1%}, geomean {geo:.1%}")
    lines += coverage_lines(preds, nominal)
    body = yaml.safe_dump({"fit_nodes": list(fit_nodes), "figures": figures_data(fit.figures)},
                          sort_keys=False, default_flow_style=False, allow_unicode=True)
    return "\n".join(lines) + "\n" + body


def run(args: argparse.Namespace) -> int:
    """Fit, score every row, and write ``fit.yaml``, ``predictions.csv``, ``report.md`` and ``scenario.yaml``
    (the scenario checked like a file before anything is written); 0 on success."""
    from lbsim.lifecycle.guards import check_out
    from lbsim.metrics.writers import atomic_write_text, write_csv
    from lbsim.scenario.loader import scenario_from_data

    if len(args.logs) > MAX_LOGS:
        raise InputError("LOGS", f"at most {MAX_LOGS} log files, got {len(args.logs)}")
    if not 0.0 < args.interval < 1.0:
        raise InputError("--interval", f"must be a coverage in (0, 1), e.g. 0.9, got {args.interval}")
    if args.nics_per_node is not None and not 1 <= args.nics_per_node <= MAX_WORKERS:
        raise InputError("--nics-per-node", f"must be in [1, {MAX_WORKERS}], got {args.nics_per_node}")
    out = check_out(Path(args.out))
    rows = read_logs(args.logs)
    fit_nodes = parse_fit_nodes(args.fit_nodes, rows)
    fit = fit_nccl([r for r in rows if r.nodes in fit_nodes], nics_per_node=args.nics_per_node)
    bounds = interval_bounds(fit.cv_ratios, args.interval)
    preds = predict_rows(fit.figures, rows, fit_nodes, bounds)
    sources = [Path(p).name for p in args.logs]
    biggest = max(rows, key=lambda r: (r.gpus, r.nodes))
    gradient_bytes = catalog.MODELS[SCENARIO_MODEL].gradient_bytes
    scenario = scenario_data(fit.figures, biggest.nodes, biggest.gpus_per_node)
    scenario_from_data(scenario)  # the scenario is checked like a file before anything is written
    header, body = per_size_table(preds)
    report = ("# lbsim calibrate-nccl: errors\n\n"
              f"Fitted on {','.join(map(str, fit_nodes))} node(s); error = predicted / measured − 1.\n\n"
              + markdown(SUMMARY_HEADER, summary_table(preds)) + "\n" + markdown(header, body))
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "fit.yaml", fit_yaml_text(fit, fit_nodes, sources, preds, args.interval))
    cols, csv_body = csv_rows(preds)
    write_csv(out / "predictions.csv", cols, csv_body)
    atomic_write_text(out / "report.md", report)
    one = allreduce_time_s(fit.figures, biggest.gpus, biggest.nodes, gradient_bytes)
    note = (f"# lbsim calibrate-nccl: the fitted NCCL model on the largest logged cluster ({biggest.nodes} x "
            f"{biggest.gpus_per_node} GPUs); one all-reduce of the model's {gradient_bytes} B: {one * 1e6:.1f} us.\n")
    atomic_write_text(out / "scenario.yaml", note + yaml.safe_dump(scenario, sort_keys=False, default_flow_style=None, width=120))
    if not args.quiet:
        print_summary(preds, out, args.interval)
    return 0


def print_summary(preds: Sequence[NcclPrediction], out: Path, nominal: float = DEFAULT_NOMINAL) -> None:
    """The error table per role and GPU count, the interval coverage, and where the files went."""
    from rich.table import Table

    from lbsim.tables import console as make_console
    from lbsim.tables import table_width

    table = Table(title="lbsim calibrate-nccl: |error| of the predicted all-reduce time")
    for col in SUMMARY_HEADER:
        table.add_column(col, justify="left" if col in ("rows", "GPUs (nodes x per node)") else "right")
    for cells in summary_table(preds):
        table.add_row(*cells)
    console = make_console(table_width() or 160)
    console.print(table)
    for text in coverage_lines(preds, nominal):
        console.print(text.lstrip("# "))
    console.print(f"wrote {out / 'fit.yaml'}, predictions.csv, report.md, scenario.yaml")
