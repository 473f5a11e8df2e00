"""lbsim advise's input: the cluster line, --vary, --colocated, prices; bad input is one line, exit 2, nothing run."""

from __future__ import annotations

from pathlib import Path

import pytest

from lbsim.advise.cluster import GPU_INSTANCES, cluster_data, parse_bandwidth_gbps, parse_cluster
from lbsim.advise.cost import parse_prices
from lbsim.advise.plan import scheme_family
from lbsim.advise.run import Request, prepare
from lbsim.advise.unknowns import parse_colocated, parse_vary, split_values
from lbsim.cli import main
from lbsim.errors import InputError
from lbsim.scenario import catalog
from lbsim.scenario.loader import scenario_from_data
from lbsim.scenario.prices import PRICES
from lbsim.scenario.resolve import resolve_run

REPO = Path(__file__).resolve().parents[1]
EC2 = str(REPO / "scenarios" / "ec2_mixed.yaml")


def test_gpu_names_map_to_catalog_instances_and_the_mapping_is_stated() -> None:
    items = parse_cluster("4xV100, 4*t4,2xA100,g5.xlarge")
    assert [(i.name, i.instance, i.count) for i in items] == [
        ("V100", "p3.2xlarge", 4), ("T4", "g4dn.xlarge", 4), ("A100", "p4d.24xlarge", 2), ("g5.xlarge", "g5.xlarge", 1)]
    assert items[0].mapping() == "4x V100 -> p3.2xlarge (V100 16GB; one per node, 4 nodes)"
    assert parse_cluster("16xH200")[0].mapping() == "16x H200 -> p5e.48xlarge (H200 141GB; 8 per node, 2 nodes)"
    assert items[2].mapping() == "2x A100 -> p4d.24xlarge (A100 40GB; 2 per node, 1 node)"
    assert all(v in catalog.INSTANCES for v in GPU_INSTANCES.values())


def test_the_cluster_line_builds_a_scenario_with_the_network_on_every_node() -> None:
    items = parse_cluster("4xV100,4xT4")
    data = cluster_data(items, model="resnet50_imagenet", bandwidth_gbps=10.0, budget_s=60.0, global_batch=None)
    workers = resolve_run(scenario_from_data(data)).workers
    assert [w.instance for w in workers] == ["p3.2xlarge"] * 4 + ["g4dn.xlarge"] * 4
    assert {w.bandwidth_gbps for w in workers} == {10.0}
    assert len({w.node for w in workers}) == 8
    assert data["workload"]["global_batch"] == 8 * 128


@pytest.mark.parametrize(("text", "gbps"), [("10gbps", 10.0), ("25 Gbit/s", 25.0), ("100mbps", 0.1), ("40", 40.0),
                                            ("1.5e1gbps", 15.0)])
def test_bandwidths(text: str, gbps: float) -> None:
    assert parse_bandwidth_gbps(text) == pytest.approx(gbps)


def test_vary_values_split_outside_brackets_and_parse_as_yaml() -> None:
    assert split_values("[0],[4, 5],{a: 1},'x,y'") == ["[0]", "[4, 5]", "{a: 1}", "'x,y'"]
    u = parse_vary("contention.0.workers=[0],[4]")
    assert u.key == "contention.0.workers" and u.values == ([0], [4]) and u.labels == ("[0]", "[4]")


def test_colocated_grammar() -> None:
    c = parse_colocated("slowdown=2 on 1 node")
    assert (c.slowdown, c.target, c.count, c.nodes) == (2.0, "compute", 1, None)
    c = parse_colocated("slowdown=3 target=both end_s=60 on node 2,5")
    assert (c.target, c.end_s, c.nodes) == ("both", 60.0, (2, 5))
    assert parse_colocated("slowdown=1.5 on all").everywhere


def test_colocated_on_an_unknown_node_is_varied_over_one_node_per_group() -> None:
    p = prepare(Request(cluster="4xV100,4xT4", colocated="slowdown=2 on 1 node", seeds=1))
    assert [v.short for v in p.plan.variants] == ["node 0 (V100)", "node 4 (T4)"]
    assert p.unknowns[0].key == "contention.0.workers" and p.unknowns[0].values == ([0], [4])
    p2 = prepare(Request(cluster="2xV100,2xT4", colocated="slowdown=2 on 2 nodes", seeds=1))
    assert [v.short for v in p2.plan.variants] == ["nodes 0, 1 (V100, V100)", "nodes 0, 2 (V100, T4)", "nodes 2, 3 (T4, T4)"]


def test_families_follow_the_core_rule() -> None:
    base = scenario_from_data(cluster_data(parse_cluster("2xV100,2xT4"), model="resnet50_imagenet", bandwidth_gbps=10.0,
                                           budget_s=60.0, global_batch=None))
    assert {scheme_family(s, base) for s in ("bsp", "static", "lbbsp", "loft")} == {"ring_allreduce"}
    assert {scheme_family(s, base) for s in ("asp", "ssp", "dssp", "elastic_bsp", "wbsp")} == {"parameter_server"}
    # the baseline is plain DDP whatever the scenario's bsp says; another bsp setting with backup workers needs a server
    assert scheme_family("bsp", base, ["scheme.backup_workers=1"]) == "ring_allreduce"


def test_the_parameter_server_family_gets_the_cores_derived_server() -> None:
    p = prepare(Request(cluster="2xV100,2xT4", network="10gbps", seeds=1, schemes="bsp,asp"))
    net = p.plan.scenarios[("asp", 0)].network
    assert (net.kind, net.shards, net.server_bandwidth_gbps) == ("parameter_server", 4, 10.0)
    assert p.plan.scenarios[("bsp", 0)].network.kind == "ring_allreduce"
    assert any(a.startswith("parameter-server family: a derived server of 4 shards") for a in p.assumptions)


def test_prices_are_dated_and_sourced_and_a_missing_one_is_unknown_not_guessed() -> None:
    assert set(PRICES) <= set(catalog.INSTANCES)
    assert set(catalog.INSTANCES) - set(PRICES) <= {"p5e.48xlarge"}  # a new instance needs a sourced price here
    for p in PRICES.values():
        assert p.usd_per_hour > 0 and "us-east-1" in p.source and "2024" in p.source
    assert parse_prices(["p3.2xlarge=2.5", "server=0"]) == {"p3.2xlarge": 2.5, "server": 0.0}


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> tuple[int, str]:
    code = main(["advise", *args, "--out", str(tmp_path / "out"), "-q"])
    err = capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # nothing written
    return code, err


@pytest.mark.parametrize(("args", "expect"), [
    (["--cluster", "4xV100,4xH100"], "--cluster: unknown GPU or instance 'H100'; known GPU names: H200, A100, V100"),
    (["--cluster", "4xV100,,2xT4"], "--cluster: expected COUNTxNAME items"),
    (["--cluster", "4xV100", "--network", "fast"], "--network: expected a bandwidth such as 10gbps"),
    (["--cluster", "4xV100", "--colocated", "slowdown=2 on 9 nodes"], "--colocated: 9 nodes, but the cluster has 4"),
    (["--cluster", "4xV100", "--colocated", "slowdown=0.5 on 1 node"], "--colocated slowdown: expected a factor >= 1"),
    (["--cluster", "4xV100", "--colocated", "slowdown=2 on node 7"], "--colocated: node 7 does not exist; valid: 0..3"),
    (["--cluster", "4xV100", "--vary", "network.bandwith_gbps=5,10"],
     "--vary network.bandwith_gbps: unknown key (did you mean 'bandwidth_gbps'?)"),
    (["--cluster", "4xV100", "--vary", "contention.3.slowdown=2,3"], "--vary contention.3.slowdown: list index out of range; valid: 0..-1 (the list has 0 items)"),
    (["--cluster", "4xV100", "--vary", "workload.global_batch=0,64"], "--vary workload.global_batch:"),
    (["--cluster", "4xV100", "--vary", "seed"], "--vary: expected KEY=v1,v2,..."),
    (["--cluster", "4xV100", "--vary", "seed=1,1"], "--vary seed: a value is listed twice"),
    (["--cluster", "4xV100", "--schemes", "bsp,aspp"], "--schemes: unknown scheme 'aspp' (did you mean 'asp'?)"),
    (["--cluster", "4xV100", "--price", "p9.xlarge=3"], "--price: expected INSTANCE=USD_PER_HOUR"),
    (["--cluster", "4xV100", "--seeds", "0"], "--seeds: expected 1..100 seeds"),
    (["--cluster", "4xV100", "--model", "gpt5"], "--model: unknown model 'gpt5'"),
    (["--cluster", "4xM60", "--model", "bert_base_squad"], "--cluster: the catalog has no figures for bert_base_squad"),
    ([EC2, "--cluster", "4xV100"], "give a scenario file or --cluster (one of them)"),
    ([], "give a scenario file or --cluster (one of them)"),
    ([EC2, "--vary", "network.shards=1,x"], "--vary network.shards:"),
    ([EC2, "--set", "workload.nope=1"], "workload.nope: unknown key"),
    ([EC2, "-j", "0"], "-j: expected a number of worker processes >= 1"),
])
def test_bad_input_is_one_line_exit_2_naming_the_option(args: list[str], expect: str, capsys: pytest.CaptureFixture[str],
                                                        tmp_path: Path) -> None:
    code, err = run_cli(args, capsys, tmp_path)
    assert code == 2
    assert expect in err, err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_unknown_gpu_lists_every_known_name(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    _code, err = run_cli(["--cluster", "2xB200"], capsys, tmp_path)
    for name in [*GPU_INSTANCES, *catalog.INSTANCES]:
        assert name in err


def test_a_vary_key_valid_only_with_a_parameter_server_is_named_when_the_scenario_has_none() -> None:
    with pytest.raises(InputError, match=r"^--vary network.shards: unknown key"):
        prepare(Request(cluster="2xV100", vary=("network.shards=2,4",)))
