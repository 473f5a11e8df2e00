"""Bad input ends with one line on stderr naming the key path, exit code 2, no traceback, nothing written.

docs/references.md §9 (the product contract): every user error -- YAML syntax, unknown keys anywhere, wrong types,
out-of-range values, unknown names, missing or malformed traces, batches that cannot fit, schemes
that cannot run on the network, contention naming missing workers, bad ``--set`` and bad scheme
names on the command line -- gets a one-line error naming the key path and what is allowed,
exit code 2, no traceback and no output files.

Most cases go through ``lbsim.cli.main([...])`` in-process (fast); a representative handful go
through the real console entry point in a subprocess (``python -m lbsim ...``) to prove the exit
code, stderr and absence of a traceback end to end.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lbsim.cli import main
from lbsim.scenario import catalog
from lbsim.scenario.loader import load_scenario
from lbsim.schemes.registry import scheme_names

SCHEMES = ", ".join(scheme_names())  # every registered scheme, in the order messages list them

REPO = Path(__file__).resolve().parents[1]
EC2 = REPO / "scenarios" / "ec2_mixed.yaml"
TRACES = REPO / "scenarios" / "traces"

# A small valid scenario: 3 workers (2 x T4 cap 200, 1 x V100 cap 300), parameter server, BSP.
SECTIONS = {
    "seed": "1",
    "workload": "{model: resnet50_imagenet, global_batch: 96, updates: 2}",
    "cluster": "{groups: [{instance: g4dn.xlarge, count: 2}, {instance: p3.2xlarge, count: 1}]}",
    "network": "{name: parameter_server}",
    "contention": "[]",
    "scheme": "{name: bsp}",
}
DROP = object()


def doc(**parts: object) -> str:
    """YAML text of the small scenario with some sections replaced (raw YAML), dropped or added."""
    sections = {**SECTIONS, **parts}
    return "".join(f"{k}: {v}\n" for k, v in sections.items() if v is not DROP)


def _ring(scheme: str) -> str:
    return doc(network="{name: ring_allreduce}", scheme=f"{{name: {scheme}}}")


YAML_CASES = [
    # --- YAML itself --------------------------------------------------------------------------
    pytest.param("seed: [1, 2\n", "invalid YAML at line 2", id="yaml-syntax"),
    pytest.param("seed: 1\n\tcluster: 3\n", "invalid YAML at line 2", id="yaml-tab"),
    pytest.param(doc() + "seed: 3\n", "duplicate key 'seed'", id="yaml-duplicate-key"),
    pytest.param("- a\n- b\n", "top level must be a mapping", id="yaml-top-level-list"),
    # --- unknown keys, at every level ----------------------------------------------------------
    pytest.param(doc() + "foo: 1\n", "foo: unknown key; valid keys here: calibration, cluster, contention, data, description, name, "
                 "network, numerics, scheme, seed, workload", id="unknown-top-level"),
    pytest.param(doc(workload="{model: resnet50_imagenet, globl_batch: 96, updates: 2}"),
                 "workload.globl_batch: unknown key (did you mean 'global_batch'?)", id="unknown-workload-key"),
    pytest.param(doc(cluster="{groups: [{instance: g4dn.xlarge, cnt: 2}]}"),
                 "cluster.groups[0].cnt: unknown key", id="unknown-group-key"),
    pytest.param(doc(cluster="{groups: [{instance: g4dn.xlarge}], nodes: 3}"),
                 "cluster.nodes: unknown key; valid keys here: groups", id="unknown-cluster-key"),
    pytest.param(doc(network="{name: parameter_server, shard: 2}"),
                 "network.shard: unknown key (did you mean 'shards'?)", id="unknown-network-key"),
    pytest.param(doc(contention="[{name: markov, workers: all, mean_on: 3}]"),
                 "contention[0].mean_on: unknown key", id="unknown-contention-key"),
    pytest.param(doc(contention="[{name: scheduled, workers: [0]}, {name: scheduled, workers: [1], when: 3}]"),
                 "contention[1].when: unknown key", id="unknown-key-second-contention-item"),
    pytest.param(doc(scheme="{name: bsp, staleness: 3}"),
                 "scheme.staleness: unknown key; valid keys here: backup_workers", id="unknown-scheme-param"),
    pytest.param(doc(scheme="{name: asp, staleness: 3}"),
                 "scheme.staleness: unknown key; valid keys here: (none)", id="unknown-param-of-paramless-scheme"),
    # --- wrong types ---------------------------------------------------------------------------
    pytest.param(doc(cluster="{groups: [{instance: g4dn.xlarge, count: two}]}"),
                 "cluster.groups[0].count: expected an integer, got 'two'", id="type-count-str"),
    pytest.param(doc(cluster="{groups: [{instance: g4dn.xlarge, count: true}]}"),
                 "cluster.groups[0].count: expected an integer, got True (bool)", id="type-bool-is-not-int"),
    pytest.param(doc(seed="1.5"), "seed: expected an integer, got 1.5", id="type-seed-float"),
    pytest.param(doc(name="3"), "name: expected a string", id="type-name-int"),
    pytest.param(doc(workload="[1, 2]"), "workload: expected a mapping", id="type-section-list"),
    pytest.param(doc(cluster="{groups: {instance: g4dn.xlarge}}"), "cluster.groups: expected a list",
                 id="type-groups-mapping"),
    pytest.param(doc(contention="{name: markov}"), "contention: expected a list", id="type-contention-mapping"),
    pytest.param(doc(network="{name: parameter_server, apply_s: fast}"),
                 "network.apply_s: expected a number, got 'fast'", id="type-float-str"),
    pytest.param(doc(network="{name: parameter_server, apply_s: .nan}"),
                 "network.apply_s: expected a finite number", id="type-nan"),
    pytest.param(doc(network="{name: parameter_server, apply_s: true}"),
                 "network.apply_s: expected a number, got True (bool)", id="type-bool-is-not-float"),
    pytest.param(doc(scheme="{name: ssp, staleness: lots}"),
                 "scheme.staleness: expected an integer", id="type-scheme-param"),
    pytest.param(doc(contention="[{name: markov, start_on: 1}]"),
                 "contention[0].start_on: expected true or false", id="type-bool"),
    pytest.param(doc(contention="[{name: scheduled, workers: some}]"),
                 "contention[0].workers: expected one of 'all' or a list", id="type-workers-str"),
    pytest.param(doc(contention="[{name: scheduled, workers: [1.5]}]"),
                 "contention[0].workers[0]: expected an integer or a string", id="type-workers-item"),
    pytest.param(doc(scheme="{name: [bsp]}"), f"scheme.name: unknown ['bsp']; valid: {SCHEMES}",
                 id="type-scheme-name-list"),
    pytest.param(doc() + "'two words': 1\n", "'two words': unknown key", id="unknown-key-with-space"),
    pytest.param(doc(scheme="3"), f"scheme: expected a mapping with a 'name' key ({SCHEMES})",
                 id="type-scheme-int"),
    # --- required, empty, out of range ---------------------------------------------------------
    pytest.param(doc(cluster=DROP), "cluster: required key is missing", id="missing-cluster"),
    pytest.param("", "cluster: required key is missing", id="empty-file"),
    pytest.param(doc(cluster="{groups: []}"), "cluster.groups: must not be empty", id="empty-groups"),
    pytest.param(doc(cluster="{groups: [{count: 2}]}"), "cluster.groups[0].instance: required key is missing",
                 id="missing-instance"),
    pytest.param(doc(contention="[{workers: all}]"), "contention[0].name: required key is missing; valid: "
                 "markov, scheduled, trace", id="missing-contention-name"),
    pytest.param(doc(cluster="{groups: [{instance: g4dn.xlarge, count: 0}]}"),
                 "cluster.groups[0].count: must be > 0, got 0", id="zero-count"),
    pytest.param(doc(cluster="{groups: [{instance: g4dn.xlarge, count: -2}]}"),
                 "cluster.groups[0].count: must be > 0, got -2", id="negative-count"),
    pytest.param(doc(network="{name: parameter_server, server_bandwidth_gbps: -1}"),
                 "network.server_bandwidth_gbps: must be > 0", id="negative-server-bandwidth"),
    pytest.param(doc(cluster="{groups: [{instance: g4dn.xlarge}, {instance: p3.2xlarge, bandwidth_gbps: 0}]}"),
                 "cluster.groups[1].bandwidth_gbps: must be > 0", id="zero-worker-bandwidth"),
    pytest.param(doc(network="{name: ring_allreduce, bandwidth_gbps: -3}"),
                 "network.bandwidth_gbps: must be > 0", id="negative-ring-bandwidth"),
    pytest.param(doc(workload="{global_batch: 0, updates: 2}"), "workload.global_batch: must be > 0, got 0",
                 id="zero-global-batch"),
    pytest.param(doc(workload="{global_batch: 96, updates: 2, time_budget_s: -5}"),
                 "workload.time_budget_s: must be > 0", id="negative-time-budget"),
    pytest.param(doc(workload="{global_batch: 96, updates: null, time_budget_s: null}"),
                 "workload.updates: set updates, samples or time_budget_s", id="no-stop-condition"),
    pytest.param(doc(seed="-1"), "seed: must be >= 0, got -1", id="negative-seed"),
    pytest.param(doc(scheme="{name: ssp, staleness: -1}"), "scheme.staleness: must be >= 0", id="negative-staleness"),
    pytest.param(doc(scheme="{name: bsp, backup_workers: 3}"), "scheme.backup_workers: must be < the number of "
                 "workers (3)", id="backup-workers-all"),
    pytest.param(doc(contention="[{name: scheduled, workers: [0], slowdown: -2}]"),
                 "contention[0].slowdown: must be > 0", id="negative-slowdown"),
    pytest.param(doc(contention="[{name: scheduled, workers: [0], start_s: 50, end_s: 10}]"),
                 "contention[0].end_s: must be > start_s", id="end-before-start"),
    pytest.param(doc(contention="[{name: markov, slowdown_min: 3, slowdown_max: 2}]"),
                 "contention[0].slowdown_max: must be >= slowdown_min", id="markov-max-below-min"),
    pytest.param(doc(contention="[{name: scheduled, workers: [0], target: disk}]"),
                 "contention[0].target: 'disk' is not allowed; valid: compute, network, both", id="bad-target"),
    # --- unknown names (finite sets: the valid ones are listed) -------------------------------
    pytest.param(doc(cluster="{groups: [{instance: g4dn.xlarge}, {instance: p9.huge}]}"),
                 "cluster.groups[1].instance: unknown instance type 'p9.huge'; valid: "
                 + ", ".join(catalog.instance_names()), id="unknown-instance"),
    pytest.param(doc(scheme="{name: nosuch}"), f"scheme.name: unknown 'nosuch'; valid: {SCHEMES}",
                 id="unknown-scheme"),
    pytest.param(doc(scheme="nosuch"), f"scheme.name: unknown 'nosuch'; valid: {SCHEMES}",
                 id="unknown-scheme-shorthand"),
    pytest.param(doc(workload="{model: gpt9, global_batch: 96, updates: 2}"),
                 "workload.model: unknown model 'gpt9'; valid: " + ", ".join(catalog.model_names()), id="unknown-model"),
    pytest.param(doc(network="{name: mesh}"), "network.name: unknown 'mesh'; valid: parameter_server, ring_allreduce",
                 id="unknown-network"),
    pytest.param(doc(contention="[{name: chaos}]"), "contention[0].name: unknown 'chaos'; valid: markov, scheduled, trace",
                 id="unknown-contention-kind"),
    pytest.param(doc(workload="{model: bert_base_squad, global_batch: 24, updates: 2}",
                     cluster="{groups: [{instance: c5.xlarge, count: 2}]}"),
                 "cluster.groups[0].instance: the catalog has no figures for model bert_base_squad on c5.xlarge",
                 id="no-catalog-figures"),
    # --- traces ----------------------------------------------------------------------------------
    pytest.param(doc(contention="[{name: trace, path: nosuch.csv}]"), "contention[0].path", id="missing-trace"),
    pytest.param(doc(contention="[{name: trace, path: bad.csv}]"), "contention[0].path", id="malformed-trace"),
    pytest.param(doc(contention="[{name: trace, path: empty.csv}]"), "contention[0].path", id="empty-trace"),
    pytest.param(doc(contention=f"[{{name: trace, path: {TRACES / 'example_simple.csv'}, format: pai_minibatch}}]"),
                 "contention[0].path", id="trace-wrong-format"),
    pytest.param(doc(contention=f"[{{name: trace, path: {TRACES / 'example_simple.csv'}, format: xml}}]"),
                 "contention[0].format: 'xml' is not allowed; valid: auto, pai_minibatch, cluster_cpu, simple",
                 id="trace-unknown-format"),
    pytest.param(doc(contention=f"[{{name: trace, path: {TRACES / 'pai_job_1_norm.csv'}, target: network}}]"),
                 "contention[0].target", id="trace-pai-network"),
    pytest.param(doc(contention=f"[{{name: trace, path: {TRACES / 'alibaba2018_cluster_cpu_300s.csv'}, demand: 2}}]"),
                 "contention[0].demand: must be <= 1", id="trace-demand"),
    # --- rules across sections ------------------------------------------------------------------
    pytest.param(doc(workload="{global_batch: 100000, updates: 2}"),
                 "workload.global_batch: 100000 samples exceed the cluster's total memory cap 700", id="batch-over-total-cap"),
    pytest.param(doc(workload="{global_batch: 660, updates: 2}"),
                 "workload.global_batch: scheme bsp gives every worker 220 samples, above worker 0's memory cap "
                 "max_batch=200", id="bsp-even-split-over-cap"),
    pytest.param(doc(workload="{global_batch: 660, updates: 2}", scheme="{name: ssp}"),
                 "workload.global_batch: scheme ssp gives every worker 220", id="ssp-even-split-over-cap"),
    pytest.param(_ring("asp"), "network.name: scheme asp needs a parameter server; valid here: parameter_server",
                 id="asp-on-ring"),
    pytest.param(_ring("ssp"), "network.name: scheme ssp needs a parameter server", id="ssp-on-ring"),
    pytest.param(doc(network="{name: ring_allreduce}", scheme="{name: bsp, backup_workers: 1}"),
                 "network.name: scheme.backup_workers needs a parameter server", id="backup-workers-on-ring"),
    pytest.param(doc(contention="[{name: scheduled, workers: [0, 5]}]"),
                 "contention[0].workers[1]: worker 5 does not exist (workers are 0..2)", id="contention-worker-missing"),
    pytest.param(doc(contention="[{name: markov, workers: [-1]}]"),
                 "contention[0].workers[0]: worker -1 does not exist", id="contention-worker-negative"),
    pytest.param(doc(contention="[{name: markov, workers: [c5.xlarge]}]"),
                 "contention[0].workers[0]: no worker of instance type 'c5.xlarge'; the cluster has: g4dn.xlarge, "
                 "p3.2xlarge", id="contention-instance-missing"),
    # --- nodes and links (issue 13) ----------------------------------------------------------------
    pytest.param(doc(cluster="{groups: [{instance: g4dn.xlarge, count: 2, workers_per_node: 2}]}"),
                 "cluster.groups[0].workers_per_node: 2 workers on a node of g4dn.xlarge, which has 1 GPU(s); "
                 "valid: 1..1", id="workers-per-node-above-gpus"),
    pytest.param(doc(cluster="{groups: [{instance: c5.xlarge, count: 2, workers_per_node: 2, samples_per_s: 9, "
                             "max_batch: 64}]}"),
                 "cluster.groups[0].intra_bandwidth_gbps: the catalog has no intra-node link for c5.xlarge",
                 id="shared-node-without-intra-link"),
    pytest.param(doc(cluster="{groups: [{instance: g4dn.xlarge, compute_curve: [[8, 0.1], [8, 0.2]]}]}"),
                 "cluster.groups[0].compute_curve[1]: batches must be strictly increasing", id="curve-not-increasing"),
    pytest.param(doc(network="{name: ring_allreduce, algorithm: butterfly}"),
                 "network.algorithm: 'butterfly' is not allowed; valid: ring, hierarchical, tree, nccl", id="unknown-algorithm"),
    pytest.param(doc(workload="{model: resnet50_imagenet, global_batch: 96, overlap: {hide_share: 2}}"),
                 "workload.overlap.hide_share: must be <= 1", id="overlap-share-above-one"),
]

# Overrides and CLI options applied to the valid small scenario.
OVERRIDE_CASES = [
    pytest.param(["--set", "seed"], "--set: expected KEY=VALUE", id="set-no-equals"),
    pytest.param(["--set", "=3"], "--set: expected KEY=VALUE", id="set-no-key"),
    pytest.param(["--set", "workload..updates=3"], "--set: expected KEY=VALUE", id="set-empty-segment"),
    pytest.param(["--set", "seed=[1"], "--set seed: value is not valid YAML", id="set-bad-yaml"),
    pytest.param(["--set", "seed={a: 1, a: 2}"], "--set seed: value is not valid YAML", id="set-duplicate-key"),
    pytest.param(["--set", "cluster.groups.5.count=3"], "--set cluster.groups.5: list index out of range; valid: 0..1",
                 id="set-index-out-of-range"),
    pytest.param(["--set", "cluster.groups.first.count=3"], "--set cluster.groups.first: 'first' is not a list index",
                 id="set-index-not-int"),
    pytest.param(["--set", "seed.x=3"], "--set seed.x: seed is int 1", id="set-into-scalar"),
    pytest.param(["--set", "workload.nosuch=1"], "workload.nosuch: unknown key; valid keys here:", id="set-unknown-key"),
    pytest.param(["--set", "cluster.groups.0.count=true"], "cluster.groups[0].count: expected an integer, got True",
                 id="set-bool-count"),
    pytest.param(["--set", "network.server_bandwidth_gbps=-1"], "network.server_bandwidth_gbps: must be > 0",
                 id="set-negative"),
    pytest.param(["--set", "scheme.name=nosuch"], f"scheme.name: unknown 'nosuch'; valid: {SCHEMES}",
                 id="set-unknown-scheme"),
    pytest.param(["--scheme", "nosuch"], f"--scheme: unknown scheme 'nosuch'; valid: {SCHEMES}",
                 id="scheme-option-unknown"),
    pytest.param(["--scheme", "ssp", "--set", "network.name=ring_allreduce"],
                 "network.name: scheme ssp needs a parameter server", id="scheme-option-needs-ps"),
]

COMPARE_CASES = [
    pytest.param(["--schemes", "bsp,nosuch"], f"--schemes: unknown scheme 'nosuch'; valid: {SCHEMES}",
                 id="compare-unknown-scheme"),
    pytest.param(["--schemes", "bsp,bsp"], "--schemes: a scheme is listed twice", id="compare-duplicate"),
    pytest.param(["--schemes", ","], "--schemes: give a comma-separated list", id="compare-empty"),
    pytest.param(["--schemes", "bsp,asp", "--set", "network.name=ring_allreduce"],
                 "network.name: scheme asp needs a parameter server; valid here: parameter_server (with scheme asp",
                 id="compare-later-scheme-invalid"),
    pytest.param(["--schemes", "static,bsp", "--set", "workload.global_batch=660"],
                 "workload.global_batch: scheme bsp gives every worker 220", id="compare-bsp-over-cap"),
]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory (so a default ``runs/`` output would be noticed) with two bad traces."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.csv").write_text("time_s,worker,slowdown\n0,0,abc\n", encoding="utf-8")
    (tmp_path / "empty.csv").write_text("", encoding="utf-8")
    return tmp_path


def _files(root: Path) -> set[Path]:
    return {p.relative_to(root) for p in root.rglob("*")}


def assert_input_error(rc: int, out: str, err: str, expected: str) -> None:
    """Exit code 2, exactly one line on stderr naming ``expected``, no traceback, nothing on stdout."""
    assert rc == 2, f"exit code {rc}, stderr: {err!r}"
    assert "Traceback" not in err and "Traceback" not in out
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1, f"expected one line on stderr, got {err!r}"
    assert lines[0].startswith("lbsim"), lines[0]
    assert "error:" in lines[0]
    assert "internal error" not in lines[0]
    assert expected in lines[0], f"{expected!r} not in {lines[0]!r}"
    assert out == ""


def _run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(argv)
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


@pytest.mark.parametrize(("text", "expected"), YAML_CASES)
def test_bad_scenario_file(text: str, expected: str, workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = workdir / "scenario.yaml"
    scenario.write_text(text, encoding="utf-8")
    before = _files(workdir)
    rc, out, err = _run_main(["run", str(scenario), "--out", str(workdir / "out")], capsys)
    assert_input_error(rc, out, err, expected)
    assert not (workdir / "out").exists()
    assert _files(workdir) == before


@pytest.mark.parametrize(("options", "expected"), OVERRIDE_CASES)
def test_bad_override_or_option(options: list[str], expected: str, workdir: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    scenario = workdir / "scenario.yaml"
    scenario.write_text(doc(), encoding="utf-8")
    before = _files(workdir)
    rc, out, err = _run_main(["run", str(scenario), *options, "--out", str(workdir / "out")], capsys)
    assert_input_error(rc, out, err, expected)
    assert _files(workdir) == before


@pytest.mark.parametrize(("options", "expected"), COMPARE_CASES)
def test_bad_compare(options: list[str], expected: str, workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = workdir / "scenario.yaml"
    scenario.write_text(doc(), encoding="utf-8")
    before = _files(workdir)
    rc, out, err = _run_main(["compare", str(scenario), *options, "--out", str(workdir / "out")], capsys)
    assert_input_error(rc, out, err, expected)
    assert _files(workdir) == before  # no scheme's directory either: all are validated before any runs


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        pytest.param(["run", "nosuch.yaml"], "nosuch.yaml: scenario file not found", id="file-not-found"),
        pytest.param(["run", "."], ".: is a folder, not a scenario file", id="file-is-dir"),
        pytest.param(["catalog", "--model", "gpt9"], "--model: unknown model 'gpt9'; valid:", id="catalog-unknown-model"),
        pytest.param(["run"], "the following arguments are required: scenario", id="argparse-missing-arg"),
        pytest.param(["run", "x.yaml", "--bogus"], "unrecognized arguments: --bogus", id="argparse-unknown-option"),
        pytest.param(["frobnicate"], "invalid choice: 'frobnicate'", id="argparse-unknown-command"),
    ],
)
def test_bad_command_line(argv: list[str], expected: str, workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = _files(workdir)
    rc, out, err = _run_main(argv, capsys)
    assert_input_error(rc, out, err, expected)
    assert _files(workdir) == before


def test_compare_tags_only_scheme_dependent_errors(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = workdir / "scenario.yaml"
    scenario.write_text(doc(seed="-1"), encoding="utf-8")
    rc, out, err = _run_main(["compare", str(scenario), "--schemes", "bsp,asp"], capsys)
    assert_input_error(rc, out, err, "seed: must be >= 0")
    assert "with scheme" not in err


def test_not_utf8_scenario(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = workdir / "scenario.yaml"
    scenario.write_bytes(b"seed: \xff\xfe\n")
    rc, out, err = _run_main(["run", str(scenario), "--out", str(workdir / "out")], capsys)
    assert_input_error(rc, out, err, "not a UTF-8 text file")
    assert not (workdir / "out").exists()


def test_out_is_a_file(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = workdir / "scenario.yaml"
    scenario.write_text(doc(), encoding="utf-8")
    (workdir / "taken").write_text("x", encoding="utf-8")
    rc, out, err = _run_main(["run", str(scenario), "--out", str(workdir / "taken" / "sub")], capsys)
    assert_input_error(rc, out, err, "--out:")
    assert (workdir / "taken").read_text(encoding="utf-8") == "x"


def test_unknown_key_lists_every_valid_key(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dataclasses import fields

    from lbsim.scenario.sections import WorkerGroup

    scenario = workdir / "scenario.yaml"
    scenario.write_text(doc(cluster="{groups: [{instance: g4dn.xlarge, speed: 3}]}"), encoding="utf-8")
    rc, _out, err = _run_main(["run", str(scenario)], capsys)
    assert rc == 2
    listed = err.split("valid keys here:")[1]
    for f in fields(WorkerGroup):
        assert f.name in listed


def test_unknown_scheme_lists_every_valid_scheme(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = workdir / "scenario.yaml"
    scenario.write_text(doc(), encoding="utf-8")
    for argv in (["run", str(scenario), "--scheme", "nosuch"], ["compare", str(scenario), "--schemes", "bsp,nosuch"],
                 ["run", str(scenario), "--set", "scheme.name=nosuch"]):
        rc, _out, err = _run_main(argv, capsys)
        assert rc == 2
        assert "valid: " + ", ".join(scheme_names()) in err
    assert _files(workdir) == {Path("scenario.yaml"), Path("bad.csv"), Path("empty.csv")}


# --- --set values are YAML; list items by index ----------------------------------------------------

def test_set_values_parse_as_yaml(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(doc(contention="[{name: scheduled, workers: [0]}]"), encoding="utf-8")
    sc = load_scenario(f, ["seed=3", "contention=[]", "cluster.groups.0.count=3", "workload.time_budget_s=2.5",
                           "name=a:b", "network={name: ring_allreduce, alpha_s: 0.001}"])
    assert sc.seed == 3 and isinstance(sc.seed, int)
    assert sc.contention == ()
    assert sc.cluster.groups[0].count == 3
    assert sc.workload.time_budget_s == 2.5
    assert sc.name == "a:b"
    assert sc.network.kind == "ring_allreduce" and sc.network.alpha_s == 0.001  # type: ignore[union-attr]


@pytest.mark.parametrize(("text", "value"), [("1e3", 1000.0), ("2.5E-1", 0.25), ("-1.5e+2", -150.0), (".5e1", 5.0),
                                           ("1e", "1e"), ("e5", "e5"), ("3e5x", "3e5x"), ("12", 12)])
def test_yaml_1_2_floats(text: str, value: object) -> None:
    """Exponent floats read as numbers, as YAML 1.2 and every user expect (PyYAML's 1.1 rules made '1e3' a string)."""
    from lbsim.scenario.overrides import parse_yaml

    got = parse_yaml(text)
    assert got == value and type(got) is type(value)


def test_a_text_read_again_gives_the_same_data_and_a_copy_of_its_own() -> None:
    """parse_yaml keeps recent texts' data: a repeat gives equal data the caller may change freely,
    and a text that fails fails every time (its error is not kept as data)."""
    import yaml

    from lbsim.scenario.overrides import parse_yaml

    text = "cluster: {groups: [{count: 2, samples_per_s: 100}]}\nseed: 7\nwhen: [1, 2]\n"
    first = parse_yaml(text)
    first["cluster"]["groups"][0]["count"] = 99
    first["when"].append(3)
    second = parse_yaml(text)
    assert second == {"cluster": {"groups": [{"count": 2, "samples_per_s": 100}]}, "seed": 7, "when": [1, 2]}
    assert second is not first and second["cluster"] is not first["cluster"]
    bad = "a: 1\na: 2\n"  # a key given twice
    for _ in range(2):
        with pytest.raises(yaml.YAMLError):
            parse_yaml(bad)


def test_set_creates_missing_keys(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(doc(scheme=DROP), encoding="utf-8")
    sc = load_scenario(f, ["workload.gradient_bytes=1000", "scheme.name=ssp", "scheme.staleness=1"])
    assert sc.workload.gradient_bytes == 1000
    assert sc.scheme.kind == "ssp" and sc.scheme.staleness == 1  # type: ignore[attr-defined]


# --- the real console entry point, end to end -----------------------------------------------------

SUBPROCESS_CASES = [
    pytest.param(["run", "{file}", "--set", "workload.globl_batch=3"], "workload.globl_batch: unknown key",
                 id="unknown-key-via-set"),
    pytest.param(["run", "{file}", "--scheme", "nosuch"], f"--scheme: unknown scheme 'nosuch'; valid: {SCHEMES}",
                 id="scheme-nosuch"),
    pytest.param(["compare", "{file}", "--schemes", "bsp,nosuch"], "--schemes: unknown scheme 'nosuch'",
                 id="compare-nosuch"),
    pytest.param(["run", "{file}", "--set", "cluster.groups.7.count=3"], "--set cluster.groups.7: list index out of range",
                 id="set-index"),
    pytest.param(["run", "{bad}"], "invalid YAML at line", id="yaml-syntax"),
]


@pytest.mark.parametrize(("argv", "expected"), SUBPROCESS_CASES)
def test_console_script_bad_input(argv: list[str], expected: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster: {groups: [\n", encoding="utf-8")
    out_dir = tmp_path / "out"
    argv = [a.format(file=EC2, bad=bad) for a in argv] + ["--out", str(out_dir)]
    proc = subprocess.run([sys.executable, "-m", "lbsim", *argv], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert_input_error(proc.returncode, proc.stdout, proc.stderr, expected)
    assert not out_dir.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml"]
