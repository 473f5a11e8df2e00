"""Warnings about valid input that probably does not mean what it says, and runs that did nothing.

Not errors (exit 0, the run is written): the command prints each as ``lbsim: warning: ...`` on
stderr after it succeeded.

* :func:`scenario_notices` — a scheduled contention ``slowdown`` below 1 is valid (a speed-up:
  0.5 makes the workers twice as fast), but a "slowdown" is usually meant to slow down.
* :func:`run_notices` — a run that made no model update (e.g. ``gradient_bytes: 1e30``, or
  ``samples_per_s: 1e-300``: the first iteration never ends within the budget) says why, instead of
  a table of zeros.
"""

from __future__ import annotations

from typing import Any

from lbsim.scenario.resolve import gradient_bytes, resolve_workers


def scenario_notices(scenario: Any) -> list[str]:
    """Warnings about the scenario itself: a scheduled ``slowdown`` below 1 (a speed-up)."""
    out = []
    for i, entry in enumerate(getattr(scenario, "contention", ()) or ()):
        slowdown = getattr(entry, "slowdown", None)
        if getattr(entry, "kind", "") == "scheduled" and isinstance(slowdown, (int, float)) and slowdown < 1:
            out.append(f"contention[{i}].slowdown {slowdown:g} < 1 makes its workers {1 / slowdown:.3g}x faster, not "
                       "slower (a slowdown is a factor >= 1: 2 means twice as slow)")
    return out


def run_notices(scenario: Any, summary: dict[str, Any]) -> list[str]:
    """Why a run made no model update (its first iteration never ended within the budget), or nothing."""
    if summary.get("updates"):
        return []

    workers = resolve_workers(scenario)
    share = max(round(scenario.workload.global_batch / max(len(workers), 1)), 1)
    fastest = min(workers, key=lambda w: w.compute_s(share))
    slowest = max(workers, key=lambda w: w.compute_s(share))
    nic_gbps = max(w.bandwidth_gbps for w in workers)
    send_s = gradient_bytes(scenario) * 8 / (nic_gbps * 1e9) if nic_gbps > 0 else float("inf")
    return [f"the run made no model update in its {summary.get('sim_time_s', 0):g} s: compute for {share} samples takes "
            f"{fastest.compute_s(share):.3g} s on the fastest worker (w{fastest.index} {fastest.instance}) and "
            f"{slowest.compute_s(share):.3g} s on the slowest (w{slowest.index} {slowest.instance}); sending "
            f"{gradient_bytes(scenario):.3g} gradient bytes over the fastest NIC ({nic_gbps:g} Gbit/s) takes "
            f"{send_s:.3g} s; check the figures (workload.gradient_bytes, samples_per_s) or the budget"]


def cores_notice(ranks: int, threads: int = 1, *, cores: int | None = None, load: float | None = None) -> str | None:
    """A warning when the runtime's processes (plus what already runs here) outnumber this machine's cores.

    Each rank computes on ``threads`` threads; the 1-minute load average counts the runnable
    processes already here. When ``ranks x threads + load`` exceeds the cores, ranks wait for a core
    inside their measured step times, so the runtime's times (and a validation's errors) include
    that waiting: docs/runtime.md gives the errors measured on an idle and on an overloaded machine.
    """
    import os

    if cores is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:  # not Linux
            cores = os.cpu_count() or 1
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:
            load = 0.0
    demand = ranks * max(threads, 1)
    if demand + load <= cores:
        return None
    return (f"{ranks} ranks x {max(threads, 1)} thread{'s' if threads > 1 else ''} on {cores} cores with a load of "
            f"{load:.1f} already: ranks will wait for a core inside their measured step times, so runtime times "
            "(and validation errors) are larger and noisier than on an idle machine (docs/runtime.md)")
