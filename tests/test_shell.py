"""lbsim in the Unix shell: closed pipes, full disks, kept output folders, tables that fit.

* every command whose output a reader closes early (``| head -0``, ``| head -2``) exits 0 or 141
  with nothing on stderr, and the files it writes are complete;
* a file that cannot be written (a full disk, a file-size limit) is one line naming the path,
  exit 1, and the previous run is intact; a full stdout (``> /dev/full``) says ``<stdout>``;
* a default output folder that holds a run is kept: the new run goes to ``DIR-2``, ``DIR-3``
  and stderr says so; ``--replace`` writes over it; ``--out DIR`` replaces DIR and says so;
* the summary table fits 80 columns and its time shares add up to 100 %.
"""

from __future__ import annotations

import io
import json
import os
import resource
import signal
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from lbsim.cli import main

REPO = Path(__file__).resolve().parents[1]
SMALL = (
    "name: small\n"
    "seed: 1\n"
    "workload: {model: resnet50_imagenet, global_batch: 96, updates: 4}\n"
    "cluster: {groups: [{instance: g4dn.xlarge, count: 2}, {instance: p3.2xlarge, count: 1}]}\n"
    "network: {name: parameter_server}\n"
    "scheme: {name: bsp}\n"
)


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("shell")
    (d / "small.yaml").write_text(SMALL, encoding="utf-8")
    (d / "sweep.yaml").write_text("name: sw\nbase: small.yaml\nfactors: {scheme: [bsp, static]}\n", encoding="utf-8")
    return d


def _lbsim(args: list[str], cwd: Path, *, read_lines: int, **kw: object) -> tuple[int, str]:
    """Run ``lbsim ARGS`` with stdout a pipe whose reader takes ``read_lines`` lines and closes it."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "lbsim", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, **kw)  # type: ignore[call-overload]
    assert proc.stdout is not None and proc.stderr is not None
    if read_lines == 0:
        proc.stdout.close()  # | head -0: the reader is gone before anything is written
    else:
        for _ in range(read_lines):
            proc.stdout.readline()
        proc.stdout.close()
    err = proc.stderr.read().decode()
    return proc.wait(timeout=300), err


PIPED = [
    ["schemes"], ["catalog"], ["--version"], ["--help"], ["run", "--help"],
    ["run", "small.yaml", "--out", "p/run"],
    ["run", "small.yaml", "--out", "p/traced", "--trace", "gz", "--format", "parquet"],
    ["compare", "small.yaml", "--schemes", "bsp,static", "--out", "p/cmp"],
    ["sweep", "sweep.yaml", "-j", "1", "--out", "p/sweep"],
    ["plot", "p/run", "--out", "p/figs"],
]


@pytest.mark.parametrize("lines", [0, 2])
def test_a_closed_pipe_ends_quietly_with_the_files_intact(work: Path, lines: int) -> None:
    # every command before it writes a line (| head -0); after two lines, those that print more (| head -2)
    for args in PIPED if lines == 0 else [a for a in PIPED if a[0] in ("schemes", "catalog", "--help", "run", "compare")]:
        code, err = _lbsim(args, work, read_lines=lines)
        assert code in (0, 141), (args, code, err)
        assert "error" not in err and "Traceback" not in err, (args, err)
        if args[0] in ("run", "compare") and "--out" in args:
            out = work / args[args.index("--out") + 1]
            summaries = [out / "summary.json"] if args[0] == "run" else [out / "bsp" / "summary.json", out / "compare.csv"]
            assert all(p.is_file() for p in summaries), args
            assert not list(out.parent.glob(".*.tmp"))
        if args[0] == "sweep":
            assert (work / "p" / "sweep" / "results.csv").read_text().count("\n") == 3
        if args[0] == "plot":
            assert len(list((work / "p" / "figs").glob("*.png"))) >= 3


def _limit_file_size(limit: int) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_a_file_that_cannot_be_written_is_one_line_naming_it(work: Path) -> None:
    out = work / "disk"
    assert main(["run", str(work / "small.yaml"), "--out", str(out), "-q"]) == 0
    before = _files(out)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "lbsim", "run", "small.yaml", "--out", str(out), "-q",
                           "--set", "workload.updates=400", "--trace"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=300,
                          preexec_fn=lambda: _limit_file_size(20_000))
    assert proc.returncode == 1
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"lbsim: error: cannot write {out}/") and line.endswith(": File too large"), line
    assert "internal error" not in line and ".tmp" not in line
    assert _files(out) == before  # the previous run, byte for byte
    assert not list(work.glob(".disk.*"))


def test_a_full_stdout_is_named() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "lbsim", "schemes"], env=env, stdout=full, stderr=subprocess.PIPE,
                              text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr == "lbsim: error: cannot write <stdout>: No space left on device\n"


def test_a_default_folder_is_kept_and_the_new_run_gets_a_fresh_name(work: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(work)
    default = Path("runs") / "small" / "bsp"
    assert main(["run", "small.yaml", "-q"]) == 0
    first = _files(default)
    assert capsys.readouterr().err == ""
    assert main(["run", "small.yaml", "-q", "--set", "seed=2"]) == 0
    assert capsys.readouterr().err == (f"lbsim: {default}/ holds an earlier run, kept; this run is in {default}-2/ "
                                       f"(--replace writes over {default}/ instead, --out DIR chooses)\n")
    assert _files(default) == first and json.loads((work / f"{default}-2" / "summary.json").read_text())["seed"] == 2
    assert main(["run", "small.yaml", "-q", "--set", "seed=3"]) == 0
    assert f"this run is in {default}-3/" in capsys.readouterr().err
    # --replace writes over the default folder, and says so
    assert main(["run", "small.yaml", "--replace", "--set", "seed=4"]) == 0
    io_ = capsys.readouterr()
    assert io_.err == f"lbsim: replaced the earlier run in {default}/ (--replace)\n" and f"results in {default}/" in io_.out
    assert json.loads((work / default / "summary.json").read_text())["seed"] == 4
    # a compare's default folder, as the README runs it three times
    for k in range(3):
        assert main(["compare", "small.yaml", "--schemes", "bsp,static", "-q", "--set", f"seed={k}"]) == 0
    assert sorted(p.name for p in (work / "runs" / "small").iterdir()) == ["bsp", "bsp-2", "bsp-3", "compare",
                                                                           "compare-2", "compare-3"]
    # --out DIR: the user's folder, replaced, and said
    capsys.readouterr()
    assert main(["run", "small.yaml", "--out", "mine"]) == 0 and capsys.readouterr().err == ""
    assert main(["run", "small.yaml", "--out", "mine"]) == 0
    assert capsys.readouterr().err == "lbsim: replaced the earlier run in mine/\n"


def test_the_table_fits_80_columns_and_its_shares_add_up(work: Path) -> None:
    from lbsim.tables import percent_shares, print_summary_table

    summary = json.loads((work / "p" / "run" / "summary.json").read_text()) if (work / "p" / "run").is_dir() else None
    if summary is None:
        with redirect_stdout(io.StringIO()):
            assert main(["run", str(work / "small.yaml"), "--out", str(work / "t80"), "-q"]) == 0
        summary = json.loads((work / "t80" / "summary.json").read_text())
    rows = [summary, {**summary, "scheme": "elastic_bsp", "compute_fraction": 1 / 3, "comm_fraction": 1 / 3,
                      "wait_fraction": 1 / 3, "fetch_fraction": 0.0}]
    for width in (80, 100, 60):
        buf = io.StringIO()
        with redirect_stdout(buf):
            print_summary_table(rows, "small — 3 workers, seed 1", (("speedup_vs_first", "vs bsp", "{:.2f}x"),),
                                width=width)
        lines = buf.getvalue().splitlines()
        assert max(len(line) for line in lines) <= width, buf.getvalue()
        assert "samples/s" in lines[2] and "comm" in lines[2] and "wait" in lines[2], buf.getvalue()
    assert percent_shares(rows[1]) == {"compute_fraction": 34, "comm_fraction": 33, "wait_fraction": 33, "fetch_fraction": 0}
    shares = percent_shares(summary)
    assert sum(v for v in shares.values() if v is not None) == 100
    # piped: the whole table, every column
    buf = io.StringIO()
    with redirect_stdout(buf):
        print_summary_table(rows, "t")
    assert "gradients applied" in buf.getvalue() and "left out" not in buf.getvalue()
