"""The nccl-tests tables of the docs: the fitted NCCL figures and their errors on the A100 logs.

Fits the collective figures on the shipped A100 logs (``data/nccl_tests_a100``, node counts 1 and
2) exactly as ``lbsim calibrate-nccl ... --fit-nodes 1,2`` does. :func:`documents` gives each page
with its block replaced: the text between ``<!-- nccl-tests:begin -->`` and
``<!-- nccl-tests:end -->`` in ``validation.md`` (errors, ratio errors, robustness) and between
``<!-- nccl-figures:begin -->`` and ``<!-- nccl-figures:end -->`` in ``collectives.md`` (fitted
figures, error per size and node count); ``docs/tools/nccl_tables.py`` writes or checks them.

Ratio error: the predicted slow-down of ``n`` GPUs over the 16-GPU fit cluster at the same size,
``(T̂_n / T̂_16) / (T_n / T_16) − 1`` — what "how much slower on 8x the nodes?" needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from lbsim.calibration.error_stats import abs_error_stats
from lbsim.calibration.nccl_fit import fit_nccl
from lbsim.calibration.nccl_report import (
    DEFAULT_NOMINAL,
    LARGE_BYTES,
    SUMMARY_HEADER,
    NcclPrediction,
    coverage,
    interval_bounds,
    markdown,
    pct_text,
    per_size_table,
    predict_rows,
    summary_table,
)
from lbsim.calibration.nccl_tests import NcclRow, read_logs
from lbsim.network.nccl import PROTOCOLS, NcclFigures

FIT_NODES = (1, 2)
SPLITS = ((1, 2), (1, 4), (1, 2, 4))
CHUNKS = (0.0, 128 * 1024.0, 256 * 1024.0, 512 * 1024.0)
NOMINALS = (0.8, 0.9)


def ratio_rows(preds: Sequence[NcclPrediction], base_gpus: int) -> list[list[str]]:
    """Per held-out GPU count ``n``: the ratio errors ``(T̂_n / T̂_base) / (T_n / T_base) − 1`` over the sizes
    ≥ 1 MiB both have (module docstring), as count, median, p90 and geomean |·|."""
    by = {(p.row.gpus, p.row.size_bytes): p for p in preds if p.role != "single"}
    out = []
    for gpus in sorted({p.row.gpus for p in preds if p.role == "held_out"}):
        errs = []
        for (g, s), p in sorted(by.items()):
            b = by.get((base_gpus, s))
            if g == gpus and b is not None and s >= LARGE_BYTES:
                errs.append((p.predicted_s / b.predicted_s) / (p.row.time_s / b.row.time_s) - 1.0)
        med, p90, geo = abs_error_stats(errs)
        out.append([f"{gpus} / {base_gpus} GPUs", str(len(errs)), pct_text(med), pct_text(p90), pct_text(geo)])
    return out


def held_stats(rows: Sequence[NcclRow], fit_nodes: Sequence[int], chunk: float | None = None) -> list[str]:
    """Fit on ``fit_nodes`` (with Simple's tree ``chunk`` if given): the held-out GPU counts and the median
    and p90 |error| of the held-out rows ≥ 1 MiB and < 1 MiB."""
    sel = [r for r in rows if r.nodes in fit_nodes]
    fit = fit_nccl(sel) if chunk is None else fit_nccl(sel, simple_chunk_bytes=chunk)
    preds = predict_rows(fit.figures, rows, fit_nodes)
    big = [p.error for p in preds if p.role == "held_out" and p.row.size_bytes >= LARGE_BYTES]
    small = [p.error for p in preds if p.role == "held_out" and p.row.size_bytes < LARGE_BYTES]
    held = sorted({p.row.gpus for p in preds if p.role == "held_out"})
    mb, pb, _ = abs_error_stats(big)
    ms, ps, _ = abs_error_stats(small)
    return [",".join(map(str, held)), pct_text(mb), pct_text(pb), pct_text(ms), pct_text(ps)]


def figures_table(fig: NcclFigures) -> str:
    """The fitted figures per protocol (base, NVLink hop, network hop, bandwidth share) and the bus bandwidths."""
    head = ["protocol", "base b_p (µs)", "NVLink hop a_p (µs)", "network hop x_p (µs)", "bandwidth share η_p"]
    body = [[name, f"{pf.base_s * 1e6:.2f}", f"{pf.intra_hop_s * 1e6:.2f}", f"{pf.inter_hop_s * 1e6:.2f}",
             f"{pf.efficiency:.3f}"] for name, pf in zip(PROTOCOLS, fig.protocols, strict=True)]
    return (markdown(head, body) + f"\nBus bandwidths: one node `B_intra` = {fig.intra_bytes_per_s / 1e9:.1f} GB/s, "
            f"across nodes `B_inter` = {fig.inter_bytes_per_s / 1e9:.1f} GB/s per rank; {fig.nics_per_node} NICs per "
            f"node; Simple tree chunk {fig.simple_chunk_bytes / 1024:.0f} KiB (not fitted).\n")


def blocks(data: Path) -> tuple[str, str]:
    """The two blocks from the logs in ``data``: validation.md's (errors, ratio errors, interval coverage,
    robustness to the fit node counts, the tree-chunk ablation) and collectives.md's (figures, error per size)."""
    logs: list[Path] = sorted(data.glob("nccl_*gpus.log"), key=lambda p: int(p.name[5:-8]))
    rows = read_logs(logs)
    fit = fit_nccl([r for r in rows if r.nodes in FIT_NODES])
    preds = predict_rows(fit.figures, rows, FIT_NODES, interval_bounds(fit.cv_ratios, DEFAULT_NOMINAL))
    cover = []
    for nominal in NOMINALS:
        ps = predict_rows(fit.figures, rows, FIT_NODES, interval_bounds(fit.cv_ratios, nominal))
        line = [f"{nominal:.0%}"]
        for role in ("fit", "held_out"):
            for large in (True, False):
                n, share = coverage(ps, role, large)
                line.append(f"{pct_text(share)} of {n}")
        cover.append(line)
    val = ["Fitted on 1 node (2, 4, 8 GPUs) and 2 nodes (16 GPUs); held out: 4, 8, 16 nodes (32, 64, 128 GPUs). "
           "|error| of the all-reduce time; sizes ≥ 1 MiB and < 1 MiB apart.\n",
           markdown(SUMMARY_HEADER, summary_table(preds)),
           "\nRatio errors, sizes ≥ 1 MiB: the predicted slow-down over the 16-GPU cluster at the same size.\n",
           markdown(["ratio", "n", "median", "p90", "geomean"], ratio_rows(preds, 16)),
           "\nIntervals (from the fit's leave-one-GPU-count-out errors on one node): share of rows inside.\n",
           markdown(["nominal", "fit ≥ 1 MiB", "fit < 1 MiB", "held out ≥ 1 MiB", "held out < 1 MiB"], cover),
           "\nRobustness: other fit node counts (held out: every other multi-GPU log).\n",
           markdown(["fit nodes", "held-out GPUs", "median ≥ 1 MiB", "p90 ≥ 1 MiB", "median < 1 MiB", "p90 < 1 MiB"],
                    [[",".join(map(str, s)), *held_stats(rows, s)] for s in SPLITS]),
           "\nAblation: the Simple protocol's tree chunk (NCCL's 256 KiB; 0 = no store-and-forward per tree "
           "level), fit on 1,2 nodes.\n",
           markdown(["tree chunk", "held-out GPUs", "median ≥ 1 MiB", "p90 ≥ 1 MiB", "median < 1 MiB", "p90 < 1 MiB"],
                    [[f"{c / 1024:.0f} KiB", *held_stats(rows, FIT_NODES, c)] for c in CHUNKS])]
    header, body = per_size_table(preds)
    col = [figures_table(fit.figures),
           "\nSigned error (predicted / measured − 1) and the candidate the model picks, per size and GPU count.\n",
           markdown(header, body)]
    return "\n".join(val), "\n".join(col)


def replace_block(text: str, name: str, body: str, doc: str) -> str:
    """``text`` with what stands between ``<!-- name:begin -->`` and ``<!-- name:end -->`` replaced by
    ``body``; ValueError naming ``doc`` when a marker is missing."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    if begin not in text or end not in text:
        raise ValueError(f"{doc}: markers {begin} / {end} not found")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body}\n{end}{tail}"


def documents(data: Path, docs: Path) -> dict[Path, str]:
    """Each page under ``docs`` that holds a block, with the block computed from the logs in ``data``."""
    val, col = blocks(data)
    out = {}
    for doc, name, body in (("validation.md", "nccl-tests", val), ("collectives.md", "nccl-figures", col)):
        path = docs / doc
        out[path] = replace_block(path.read_text(encoding="utf-8"), name, body, str(path))
    return out
