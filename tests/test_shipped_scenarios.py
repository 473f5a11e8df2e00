"""Every shipped scenario loads and runs a short simulation (design.md: every file is loaded by a test).

Parametrised over ``scenarios/**/*.yaml`` (sweep definitions under ``scenarios/sweeps/`` are not
scenarios and are skipped), so a new scenario file is picked up without touching this test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lbsim.scenario.loader import load_scenario

REPO = Path(__file__).resolve().parents[1]
ROOT = REPO / "scenarios"
SCENARIOS = sorted(p for p in ROOT.glob("**/*.yaml") if "sweeps" not in p.relative_to(ROOT).parts)
SHORT = ["workload.updates=3", "workload.time_budget_s=3600"]  # whichever comes first: a few updates


def test_the_default_scenario_is_shipped() -> None:
    assert ROOT / "ec2_mixed.yaml" in SCENARIOS


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_shipped_scenario_loads_and_runs(path: Path) -> None:
    from lbsim.simulator.run import simulate

    full = load_scenario(path)
    assert full.cluster.groups
    scenario = load_scenario(path, SHORT)
    result = simulate(scenario)
    summary = result.summary
    assert summary["engine"] == "simulator"
    assert summary["scheme"] == scenario.scheme.kind
    assert summary["seed"] == scenario.seed
    assert 1 <= summary["updates"] <= 3
    assert summary["samples"] > 0 and summary["throughput_samples_per_s"] > 0
    assert result.iterations
