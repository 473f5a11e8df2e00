"""``lbsim advise``: one command from "my cluster" to "use this scheme" (docs/advise.md).

Writes one folder (``--out``, default ``runs/<scenario>/advise`` or ``runs/cluster/advise``),
swapped in whole like every run folder (:mod:`lbsim.run_folder`):

* ``advise.html`` — the report, self-contained (no network needed to open it);
* ``advise.json`` — the same content for programs;
* ``runs.csv`` — one row per run (scheme, variant, seed and its figures).

The runs go over the cores in a local process pool (``-j``), or on Dask (``--dask``: a local Dask
cluster; ``--scheduler ADDRESS``: a running one), through :mod:`lbsim.sweep.backends`.

The CLI builds this command's parser on every call (:func:`add_arguments`), so the module imports
the advise machinery, the sweep backends (Dask) and the lifecycle inside the functions that run it.
"""

from __future__ import annotations

import argparse
import json
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lbsim.errors import InputError


def add_arguments(sp: argparse.ArgumentParser) -> None:
    """Declare ``lbsim advise``'s arguments on its subparser."""
    sp.add_argument("scenario", nargs="?", help="scenario YAML file (or describe the cluster with --cluster)")
    sp.add_argument("--cluster", metavar="LINE", help='workers by GPU or instance name, e.g. "4xV100,4xT4"')
    sp.add_argument("--network", metavar="BANDWIDTH", help="every node's NIC, e.g. 10gbps")
    sp.add_argument("--colocated", metavar="SPEC", help='a co-located job, e.g. "slowdown=2 on 1 node" (which node: varied)')
    sp.add_argument("--model", default="resnet50_imagenet", help="with --cluster: the catalog model (default resnet50_imagenet)")
    sp.add_argument("--global-batch", type=int, help="with --cluster: samples per global update (default 128 per worker)")
    sp.add_argument("--budget-s", type=float, default=300.0,
                    help="simulated seconds per run when the scenario sets no time budget or sample target (default 300)")
    sp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a scenario key (repeatable)")
    sp.add_argument("--vary", action="append", default=[], metavar="KEY=V1,V2,...",
                    help="an unknown to vary, e.g. network.bandwidth_gbps=5,10 (repeatable: crossed)")
    sp.add_argument("--schemes", help="comma-separated schemes (default: every registered scheme; bsp is the baseline)")
    sp.add_argument("--seeds", type=int, default=5, help="seeds per variant (default 5)")
    sp.add_argument("--max-seeds", type=int, default=20, help="more seeds, up to this, where an interval is wide (default 20)")
    sp.add_argument("--target", type=float, default=0.05, dest="target_rel",
                    help="an interval is wide above this relative half-width (default 0.05: ±5 %%)")
    sp.add_argument("--samples", type=int, help="time and cost are for this many samples (default: one epoch of the model's dataset)")
    sp.add_argument("--price", action="append", default=[], metavar="INSTANCE=USD",
                    help="replace an instance's price per hour, or the parameter server's (server=USD) (repeatable)")
    sp.add_argument("--slowdown-pct", type=float, default=10.0, help="report P(more than this %% slower than the baseline) (default 10)")
    sp.add_argument("-j", "--jobs", type=int, help="local worker processes (default: the number of CPUs)")
    sp.add_argument("--dask", action="store_true", help="run on a local Dask cluster (-j workers) instead of a process pool")
    sp.add_argument("--scheduler", metavar="ADDRESS", help="run on a running Dask cluster, e.g. tcp://host:8786")
    sp.add_argument("--out", help="output folder (default: runs/<scenario>/advise)")
    sp.add_argument("-q", "--quiet", action="store_true", help="print only the decision")


def _request(args: argparse.Namespace, argv: Sequence[str]) -> Any:
    from lbsim.advise.run import Request

    return Request(scenario=args.scenario, cluster=args.cluster, network=args.network, colocated=args.colocated,
                   model=args.model, global_batch=args.global_batch, budget_s=args.budget_s, overrides=tuple(args.set),
                   vary=tuple(args.vary), schemes=args.schemes, seeds=args.seeds, max_seeds=args.max_seeds,
                   target_rel=args.target_rel, samples=args.samples, prices=tuple(args.price),
                   slowdown_pct=args.slowdown_pct, command=shlex.join(["lbsim", *argv]))


def _backend(args: argparse.Namespace) -> Any:
    from lbsim.lifecycle import check_jobs
    from lbsim.sweep.backends import DaskPool, LocalPool

    check_jobs(args.jobs, args.scheduler)
    if args.scheduler and args.dask:
        raise InputError("--dask", "--dask starts a local Dask cluster; --scheduler uses a running one: give one of them")
    if args.scheduler:
        return DaskPool.connect(args.scheduler)
    if args.dask:
        try:
            from dask.distributed import Client, LocalCluster
        except ImportError:
            raise InputError("--dask", 'needs dask.distributed: pip install "lbsim[cluster]"') from None
        from lbsim.sweep.backends import default_jobs

        cluster = LocalCluster(n_workers=args.jobs or default_jobs(), threads_per_worker=1, processes=True,
                               dashboard_address=None)
        return DaskPool(Client(cluster))
    return LocalPool(args.jobs)


def _out(args: argparse.Namespace) -> Path:
    from lbsim.lifecycle import default_out, out_folder

    return out_folder(args.out, default_out(args.scenario or "cluster", "advise"))


def write_report(folder: Path, report: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    """advise.json, advise.html and runs.csv into ``folder`` (atomic writes)."""
    from lbsim.advise.html import render
    from lbsim.metrics.writers import atomic_write_text, csv_text

    atomic_write_text(folder / "advise.json", json.dumps(report, indent=1, sort_keys=True) + "\n")
    atomic_write_text(folder / "advise.html", render(report))
    columns = list(dict.fromkeys(k for row in rows for k in row))
    atomic_write_text(folder / "runs.csv", csv_text(columns, [[row.get(c) for c in columns] for row in rows]))


def _print_table(report: dict[str, Any]) -> None:
    from rich.table import Table

    from lbsim.tables import console, table_width

    def e(x: dict[str, Any], fmt: str) -> str:
        if x["value"] is None:
            return "—"
        if x["low"] is None or x["high"] is None:
            return fmt.format(x["value"]) + " (no interval)"
        if x["low"] == x["high"]:
            return fmt.format(x["value"])
        return f"{fmt.format(x['value'])} [{fmt.format(x['low'])}, {fmt.format(x['high'])}]"

    n = report["settings"]["samples"]
    table = Table(title=f"{report['question']['title']} — every scheme against {report['baseline']['label']}")
    for i, col in enumerate(("scheme", "speedup", "samples/s", "iter P50/P90/P99 (s)",
                             f"P(>{report['settings']['slowdown_pct']:g}% slower)", "stale",
                             f"$ for {n:,} samples", "worst case")):
        table.add_column(col, justify="left" if i == 0 else "right")
    for a in report["arms"]:
        it = a["iteration_s"]
        table.add_row(a["label"], e(a["speedup"], "{:.2f}x"), e(a["throughput_samples_per_s"], "{:.0f}"),
                      "/".join(f"{it[q]['value']:.2f}" if it[q]["value"] is not None else "—" for q in ("p50", "p90", "p99")),
                      e(a["p_slowdown"], "{:.0%}"), f"{a['staleness_mean']['value'] or 0:.1f}",
                      e(a["cost"]["usd"], "{:,.0f}"), f"{a['worst_variant']['speedup']:.2f}x")
    console(table_width() or 170).print(table)  # a closed pipe is quiet (lbsim/shell.py), not rich's exit 1


def cmd_advise(args: argparse.Namespace, argv: Sequence[str], engine: Any = None) -> int:
    """The command; ``engine`` runs one scenario (None: the run lifecycle's default, the simulator)."""
    from lbsim.advise.run import advise, prepare
    from lbsim.lifecycle import check_jobs
    from lbsim.run_folder import staged_run
    from lbsim.sweep.backends import DaskPool
    from lbsim.sweep.progress import SweepProgress

    prepared = prepare(_request(args, argv))  # everything is checked before anything runs
    check_jobs(args.jobs, args.scheduler)
    out = _out(args)
    if not args.quiet:
        for line in prepared.mapping:
            print(f"cluster: {line}")
        runs = len(prepared.plan.runs())
        print(f"advise: {len(prepared.plan.arms)} schemes x {len(prepared.plan.variants)} variant(s) x "
              f"{len(prepared.plan.seeds)} seeds = {runs} runs against {prepared.plan.arms[0].label}"
              + (f"; not applicable: {', '.join(prepared.plan.skipped)}" if prepared.plan.skipped else ""))
    with staged_run(out) as stage:  # locked and checked before the runs; swapped in whole at the end
        backend = _backend(args)
        try:
            with SweepProgress("advise", enabled=False if args.quiet else None) as bar:
                report, rows = advise(prepared, engine, backend, on_progress=bar.update)
        finally:
            if isinstance(backend, DaskPool):
                cluster = getattr(backend.client, "cluster", None)
                backend.client.close()
                if cluster is not None and args.dask:
                    cluster.close()
        write_report(stage, report, rows)
    if not args.quiet:
        _print_table(report)
    print(report["decision"]["text"])
    if not args.quiet:
        print(f"report in {out}/advise.html (and advise.json, runs.csv)")
    return 0

