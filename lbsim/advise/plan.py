"""What an advice runs: every applicable scheme, each on its family's variant of the scenario, over
the variants of the unknowns and the seeds, against one baseline.

Every scenario of the matrix is made by the core's run lifecycle (:mod:`lbsim.lifecycle`), as a
cross-family ``lbsim compare`` makes its scenarios, with the same checks and guards:

* **Families** (:func:`lbsim.lifecycle.families.scheme_network`): a synchronous scheme without
  backup workers (BSP, static, LB-BSP, LOFT) runs over an **all-reduce**, as PyTorch DDP does;
  every other scheme (ASP, SSP, DSSP, ElasticBSP, WBSP) with a **parameter server**. The kind of
  network a scenario lacks is derived by :func:`lbsim.lifecycle.families.network_variant`'s stated
  rules (from an all-reduce: one server shard per worker node, each with the fastest node's NIC;
  from a parameter server: a flat ring over the nodes' own NICs); the report lists what was derived.
* **Baseline**: plain DDP, ``bsp`` with its default parameters (no backup workers, whatever the
  scenario's scheme says) over the all-reduce (:data:`BASELINE`). Every speedup, slowdown
  probability and cost difference is against it, on the same variant and seed.
* **Equal work or equal time, never equal updates** (the lifecycle's equal-work guard refuses the
  latter): an update holds different work in different schemes, so a scenario's
  ``workload.updates`` is dropped and a ``samples`` target (equal work) or a ``time_budget_s``
  (equal time) ends every run; a scenario with neither gets ``--budget-s``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from lbsim.advise.run_text import run_text
from lbsim.advise.unknowns import Variant
from lbsim.errors import InputError
from lbsim.fields import parse
from lbsim.lifecycle import check_equal_work, scheme_network
from lbsim.lifecycle import load as lifecycle_load
from lbsim.lifecycle.families import network_kind
from lbsim.limits import MAX_SWEEP_RUNS
from lbsim.scenario.loader import scenario_data, scenario_from_data, with_changes
from lbsim.scenario.resolve import resolve_run
from lbsim.scenario.schema import Scenario
from lbsim.scenario.sections import AllReduceConfig, ParameterServerConfig
from lbsim.schemes.registry import not_applicable
from lbsim.workers import WorkerSpec

ALLREDUCE = "all-reduce"
PARAMETER_SERVER = "parameter server"
FAMILIES = {AllReduceConfig.kind: ALLREDUCE, ParameterServerConfig.kind: PARAMETER_SERVER}
BASELINE = "bsp"
PLAIN_BASELINE = '{"name": "bsp"}'  # scheme=... override: plain DDP, whatever the scenario's bsp parameters
NAMES = {"bsp": "BSP", "asp": "ASP", "ssp": "SSP", "dssp": "DSSP", "static": "static split", "lbbsp": "LB-BSP",
         "elastic_bsp": "ElasticBSP", "wbsp": "WBSP", "loft": "LOFT"}


def display_name(scheme: str) -> str:
    """The scheme's name as the report shows it."""
    return NAMES.get(scheme, scheme)


def _sets(scheme: str, overrides: Sequence[str]) -> tuple[str | None, list[str]]:
    """The lifecycle's ``scheme`` argument and overrides for ``scheme`` (the baseline: plain bsp)."""
    if scheme == BASELINE:
        return None, [*overrides, f"scheme={PLAIN_BASELINE}"]
    return scheme, list(overrides)


def scheme_family(scheme: str, base: Scenario, overrides: Sequence[str] = ()) -> str:
    """The network kind (``ring_allreduce`` / ``parameter_server``) ``scheme`` runs on, by the core's rule."""
    name, sets = _sets(scheme, overrides)
    return scheme_network(parse(Scenario, with_changes(scenario_data(base), sets, scheme=name)).scheme)


def derived_note(scenario: Scenario) -> str:
    """What the lifecycle derived for a family's network, in words (for the assumptions)."""
    net = scenario.network
    rules = "(the core's cross-family rules, lbsim/lifecycle/families.py)"
    if isinstance(net, ParameterServerConfig):
        return (f"parameter-server family: a derived server of {net.shards} shard{'s' if net.shards != 1 else ''} (one per "
                f"worker node), each with a {net.server_bandwidth_gbps:g} Gbit/s NIC (the fastest worker node's), "
                f"latency {net.latency_s:g} s (the all-reduce's per-hop), apply time {net.apply_s:g} s (default) {rules}")
    assert isinstance(net, AllReduceConfig)
    return (f"all-reduce family: a derived flat {net.algorithm} all-reduce over the nodes' own NICs, per-hop latency "
            f"{net.alpha_s:g} s (the server's) {rules}")


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
        """The arm's key: its scheme."""
        return self.scheme

    @property
    def label(self) -> str:
        """The arm's label in the report: the scheme and its family."""
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
        """The run's folder name: arm, variant, seed."""
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
        """Every run of the plan (arms x variants x seeds), optionally only some seeds or variants."""
        out = []
        for arm in self.arms:
            for v in self.variants:
                if variants is not None and v.index not in variants:
                    continue
                for seed in seeds if seeds is not None else self.seeds:
                    sc = replace(self.scenarios[(arm.key, v.index)], seed=seed)
                    out.append(RunSpec(arm.key, v.index, seed, run_text(sc)))
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
    """Every (scheme, variant) loaded and checked by the lifecycle before anything runs; a scheme that
    the scenario rules out (a memory cap, a missing figure) is skipped with the reason."""
    data, notes = equal_work(base, budget_s)
    if len(schemes) * len(variants) * len(seeds) > max_runs:
        raise InputError("--seeds", f"{len(schemes)} schemes x {len(variants)} variants x {len(seeds)} seeds = "
                                    f"{len(schemes) * len(variants) * len(seeds)} runs, more than the bound of {max_runs}")
    base_scenario = scenario_from_data(data)
    has_cost = base_scenario.workload.sample_cost is not None
    skipped: dict[str, str] = {s: why for s in schemes if (why := not_applicable(s, sample_cost=has_cost)) is not None}
    scenarios: dict[tuple[str, int], Scenario] = {}
    ceilings: dict[int, float] = {}
    families: dict[str, str] = {}
    for v in variants:
        try:
            plain = lifecycle_load(base_scenario, overrides=v.overrides)  # the scenario with this variant's values
        except InputError as err:
            raise _vary_error(err, v, vary_keys) from None
        ceilings[v.index] = throughput_ceiling(plain, _workers(plain))
        for scheme in schemes:
            if scheme in skipped:
                continue
            name, sets = _sets(scheme, v.overrides)
            try:
                kind = families.setdefault(scheme, scheme_family(scheme, base_scenario, v.overrides))
                sc = lifecycle_load(base_scenario, scheme=name, overrides=sets, network=kind)
            except InputError as err:
                if scheme == BASELINE:
                    raise _vary_error(err, v, vary_keys) from None
                skipped[scheme] = f"{err} (variant {v.label})" if len(variants) > 1 else str(err)
                continue
            scenarios[(scheme, v.index)] = sc
            if network_kind(sc) != network_kind(plain) and (note := derived_note(sc)) not in notes:
                notes.append(note)
        check_equal_work([(s, scenarios[(s, v.index)]) for s in schemes if s not in skipped])
    arms = [Arm(s, FAMILIES[families[s]]) for s in schemes if s not in skipped]
    return Plan(arms, list(variants), list(seeds), skipped, notes, ceilings,
                {k: sc for k, sc in scenarios.items() if k[0] not in skipped})


def _workers(scenario: Scenario) -> tuple[WorkerSpec, ...]:
    return resolve_run(scenario).workers
