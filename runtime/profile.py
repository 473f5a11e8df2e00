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

import math
import platform
import time
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
import yaml

from lbsim.metrics.run_end import RunEnd
from lbsim.metrics.writers import atomic_write_text, write_json
from lbsim.scenario.loader import dump_scenario, load_scenario, scenario_data

from .config import uses_server
from .dist import Comm, FailureHook, Heartbeat, RankInfo
from .driver import LoopSpec
from .loop import run_loop
from .ps_probe import ps_network

FACTORS = (0.5, 0.75, 1.0, 1.25)
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


def profile_sizes(global_batch: int, caps: list[int]) -> list[int]:
    """The per-rank batches profiled: the even share ``B / n`` times each of :data:`FACTORS`, within the
    smallest cap, distinct and sorted."""
    n, cap = len(caps), min(caps)
    return sorted({max(1, min(cap, round(global_batch / n * f))) for f in FACTORS})


def fit_affine(sizes: list[int], times: list[float]) -> tuple[float, float]:
    """``(t0_s, samples_per_s)`` of ``t = t0 + b / v`` by least squares; through the origin if needed."""
    b, t = np.asarray(sizes, dtype=float), np.asarray(times, dtype=float)
    if len(b) >= 2 and np.ptp(b) > 0:
        slope, t0 = np.polyfit(b, t, 1)
        if slope > 0 and t0 >= 0:
            return float(t0), float(1.0 / slope)
    slope = float((b @ t) / (b @ b))
    return 0.0, float(1.0 / slope)


def trimmed_mean(xs: list[float], cut: float = 0.1) -> float:
    """Mean without the ``cut`` share of smallest and largest values (a one-off hiccup is not a speed)."""
    v = sorted(xs)
    k = int(len(v) * cut)
    return float(np.mean(v[k:len(v) - k] if len(v) > 2 * k else v))


def jitter_cv(series: list[list[float]]) -> float:
    """CV of the lognormal per-iteration noise in consecutive step times (one list per worker and size).

    From successive differences, ``sigma^2 = mean((log t_k - log t_{k-1})^2) / 2``, so a slow drift
    of the machine's speed (another tenant starting) is not mistaken for per-iteration noise.
    """
    diffs = [math.log(b / a) for ts in series for a, b in zip(ts, ts[1:], strict=False) if a > 0 and b > 0]
    if not diffs:
        return 0.0
    sigma2 = float(np.mean(np.square(diffs))) / 2
    return float(math.sqrt(math.expm1(sigma2)))


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


def pool(*raws: dict[str, Any]) -> dict[str, Any]:
    """The measurements of several profiles of the same scenario as one (samples joined, probes averaged)."""
    first = raws[0]
    sizes = first["sizes"]
    if any(r["sizes"] != sizes for r in raws):
        raise ValueError("profiles with different batch sizes cannot be pooled")
    n = len(first["compute_s"][str(sizes[0])])
    return {
        "sizes": sizes,
        "compute_s": {str(b): [[t for r in raws for t in r["compute_s"][str(b)][i]] for i in range(n)] for b in sizes},
        "comm_s": [t for r in raws for t in r["comm_s"]],
        "probe": _mean_probe(raws, "probe"),
        "gradient_bytes": first["gradient_bytes"],
        "pooled": len(raws),
        **({"ps_probe": _mean_probe(raws, "ps_probe", skip=("workers_rtt_s",))} if all("ps_probe" in r for r in raws) else {}),
    }


def _mean_probe(raws: tuple[dict[str, Any], ...], name: str, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """Probe ``name`` of several profiles as one: times (``*_s``) averaged, sizes from the first."""
    first = raws[0][name]
    return {k: (float(np.mean([r[name][k] for r in raws])) if k.endswith("_s") else first[k]) for k in first if k not in skip}


def calibration(scenario: Any, workers_spec: tuple[Any, ...], raw: dict[str, Any]) -> dict[str, Any]:
    """Fits and overrides from a profile's measurements ``raw`` (pure)."""
    sizes = [int(b) for b in raw["sizes"]]
    compute = {b: raw["compute_s"][str(b)] for b in sizes}
    comm_s = raw["comm_s"]
    probe = raw["probe"]
    small_s, big_s, small_bytes, big_bytes = probe["small_s"], probe["big_s"], probe["small_bytes"], probe["big_bytes"]
    grad_bytes = raw["gradient_bytes"]
    n = len(workers_spec)
    groups_data = scenario_data(scenario)["cluster"]["groups"]
    workers = [{"worker": i, "group": spec.group, "mean_compute_s": [_sig(trimmed_mean(compute[b][i])) for b in sizes]}
               for i, spec in enumerate(workers_spec)]
    groups, fits, sets = [], [], []
    for g, gdata in enumerate(groups_data):
        members = [i for i, spec in enumerate(workers_spec) if spec.group == g]
        samples = {b: [t for i in members for t in compute[b][i]] for b in sizes}
        means = [trimmed_mean(samples[b]) for b in sizes]
        t0, v = fit_affine(sizes, means)
        cv = jitter_cv([compute[b][i] for b in sizes for i in members])
        fit = {"t0_s": _sig(t0), "samples_per_s": _sig(v), "jitter_cv": _sig(cv)}
        fits.append({"group": g, "workers": members, "sizes": sizes, "mean_compute_s": [_sig(m) for m in means], **fit})
        groups.append({**{k: val for k, val in gdata.items() if val is not None}, **fit})
        sets += [f"cluster.groups.{g}.{k}={val}" for k, val in fit.items()]
    comm_mean = trimmed_mean(comm_s) if comm_s else 0.0
    ring = 2 * (n - 1) / n if n > 1 else 0.0
    overrides: dict[str, Any] = {"cluster": {"groups": groups}, "workload": {"gradient_bytes": grad_bytes}}
    sets.append(f"workload.gradient_bytes={grad_bytes}")
    network = None
    if raw.get("ps_probe") is not None and uses_server(scenario.scheme.kind):
        # the parameter server's measured costs; every worker's own link at the same bandwidth, so
        # a push or pull costs S / B + L in the simulator, as in the probe
        network = {k: (_sig(v) if isinstance(v, float) else v) for k, v in ps_network(raw["ps_probe"]).items()}
        overrides["network"] = network
        for g, group in enumerate(groups):
            group["bandwidth_gbps"] = network["server_bandwidth_gbps"]
            sets.append(f"cluster.groups.{g}.bandwidth_gbps={network['server_bandwidth_gbps']}")
    elif n > 1 and not uses_server(scenario.scheme.kind):  # (a server scheme without a probe: keep its network)
        slope_s = (big_s - small_s) / max(1, big_bytes - small_bytes)  # seconds per byte, probe
        bytes_per_s = ring / slope_s if slope_s > 0 else ring * big_bytes / big_s
        alpha = max(0.0, (comm_mean - ring * grad_bytes / bytes_per_s) / (2 * (n - 1)))
        network = {"name": "ring_allreduce", "alpha_s": _sig(alpha), "bandwidth_gbps": _sig(bytes_per_s * 8 / 1e9)}
        overrides["network"] = network
    if network is not None:
        sets.append(f"network={_flow(network)}")
    return {
        "host": platform.node(),
        "groups": fits,
        "workers": workers,
        "comm_s_mean": _sig(comm_mean),
        "comm_s_samples": len(comm_s),
        "probe": {"small_bytes": small_bytes, "small_s": _sig(small_s), "big_bytes": big_bytes, "big_s": _sig(big_s)},
        "overrides": overrides,
        "measurements": raw,
        "sets": sets,
    }


def _sig(x: float) -> float:
    return float(f"{x:.6g}") if math.isfinite(x) else x


def _flow(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=10**6, sort_keys=False).strip()


def write_calibration(out: Path, cal: dict[str, Any], scenario_path: str, overrides: list[str]) -> None:
    """``calibration.yaml``, ``profile.json`` and ``scenario.calibrated.yaml`` in ``out``."""
    header = (f"# lbsim profile on {cal['host']}: per-group t(b), jitter and ring all-reduce figures measured by the runtime.\n"
              "# Merge into a scenario, or pass the `sets` of profile.json as --set KEY=VALUE.\n")
    atomic_write_text(out / "calibration.yaml", header + yaml.safe_dump(cal["overrides"], sort_keys=False, width=10**6))
    write_json(out / "profile.json", cal)
    calibrated = load_scenario(scenario_path, [*overrides, *cal["sets"]])
    atomic_write_text(out / "scenario.calibrated.yaml", dump_scenario(calibrated))
