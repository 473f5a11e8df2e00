"""Cost of ``lbsim calibrate`` on one Pollux file (issue 13: well under a minute).

Run: ``python -m pytest benchmarks/bench_calibrate.py --benchmark-only --benchmark-columns=min,median,rounds``.
Parts side by side, so the figures read as ratios: the whole command (by default ``--jitter-cv
auto``: the fits with and without compute noise and their leave-one-placement-out cross-validation,
then one simulation per distinct (placement, batch) row + writing), the fit alone (c = 0), the
``auto`` selection alone, and the simulations alone. The
cifar10 file has 1,183 rows (1,183 simulations); docs/validation.md has the figures. The last
one is the whole command with the compute noise fitted (``--jitter-cv fit``: 200 iterations per
simulation instead of 3), beside the default.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lbsim.calibration.fit import DEFAULT_CHUNK_SHARE, calibrate_rows
from lbsim.calibration.measured import read_measurements
from lbsim.calibration.run import predict
from lbsim.calibration.select import calibrate_auto
from lbsim.cli import main
from lbsim.scenario.loader import scenario_from_data
from lbsim.simulator.run import simulate

DATA = Path(__file__).resolve().parents[1] / "data" / "pollux_t4"  # shipped (data/pollux_t4/README.md)
CSV = DATA / "cifar10_placements.csv"
GRADIENT_BYTES = 11_173_962 * 4
FIT = [(2,), (4,), (1, 1), (2, 2), (1, 1, 1, 1)]

pytestmark = pytest.mark.skipif(not CSV.is_file(), reason="Pollux traces not present")


def test_calibrate_command(benchmark, tmp_path: Path) -> None:
    argv = ["calibrate", str(CSV), "--fit-placements", "2,4,11,22,1111", "--gradient-bytes", str(GRADIENT_BYTES),
            "--out", str(tmp_path / "out"), "-q"]
    assert benchmark.pedantic(main, args=(argv,), rounds=2, iterations=1) == 0


def test_fit_only(benchmark) -> None:
    rows = read_measurements(CSV)
    benchmark.pedantic(calibrate_rows, args=(rows, FIT, GRADIENT_BYTES), rounds=2, iterations=1)


def test_noise_selection_only(benchmark) -> None:
    rows = read_measurements(CSV)
    benchmark.pedantic(calibrate_auto, args=(rows, FIT, GRADIENT_BYTES), kwargs={"chunk_share": DEFAULT_CHUNK_SHARE},
                       rounds=2, iterations=1)


def test_simulations_only(benchmark) -> None:
    rows = read_measurements(CSV)
    cal = calibrate_rows(rows, FIT, GRADIENT_BYTES)

    def run() -> None:
        predict(cal, rows, "g4dn.12xlarge", lambda d: float(simulate(scenario_from_data(d)).summary["mean_iteration_s"]))

    benchmark.pedantic(run, rounds=2, iterations=1)


def test_calibrate_command_noise_fitted(benchmark, tmp_path: Path) -> None:
    argv = ["calibrate", str(CSV), "--fit-placements", "2,4,11,22,1111", "--gradient-bytes", str(GRADIENT_BYTES),
            "--out", str(tmp_path / "out"), "-q", "--jitter-cv", "fit"]
    assert benchmark.pedantic(main, args=(argv,), rounds=1, iterations=1) == 0
