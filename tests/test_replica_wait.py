"""Waiting for the slowest replica: closed forms, the engine's simulated mean, calibration recovering a known CV."""

from __future__ import annotations

import csv
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy.special import ndtr

from lbsim.calibration.command import parse_jitter_cv
from lbsim.calibration.compute import fit_compute_curve
from lbsim.calibration.fit import calibrate_rows
from lbsim.calibration.measured import Row
from lbsim.calibration.model import LinkFigures, comm_s, step_s, steps_s
from lbsim.calibration.scenario import row_scenario
from lbsim.cli import main
from lbsim.network.overlap import OverlapParams, exposed_comm_s
from lbsim.network.replica_wait import expected_step_s, max_distribution
from lbsim.scenario.loader import scenario_from_data
from lbsim.simulator.run import simulate

# the synthetic setting of tests/test_calibration.py, with compute noise
FIT = [(2,), (4,), (1, 1), (2, 2), (1, 1, 1, 1)]
FIT_ARG = "2,4,11,22,1111"
S = 100_000_000
BATCHES = (8, 16, 32, 64, 128, 256, 512)
PLACEMENTS = [(1,), *FIT, (4, 4), (1, 1, 1), (2, 2, 2, 2), (4, 4, 4, 4), (1, 2, 3)]
TRUE = LinkFigures(intra_bandwidth_gbps=40.0, intra_latency_s=2e-4, nic_bandwidth_gbps=8.0, nic_latency_s=1e-3,
                   shared_node_slowdown=0.05, overlap=OverlapParams(hide_share=0.4, tail_share=0.2), algorithm="nccl",
                   chunk_share=0.02)
NOISY = replace(TRUE, jitter_cv=0.06)


def t_of(b: float) -> float:
    return 0.02 + b / 900.0


def _write(path: Path, rows: list[Row]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["placement", "local_bsz", "step_time", "sync_time"])
        for r in rows:
            w.writerow(["".join(map(str, r.placement)), r.local_bsz, r.step_time_s, r.sync_time_s])
    return path


def _sigma(cv: float) -> float:
    return math.sqrt(math.log1p(cv * cv))


@pytest.mark.parametrize("cv", [0.01, 0.1, 0.4])
def test_mean_of_the_max_of_two_lognormals_is_the_closed_form(cv: float) -> None:
    # X1, X2 iid lognormal with mean 1: E[max] = 2·Φ(σ/√2)
    got = max_distribution([1.0, 1.0], cv).mean
    assert math.isclose(got, 2 * float(ndtr(_sigma(cv) / math.sqrt(2))), rel_tol=1e-4)


def test_one_worker_waits_for_no_one_and_the_wait_grows_with_n() -> None:
    assert math.isclose(max_distribution([1.0], 0.2).mean, 1.0, rel_tol=1e-4)
    means = [max_distribution([1.0] * n, 0.05).mean for n in (1, 2, 4, 8, 16, 64)]
    assert all(b > a for a, b in zip(means, means[1:], strict=False))
    # small cv: E[max of n] ≈ 1 + cv·E[max of n standard normals] (0.5642 for 2, 1.0294 for 4)
    assert math.isclose(max_distribution([1.0] * 2, 0.01).mean - 1, 0.01 * 0.5642, rel_tol=0.02)
    assert math.isclose(max_distribution([1.0] * 4, 0.01).mean - 1, 0.01 * 1.0294, rel_tol=0.02)
    # a much faster worker adds nothing: the max is the slow one's
    assert math.isclose(max_distribution([2.0, 1.0], 0.01).mean, 2.0, rel_tol=1e-6)


def _monte_carlo(factors: list[float], cv: float, t: float, c: float, ov: OverlapParams, n: int = 400_000) -> float:
    rng = np.random.default_rng(7)
    s = _sigma(cv)
    m = t * np.max(np.asarray(factors)[:, None] * rng.lognormal(-s * s / 2, s, (len(factors), n)), axis=0)
    return float(np.mean(m + np.maximum(ov.tail_share * c, c - ov.hide_share * m)))


@pytest.mark.parametrize("c", [0.0, 0.02, 0.1, 1.0])  # hidden, partly hidden, only the tail, none hidden
def test_expected_step_with_overlap_matches_monte_carlo(c: float) -> None:
    factors, cv, t = [1.1, 1.1, 1.0], 0.15, 0.2
    ov = OverlapParams(hide_share=0.5, tail_share=0.2)
    got = float(expected_step_s(np.array([t]), np.array([c]), max_distribution(factors, cv), 1.1, ov)[0])
    assert math.isclose(got, _monte_carlo(factors, cv, t, c, ov), rel_tol=2e-3)
    no_overlap = float(expected_step_s(np.array([t]), np.array([c]), max_distribution(factors, cv), 1.1,
                                       OverlapParams())[0])
    assert math.isclose(no_overlap, t * max_distribution(factors, cv).mean + c, rel_tol=1e-12)


def test_without_noise_the_step_is_the_engines_formula() -> None:
    for p in PLACEMENTS:
        for b in BATCHES:
            t = t_of(b) * (1 + TRUE.shared_node_slowdown * (max(p) - 1))
            want = t + (exposed_comm_s(comm_s(p, S, TRUE), t, TRUE.overlap) if sum(p) > 1 else 0.0)
            assert step_s(p, t_of(b), S, TRUE)[0] == want
            assert float(steps_s(p, np.array([t_of(b)]), S, TRUE)[0]) == want
            assert step_s(p, t_of(b), S, NOISY)[0] > want  # noise only ever adds a wait (or 0 on one GPU)
        for fig in (TRUE, replace(TRUE, overlap=OverlapParams())):  # many rows at once: each the engine's double
            ts = [t_of(b) * (1 + fig.shared_node_slowdown * (max(p) - 1)) for b in BATCHES]
            c = comm_s(p, S, fig) if sum(p) > 1 else 0.0
            rowwise = [t + exposed_comm_s(c, t, fig.overlap) for t in ts]
            assert steps_s(p, np.array([t_of(b) for b in BATCHES]), S, fig).tolist() == rowwise
    with pytest.raises(ValueError):
        max_distribution([1.0], 0.0)


def _calibration(fig: LinkFigures) -> object:
    from lbsim.calibration.fit import Calibration

    curve = fit_compute_curve([(b, t_of(b)) for b in BATCHES])
    return Calibration(curve, fig, S, tuple(FIT), 0.0, {}, True)


@pytest.mark.parametrize("placement", [(4, 4), (1, 1, 1)])
def test_engine_mean_converges_to_the_closed_form(placement: tuple[int, ...]) -> None:
    fig = replace(NOISY, jitter_cv=0.2)  # large noise: the wait is a large share of the step
    data = row_scenario(_calibration(fig), "g4dn.12xlarge", 512, placement, 64)  # type: ignore[arg-type]
    assert data["cluster"]["groups"][0]["jitter_cv"] == 0.2
    data["workload"]["updates"] = 4000
    run = simulate(scenario_from_data(data))
    step_each = np.diff(np.concatenate(([0.0], run.updates.column("time_s"))))  # type: ignore[attr-defined]
    want = step_s(placement, t_of(64), S, fig)[0]
    se = float(np.std(step_each) / math.sqrt(step_each.size))
    assert abs(float(np.mean(step_each)) - want) < 4 * se
    assert float(np.mean(step_each)) > step_s(placement, t_of(64), S, replace(fig, jitter_cv=0.0))[0] + 10 * se
    # seeded: the same prediction twice (a calibrate row's run)
    data["workload"]["updates"] = 200
    assert simulate(scenario_from_data(data)).summary == simulate(scenario_from_data(data)).summary


def _noisy_rows() -> list[Row]:
    rows = []
    for p in PLACEMENTS:
        for b in BATCHES:
            step, sync = step_s(p, t_of(b), S, NOISY)
            rows.append(Row(p, b, step, sync))
    return rows


def test_calibration_recovers_a_known_cv() -> None:
    cal = calibrate_rows(_noisy_rows(), FIT, S, jitter_cv=None, nic_counts=(1,))  # rows made with one NIC per node
    f = cal.figures
    assert math.isclose(f.jitter_cv, 0.06, rel_tol=0.02)
    assert math.isclose(f.shared_node_slowdown, 0.05, rel_tol=1e-3)  # step − sync: own compute, not the wait
    assert cal.fit_error < 1e-3
    # not fitted (the default), the same rows leave the noise out
    assert calibrate_rows(_noisy_rows(), FIT, S).figures.jitter_cv == 0.0


def test_cli_writes_the_noise_and_the_engine_predicts_the_wait(tmp_path: Path) -> None:
    rows = [r for r in _noisy_rows() if r.local_bsz in (8, 512)]
    src = _write(tmp_path / "m.csv", rows)
    out = tmp_path / "out"
    argv = ["calibrate", str(src), "--fit-placements", FIT_ARG, "--gradient-bytes", str(S), "--out", str(out), "-q"]
    assert parse_jitter_cv("fit") is None and parse_jitter_cv("0") == 0.0  # `fit`: the fit of the test above
    assert main([*argv, "--jitter-cv", "0.06"]) == 0
    text = (out / "fit.yaml").read_text()
    assert "jitter_cv: 0.06" in text
    with (out / "predictions.csv").open() as fh:
        got = list(csv.DictReader(fh))
    # the engine's mean of many seeded iterations: within its sampling error of the closed form
    assert max(abs(float(r["relative_error"])) for r in got) < 0.01
    assert main([*argv, "--jitter-cv", "0"]) == 0 and "jitter_cv" not in (out / "fit.yaml").read_text()


@pytest.mark.parametrize("value", ["-0.1", "abc", "0.9"])
def test_bad_jitter_cv_is_an_input_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str) -> None:
    src = _write(tmp_path / "m.csv", _noisy_rows())
    out = tmp_path / "out"
    assert main(["calibrate", str(src), "--fit-placements", FIT_ARG, "--gradient-bytes", str(S), "--out", str(out),
                 "-q", "--jitter-cv", value]) == 2
    err = capsys.readouterr().err
    assert "--jitter-cv" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


POLLUX = Path(__file__).resolve().parents[1] / "data" / "pollux_t4"  # shipped (data/pollux_t4/README.md)


@pytest.mark.parametrize("fit_arg", [FIT_ARG, "2,4,11,22,111", "2,4,22,44,11"])
def test_pollux_cifar10_with_fitted_noise(fit_arg: str) -> None:
    """docs/validation.md: with the fitted noise cifar10 stays within its 10 % bound on every subset (with the
    ring's latency paid along its path it is better than without on two of the three, worse on 2,4,22,44,11)."""
    from lbsim.calibration.fit import intra_bounds_for, predict_rows
    from lbsim.calibration.measured import read_measurements

    rows = read_measurements(POLLUX / "cifar10_placements.csv")
    fit = [tuple(int(c) for c in p) for p in fit_arg.split(",")]
    held = np.array([r.placement not in set(fit) and r.gpus > 1 for r in rows])
    measured = np.array([r.step_time_s for r in rows])
    geomean = {}
    for cv in (0.0, None):
        # one NIC per node: the fit's choice on these files (docs/validation.md, fit.yaml of each model)
        cal = calibrate_rows(rows, fit, 44_695_848, intra_bounds=intra_bounds_for("g4dn.12xlarge"), jitter_cv=cv,
                             nic_counts=(1,))
        err = predict_rows(rows, cal.curve, cal.figures, 44_695_848) / measured - 1.0
        geomean[cv] = float(np.exp(np.mean(np.log1p(np.abs(err[held])))) - 1.0)
        if cv is None:
            assert 0.05 < cal.figures.jitter_cv < 0.12  # identified: 0.07-0.09 ± 0.02 on these subsets
    assert geomean[None] <= 0.10
    assert (geomean[None] < geomean[0.0]) == (fit_arg != "2,4,22,44,11")
