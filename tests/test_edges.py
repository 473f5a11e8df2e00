"""Reliability edges of issue 29: valid input accepted, useless runs explained, wrong files named.

* ``updates: 1e18`` with ``time_budget_s: 5`` is a short run (the budget ends it), not refused;
* a scenario with long comments under the file bound is read, one over it is refused saying why;
* a run that makes no model update (``gradient_bytes: 1e30``, ``samples_per_s: 1e-300``) and a
  "slowdown" below 1 (a speed-up) are said on stderr as warnings, the run still written (exit 0);
* a folder given as the scenario, a sweep file given to ``run`` (and the reverse), an ``--out``
  under /proc: one line that says what is wrong;
* ``dir(lbsim)`` lists the API; a run's ``repr`` is a line, not the scenario.
"""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from lbsim.cli import main
from lbsim.limits import MAX_YAML_BYTES

REPO = Path(__file__).resolve().parents[1]
EC2 = REPO / "scenarios" / "ec2_mixed.yaml"
TUTORIAL_SWEEP = REPO / "scenarios" / "sweeps" / "tutorial.yaml"


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    with redirect_stdout(io.StringIO()):
        code = main(args)
    return code, capsys.readouterr().err


def test_a_budget_bounds_a_huge_update_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(["run", str(EC2), "--set", "workload.updates=1e18", "--set", "workload.time_budget_s=5",
                      "--out", str(tmp_path / "r"), "-q"], capsys)
    assert code == 0 and err == ""
    code, err = _run(["run", str(EC2), "--set", "workload.updates=1e18", "--set", "workload.time_budget_s=null",
                      "--out", str(tmp_path / "r2"), "-q"], capsys)
    assert code == 2 and "workload.updates" in err and "33554432" in err  # without a budget it is still refused


def test_comments_within_the_file_bound_are_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = EC2.read_text(encoding="utf-8")
    ok = tmp_path / "long.yaml"
    ok.write_text(text + "".join(f"# note {i}: " + "x" * 90 + "\n" for i in range(5_000)), encoding="utf-8")
    assert 400_000 < ok.stat().st_size < MAX_YAML_BYTES
    code, err = _run(["run", str(ok), "--set", "workload.time_budget_s=5", "--out", str(tmp_path / "r"), "-q"], capsys)
    assert code == 0 and err == ""
    big = tmp_path / "big.yaml"
    big.write_text(text + "#" * (MAX_YAML_BYTES + 1) + "\n", encoding="utf-8")
    code, err = _run(["run", str(big), "--out", str(tmp_path / "r2")], capsys)
    assert code == 2 and err.count("\n") == 1 and "comments included" in err


@pytest.mark.parametrize(("sets", "needle"), [
    (["workload.gradient_bytes=1e30"], "sending 1e+30 gradient bytes"),
    (["cluster.groups.0.samples_per_s=1e-300"], "on the slowest (w0 p4d.24xlarge)"),
])
def test_a_run_that_does_nothing_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str], sets: list[str],
                                          needle: str) -> None:
    args = ["run", str(EC2), "--set", "workload.time_budget_s=20", "--out", str(tmp_path / "r"), "-q"]
    code, err = _run([*args, *(a for s in sets for a in ("--set", s))], capsys)
    assert code == 0 and (tmp_path / "r" / "summary.json").is_file()
    (line,) = err.splitlines()
    assert line.startswith("lbsim: warning: the run made no model update in its 20 s") and needle in line


def test_a_slowdown_below_one_is_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(["run", str(EC2), "--set", "workload.time_budget_s=5", "--set", "contention.1.slowdown=0.5",
                      "--out", str(tmp_path / "r"), "-q"], capsys)
    assert code == 0
    assert err == ("lbsim: warning: contention[1].slowdown 0.5 < 1 makes its workers 2x faster, not slower "
                   "(a slowdown is a factor >= 1: 2 means twice as slow)\n")


@pytest.mark.parametrize(("args", "message"), [
    (["run", str(REPO / "scenarios")], "is a folder, not a scenario file"),
    (["run", str(TUTORIAL_SWEEP)], f"a sweep file (its keys include base, factors, repetitions), not a scenario; "
                                   f"run it with `lbsim sweep {TUTORIAL_SWEEP}`"),
    (["compare", str(TUTORIAL_SWEEP), "--schemes", "bsp,asp"], "a sweep file"),
    (["sweep", str(EC2)], f"a scenario file (its keys include cluster, contention, network, scheme, seed, workload), "
                          f"not a sweep; run it with `lbsim run {EC2}`"),
    (["run", str(EC2), "--out", "/proc/lbsim-test"], "--out: cannot write to /proc: the folder exists but takes no new files"),
])
def test_wrong_files_and_places_are_named(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    code, err = _run(args, capsys)
    assert code == 2 and err.count("\n") == 1 and message in err, err


def test_dir_and_repr() -> None:
    import lbsim

    assert {"simulate", "compare", "load", "__version__"} <= set(dir(lbsim))
    run = lbsim.simulate(EC2, overrides={"workload.time_budget_s": 5})
    text = repr(run)
    assert text.startswith("Run(scenario='ec2_mixed', scheme='bsp', seed=42") and len(text) < 200 and "\n" not in text
    assert repr(lbsim.compare(EC2, ["bsp", "asp"], overrides={"workload.time_budget_s": 5})) == \
        "Comparison(schemes=['bsp', 'asp'])"


def test_ranks_beyond_the_free_cores_are_a_warning() -> None:
    from lbsim.notices import cores_notice

    assert cores_notice(2, cores=4, load=1.5) is None
    line = cores_notice(4, cores=2, load=3.0)
    assert line is not None and line.startswith("4 ranks x 1 thread on 2 cores with a load of 3.0 already")
    assert cores_notice(2, 2, cores=4, load=0.5) is not None  # threads count too
