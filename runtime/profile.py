"""``lbsim profile``: measure this machine's t(b) per worker and the all-reduce cost, as overrides.

Procedure (all ranks at once, as they will run, with the scenario's contention *off*: the
simulator applies the slowdown schedule on top of the calibrated figures):

1. Run the real training loop (:mod:`lbsim.runtime.loop`) with every rank at the same batch size, cycling
   round by round through ``b`` in ``{0.5, 0.75, 1, 1.25} x X/n`` (clamped to every worker's cap;
   cycling, so that a change of the machine's load hits every size alike) for ``ROUNDS`` cycles after
   ``WARMUP`` dropped ones. For each scenario group (workers the scenario says are identical), the
   mean compute time per size over its workers and rounds (10 % trimmed at each end) gives the
   group's affine fit
   ``t(b) = t0_s + b / samples_per_s`` — a mean, because the simulator's jitter has mean 1 — (least
   squares; through the origin if the fit would make
   ``t0_s < 0`` or the slope non-positive), and the round-to-round spread of each worker's times its
   ``jitter_cv`` (the simulator's lognormal per-iteration noise, from successive differences:
   ``sigma^2 = mean((log t_k - log t_{k-1})^2) / 2``, ``cv = sqrt(exp(sigma^2) - 1)``, so slow drift
   is not counted) — it matters because a barrier waits for the slowest of n noisy workers. Pooling
   a group's workers keeps one noisy rank from becoming a "slow worker" in the simulator;
   per-worker means are still reported.
2. The round's communication (``comm_s`` of the records: the all-gather barrier, the scenario
   scheme's sizing call — made every round and ignored —, the gradient all-reduce and the step, as
   seen by the last rank to arrive) at the real gradient
   size ``S``, trimmed mean over the measured rounds: ``T(S)``.
3. A back-to-back all-reduce probe at ``S`` and at a large size gives the bandwidth ``B`` from the
   slope of the ring model ``T = 2 (n-1) alpha + 2 (n-1)/n * S / B``; then ``alpha`` is solved from
   ``T(S)``, so the simulator's ring time equals the runtime's measured round overhead.

Output (rank 0, in ``--out``): ``calibration.yaml`` — ``cluster.groups`` (each group with its
measured ``t0_s``/``samples_per_s``/``jitter_cv``, everything else as in the scenario),
``network: {name: ring_allreduce, alpha_s, bandwidth_gbps}`` and ``workload.gradient_bytes``;
``profile.json`` — every measurement, the fits and the same overrides as ``--set`` strings
(``sets``, e.g. ``cluster.groups.0.samples_per_s=5321``); ``scenario.calibrated.yaml`` — the
scenario with the overrides applied, runnable with ``lbsim run``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, ClassVar

import torch
import yaml

from lbsim.metrics.run_end import RunEnd
from lbsim.metrics.writers import atomic_write_text, write_json
from lbsim.scenario.loader import dump_scenario, load_scenario

from .dist import Comm, FailureHook, Heartbeat, RankInfo
from .driver import LoopSpec
from .loop import run_loop
from .profile_fit import calibration, profile_sizes

ROUNDS = 8  # measured rounds per size
WARMUP = 1  # cycles dropped at the start
PROBE_REPS = 12
PROBE_BYTES = 8 * 2**20


class CyclingBatches:
    """A stand-in scheme for profiling: every rank at ``sizes[k % len(sizes)]`` in round k (not registered).

    ``inner`` (the scenario's synchronous scheme) is asked for its decision every round and ignored,
    so the measured round overhead includes the cost of that scheme's sizing call.
    """

    name: ClassVar[str] = "profile"
    driver: ClassVar[str] = "sync"

    def __init__(self, sizes: list[int], workers: int, inner: Any = None) -> None:
        self.sizes = sizes
        self.inner = inner if callable(getattr(inner, "next_batches", None)) else None
        self.n = workers
        self.required_gradients = workers
        self.round = 0

    def initial_batches(self) -> tuple[int, ...]:
        """Every rank at the first size."""
        return (self.sizes[0],) * self.n

    def next_batches(self, observation: Any) -> tuple[int, ...]:
        """The next size for every rank (the inner scheme asked and ignored)."""
        if self.inner is not None:
            self.inner.next_batches(observation)
        self.round += 1
        return (self.sizes[self.round % len(self.sizes)],) * self.n

    def diagnostics(self) -> dict[str, object]:
        """None: the profile reports its own figures."""
        return {}


def _scheme_or_none(base: LoopSpec) -> Any:
    try:
        return base.scheme_factory()
    except Exception:  # noqa: BLE001 - a scheme the runtime cannot run: measure without its call
        return None


def _probe(comm: Comm, info: RankInfo, numel: int, dtype: torch.dtype) -> float:
    """Seconds per back-to-back all-reduce of ``numel`` elements (this rank's clock)."""
    buf = torch.zeros(max(1, numel), dtype=dtype, device=info.device)
    comm.all_reduce(buf, "all_reduce probe", -1)
    comm.barrier("probe barrier")
    t = time.monotonic()
    for _ in range(PROBE_REPS):
        comm.all_reduce(buf, "all_reduce probe", -1)
    if info.device.type == "cuda":
        torch.cuda.synchronize(info.device)
    return (time.monotonic() - t) / PROBE_REPS


def run_profile(info: RankInfo, comm: Comm, hb: Heartbeat, hook: FailureHook, base: LoopSpec, model: Any,
                data: Any, cores: list[int] | None, ps_probe: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """Profile on every rank; rank 0 returns the calibration (None elsewhere).

    ``ps_probe``: the parameter server's measured costs (:mod:`lbsim.runtime.ps_probe`, rank 0), kept
    with the measurements; a scenario whose scheme uses a server is calibrated with them.
    """
    n = info.world
    sizes = profile_sizes(base.scenario.workload.global_batch, [w.max_batch for w in base.workers])
    spec = LoopSpec(
        scenario=base.scenario, workers=base.workers, training=base.training, options=base.options,
        scheme_factory=lambda: CyclingBatches(sizes, n, _scheme_or_none(base)), run_end=RunEnd(update_target=(ROUNDS + WARMUP) * len(sizes)),
        inject=False, out=None,
    )
    res = run_loop(info, comm, hb, hook, spec, model, data, cores)
    compute: dict[int, list[list[float]]] = {}
    comm_s: list[float] = []
    if res.log is not None:
        kept = [r for r in res.log.iterations if r.iteration >= WARMUP * len(sizes)]
        for b in sizes:
            compute[b] = [[r.compute_s for r in kept if r.worker == i and r.batch == b] for i in range(n)]
        comm_s = [r.comm_s for r in kept if r.worker == 0]
    dtype = getattr(torch, base.options.dtype)
    elem = torch.tensor([], dtype=dtype).element_size()
    small_s = _probe(comm, info, model.n_params + 2 * n + 1, dtype)
    big_numel = max(PROBE_BYTES // elem, 16 * model.n_params)
    big_s = _probe(comm, info, big_numel, dtype)
    if info.rank != 0:
        return None
    raw = {
        "sizes": sizes, "compute_s": {str(b): compute[b] for b in sizes}, "comm_s": comm_s,
        "probe": {"small_bytes": (model.n_params + 2 * n + 1) * elem, "small_s": small_s, "big_bytes": big_numel * elem, "big_s": big_s},
        "gradient_bytes": model.n_params * elem,
    }
    if ps_probe is not None:
        raw["ps_probe"] = ps_probe
    return calibration(base.scenario, base.workers, raw)


def write_calibration(out: Path, cal: dict[str, Any], scenario_path: str, overrides: list[str]) -> None:
    """``calibration.yaml``, ``profile.json`` and ``scenario.calibrated.yaml`` in ``out``."""
    header = (f"# lbsim profile on {cal['host']}: per-group t(b), jitter and ring all-reduce figures measured by the runtime.\n"
              "# Merge into a scenario, or pass the `sets` of profile.json as --set KEY=VALUE.\n")
    atomic_write_text(out / "calibration.yaml", header + yaml.safe_dump(cal["overrides"], sort_keys=False, width=10**6))
    write_json(out / "profile.json", cal)
    calibrated = load_scenario(scenario_path, [*overrides, *cal["sets"]])
    atomic_write_text(out / "scenario.calibrated.yaml", dump_scenario(calibrated))
