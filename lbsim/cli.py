"""The ``lbsim`` command line: run | compare | schemes | catalog.

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
        table.add_row(*(fmt.format(row[key]) for key, _label, fmt in cols))
    Console(width=max(130, Console().width)).print(table)


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


def _run_one(scenario: Any, out: Path, label: str) -> dict[str, Any]:
    from lbsim.output import write_run, write_scenario
    from lbsim.progress import LazyProgress
    from simulator.run import simulate

    write_scenario(out, scenario)
    with LazyProgress(label) as bar:
        result = simulate(scenario, progress=bar.update)
    write_run(out, result.iterations, result.updates, result.summary, result.decisions)
    return result.summary


def cmd_run(args: argparse.Namespace) -> int:
    from lbsim.scenario.loader import load_scenario

    if args.scheme is not None:
        _check_scheme_names("--scheme", [args.scheme])
    scenario = load_scenario(args.scenario, args.set, scheme=args.scheme)
    name = scenario.scheme.kind  # type: ignore[attr-defined]
    out = _out_dir(args, name)
    summary = _run_one(scenario, out, name)
    if not args.quiet:
        _table([summary], f"{scenario.name or args.scenario} — {summary['workers']} workers, seed {summary['seed']}")
        print(f"results in {out}/")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from lbsim.metrics.summary import speedups
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
    out = _out_dir(args, "compare")
    summaries = [_run_one(sc, out / n, n) for sc, n in zip(scenarios, names, strict=True)]
    for s, speedup in zip(summaries, speedups(summaries), strict=True):
        s["speedup_vs_first"] = speedup
    columns = list(summaries[0])
    atomic_write_text(out / "compare.csv", csv_text(columns, ([s.get(c) for c in columns] for s in summaries)))
    if not args.quiet:
        _table(summaries, f"{scenarios[0].name or args.scenario} — same scenario and seed {summaries[0]['seed']}",
               extra=(("speedup_vs_first", f"vs {names[0]}", "{:.2f}x"),))
        print(f"results in {out}/compare.csv")
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
    run.set_defaults(func=cmd_run)

    cmp_ = sub.add_parser("compare", help="the same scenario and seed under several schemes")
    scenario_args(cmp_)
    cmp_.add_argument("--schemes", required=True, help="comma-separated scheme names, the first is the baseline")
    cmp_.set_defaults(func=cmd_compare)

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
