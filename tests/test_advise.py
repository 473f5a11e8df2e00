"""lbsim advise end to end on small clusters: one baseline, paired figures, the decision, seeds, the files."""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lbsim.advise.command import write_report
from lbsim.advise.plan import ALLREDUCE, PARAMETER_SERVER
from lbsim.advise.run import Request, advise, prepare
from lbsim.cli import main
from lbsim.simulator.run import simulate

REPO = Path(__file__).resolve().parents[1]
NEWCOMER = dict(cluster="2xV100,2xT4", network="10gbps", colocated="slowdown=2 on 1 node", budget_s=20.0)


class Inline:
    """A backend that runs every task in this process, in order (the pools are tested in test_sweep_run)."""

    def map_unordered(self, fn: Callable[[Any], Any], items: Any) -> Iterator[tuple[str, Any]]:
        for key, payload in items:
            yield key, fn(payload)


def run(**kw: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    return advise(prepare(Request(**kw)), simulate, Inline())


@pytest.fixture(scope="module")
def newcomer() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    return run(**NEWCOMER, seeds=3)


def arm(report: dict[str, Any], scheme: str) -> dict[str, Any]:
    return next(a for a in report["arms"] if a["scheme"] == scheme)


def test_every_scheme_of_both_families_against_one_baseline(newcomer: Any) -> None:
    report, _rows = newcomer
    assert report["baseline"] == {"scheme": "bsp", "family": ALLREDUCE, "label": "BSP (all-reduce)"}
    families = {a["scheme"]: a["family"] for a in report["arms"]}
    assert families == {"bsp": ALLREDUCE, "static": ALLREDUCE, "lbbsp": ALLREDUCE, "loft": ALLREDUCE,
                        "asp": PARAMETER_SERVER, "ssp": PARAMETER_SERVER, "dssp": PARAMETER_SERVER,
                        "elastic_bsp": PARAMETER_SERVER, "wbsp": PARAMETER_SERVER}
    assert report["arms"][0]["scheme"] == "bsp" and report["arms"][0]["speedup"]["value"] == 1.0
    assert "workload.sample_cost" in report["skipped"]["bucketing"]  # without lengths it would be the baseline again
    assert any("parameter-server family: a derived server of 4 shards" in a for a in report["assumptions"])


def test_speedups_are_paired_ratios_and_the_decision_follows_them(newcomer: Any) -> None:
    report, rows = newcomer
    thr = {(r["scheme"], r["variant"], r["seed"]): r["throughput_samples_per_s"] for r in rows}
    for a in report["arms"]:
        for pv in a["per_variant"]:
            ratios = [thr[(a["scheme"], pv["variant"], s)] / thr[("bsp", pv["variant"], s)]
                      for (sch, v, s) in thr if sch == a["scheme"] and v == pv["variant"]]
            assert pv["speedup"]["value"] == pytest.approx(math.exp(sum(map(math.log, ratios)) / len(ratios)), rel=1e-6)
    best = report["decision"]["best_per_variant"]
    for v in report["variants"]:
        top = max(report["arms"], key=lambda a: a["per_variant"][v["index"]]["speedup"]["value"])
        assert top["per_variant"][v["index"]]["speedup"]["value"] == pytest.approx(
            arm(report, best[str(v["index"])])["per_variant"][v["index"]]["speedup"]["value"])
    d = report["decision"]
    worst = {a["scheme"]: min(pv["speedup"]["value"] for pv in a["per_variant"]) for a in report["arms"]}
    assert worst[d["best_worst_case"]] == pytest.approx(max(worst.values()))
    assert d["kind"] in ("robust", "robust_choice", "depends") and d["text"]


def test_the_contended_node_changes_the_baseline_and_the_report_shows_it(newcomer: Any) -> None:
    report, _rows = newcomer
    assert [v["label"] for v in report["variants"]] == ["where the co-located job runs: node 0 (V100)",
                                                        "where the co-located job runs: node 2 (T4)"]
    bsp = arm(report, "bsp")["per_variant"]
    assert bsp[0]["throughput_samples_per_s"]["value"] != bsp[1]["throughput_samples_per_s"]["value"]
    choice = arm(report, report["decision"]["choice"])
    assert choice["worst_variant"]["speedup"] < choice["best_variant"]["speedup"]


def test_seeds_that_change_nothing_are_not_repeated_and_no_interval_is_drawn(newcomer: Any) -> None:
    report, rows = newcomer
    assert report["deterministic"] is True
    assert report["seeds_per_variant"] == {"0": 2, "1": 2}
    assert {r["seed"] for r in rows} == {0, 1}
    for a in report["arms"]:
        s = a["speedup"]
        assert s["low"] == s["high"] == s["value"] and "deterministic" in s["method"]


def test_random_contention_gets_intervals_within_the_physical_range_and_more_seeds_where_wide() -> None:
    markov = ("contention=[{name: markov, workers: [0], mean_off_s: 4, mean_on_s: 4, slowdown_min: 1.5, "
              "slowdown_max: 4}]")
    report, rows = run(cluster="2xV100,2xT4", budget_s=20.0, overrides=(markov,), schemes="bsp,lbbsp,asp",
                       seeds=3, max_seeds=6, target_rel=1e-6)
    assert report["deterministic"] is False
    assert report["seeds_per_variant"] == {"0": 6}  # 3, then 3 more: the interval was wider than ±0.0001 %
    assert len(rows) == 3 * 6
    ceiling = report["variants"][0]["ideal_samples_per_s"]
    for a in report["arms"]:
        t = a["throughput_samples_per_s"]
        assert 0 <= t["low"] <= t["value"] <= t["high"] <= ceiling
        for share in a["time_shares"].values():
            assert 0 <= share["low"] <= share["high"] <= 1
        p = a["p_slowdown"]
        assert 0 <= p["low"] <= p["value"] <= p["high"] <= 1
        if a["scheme"] != "bsp":
            assert 0 < a["speedup"]["low"] < a["speedup"]["high"]


def test_one_seed_gives_no_interval_and_the_report_says_so(tmp_path: Path) -> None:
    report, rows = run(cluster="2xV100,2xT4", budget_s=20.0, schemes="bsp,asp", seeds=1)
    assert len(rows) == 2
    for a in report["arms"]:
        assert a["speedup"]["low"] is None and a["throughput_samples_per_s"]["high"] is None
        assert "no interval" in a["throughput_samples_per_s"]["method"]
    write_report(tmp_path, report, rows)
    assert "no interval" in (tmp_path / "advise.html").read_text(encoding="utf-8")


def test_ec2_mixed_asp_dssp_wbsp_lbbsp_against_one_baseline_in_one_table(tmp_path: Path) -> None:
    report, rows = run(scenario=str(REPO / "scenarios" / "ec2_mixed.yaml"), schemes="asp,dssp,wbsp,lbbsp", seeds=1,
                       overrides=("workload.time_budget_s=20",))
    assert [a["scheme"] for a in report["arms"]] == ["bsp", "asp", "dssp", "wbsp", "lbbsp"]
    assert [a["family"] for a in report["arms"]] == [ALLREDUCE, PARAMETER_SERVER, PARAMETER_SERVER, PARAMETER_SERVER,
                                                     ALLREDUCE]
    # ec2_mixed's own parameter server (4 shards) serves the PS schemes; BSP and LB-BSP run over an all-reduce
    assert any("4 x parameter-server shard" in line["what"] for line in arm(report, "asp")["cost"]["lines"])
    assert not any("shard" in line["what"] for line in arm(report, "lbbsp")["cost"]["lines"])
    write_report(tmp_path, report, rows)
    html = (tmp_path / "advise.html").read_text(encoding="utf-8")
    table = re.search(r'<table id="results".*?</table>', html, re.S)
    assert table is not None
    assert table.group(0).count("<tr") == 1 + 5
    for name in ("BSP (baseline)", "ASP", "DSSP", "WBSP", "LB-BSP"):
        assert name in table.group(0)


def test_cost_is_time_for_the_samples_times_the_price(newcomer: Any) -> None:
    report, _rows = newcomer
    n = report["settings"]["samples"]
    assert n == 1_281_167  # one ImageNet epoch for resnet50_imagenet
    bsp = arm(report, "bsp")
    per_hour = 2 * 3.06 + 2 * 0.526  # 2 p3.2xlarge + 2 g4dn.xlarge
    assert bsp["cost"]["usd_per_hour"] == pytest.approx(per_hour)
    hours = n / bsp["throughput_samples_per_s"]["value"] / 3600
    assert bsp["cost"]["hours"]["value"] == pytest.approx(hours, rel=1e-6)
    assert bsp["cost"]["usd"]["value"] == pytest.approx(hours * per_hour, rel=1e-6)
    asp = arm(report, "asp")  # + 4 parameter-server shards, one c5.18xlarge each
    assert asp["cost"]["usd_per_hour"] == pytest.approx(per_hour + 4 * 3.06)


def test_the_same_question_gives_the_same_report(newcomer: Any) -> None:
    again, rows = run(**NEWCOMER, seeds=3)
    assert json.dumps(again, sort_keys=True) == json.dumps(newcomer[0], sort_keys=True)
    assert rows == newcomer[1]


def test_the_command_writes_html_json_and_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "adv"
    code = main(["advise", "--cluster", "2xV100,2xT4", "--network", "10gbps", "--colocated", "slowdown=2 on 1 node",
                 "--budget-s", "10", "--schemes", "bsp,lbbsp,asp", "-j", "1", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0
    assert "cluster: 2x V100 -> p3.2xlarge (V100 16GB; one per node, 2 nodes)" in printed
    assert "cluster: 2x T4 -> g4dn.xlarge (T4 16GB; one per node, 2 nodes)" in printed
    report = json.loads((out / "advise.json").read_text(encoding="utf-8"))
    assert report["decision"]["text"] in printed
    html = (out / "advise.html").read_text(encoding="utf-8")
    embedded = re.search(r'<script type="application/json" id="advise-data">(.*?)</script>', html, re.S)
    assert embedded is not None and json.loads(embedded.group(1).replace("<\\/", "</")) == report
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//|@import|url\(""", html)  # nothing fetched
    with open(out / "runs.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 3 * 2 * 2  # 3 schemes x 2 variants x 2 seeds (the rest were identical: not run)
    assert {"scheme", "variant", "seed", "throughput_samples_per_s", "iteration_p99_s"} <= set(rows[0])


def test_with_numerics_on_the_schemes_are_ranked_by_time_to_target_and_its_cost_is_given() -> None:
    report, rows = run(scenario=str(REPO / "scenarios" / "dssp_table1.yaml"), schemes="bsp,asp", seeds=3)
    assert report["metric"] == "time_to_target_s"
    tta = {(r["scheme"], r["seed"]): r["time_to_target_s"] for r in rows}
    ratios = [tta[("bsp", s)] / tta[("asp", s)] for s in (11, 12, 13)]
    assert arm(report, "asp")["speedup"]["value"] == pytest.approx(math.exp(sum(map(math.log, ratios)) / 3), rel=1e-6)
    for a in report["arms"]:
        t, usd = a["cost"]["to_target_s"], a["cost"]["to_target_usd"]
        assert usd["value"] == pytest.approx(t["value"] / 3600 * a["cost"]["usd_per_hour"], rel=1e-6)
    assert "as fast to the target accuracy as the baseline" in report["decision"]["text"]


def test_an_instance_without_a_list_price_has_an_unknown_cost_unless_given() -> None:
    report, _rows = run(cluster="8xH200", budget_s=10.0, schemes="bsp", seeds=1)
    cost = arm(report, "bsp")["cost"]
    assert cost["usd_per_hour"] is None and cost["usd"]["value"] is None
    assert "--price p5e.48xlarge=USD_PER_HOUR" in cost["lines"][0]["source"]
    report, _rows = run(cluster="8xH200", budget_s=10.0, schemes="bsp", seeds=1, prices=("p5e.48xlarge=80",))
    assert arm(report, "bsp")["cost"]["usd_per_hour"] == pytest.approx(80.0)


def test_length_bucketing_is_advised_where_samples_differ_in_cost() -> None:
    prepared = prepare(Request(scenario=str(REPO / "scenarios" / "seqlen_mixed.yaml"), schemes="bucketing,lbbsp",
                               seeds=1, budget_s=5.0))
    assert [a.key for a in prepared.plan.arms] == ["bsp", "bucketing", "lbbsp"] and not prepared.plan.skipped


def test_a_planned_runs_text_reads_back_as_the_resolved_scenario() -> None:
    """The plan's runs travel as libyaml-written text; read back on a worker they are the same data, and the
    same scenario, as the resolved scenario file's text read by the scenario-file parser."""
    from lbsim.advise.run_text import read_run_text, run_text
    from lbsim.errors import InputError
    from lbsim.scenario.loader import dump_scenario, load_scenario, scenario_from_data
    from lbsim.scenario.overrides import parse_yaml

    odd = ['description="1e5 — ü: yes, #no, \'q\' ' + "x " * 80 + '"',  # strings the emitters must quote or escape
           "seed=12345678901234567", "workload.time_budget_s=1e-300"]  # and numbers at the ranges' ends
    scenarios = [load_scenario(REPO / "scenarios" / "ec2_mixed.yaml", odd)]
    for path in sorted((REPO / "scenarios").rglob("*.yaml")):
        try:
            scenarios.append(load_scenario(path))
        except InputError:
            continue  # a sweep file
    assert len(scenarios) >= 15
    for sc in scenarios:
        data = read_run_text(run_text(sc))
        assert data == parse_yaml(dump_scenario(sc))
        assert scenario_from_data(data) == scenario_from_data(parse_yaml(dump_scenario(sc)))
