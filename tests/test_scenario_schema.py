"""The scenario schema: resolved scenarios round-trip, defaults are filled, --scheme keeps or resets parameters."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from lbsim.cli import main
from lbsim.contention.config import TraceContention
from lbsim.fields import to_data
from lbsim.scenario.loader import dump_scenario, load_scenario, scenario_data, scenario_from_data, with_scheme
from lbsim.scenario.schema import Scenario
from lbsim.scenario.sections import ParameterServerConfig, Workload
from lbsim.schemes.bsp import BSPConfig
from lbsim.schemes.ssp import SSPConfig

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = sorted(
    p for p in (REPO / "scenarios").glob("**/*.yaml") if "sweeps" not in p.relative_to(REPO / "scenarios").parts
)


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: str(p.relative_to(REPO / "scenarios")))
def test_round_trip(path: Path, tmp_path: Path) -> None:
    """dump(load(f)) loaded again -- from another directory -- is the same Scenario."""
    original = load_scenario(path)
    resolved = tmp_path / "elsewhere" / "resolved.yaml"
    resolved.parent.mkdir()
    resolved.write_text(dump_scenario(original), encoding="utf-8")
    again = load_scenario(resolved)
    assert again == original
    assert dump_scenario(again) == dump_scenario(original)  # a fixed point
    assert scenario_from_data(yaml.safe_load(dump_scenario(original))) == original


def test_round_trip_keeps_trace_paths(tmp_path: Path) -> None:
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "t.csv").write_text("time_s,worker,slowdown\n0,0,2\n10,0,1\n", encoding="utf-8")
    f = tmp_path / "s.yaml"
    f.write_text("cluster: {groups: [{instance: g4dn.xlarge, count: 2}]}\n"
                 "workload: {global_batch: 64, updates: 2}\n"
                 "contention: [{name: trace, path: traces/t.csv, workers: [0]}]\n", encoding="utf-8")
    sc = load_scenario(f)
    (item,) = sc.contention
    assert isinstance(item, TraceContention)
    assert Path(item.path).is_absolute() and Path(item.path) == (tmp_path / "traces" / "t.csv").resolve()
    other = tmp_path / "other"
    other.mkdir()
    (other / "r.yaml").write_text(dump_scenario(sc), encoding="utf-8")
    assert load_scenario(other / "r.yaml") == sc


def test_defaults_are_filled(tmp_path: Path) -> None:
    f = tmp_path / "minimal.yaml"
    f.write_text("cluster: {groups: [{instance: g4dn.xlarge, count: 8}]}\n", encoding="utf-8")
    sc = load_scenario(f)
    assert sc.seed == 0 and sc.name == "" and sc.description == ""
    assert sc.workload == Workload()
    assert sc.network == ParameterServerConfig()
    assert sc.contention == ()
    assert sc.scheme == BSPConfig()
    group = sc.cluster.groups[0]
    assert group.count == 8 and group.jitter_cv == 0.0 and group.samples_per_s is None
    data = scenario_data(sc)
    assert list(data) == ["name", "description", "seed", "workload", "cluster", "network", "contention", "scheme",
                          "numerics"]
    assert data["numerics"]["enabled"] is False and data["numerics"]["dataset"] == "digits"
    assert data["network"] == {"name": "parameter_server", "shards": 1, "server_bandwidth_gbps": 25.0,
                               "apply_s": 0.005, "latency_s": 0.0001}
    assert data["scheme"] == {"name": "bsp", "backup_workers": 0}
    assert set(data["workload"]) == {"model", "global_batch", "updates", "time_budget_s", "samples", "gradient_bytes"}
    assert set(data["cluster"]["groups"][0]) == {"instance", "count", "t0_s", "samples_per_s", "max_batch",
                                                 "bandwidth_gbps", "jitter_cv"}


def test_to_data_names_polymorphic_sections() -> None:
    sc = Scenario(cluster=scenario_from_data({"cluster": {"groups": [{"instance": "g4dn.xlarge", "count": 8}]}}).cluster,
                  scheme=SSPConfig(staleness=2))
    assert to_data(sc)["scheme"] == {"name": "ssp", "staleness": 2}


SSP_FILE = """\
cluster: {groups: [{instance: g4dn.xlarge, count: 4}]}
workload: {global_batch: 256, updates: 3}
scheme: {name: ssp, staleness: 2}
"""


def test_with_scheme_keeps_parameters_of_the_same_scheme(tmp_path: Path) -> None:
    f = tmp_path / "ssp.yaml"
    f.write_text(SSP_FILE, encoding="utf-8")
    assert load_scenario(f).scheme == SSPConfig(staleness=2)
    assert load_scenario(f, scheme="ssp").scheme == SSPConfig(staleness=2)
    assert load_scenario(f, scheme="bsp").scheme == BSPConfig()


def test_with_scheme_resets_parameters_for_another_scheme(tmp_path: Path) -> None:
    f = tmp_path / "bsp.yaml"
    f.write_text(SSP_FILE.replace("{name: ssp, staleness: 2}", "{name: bsp, backup_workers: 1}"), encoding="utf-8")
    assert load_scenario(f, scheme="ssp").scheme == SSPConfig()  # the default staleness, not bsp's parameters
    assert load_scenario(f, scheme="bsp").scheme == BSPConfig(backup_workers=1)


def test_with_scheme_on_plain_data() -> None:
    data = {"seed": 1, "scheme": {"name": "ssp", "staleness": 2}}
    assert with_scheme(data, "ssp") == data
    assert with_scheme(data, "asp") == {"seed": 1, "scheme": {"name": "asp"}}
    assert with_scheme({"scheme": "ssp"}, "ssp") == {"scheme": "ssp"}
    assert with_scheme({}, "bsp") == {"scheme": {"name": "bsp"}}
    assert data == {"seed": 1, "scheme": {"name": "ssp", "staleness": 2}}  # not mutated


def test_scheme_option_then_overrides(tmp_path: Path) -> None:
    """--scheme switches first, so --set scheme.<param> applies to the scheme that runs."""
    f = tmp_path / "bsp.yaml"
    f.write_text(SSP_FILE.replace("{name: ssp, staleness: 2}", "{name: bsp}"), encoding="utf-8")
    assert load_scenario(f, ["scheme.staleness=1"], scheme="ssp").scheme == SSPConfig(staleness=1)
    g = tmp_path / "ssp.yaml"
    g.write_text(SSP_FILE, encoding="utf-8")
    assert load_scenario(g, ["scheme.staleness=5"], scheme="ssp").scheme == SSPConfig(staleness=5)


def test_scheme_shorthand_string(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(SSP_FILE.replace("{name: ssp, staleness: 2}", "ssp"), encoding="utf-8")
    assert load_scenario(f).scheme == SSPConfig()


def test_yaml_merge_keys_are_not_duplicates(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("cluster:\n  groups:\n    - &t4 {instance: g4dn.xlarge, count: 2}\n    - {<<: *t4, count: 3}\n"
                 "workload: {global_batch: 64, updates: 2}\n", encoding="utf-8")
    assert [g.count for g in load_scenario(f).cluster.groups] == [2, 3]


def test_int_where_float_is_expected_loads_as_float(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(SSP_FILE + "network: {name: parameter_server, server_bandwidth_gbps: 10}\n", encoding="utf-8")
    sc = load_scenario(f)
    assert isinstance(sc.network.server_bandwidth_gbps, float)  # type: ignore[union-attr]
    assert load_scenario(f, ["cluster.groups.0.count=4.0"]).cluster.groups[0].count == 4


def test_resolved_yaml_written_by_run_loads_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = REPO / "scenarios" / "ec2_mixed.yaml"
    out = tmp_path / "run"
    sets = ["workload.time_budget_s=30", "scheme.backup_workers=1"]
    assert main(["run", str(src), "--out", str(out), "-q", *[a for s in sets for a in ("--set", s)]]) == 0
    capsys.readouterr()
    resolved = out / "scenario.resolved.yaml"
    assert load_scenario(resolved) == load_scenario(src, sets)
    data = yaml.safe_load(resolved.read_text(encoding="utf-8"))
    assert data["scheme"] == {"name": "bsp", "backup_workers": 1}
    assert data["workload"]["time_budget_s"] == 30
