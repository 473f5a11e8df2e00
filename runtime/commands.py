"""``lbsim train | profile | validate``: what the CLI commands do (``lbsim/cli.py`` holds the parsers).

The simulator is never imported here: ``validate`` receives the function that simulates and writes
one run from the CLI (``lbsim.cli`` imports the simulator inside the command).

Imports: at module level only what loads without torch, so that ``lbsim train`` without the
runtime extra can say what to install; torch and the modules that need it are imported by the
command that uses them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lbsim.errors import InputError
from lbsim.limits import MAX_LOCAL_RANKS, MAX_REPEATS
from lbsim.metrics.writers import write_json
from lbsim.notices import cores_notice
from lbsim.progress import LazyProgress
from lbsim.run_folder import staged_run
from lbsim.scenario.loader import load_scenario
from lbsim.scenario.resolve import resolve_workers
from lbsim.schemes.registry import BASELINE_SCHEME, scheme_configs
from lbsim.tables import console, table_width

from .config import check_runnable, uses_server, world_size
from .launch import RuntimeFailure, launch
from .validate import REPEAT_METRICS, TABLE, Monotone, compare_runs, repeat_summary, validation_report
from .worker import Job, Task, options_from_args

DEFAULT_VALIDATE_SCHEMES = ("bsp", "lbbsp")


def _load(args: Any, scheme: str | None) -> Any:
    return load_scenario(args.scenario, args.set, scheme=scheme)


def _local_ranks(ranks: int) -> int:
    """``ranks``, when this machine may start that many processes (``MAX_LOCAL_RANKS``); else an InputError."""
    if ranks > MAX_LOCAL_RANKS:
        raise InputError("cluster", f"{ranks} ranks: the local launcher starts one process per rank on this machine, "
                                    f"at most {MAX_LOCAL_RANKS}; run more across machines with "
                                    "`torchrun ... -m lbsim.runtime.worker` (docs/runtime.md)")
    return ranks


def _warn_cores(ranks: int, options: Any) -> None:
    if (line := cores_notice(ranks, options.threads)) is not None:
        print(f"lbsim: warning: {line}", file=sys.stderr)


def _launch(job: Job, nproc: int, label: str, quiet: bool) -> None:
    with LazyProgress(label, enabled=None if not quiet else False) as bar:
        launch(job, nproc, progress=Monotone(bar.update))


def train(args: Any, out: Path, summary_table: Callable[[list[dict[str, Any]], str], None]) -> int:
    """``lbsim train``: launch the ranks on this machine, train, write the run folder."""
    scenario = _load(args, args.scheme)
    options = options_from_args(args)
    n = _local_ranks(check_runnable(scenario, options, nproc=args.nproc))
    _warn_cores(n, options)

    # a crashed rank's run is still one complete record (failure.json, the rounds before it): swapped in too
    with staged_run(out, keep_on=(RuntimeFailure,)) as stage:
        job = Job(scenario=str(Path(args.scenario).resolve()), overrides=tuple(args.set), options=options,
                  tasks=(Task("train", str(stage), scheme=args.scheme),))
        _launch(job, n, f"runtime {scenario.scheme.kind}", args.quiet)
        summary = json.loads((stage / "summary.json").read_text(encoding="utf-8"))
    if not args.quiet:
        summary_table([summary], f"{scenario.name or args.scenario} — runtime, {n} ranks ({options.backend}, "
                                 f"{options.contention} contention)")
        print(f"results in {out}/")
    return 0


def profile(args: Any, out: Path) -> int:
    """``lbsim profile``: measure this machine's figures and write them as overrides."""
    scenario = _load(args, None)
    options = options_from_args(args)
    n = _local_ranks(_check_profile(scenario, options, args.nproc))
    with staged_run(out) as stage:
        job = Job(scenario=str(Path(args.scenario).resolve()), overrides=tuple(args.set), options=options,
                  tasks=(Task("profile", str(stage)),))
        _launch(job, n, "profile", args.quiet)
        cal = json.loads((stage / "profile.json").read_text(encoding="utf-8"))
    if not args.quiet:
        print_calibration(cal)
        print(f"calibration in {out}/calibration.yaml (merged: {out}/scenario.calibrated.yaml)")
    return 0


def _check_profile(scenario: Any, options: Any, nproc: int | None) -> int:
    """Profiling runs no scheme: only the cluster and the options must suit the runtime. A scenario
    whose scheme uses a parameter server is profiled with the server's rank too (its costs are
    probed, :mod:`lbsim.runtime.ps_probe`). Returns the ranks to start."""
    from dataclasses import replace

    _no_sample_cost(scenario, "profile")
    workers = check_runnable(replace(scenario, scheme=scheme_configs()[BASELINE_SCHEME]()), options)
    ranks = world_size(workers, [scenario.scheme.kind])
    if nproc is not None and nproc != ranks:
        server = f" plus one for {scenario.scheme.kind}'s parameter server" if ranks > workers else ""
        raise InputError("--nproc", f"profiling this scenario takes {workers} workers{server}; give --nproc {ranks} or leave it out")
    return ranks


def _no_sample_cost(scenario: Any, command: str) -> None:
    """Profiling times the digits model, not the length-sensitive one ``lbsim train`` runs with sample costs."""
    if scenario.workload.sample_cost is not None:
        raise InputError("workload.sample_cost", f"lbsim {command} profiles the digits model, not the attention block "
                                                 "lbsim train runs with sample costs; remove the section, or compare "
                                                 "with benchmarks/bench_seqlen_runtime.py (docs/sample-cost.md)")


def validate(args: Any, out: Path, simulate_to: Callable[[Any, Path, str], dict[str, Any]]) -> int:
    """Profile, run every scheme in the runtime with the calibration, simulate the same, compare.

    Profiles bracket every run (before and after it, all in one set of processes): the runtime runs
    with the figures measured just before it, the simulator with both profiles pooled, so a machine
    whose speed drifts during the run (other tenants) is not counted as simulator error.
    """
    names = _scheme_list(args.schemes)
    options = options_from_args(args)
    n = 0
    for name in names:  # everything is checked before anything runs
        _no_sample_cost(_load(args, name), "validate")
        try:
            n = max(n, check_runnable(_load(args, name), options))
        except InputError as err:
            raise InputError(err.path, f"{err.message} (with scheme {name} from --schemes)") from None
    if args.nproc is not None and args.nproc != n:
        server = " (the workers plus a parameter server)" if any(uses_server(s) for s in names) else ""
        raise InputError("--nproc", f"validating {', '.join(names)} needs {n} processes{server}; give --nproc {n} or leave it out")
    _local_ranks(n)
    repeats = args.repeats
    if not 1 <= repeats <= MAX_REPEATS:
        raise InputError("--repeats", f"must be >= 1 and <= {MAX_REPEATS} (each repeat is a whole runtime run), got {repeats}")
    _warn_cores(n, options)
    with staged_run(out) as stage:  # the whole validation (profiles, runs, reports) is swapped in at the end
        reports, summary = _validate_into(stage.resolve(), args, names, options, n, simulate_to, repeats)
    if not args.quiet:
        title = f"{args.scenario}: simulator (calibrated) vs runtime, {n} ranks"
        if summary is None:
            print_validation(reports[0], title=title)
        else:
            print_repeats(summary, title=f"{title}, {repeats} repeats: median (min, max) of each error")
        print(f"results in {out}/validation.json")
    return 0


def _validate_into(out: Path, args: Any, names: list[str], options: Any, n: int,
                   simulate_to: Callable[[Any, Path, str], dict[str, Any]],
                   repeats: int) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Run the validation into ``out``; each repeat's reports, and their summary when ``repeats > 1``."""
    from .profile_fit import calibration, pool

    # one set of processes for every repeat, so one progress bar over all of them
    dirs = [out] if repeats == 1 else [out / f"repeat_{r + 1}" for r in range(repeats)]
    tasks = []
    for d in dirs:
        for name in names:  # each run bracketed by two profiles of its own (its scheme's sizing call included)
            tasks += [Task("profile", str(d / "profile" / name / "before"), scheme=name),
                      Task("train", str(d / "runtime" / name), scheme=name, calibrated=True),
                      Task("profile", str(d / "profile" / name / "after"), scheme=name)]
    job = Job(scenario=str(Path(args.scenario).resolve()), overrides=tuple(args.set), options=options, tasks=tuple(tasks))
    _launch(job, n, "validate (runtime)", args.quiet)
    reports = []
    for d in dirs:
        entries, calibrations = {}, {}
        for name in names:
            raws = [json.loads((d / "profile" / name / when / "profile.json").read_text(encoding="utf-8"))["measurements"]
                    for when in ("before", "after")]
            base = load_scenario(args.scenario, args.set, scheme=name)
            cal = calibration(base, resolve_workers(base), pool(*raws))
            write_json(d / "simulator" / name / "calibration.json", cal)
            scenario = load_scenario(args.scenario, [*args.set, *cal["sets"]], scheme=name)
            simulate_to(scenario, d / "simulator" / name, name)
            entries[name] = compare_runs(d / "runtime" / name, d / "simulator" / name)
            calibrations[name] = cal
        reports.append(validation_report(str(args.scenario), calibrations, entries))
        write_json(d / "validation.json", reports[-1])
    summary = None
    if repeats > 1:
        summary = repeat_summary(str(args.scenario), reports)
        write_json(out / "validation.json", summary)
    return reports, summary


def _scheme_list(text: str | None) -> list[str]:
    if text is None:
        return list(DEFAULT_VALIDATE_SCHEMES)
    names = [s.strip() for s in text.split(",") if s.strip()]
    if not names:
        raise InputError("--schemes", "give a comma-separated list of scheme names, e.g. bsp,lbbsp")
    if len(set(names)) != len(names):
        raise InputError("--schemes", f"a scheme is listed twice: {text}")
    return names


def print_calibration(cal: dict[str, Any]) -> None:
    """The profile's t(b) fit per scenario group, as a table."""
    from rich.table import Table

    table = Table(title=f"lbsim profile on {cal['host']}: t(b) = t0_s + b / samples_per_s per scenario group")
    for col in ("group", "workers", "batch sizes", "mean compute (s)", "t0_s", "samples/s", "jitter_cv"):
        table.add_column(col, justify="right")
    for g in cal["groups"]:
        table.add_row(str(g["group"]), ",".join(map(str, g["workers"])), ",".join(map(str, g["sizes"])),
                      ", ".join(f"{t:.4f}" for t in g["mean_compute_s"]), f"{g['t0_s']:.4g}", f"{g['samples_per_s']:.4g}",
                      f"{g['jitter_cv']:.3g}")
    console(table_width() or 160).print(table)
    net = cal["overrides"].get("network")
    if net:
        print(f"round overhead (mean comm_s) {cal['comm_s_mean']:.4g} s -> ring all-reduce alpha_s {net['alpha_s']:.4g}, "
              f"bandwidth_gbps {net['bandwidth_gbps']:.4g}")


def print_validation(report: dict[str, Any], *, title: str) -> None:
    """The validation's errors per scheme, as a table."""
    from rich.table import Table

    table = Table(title=title)
    table.add_column("scheme")
    for label, _ in TABLE:
        table.add_column(label, justify="right")
    for name, entry in report["schemes"].items():
        table.add_row(name, *(fmt(entry) for _, fmt in TABLE))
    console(table_width() or 200).print(table)


def print_repeats(summary: dict[str, Any], *, title: str) -> None:
    """The spread of the repeated runs per scheme, as a table."""
    from rich.table import Table

    table = Table(title=title)
    table.add_column("scheme")
    for m in REPEAT_METRICS:
        table.add_column(m, justify="right")
    for name, stats in summary["schemes"].items():
        table.add_row(name, *(_stat(stats.get(m)) for m in REPEAT_METRICS))
    console(table_width() or 200).print(table)
    print(summary["error_definition"])


def _stat(st: dict[str, Any] | None) -> str:
    if not st or st.get("median") is None:
        return "n/a"
    return f"{st['median']:+.1%} ({st['min']:+.1%}, {st['max']:+.1%})"


def run_failed(err: BaseException) -> int:
    """Say that the runtime failed, on one line; exit code 1."""
    print(f"lbsim: runtime failed: {' '.join(str(err).split())}", file=sys.stderr)
    return 1


def runtime_missing(err: ImportError) -> int:
    """Say what to install when torch or psutil is missing; exit code 1."""
    print(f"lbsim: the runtime needs torch and psutil ({err}); install with: python3 -m pip install -e \".[runtime]\"",
          file=sys.stderr)
    return 1


def handle(fn: Callable[..., int], *args: Any) -> int:
    """Run a runtime command; a failed rank is exit code 1 with the launcher's one-line diagnosis."""
    try:
        return fn(*args)
    except RuntimeFailure as err:
        return run_failed(err)
    except ModuleNotFoundError as err:
        if err.name in ("torch", "psutil"):
            return runtime_missing(err)
        raise


__all__: Sequence[str] = ("train", "profile", "validate", "handle", "profile_model")


def profile_model(args: Any, out: Path) -> int:
    """``lbsim profile-model SPEC``: one module's measured t(b) on this device, written to ``out``."""
    import torch

    from .profile_module import catalog_source, check_request, profile_module

    batches = _int_list(args.batches, "--batches")
    shape = _int_list(args.input_shape, "--input-shape")
    check_request(batches, args.warmup, args.reps, shape, args.classes)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device", "cuda: no CUDA GPU is visible here; use --device cpu")
    if args.amp is not None and args.amp not in ("bf16", "fp16"):
        raise InputError("--amp", f"valid: bf16, fp16, got {args.amp!r}")
    device = torch.device("cuda", 0) if args.device == "cuda" else torch.device("cpu")
    if args.device == "cpu":
        torch.set_num_threads(args.threads)
    with staged_run(out) as stage, LazyProgress(f"profile {args.model}", enabled=None if not args.quiet else False) as bar:
        prof = profile_module(args.model, input_shape=shape, classes=args.classes, batches=batches, device=device,
                              amp=args.amp, warmup=args.warmup, reps=args.reps,
                              progress=lambda done, total: bar.update(done / total))
        record = prof.as_dict()
        record["catalog_source"] = catalog_source(prof)
        record["sets"] = [f"cluster.groups.0.t0_s={prof.t0_s:.6g}", f"cluster.groups.0.samples_per_s={prof.samples_per_s:.6g}",
                          *([f"cluster.groups.0.max_batch={prof.max_batch}"] if prof.max_batch else []),
                          f"workload.gradient_bytes={prof.gradient_bytes}"]
        write_json(stage / "model_profile.json", record)
    if not args.quiet:
        print(f"{args.model} on {prof.environment.get('gpu') or prof.environment['device']}: "
              f"t(b) = {prof.t0_s:.6g} s + b / {prof.samples_per_s:.6g} samples/s "
              f"(R^2 {prof.r2:.4f}, largest residual {prof.max_rel_residual:.1%})"
              + (f", max_batch ~{prof.max_batch} (estimated from memory)" if prof.max_batch else ""))
        for s in prof.sizes:
            print(f"  b={s.batch:>6}  median {s.median_s * 1e3:9.3f} ms  p10 {s.p10_s * 1e3:9.3f}  p90 {s.p90_s * 1e3:9.3f}"
                  + (f"  peak {s.peak_bytes / 2**30:7.2f} GiB" if s.peak_bytes is not None else ""))
        print(f"results in {out}/model_profile.json")
    return 0


def _int_list(text: str, option: str) -> list[int]:
    try:
        return [int(v) for v in text.replace("x", ",").split(",") if v.strip()]
    except ValueError:
        raise InputError(option, f"expected comma-separated integers, got {text!r}") from None
