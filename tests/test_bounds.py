"""Issue 16: every case that used to hang, eat memory or exit 1 is exit 2, one line naming the key, nothing written.

Each case runs the real command line in a subprocess that reports its own peak resident memory
(``ru_maxrss``); the test asserts exit code 2, one stderr line naming the key (and, for a bound,
the value and the bound), peak memory under 500 MB and no file written anywhere. Timeouts are
generous hang guards only (no wall-clock assert). A virtual-memory rlimit keeps a regression from
taking the machine down with it.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from lbsim.limits import (
    MAX_HISTORY,
    MAX_SWEEP_RUNS,
    MAX_WORKER_ITERATIONS,
    MAX_WORKERS,
    MAX_YAML_BYTES,
    MAX_YAML_NODES,
    short_repr,
)

REPO = Path(__file__).resolve().parents[1]
MEMORY_LIMIT_MB = 500

SMALL = (
    "seed: 1\n"
    "workload: {model: resnet50_imagenet, global_batch: 96, updates: 2}\n"
    "cluster: {groups: [{instance: g4dn.xlarge, count: 2}, {instance: p3.2xlarge, count: 1}]}\n"
    "network: {name: parameter_server}\n"
    "scheme: {name: bsp}\n"
)

_DRIVER = (
    "import resource, sys\n"
    "from lbsim.cli import main\n"
    "rc = main(sys.argv[1:])\n"
    "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"  # KiB on Linux
    "sys.exit(rc)\n"
)


def _limit_memory() -> None:  # pragma: no cover - runs in the child
    resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30))


def lbsim(argv: list[str], cwd: Path) -> tuple[int, str, float]:
    """Run ``lbsim argv`` in a subprocess: (exit code, stderr, peak resident memory in MB)."""
    env = {"PYTHONPATH": str(REPO), "OPENBLAS_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", _DRIVER, *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=env, preexec_fn=_limit_memory)
    peak_mb = float(proc.stdout.strip().splitlines()[-1]) / 1024 if proc.stdout.strip() else float("nan")
    return proc.returncode, proc.stderr, peak_mb


def _files(root: Path) -> set[Path]:
    return {p.relative_to(root) for p in root.rglob("*")}


def assert_refused(cwd: Path, argv: list[str], *expected: str) -> str:
    """Exit 2, one line naming every ``expected`` piece, < 500 MB, nothing written under ``cwd``."""
    before = _files(cwd)
    rc, err, peak_mb = lbsim(argv, cwd)
    assert rc == 2, err
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("lbsim: error: "), err[:2000]
    assert "Traceback" not in err and "internal error" not in err
    for piece in expected:
        assert piece in lines[0], (piece, lines[0])
    assert len(lines[0]) < 400  # a bounded message, never the value itself
    assert peak_mb < MEMORY_LIMIT_MB, f"peak {peak_mb:.0f} MB"
    assert _files(cwd) == before
    return lines[0]


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _bomb(levels: int = 9) -> str:
    """A YAML anchor bomb: ``levels`` lists of nine aliases to the previous list (9**levels values, ~600 bytes)."""
    text = "  - &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    for i in range(1, levels):
        text += f"  - &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]\n"
    return text


def test_anchor_bomb_in_a_value_that_fails_validation(tmp_path: Path) -> None:
    f = _write(tmp_path / "s.yaml", SMALL.replace("seed: 1\n", "seed:\n" + _bomb()))
    assert_refused(tmp_path, ["run", str(f), "--out", "out"], "s.yaml", "aliases", str(MAX_YAML_NODES))


def test_anchor_bomb_in_a_set_value(tmp_path: Path) -> None:
    f = _write(tmp_path / "s.yaml", SMALL)
    bomb = "[" + ", ".join(["&a0 [x, x, x, x, x, x, x, x, x]"] + [f"&a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]"
                                                                  for i in range(1, 9)]) + "]"
    assert_refused(tmp_path, ["run", str(f), "--set", f"description={bomb}", "--out", "out"], "--set description",
                   str(MAX_YAML_NODES))


def test_self_referencing_alias(tmp_path: Path) -> None:
    f = _write(tmp_path / "s.yaml", SMALL + "description: &d [1, *d]\n")
    assert_refused(tmp_path, ["run", str(f), "--out", "out"], "s.yaml", "an alias refers to a node that contains it")


def test_group_count_of_a_billion(tmp_path: Path) -> None:
    f = _write(tmp_path / "s.yaml", SMALL.replace("count: 1}", "count: 1000000000}"))
    assert_refused(tmp_path, ["run", str(f), "--out", "out"], "cluster.groups[1].count", "1000000000", str(MAX_WORKERS))


def test_many_groups_add_up_past_the_worker_bound(tmp_path: Path) -> None:
    f = _write(tmp_path / "s.yaml", SMALL.replace("count: 2}", "count: 9000}").replace("count: 1}", "count: 9000}"))
    assert_refused(tmp_path, ["run", str(f), "--out", "out"], "cluster.groups[1].count", "18000", str(MAX_WORKERS))


def test_large_list_under_an_unknown_key(tmp_path: Path) -> None:
    """A 5 MB list: refused by the file-size bound before it is parsed."""
    f = _write(tmp_path / "s.yaml", SMALL + "junk: [" + ",".join(["12345"] * 850_000) + "]\n")
    assert f.stat().st_size > 5_000_000
    assert_refused(tmp_path, ["run", str(f), "--out", "out"], "s.yaml", str(f.stat().st_size), str(MAX_YAML_BYTES))


def test_long_list_under_a_known_key_within_the_file_bound(tmp_path: Path) -> None:
    f = _write(tmp_path / "s.yaml", SMALL + "numerics: {milestones: [" + ",".join(["1"] * 20_000) + "]}\n")
    assert_refused(tmp_path, ["run", str(f), "--out", "out"], "numerics.milestones", "20000 items", "10000")


@pytest.mark.parametrize("scheme", ["bsp", "asp", "ssp"])
def test_numerics_with_fewer_samples_than_workers(tmp_path: Path, scheme: str) -> None:
    f = _write(tmp_path / "s.yaml", SMALL)
    assert_refused(tmp_path, ["run", str(f), "--scheme", scheme, "--set", "numerics.enabled=true",
                              "--set", "workload.global_batch=2", "--out", "out"],
                   "workload.global_batch", "2 samples", f"scheme {scheme}")


def test_bsp_global_batch_below_the_worker_count(tmp_path: Path) -> None:
    f = _write(tmp_path / "s.yaml", SMALL.replace("global_batch: 96", "global_batch: 2"))
    assert_refused(tmp_path, ["run", str(f), "--out", "out"], "workload.global_batch", "worker 2 with none")


@pytest.mark.parametrize(("scheme", "key"), [("lbbsp", "fit_history"), ("loft", "fit_history"),
                                             ("lbbsp", "narx_hidden"), ("elastic_bsp", "lookahead")])
def test_history_length_of_a_billion(tmp_path: Path, scheme: str, key: str) -> None:
    f = _write(tmp_path / "s.yaml", SMALL)
    assert_refused(tmp_path, ["run", str(f), "--scheme", scheme, "--set", f"scheme.{key}=1000000000", "--out", "out"],
                   f"scheme.{key}", "1000000000", str(MAX_HISTORY))


@pytest.mark.parametrize("style", ["flow", "block"])
def test_nesting_thousands_deep(tmp_path: Path, style: str) -> None:
    deep = "[" * 3000 + "]" * 3000 if style == "flow" else "\n  " + "- " * 3000 + "x"  # compact nested sequences
    f = _write(tmp_path / "s.yaml", SMALL + f"description: {deep}\n")
    assert_refused(tmp_path, ["run", str(f), "--out", "out"], "s.yaml", "nested more than 64 levels deep under description")


def test_integer_of_thousands_of_digits(tmp_path: Path) -> None:
    f = _write(tmp_path / "s.yaml", SMALL.replace("seed: 1", "seed: " + "9" * 5000))
    assert_refused(tmp_path, ["run", str(f), "--out", "out"], "s.yaml", "a value cannot be read")


def test_out_that_cannot_be_created(tmp_path: Path) -> None:
    f = _write(tmp_path / "s.yaml", SMALL)
    assert_refused(tmp_path, ["run", str(f), "--out", "/proc/lbsim-no/such"], "--out", "cannot create /proc/lbsim-no")


def test_out_in_a_read_only_folder(tmp_path: Path) -> None:
    import os

    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    f = _write(tmp_path / "s.yaml", SMALL)
    locked = tmp_path / "ro"
    locked.mkdir(mode=0o500)
    try:
        assert_refused(tmp_path, ["run", str(f), "--out", str(locked / "run")], "--out")
    finally:
        locked.chmod(0o700)


def test_out_holding_something_else_is_not_replaced(tmp_path: Path) -> None:
    f = _write(tmp_path / "s.yaml", SMALL)
    (tmp_path / "mine").mkdir()
    _write(tmp_path / "mine" / "thesis.tex", "precious")
    assert_refused(tmp_path, ["run", str(f), "--out", "mine"], "--out", "holds no lbsim run")


def test_trace_row_naming_a_worker_outside_the_cluster(tmp_path: Path) -> None:
    _write(tmp_path / "t.csv", "time_s,worker,slowdown\n0,0,2\n5,7,3\n")
    f = _write(tmp_path / "s.yaml", SMALL + "contention: [{name: trace, path: t.csv}]\n")
    assert_refused(tmp_path, ["run", str(f), "--out", "out"], "contention[0].path", "worker 7", "workers 0..2")


def test_trace_with_too_many_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Checked while reading (in-process, with the bound lowered to 50 rows so the file stays small)."""
    import lbsim.contention.traces as traces
    from lbsim.cli import main

    monkeypatch.setattr(traces, "MAX_TRACE_ROWS", 50)
    _write(tmp_path / "t.csv", "time_s,worker,slowdown\n" + "".join(f"{i},0,1.5\n" for i in range(51)))
    f = _write(tmp_path / "s.yaml", SMALL + "contention: [{name: trace, path: t.csv}]\n")
    before = _files(tmp_path)
    assert main(["run", str(f), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "contention[0].path" in err and "more than 50 data rows" in err
    assert _files(tmp_path) == before


def test_set_value_too_long(tmp_path: Path) -> None:
    f = _write(tmp_path / "s.yaml", SMALL)
    assert_refused(tmp_path, ["run", str(f), "--set", "description=" + "x" * 100_000, "--out", "out"],
                   "--set description", "100012 characters")


def test_sweep_grid_too_large(tmp_path: Path) -> None:
    _write(tmp_path / "s.yaml", SMALL)
    sweep = _write(tmp_path / "sw.yaml", "base: s.yaml\nfactors:\n  seed: [" + ", ".join(map(str, range(200))) + "]\n"
                   "  workload.updates: [" + ", ".join(map(str, range(1, 101))) + "]\nrepetitions: 3\n")
    assert_refused(tmp_path, ["sweep", str(sweep), "--out", "out"], "factors", "200 x 100 x 3 repetitions",
                   str(MAX_SWEEP_RUNS))


def test_short_repr_is_bounded_for_self_similar_values() -> None:
    inner: list = ["x" * 10] * 9
    for _ in range(12):  # 9**12 leaves: repr() would never finish
        inner = [inner] * 9
    text = short_repr(inner, 60)
    assert len(text) == 60 and text.startswith("[[[[") and text.endswith("...")
    assert short_repr({"a": 1}) == "{'a': 1}" and short_repr("ab") == "'ab'" and short_repr((1, 2)) == "(1, 2)"
    assert short_repr("y" * 10_000, 20) == "'" + "y" * 16 + "..."


def test_many_set_values_together_past_the_value_bound(tmp_path: Path) -> None:
    f = _write(tmp_path / "s.yaml", SMALL)
    chunk = "[" + ", ".join(["&a [1, 2, 3, 4, 5, 6, 7, 8, 9]"] + ["*a"] * 900) + "]"  # ~9,000 values in 5 KB
    sets = [a for i in range(12) for a in ("--set", f"description{i}={chunk}")]
    assert_refused(tmp_path, ["run", str(f), *sets, "--out", "out"], "--set", "more than 100000 values")


def test_sweep_and_plot_out_that_cannot_be_created(tmp_path: Path) -> None:
    _write(tmp_path / "s.yaml", SMALL)
    sweep = _write(tmp_path / "sw.yaml", "base: s.yaml\nfactors:\n  seed: [1, 2]\n")
    assert_refused(tmp_path, ["sweep", str(sweep), "--out", "/proc/lbsim-no/sweep", "-q"], "--out", "cannot create")
    run = tmp_path / "run"
    rc, err, _peak = lbsim(["run", str(tmp_path / "s.yaml"), "--out", str(run), "-q"], tmp_path)
    assert rc == 0, err
    assert_refused(tmp_path, ["plot", str(run), "--out", "/proc/lbsim-no/plots", "-q"], "--out", "cannot write figures")


@pytest.mark.parametrize(("option", "expected"), [(["--threads", "100000"], "--threads: must be >= 1 and <= 1024"),
                                                  (["--model", "mlp", "--hidden", "100000000"], "--hidden: must be > 0 and <= 10000")])
def test_runtime_options_are_bounded(tmp_path: Path, option: list[str], expected: str) -> None:
    """--threads 100000 segfaulted a rank (exit 1); an MLP of 10^8 hidden units would not fit."""
    pytest.importorskip("torch")
    f = _write(tmp_path / "s.yaml", SMALL.replace("{instance: g4dn.xlarge, count: 2}, {instance: p3.2xlarge, count: 1}",
                                                  "{instance: c5.xlarge, count: 2, samples_per_s: 1000, max_batch: 512}")
               .replace("parameter_server", "ring_allreduce").replace("bsp", "static"))
    assert_refused(tmp_path, ["train", str(f), *option, "--out", "out"], expected)


@pytest.mark.parametrize(("command", "option", "expected"), [
    ("train", ["--set", "cluster.groups.0.count=300", "--set", "workload.global_batch=3200"], "cluster: 300 ranks: the local launcher"),
    ("profile", ["--set", "cluster.groups.0.count=300", "--set", "workload.global_batch=3200"], "cluster: 300 ranks: the local launcher"),
    ("validate", ["--set", "cluster.groups.0.count=300", "--set", "workload.global_batch=3200"], "cluster: 300 ranks: the local launcher"),
    ("validate", ["--repeats", "101"], "--repeats: must be >= 1 and <= 100"),
])
def test_local_runtime_launches_are_bounded(tmp_path: Path, command: str, option: list[str], expected: str) -> None:
    """`validate --repeats 100000` ran on for hours; 16,384 ranks would be 16,384 torch processes on one machine."""
    pytest.importorskip("torch")
    f = _write(tmp_path / "s.yaml", SMALL.replace("{instance: g4dn.xlarge, count: 2}, {instance: p3.2xlarge, count: 1}",
                                                  "{instance: c5.xlarge, count: 2, samples_per_s: 1000, max_batch: 512}")
               .replace("parameter_server", "ring_allreduce").replace("bsp", "static"))
    assert_refused(tmp_path, [command, str(f), *option, "--out", "out"], expected)


def test_sweep_jobs_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from lbsim.cli import main
    from lbsim.limits import MAX_JOBS

    _write(tmp_path / "s.yaml", SMALL)
    sweep = _write(tmp_path / "sw.yaml", "base: s.yaml\nfactors:\n  seed: [1, 2]\n")
    before = _files(tmp_path)
    assert main(["sweep", str(sweep), "-j", "100000", "--out", str(tmp_path / "out"), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"-j: expected a number of worker processes >= 1 and <= {MAX_JOBS}, got 100000" in err
    assert _files(tmp_path) == before


@pytest.mark.parametrize(("key", "value"), [("time_budget_s", "1e12"), ("samples", "1000000000000")])
def test_open_ended_run_of_a_trillion(tmp_path: Path, key: str, value: str) -> None:
    """A run that only a huge time budget or sample target ends is refused before it starts (it ran until
    memory ran out); ``1e12`` is a number (YAML 1.2), not the string PyYAML's 1.1 rules make of it."""
    f = _write(tmp_path / "s.yaml", SMALL)
    line = assert_refused(tmp_path, ["run", str(f), "--set", "workload.updates=null", "--set", f"workload.{key}={value}",
                                     "--out", "out"], f"workload.{key}", "worker-iterations", str(MAX_WORKER_ITERATIONS))
    assert "expected a number" not in line


def test_open_ended_run_within_the_bound_runs(tmp_path: Path) -> None:
    """The estimate does not refuse an ordinary budget: 2 simulated seconds run and end at the budget."""
    f = _write(tmp_path / "s.yaml", SMALL)
    rc, err, _ = lbsim(["run", str(f), "--set", "workload.updates=null", "--set", "workload.time_budget_s=2e0",
                        "--out", "out"], tmp_path)
    assert rc == 0, err
    assert (tmp_path / "out" / "summary.json").is_file()
