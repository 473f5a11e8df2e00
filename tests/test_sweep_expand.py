"""Sweep expansion is a pure data transform with stable content hashes; bad sweeps fail before anything runs."""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path

import pytest
import yaml

from lbsim.errors import InputError
from lbsim.scenario.loader import dump_scenario, read_yaml
from lbsim.sweep import expand, load_sweep, parse_sweep, run_id

REPO = Path(__file__).resolve().parents[1]
EC2 = REPO / "scenarios" / "ec2_mixed.yaml"
SWEEPS = REPO / "scenarios" / "sweeps"


def _spec(**kw):
    return {"base": str(EC2), **kw}


def _expand(spec_data, overrides=()):
    return expand(parse_sweep(spec_data), read_yaml(EC2), base_dir=EC2.parent, overrides=overrides)


def test_full_factorial_order_labels_and_seeds() -> None:
    sweep = _expand(_spec(factors={"scheme": ["bsp", "asp"], "contention.1.slowdown": [1.5, 3.0]}, repetitions=2))
    assert sweep.columns == ("scheme", "contention.1.slowdown")
    assert [(p.labels, p.repetition) for p in sweep.points] == [
        (("bsp", "1.5"), 0), (("bsp", "1.5"), 1), (("bsp", "3.0"), 0), (("bsp", "3.0"), 1),
        (("asp", "1.5"), 0), (("asp", "1.5"), 1), (("asp", "3.0"), 0), (("asp", "3.0"), 1),
    ]
    assert [p.scenario.seed for p in sweep.points] == [42, 43] * 4  # base seed + repetition
    assert [p.index for p in sweep.points] == list(range(8))
    p = sweep.points[6]
    assert p.scenario.scheme.kind == "asp" and p.scenario.contention[1].slowdown == 3.0


def test_hash_is_the_content_hash_of_the_resolved_yaml() -> None:
    sweep = _expand(_spec(factors={"scheme": ["bsp", "ssp"]}, repetitions=2))
    for p in sweep.points:
        assert p.resolved_yaml == dump_scenario(p.scenario)
        assert p.run_id == hashlib.sha256(p.resolved_yaml.encode()).hexdigest()[:16] == run_id(p.resolved_yaml)
    assert len({p.run_id for p in sweep.points}) == 4


def test_expansion_is_pure_and_stable() -> None:
    spec = parse_sweep(_spec(factors={"scheme": ["bsp", "asp"], "stragglers": {"one": {"contention.1.workers": [2]},
                                                                                 "two": {"contention.1.workers": [2, 4]}}}))
    base = read_yaml(EC2)
    before = copy.deepcopy(base)
    a = expand(spec, base, base_dir=EC2.parent)
    b = expand(spec, base, base_dir=EC2.parent)
    assert base == before, "expansion must not modify its input"
    assert a == b and [p.run_id for p in a.points] == [p.run_id for p in b.points]


def test_hash_depends_on_content_not_on_how_the_sweep_is_written() -> None:
    one = _expand(_spec(factors={"scheme": ["bsp", "asp"], "contention.1.slowdown": [1.5, 3.0]}))
    two = _expand(_spec(factors={"contention.1.slowdown": [3.0, 1.5], "scheme": ["asp", "bsp"]}))
    assert sorted(p.run_id for p in one.points) == sorted(p.run_id for p in two.points)
    # the same scenario written through a zip group or a named level has the same identity
    three = _expand(_spec(zip=[{"scheme": ["bsp", "asp"], "contention.1.slowdown": [1.5, 3.0]}]))
    four = _expand(_spec(factors={"pair": {"a": {"scheme": "bsp", "contention.1.slowdown": 1.5},
                                           "b": {"scheme": "asp", "contention.1.slowdown": 3.0}}}))
    assert [p.run_id for p in three.points] == [p.run_id for p in four.points]
    assert {p.run_id for p in three.points} < {p.run_id for p in one.points}
    # any change to the resolved scenario changes the identity
    five = _expand(_spec(set={"workload.time_budget_s": 599}, factors={"scheme": ["bsp", "asp"], "contention.1.slowdown": [1.5, 3.0]}))
    assert not {p.run_id for p in five.points} & {p.run_id for p in one.points}


def test_zip_and_named_levels() -> None:
    sweep = _expand(_spec(
        factors={"burst": {"short": {"contention.0.mean_on_s": 5, "contention.0.mean_off_s": 15},
                           "long": {"contention.0.mean_on_s": 30, "contention.0.mean_off_s": 90}}},
        zip=[{"scheme": ["bsp", "static"], "workload.global_batch": [800, 1600]}],
    ))
    assert sweep.columns == ("burst", "scheme", "workload.global_batch")
    got = [(p.labels, p.scenario.contention[0].mean_on_s, p.scenario.workload.global_batch) for p in sweep.points]
    assert got == [(("short", "bsp", "800"), 5, 800), (("short", "static", "1600"), 5, 1600),
                   (("long", "bsp", "800"), 30, 800), (("long", "static", "1600"), 30, 1600)]


def test_command_line_set_applies_to_every_point_and_may_change_set_keys() -> None:
    sweep = _expand(_spec(set={"workload.time_budget_s": 300}, factors={"scheme": ["bsp", "asp"]}),
                    overrides=["workload.time_budget_s=7"])
    assert {p.scenario.workload.time_budget_s for p in sweep.points} == {7}
    with pytest.raises(InputError, match="overlaps"):
        _expand(_spec(factors={"scheme": ["bsp", "asp"]}), overrides=["scheme.staleness=1"])


@pytest.mark.parametrize("name,points", [("stragglers.yaml", 180), ("tutorial.yaml", 12)])
def test_shipped_sweeps_load(name: str, points: int) -> None:
    sweep = load_sweep(SWEEPS / name)
    assert len(sweep.points) == points
    assert len(sweep.run_ids()) == points, "every point of a shipped sweep is a distinct run"
    assert sweep.name == name.split(".")[0]
    assert {p.scenario.scheme.kind for p in sweep.points} >= {"bsp", "lbbsp"}


def test_stragglers_sweep_has_the_issue_factors() -> None:
    sweep = load_sweep(SWEEPS / "stragglers.yaml")
    assert sweep.columns == ("scheme", "stragglers", "slowdown", "burstiness")
    assert {p.scenario.scheme.kind for p in sweep.points} == {"bsp", "asp", "ssp", "static", "lbbsp"}
    assert {len(p.scenario.contention[1].workers) for p in sweep.points} == {1, 2, 3}
    assert {p.scenario.contention[1].slowdown for p in sweep.points} == {1.5, 3.0}
    assert {p.scenario.contention[0].mean_on_s for p in sweep.points} == {5.0, 30.0}
    assert sweep.repetitions == 3 and {p.scenario.seed for p in sweep.points} == {42, 43, 44}
    assert all(p.scenario.cluster == sweep.points[0].scenario.cluster for p in sweep.points)  # ec2_mixed's fleet


BAD = [
    ({"factors": {"scheme": ["bsp"]}}, "base", "base scenario"),
    (_spec(factors={"contention.1.slowdwn": [1.5]}), "slowdwn", "did you mean 'slowdown'"),
    (_spec(factors={"contention.1.slowdown": [1.5, -2]}), "contention.1.slowdown=-2", "slowdown"),
    (_spec(factors={"scheme": ["bsp", "nope"]}), "scheme=nope", "valid:"),
    (_spec(factors={"scheme": []}), "factors.scheme", "non-empty list"),
    (_spec(factors={"scheme": ["bsp", "bsp"]}), "factors.scheme", "listed twice"),
    (_spec(factors={"scheme": "bsp"}), "factors.scheme", "list of values"),
    (_spec(zip=[{"scheme": ["bsp", "asp"], "seed": [1]}]), "zip[0]", "equal lengths"),
    (_spec(set={"scheme": "asp"}, factors={"scheme.name": ["bsp"]}), "overlaps", "one place"),
    (_spec(repetitions=0), "repetitions", ">= 1"),
    (_spec(factors={"scheme": ["bsp"]}, repeats=2), "repeats", "unknown sweep key"),
    (_spec(factors={"contention.7.slowdown": [2.0]}), "contention.7", "out of range"),
]


@pytest.mark.parametrize("data,where,what", BAD, ids=[b[1] for b in BAD])
def test_bad_sweeps_are_input_errors(tmp_path: Path, data: dict, where: str, what: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_sweep(path)
    assert str(path) in str(err.value) and where in str(err.value) and what in str(err.value), str(err.value)


def test_bad_sweep_on_the_command_line_exits_2_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from lbsim.cli import main

    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(_spec(factors={"scheme": ["bsp", "asp"], "contention.1.slowdown": [1.5, 0]})), encoding="utf-8")
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out), "-j", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "contention.1.slowdown=0" in err and "Traceback" not in err
    assert not out.exists()
    assert main(["sweep", str(tmp_path / "missing.yaml"), "--out", str(out)]) == 2
    assert "sweep file not found" in capsys.readouterr().err
    assert main(["sweep", str(path), "--out", str(out), "-j", "0"]) == 2
    assert not out.exists()
