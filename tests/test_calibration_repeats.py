"""``lbsim validate --repeats K``: median and spread of each error over repeats; progress never goes backwards."""

from __future__ import annotations

from lbsim.runtime.validate import Monotone, repeat_summary


def _report(it: float, tput: float, stale: float | None = None) -> dict:
    err = {"mean_iteration_s": it, "throughput_samples_per_s": tput, "batch_trajectory": 0.1, "mean_batch": None,
           "staleness_mean": stale, "final_accuracy": None}
    return {"schemes": {"bsp": {"error": err}, "lbbsp": {"error": {**err, "mean_iteration_s": -it}}}}


def test_repeat_summary_median_min_max_spread() -> None:
    reports = [_report(0.05, -0.04), _report(-0.01, 0.02, 0.5), _report(0.02, 0.00)]
    s = repeat_summary("x.yaml", reports)
    assert s["repeats"] == 3 and s["runs"] == ["repeat_1/validation.json", "repeat_2/validation.json", "repeat_3/validation.json"]
    it = s["schemes"]["bsp"]["mean_iteration_s"]
    assert (it["median"], it["min"], it["max"], it["spread"]) == (0.02, -0.01, 0.05, 0.06)
    assert s["schemes"]["lbbsp"]["mean_iteration_s"]["median"] == -0.02  # each scheme its own errors
    assert s["schemes"]["bsp"]["staleness_mean"]["values"] == [0.5]  # None entries skipped
    assert s["schemes"]["bsp"]["mean_batch"] is None
    assert "positive = simulator slower" in s["error_definition"]


def test_progress_never_goes_backwards() -> None:
    seen: list[float] = []
    p = Monotone(seen.append)
    for f in (0.1, 0.3, 0.2, 0.3, 0.9, 0.5, 1.2):
        p(f)
    assert seen == [0.1, 0.3, 0.9, 1.0]


def test_zero_repeats_is_refused_before_anything_runs(tmp_path, capsys) -> None:
    """``--repeats 0`` is a user mistake (exit 2, the option named), not silently one repeat."""
    import pytest

    pytest.importorskip("torch")
    from pathlib import Path

    from lbsim.cli import main

    scenario = Path(__file__).resolve().parents[1] / "scenarios" / "validation" / "cpu4.yaml"
    out = tmp_path / "v"
    assert main(["validate", str(scenario), "--repeats", "0", "--out", str(out)]) == 2
    assert "--repeats" in capsys.readouterr().err
    assert not out.exists()
