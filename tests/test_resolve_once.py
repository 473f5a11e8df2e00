"""Resolution once (issue 17): a scenario is resolved (workers, data layout, scheme context, ...)
once when it is loaded, and a run of it takes its figures from that; each run makes its own
stateful objects (contention sources, the scheme)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import lbsim.scenario.resolve as resolve
from lbsim.scenario.loader import load_scenario

REPO = Path(__file__).resolve().parents[1]
LOFT_EDGE = REPO / "scenarios" / "loft_edge.yaml"  # a data section: the layout used to be resolved four times a run


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    calls = {"resolve_workers": 0, "resolve_data": 0}
    for name in calls:
        real = getattr(resolve, name)

        def wrapper(*args, _real=real, _name=name, **kwargs):  # type: ignore[no-untyped-def]
            calls[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(resolve, name, wrapper)
    return calls


def test_load_then_simulate_resolves_once(counted: dict[str, int]) -> None:
    from lbsim.simulator.run import simulate

    scenario = load_scenario(LOFT_EDGE, ["workload.updates=3"])
    assert counted == {"resolve_workers": 1, "resolve_data": 1}
    first = simulate(scenario)
    second = simulate(scenario)
    assert counted == {"resolve_workers": 1, "resolve_data": 1}  # both runs found the loader's resolution
    assert first.summary == second.summary  # fresh scheme and contention per run: the same run twice
    assert list(first.iterations) == list(second.iterations)


def test_resolved_run_is_shared_and_its_stateful_parts_fresh() -> None:
    scenario = load_scenario(LOFT_EDGE, ["workload.updates=3"])
    a, b = resolve.resolve_run(scenario), resolve.resolve_run(replace(scenario))  # an equal scenario object
    assert b.scenario is not scenario and b.scenario == scenario
    assert a.workers is b.workers and a.data is b.data and a.context is b.context  # equal scenarios share one
    assert a.data is not None and a.context.data is a.data
    assert a.scheme() is not a.scheme()
    c1, c2 = a.contention(), a.contention()
    assert c1 is not c2 and c1[0] is not c2[0]
    other = resolve.resolve_run(load_scenario(LOFT_EDGE, ["workload.updates=3", "seed=9"]))
    assert other.context.seed == 9 and a.context.seed != 9
