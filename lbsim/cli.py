"""The ``lbsim`` command line: run | compare | sweep | plot | train | profile | validate | schemes | catalog.

Exit codes (product.md): 0 success, 2 invalid input (one line naming the key path, no
traceback, nothing written), 1 anything else. Engines are imported inside the commands that
need them, so ``lbsim schemes`` never loads simpy.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from lbsim.errors import InputError
from lbsim.limits import MAX_JOBS

SUMMARY_COLUMNS = (
    ("scheme", "scheme", "{}"),
    ("throughput_samples_per_s", "samples/s", "{:.1f}"),
    ("updates", "updates", "{}"),
    ("sim_time_s", "time (s)", "{:.1f}"),
    ("mean_iteration_s", "mean iter (s)", "{:.3f}"),
    ("p99_iteration_s", "p99 iter (s)", "{:.3f}"),
    ("compute_fraction", "compute", "{:.0%}"),
    ("wait_fraction", "wait", "{:.0%}"),
    ("staleness_mean", "stale mean", "{:.2f}"),
    ("staleness_max", "stale max", "{}"),
)


def _table(rows: Sequence[dict[str, Any]], title: str, extra: Sequence[tuple[str, str, str]] = ()) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    cols = (*SUMMARY_COLUMNS, *extra)
    for i, (_key, label, _fmt) in enumerate(cols):
        table.add_column(label, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*("—" if row.get(key) is None else fmt.format(row[key]) for key, _label, fmt in cols))
    Console(width=max(160 if extra[1:] else 130, Console().width)).print(table)


def _default_out(file: str, leaf: str) -> Path:
    return Path("runs") / Path(file).name.split(".")[0] / leaf


def _out_dir(args: argparse.Namespace, leaf: str) -> Path:
    """The output directory; an existing path that is not a directory is invalid input."""
    out = Path(args.out) if args.out else _default_out(args.scenario, leaf)
    for p in (out, *out.parents):
        if p.exists():
            if not p.is_dir():
                raise InputError("--out", f"{p} exists and is not a directory; give a directory path")
            break
    return out


def _check_scheme_names(option: str, names: Sequence[str]) -> None:
    """Every name is a registered scheme, or an InputError listing the valid ones."""
    import difflib

    from lbsim.schemes.registry import scheme_names

    valid = scheme_names()
    for name in names:
        if name not in valid:
            close = difflib.get_close_matches(name, valid, n=1, cutoff=0.75)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise InputError(option, f"unknown scheme {name!r}{hint}; valid: {', '.join(valid)}")


def _run_one(scenario: Any, out: Path, label: str, *, trace: bool = False) -> dict[str, Any]:
    from lbsim.output import write_run, write_scenario
    from lbsim.progress import LazyProgress
    from simulator.run import simulate

    write_scenario(out, scenario)
    with LazyProgress(label) as bar:
        result = simulate(scenario, progress=bar.update)
    write_run(out, result.iterations, result.updates, result.summary, result.decisions, result.numerics)
    if trace:
        _write_trace(out, scenario, result)
    return result.summary


def _write_trace(out: Path, scenario: Any, result: Any) -> None:
    """``out/trace.json``: the worker timelines in Chrome trace-event format (Perfetto)."""
    from lbsim.metrics.trace import chrome_trace, trace_text
    from lbsim.metrics.writers import atomic_write_text
    from lbsim.scenario.resolve import resolve_workers

    names = [f"w{w.index} {w.instance}" for w in resolve_workers(scenario)]
    meta = {k: result.summary.get(k) for k in ("scheme", "seed", "engine", "workers")}
    trace = chrome_trace(result.iterations, result.updates, worker_names=names, metadata={"scenario": scenario.name, **meta})
    atomic_write_text(out / "trace.json", trace_text(trace))


def cmd_run(args: argparse.Namespace) -> int:
    from lbsim.scenario.loader import load_scenario

    if args.scheme is not None:
        _check_scheme_names("--scheme", [args.scheme])
    scenario = load_scenario(args.scenario, args.set, scheme=args.scheme)
    name = scenario.scheme.kind  # type: ignore[attr-defined]
    out = _out_dir(args, name)
    if args.plots:
        from lbsim.plots.style import matplotlib_figure_class

        matplotlib_figure_class()  # missing matplotlib is reported before anything runs
    from lbsim.run_folder import staged_run

    with staged_run(out) as stage:  # the folder holds this whole run, or the previous one
        summary = _run_one(scenario, stage, name, trace=args.trace)
        if args.plots:
            from lbsim.plots import plot_dir

            plot_dir(stage)
    if not args.quiet:
        _table([summary], f"{scenario.name or args.scenario} — {summary['workers']} workers, seed {summary['seed']}")
        print(f"results in {out}/")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from lbsim.metrics.writers import atomic_write_text, csv_text
    from lbsim.scenario.loader import load_scenario

    names = [s.strip() for s in args.schemes.split(",") if s.strip()]
    if not names:
        raise InputError("--schemes", "give a comma-separated list of scheme names (see `lbsim schemes`)")
    if len(set(names)) != len(names):
        raise InputError("--schemes", f"a scheme is listed twice: {args.schemes}")
    _check_scheme_names("--schemes", names)
    scenarios = []
    for n in names:  # every scheme is validated before anything is run or written
        try:
            scenarios.append(load_scenario(args.scenario, args.set, scheme=n))
        except InputError as err:
            try:  # an error that does not depend on the scheme is reported as it is
                load_scenario(args.scenario, args.set)
            except InputError as plain:
                if str(plain) == str(err):
                    raise err from None
            raise InputError(err.path, f"{err.message} (with scheme {n} from --schemes)") from None
    from lbsim.run_folder import staged_run

    out = _out_dir(args, "compare")
    with staged_run(out) as stage:  # every scheme's run and compare.csv, swapped in together
        summaries = _compare_runs(stage, scenarios, names)
        columns = list(dict.fromkeys(k for s in summaries for k in s))  # every scheme's fields, first seen first
        atomic_write_text(stage / "compare.csv", csv_text(columns, ([s.get(c) for c in columns] for s in summaries)))
    extra = _compare_columns(summaries, names)
    if not args.quiet:
        _table(summaries, f"{scenarios[0].name or args.scenario} — same scenario and seed {summaries[0]['seed']}",
               extra=extra)
        print(f"results in {out}/compare.csv")
    return 0


def _compare_runs(stage: Path, scenarios: Sequence[Any], names: Sequence[str]) -> list[dict[str, Any]]:
    """Run every scheme into ``stage/<scheme>``; the summaries with the speedups against the first."""
    from lbsim.metrics.summary import speedups, time_to_target_speedups

    summaries = [_run_one(sc, stage / n, n) for sc, n in zip(scenarios, names, strict=True)]
    for s, speedup in zip(summaries, speedups(summaries), strict=True):
        s["speedup_vs_first"] = speedup
    if "time_to_target_s" in summaries[0]:  # numerics mode: which scheme reaches the target accuracy first
        for s, speedup in zip(summaries, time_to_target_speedups(summaries), strict=True):
            s["speedup_time_to_target_vs_first"] = speedup
    return summaries


def _compare_columns(summaries: Sequence[dict[str, Any]], names: Sequence[str]) -> tuple[tuple[str, str, str], ...]:
    extra: tuple[tuple[str, str, str], ...] = (("speedup_vs_first", f"vs {names[0]}", "{:.2f}x"),)
    if "time_to_target_s" in summaries[0]:
        extra += (("final_accuracy", "accuracy", "{:.3f}"), ("time_to_target_s", "to target (s)", "{:.1f}"),
                  ("speedup_time_to_target_vs_first", f"TTA vs {names[0]}", "{:.2f}x"))
    return extra


def cmd_sweep(args: argparse.Namespace) -> int:
    from lbsim.sweep.backends import DaskPool, LocalPool
    from lbsim.sweep.expand import load_sweep
    from lbsim.sweep.progress import SweepProgress
    from lbsim.sweep.runner import run_sweep
    from simulator.run import simulate

    if args.jobs is not None and not 1 <= args.jobs <= MAX_JOBS:
        raise InputError("-j", f"expected a number of worker processes >= 1 and <= {MAX_JOBS}, got {args.jobs}")
    if args.jobs is not None and args.scheduler:
        raise InputError("-j", "with --scheduler the Dask cluster's workers run the sweep; drop -j")
    sweep = load_sweep(args.sweep, args.set)  # every point is loaded and checked before anything runs
    out = Path(args.out) if args.out else Path("runs") / Path(args.sweep).name.split(".")[0]
    for p in (out, *out.parents):
        if p.exists():
            if not p.is_dir():
                raise InputError("--out", f"{p} exists and is not a directory; give a directory path")
            break
    if args.plots:
        from lbsim.plots.style import matplotlib_figure_class

        matplotlib_figure_class()
    backend = DaskPool.connect(args.scheduler) if args.scheduler else LocalPool(args.jobs)
    try:
        with SweepProgress(sweep.name, enabled=False if args.quiet else None) as bar:
            report = run_sweep(sweep, out, engine=simulate, backend=backend, on_progress=bar.update)
    finally:
        if isinstance(backend, DaskPool):
            backend.client.close()
    for run, error in report.failed:
        print(f"lbsim: run {run} failed: {error}", file=sys.stderr)
    if not args.quiet:
        print(f"{report.points} points, {report.runs} runs: {report.skipped} already done, {report.ran} run now, "
              f"{len(report.failed)} failed; results in {out}/results.csv")
    if args.plots and not report.failed:
        from lbsim.plots import plot_dir

        paths = plot_dir(out)
        if not args.quiet:
            print(f"{len(paths) // 2} figures in {out}/plots/")
    return 1 if report.failed else 0


def cmd_plot(args: argparse.Namespace) -> int:
    from lbsim.plots import PLOTS, plot_dir

    paths = plot_dir(args.dir, out=args.out, timeline_s=args.timeline_s, x=args.x)
    if not args.quiet:
        names = sorted({p.stem for p in paths})
        print(f"{len(names)} figures (PNG and SVG) in {args.out or Path(args.dir) / PLOTS}/: {', '.join(names)}")
    return 0


def cmd_schemes(args: argparse.Namespace) -> int:
    from lbsim.scenario.fields import help_rows
    from lbsim.schemes.registry import scheme_configs, scheme_summary

    for name, cfg in sorted(scheme_configs().items()):
        print(f"{name:12s} {scheme_summary(name)}")
        for key, tp, default, help_text in help_rows(cfg):
            print(f"{'':12s}   {key} ({tp}, default {default}): {help_text}")
    return 0


def cmd_catalog(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from lbsim.scenario import catalog

    rows = [r for r in catalog.catalog_rows() if args.model is None or r["model"] == args.model]
    if args.model is not None and not rows:
        raise InputError("--model", f"unknown model {args.model!r}; valid: {', '.join(catalog.model_names())}")
    table = Table(title="lbsim catalog: t(b) = t0_s + b / samples_per_s, b <= max_batch")
    keys = ("model", "instance", "kind", "accelerator", "t0_s", "samples_per_s", "max_batch", "bandwidth_gbps", "source")
    for k in keys:
        table.add_column(k, overflow="fold")
    for r in rows:
        table.add_row(*(r[k] for k in keys))
    Console(width=max(160, Console().width)).print(table)
    return 0


def _runtime(command: str, args: argparse.Namespace) -> int:
    """``train`` / ``profile`` / ``validate``: the torch.distributed runtime (imported only here)."""
    try:
        from runtime import commands
    except ModuleNotFoundError as err:  # the runtime extra is not installed
        print(f"lbsim: the runtime needs the runtime extra ({err}): python3 -m pip install -e \".[runtime]\"", file=sys.stderr)
        return 1
    if command == "train":
        if args.scheme is not None:
            _check_scheme_names("--scheme", [args.scheme])
        from lbsim.scenario.loader import load_scenario

        name = load_scenario(args.scenario, args.set, scheme=args.scheme).scheme.kind  # type: ignore[attr-defined]
        return commands.handle(commands.train, args, _out_dir(args, f"runtime/{name}"), _table)
    if command == "profile":
        return commands.handle(commands.profile, args, _out_dir(args, "profile"))
    if args.schemes is not None:
        _check_scheme_names("--schemes", [s.strip() for s in args.schemes.split(",") if s.strip()])

    def simulate_to(scenario: Any, out: Path, label: str) -> dict[str, Any]:
        return _run_one(scenario, out, f"simulate {label}")  # imports simulator.run inside

    return commands.handle(commands.validate, args, _out_dir(args, "validate"), simulate_to)


def cmd_train(args: argparse.Namespace) -> int:
    return _runtime("train", args)


def cmd_profile(args: argparse.Namespace) -> int:
    return _runtime("profile", args)


def cmd_validate(args: argparse.Namespace) -> int:
    return _runtime("validate", args)


class _Parser(argparse.ArgumentParser):
    """argparse with product.md's error style: one line on stderr, exit code 2, no usage dump."""

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {_one_line(message)} (see `{self.prog} --help`)\n")


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="lbsim", description="Which synchronization scheme, how much faster, on my cluster?")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def scenario_args(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("scenario", help="scenario YAML file")
        sp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a scenario key, e.g. --set scheme.staleness=2 (repeatable)")
        sp.add_argument("--out", help="output directory (default: runs/<scenario>/<scheme or compare>)")
        sp.add_argument("-q", "--quiet", action="store_true", help="print no table")

    run = sub.add_parser("run", help="simulate one scenario under one scheme")
    scenario_args(run)
    run.add_argument("--scheme", help="scheme name, replacing the file's (see `lbsim schemes`)")
    run.add_argument("--trace", action="store_true", help="also write trace.json (worker timelines for Perfetto / chrome://tracing)")
    run.add_argument("--plots", action="store_true", help="also write the run's figures (PNG, SVG) into DIR/plots/")
    run.set_defaults(func=cmd_run)

    cmp_ = sub.add_parser("compare", help="the same scenario and seed under several schemes")
    scenario_args(cmp_)
    cmp_.add_argument("--schemes", required=True, help="comma-separated scheme names, the first is the baseline")
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
    swp.set_defaults(func=cmd_sweep)

    plot = sub.add_parser("plot", help="figures (PNG, SVG) from a sweep or run output folder")
    plot.add_argument("dir", help="a sweep output (results.csv, runs/) or a run output (summary.json, iterations.csv)")
    plot.add_argument("--out", help="where to write the figures (default: DIR/plots)")
    plot.add_argument("--timeline-s", type=float, default=20.0, help="simulated seconds shown in timelines (default 20)")
    plot.add_argument("--x", help="sweep factor for the x axis of the speedup and CDF figures (default: the slowdown factor)")
    plot.add_argument("-q", "--quiet", action="store_true", help="print nothing")
    plot.set_defaults(func=cmd_plot)

    def runtime_args(sp: argparse.ArgumentParser) -> None:
        scenario_args(sp)
        sp.add_argument("--nproc", type=int, help="processes, one per worker plus one for a parameter-server scheme's server (default: what the scenario needs)")
        sp.add_argument("--backend", choices=("gloo", "nccl"), help="torch.distributed backend (default gloo; nccl: one GPU per rank)")
        sp.add_argument("--contention", choices=("emulated", "real"),
                        help="emulated (default): stretch each step by the scenario's slowdown; real: a co-located CPU burner")
        sp.add_argument("--threads", type=int, help="torch threads per rank (default 1)")
        sp.add_argument("--affinity", choices=("auto", "none", "core"),
                        help="pin each rank to its own core(s): core; auto (default) pins only with --contention real")
        sp.add_argument("--model", help="softmax or mlp (default: the numerics defaults)")
        sp.add_argument("--hidden", type=int, help="MLP hidden units")
        sp.add_argument("--lr", type=float, help="SGD learning rate")
        sp.add_argument("--dtype", choices=("float32", "float64"), help="parameter and gradient dtype (default float32)")
        sp.add_argument("--timeout-s", type=float, dest="timeout_s", help="collective timeout: a crashed or hung rank ends the run (default 60)")

    trn = sub.add_parser("train", help="run a scenario on the real torch.distributed runtime (one process per worker)")
    runtime_args(trn)
    trn.add_argument("--scheme", help="scheme name, replacing the file's (runtime: bsp, static, lbbsp)")
    trn.set_defaults(func=cmd_train)

    prf = sub.add_parser("profile", help="measure this machine's per-worker t(b) and all-reduce cost as scenario overrides")
    runtime_args(prf)
    prf.set_defaults(func=cmd_profile)

    val = sub.add_parser("validate", help="profile, run the runtime and the calibrated simulator, report their errors")
    runtime_args(val)
    val.add_argument("--schemes", help="comma-separated schemes to compare (default: bsp,lbbsp)")
    val.set_defaults(func=cmd_validate)

    sub.add_parser("schemes", help="list the registered schemes and their parameters").set_defaults(func=cmd_schemes)
    cat = sub.add_parser("catalog", help="list instance types and model profiles with their sources")
    cat.add_argument("--model", help="only this model profile")
    cat.set_defaults(func=cmd_catalog)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv``; returns the exit code (it never raises SystemExit)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:  # --help (0) or a usage error (2, already printed on one line)
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else 2)
    try:
        return int(args.func(args))
    except InputError as err:
        print(f"lbsim: error: {_one_line(err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("lbsim: interrupted", file=sys.stderr)
        return 1
    except Exception as err:  # noqa: BLE001 — exit code 1 with one line; LBSIM_DEBUG=1 for the traceback
        if os.environ.get("LBSIM_DEBUG"):
            raise
        print(f"lbsim: internal error: {type(err).__name__}: {_one_line(err)} (set LBSIM_DEBUG=1 for a traceback)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
