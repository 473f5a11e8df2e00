"""The validation report's tables (``python docs/tools/validation_tables.py``): roles kept apart, geomeans, worst placement."""

from __future__ import annotations

import math

import numpy as np

from lbsim.calibration.measured import Row
from lbsim.calibration.report import (
    ModelResult,
    catalog_errors,
    geomean_abs,
    held_out_summary,
    render,
    robustness_table,
    summary_table,
)


def _result() -> ModelResult:
    rows = [Row((1,), 8, 1.0), Row((2,), 8, 1.0), Row((4, 4), 8, 1.0), Row((4, 4), 16, 1.0), Row((1, 1, 1), 8, 1.0)]
    role = ["single", "fit", "held_out", "held_out", "held_out"]
    lbsim = np.array([0.0, 0.5, 0.10, -0.30, 0.05])  # the fit row's large error must not leak into held-out figures
    return ModelResult("cifar10", rows, role, lbsim, np.full(5, 0.2), np.full(5, -0.1), "workload: {}\n")


def test_geomean_abs() -> None:
    assert math.isclose(geomean_abs([0.1, -0.1]), 0.1)
    assert math.isclose(geomean_abs([0.0, 0.21]), math.sqrt(1.21) - 1)


def test_summary_keeps_fit_and_held_out_apart() -> None:
    lines = summary_table([_result()])
    cells = [c.strip() for c in lines[2].split("|")[1:-1]]
    held = geomean_abs([0.10, -0.30, 0.05])
    assert cells[0] == "cifar10" and cells[3] == "50.0"  # fit geomean: the fit row only
    assert cells[4] == f"**{100 * held:.1f}**"
    assert cells[5] == "10.0"  # median |e| of 0.10, 0.30, 0.05
    assert cells[6] == f"{100 * (0.10 + 0.8 * (0.30 - 0.10)):.1f}"  # p90, interpolated
    # ratios at batch 8 only (44 and 111; the other 44 row is alone at 16): 44 measured = 111, so the
    # first listed is "slower": (1.10 / 1.05) - 1
    assert cells[8] == cells[9] == f"{100 * (1.10 / 1.05 - 1):.1f}"
    assert cells[10] == "—"  # no interval read
    assert cells[11] == f"44 ({100 * geomean_abs([0.10, -0.30]):.1f})"  # worst held-out placement
    assert cells[12] == "20.0" and cells[13] == "20.0" and cells[14] == "0.0" and cells[15] == "10.0"


def test_ratio_errors_cancel_a_common_bias_and_orient_by_the_measured_speedup() -> None:
    from lbsim.calibration.error_stats import ratio_errors

    labels, batches = ["a", "b", "c", "a"], [8, 8, 8, 16]
    measured = np.array([2.0, 1.0, 1.0, 3.0])
    err = np.array([0.2, 0.2, -0.4, 0.5])  # a and b both 20 % slow: their ratio is exact
    r = ratio_errors(labels, batches, measured, err, np.ones(4, bool))
    # pairs at batch 8: (a, b) 0; (a, c): a slower, 1.2 / 0.6 - 1 = 1; (b, c): equal times, b first: 1.2 / 0.6 - 1
    assert np.allclose(sorted(r), [0.0, 1.0, 1.0])
    assert ratio_errors(labels, batches, measured, err, np.array([True, False, False, True])).size == 0


def test_coverage_counts_rows_inside_their_interval() -> None:
    from lbsim.calibration.error_stats import coverage

    m = np.array([1.0, 2.0, 3.0, 4.0])
    assert coverage(m, m * 0.9, m * 1.1) == 1.0
    assert coverage(m, np.array([1.1, 1.0, 3.0, np.nan]), np.array([1.2, 2.0, 3.5, np.nan])) == 2 / 3


def test_render_has_every_placement_once() -> None:
    text = render([_result()])
    assert text.startswith("<!-- generated -->")
    table = text.split("#### cifar10")[1]
    assert [line.split("|")[1].strip() for line in table.splitlines() if line.startswith("| ") and "placement" not in line] == \
        ["1", "2", "44", "111"]


def test_the_page_keeps_its_method_text_and_replaces_the_generated_part() -> None:
    from lbsim.calibration.report import document_text

    tables = render([_result()])
    assert document_text("# V\n\nmethod\n<!-- generated -->\nold tables\n", [_result()]) == f"# V\n\nmethod\n{tables}\n"
    assert document_text(None, [_result()]) == f"# Validation\n\n{tables}\n"


def test_catalog_model_reproduces_single_gpu_rows() -> None:
    rows = [Row((1,), b, 0.01 + b / 1000) for b in (8, 16, 32)] + [Row((1, 1), 16, 1.0)]
    err = catalog_errors(rows, 10_000_000)
    assert np.allclose(err[:3], 0.0) and err[3] < 0  # comm at the catalog's links, no overlap


def test_robustness_rows_keep_the_subsets_fit_placements_out() -> None:
    rows = [Row((1,), 8, 1.0), Row((1, 1, 1), 8, 1.0), Row((4, 4), 8, 1.0), Row((4, 4), 16, 1.0), Row((2, 2), 8, 1.0)]
    err = np.array([0.0, 0.5, 0.10, -0.30, 0.05])
    r = held_out_summary("2,111", "bert", rows, err, "nccl")  # 111 is fitted: its +50 % is not held out
    assert r.placements == 2 and r.worst == "44"
    assert math.isclose(r.held_geomean, geomean_abs([0.10, -0.30, 0.05])) and math.isclose(r.held_median, 0.10)
    line = robustness_table([r])[2]
    assert line.startswith("| 2,111 | bert | 10.0 |") and "| nccl |" in line
    assert "### Robustness" in render([_result()], [r]) and "### Robustness" not in render([_result()])


def test_repeatability_table_sets_the_floor_beside_lbsim() -> None:
    from lbsim.calibration.report import repeatability_table

    none = repeatability_table([_result()])[2]
    assert none.startswith("| cifar10 | 0 | — |")  # no twin placements: no floor
    rows = [Row(p, b, t) for p, ts in (((1, 2, 4), (1.0, 2.0, 3.0)), ((1, 4, 2), (1.1, 2.2, 3.3)))
            for b, t in zip((8, 16, 32), ts, strict=True)]
    r = ModelResult("bert", rows, ["held_out"] * 6, np.full(6, 0.2), np.zeros(6), np.zeros(6), "")
    cells = [c.strip() for c in repeatability_table([r])[2].split("|")[1:-1]]
    # one pair, a constant 10 % gap: no row noise, the whole gap is the runs' offsets
    assert cells[:4] == ["bert", "1", "0.0", f"{100 * math.log(1.1) / math.sqrt(2):.1f}"]
    assert cells[-2:] == ["20.0", "20.0"]  # lbsim's held-out geomean and p90 |e|
