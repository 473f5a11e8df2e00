"""The run lifecycle (lbsim/lifecycle): every front door shares it and its guards.

One test per guard through each door: the command line (``lbsim run``/``compare``/``sweep``), the
Python API (``lbsim.simulate``/``lbsim.compare`` and ``.save``) and sweeps (``load_sweep``, the
sweep's expansion every sweep goes through). Each refusal is an InputError (exit 2 on the command
line) with the same message, before anything runs or is written. Then the engine contract (a fake
engine goes through the lifecycle) and the cross-family compare with one baseline.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

import lbsim
from lbsim import lifecycle
from lbsim.cli import main
from lbsim.engine import RunResult
from lbsim.errors import InputError
from lbsim.lifecycle.families import network_variant
from lbsim.metrics.records import IterationTable, UpdateTable
from lbsim.metrics.summary import compare_columns
from lbsim.scenario.loader import load_scenario
from lbsim.scenario.sections import AllReduceConfig, ParameterServerConfig
from lbsim.sweep import load_sweep

# Four workers on all-reduce, ResNet-18: a run of 16 updates takes well under a second.
TINY = {
    "name": "tiny", "seed": 3,
    "workload": {"model": "resnet18_cifar10", "global_batch": 256, "updates": None, "samples": 4096},
    "cluster": {"groups": [{"instance": "p3.2xlarge", "count": 2}, {"instance": "g4dn.xlarge", "count": 2}]},
    "network": {"name": "ring_allreduce", "alpha_s": 0.0002},
    "scheme": {"name": "bsp"},
}
UNEQUAL = {"workload.samples": None, "workload.updates": 5}  # a stop by updates: bsp's holds 4x asp's work
TOO_MANY = {"workload.samples": None, "workload.updates": 2**25}  # x 4 workers: past MAX_WORKER_ITERATIONS


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY, sort_keys=False), encoding="utf-8")
    return path


def cli(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, err.getvalue()


def sets(overrides: dict[str, Any]) -> list[str]:
    return [a for k, v in overrides.items() for a in ("--set", f"{k}={json.dumps(v)}")]


def refused_by_cli(*argv: str) -> str:
    """The one-line message of a command that must exit 2, without the ``lbsim: error:`` prefix."""
    rc, err = cli(*argv)
    assert rc == 2, err
    assert len(err.strip().splitlines()) == 1
    return err.strip().removeprefix("lbsim: error: ")


def refused(call: Any) -> str:
    with pytest.raises(InputError) as info:
        call()
    return str(info.value)


def sweep_file(folder: Path, base: Path, factors: dict[str, Any], fixed: dict[str, Any] | None = None) -> Path:
    path = folder / "sw.yaml"
    data = {"name": "sw", "base": str(base), "set": fixed or {}, "factors": factors}
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


# --- guard: scheme names -------------------------------------------------------------------------

def test_unknown_scheme_is_refused_through_every_door(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    msg = "unknown scheme 'bspp' (did you mean 'bsp'?); valid: "
    assert refused_by_cli("run", str(tiny), "--scheme", "bspp", "--out", str(out)).startswith(f"--scheme: {msg}")
    assert refused_by_cli("compare", str(tiny), "--schemes", "bsp,bspp", "--out", str(out)).startswith(f"--schemes: {msg}")
    assert refused_by_cli("compare", str(tiny), "--schemes", "bsp", "--baseline", "bspp").startswith(f"--baseline: {msg}")
    assert refused(lambda: lbsim.simulate(tiny, scheme="bspp")).startswith(f"scheme: {msg}")
    assert refused(lambda: lbsim.compare(tiny, ["bsp", "bspp"])).startswith(f"schemes: {msg}")
    assert refused(lambda: lbsim.compare(tiny, "bsp,bspp")).startswith(f"schemes: {msg}")
    # a sweep names schemes inside the scenario: the parser's check, with the same words
    sweep = sweep_file(tmp_path, tiny, {"scheme": ["bsp", "bspp"]})
    assert "scheme.name: unknown 'bspp' (did you mean 'bsp'?); valid: " in refused(lambda: load_sweep(sweep))
    assert "scheme.name: unknown 'bspp'" in refused_by_cli("sweep", str(sweep), "--out", str(out))
    assert not out.exists()


def test_scheme_lists_are_a_string_or_a_sequence_of_distinct_names(tiny: Path) -> None:
    by_string = lbsim.compare(tiny, "bsp, lbbsp")
    by_list = lbsim.compare(tiny, ("bsp", "lbbsp"))
    assert list(by_string.runs) == list(by_list.runs) == ["bsp", "lbbsp"]
    assert by_string.table.equals(by_list.table)
    assert refused(lambda: lbsim.compare(tiny, ["bsp", "bsp"])) == "schemes: a scheme is listed twice: bsp,bsp"
    assert refused(lambda: lbsim.compare(tiny, "")).startswith("schemes: give a comma-separated list")
    assert refused_by_cli("compare", str(tiny), "--schemes", "bsp,bsp") == "--schemes: a scheme is listed twice: bsp,bsp"
    with pytest.raises(TypeError, match="schemes: expected scheme names as a comma-separated string or a sequence"):
        lbsim.compare(tiny, [1, 2])  # type: ignore[list-item]


# --- guard: equal work ---------------------------------------------------------------------------

def test_a_stop_by_updates_across_unequal_work_is_refused_through_every_door(tiny: Path, tmp_path: Path) -> None:
    """The issue's bug: lbsim.compare used to return bsp 4x asp's samples where the CLI refused."""
    out = tmp_path / "out"
    by_cli = refused_by_cli("compare", str(tiny), "--schemes", "bsp,asp", "--cross-family", *sets(UNEQUAL), "--out", str(out))
    by_api = refused(lambda: lbsim.compare(tiny, "bsp,asp", overrides=UNEQUAL, cross_family=True))
    assert by_api == by_cli  # exactly as the CLI does
    assert by_cli.startswith("workload.updates: stopping every scheme at 5 model updates compares different work (bsp: ")
    assert "asp: one worker's push" in by_cli and "workload.samples=N" in by_cli
    # the issue's own example, on a parameter-server scenario, without a cross-family compare
    ec2 = Path(__file__).resolve().parents[1] / "scenarios" / "ec2_mixed.yaml"
    issue = {"workload.time_budget_s": None, "workload.updates": 50}
    assert refused(lambda: lbsim.compare(ec2, "bsp,asp", overrides=issue)) == \
        refused_by_cli("compare", str(ec2), "--schemes", "bsp,asp", *sets(issue))
    # a sweep comparing schemes point by point: the same guard, per group of points that differ in the scheme
    on_ps = {"network": {"name": "parameter_server"}, **UNEQUAL}
    sweep = sweep_file(tmp_path, tiny, {"scheme": ["bsp", "lbbsp", "asp"], "seed": [1, 2]}, on_ps)
    same = refused(lambda: lbsim.compare(tiny, "bsp,lbbsp,asp", overrides=on_ps))
    assert refused(lambda: load_sweep(sweep)) == f"{sweep}: {same}"
    assert refused_by_cli("sweep", str(sweep), "--out", str(out)) == f"{sweep}: {same}"
    assert not out.exists()
    # equal work per update (bsp, lbbsp) may stop by updates, through every door
    lbsim.compare(tiny, "bsp,lbbsp", overrides=UNEQUAL)
    assert cli("compare", str(tiny), "--schemes", "bsp,lbbsp", *sets(UNEQUAL), "--out", str(out), "-q")[0] == 0
    load_sweep(sweep_file(tmp_path, tiny, {"scheme": ["bsp", "lbbsp"]}, UNEQUAL))


# --- guard: the output folder --------------------------------------------------------------------

def test_an_out_that_is_a_file_is_refused_through_every_door(tiny: Path, tmp_path: Path) -> None:
    file = tmp_path / "a_file"
    file.write_text("x", encoding="utf-8")
    inside = file / "run"  # a path under a file: its nearest existing parent is not a directory
    msg = f"{file} exists and is not a directory; give a directory path"
    for out in (file, inside):
        assert refused_by_cli("run", str(tiny), "--out", str(out)) == f"--out: {msg}"
        assert refused_by_cli("compare", str(tiny), "--schemes", "bsp", "--out", str(out)) == f"--out: {msg}"
        assert refused_by_cli("sweep", str(sweep_file(tmp_path, tiny, {"seed": [1]})), "--out", str(out)) == f"--out: {msg}"
        assert refused(lambda out=out: lbsim.simulate(tiny).save(out)) == f"out: {msg}"
        assert refused(lambda out=out: lbsim.compare(tiny, "bsp").save(out)) == f"out: {msg}"
    assert file.read_text(encoding="utf-8") == "x"


# --- guard: bounds -------------------------------------------------------------------------------

def test_bounds_are_checked_through_every_door(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    by_cli = refused_by_cli("run", str(tiny), *sets(TOO_MANY), "--out", str(out))
    assert by_cli.startswith("workload.updates: 33554432 updates x 4 workers plan 134217728 worker-iterations, more than the bound")
    assert refused_by_cli("compare", str(tiny), "--schemes", "bsp,lbbsp", *sets(TOO_MANY), "--out", str(out)).startswith(by_cli)
    assert refused(lambda: lbsim.simulate(tiny, overrides=TOO_MANY)) == by_cli
    assert refused(lambda: lbsim.compare(tiny, "bsp,lbbsp", overrides=TOO_MANY)).startswith(by_cli)
    # a Scenario built by hand gets the checks a file gets
    loaded = load_scenario(tiny)
    by_hand = replace(loaded, workload=replace(loaded.workload, samples=None, updates=2**25))
    assert refused(lambda: lbsim.simulate(by_hand)) == by_cli
    sweep = sweep_file(tmp_path, tiny, {"scheme": ["bsp", "lbbsp"]}, TOO_MANY)
    assert by_cli in refused(lambda: load_sweep(sweep))
    assert by_cli in refused_by_cli("sweep", str(sweep), "--out", str(out))
    assert refused_by_cli("sweep", str(sweep), "-j", "0", "--out", str(out)).startswith("-j: expected a number of worker processes >= 1")
    assert not out.exists()


# --- the engine contract -------------------------------------------------------------------------

def test_a_fake_engine_goes_through_the_whole_lifecycle(tiny: Path, tmp_path: Path) -> None:
    """Anything that satisfies lbsim.engine.Engine runs through the lifecycle and is written like the simulator."""
    calls = []

    def engine(scenario: Any, progress: Any = None) -> RunResult:
        calls.append(scenario.scheme.kind)
        its = IterationTable.from_records([])
        ups = UpdateTable.from_records([])
        rate = {"bsp": 100.0, "lbbsp": 150.0}[scenario.scheme.kind]
        return RunResult(its, ups, {"scheme": scenario.scheme.kind, "seed": scenario.seed, "engine": "fake",
                                    "throughput_samples_per_s": rate})

    spec = lifecycle.plan_run(tiny, scheme="lbbsp")
    outcome = lifecycle.run(spec, tmp_path / "run", engine=engine, argv=["test"])
    assert calls == ["lbbsp"] and outcome.path == tmp_path / "run"
    assert json.loads((tmp_path / "run" / "summary.json").read_text(encoding="utf-8"))["engine"] == "fake"
    assert {"scenario.resolved.yaml", "invocation.json", "iterations.csv", "updates.csv", "provenance.json"} <= \
        {p.name for p in (tmp_path / "run").iterdir()}
    plan = lifecycle.plan_compare(tiny, "bsp,lbbsp")
    done = lifecycle.compare(plan, tmp_path / "cmp", engine=engine)
    assert calls == ["lbbsp", "bsp", "lbbsp"] and [r["scheme"] for r in done.rows] == ["bsp", "lbbsp"]
    assert [r["speedup_vs_baseline"] for r in done.rows] == [1.0, 1.5]
    assert (tmp_path / "cmp" / "compare.csv").is_file()


# --- cross-family compare ------------------------------------------------------------------------

def test_network_variant_rules() -> None:
    """The documented rules (lbsim/lifecycle/families.py), as pure functions of the scenario."""
    from lbsim.fields import parse
    from lbsim.scenario.schema import Scenario

    ring = parse(Scenario, {**TINY, "cluster": {"groups": [{"instance": "p3.2xlarge", "count": 2, "bandwidth_gbps": 7},
                                                           {"instance": "g4dn.12xlarge", "count": 4, "workers_per_node": 2,
                                                            "bandwidth_gbps": 3}]}})
    ps = network_variant(ring, "parameter_server")
    assert ps.network == ParameterServerConfig(shards=4, server_bandwidth_gbps=7.0, latency_s=0.0002)  # 2 + 2 nodes
    assert ps.cluster == ring.cluster and ps.workload == ring.workload and ps.seed == ring.seed
    assert network_variant(ring, "ring_allreduce") is ring
    every_nic = replace(ring, network=AllReduceConfig(alpha_s=0.0002, bandwidth_gbps=9.0))
    ps9 = network_variant(every_nic, "parameter_server")
    assert ps9.network.server_bandwidth_gbps == 9.0  # type: ignore[union-attr]
    assert [g.bandwidth_gbps for g in ps9.cluster.groups] == [9.0, 9.0]  # the workers keep the links they had
    back = network_variant(ps, "ring_allreduce")
    assert back.network == AllReduceConfig(alpha_s=0.0002)


def test_cross_family_compare_has_one_baseline_bsp_over_allreduce(tiny: Path, tmp_path: Path) -> None:
    comparison = lbsim.compare(tiny, "lbbsp,asp,ssp", cross_family=True)
    table = comparison.table
    assert comparison.baseline == "bsp" and list(table["scheme"]) == ["bsp", "lbbsp", "asp", "ssp"]  # bsp run too, first
    assert list(table["network"]) == ["ring_allreduce", "ring_allreduce", "parameter_server", "parameter_server"]
    assert set(table["baseline"]) == {"bsp"} and set(table["seed"]) == {3}
    assert set(table["samples"]) == {4096}  # equal work: the stop by samples
    base = float(table["throughput_samples_per_s"][0])
    for _, row in table.iterrows():
        assert row["speedup_vs_baseline"] == pytest.approx(row["throughput_samples_per_s"] / base, rel=1e-9)
    assert isinstance(comparison.runs["asp"].scenario.network, ParameterServerConfig)  # type: ignore[union-attr]
    assert comparison.runs["asp"].scenario.network.shards == 4  # type: ignore[union-attr]
    assert isinstance(comparison.runs["bsp"].scenario.network, AllReduceConfig)  # type: ignore[union-attr]
    # the CLI writes the same table, and says the baseline where it writes it
    out = tmp_path / "cmp"
    rc = main(["compare", str(tiny), "--schemes", "lbbsp,asp,ssp", "--cross-family", "--out", str(out), "-q"])
    assert rc == 0
    with (out / "compare.csv").open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["scheme"] for r in rows] == list(table["scheme"])
    assert [float(r["speedup_vs_baseline"]) for r in rows] == list(table["speedup_vs_baseline"])
    assert [r["baseline"] for r in rows] == ["bsp"] * 4
    assert "name: parameter_server" in (out / "asp" / "scenario.resolved.yaml").read_text(encoding="utf-8")
    # saved from Python: the same files
    saved = comparison.save(tmp_path / "saved")
    assert (saved / "compare.csv").read_text(encoding="utf-8") == (out / "compare.csv").read_text(encoding="utf-8")
    assert lbsim.load(saved).baseline == "bsp"  # type: ignore[union-attr]


def test_cross_family_on_a_parameter_server_scenario_and_overridden_variants(tiny: Path) -> None:
    ps_tiny = {"network": {"name": "parameter_server", "shards": 2, "latency_s": 0.0003}}
    c = lbsim.compare(tiny, ["asp", "bsp"], cross_family=True, overrides=ps_tiny,
                      network_variant={"ring_allreduce.algorithm": "tree"})
    assert list(c.table["scheme"]) == ["asp", "bsp"] and list(c.table["network"]) == ["parameter_server", "ring_allreduce"]
    assert c.runs["bsp"].scenario.network == AllReduceConfig(alpha_s=0.0003, algorithm="tree")  # type: ignore[union-attr]
    assert c.runs["asp"].scenario.network.shards == 2  # type: ignore[union-attr]  # the scenario's own, untouched
    assert list(c.table["speedup_vs_first"]) == [1.0, pytest.approx(1 / c.table["speedup_vs_baseline"][0])]
    # keys for the scenario's own kind, unknown kinds and keys, and keys without a cross-family compare are refused
    assert refused(lambda: lbsim.compare(tiny, "bsp,asp", cross_family=True, network_variant={"ring_allreduce.alpha_s": 1})) \
        .startswith("network_variant: the scenario's own network is ring_allreduce")
    assert refused(lambda: lbsim.compare(tiny, "bsp,asp", cross_family=True, network_variant={"ps.shards": 1})) \
        .startswith("network_variant: expected KIND.KEY=VALUE")
    assert refused(lambda: lbsim.compare(tiny, "bsp,asp", cross_family=True, network_variant={"parameter_server.shard": 1})) \
        .startswith("network_variant parameter_server.shard: unknown key")
    assert refused(lambda: lbsim.compare(tiny, "bsp,lbbsp", network_variant={"parameter_server.shards": 1})) \
        .startswith("network_variant: network variants apply to a cross-family compare only")


def test_a_stated_baseline_and_the_columns_compare_csv_had(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    assert main(["compare", str(tiny), "--schemes", "bsp,static,lbbsp", "--baseline", "lbbsp", "--out", str(out), "-q"]) == 0
    with (out / "compare.csv").open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        header, rows = list(reader.fieldnames or []), list(reader)
    lbbsp = float(rows[2]["throughput_samples_per_s"])
    for r in rows:
        assert r["baseline"] == "lbbsp" and r["network"] == "ring_allreduce"
        assert float(r["speedup_vs_baseline"]) == pytest.approx(float(r["throughput_samples_per_s"]) / lbbsp, rel=1e-9)
    # the columns compare.csv had before the baseline keep their places; the new ones come last
    summaries = [json.loads((out / r["scheme"] / "summary.json").read_text(encoding="utf-8")) for r in rows]
    old = compare_columns([{**summaries[0], "speedup_vs_first": 1.0}, *summaries[1:]])
    assert header == [*old, "network", "baseline", "speedup_vs_baseline"]
    # a baseline that is not listed is run too, first
    c = lbsim.compare(tiny, "static,lbbsp", baseline="bsp")
    assert list(c.table["scheme"]) == ["bsp", "static", "lbbsp"] and list(c.table["speedup_vs_baseline"])[0] == 1.0
