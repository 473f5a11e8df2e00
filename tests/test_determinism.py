"""Determinism by construction: the same scenario and seed give byte-identical result files."""

from __future__ import annotations

from pathlib import Path

import pytest

from lbsim.cli import main
from lbsim.output import write_run
from lbsim.simulator.run import simulate

FILES = ("iterations.csv", "updates.csv", "summary.json")


def random_scenario(sim, seed: int, scheme="ssp"):
    """Every random source at once: Markov contention on compute and network, and natural jitter."""
    groups = [sim.group(2, 120.0, t0=0.02, bw=10.0, jitter=0.15), sim.group(2, 45.0, t0=0.05, bw=5.0, jitter=0.05)]
    cont = [
        {"name": "markov", "workers": "all", "mean_off_s": 3.0, "mean_on_s": 1.0, "slowdown_min": 1.5,
         "slowdown_max": 4.0, "target": "both"},
        {"name": "scheduled", "workers": [1], "start_s": 5.0, "end_s": 15.0, "slowdown": 2.0},
    ]
    scheme = {"name": "ssp", "staleness": 2} if scheme == "ssp" else scheme
    return sim.scenario(groups, network=sim.ps(server_gbps=10.0, shards=2, apply_s=0.004, latency_s=0.0002),
                        scheme=scheme, global_batch=200, gradient_bytes=20_000_000, updates=150,
                        contention=cont, seed=seed)


def write(out: Path, scenario) -> dict[str, bytes]:
    res = simulate(scenario)
    write_run(out, res.iterations, res.updates, res.summary)
    return {name: (out / name).read_bytes() for name in FILES}


def test_same_seed_gives_identical_files(sim, tmp_path):
    for scheme in ("ssp", "bsp", "asp"):
        a = write(tmp_path / scheme / "a", random_scenario(sim, 7, scheme))
        b = write(tmp_path / scheme / "b", random_scenario(sim, 7, scheme))
        assert a == b, scheme
        assert len(a["iterations.csv"].splitlines()) > 100


def test_interleaved_runs_do_not_share_state(sim, tmp_path):
    """A run in between (other seed, other scheme) changes nothing: no global or class-level RNG."""
    first = write(tmp_path / "1", random_scenario(sim, 7))
    write(tmp_path / "other", random_scenario(sim, 8, "asp"))
    assert write(tmp_path / "2", random_scenario(sim, 7)) == first


def test_different_seed_changes_random_results(sim, tmp_path):
    a = write(tmp_path / "a", random_scenario(sim, 7))
    b = write(tmp_path / "b", random_scenario(sim, 8))
    assert a["iterations.csv"] != b["iterations.csv"]
    assert a["summary.json"] != b["summary.json"]


def test_seed_is_irrelevant_without_randomness(sim, tmp_path):
    groups = [sim.group(1, 100.0), sim.group(1, 50.0)]
    kw = dict(network=sim.ps(apply_s=0.01), scheme="asp", global_batch=100, updates=30,
              contention=[{"name": "scheduled", "workers": [0], "start_s": 1.0, "end_s": 3.0, "slowdown": 2.0}])
    a = write(tmp_path / "a", sim.scenario(groups, seed=1, **kw))
    b = write(tmp_path / "b", sim.scenario(groups, seed=2, **kw))
    assert a["iterations.csv"] == b["iterations.csv"] and a["updates.csv"] == b["updates.csv"]


def test_cli_run_of_ec2_mixed_is_reproducible(sim, tmp_path):
    path = str(sim.REPO / "scenarios" / "ec2_mixed.yaml")
    outs = [tmp_path / "a", tmp_path / "b"]
    for out in outs:
        assert main(["run", path, "--out", str(out), "-q"]) == 0
    names = sorted(p.name for p in outs[0].iterdir())
    assert names == sorted(p.name for p in outs[1].iterdir())
    assert {"iterations.csv", "updates.csv", "summary.json", "scenario.resolved.yaml", "provenance.json",
            "invocation.json"} <= set(names)
    for name in names:
        if name != "invocation.json":  # the one volatile file (command line, time): docs/api.md, Provenance
            assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes(), name


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_write_run_is_byte_identical_in_both_formats(sim, tmp_path, fmt):
    """Same columns, same bytes: CSV and Parquet (pinned writer options, no timestamps)."""
    sc = random_scenario(sim, 7)
    files = []
    for d in ("a", "b"):
        res = simulate(sc)
        write_run(tmp_path / d, res.iterations, res.updates, res.summary, fmt=fmt)
        files.append({p.name: p.read_bytes() for p in sorted((tmp_path / d).iterdir())})
    assert sorted(files[0]) == ["iterations." + fmt, "provenance.json", "summary.json", "updates." + fmt]
    assert files[0] == files[1]
    other = simulate(random_scenario(sim, 8))
    write_run(tmp_path / "c", other.iterations, other.updates, other.summary, fmt=fmt)
    assert (tmp_path / "c" / f"iterations.{fmt}").read_bytes() != files[0][f"iterations.{fmt}"]
