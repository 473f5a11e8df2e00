"""Prediction intervals and extrapolation flags of ``lbsim calibrate``; 8-GPU nodes recovered; ``lbsim run``'s line.

The interval comes from leave-one-placement-out residuals on the fit placements only
(:mod:`lbsim.calibration.interval`): analytic quantiles, fit rows only, exact data give a band of
width 0. The hidden-hardware split (fit on ``2,4,8,11,44`` of 8-GPU nodes) runs unchanged: a known
model generating the rows is recovered by the CLI, and ``88``/``8888`` are flagged as extrapolations.
"""

from __future__ import annotations

import csv
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from lbsim.calibration.fit import DEFAULT_CHUNK_SHARE, calibrate_rows
from lbsim.calibration.interval import FitDomain, interval_from_folds, weighted_quantile
from lbsim.calibration.measured import Row
from lbsim.calibration.model import LinkFigures, step_s
from lbsim.calibration.select import with_interval
from lbsim.cli import main
from lbsim.network.overlap import OverlapParams

S = 100_000_000
BATCHES = (8, 32, 128, 512)
# 8-GPU PCIe nodes with Ethernet between them: comm is a good share of the step, so the fit sees it
TRUE8 = LinkFigures(intra_bandwidth_gbps=100.0, intra_latency_s=5e-5, nic_bandwidth_gbps=25.0, nic_latency_s=5e-4,
                    shared_node_slowdown=0.05, overlap=OverlapParams(hide_share=0.4, tail_share=0.2), algorithm="nccl",
                    chunk_share=DEFAULT_CHUNK_SHARE)
FIT8 = "2,4,8,11,44"
PLACEMENTS8 = [(1,), (2,), (4,), (8,), (1, 1), (4, 4), (8, 8), (2, 2), (8, 8, 8, 8), (4, 8, 8)]


def t_of(b: float) -> float:
    return 0.02 + b / 900.0


def rows8(fig: LinkFigures = TRUE8) -> list[Row]:
    return [Row(p, b, *step_s(p, t_of(b), S, fig)) for p in PLACEMENTS8 for b in BATCHES]


def _write(path: Path, rows: list[Row]) -> Path:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["placement", "local_bsz", "step_time", "sync_time"])
        for r in rows:
            w.writerow([r.label, r.local_bsz, r.step_time_s, r.sync_time_s])
    return path


def test_weighted_quantile_interpolates_mid_cumulative_weights() -> None:
    v = np.array([3.0, 1.0, 2.0, 4.0])
    w = np.ones(4)
    # mid-cumulative weights 0.125, 0.375, 0.625, 0.875 of the sorted 1, 2, 3, 4
    assert weighted_quantile(v, w, 0.5) == pytest.approx(2.5)
    assert weighted_quantile(v, w, 0.125) == pytest.approx(1.0)
    assert weighted_quantile(v, w, 0.05) == pytest.approx(1.0)  # clamped at the ends
    assert weighted_quantile(np.array([0.0, 10.0]), np.array([3.0, 1.0]), 0.375) == pytest.approx(0.0)


def test_each_left_out_placement_weighs_alike() -> None:
    # fold A: 4 rows at -0.1, fold B: 1 row at +0.3 -> the band spans both folds equally
    iv = interval_from_folds([np.full(4, -0.1), np.array([0.3])], nominal=0.5)
    assert iv is not None and iv.folds == 2
    # sorted weights: four rows of 1/8 (mid-cum 1/16..7/16), one of 1/2 (mid-cum 3/4)
    assert iv.low_log == pytest.approx(-0.1)
    assert iv.high_log == pytest.approx(-0.1 + 0.4 * (0.75 - 7 / 16) / (0.75 - 7 / 16))
    lo, hi = iv.bounds(2.0)
    assert lo == pytest.approx(2.0 * math.exp(-0.1)) and hi == pytest.approx(2.0 * math.exp(0.3))
    assert interval_from_folds([np.array([0.1])]) is None  # one fold: no interval


def test_fit_domain_flags_nodes_node_size_and_batch() -> None:
    rows = [Row(p, b, 1.0) for p in [(1,), (2,), (4,), (8,), (1, 1), (4, 4)] for b in (16, 64)]
    d = FitDomain.of(rows, [(2,), (4,), (8,), (1, 1), (4, 4)])
    assert (d.max_nodes, d.max_gpus_one_node, d.max_gpus_per_node_multi) == (2, 8, 4)
    assert d.reasons((1,), 4096) == ()  # single-GPU rows never extrapolate
    assert d.reasons((8,), 32) == ()
    assert d.reasons((4, 4), 16) == ()
    assert d.reasons((8, 8), 32) == ("gpus_per_node",)  # 8 on a node only ever alone on one node
    assert d.reasons((1, 1, 1), 64) == ("nodes",)
    assert d.reasons((8, 8, 8, 8), 128) == ("nodes", "gpus_per_node", "batch")


def test_interval_reads_only_the_fit_placements() -> None:
    rows = rows8()
    noisy = [replace(r, step_time_s=r.step_time_s * (1.0 + 0.03 * ((i % 5) - 2))) for i, r in enumerate(rows)]
    fit = [(2,), (4,), (8,), (1, 1), (4, 4)]
    fit_set = set(fit)
    perturbed = [r if r.placement in fit_set or r.placement == (1,) else replace(r, step_time_s=r.step_time_s * 3.0)
                 for r in noisy]
    a = with_interval(calibrate_rows(noisy, fit, S), noisy, intra_bounds=None, chunk_share=DEFAULT_CHUNK_SHARE)
    b = with_interval(calibrate_rows(perturbed, fit, S), perturbed, intra_bounds=None, chunk_share=DEFAULT_CHUNK_SHARE)
    assert a.interval is not None and a.interval == b.interval and a.interval.folds == 5
    assert a.interval.low_log < 0 < a.interval.high_log  # noisy fit rows: a band on both sides


def test_eight_gpu_nodes_known_model_recovered_by_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The hidden-hardware split (fit 2,4,8,11,44 on 8-GPU nodes): figures back, 88 and 8888 predicted and flagged."""
    src = _write(tmp_path / "m.csv", rows8())
    out = tmp_path / "out"
    assert main(["calibrate", str(src), "--fit-placements", FIT8, "--gradient-bytes", str(S), "--out", str(out),
                 "-q"]) == 0
    data = yaml.safe_load((out / "fit.yaml").read_text())
    g = data["cluster"]["groups"][0]
    for key, want in (("intra_bandwidth_gbps", 100.0), ("intra_latency_s", 5e-5), ("bandwidth_gbps", 25.0),
                      ("nic_latency_s", 5e-4), ("shared_node_slowdown", 0.05)):
        assert g[key] == pytest.approx(want, rel=1e-4), key
    assert data["workload"]["overlap"] == {"hide_share": pytest.approx(0.4, rel=1e-4),
                                           "tail_share": pytest.approx(0.2, rel=1e-4)}
    assert data["network"]["algorithm"] == "nccl"
    cal = data["calibration"]
    assert cal["fit_placements"] == ["2", "4", "8", "11", "44"]
    # exact rows: a fold errs only where leaving its placement out leaves a figure less determined
    assert cal["interval"]["folds"] == 5 and cal["interval"]["low_factor"] <= 1.0 <= cal["interval"]["high_factor"]
    assert cal["interval"]["high_factor"] / cal["interval"]["low_factor"] < 1.1
    with (out / "predictions.csv").open() as fh:
        got = {(r["placement"], int(r["local_bsz"])): r for r in csv.DictReader(fh)}
    assert max(abs(float(r["relative_error"])) for r in got.values()) < 1e-4
    assert got[("88", 32)]["extrapolates"] == "gpus_per_node" and got[("44", 32)]["extrapolates"] == ""
    assert got[("8888", 512)]["extrapolates"] == "nodes+gpus_per_node"
    assert got[("22", 8)]["role"] == "held_out" and got[("22", 8)]["extrapolates"] == ""
    r = got[("88", 128)]
    assert float(r["predicted_low"]) <= float(r["predicted_step_time"]) <= float(r["predicted_high"])

    # a scenario from fit.yaml: `lbsim run` prints the mean with its interval and the extrapolation
    g.update(count=8, workers_per_node=8)
    data["cluster"]["groups"] = [g, dict(g)]
    data["workload"].update(global_batch=16 * 32, updates=3)
    data["scheme"] = {"name": "bsp"}
    scen = tmp_path / "cal.yaml"
    scen.write_text(yaml.safe_dump(data))
    capsys.readouterr()
    assert main(["run", str(scen), "--out", str(tmp_path / "run")]) == 0
    text = capsys.readouterr().out
    assert "calibrated on 2,4,8,11,44: mean iteration" in text and "80% interval" in text
    assert "EXTRAPOLATES (gpus_per_node): placement 88 at 32 per GPU" in text
    resolved = (tmp_path / "run" / "scenario.resolved.yaml").read_text()
    assert "calibration:" in resolved  # kept in the run's record


def test_bad_calibration_section_exits_2_naming_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scen = tmp_path / "s.yaml"
    scen.write_text(yaml.safe_dump({
        "cluster": {"groups": [{"instance": "p3.2xlarge", "count": 2}]}, "workload": {"updates": 2},
        "calibration": {"fit_placements": ["2"], "domain": {"max_nodes": 1, "max_gpus_one_node": 2,
                                                            "max_gpus_per_node_multi": 0, "local_bsz": [8, 64]},
                        "interval": {"nominal": 0.8, "low_factor": 1.2, "high_factor": 0.9, "folds": 2}}}))
    assert main(["run", str(scen), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "calibration.interval.low_factor" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


_milli = st.integers(-500, 500).map(lambda k: k / 1000)  # distinct values stay distinct after a common shift
_folds = st.lists(st.lists(_milli, min_size=1, max_size=6), min_size=2, max_size=6)


@settings(max_examples=60, deadline=None)
@given(_folds, _milli, st.floats(0.5, 0.95))
def test_interval_is_ordered_and_moves_with_a_common_shift(folds: list[list[float]], shift: float,
                                                           nominal: float) -> None:
    arrays = [np.array(f) for f in folds]
    iv = interval_from_folds(arrays, nominal)
    moved = interval_from_folds([a + shift for a in arrays], nominal)
    assert iv is not None and moved is not None
    lo, hi = min(float(a.min()) for a in arrays), max(float(a.max()) for a in arrays)
    assert lo - 1e-12 <= iv.low_log <= iv.high_log <= hi + 1e-12
    assert moved.low_log == pytest.approx(iv.low_log + shift, abs=1e-9)
    assert moved.high_log == pytest.approx(iv.high_log + shift, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["11", "22", "44"]), st.sampled_from([8, 16]), st.floats(0.1, 2.0)),
                min_size=2, max_size=12), st.floats(-0.5, 1.0))
def test_a_common_bias_leaves_every_ratio_exact(rows: list[tuple[str, int, float]], bias: float) -> None:
    from lbsim.calibration.error_stats import ratio_errors

    labels = [r[0] for r in rows]
    batches = [r[1] for r in rows]
    measured = np.array([r[2] for r in rows])
    r = ratio_errors(labels, batches, measured, np.full(len(rows), bias), np.ones(len(rows), bool))
    assert np.allclose(r, 0.0, atol=1e-12)
