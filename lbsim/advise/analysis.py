"""From the runs to the decision: per scheme and variant, intervals, tails, the chance of a slowdown,
the cost, where the time goes, and which scheme to use (the report's content, as plain data).

Definitions (every figure against the baseline is over *paired* runs: same variant, same seed):

* **speedup** of a scheme = its samples/s over the baseline's (with numerics on and every run
  reaching the target: the baseline's time to target over the scheme's). Per variant: the
  geometric mean over seeds with a t-interval on the log scale; over the variants: the
  equal-weight geometric mean of the variants' with a bootstrap interval (:mod:`lbsim.stats.intervals`).
* **throughput** (samples/s): the mean over seeds, its interval within ``[0, the cluster's ideal]``
  (every worker at its best batch, no communication, no contention: :func:`lbsim.advise.plan.throughput_ceiling`).
* **step time**: seconds per global batch of samples (``global_batch / throughput``), comparable
  across schemes whose updates hold different batches; **iteration P50/P90/P99**: percentiles of a
  run's worker-iteration times (start to the worker's next start), averaged over runs.
* **P(slowdown > x %)**: the share of paired runs in which the scheme takes more than ``1 + x/100``
  times the baseline's time for the same samples, with a Wilson interval; pooled over every run.
* **where the time goes**: shares of worker time computing, waiting (for stragglers at a barrier
  or a staleness gate), communicating and fetching data, and the staleness of applied gradients
  (updates between the model a gradient was computed on and the one it is applied to).

**Decision.** ``best_expected`` has the highest speedup averaged over the variants,
``best_worst_case`` the highest speedup in its own worst variant. Where one scheme is best in every
variant the choice is *robust*; where the best expected is also the best worst case, it is the
*robust choice* though another scheme wins some variants; otherwise the choice *depends* on the
unknowns, named (a key is named when changing it alone changes the best scheme).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from lbsim.advise.cost import cluster_price
from lbsim.advise.execute import RunRecord
from lbsim.advise.plan import BASELINE, Plan, display_name
from lbsim.advise.unknowns import Unknown
from lbsim.scenario.resolve import resolve_run
from lbsim.stats.intervals import LEVEL, Estimate, bounded_mean, exceedance, ratio_mean, strata_mean

SHARES = (("compute_fraction", "compute"), ("wait_fraction", "waiting"), ("comm_fraction", "communication"),
          ("fetch_fraction", "fetching data"))


def num(x: Any) -> Any:
    """A JSON-safe number: 9 significant digits, ``None`` for inf/NaN."""
    if x is None:
        return None
    if isinstance(x, bool) or isinstance(x, int):
        return x
    x = float(x)
    return float(f"{x:.9g}") if math.isfinite(x) else None


def est(e: Estimate) -> dict[str, Any]:
    """An :class:`Estimate` as report data: value, interval, count and method."""
    return {"value": num(e.value), "low": num(e.low), "high": num(e.high), "n": e.n, "method": e.method}


@dataclass(frozen=True)
class Settings:
    slowdown_pct: float
    samples: int
    samples_source: str
    prices: Mapping[str, float]
    level: float = LEVEL


def _metric(records: Sequence[RunRecord]) -> str:
    """time_to_target_s when every run has reached the numerics target, else throughput."""
    if records and all(r.metrics.get("time_to_target_s") for r in records):
        return "time_to_target_s"
    return "throughput_samples_per_s"


def _speedup(metric: str, scheme: dict[str, Any], base: dict[str, Any]) -> float | None:
    s, b = scheme.get(metric), base.get(metric)
    if not s or not b:
        return None
    return s / b if metric == "throughput_samples_per_s" else b / s


def _by(records: Sequence[RunRecord]) -> dict[tuple[str, int], dict[int, dict[str, Any]]]:
    out: dict[tuple[str, int], dict[int, dict[str, Any]]] = {}
    for r in records:
        out.setdefault((r.arm, r.variant), {})[r.seed] = r.metrics
    return out


def _values(runs: Mapping[int, dict[str, Any]], key: str) -> list[float]:
    return [float(m[key]) for _, m in sorted(runs.items()) if m.get(key) is not None and math.isfinite(float(m[key]))]


DETERMINISTIC = "deterministic: the first two seeds gave identical runs for every scheme and variant (no random element)"


class _Stats:
    """The interval functions, or, for a deterministic advice (one run stands for every seed), point values."""

    def __init__(self, deterministic: bool, level: float) -> None:
        self.det, self.level = deterministic, level

    def _point(self, value: float, n: int) -> Estimate:
        return Estimate(value, value, value, n, DETERMINISTIC) if math.isfinite(value) else Estimate(value, None, None, n, "no values")

    def mean(self, values: Sequence[float], lower: float = 0.0, upper: float = math.inf) -> Estimate:
        if self.det:
            return self._point(math.fsum(values) / len(values) if values else math.nan, len(values))
        return bounded_mean(values, lower=lower, upper=upper, level=self.level)

    def ratio(self, ratios: Sequence[float]) -> Estimate:
        if self.det:
            return self._point(math.exp(math.fsum(math.log(r) for r in ratios) / len(ratios)) if ratios else math.nan, len(ratios))
        return ratio_mean(ratios, level=self.level)

    def strata(self, strata: Sequence[Sequence[float]], ratio: bool = False) -> Estimate:
        if self.det:
            means = [math.fsum(math.log(x) for x in s) / len(s) if ratio else math.fsum(s) / len(s) for s in strata if s]
            if len(means) < len(strata) or not means:
                return Estimate(math.nan, None, None, 0, "no values")
            avg = math.fsum(means) / len(means)
            return self._point(math.exp(avg) if ratio else avg, sum(len(s) for s in strata))
        return strata_mean(strata, ratio=ratio, level=self.level)

    def exceed(self, slowdowns: Sequence[float], threshold: float) -> Estimate:
        return exceedance(slowdowns, threshold, level=self.level)


def analyse(plan: Plan, records: Sequence[RunRecord], unknowns: Sequence[Unknown], settings: Settings,
            deterministic: bool = False) -> dict[str, Any]:
    """The report's numbers and decision as plain data (see the module docstring). ``deterministic``:
    the seeds gave identical runs, so one run per scheme and variant stands for all of them."""
    metric = _metric(records)
    seeds_per_variant = {str(v.index): len({r.seed for r in records if r.arm == BASELINE and r.variant == v.index})
                         for v in plan.variants}
    if deterministic:
        first: dict[tuple[str, int], RunRecord] = {}
        for r in records:
            first.setdefault((r.arm, r.variant), r)
        records = list(first.values())
    st = _Stats(deterministic, settings.level)
    runs = _by(records)
    threshold = 1.0 + settings.slowdown_pct / 100.0
    arms_out = []
    overall: dict[str, Estimate] = {}
    per_variant: dict[str, dict[int, float]] = {}
    for arm in plan.arms:
        rows = []
        strata_ratios, strata_thr, slow_all = [], [], []
        strata_shares: dict[str, list[list[float]]] = {k: [] for k, _ in SHARES}
        strata_iter: dict[str, list[list[float]]] = {q: [] for q in ("p50", "p90", "p99")}
        strata_step, strata_stale, stale_max, prices = [], [], 0, []
        for v in plan.variants:
            mine, base = runs[(arm.key, v.index)], runs[(BASELINE, v.index)]
            ratios = [x for s, m in sorted(mine.items()) if s in base and (x := _speedup(metric, m, base[s])) is not None]
            thr = _values(mine, "throughput_samples_per_s")
            ceiling = plan.ceilings[v.index]
            speed = st.ratio(ratios)
            slow = st.exceed([1.0 / r for r in ratios], threshold)
            shares = {k: st.mean(_values(mine, k), 0.0, 1.0) for k, _ in SHARES}
            iters = {q: st.mean(_values(mine, f"iteration_{q}_s")) for q in ("p50", "p90", "p99")}
            price = cluster_price(plan.scenarios[(arm.key, v.index)], _workers(plan, arm.key, v.index), settings.prices)
            prices.append(price["usd_per_hour"])
            rows.append({
                "variant": v.index, "label": v.label, "seeds": len(mine),
                "speedup": est(speed), "throughput_samples_per_s": est(st.mean(thr, 0.0, ceiling)),
                "step_s": est(st.mean(_values(mine, "step_s"))),
                "iteration_s": {q: est(e) for q, e in iters.items()},
                "p_slowdown": est(slow),
                "time_shares": {name: est(shares[k]) for k, name in SHARES},
                "staleness_mean": est(st.mean(_values(mine, "staleness_mean"))),
                "usd_per_hour": num(price["usd_per_hour"]),
            })
            per_variant.setdefault(arm.key, {})[v.index] = speed.value
            strata_ratios.append(ratios)
            strata_thr.append(thr)
            slow_all += [1.0 / r for r in ratios]
            for k, _ in SHARES:
                strata_shares[k].append(_values(mine, k))
            for q in strata_iter:
                strata_iter[q].append(_values(mine, f"iteration_{q}_s"))
            strata_step.append(_values(mine, "step_s"))
            strata_stale.append(_values(mine, "staleness_mean"))
            stale_max = max([stale_max, *(int(m.get("staleness_max", 0)) for m in mine.values())])
        speed_all = st.strata(strata_ratios, ratio=True)
        thr_all = st.strata(strata_thr)
        overall[arm.key] = speed_all
        usd_per_hour = math.fsum(prices) / len(prices)
        hours = thr_all.map(lambda t: settings.samples / t / 3600.0 if t > 0 else math.inf)
        cost = hours.map(partial(_times, usd_per_hour))
        shares_all = {name: st.strata(strata_shares[k]) for k, name in SHARES}
        stale_all = st.strata(strata_stale)
        worst = min(per_variant[arm.key].items(), key=lambda kv: kv[1])
        best = max(per_variant[arm.key].items(), key=lambda kv: kv[1])
        arms_out.append({
            "scheme": arm.scheme, "name": display_name(arm.scheme), "label": arm.label, "family": arm.family,
            "baseline": arm.key == BASELINE,
            "speedup": est(speed_all), "throughput_samples_per_s": est(thr_all),
            "step_s": est(st.strata(strata_step)),
            "iteration_s": {q: est(st.strata(v)) for q, v in strata_iter.items()},
            "p_slowdown": est(st.exceed(slow_all, threshold)),
            "worst_variant": {"variant": worst[0], "speedup": num(worst[1])},
            "best_variant": {"variant": best[0], "speedup": num(best[1])},
            "time_shares": {name: est(e) for name, e in shares_all.items()},
            "staleness_mean": est(stale_all), "staleness_max": stale_max,
            "cost": {"usd_per_hour": num(usd_per_hour), "hours": est(hours), "usd": est(cost),
                     "lines": _price_lines(plan, arm.key, settings)},
            "per_variant": rows,
        })
    base_row = next(a for a in arms_out if a["baseline"])
    for a in arms_out:
        a["why"] = why_text(a, base_row)
    if metric == "time_to_target_s":
        _add_target_cost(arms_out, runs, plan, st)
    decision = decide(plan, per_variant, overall, unknowns, arms_out, metric)
    return {
        "metric": metric,
        "arms": arms_out,
        "decision": decision,
        "deterministic": deterministic,
        "seeds_per_variant": seeds_per_variant,
    }


def _workers(plan: Plan, arm: str, variant: int) -> Any:
    return resolve_run(plan.scenarios[(arm, variant)]).workers


def _price_lines(plan: Plan, arm: str, settings: Settings) -> list[dict[str, Any]]:
    first = plan.variants[0].index
    lines = cluster_price(plan.scenarios[(arm, first)], _workers(plan, arm, first), settings.prices)["lines"]
    return [{**line, "usd_per_hour": num(line["usd_per_hour"])} for line in lines]


def _add_target_cost(arms: list[dict[str, Any]], runs: Mapping[tuple[str, int], Mapping[int, dict[str, Any]]],
                     plan: Plan, st: _Stats) -> None:
    for a in arms:
        strata = [_values(runs[(a["scheme"], v.index)], "time_to_target_s") for v in plan.variants]
        t = st.strata(strata)
        rate = a["cost"]["usd_per_hour"] if a["cost"]["usd_per_hour"] is not None else math.nan
        a["cost"]["to_target_s"] = est(t)
        a["cost"]["to_target_usd"] = est(t.map(partial(_times, rate / 3600.0)))


def _times(factor: float, x: float) -> float:
    return factor * x


def _pct(e: dict[str, Any]) -> str:
    return f"{100 * (e['value'] or 0):.0f} %"


def why_text(arm: dict[str, Any], base: dict[str, Any]) -> str:
    """One paragraph: where the scheme's worker time goes, against the baseline's, and its staleness."""
    s, b = arm["time_shares"], base["time_shares"]
    parts = [f"{name} {_pct(s[name])}" for _, name in SHARES if (s[name]["value"] or 0) >= 0.005]
    text = f"{arm['name']}: workers spend their time on " + ", ".join(parts) + "."
    if not arm["baseline"]:
        losses = [(name, (s[name]["value"] or 0) - (b[name]["value"] or 0)) for _, name in SHARES if name != "compute"]
        cut = [f"{name} {_pct(b[name])} -> {_pct(s[name])}" for name, d in losses if d <= -0.02]
        grew = [f"{name} {_pct(b[name])} -> {_pct(s[name])}" for name, d in losses if d >= 0.02]
        if cut:
            text += f" Against {base['name']} it cuts " + "; ".join(cut) + "."
        if grew:
            text += " It spends more on " + "; ".join(grew) + "."
    else:
        lost = max(((name, s[name]["value"] or 0) for _, name in SHARES if name != "compute"), key=lambda kv: kv[1])
        if lost[1] >= 0.02:
            text += f" Its largest loss is {lost[0]} ({100 * lost[1]:.0f} % of worker time)."
    stale = arm["staleness_mean"]["value"] or 0.0
    if stale > 0:
        text += (f" Gradients are applied {stale:.1f} updates stale on average (at most {arm['staleness_max']}): "
                 "samples/s does not turn one for one into progress towards accuracy.")
    else:
        text += " Every gradient is applied to the model it was computed on (no staleness)."
    return text


def _best(per_variant: Mapping[str, Mapping[int, float]], variant: int) -> str:
    return max(per_variant, key=lambda a: (per_variant[a][variant], a == BASELINE))


def depends_on(plan: Plan, per_variant: Mapping[str, Mapping[int, float]], unknowns: Sequence[Unknown]) -> list[str]:
    """The keys that change the best scheme when they alone change."""
    best = {v.index: _best(per_variant, v.index) for v in plan.variants}
    keys = []
    for i, u in enumerate(unknowns):
        groups: dict[tuple[str, ...], set[str]] = {}
        for v in plan.variants:
            others = tuple(label for j, (_k, label) in enumerate(v.labels) if j != i)
            groups.setdefault(others, set()).add(best[v.index])
        if any(len(g) > 1 for g in groups.values()):
            keys.append(u.key)
    return keys


def decide(plan: Plan, per_variant: Mapping[str, Mapping[int, float]], overall: Mapping[str, Estimate],
           unknowns: Sequence[Unknown], arms: Sequence[dict[str, Any]],
           metric: str = "throughput_samples_per_s") -> dict[str, Any]:
    """Which scheme to use, how robust that is, and in words."""
    names = {a["scheme"]: a["name"] for a in arms}
    stale = {a["scheme"]: (a["staleness_mean"]["value"] or 0.0) for a in arms}
    best_per = {v.index: _best(per_variant, v.index) for v in plan.variants}
    best_expected = max(overall, key=lambda a: (overall[a].value, a == BASELINE))
    best_worst = max(per_variant, key=lambda a: (min(per_variant[a].values()), a == BASELINE))
    keys = [u.name for u in unknowns if u.key in depends_on(plan, per_variant, unknowns)]
    winners = sorted(set(best_per.values()))
    e = overall[best_expected]
    speed = f"{e.value:.2f}x" + (f" [{e.low:.2f}, {e.high:.2f}]" if e.low is not None and e.high is not None
                                  and e.low != e.high else "")
    than = ("the baseline's samples/s" if metric == "throughput_samples_per_s" else
            "as fast to the target accuracy as the baseline")
    labels = {v.index: v.short for v in plan.variants}
    several = len(plan.variants) > 1
    if len(winners) == 1:
        kind, choice = "robust", best_expected
        where = f"in every case tried ({len(plan.variants)} variants)" if several else "of the schemes tried"
        text = f"Use {names[choice]}: it is the fastest {where}, {speed} {than}" + (" on average." if several else ".")
        lo_v = min(per_variant[choice], key=lambda v: per_variant[choice][v])
        hi_v = max(per_variant[choice], key=lambda v: per_variant[choice][v])
        if several and per_variant[choice][hi_v] > 1.05 * per_variant[choice][lo_v]:
            text += (f" How much faster depends on {', '.join(u.name for u in unknowns) or 'the unknowns'}: "
                     f"{per_variant[choice][lo_v]:.2f}x ({labels[lo_v]}) to {per_variant[choice][hi_v]:.2f}x ({labels[hi_v]}).")
    elif best_expected == best_worst:
        kind, choice = "robust_choice", best_expected
        wins = "; ".join(f"{names[o]} in {', '.join(labels[v] for v in best_per if best_per[v] == o)}"
                         for o in sorted({best_per[v] for v in best_per if best_per[v] != choice}))
        text = (f"Use {names[choice]}: best on average ({speed} {than}) and best in its worst case "
                f"({min(per_variant[choice].values()):.2f}x), though others are faster in some cases "
                f"(which depends on {', '.join(keys) or 'the unknowns'}): {wins}.")
    else:
        kind, choice = "depends", best_worst
        text = (f"It depends on {', '.join(keys) or 'the unknowns'}: {names[best_expected]} is best on average "
                f"({speed} {than}), {names[best_worst]} in the worst case ({min(per_variant[best_worst].values()):.2f}x "
                f"against {min(per_variant[best_expected].values()):.2f}x). If you cannot pin "
                f"{'it' if len(keys) <= 1 else 'them'} down, {names[best_worst]} is the safe choice.")
    tied = [a for a in overall if a != best_expected and _overlap(overall[a], overall[best_expected])]
    if tied:
        det = e.low is not None and e.low == e.high
        text += (f" {', '.join(names[a] for a in tied)} {'does' if len(tied) == 1 else 'do'} as well." if det else
                 f" {', '.join(names[a] for a in tied)} {'is' if len(tied) == 1 else 'are'} within the interval of "
                 f"{names[best_expected]}: the data do not separate them.")
    fresh = [a for a in overall if stale[a] == 0]
    best_fresh = max(fresh, key=lambda a: (overall[a].value, a == BASELINE)) if fresh else None
    if stale.get(choice, 0) > 0 and best_fresh is not None:
        text += (f" {names[choice]} applies stale gradients ({stale[choice]:.1f} updates on average); the fastest "
                 f"scheme without staleness is {names[best_fresh]} ({overall[best_fresh].value:.2f}x).")
    return {
        "kind": kind, "choice": choice, "best_expected": best_expected, "best_worst_case": best_worst,
        "best_without_staleness": best_fresh, "best_per_variant": {str(k): v for k, v in best_per.items()},
        "depends_on": keys, "tied_with_best": tied, "text": text,
    }


def _overlap(a: Estimate, b: Estimate) -> bool:
    """Whether the intervals overlap (two points only when they are equal to 9 digits)."""
    if a.low is None or a.high is None or b.low is None or b.high is None:
        return False
    if a.low == a.high and b.low == b.high:
        return num(a.value) == num(b.value)
    return a.high >= b.low and b.high >= a.low
