"""An advice from start to end: the question -> a validated plan -> the runs -> the report's dict.

:func:`prepare` turns a :class:`Request` (a scenario file or a cluster line, the unknowns, the
schemes, the seeds, prices) into a :class:`Prepared` advice: every scheme, variant and setting is
checked before anything runs (bad input is an :class:`~lbsim.errors.InputError` naming the option
or key path). :func:`advise` runs it on a backend and returns the report (the content of
``advise.json``, rendered as ``advise.html``). Both are front-end neutral: the CLI
(``lbsim advise``) and Python callers use them alike; every scenario is made and run through the
core's run lifecycle (:mod:`lbsim.lifecycle`); ``engine`` None is its default (the simulator).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lbsim.advise.analysis import Settings, analyse, num
from lbsim.advise.cluster import (
    DEFAULT_BUDGET_S,
    DEFAULT_MODEL,
    cluster_data,
    cluster_line,
    parse_bandwidth_gbps,
    parse_cluster,
)
from lbsim.advise.cost import default_samples, parse_prices
from lbsim.advise.execute import execute
from lbsim.advise.plan import ALLREDUCE, BASELINE, Plan, display_name, make_plan
from lbsim.advise.unknowns import Unknown, colocated_plan, parse_colocated, parse_vary, variants
from lbsim.engine import Engine
from lbsim.errors import InputError
from lbsim.limits import MAX_REPEATS
from lbsim.scenario.loader import read_yaml, scenario_data, scenario_from_data
from lbsim.scenario.overrides import apply_overrides
from lbsim.scenario.prices import AS_OF, REGION, SERVER_INSTANCE
from lbsim.scenario.resolve import resolve_run
from lbsim.schemes.registry import scheme_names
from lbsim.stats.intervals import LEVEL, MIN_VALUES
from lbsim.sweep.backends import Backend
from lbsim.version import __version__


@dataclass(frozen=True)
class Request:
    """What the user asked (the CLI's options, or a Python caller's arguments)."""

    scenario: str | None = None
    cluster: str | None = None
    network: str | None = None
    colocated: str | None = None
    model: str = DEFAULT_MODEL
    global_batch: int | None = None
    budget_s: float = DEFAULT_BUDGET_S
    overrides: Sequence[str] = ()
    vary: Sequence[str] = ()
    schemes: str | None = None
    seeds: int = 5
    max_seeds: int = 20
    target_rel: float = 0.05
    samples: int | None = None
    prices: Sequence[str] = ()
    slowdown_pct: float = 10.0
    command: str = "lbsim advise"


@dataclass
class Prepared:
    request: Request
    plan: Plan
    unknowns: list[Unknown]
    question: dict[str, Any]
    assumptions: list[str]
    settings: Settings
    base_seed: int
    mapping: list[str] = field(default_factory=list)


def _check_request(r: Request) -> None:
    if (r.scenario is None) == (r.cluster is None):
        raise InputError("advise", "give a scenario file or --cluster (one of them)")
    if r.cluster is None:
        for opt, value, default in (("--model", r.model, DEFAULT_MODEL), ("--global-batch", r.global_batch, None)):
            if value != default:
                raise InputError(opt, "applies to --cluster only; with a scenario file use --set workload....")
    if not 1 <= r.seeds <= MAX_REPEATS:
        raise InputError("--seeds", f"expected 1..{MAX_REPEATS} seeds, got {r.seeds}")
    if not r.seeds <= r.max_seeds <= MAX_REPEATS:
        raise InputError("--max-seeds", f"expected {r.seeds} (--seeds) .. {MAX_REPEATS}, got {r.max_seeds}")
    if not 0 < r.target_rel < 10:
        raise InputError("--target", f"expected a relative half-width > 0 and < 10, got {r.target_rel}")
    if not 0 < r.budget_s <= 1e7:
        raise InputError("--budget-s", f"expected > 0 and <= 1e7 simulated seconds, got {r.budget_s}")
    if r.samples is not None and not 0 < r.samples <= 10**15:
        raise InputError("--samples", f"expected 1..1e15 samples, got {r.samples}")
    if not 0 <= r.slowdown_pct <= 1000:
        raise InputError("--slowdown-pct", f"expected 0..1000 %, got {r.slowdown_pct}")
    if r.global_batch is not None and r.global_batch < 1:
        raise InputError("--global-batch", f"expected >= 1, got {r.global_batch}")


def _schemes(text: str | None) -> list[str]:
    import difflib

    valid = scheme_names()
    if text is None:
        names = valid
    else:
        names = [s.strip() for s in text.split(",") if s.strip()]
        if not names:
            raise InputError("--schemes", f"give a comma-separated list of scheme names; valid: {', '.join(valid)}")
        if len(set(names)) != len(names):
            raise InputError("--schemes", f"a scheme is listed twice: {text}")
        for n in names:
            if n not in valid:
                close = difflib.get_close_matches(n, valid, n=1, cutoff=0.75)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise InputError("--schemes", f"unknown scheme {n!r}{hint}; valid: {', '.join(valid)}")
    return [BASELINE, *[n for n in names if n != BASELINE]]


def prepare(r: Request) -> Prepared:
    """Check everything and build the plan; nothing runs yet."""
    _check_request(r)
    assumptions: list[str] = []
    mapping: list[str] = []
    names: dict[str, str] = {}
    bandwidth = parse_bandwidth_gbps(r.network) if r.network is not None else None
    if r.cluster is not None:
        items = parse_cluster(r.cluster)
        mapping = [i.mapping() for i in items]
        names = {i.instance: i.name for i in items}
        data = cluster_data(items, model=r.model, bandwidth_gbps=bandwidth, budget_s=r.budget_s, global_batch=r.global_batch)
        data = apply_overrides(data, r.overrides)
        scenario = scenario_from_data(data)
        title = cluster_line(items, bandwidth)
        w = scenario.workload
        assumptions += [
            f"model {w.model} (--model), global batch {w.global_batch} samples"
            + (" (--global-batch)" if r.global_batch is not None else
               f" ({128} per worker, capped at the cluster's memory; --global-batch)"),
            "GPU names mapped to catalog instances and their sourced figures (lbsim catalog): " + "; ".join(mapping),
            "every node's NIC at " + (f"{bandwidth:g} Gbit/s (--network)" if bandwidth is not None else
                                      "the catalog's effective per-flow figure (no --network)"),
        ]
        description = title
    else:
        path = Path(r.scenario)  # type: ignore[arg-type]
        data = apply_overrides(read_yaml(path), r.overrides)
        scenario = scenario_from_data(data, base_dir=path.resolve().parent)
        data = scenario_data(scenario)  # defaults filled in, trace paths absolute
        if bandwidth is not None:
            for g in data["cluster"]["groups"]:
                g["bandwidth_gbps"] = bandwidth
            if data["network"].get("name") == "ring_allreduce":
                data["network"]["bandwidth_gbps"] = None
            assumptions.append(f"every node's NIC at {bandwidth:g} Gbit/s (--network)")
            scenario = scenario_from_data(data)
        title = scenario.name or path.stem
        description = scenario.description or str(path)

    workers = resolve_run(scenario).workers
    unknowns: list[Unknown] = []
    if r.colocated is not None:
        colo = parse_colocated(r.colocated)
        index = len(data.get("contention") or [])
        entry, unknown = colocated_plan(colo, workers, index, names)
        data = {**data, "contention": [*(data.get("contention") or []), entry]}
        scenario = scenario_from_data(data)
        where = ("every worker" if colo.everywhere else
                 "the nodes given" if colo.nodes is not None else f"{colo.count} node(s), which ones unknown")
        assumptions.append(f"co-located job (--colocated): {colo.target} {colo.slowdown:g}x slower on {where}, from "
                           f"{colo.start_s:g} s " + (f"to {colo.end_s:g} s" if colo.end_s is not None else "for the whole run")
                           + " (a scheduled contention entry: deterministic, so seeds do not vary it)")
        if unknown is not None:
            unknowns.append(unknown)
            assumptions.append(f"which node hosts the co-located job is varied over one node of each group "
                               f"({', '.join(unknown.labels)}): a group's nodes are identical hardware on identical links")
    user_unknowns = [parse_vary(v) for v in r.vary]
    unknowns += user_unknowns
    vs = variants(unknowns)
    if len(vs) > 1000:
        raise InputError("--vary", f"{len(vs)} variants, more than the bound of 1000")
    base_seed = int(data.get("seed", 0) or 0)
    seeds = [base_seed + i for i in range(r.seeds)]
    plan = make_plan(data, _schemes(r.schemes), vs, seeds, budget_s=r.budget_s, vary_keys=[u.key for u in unknowns])
    prices = parse_prices(r.prices)
    model = scenario.workload.model
    samples, samples_source = (r.samples, "--samples") if r.samples is not None else default_samples(model)
    assumptions += plan.notes
    assumptions += [
        f"baseline: plain DDP, {display_name(BASELINE)} over the all-reduce with its default parameters; every figure "
        "against it is paired (same variant, same seed)",
        "schemes run on their family's network: "
        + "; ".join(f"{fam}: {', '.join(display_name(a.scheme) for a in plan.arms if a.family == fam)}"
                    for fam in dict.fromkeys(a.family for a in plan.arms))
        + "; each with its default parameters (lbsim schemes) unless the scenario sets them",
        f"prices: on-demand list prices, {REGION}, as of {AS_OF} (lbsim/scenario/prices.py)"
        + (f"; replaced by --price for {', '.join(sorted(prices))}" if prices else "")
        + f"; a parameter-server shard is charged as one {SERVER_INSTANCE}",
        f"time and cost are for {samples:,} samples: {samples_source}",
        f"{r.seeds} seed{'s' if r.seeds != 1 else ''} per variant (seeds {seeds[0]}..{seeds[-1]}), up to "
        f"{r.max_seeds} where a speedup interval is wider than ±{r.target_rel:.0%}",
    ]
    question = {"title": title, "description": description, "mapping": mapping, "cluster_line": r.cluster,
                "network": r.network, "colocated": r.colocated, "scenario": r.scenario, "model": model,
                "global_batch": scenario.workload.global_batch}
    settings = Settings(r.slowdown_pct, samples, samples_source, prices)
    return Prepared(r, plan, unknowns, question, assumptions, settings, base_seed, mapping)


METHOD = [
    f"No interval from fewer than {MIN_VALUES} seeds: the table says 'no interval' and shows the value. When the "
    "first two seeds give identical runs for every scheme and variant, the scenario has no random element the seed "
    "reaches (scheduled contention, no jitter): the other seeds are not run and the values are shown without an "
    "interval (the report says 'deterministic'); the uncertainty left is that of the varied unknowns.",
    "Speedup per variant: geometric mean over seeds of the paired ratio (scheme / baseline samples/s), "
    f"{LEVEL:.0%} Student-t interval on the log scale (always > 0).",
    "Over the variants: equal-weight average of the variants' values, percentile bootstrap (4000 resamples of the "
    "seeds within each variant); it never leaves the range of the data.",
    "samples/s: mean over seeds, t-interval intersected with [0, the cluster's ideal samples/s] (every worker at "
    "its best batch with no communication and no contention); shares of time within [0, 1]. Intersecting with "
    "the physical range loses no coverage: the true value lies inside it.",
    "P(> x % slower): share of paired runs where the scheme needs more than (1 + x/100) times the baseline's time "
    "for the same samples; Wilson score interval (inside [0, 1]).",
    "Iteration P50/P90/P99: percentiles of every worker-iteration's time (start to the worker's next start) in a "
    "run, averaged over runs; 's per global batch' = global batch / samples/s, comparable across schemes.",
    "Where the time goes: shares of total worker time computing, waiting (barrier or staleness gate), "
    "communicating and fetching data; staleness: updates between the model a gradient was computed on and the "
    "one it was applied to.",
]


def advise(prepared: Prepared, engine: Engine | None, backend: Backend,
           on_progress: Callable[[int, int], None] | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run the plan; the report (advise.json's content) and one row per run (runs.csv)."""
    r = prepared.request
    plan = prepared.plan
    outcome = execute(plan, engine, backend, max_seeds=r.max_seeds, target=r.target_rel, on_progress=on_progress)
    records = outcome.records
    body = analyse(plan, records, prepared.unknowns, prepared.settings, deterministic=outcome.deterministic)
    seeds_used = sorted({int(n) for n in body["seeds_per_variant"].values()})
    seeds_text = f"{seeds_used[0]} seeds" if len(seeds_used) == 1 else f"{seeds_used[0]}-{seeds_used[-1]} seeds"
    base = next(a for a in plan.arms if a.scheme == BASELINE)
    report = {
        "lbsim_version": __version__,
        "command": r.command,
        "question": prepared.question,
        "workers": sum(1 for _ in _first_workers(plan)),
        "baseline": {"scheme": BASELINE, "family": ALLREDUCE, "label": base.label},
        "assumptions": prepared.assumptions,
        "unknowns": [{"key": u.key, "source": u.source, "values": list(u.labels)} for u in prepared.unknowns],
        "variants": [{"index": v.index, "label": v.label, "overrides": list(v.overrides),
                      "seeds": body["seeds_per_variant"][str(v.index)],
                      "ideal_samples_per_s": num(plan.ceilings[v.index])} for v in plan.variants],
        "seeds_text": seeds_text,
        "settings": {"seeds": r.seeds, "max_seeds": r.max_seeds, "target_rel": r.target_rel, "level": LEVEL,
                     "slowdown_pct": r.slowdown_pct, "samples": prepared.settings.samples,
                     "samples_source": prepared.settings.samples_source,
                     "prices": dict(sorted(prepared.settings.prices.items()))},
        "skipped": dict(sorted(plan.skipped.items())),
        "method": METHOD,
        **body,
    }
    rows = [{"scheme": rec.arm, "variant": rec.variant, "seed": rec.seed,
             **{k: (num(v) if isinstance(v, float) else v) for k, v in rec.metrics.items()}} for rec in records]
    rows.sort(key=lambda row: ([a.scheme for a in plan.arms].index(row["scheme"]), row["variant"], row["seed"]))
    return report, rows


def _first_workers(plan: Plan) -> Any:
    first = plan.variants[0].index
    return resolve_run(plan.scenarios[(BASELINE, first)]).workers

