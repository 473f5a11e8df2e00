"""lbsim calibrate-nccl: the nccl-tests reader, the NCCL cost model, the staged fit and the command."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from lbsim.calibration.nccl_fit import fit_nccl, nnls
from lbsim.calibration.nccl_tests import NcclRow, parse_log, read_logs
from lbsim.cli import main
from lbsim.errors import InputError
from lbsim.network.nccl import (
    PROTOCOLS,
    TREE_CHUNK_BYTES,
    NcclFigures,
    ProtocolFigures,
    candidate_s,
    nccl_pick,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl_tests_a100"
US = 1e-6

TRUE = NcclFigures(
    (ProtocolFigures(6 * US, 1.5 * US, 4 * US, 0.25),
     ProtocolFigures(20 * US, 1.0 * US, 10 * US, 0.6),
     ProtocolFigures(40 * US, 2.0 * US, 15 * US, 1.0)),
    intra_bytes_per_s=200e9, inter_bytes_per_s=100e9, nics_per_node=8)


def _log(gpus_per_node: int, nodes: int, rows: list[tuple[int, float, float]], mpi: bool = False) -> str:
    """nccl-tests text in the Echo logs' layout (MPI tags when ``mpi``)."""
    tag = "[1,0]<stdout>:" if mpi else ""
    lines = [f"# nThread 1 nGpus {1 if mpi else gpus_per_node} minBytes 8 maxBytes 1024 step: 2(factor)", "#",
             "# Using devices"]
    if mpi or nodes > 1:
        for r in range(nodes * gpus_per_node):
            lines.append(f"#   Rank {r:2d} Pid {100 + r:6d} on node-{r // gpus_per_node:06d} device {r % gpus_per_node:2d} [0x00] A100")
    lines += ["#", "#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error"]
    for size, t_us, t2_us in rows:
        lines.append(f"{size:12d} {size // 4:12d}     float     sum  {t_us:8.2f}   0.00   0.00    N/A  {t2_us:8.2f}   0.00   0.00    N/A")
    lines.append("# Avg bus bandwidth    : 1.0")
    return "\n".join(tag + line for line in lines) + "\n"


def test_reads_a_real_multi_node_log() -> None:
    rows = read_logs([DATA / "nccl_16gpus.log"])
    assert len(rows) == 25
    assert {(r.gpus, r.nodes) for r in rows} == {(16, 2)}
    first = rows[0]
    assert (first.size_bytes, first.out_of_place_s, first.in_place_s) == (1024, pytest.approx(34.66e-6), pytest.approx(34.47e-6))
    assert first.time_s == first.in_place_s  # the smaller of the two runs
    assert rows[-1].size_bytes == 16 * 2**30


def test_a_tag_in_the_middle_of_a_line_and_the_warm_up_outlier() -> None:
    rows = read_logs([DATA / "nccl_128gpus.log"])
    assert {(r.gpus, r.nodes) for r in rows} == {(128, 16)}  # rank 52's host line carries a second MPI tag
    assert rows[0].out_of_place_s == pytest.approx(1242.3e-6) and rows[0].time_s == pytest.approx(91.97e-6)


def test_single_node_log_without_rank_lines_uses_the_header() -> None:
    rows = parse_log(_log(4, 1, [(8, 16.0, 16.5)]).replace("#   Rank", "#   Rk"), "x.log")
    assert (rows[0].gpus, rows[0].nodes, rows[0].time_s) == (4, 1, pytest.approx(16e-6))


@pytest.mark.parametrize(("bad", "needle"), [
    ("        1024   256  float sum  abc  0.1 0.1 N/A 30.0 0.1 0.1 N/A", "x.log:7: out-of-place time (us) is not a number"),
    ("        1024   256  float sum  30.0  0.1", "x.log:7: expected a data row of 12 fields"),
    ("       -1024   256  float sum  30.0 0.1 0.1 N/A 30.0 0.1 0.1 N/A", "x.log:7: size (B) must be a whole number"),
    ("        1024   256  float sum  30.0 0.1 0.1 N/A -3 0.1 0.1 N/A", "x.log:7: in-place time (us) must be a positive"),
])
def test_malformed_line_names_file_and_line(bad: str, needle: str) -> None:
    text = _log(2, 1, [(1024, 10.0, 10.0)]).splitlines()
    text.insert(6, bad)
    with pytest.raises(InputError) as err:
        parse_log("\n".join(text), "x.log")
    assert needle in str(err.value)


def test_ring_and_tree_formulas() -> None:
    simple = TRUE.protocol("Simple")
    s = 2**26
    ring = candidate_s(TRUE, "ring", "Simple", 32, 4, s)
    assert ring == pytest.approx(40 * US + (62 - 6) * 2 * US + 6 * 15 * US + 62 / 32 * s / 100e9)
    tree = candidate_s(TRUE, "tree", "Simple", 32, 4, s)
    level = simple.inter_hop_s + TREE_CHUNK_BYTES["Simple"] / (100e9 / 8)
    assert tree == pytest.approx(40 * US + 2 * (7 * 2 * US + 2 * level) + 2 * s / 100e9)
    one = candidate_s(TRUE, "ring", "LL", 8, 1, 1024)
    assert one == pytest.approx(6 * US + 14 * 1.5 * US + 14 / 8 * 1024 / (0.25 * 200e9))
    with pytest.raises(ValueError):
        candidate_s(TRUE, "tree", "LL", 8, 1, 1024)


def test_nccls_pick_changes_with_size_and_node_count() -> None:
    assert nccl_pick(TRUE, 8, 1, 64).protocol == "LL"
    assert (nccl_pick(TRUE, 8, 1, 2**30).algorithm, nccl_pick(TRUE, 8, 1, 2**30).protocol) == ("ring", "Simple")
    picks = {nodes: nccl_pick(TRUE, 8 * nodes, nodes, 2**30).algorithm for nodes in (2, 64)}
    assert picks == {2: "ring", 64: "tree"}  # ring latency grows with n, the tree's with log2 N
    # the tree's latency grows by one level per doubling of the node count
    t = [nccl_pick(TRUE, 8 * n, n, 1024).time_s for n in (4, 8, 16)]
    assert t[2] - t[1] == pytest.approx(t[1] - t[0])


def test_nnls_matches_the_unconstrained_solution_when_it_is_feasible_and_clips_otherwise() -> None:
    import numpy as np

    a = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    assert nnls(a, np.array([1.0, 2.0, 3.0])) == pytest.approx([1.0, 2.0])
    assert nnls(a, np.array([-1.0, 2.0, 1.0])) == pytest.approx([0.0, 1.5])


def test_nnls_reaches_the_best_feasible_active_set() -> None:
    import itertools

    import numpy as np

    rng = np.random.default_rng(7)
    for _ in range(30):
        a = rng.normal(size=(8, 4)) * rng.choice([1e-6, 1.0, 1e3], size=4)  # columns of very different scales
        b = rng.normal(size=8)
        best = float(b @ b)
        for k in range(1, 5):
            for cols in itertools.combinations(range(4), k):
                z = np.linalg.lstsq(a[:, cols], b, rcond=None)[0]
                if (z >= 0).all():
                    r = a[:, cols] @ z - b
                    best = min(best, float(r @ r))
        x = nnls(a, b)
        assert (x >= 0).all()
        r = a @ x - b
        assert float(r @ r) == pytest.approx(best, rel=1e-9, abs=1e-12)


def _synthetic(fig: NcclFigures, shapes: list[tuple[int, int]], sizes: list[int]) -> list[NcclRow]:
    rows = []
    for gpus, nodes in shapes:
        for s in sizes:
            t = nccl_pick(fig, gpus, nodes, s).time_s
            rows.append(NcclRow("synthetic", gpus, nodes, s, t, t, t))
    return rows


def test_synthetic_oracle_recovers_the_figures() -> None:
    sizes = [2**k for k in range(3, 33)]
    rows = _synthetic(TRUE, [(2, 1), (4, 1), (8, 1), (16, 2), (32, 4)], sizes)
    got = fit_nccl(rows).figures
    assert got.intra_bytes_per_s == pytest.approx(TRUE.intra_bytes_per_s, rel=1e-6)
    assert got.inter_bytes_per_s == pytest.approx(TRUE.inter_bytes_per_s, rel=1e-6)
    for name, want in zip(PROTOCOLS, TRUE.protocols, strict=True):
        have = got.protocol(name)
        for field in ("base_s", "intra_hop_s", "inter_hop_s", "efficiency"):
            assert getattr(have, field) == pytest.approx(getattr(want, field), rel=1e-6, abs=1e-12), (name, field)
    # and so every held-out node count is predicted exactly
    for r in _synthetic(TRUE, [(128, 16)], sizes):
        assert nccl_pick(got, r.gpus, r.nodes, r.size_bytes).time_s == pytest.approx(r.time_s, rel=1e-6)


def _write_tiny(tmp_path: Path) -> list[str]:
    sizes = [2**k for k in range(3, 31)]
    paths = []
    for gpus, nodes in ((2, 1), (8, 1), (16, 2), (32, 4)):
        rows = [(s, nccl_pick(TRUE, gpus, nodes, s).time_s / US, nccl_pick(TRUE, gpus, nodes, s).time_s / US * 1.01)
                for s in sizes]
        p = tmp_path / f"nccl_{gpus}gpus.log"
        p.write_text(_log(gpus // nodes, nodes, rows, mpi=nodes > 1))
        paths.append(str(p))
    return paths


def test_command_end_to_end_and_the_scenario_runs(tmp_path: Path) -> None:
    logs = _write_tiny(tmp_path)
    out = tmp_path / "out"
    assert main(["calibrate-nccl", *logs, "--fit-nodes", "1,2", "--out", str(out), "-q"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["fit.yaml", "predictions.csv", "report.md", "scenario.yaml"]
    with (out / "predictions.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 4 * 28
    assert {r["role"] for r in rows if r["gpus"] == "32"} == {"held_out"}
    assert {r["role"] for r in rows if r["gpus"] in ("2", "8", "16")} == {"fit"}
    assert {r["extrapolates"] for r in rows if r["gpus"] == "32"} == {"nodes"}
    assert {r["extrapolates"] for r in rows if r["gpus"] != "32"} == {""}
    assert {r["predicted_lo_s"] for r in rows} == {""}  # two one-node GPU counts: nothing to leave out
    worst = max(abs(float(r["error"])) for r in rows)
    assert worst < 0.02  # printed with 2 decimals (10 ns): rounding only
    run_out = tmp_path / "run"
    assert main(["run", str(out / "scenario.yaml"), "--out", str(run_out), "-q", "--set", "workload.updates=2"]) == 0
    with (run_out / "iterations.csv").open() as fh:
        comm = {float(r["comm_s"]) for r in csv.DictReader(fh)}
    import yaml

    from lbsim.fields import parse
    from lbsim.scenario.catalog import MODELS
    from lbsim.scenario.nccl_section import NcclModel

    data = yaml.safe_load((out / "scenario.yaml").read_text())
    group = data["cluster"]["groups"][0]
    fig = parse(NcclModel, data["network"]["nccl"]).figures(group["intra_bandwidth_gbps"] * 1e9 / 8,
                                                            group["bandwidth_gbps"] * 1e9 / 8)
    want = nccl_pick(fig, 32, 4, MODELS["resnet50_imagenet"].gradient_bytes).time_s
    assert len(comm) == 1 and comm.pop() == pytest.approx(want, rel=1e-9)


def test_same_input_same_bytes(tmp_path: Path) -> None:
    logs = _write_tiny(tmp_path)
    texts = []
    for k in range(2):
        out = tmp_path / f"o{k}"
        assert main(["calibrate-nccl", *logs, "--fit-nodes", "1,2", "--out", str(out), "-q"]) == 0
        texts.append([(out / f).read_bytes() for f in ("fit.yaml", "predictions.csv", "report.md", "scenario.yaml")])
    assert texts[0] == texts[1]


@pytest.mark.parametrize(("args", "needle"), [
    (["--fit-nodes", "1,3"], "--fit-nodes: no log has 3 node(s)"),
    (["--fit-nodes", "2,4"], "--fit-nodes: the fit needs a one-node log"),
    (["--fit-nodes", "1"], "--fit-nodes: the fit needs a node count >= 2"),
    (["--fit-nodes", "x"], "--fit-nodes: expected node counts"),
    (["--fit-nodes", "1,2", "--nics-per-node", "0"], "--nics-per-node: must be in"),
])
def test_bad_options_exit_2_and_write_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                              needle: str) -> None:
    logs = _write_tiny(tmp_path)
    out = tmp_path / "out"
    assert main(["calibrate-nccl", *logs, *args, "--out", str(out), "-q"]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_malformed_log_exits_2_naming_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    logs = _write_tiny(tmp_path)
    bad = Path(logs[1])
    lines = bad.read_text().splitlines()
    lines[8] = lines[8].replace("float", "float extra -1")
    bad.write_text("\n".join(lines) + "\n")
    assert main(["calibrate-nccl", *logs, "--fit-nodes", "1,2", "--out", str(tmp_path / "o"), "-q"]) == 2
    err = capsys.readouterr().err
    assert f"{bad.name}:9: expected a data row of 12 fields" in err
    assert not (tmp_path / "o").exists()


def test_uneven_nodes_and_missing_logs_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = _log(2, 2, [(1024, 30.0, 30.0)], mpi=True).replace("on node-000001 device  1", "on node-000000 device  5")
    with pytest.raises(InputError, match="nodes hold different numbers of ranks"):
        parse_log(text, "u.log")
    assert main(["calibrate-nccl", str(tmp_path / "none.log"), "--fit-nodes", "1,2", "--out", str(tmp_path / "o"), "-q"]) == 2
    assert "log file not found" in capsys.readouterr().err


def test_a_root_column_row_reads_the_same_times() -> None:
    row = "        1024   256  float sum  -1  30.0 0.1 0.1 0 31.0 0.1 0.1 0"
    text = _log(2, 1, []).replace("# Avg", row + "\n# Avg")
    got = parse_log(text, "r.log")
    assert (got[0].out_of_place_s, got[0].in_place_s) == (pytest.approx(30e-6), pytest.approx(31e-6))


def test_the_docs_tables_are_current_and_meet_the_scale_targets() -> None:
    """docs/validation.md and docs/collectives.md hold what `python docs/tools/nccl_tables.py` writes."""
    from lbsim.calibration.error_stats import abs_error_stats
    from lbsim.calibration.nccl_report import LARGE_BYTES, predict_rows
    from lbsim.calibration.nccl_tables import documents

    root = Path(__file__).resolve().parents[1]
    pages = documents(DATA, root / "docs")
    assert sorted(p.name for p in pages) == ["collectives.md", "validation.md"]
    for path, regenerated in pages.items():
        assert regenerated == path.read_text(encoding="utf-8"), f"{path} is out of date: python docs/tools/nccl_tables.py"
    rows = read_logs(sorted(DATA.glob("nccl_*gpus.log")))
    fit = fit_nccl([r for r in rows if r.nodes in (1, 2)])
    preds = predict_rows(fit.figures, rows, (1, 2))
    held = [p.error for p in preds if p.role == "held_out" and p.row.size_bytes >= LARGE_BYTES]
    assert {p.row.gpus for p in preds if p.role == "held_out"} == {32, 64, 128}
    median, p90, _ = abs_error_stats(held)
    assert median <= 0.10 and p90 <= 0.20


def test_auto_search_is_decided_on_the_one_node_fit_rows() -> None:
    sizes = [2**k for k in range(3, 31)]
    three = _synthetic(TRUE, [(2, 1), (4, 1), (8, 1), (16, 2)], sizes)
    fit = fit_nccl(three)
    assert set(fit.cv_error) == {"local", "global"}
    assert fit.search == min(fit.cv_error, key=lambda k: (fit.cv_error[k], k != "local"))
    two = fit_nccl(_synthetic(TRUE, [(2, 1), (8, 1), (16, 2)], sizes))
    assert (two.search, two.cv_error) == ("local", {})
    forced = fit_nccl(three, search="global")
    assert forced.search == "global" and forced.cv_error == {}


def test_intervals_are_the_quantiles_of_the_left_out_ratios_per_size_class() -> None:
    import math

    from lbsim.calibration.nccl_report import interval_bounds, predict_rows

    ratios = [(8, 2**20 * (k + 1), 1.0 / (1.0 + 0.01 * k)) for k in range(11)]  # measured/predicted 1.00..1.10
    ratios += [(8, 1024, 1.0)] * 4  # too few small rows: no small-size interval
    b = interval_bounds(ratios, 0.8)
    assert set(b) == {True}
    assert b[True][0] == pytest.approx(math.log(1.01)) and b[True][1] == pytest.approx(math.log(1.09))
    rows = _synthetic(TRUE, [(8, 1), (16, 2), (64, 8)], [1024, 2**24])
    preds = predict_rows(TRUE, rows, (1, 2), b)
    big = [p for p in preds if p.row.size_bytes == 2**24]
    assert all(p.lo_s == pytest.approx(p.predicted_s * 1.01) and p.hi_s == pytest.approx(p.predicted_s * 1.09) for p in big)
    assert all(p.lo_s is None and p.hi_s is None for p in preds if p.row.size_bytes == 1024)
    assert [p.extrapolates for p in preds] == ["", "", "", "", "nodes", "nodes"]
    wide = predict_rows(TRUE, _synthetic(TRUE, [(8, 1), (16, 2), (64, 4)], [2**10, 2**30]), (1, 2))
    assert wide[-1].extrapolates == "nodes+gpus_per_node" and wide[0].lo_s is None


def test_bad_interval_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    logs = _write_tiny(tmp_path)
    assert main(["calibrate-nccl", *logs, "--fit-nodes", "1,2", "--interval", "1.5", "--out", str(tmp_path / "o"), "-q"]) == 2
    assert "--interval: must be a coverage in (0, 1)" in capsys.readouterr().err


def test_the_engines_time_the_all_reduce_with_the_fitted_model() -> None:
    import numpy as np

    from lbsim.network.collectives import Link
    from lbsim.network.topology import AllReducePlan, Topology

    def figures(intra: float, inter: float) -> NcclFigures:
        return NcclFigures(TRUE.protocols, intra, inter, TRUE.nics_per_node)

    topo = Topology((8, 8, 8, 8), (Link(100e9, 0.0),) * 4, (Link(200e9, 0.0),) * 4)
    plan = AllReducePlan(topo, "nccl_fitted", nccl=figures)
    for size in (1024, 2**20, 2**30):
        assert plan.duration_s(size, np.ones(32)) == pytest.approx(nccl_pick(TRUE, 32, 4, size).time_s, rel=1e-12)
    # a worker whose network runs 2x slower halves its node's link bandwidths: the slowest node sets the pace
    slow = np.ones(32)
    slow[9] = 2.0
    half = NcclFigures(TRUE.protocols, 100e9, 50e9, TRUE.nics_per_node)
    assert plan.duration_s(2**26, slow) == pytest.approx(nccl_pick(half, 32, 4, 2**26).time_s, rel=1e-12)
    # unequal nodes: the largest node's chain
    uneven = AllReducePlan(Topology((8, 4), (Link(100e9, 0.0),) * 2, (Link(200e9, 0.0),) * 2), "nccl_fitted", nccl=figures)
    assert uneven.duration_s(2**20, np.ones(12)) == pytest.approx(nccl_pick(TRUE, 12, 2, 2**20, largest_node=8).time_s)
    with pytest.raises(ValueError, match="nccl_fitted needs"):
        AllReducePlan(topo, "nccl_fitted")


def test_nccl_fitted_needs_its_section_and_the_section_needs_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    logs = _write_tiny(tmp_path)
    out = tmp_path / "out"
    assert main(["calibrate-nccl", *logs, "--fit-nodes", "1,2", "--out", str(out), "-q"]) == 0
    data = yaml.safe_load((out / "scenario.yaml").read_text())
    assert data["network"]["algorithm"] == "nccl_fitted" and set(data["network"]["nccl"]) >= {"LL", "LL128", "Simple"}
    no_section = dict(data, network={k: v for k, v in data["network"].items() if k != "nccl"})
    unused = dict(data, network=dict(data["network"], algorithm="ring"))
    for i, bad in enumerate((no_section, unused)):
        path = tmp_path / f"bad{i}.yaml"
        path.write_text(yaml.safe_dump(bad))
        assert main(["run", str(path), "--out", str(tmp_path / f"r{i}"), "-q"]) == 2
        err = capsys.readouterr().err
        assert "network." in err and "nccl" in err and len(err.strip().splitlines()) == 1


def test_a_log_above_the_size_bound_is_refused_before_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    import lbsim.calibration.measured as reader  # reads every measurement file, logs included

    logs = _write_tiny(tmp_path)
    monkeypatch.setattr(reader, "MAX_MEASURED_BYTES", 2**20 // 4)  # 256 KiB; the logs are ~3 KB
    big = Path(logs[0])
    big.write_text(big.read_text() + "#" * (2**20 // 4) + "\n")
    assert main(["calibrate-nccl", *logs, "--fit-nodes", "1,2", "--out", str(tmp_path / "o"), "-q"]) == 2
    err = capsys.readouterr().err
    assert f"{big}: larger than" in err and "the bound for a log file" in err
    assert not (tmp_path / "o").exists()
