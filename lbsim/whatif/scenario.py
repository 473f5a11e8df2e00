"""The fitted job as a scenario a user can read, edit and run: ``scenario.yaml`` and its slowdown traces.

* one worker per rank, in rank order; consecutive ranks on one host and device are one group of
  one node (``workers_per_node`` = its ranks), with the device's unslowed curve (``t0_s``,
  ``samples_per_s``) and the fitted links (``bandwidth_gbps`` and ``intra_bandwidth_gbps``, no
  latencies; :mod:`lbsim.whatif.fit`);
* ``contention``: one ``trace`` entry in lbsim's ``simple`` format, ``slowdown.csv``
  (``time_s,worker,slowdown``: from each step's start, the rank's recorded slowdown);
  ``ideal_slowdown.csv`` is the same job without stragglers;
* ``workload``: the recorded global batch, ``samples`` = steps x global batch (equal work across
  schemes: ``lbsim compare --cross-family`` runs), the gradient bytes;
* ``scheme``: the recorded one (plain DDP: ``bsp``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import yaml

from lbsim.calibration.scenario import default_instance
from lbsim.errors import InputError
from lbsim.limits import MAX_TRACE_ROWS
from lbsim.recording.schema import Recording
from lbsim.schemes.registry import scheme_configs
from lbsim.whatif.fit import JobFit

TRACE_FILE = "slowdown.csv"
IDEAL_TRACE_FILE = "ideal_slowdown.csv"
CPU_INSTANCE = "c5.xlarge"  # a catalog CPU instance: every figure of it is overridden by the fit


def _g(x: float) -> float:
    return float(f"{x:.6g}")


def trace_csv(start_s: np.ndarray, factors: np.ndarray) -> str:
    """``time_s,worker,slowdown`` rows: rank r's factor of step k from step k's start (a change point
    only where the factor changes; steps averaged in blocks if the trace would exceed the trace bound)."""
    ranks, steps = factors.shape
    block = max(1, math.ceil(ranks * steps / MAX_TRACE_ROWS))
    if block > 1:
        cut = (steps // block) * block
        tail = factors[:, cut:]
        factors = factors[:, :cut].reshape(ranks, -1, block).mean(axis=2)
        if tail.shape[1]:
            factors = np.concatenate([factors, tail.mean(axis=1, keepdims=True)], axis=1)
        start_s = start_s[::block]
    lines = ["time_s,worker,slowdown\n"]
    for r in range(ranks):
        last = None
        for t, f in zip(start_s, factors[r], strict=True):
            value = f"{max(float(f), 1e-6):.4g}"
            if value != last:
                lines.append(f"{float(t):.6f},{r},{value}\n")
                last = value
    return "".join(lines)


def _instance(device: str, node_size: int, host: str) -> str:
    if not device.startswith("cuda"):
        return CPU_INSTANCE
    try:
        return default_instance(node_size)
    except ValueError:
        raise InputError(host, f"{node_size} GPU ranks on one host: more than any catalog instance holds "
                               "(a scenario node is one instance)") from None


def scheme_section(scheme: dict[str, Any]) -> dict[str, Any]:
    """The recorded scheme as a scenario section: only the keys the registered scheme takes."""
    name = str(scheme.get("name", "bsp"))
    config = scheme_configs().get(name)
    keys = {f.name for f in dataclasses.fields(config)} if config is not None else set()
    return {"name": name, **{k: v for k, v in scheme.items() if k in keys and v is not None}}


def scenario_data(rec: Recording, fit: JobFit, *, name: str) -> dict[str, Any]:
    """The fitted job as scenario data: one group (node) per host and device with its unslowed curve, the
    fitted link, the job's scheme and batch, and its slowdowns as a trace (module docstring)."""
    groups = []
    for g in fit.groups:
        curve = fit.base[g.ranks[0]]
        groups.append({
            "instance": _instance(g.device, len(g.ranks), g.host), "count": len(g.ranks), "workers_per_node": len(g.ranks),
            "t0_s": _g(curve.t0_s), "samples_per_s": _g(1.0 / curve.per_sample_s), "max_batch": fit.global_batch,
            "bandwidth_gbps": _g(fit.link_gbps), "nic_latency_s": 0.0,
            "intra_bandwidth_gbps": _g(fit.link_gbps), "intra_latency_s": 0.0,
        })
    return {
        "name": name,
        "description": f"recorded job {rec.source}: {rec.ranks} ranks x {rec.steps_used} steps, replayed (lbsim whatif)",
        "seed": 0,
        "workload": {"model": "resnet50_imagenet", "global_batch": fit.global_batch, "updates": None,
                     "samples": fit.steps * fit.global_batch, "gradient_bytes": fit.gradient_bytes},
        "cluster": {"groups": groups},
        "network": {"name": "ring_allreduce", "alpha_s": 0.0, "algorithm": "ring"},
        "contention": [{"name": "trace", "path": TRACE_FILE, "format": "simple", "workers": "all"}],
        "scheme": scheme_section(rec.scheme),
    }


def scenario_yaml(rec: Recording, fit: JobFit, data: dict[str, Any]) -> str:
    """The scenario with a header saying where each figure comes from."""
    grad = (f"{fit.gradient_bytes} gradient bytes from job.json" if fit.gradient_bytes_known else
            f"gradient bytes unknown: a nominal {fit.gradient_bytes} (only bytes / bandwidth matters)")
    curves = "; ".join(f"rank {r}: t(b) = {c.t0_s:.4g} + b x {c.per_sample_s:.4g} s"
                       f"{' (varied batches)' if c.varied else ' (its speed)'}" for r, c in enumerate(fit.rank_curves))
    head = [
        f"Fitted by lbsim whatif from {rec.source} ({rec.ranks} ranks, {rec.steps_used} steps used of {rec.steps_recorded}).",
        "Each group: the device's unslowed t(b) = t0_s + b / samples_per_s (the class's lower-median rank);",
        f"each rank's own fit: {curves}.",
        f"Slowdown per rank and step: {TRACE_FILE} (time_s,worker,slowdown); without stragglers: {IDEAL_TRACE_FILE}",
        f"(lbsim run scenario.yaml --set contention.0.path={IDEAL_TRACE_FILE}).",
        f"Communication per step {fit.comm_s:.6g} s = all-reduce tail {fit.tail_s:.6g} s + optimizer and loader "
        f"{fit.overhead_s:.6g} s, as links of {fit.link_gbps:.6g} Gbit/s ({grad}).",
        "Edit anything and run it: lbsim run / compare --cross-family / sweep (docs/whatif.md).",
    ]
    text = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=120)
    return "".join(f"# {line}\n" for line in head) + text
