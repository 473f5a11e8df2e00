"""The ``lbsim`` command line: run | compare | sweep | advise | plot | train | profile | validate | schemes | catalog.

Exit codes (docs/references.md §9): 0 success, 2 invalid input (one line naming the key path, no
traceback, nothing written), 1 anything else. Each command imports what it uses when it runs
(the lifecycle, sweeps, plots, advise, an engine), because the parser is built on every call:
``lbsim --help`` and ``lbsim schemes`` stay quick and load no engine (neither simpy nor torch).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lbsim.arguments import OneLineParser as _Parser
from lbsim.arguments import one_line as _one_line
from lbsim.arguments import runtime_arguments, scenario_arguments, train_arguments
from lbsim.errors import InputError
from lbsim.metrics.writers import FORMATS
from lbsim.version import __version__

if TYPE_CHECKING:
    from lbsim.scenario.schema import Scenario

def _table(rows: Sequence[dict[str, Any]], title: str, extra: Sequence[tuple[str, str, str]] = ()) -> None:
    from lbsim.tables import print_summary_table

    print_summary_table(rows, title, extra)


def _out_dir(args: argparse.Namespace, leaf: str, default: Path | None = None) -> Path:
    """The command's output folder: ``--out``, else ``default``, else ``runs/<scenario>/<leaf>``; checked.

    A default folder that already holds a run is kept and the new run gets a fresh name
    (:func:`lbsim.run_folder.choose_out`; ``--replace`` writes over it); main() says which once the
    command has succeeded."""
    from lbsim.lifecycle.guards import default_out, out_folder
    from lbsim.run_folder import choose_out

    choice = choose_out(args.out, default if default is not None else default_out(args.scenario, leaf),
                        replace=getattr(args, "replace", False))
    args.out_choice = choice
    return out_folder(str(choice.path), choice.path)


_ARGV: list[str] = []  # this invocation's arguments, for invocation.json


def _argv() -> list[str]:
    return ["lbsim", *_ARGV]


def cmd_run(args: argparse.Namespace) -> int:
    """``lbsim run``: plan the run, simulate it into its folder, print the summary."""
    from lbsim import lifecycle

    spec = lifecycle.plan_run(args.scenario, scheme=args.scheme, overrides=args.set, option="--scheme")
    out = _out_dir(args, spec.label)
    finish = None
    if args.plots:
        from lbsim.plots.style import matplotlib_figure_class

        matplotlib_figure_class()  # missing matplotlib is reported before anything runs
        from lbsim.plots import plot_dir

        def finish(stage: Path) -> None:
            plot_dir(stage, problems=problems)

    problems: list[str] = []
    outcome = lifecycle.run(spec, out, argv=_argv(), fmt=args.format, trace=args.trace, progress=None, finish=finish)
    from lbsim.notices import run_notices, scenario_notices

    args.notices = (scenario_notices(spec.scenario) + run_notices(spec.scenario, outcome.summary)
                    + [f"figure {p}" for p in problems])
    if not args.quiet:
        summary = outcome.summary
        _table([summary], f"{spec.scenario.name or args.scenario} — {summary['workers']} workers, seed {summary['seed']}")
        from lbsim.calibration.report_run import calibrated_run_line

        line = calibrated_run_line(spec.scenario, summary)
        if line is not None:
            print(line)
        print(f"results in {out}/")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """``lbsim compare``: plan the schemes' runs (guards included), run them, write and print the table."""
    from lbsim import lifecycle

    plan = lifecycle.plan_compare(args.scenario, args.schemes, overrides=args.set, baseline=args.baseline,
                                  cross_family=args.cross_family, network_variant=args.network_variant,
                                  option="--schemes", baseline_option="--baseline", variant_option="--network-variant")
    out = _out_dir(args, "compare")
    outcome = lifecycle.compare(plan, out, argv=_argv(), fmt=args.format, progress=None)
    from lbsim.notices import run_notices, scenario_notices

    args.notices = scenario_notices(plan.runs[0].scenario) + [
        f"{r.label}: {line}" for r in outcome.runs for line in run_notices(r.spec.scenario, r.summary)]
    if not args.quiet:
        first = plan.labels[0]
        extra: tuple[tuple[str, str, str], ...] = (("speedup_vs_first", f"vs {first}", "{:.2f}x"),)
        numerics = "speedup_time_to_target_vs_first" in outcome.rows[0]
        if numerics:  # which scheme reaches the target accuracy first
            extra += (("final_accuracy", "accuracy", "{:.3f}"), ("time_to_target_s", "to target (s)", "{:.1f}"),
                      ("speedup_time_to_target_vs_first", f"TTA vs {first}", "{:.2f}x"))
        if plan.baseline != first or plan.cross_family:
            extra += (("speedup_vs_baseline", f"vs {plan.describe_baseline()}", "{:.2f}x"),)
            if numerics:
                extra += (("speedup_time_to_target_vs_baseline", f"TTA vs {plan.baseline}", "{:.2f}x"),)
        if plan.cross_family:
            extra += (("network", "network", "{}"),)
        seed = outcome.rows[0]["seed"]
        how = f"same seed {seed}, each scheme on its family's network" if plan.cross_family else f"same scenario and seed {seed}"
        _table(outcome.rows, f"{plan.runs[0].scenario.name or args.scenario} — {how}", extra=extra)
        print(f"results in {out}/compare.csv (baseline: {plan.describe_baseline()})")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    """``lbsim sweep``: expand the sweep, run its points on the chosen backend, write the results."""
    from lbsim.lifecycle.guards import check_jobs, default_out, out_folder
    from lbsim.sweep.backends import DaskPool, LocalPool
    from lbsim.sweep.expand import load_sweep
    from lbsim.sweep.progress import SweepProgress
    from lbsim.sweep.runner import run_sweep

    check_jobs(args.jobs, args.scheduler)
    sweep = load_sweep(args.sweep, args.set)  # every point is loaded and checked before anything runs
    out = out_folder(args.out, default_out(args.sweep))
    if args.plots:
        from lbsim.plots.style import matplotlib_figure_class

        matplotlib_figure_class()
    backend = DaskPool.connect(args.scheduler) if args.scheduler else LocalPool(args.jobs)
    try:
        with SweepProgress(sweep.name, enabled=False if args.quiet else None) as bar:
            report = run_sweep(sweep, out, backend=backend, on_progress=bar.update, fmt=args.format)
    finally:
        if isinstance(backend, DaskPool):
            backend.client.close()
    if report.earlier_versions:
        print(f"lbsim: warning: {out} was started under lbsim {', '.join(report.earlier_versions)}; resumed under "
              f"{__version__} (sweep.json lists every version; each run's provenance.json says which made it)",
              file=sys.stderr)
    for run, error in report.failed:
        print(f"lbsim: run {run} failed: {error}", file=sys.stderr)
    if not args.quiet:
        print(f"{report.points} points, {report.runs} runs: {report.skipped} already done, {report.ran} run now, "
              f"{len(report.failed)} failed; results in {out}/results.csv")
    if args.plots and not report.failed:
        from lbsim.plots import plot_dir

        problems: list[str] = []
        paths = plot_dir(out, problems=problems)
        for line in problems:  # lbsim's own figures, checked as a reviewer would: a bug to report if any
            print(f"lbsim: warning: figure {line}", file=sys.stderr)
        if not args.quiet:
            print(f"{len(paths) // 2} figures in {out}/plots/")
    return 1 if report.failed else 0


def cmd_plot(args: argparse.Namespace) -> int:
    """``lbsim plot``: draw the figures of a run, compare or sweep folder."""
    from lbsim.plots import PLOTS, plot_dir

    problems: list[str] = []
    paths = plot_dir(args.dir, out=args.out, timeline_s=args.timeline_s, x=args.x, problems=problems)
    for line in problems:  # lbsim's own figures, checked as a reviewer would: a bug to report if any
        print(f"lbsim: warning: figure {line}", file=sys.stderr)
    if not args.quiet:
        names = sorted({p.stem for p in paths})
        print(f"{len(names)} figures (PNG and SVG) in {args.out or Path(args.dir) / PLOTS}/: {', '.join(names)}")
    return 0


def cmd_schemes(args: argparse.Namespace) -> int:
    """``lbsim schemes``: every registered scheme with its parameters."""
    from lbsim.fields import help_rows
    from lbsim.schemes.registry import scheme_configs, scheme_summary

    for name, cfg in sorted(scheme_configs().items()):
        print(f"{name:12s} {scheme_summary(name)}")
        for key, tp, default, help_text in help_rows(cfg):
            print(f"{'':12s}   {key} ({tp}, default {default}): {help_text}")
    return 0


def cmd_catalog(args: argparse.Namespace) -> int:
    """``lbsim catalog``: the sourced instances and models (optionally one model's rows)."""
    from rich.table import Table

    from lbsim.scenario import catalog

    rows = [r for r in catalog.catalog_rows() if args.model is None or r["model"] == args.model]
    if args.model is not None and not rows:
        raise InputError("--model", f"unknown model {args.model!r}; valid: {', '.join(catalog.model_names())}")
    from lbsim.scenario.prices import PRICES, SOURCE

    table = Table(title="lbsim catalog: t(b) = t0_s + b / samples_per_s, b <= max_batch",
                  caption=f"usd_per_hour: {SOURCE} (lbsim/scenario/prices.py)")
    keys = ("model", "instance", "kind", "accelerator", "t0_s", "samples_per_s", "max_batch", "bandwidth_gbps",
            "usd_per_hour", "source")
    for k in keys:
        table.add_column(k, overflow="fold")
    for r in rows:
        price = PRICES.get(r["instance"])
        table.add_row(*({**r, "usd_per_hour": f"{price.usd_per_hour:g}" if price else "—"}[k] for k in keys))
    from lbsim.tables import console, table_width

    console(table_width() or 210).print(table)  # a terminal's width (cells fold); whole when piped
    return 0


def _runtime(command: str, args: argparse.Namespace) -> int:
    """``train`` / ``profile`` / ``validate``: the torch.distributed runtime (imported only here)."""
    try:
        from lbsim.runtime import commands
    except ModuleNotFoundError as err:  # the runtime extra is not installed
        print(f"lbsim: the runtime needs the runtime extra ({err}): python3 -m pip install -e \".[runtime]\"", file=sys.stderr)
        return 1
    if command == "train":
        from lbsim.runtime.config import launched_as_rank

        if launched_as_rank():  # under torchrun: this process is one rank (torchrun started the others)
            from lbsim.runtime.worker import main as rank_main

            return rank_main(_ARGV[_ARGV.index("train") + 1:])
        from lbsim.lifecycle import plan_run

        name = plan_run(args.scenario, scheme=args.scheme, overrides=args.set, option="--scheme").label
        return commands.handle(commands.train, args, _out_dir(args, f"runtime/{name}"), _table)
    if command == "profile":
        return commands.handle(commands.profile, args, _out_dir(args, "profile"))
    if command == "profile-model":
        leaf = args.model.rpartition(":")[2] or "model"
        return commands.handle(commands.profile_model, args, _out_dir(args, leaf, Path("runs") / "profile-model" / leaf))
    if args.schemes is not None:
        from lbsim.lifecycle.guards import check_scheme_names

        check_scheme_names("--schemes", [s.strip() for s in args.schemes.split(",") if s.strip()])

    def simulate_to(scenario: Scenario, out: Path, label: str) -> dict[str, Any]:
        from lbsim.lifecycle import RunSpec, run_into

        spec = RunSpec(label, scenario)
        return run_into(out, spec, argv=_argv(), label=f"simulate {label}", progress=None, keep_result=False).summary

    return commands.handle(commands.validate, args, _out_dir(args, "validate"), simulate_to)


def cmd_calibrate(args: argparse.Namespace) -> int:
    """``lbsim calibrate``: fit the model to measured step times, on the lifecycle's default engine."""
    from lbsim.calibration.command import run
    from lbsim.lifecycle.engines import default_engine

    return run(args, default_engine())


def cmd_calibrate_nccl(args: argparse.Namespace) -> int:
    from lbsim.calibration.nccl_command import run

    return run(args)


def cmd_advise(args: argparse.Namespace) -> int:
    """``lbsim advise``: which scheme to use on a cluster (:mod:`lbsim.advise`)."""
    from lbsim.advise.command import cmd_advise as advise

    return advise(args, _ARGV)


def cmd_whatif(args: argparse.Namespace) -> int:
    from lbsim.whatif.command import cmd_whatif as whatif

    return whatif(args, _ARGV)


def cmd_train(args: argparse.Namespace) -> int:
    """``lbsim train``: the scenario on the torch.distributed runtime."""
    return _runtime("train", args)


def cmd_profile(args: argparse.Namespace) -> int:
    """``lbsim profile``: measure this machine's figures on the runtime."""
    return _runtime("profile", args)


def cmd_validate(args: argparse.Namespace) -> int:
    """``lbsim validate``: profile, run the runtime and the calibrated simulator, report their errors."""
    return _runtime("validate", args)


def cmd_profile_model(args: argparse.Namespace) -> int:
    """``lbsim profile-model``: measure a torch module's step time t(b) on this machine."""
    return _runtime("profile-model", args)


def build_parser() -> argparse.ArgumentParser:
    """The ``lbsim`` argument parser, every command's subparser included."""
    from lbsim.advise.command import add_arguments as advise_arguments
    from lbsim.calibration.arguments import calibrate_arguments, calibrate_nccl_arguments
    from lbsim.whatif.command import add_arguments as whatif_arguments

    p = _Parser(prog="lbsim", description="Which synchronization scheme, how much faster, on my cluster?")
    p.add_argument("--version", action="version", version=f"lbsim {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def format_arg(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--format", choices=FORMATS, default="csv",
                        help="table format of iterations, updates, decisions, numerics (default csv; parquet: typed, ~9x smaller)")

    run = sub.add_parser("run", help="simulate one scenario under one scheme")
    scenario_arguments(run)
    run.add_argument("--scheme", help="scheme name, replacing the file's (see `lbsim schemes`)")
    format_arg(run)
    run.add_argument("--trace", nargs="?", const="json", choices=("json", "gz"),
                     help="also write the worker timelines for Perfetto / chrome://tracing: trace.json, or with "
                          "--trace gz trace.json.gz (gzip, ~8x smaller: for big runs)")
    run.add_argument("--plots", action="store_true", help="also write the run's figures (PNG, SVG) into DIR/plots/")
    run.set_defaults(func=cmd_run)

    cmp_ = sub.add_parser("compare", help="the same scenario and seed under several schemes")
    scenario_arguments(cmp_)
    cmp_.add_argument("--schemes", required=True, help="comma-separated scheme names (the first is the baseline "
                                                        "unless --baseline or --cross-family names another)")
    cmp_.add_argument("--baseline", metavar="SCHEME", help="the scheme speedup_vs_baseline is measured against "
                                                           "(default: the first; with --cross-family bsp over the all-reduce, "
                                                           "plain DDP); run too if --schemes does not list it")
    cmp_.add_argument("--cross-family", action="store_true",
                      help="run each scheme on its family's network: parameter-server schemes (asp, ssp, dssp, elastic_bsp, "
                           "wbsp, backup workers) on a parameter server, the others on an all-reduce; the kind the "
                           "scenario lacks is derived from it (docs/design.md, Cross-family compare)")
    cmp_.add_argument("--network-variant", action="append", default=[], metavar="KIND.KEY=VALUE",
                      help="with --cross-family, override a key of the derived network, e.g. parameter_server.shards=8 "
                           "or ring_allreduce.algorithm=nccl (repeatable)")
    format_arg(cmp_)
    cmp_.set_defaults(func=cmd_compare)

    swp = sub.add_parser("sweep", help="run a sweep: a base scenario x factors x seeds, in parallel, resumable")
    swp.add_argument("sweep", help="sweep YAML file (base scenario, factors, repetitions)")
    swp.add_argument("-j", "--jobs", type=int, help="local worker processes (default: the number of CPUs)")
    swp.add_argument("--scheduler", metavar="ADDRESS", help="run on a Dask cluster, e.g. tcp://host:8786 (extra: cluster)")
    swp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     help="override a base-scenario key in every point, e.g. --set workload.time_budget_s=60 (repeatable)")
    swp.add_argument("--out", help="output directory (default: runs/<sweep file name>)")
    swp.add_argument("--plots", action="store_true", help="also write the sweep's figures into DIR/plots/ at the end")
    swp.add_argument("-q", "--quiet", action="store_true", help="no progress bar, no summary line")
    format_arg(swp)
    swp.set_defaults(func=cmd_sweep)

    adv = sub.add_parser("advise", help="which scheme for my cluster: every scheme against one baseline, with intervals, "
                                        "cost and a report (HTML, JSON)")
    advise_arguments(adv)
    adv.set_defaults(func=cmd_advise)

    wif = sub.add_parser("whatif", help="a recorded training job replayed: time lost to stragglers, by rank and period, "
                                        "and what every scheme would have bought")
    whatif_arguments(wif)
    wif.set_defaults(func=cmd_whatif)

    plot = sub.add_parser("plot", help="figures (PNG, SVG) from a sweep or run output folder")
    plot.add_argument("dir", help="a sweep output (results.csv, runs/) or a run output (summary.json, iterations.csv)")
    plot.add_argument("--out", help="where to write the figures (default: DIR/plots)")
    plot.add_argument("--timeline-s", type=float, help="seconds shown in timelines (default: the first 20, or the whole run if shorter)")
    plot.add_argument("--x", help="sweep factor for the x axis of the speedup and CDF figures (default: the slowdown factor)")
    plot.add_argument("-q", "--quiet", action="store_true", help="print nothing")
    plot.set_defaults(func=cmd_plot)

    trn = sub.add_parser("train", help="run a scenario on the real torch.distributed runtime (one process per worker)")
    train_arguments(trn)
    trn.set_defaults(func=cmd_train)

    prf = sub.add_parser("profile", help="measure this machine's per-worker t(b) and all-reduce cost as scenario overrides")
    runtime_arguments(prf)
    prf.set_defaults(func=cmd_profile)

    pm = sub.add_parser("profile-model", help="measure a torch module's training-step t(b) on this machine (for the catalog)")
    pm.add_argument("model", help="torchvision:NAME (no weights), path/to/file.py:NAME or package.module:NAME")
    pm.add_argument("--input-shape", required=True, help="one sample's shape, e.g. 3,224,224")
    pm.add_argument("--classes", type=int, default=1000, help="output classes (default 1000)")
    pm.add_argument("--batches", default="32,64,128,256", help="local batch sizes to time (default 32,64,128,256)")
    pm.add_argument("--device", choices=("cpu", "cuda"), default="cuda", help="where to run (default cuda)")
    pm.add_argument("--amp", choices=("bf16", "fp16"), help="autocast precision (default: fp32)")
    pm.add_argument("--warmup", type=int, default=3, help="dropped steps per size (default 3)")
    pm.add_argument("--reps", type=int, default=10, help="timed steps per size (default 10)")
    pm.add_argument("--threads", type=int, default=1, help="torch threads on the CPU (default 1)")
    pm.add_argument("--out", help="output directory (default: runs/profile-model/<NAME>)")
    pm.add_argument("-q", "--quiet", action="store_true", help="print nothing")
    pm.set_defaults(func=cmd_profile_model)

    val = sub.add_parser("validate", help="profile, run the runtime and the calibrated simulator, report their errors")
    runtime_arguments(val)
    val.add_argument("--schemes", help="comma-separated schemes to compare (default: bsp,lbbsp)")
    val.add_argument("--repeats", type=int, default=1, metavar="K",
                     help="repeat the whole comparison K times; report median and spread of each error (default 1)")
    val.set_defaults(func=cmd_validate)

    cal = sub.add_parser("calibrate", help="fit t(b), links, overlap from measured step times; predict every row by simulation")
    calibrate_arguments(cal)
    cal.set_defaults(func=cmd_calibrate)

    ncal = sub.add_parser("calibrate-nccl", help="fit per-level link and collective figures on nccl-tests "
                                                 "all_reduce_perf logs; predict the held-out node counts")
    calibrate_nccl_arguments(ncal)
    ncal.set_defaults(func=cmd_calibrate_nccl)

    sub.add_parser("schemes", help="list the registered schemes and their parameters").set_defaults(func=cmd_schemes)
    cat = sub.add_parser("catalog", help="list instance types and model profiles with their sources")
    cat.add_argument("--model", help="only this model profile")
    cat.set_defaults(func=cmd_catalog)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv``; returns the exit code (it never raises SystemExit)."""
    _ARGV[:] = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:  # --help (0) or a usage error (2, already printed on one line)
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else 2)
    from lbsim.shell import SIGPIPE_EXIT, is_broken_pipe, quiet_stdout, write_error_line

    try:
        code = int(args.func(args))
        sys.stdout.flush()  # a closed pipe or a full disk under stdout shows here, not at the interpreter's exit
        for line in getattr(args, "notices", []) if code == 0 else []:
            print(f"lbsim: warning: {line}", file=sys.stderr)
        choice = getattr(args, "out_choice", None)
        if code == 0 and choice is not None and choice.note and (not choice.replaces or not args.quiet):
            print(f"lbsim: {choice.note}", file=sys.stderr)  # where the results went, if not where one might think
        return code
    except InputError as err:
        if "unknown" in err.message:  # a sweep file given to run (or the reverse): say which it is
            from lbsim.file_kinds import wrong_kind

            if getattr(args, "scenario", None):
                err = wrong_kind(args.scenario, "scenario", err)
            elif getattr(args, "sweep", None):
                err = wrong_kind(args.sweep, "sweep", err)
        print(f"lbsim: error: {_one_line(err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("lbsim: interrupted", file=sys.stderr)
        return 1
    except Exception as err:  # noqa: BLE001 — exit code 1 with one line; LBSIM_DEBUG=1 for the traceback
        if is_broken_pipe(err):  # the reader has what it wanted (| head): stop quietly, files are complete
            quiet_stdout()
            return SIGPIPE_EXIT
        if isinstance(err, OSError) and (line := write_error_line(err)) is not None:
            if err.filename is None:
                quiet_stdout()  # stdout itself failed
            print(f"lbsim: error: {line}", file=sys.stderr)
            return 1
        if os.environ.get("LBSIM_DEBUG"):
            raise
        print(f"lbsim: internal error: {type(err).__name__}: {_one_line(err)} (set LBSIM_DEBUG=1 for a traceback)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
