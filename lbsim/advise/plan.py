"""What an advice runs: every applicable scheme, each on its family's variant of the scenario, over
the variants of the unknowns and the seeds, against one baseline.

**Families.** A scheme whose driver is ``sync`` (one update per round with every worker at a
barrier: BSP, static, LB-BSP, LOFT) runs as plain data-parallel training does, over an
**all-reduce**; every other scheme (ASP, SSP, DSSP, ElasticBSP, WBSP) needs a **parameter
server**. :func:`family_data` makes a family's variant of a scenario, the one place that decides
it (switching to the core's cross-family lifecycle, when it exists, is a change here):

* all-reduce: the scenario's ``ring_allreduce`` section, or, from a parameter-server scenario, a
  flat ring over the nodes' own NICs with the server's latency as its per-hop ``alpha_s``;
* parameter server: the scenario's ``parameter_server`` section, or, from an all-reduce scenario,
  a stated default: as many shards as worker nodes (BytePS, Jiang et al., OSDI 2020, §3: with
  as many servers as worker machines a parameter server moves no more bytes per NIC than an
  all-reduce), each with a NIC as fast as the fastest worker node's (the ring's ``bandwidth_gbps``
  when it sets one, which then also becomes every node's NIC), the ring's ``alpha_s`` as its
  latency, and the section's default apply time.

These are the rules of the core's cross-family compare (``lbsim compare --cross-family``, issue 23),
so an advice and a cross-family compare run the same scenarios.

**Baseline.** Plain DDP: ``bsp`` with its default parameters (no backup workers) over the
all-reduce (:data:`BASELINE`). Every speedup, slowdown probability and cost difference is against
it, on the same variant and seed.

**Equal work or equal time, never equal updates.** An update holds different work in different
schemes, so a scenario's ``workload.updates`` is dropped: a ``samples`` target (equal work) or a
``time_budget_s`` (equal time) ends every run; a scenario with neither gets ``--budget-s``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from lbsim.advise.unknowns import Variant
from lbsim.errors import InputError
from lbsim.limits import MAX_SWEEP_RUNS
from lbsim.scenario.loader import dump_scenario, scenario_from_data, with_scheme
from lbsim.scenario.overrides import apply_overrides
from lbsim.scenario.schema import Scenario
from lbsim.scenario.sections import ParameterServerConfig, RingAllReduceConfig
from lbsim.scenario.workers import WorkerSpec
from lbsim.schemes.registry import scheme_class

ALLREDUCE = "all-reduce"
PARAMETER_SERVER = "parameter server"
BASELINE = "bsp"
NAMES = {"bsp": "BSP", "asp": "ASP", "ssp": "SSP", "dssp": "DSSP", "static": "static split", "lbbsp": "LB-BSP",
         "elastic_bsp": "ElasticBSP", "wbsp": "WBSP", "loft": "LOFT"}


def display_name(scheme: str) -> str:
    return NAMES.get(scheme, scheme)


def scheme_family(scheme: str, data: dict[str, Any]) -> str:
    """All-reduce for a synchronous scheme without backup workers, else parameter server."""
    cls: Any = scheme_class(scheme)
    sch = data.get("scheme")
    backup = sch.get("backup_workers", 0) if isinstance(sch, dict) and sch.get("name") == scheme else 0
    return ALLREDUCE if getattr(cls, "driver", None) == "sync" and not backup else PARAMETER_SERVER


def _network_name(data: dict[str, Any]) -> str:
    net = data.get("network")
    return str(net.get("name", "parameter_server")) if isinstance(net, dict) else "parameter_server"


def family_data(data: dict[str, Any], family: str, workers: Sequence[WorkerSpec]) -> tuple[dict[str, Any], list[str]]:
    """The family's variant of ``data`` and the defaults it used (for the report's assumptions).

    ``workers`` are the scenario's resolved workers (for the parameter server's default size).
    """
    out = copy.deepcopy(data)
    name = _network_name(out)
    if family == ALLREDUCE:
        if name == "ring_allreduce":
            return out, []
        latency = (out.get("network") or {}).get("latency_s", ParameterServerConfig().latency_s)
        out["network"] = {"name": "ring_allreduce", "alpha_s": latency}
        return out, [f"all-reduce family: the scenario's parameter server replaced by a flat ring all-reduce over the "
                     f"nodes' own NICs, per-hop latency {latency:g} s (the server's), its other keys at their defaults"]
    if name == "parameter_server":
        return out, []
    ring = out.get("network") or {}
    ring_bw = ring.get("bandwidth_gbps")
    nodes = len({w.node for w in workers})
    if ring_bw is not None:
        for group in out.get("cluster", {}).get("groups", []):
            group.setdefault("bandwidth_gbps", ring_bw)
        server_bw = float(ring_bw)
    else:
        server_bw = max(w.bandwidth_gbps for w in workers)
    alpha = ring.get("alpha_s", RingAllReduceConfig().alpha_s)
    out["network"] = {"name": "parameter_server", "shards": nodes, "server_bandwidth_gbps": server_bw, "latency_s": alpha}
    return out, [f"parameter-server family: {nodes} server shard{'s' if nodes != 1 else ''} (one per worker node, as "
                 f"BytePS deploys them), each with a {server_bw:g} Gbit/s NIC (the fastest worker node's), latency "
                 f"{alpha:g} s (the all-reduce's per-hop), default apply time"]


def equal_work(data: dict[str, Any], budget_s: float) -> tuple[dict[str, Any], list[str]]:
    """``data`` ended by samples or time, never by updates; the defaults used."""
    out = copy.deepcopy(data)
    w = dict(out.get("workload") or {})
    notes = []
    if w.get("updates", 200) is not None:
        notes.append(f"workload.updates={w.get('updates', 200)} dropped: an update holds different work in different "
                     "schemes, so runs end on equal samples or equal time")
    w["updates"] = None
    if w.get("samples") is None and w.get("time_budget_s") is None:
        w["time_budget_s"] = budget_s
        notes.append(f"every run lasts {budget_s:g} simulated seconds (--budget-s)")
    out["workload"] = w
    return out, notes


@dataclass(frozen=True)
class Arm:
    """One scheme on its family's network: what the report calls a scheme."""

    scheme: str
    family: str

    @property
    def key(self) -> str:
        return self.scheme

    @property
    def label(self) -> str:
        return f"{display_name(self.scheme)} ({self.family})"


@dataclass(frozen=True)
class RunSpec:
    """One run of the matrix: an arm, a variant, a seed, and the resolved scenario's text."""

    arm: str
    variant: int
    seed: int
    yaml: str

    @property
    def run_id(self) -> str:
        return f"{self.arm}/v{self.variant}/s{self.seed}"


@dataclass
class Plan:
    """The matrix an advice runs, and everything decided on the way (for the report)."""

    arms: list[Arm]
    variants: list[Variant]
    seeds: list[int]
    skipped: dict[str, str]  # scheme -> why it is not applicable
    notes: list[str]
    ceilings: dict[int, float]  # variant -> the cluster's ideal samples/s (inf: no bound known)
    scenarios: dict[tuple[str, int], Scenario] = field(default_factory=dict)  # (arm, variant) -> seed-0 scenario

    def runs(self, seeds: Sequence[int] | None = None, variants: Sequence[int] | None = None) -> list[RunSpec]:
        out = []
        for arm in self.arms:
            for v in self.variants:
                if variants is not None and v.index not in variants:
                    continue
                for seed in seeds if seeds is not None else self.seeds:
                    sc = replace(self.scenarios[(arm.key, v.index)], seed=seed)
                    out.append(RunSpec(arm.key, v.index, seed, dump_scenario(sc)))
        return out


def throughput_ceiling(scenario: Scenario, workers: Sequence[WorkerSpec]) -> float:
    """The cluster's physical maximum of samples/s: every worker at its best batch, no communication,
    no contention, no waiting (``inf`` where nothing bounds it: jitter, traces or a slowdown < 1
    can make an iteration faster than nominal)."""
    if any(w.jitter_cv > 0 for w in workers):
        return math.inf
    for c in scenario.contention:
        kind = getattr(c, "kind", "")
        if kind == "trace" or (kind == "scheduled" and getattr(c, "slowdown", 1.0) < 1.0):
            return math.inf
    total = 0.0
    for w in workers:
        batches = [w.max_batch]
        if w.compute_curve is not None:
            batches += [int(b) for b in w.compute_curve.batches if 1 <= b <= w.max_batch]
        best = max(b / t for b in batches if (t := w.compute_s(b)) > 0) if any(w.compute_s(b) > 0 for b in batches) else math.inf
        total += best
    return total


def _scheme_data(data: dict[str, Any], scheme: str) -> dict[str, Any]:
    return {**data, "scheme": {"name": BASELINE}} if scheme == BASELINE else with_scheme(data, scheme)


def _vary_error(err: InputError, variant: Variant, keys: Sequence[str]) -> InputError:
    """A variant's error, named by the ``--vary`` key it comes from where it does."""
    path = err.path.replace("--set ", "", 1)
    flat = path.replace("[", ".").replace("]", "")
    for key in keys:
        if flat == key or flat.startswith(key + ".") or key.startswith(flat + "."):
            return InputError(f"--vary {key}", f"{err.message} (key path {path}; variant {variant.label})")
    return err


def make_plan(base: dict[str, Any], schemes: Sequence[str], variants: Sequence[Variant], seeds: Sequence[int],
              *, budget_s: float, vary_keys: Sequence[str] = (), max_runs: int = MAX_SWEEP_RUNS) -> Plan:
    """Validate every (scheme, variant) before anything runs; a scheme that the scenario rules out is skipped."""
    data, notes = equal_work(base, budget_s)
    if len(schemes) * len(variants) * len(seeds) > max_runs:
        raise InputError("--seeds", f"{len(schemes)} schemes x {len(variants)} variants x {len(seeds)} seeds = "
                                    f"{len(schemes) * len(variants) * len(seeds)} runs, more than the bound of {max_runs}")
    arms: list[Arm] = []
    skipped: dict[str, str] = {}
    scenarios: dict[tuple[str, int], Scenario] = {}
    ceilings: dict[int, float] = {}
    families: dict[str, str] = {}
    for v in variants:
        try:
            varied = apply_overrides(data, v.overrides)
            plain = scenario_from_data(varied)  # as the user wrote it, with this variant's values
        except InputError as err:
            raise _vary_error(err, v, vary_keys) from None
        workers = _workers(plain)
        ceilings[v.index] = throughput_ceiling(plain, workers)
        for scheme in schemes:
            if scheme in skipped:
                continue
            family = families.setdefault(scheme, scheme_family(scheme, _scheme_data(varied, scheme)))
            fam, fam_notes = family_data(_scheme_data(varied, scheme), family, workers)
            for note in fam_notes:
                if note not in notes:
                    notes.append(note)
            try:
                scenarios[(scheme, v.index)] = scenario_from_data(fam)
            except InputError as err:
                if scheme == BASELINE:
                    raise _vary_error(err, v, vary_keys) from None
                skipped[scheme] = f"{err} (variant {v.label})" if len(variants) > 1 else str(err)
    for scheme in schemes:
        if scheme not in skipped:
            arms.append(Arm(scheme, families[scheme]))
    return Plan(arms, list(variants), list(seeds), skipped, notes, ceilings,
                {k: s for k, s in scenarios.items() if k[0] not in skipped})


def _workers(scenario: Scenario) -> tuple[WorkerSpec, ...]:
    from lbsim.scenario.resolve import resolve_run

    return resolve_run(scenario).workers
