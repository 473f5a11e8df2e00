"""The generated scenario reference is current (regenerate: python -m lbsim.scenario.reference > docs/scenarios.md)."""

from pathlib import Path

from lbsim.scenario.reference import reference_markdown

ROOT = Path(__file__).resolve().parents[1]


def test_scenario_reference_is_current() -> None:
    committed = (ROOT / "docs" / "scenarios.md").read_text(encoding="utf-8")
    assert committed == reference_markdown(), "docs/scenarios.md is stale: python -m lbsim.scenario.reference > docs/scenarios.md"


def test_reference_lists_every_scheme_and_contention_kind() -> None:
    text = reference_markdown()
    for name in ("bsp", "asp", "ssp", "static", "scheduled", "markov", "trace", "parameter_server", "ring_allreduce"):
        assert f"{{name: {name}}}" in text
