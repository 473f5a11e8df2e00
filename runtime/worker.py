"""The per-rank entry point: set up the rank, run the job's tasks, report a failure.

A :class:`Job` is a scenario (path and ``--set`` overrides), the runtime options and a list of
tasks run in order inside one process group: ``train`` (one scheme, records in its ``out``) and
``profile`` (calibration in its ``out``; later tasks with ``calibrated=True`` run the scenario with
the measured figures — what ``lbsim validate`` does). Every rank loads the scenario itself, so
nothing but the job description crosses process boundaries.

Two ways in:

* ``lbsim train`` / ``profile`` / ``validate`` start one process per worker on this machine
  (:mod:`lbsim.runtime.launch`; each runs :func:`lbsim.runtime.rank_start.rank_entry`, then :func:`spawn_entry`);
* ``torchrun ... -m lbsim.runtime.worker SCENARIO [lbsim train options]`` runs :func:`main` in every
  rank it starts; the rendezvous comes from the environment (``env://``) and ``LOCAL_RANK`` picks
  the rank's core(s) or GPU.

Imports: at module level only what loads without torch (the core, the runtime's torch-free
modules), because :mod:`lbsim.runtime.commands` imports this module on ``lbsim train`` before it
knows torch is installed; torch and the modules that need it are imported by the function that
runs on a rank.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from lbsim.arguments import train_parser
from lbsim.errors import InputError
from lbsim.metrics.run_end import RunEnd
from lbsim.metrics.summary import summarize
from lbsim.metrics.writers import write_csv
from lbsim.output import write_run, write_scenario
from lbsim.run_folder import choose_out, staged_run
from lbsim.scenario.loader import load_scenario
from lbsim.scenario.resolve import resolve_run
from lbsim.schemes.base import DecisionLog, is_synchronous
from lbsim.tables import print_summary_table

from .config import DRIVER_LOOPS, RuntimeOptions, check_runnable, cpu_cores, driver_of, scheme_kind, training_config, uses_server
from .lifeline import die_with_parent
from .records import OBSERVATION_COLUMNS, salvage


@dataclass(frozen=True)
class Task:
    """One thing the ranks do in a job: train or profile, into ``out``, with its scheme and overrides."""

    kind: Literal["train", "profile"]
    out: str
    scheme: str | None = None  # switch to this scheme (None: the scenario's)
    calibrated: bool = False  # use the figures of the job's profile task
    overrides: tuple[str, ...] = ()  # this task's own --set overrides, after the job's


@dataclass(frozen=True)
class Job:
    """What every rank is launched with: the scenario, its overrides, the runtime options and the tasks."""

    scenario: str  # absolute path
    overrides: tuple[str, ...] = ()
    options: RuntimeOptions = field(default_factory=RuntimeOptions)
    tasks: tuple[Task, ...] = ()


def _setup_threads(options: RuntimeOptions) -> None:
    import torch

    torch.set_num_threads(options.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set (a second job in this process)
        pass


def run_job(info: Any, job: Job, heartbeat: Any, status: Path | None) -> None:
    """Run every task of ``job`` on this rank (the process group is up)."""
    import torch

    from .dist import Comm, FailureHook
    from .model import FlatModel, load_data
    from .resources import pin_to_cores

    _setup_threads(job.options)
    cores = None
    if job.options.pin_cores() and info.device.type == "cpu":
        cores = pin_to_cores(info.local_rank, job.options.threads, cpu_cores())
    comm = Comm(info)
    n = resolve_run(load_scenario(job.scenario, list(job.overrides))).n
    workers_comm: Comm | None = comm
    if info.world > n:  # a parameter-server job: rank n is the server; synchronous tasks run on ranks 0..n-1
        import torch.distributed as dist

        group = dist.new_group(list(range(n)))  # every rank must take part in creating it
        workers_comm = Comm(replace(info, world=n), group) if info.rank < n else None
    hook = FailureHook(info.rank)
    calibration_sets: list[str] = []
    current: dict[str, Any] = {"task": None}
    try:
        for task in job.tasks:
            current["task"] = task
            overrides = [*job.overrides, *(calibration_sets if task.calibrated else []), *task.overrides]
            scenario = load_scenario(job.scenario, overrides, scheme=task.scheme)
            workers = resolve_run(scenario).workers  # resolved once, by the loader's checks
            training = training_config(scenario, job.options)
            data = load_data(training, dtype=getattr(torch, job.options.dtype), device=info.device)
            model: Any = FlatModel(training, data.n_features, data.n_classes)
            if scenario.workload.sample_cost is not None and task.kind != "profile":  # lengths: the attention block
                from .tokens import TokenModel

                model = TokenModel(per_token=False)
            if task.kind == "profile":
                sets, probe = None, None
                if info.world > n:  # the parameter server's costs, all ranks (rank 0 gets them)
                    from .ps_probe import ps_probe

                    w0 = model.initial(scenario.seed, dtype=getattr(torch, job.options.dtype), device=info.device)
                    b = max(1, scenario.workload.global_batch // n)
                    busy = functools.partial(model.loss_and_grad, w0, data.X_train[:b], data.y_train[:b])  # one step
                    probe = ps_probe(info, comm, n, model.n_params, getattr(torch, job.options.dtype), busy)
                if workers_comm is not None:
                    sets = _profile(workers_comm.info, workers_comm, heartbeat, hook, job, task, scenario, workers,
                                    training, model, data, cores, probe)
                calibration_sets = comm.broadcast_object(sets, "broadcast of the calibration")
            elif uses_server(scheme_kind(scenario)):
                _train(info, comm, heartbeat, hook, job, task, scenario, workers, training, model, data, cores, overrides)
            elif workers_comm is not None:
                _train(workers_comm.info, workers_comm, heartbeat, hook, job, task, scenario, workers, training, model,
                       data, cores, overrides)
    except BaseException as err:
        _report(info.rank, err, heartbeat, current["task"], status)
        raise


def _loop_spec(job: Job, task: Task, scenario: Any, workers: Any, training: Any, overrides: list[str]) -> Any:
    from .driver import LoopSpec

    run = resolve_run(scenario)  # the workers passed in are these (run_job takes them from it)
    return LoopSpec(
        scenario=scenario, workers=workers, training=training, options=job.options,
        scheme_factory=run.scheme,  # a fresh scheme per run, from the scenario resolved once
        run_end=RunEnd.of(scenario.workload), inject=True,
        out=Path(task.out) if task.kind == "train" else None, scenario_path=job.scenario, overrides=tuple(overrides),
    )


def _profile(info: Any, comm: Any, hb: Any, hook: Any, job: Job, task: Task, scenario: Any, workers: Any,
             training: Any, model: Any, data: Any, cores: Any, probe: dict[str, Any] | None = None) -> list[str] | None:
    from .profile import run_profile, write_calibration

    base = _loop_spec(job, task, scenario, workers, training, list(job.overrides))
    cal = run_profile(info, comm, hb, hook, base, model, data, cores, probe)
    if cal is None:
        return None
    write_calibration(Path(task.out), cal, job.scenario, list(job.overrides))
    return list(cal["sets"])


def _train(info: Any, comm: Any, hb: Any, hook: Any, job: Job, task: Task, scenario: Any, workers: Any,
           training: Any, model: Any, data: Any, cores: Any, overrides: list[str]) -> None:
    out = Path(task.out)
    driver = driver_of(scheme_kind(scenario))
    loop = DRIVER_LOOPS[driver]
    ps = loop.server
    recorder = loop.recorder(len(workers))
    if info.rank == recorder:
        write_scenario(out, scenario)
        for stale in ("summary.json", "failure.json", "model.pt"):
            (out / stale).unlink(missing_ok=True)
    spec = _loop_spec(job, task, scenario, workers, training, overrides)
    try:
        res = loop.runner()(info, comm, hb, hook, spec, model, data, cores)
    except BaseException as err:
        if info.rank == recorder:
            from .dist import CollectiveError

            peer = isinstance(err, CollectiveError)  # another rank failed; the launcher (or torchrun) names it
            salvage(out, {"error": f"{type(err).__name__}: {' '.join(str(err).split())}",
                          "rank": None if peer else recorder, "reported_by_rank": recorder,
                          "note": "records up to the last complete round"})
        raise
    if info.rank != recorder:
        return
    log, scheme = res.log, res.scheme
    assert log is not None
    loss, acc = model.evaluate(res.w, data.X_test, data.y_test)
    extra: dict[str, Any] = dict(scheme.diagnostics())
    extra.update(final_loss=float(f"{loss:.12g}"), final_accuracy=float(f"{acc:.12g}"))
    extra["runtime"] = {
        "backend": info.backend, "device": str(info.device), "world_size": info.world, "contention": job.options.contention,
        "threads_per_rank": job.options.threads, "pinned_cores": cores is not None,
        "dataset": training.dataset if not hasattr(model, "per_token") else "synthetic tokens (workload.sample_cost)",
        "model": training.model if not hasattr(model, "per_token") else "attention block (runtime/tokens.py)", "hidden": training.hidden if training.model == "mlp" else None,
        "parameters": model.n_params, "dtype": job.options.dtype, "lr": training.lr,
        "replicas_identical": None if ps else res.replicas_identical, "decision_s_mean": float(f"{res.decision_s:.6g}"),
        "parameter_server_rank": recorder if ps else None, "notes": res.notes,
    }
    summary = summarize(log.iterations, log.updates, scheme=scheme.name, seed=scenario.seed, engine="runtime",
                        workers=len(workers), end_s=res.end_s, synchronous=is_synchronous(scheme), extra=extra)

    log.discard_partials()
    write_csv(out / "observations.csv", OBSERVATION_COLUMNS, log.observations)

    decisions = scheme.decision_rows() if isinstance(scheme, DecisionLog) else ()
    write_run(out, log.iterations, log.updates, summary, decisions=list(decisions))
    import torch

    torch.save({"w": res.w.detach().cpu(), "model": training.model, "hidden": training.hidden}, out / "model.pt")


def _report(rank: int, err: BaseException, hb: Any, task: Task | None, status: Path | None) -> None:
    """Write this rank's failure report for the launcher (spawn mode) or print it (torchrun)."""
    from .dist import CollectiveError

    kind = "collective" if isinstance(err, CollectiveError) else "error"
    report = {
        "rank": rank, "kind": kind, "type": type(err).__name__, "message": " ".join(str(err).split())[:500],
        "round": getattr(hb, "round", None), "task": task.kind if task else None, "out": task.out if task else None,
        "time": time.time(), "traceback": traceback.format_exc()[-4000:],
    }
    if status is not None:
        tmp = status / f".rank{rank}.json.tmp"
        tmp.write_text(json.dumps(report), encoding="utf-8")
        os.replace(tmp, status / f"rank{rank}.json")
    else:
        print(f"lbsim runtime: rank {rank} failed ({kind}) in round {report['round']}: {report['type']}: {report['message']}",
              file=sys.stderr)


def spawn_entry(rank: int, world: int, job: Job, shared: Any, status: str) -> None:
    """One rank of the launcher's (:func:`lbsim.runtime.rank_start.rank_entry` set it up); the ranks
    meet through a file in ``status``."""
    from .dist import Heartbeat, init_group

    hb = Heartbeat(shared, rank)
    status_dir = Path(status)
    try:
        info = init_group(rank=rank, world=world, local_rank=rank, init_method=(status_dir / "rendezvous").as_uri(),
                          backend=job.options.backend, timeout_s=job.options.timeout_s, device=job.options.compute_device())
    except BaseException as err:
        _report(rank, err, hb, None, status_dir)
        sys.exit(1)
    try:
        run_job(info, job, hb, status_dir)
    except BaseException:
        if os.environ.get("LBSIM_DEBUG"):
            traceback.print_exc()
        os._exit(1)  # the report is written; skip the process group's teardown (peers may be gone)
    import torch.distributed as dist

    dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    """``torchrun [--nnodes ...] --nproc-per-node N -m lbsim.runtime.worker SCENARIO [lbsim train options]``."""
    import datetime

    import torch.distributed as dist
    from torch.distributed.elastic.multiprocessing.errors import record

    from .dist import Heartbeat, RankInfo, env_rank, rank_device

    die_with_parent()  # a dead torchrun agent takes its ranks along
    args = train_parser("torchrun -m lbsim.runtime.worker").parse_args(sys.argv[1:] if argv is None else argv)
    options = options_from_args(args)
    env = env_rank()
    try:
        scenario = load_scenario(args.scenario, args.set, scheme=args.scheme)
        check_runnable(scenario, options, nproc=env["world"])
    except InputError as err:
        if env["rank"] == 0:
            print(f"lbsim: error: {err}", file=sys.stderr)
        return 2

    choice = choose_out(args.out, default_out(args.scenario, scheme_kind(scenario)), replace=args.replace)
    out = choice.path.resolve()
    recorder = DRIVER_LOOPS[driver_of(scheme_kind(scenario))].recorder(resolve_run(scenario).n)

    def job_into(folder: Path) -> Job:
        return Job(scenario=str(Path(args.scenario).resolve()), overrides=tuple(args.set), options=options,
                   tasks=(Task("train", str(folder), scheme=args.scheme),))

    @record
    def _run(job: Job) -> None:
        device = rank_device(options.compute_device(), env["local_rank"])
        dist.init_process_group(options.backend, init_method="env://", rank=env["rank"], world_size=env["world"],
                                timeout=datetime.timedelta(seconds=options.timeout_s))
        info = RankInfo(env["rank"], env["world"], env["local_rank"], options.backend, device)
        run_job(info, job, Heartbeat(None, env["rank"]), None)
        dist.destroy_process_group()

    if env["rank"] != recorder:  # only the recorder writes (into its staged folder)
        _run(job_into(out))
    else:
        try:  # the run is written into a staged sibling and swapped in whole, as `lbsim train` does; a failed
            # run's records (failure.json, rows up to the last complete round) are kept, as there
            with staged_run(out, keep_on=(Exception,)) as stage:
                _run(job_into(stage))
        except InputError as err:  # --out cannot be written: before any rank started training
            print(f"lbsim: error: {err}", file=sys.stderr)
            return 2
    if env["rank"] == recorder:  # the rank that wrote the run shows it, as `lbsim train` does
        if not args.quiet:
            _print_summary(out, scenario, env["world"], options)
        if choice.note and (not choice.replaces or not args.quiet):
            print(f"lbsim: {choice.note}", file=sys.stderr)
    return 0


def _print_summary(out: Path, scenario: Any, world: int, options: RuntimeOptions) -> None:
    try:
        summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):  # a failed run: failure.json says why
        print(f"results in {out}/")
        return
    print_summary_table([summary], f"{scenario.name or 'run'} — runtime under torchrun, {world} ranks "
                                   f"({options.backend}, {options.contention} contention)")
    print(f"results in {out}/")


def default_out(scenario: str, leaf: str) -> Path:
    """``runs/<scenario name>/runtime/<leaf>``."""
    return Path("runs") / Path(scenario).name.split(".")[0] / "runtime" / leaf


def options_from_args(args: Any) -> RuntimeOptions:
    """The :class:`RuntimeOptions` of parsed ``lbsim train``-style arguments."""
    opts = RuntimeOptions()
    fields = {"backend": "backend", "device": "device", "contention": "contention", "threads": "threads", "affinity": "affinity",
              "model": "model", "hidden": "hidden", "lr": "lr", "dtype": "dtype", "timeout_s": "timeout_s"}
    values = {k: getattr(args, a) for k, a in fields.items() if getattr(args, a, None) is not None}
    return replace(opts, **values)


if __name__ == "__main__":  # pragma: no cover - torchrun entry
    sys.exit(main())
