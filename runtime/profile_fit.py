"""The fits of ``lbsim profile``: measurements in, scenario overrides out (pure; no torch).

Shared by the ranks that profile (:mod:`lbsim.runtime.profile`) and by the launcher of ``lbsim
validate``, which pools two profiles per run and fits them again — without importing torch.

* Per scenario group, ``t(b) = t0_s + b / samples_per_s`` by least squares over the trimmed mean
  compute time at each profiled size (through the origin if the fit would make ``t0_s < 0`` or the
  slope non-positive).
* ``jitter_cv`` from successive differences of a worker's step times,
  ``sigma^2 = mean((log t_k - log t_{k-1})^2) / 2``, ``cv = sqrt(exp(sigma^2) - 1)`` (slow drift is
  not counted as noise).
* The ring all-reduce: the probe's slope between two sizes gives ``B`` in
  ``T = 2 (n-1) alpha + 2 (n-1)/n * S / B``; ``alpha`` is then solved from the round's measured
  overhead ``T(S)``.
* A parameter server: a round trip costs ``2 S / B + 2 L`` (:func:`ps_network`).
"""

from __future__ import annotations

import math
import platform
from typing import Any

import numpy as np
import yaml

from lbsim.scenario.loader import scenario_data

from .config import uses_server

FACTORS = (0.5, 0.75, 1.0, 1.25)


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


def ps_network(probe: dict[str, Any]) -> dict[str, Any]:
    """``parameter_server`` network figures from a probe (pure): bandwidth, latency, apply time.

    A round trip of ``S`` bytes costs ``2 S / B + 2 L``: the slope between the probe's two sizes
    gives ``B``, the small size then ``L`` (:mod:`lbsim.runtime.ps_probe`).
    """
    slope = (probe["big_rtt_s"] - probe["small_rtt_s"]) / max(1, probe["big_bytes"] - probe["small_bytes"])
    bytes_per_s = 2.0 / slope if slope > 0 else 2.0 * probe["big_bytes"] / probe["big_rtt_s"]
    latency = max(0.0, (probe["small_rtt_s"] - 2.0 * probe["small_bytes"] / bytes_per_s) / 2.0)
    return {"name": "parameter_server", "server_bandwidth_gbps": bytes_per_s * 8 / 1e9, "latency_s": latency,
            "apply_s": max(0.0, float(probe["apply_s"]))}
