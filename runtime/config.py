"""What a runtime job needs besides the scenario, and the checks that it can run.

:class:`RuntimeOptions` holds the launcher's choices (backend, contention injection, threads,
model) — command-line flags, not scenario keys, because they describe *how* this machine runs the
scenario, not the cluster it describes. :func:`training_config` resolves the model and optimiser:
a flag wins, then the scenario's ``numerics`` section when the scenario has one, then the numerics
core's defaults (:mod:`lbsim.numerics`), so both engines train the same model on the same data.

:func:`check_runnable` turns everything the runtime cannot do into an :class:`InputError` before any
process is started (exit code 2 at the CLI).

This module imports neither torch nor the simulator.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from lbsim.errors import InputError
from lbsim.limits import MAX_HISTORY
from lbsim.numerics import lr_rule, models, optim
from lbsim.numerics.datasets import DEFAULT_DATASET
from lbsim.scenario.resolve import resolve_run
from lbsim.schemes.registry import scheme_class, scheme_names
from lbsim.workers import select_workers

RENDEZVOUS_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def launched_as_rank() -> bool:
    """Whether ``torchrun`` (or a user, for ``env://``) started this process as one rank of a job:
    the rendezvous variables are all set. ``lbsim train`` then runs as that rank, not as a launcher.
    (Here, not in :mod:`lbsim.runtime.dist`: the check must not cost the CLI a torch import.)"""
    return all(k in os.environ for k in RENDEZVOUS_ENV)


@dataclass(frozen=True)
class RuntimeLoop:
    """How the runtime runs a scheme driver (``driver`` is the only discriminator, lbsim.schemes.base)."""

    module: str  # the runtime module holding the loop
    function: str  # its entry point: function(info, comm, hb, hook, spec, model, data, cores) -> LoopResult
    server: bool  # ranks 0..n-1 are the workers; True: rank n is a parameter server

    def recorder(self, n_workers: int) -> int:
        """The rank that holds the scheme and writes the records: the server (rank n), or rank 0."""
        return n_workers if self.server else 0

    def runner(self) -> Callable[..., Any]:
        """The loop's entry point, imported on use: the loops import torch, this module must not."""
        return getattr(importlib.import_module(self.module), self.function)


DRIVER_LOOPS: dict[str, RuntimeLoop] = {
    "sync": RuntimeLoop("lbsim.runtime.loop", "run_loop", server=False),  # a barrier and a batch-weighted all-reduce per round
    "async": RuntimeLoop("lbsim.runtime.ps", "run_ps", server=True),  # a parameter server with a gate per worker iteration
    "wbsp": RuntimeLoop("lbsim.runtime.wbsp", "run_wbsp", server=True),  # local steps, rounds closed at the slowest's upload
}
"""The runtime's support, the one driver -> loop table: every registered scheme whose driver has a loop
here runs (``DRIVER_LOOPS[driver].runner()``, rank entry point :mod:`lbsim.runtime.worker`), and no other."""


def driver_of(scheme: str) -> str:
    """The driver of the registered scheme ``scheme`` (an InputError naming the valid ones if unknown)."""
    return str(scheme_class(scheme).driver)  # type: ignore[attr-defined]


def scheme_kind(scenario: Any) -> str:
    """The registered name of ``scenario``'s scheme."""
    return str(scenario.scheme.kind)


def supported_schemes() -> list[str]:
    """Registered schemes whose driver the runtime has a loop for."""
    return [s for s in scheme_names() if driver_of(s) in DRIVER_LOOPS]


MAX_THREADS = 1024  # torch threads per rank: more segfaults torch (tried: 100,000), far more than any core count


def uses_server(scheme: str) -> bool:
    """Does ``scheme`` run with a parameter-server rank (rank n, after the n workers)?"""
    loop = DRIVER_LOOPS.get(driver_of(scheme))
    return loop is not None and loop.server


def world_size(workers: int, schemes: Any) -> int:
    """Ranks a job running ``schemes`` (names) needs: the workers, plus the server if any scheme uses one."""
    return workers + (1 if any(uses_server(s) for s in schemes) else 0)


ContentionMode = Literal["emulated", "real"]
Backend = Literal["gloo", "nccl"]
Device = Literal["cpu", "cuda"]


@dataclass(frozen=True)
class RuntimeOptions:
    """How this machine runs a scenario (the ``lbsim train`` flags)."""

    backend: Backend = "gloo"
    device: Device | None = None  # where a rank computes; None: cuda with nccl, else cpu (gloo also runs on cuda)
    contention: ContentionMode = "emulated"
    threads: int = 1  # torch intra-op threads per rank (set_num_threads); interop threads are 1
    affinity: Literal["auto", "none", "core"] = "auto"  # auto: pin to cores only in real mode
    model: str | None = None  # softmax | mlp (None: the scenario's numerics section, else softmax)
    hidden: int | None = None  # MLP hidden units
    lr: float | None = None
    dtype: Literal["float32", "float64"] = "float32"
    timeout_s: float = 60.0  # a collective that waits longer names the rank that stopped

    def pin_cores(self) -> bool:
        """Whether each rank is pinned to its own cores."""
        return self.affinity == "core" or (self.affinity == "auto" and self.contention == "real")

    def compute_device(self) -> Device:
        """Where the ranks compute: ``device`` if given, else ``cuda`` with NCCL and ``cpu`` with gloo."""
        if self.device is not None:
            return self.device
        return "cuda" if self.backend == "nccl" else "cpu"


@dataclass(frozen=True)
class TrainingConfig:
    """The model and optimiser every rank builds (identical on all ranks)."""

    dataset: str = "digits"
    model: str = "softmax"
    hidden: int = 64
    activation: str = "relu"
    l2: float = 1e-4
    lr: float = 0.1
    momentum: float = 0.0
    lr_rule: str = "per_sample"  # lbsim.numerics.lr_rule: an update's step scales with its samples / global batch
    schedule: dict[str, Any] = field(default_factory=dict)  # LRSchedule arguments besides lr (empty: constant)


def _numerics_section(scenario: Any) -> Any:
    return getattr(scenario, "numerics", None)


def training_config(scenario: Any, options: RuntimeOptions) -> TrainingConfig:
    """Model/optimiser: flag > scenario ``numerics`` section > numerics-core defaults."""
    sec = _numerics_section(scenario)

    def pick(flag: Any, *names: str, default: Any) -> Any:
        if flag is not None:
            return flag
        for name in names:
            value = getattr(sec, name, None) if sec is not None else None
            if value is not None:
                return value
        return default

    model = pick(options.model, "model", default=models.DEFAULT_MODEL)
    if model not in models.MODELS:
        raise InputError("--model", f"unknown model {model!r}; valid: {', '.join(models.MODELS)}")
    hidden = int(pick(options.hidden, "hidden", default=models.DEFAULT_HIDDEN))
    if not 0 < hidden <= MAX_HISTORY:  # the same bound as numerics.hidden
        raise InputError("--hidden", f"must be > 0 and <= {MAX_HISTORY}, got {hidden}")
    lr = float(pick(options.lr, "lr", "learning_rate", default=optim.DEFAULT_LR))
    if lr <= 0:
        raise InputError("--lr", f"must be > 0, got {lr}")
    schedule: dict[str, Any] = {}
    kind = pick(None, "schedule", default=optim.DEFAULT_SCHEDULE)
    if kind != optim.DEFAULT_SCHEDULE:
        schedule = {"kind": kind, "milestones": tuple(pick(None, "milestones", default=())),
                    "gamma": float(pick(None, "gamma", default=0.1))}
    return TrainingConfig(
        dataset=str(pick(None, "dataset", default=DEFAULT_DATASET)),
        model=model,
        hidden=hidden,
        activation=str(pick(None, "activation", default=models.DEFAULT_ACTIVATION)),
        l2=float(pick(None, "l2", default=models.DEFAULT_L2)),
        lr=lr,
        momentum=float(pick(None, "momentum", default=optim.DEFAULT_MOMENTUM)),
        lr_rule=str(pick(None, "lr_rule", default=lr_rule.DEFAULT_LR_RULE)),
        schedule=schedule,
    )


def check_runnable(scenario: Any, options: RuntimeOptions, *, nproc: int | None = None) -> int:
    """Every reason the runtime cannot run ``scenario`` as an InputError; returns the ranks it needs
    (one per worker, plus the parameter server's for the schemes that use one)."""
    name = scenario.scheme.kind
    if driver_of(name) not in DRIVER_LOOPS:
        raise InputError(
            "scheme.name",
            f"scheme {name!r} is not supported by the runtime; supported: {', '.join(supported_schemes())}",
        )
    if getattr(scenario.scheme, "backup_workers", 0):
        raise InputError("scheme.backup_workers", "the runtime's all-reduce BSP has no backup workers; set it to 0")
    if scenario.workload.sample_cost is not None and (driver_of(name) != "sync" or getattr(scenario, "data", None)):
        raise InputError("workload.sample_cost", "the runtime trains samples of different lengths (its attention "
                                                 "block, runtime/tokens.py) in the synchronous loop only, without a "
                                                 f"data: section; scheme {name!r} / data: remove one or the other")
    if scenario.workload.sample_cost is not None and scenario.workload.sample_cost.gradient_mean != "per_sample":
        raise InputError("workload.sample_cost.gradient_mean", "lbsim train records per-sample weights; valid here: "
                                                               "per_sample (per_token: the DDP library, LoadBalancer)")
    # data: (placement checked by the loader) and numerics.byzantine run in the synchronous loop
    # (runtime/loft.py) for every scheme; with bsp/static/lbbsp's batch-weighted mean nothing
    # defends against a Byzantine rank, which is what such a run shows.
    byzantine = getattr(getattr(scenario, "numerics", None), "byzantine", None)
    if byzantine is not None:
        select_workers(byzantine.workers, resolve_run(scenario).workers, "numerics.byzantine.workers")
    if options.contention == "real" and getattr(scenario.scheme, "predictor", None) == "oracle":
        raise InputError("scheme.predictor", "oracle needs the future slowdown, which the runtime knows only with --contention emulated")
    if not 1 <= options.threads <= MAX_THREADS:
        raise InputError("--threads", f"must be >= 1 and <= {MAX_THREADS}, got {options.threads}")
    if options.timeout_s <= 0:
        raise InputError("--timeout-s", f"must be > 0, got {options.timeout_s}")
    n = resolve_run(scenario).n
    ranks = world_size(n, [name])
    if nproc is not None and nproc != ranks:
        server = f" plus one for {name}'s parameter server" if ranks > n else ""
        raise InputError(
            "--nproc",
            f"the scenario has {n} workers and the runtime runs one process per worker{server}; "
            f"give --nproc {ranks} or change the cluster (e.g. --set cluster.groups.0.count=...)",
        )
    if ranks > n and getattr(scenario, "data", None) is not None:
        raise InputError("data", f"the runtime's parameter-server mode ({name}) does not emulate data placement; "
                                 "remove the data: section (the synchronous schemes emulate it)")
    if ranks > n and getattr(getattr(scenario, "numerics", None), "byzantine", None) is not None:
        raise InputError("numerics.byzantine", f"the runtime's parameter-server mode ({name}) does not inject "
                                               "Byzantine gradients; remove it (or use the simulator)")
    if options.backend == "nccl" and ranks > n:
        raise InputError("--backend", f"{name} runs with a parameter server, which the runtime runs on gloo only; use --backend gloo")
    if options.backend == "nccl" and options.device == "cpu":
        raise InputError("--device", "nccl runs on GPUs only; use --backend gloo for --device cpu")
    if options.compute_device() == "cuda" and ranks > n:
        raise InputError("--device", f"{name} runs with a parameter server, which the runtime runs on the CPU only; use --device cpu")
    if options.backend == "nccl":
        gpus = _cuda_devices()
        if gpus < n:
            raise InputError("--backend", f"nccl needs one GPU per rank: {n} ranks, {gpus} GPU(s) here; use gloo")
    elif options.compute_device() == "cuda" and _cuda_devices() < 1:
        raise InputError("--device", "cuda: no CUDA GPU is visible here; use --device cpu")
    training_config(scenario, options)
    return ranks


def _cuda_devices() -> int:
    try:
        import torch
    except ImportError:  # pragma: no cover - the runtime extra is not installed
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def cpu_cores() -> list[int]:
    """The cores this process may run on."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return list(range(os.cpu_count() or 1))
