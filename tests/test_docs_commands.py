"""Every command of the README and of docs/tutorial.md runs, as written, on a fresh clone.

The commands run in a fresh copy of the repository (:mod:`docs_harness`: what ``git clone`` of the
working tree holds, nothing else; ``PYTHONPATH`` and ``HOME`` there), with ``bash -euo pipefail``:
the tutorial's, in order, then the README's, in order (a README command the tutorial already ran,
verbatim, is not run twice: the straggler study); then the files and output each text promises
are checked. Every figure they make (``lbsim plot``, ``run --plots``) is checked by lbsim itself as
a reviewer would (:func:`lbsim.plots.layout.figure_problems`: no clipped text, no non-negative
quantity below zero), which prints a warning for each problem: none may appear.

Adapted, and only so (the commands are otherwise verbatim):

* ``pip install`` lines are not run (offline, already installed); every extra they name must exist
  in setup.py. ``python3 -m pytest -q`` (the README's test command) collects the suite from the
  clone instead of running it inside itself, without rewriting its asserts (half the collection's
  CPU; this suite, which runs them rewritten, is the same files).
* time-bounded variants of the long commands, by ``--set`` (the same commands, files and code
  paths; fewer simulated seconds, updates or MLP units, 2 repeats instead of 3): see
  :data:`README_BOUNDS`, :data:`REPLACED` and :data:`TUTORIAL_BOUNDS`.
* ``torchrun`` is this interpreter's ``python -m torch.distributed.run`` (the same program).
"""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

import pytest
from docs_harness import REPO, check_install_line, clone_env, fresh_clone, run_script, shell_blocks

README = REPO / "README.md"
TUTORIAL = REPO / "docs" / "tutorial.md"
SHORT = " --set workload.time_budget_s=60"
# command prefix -> what is appended (a time-bounded variant of a long command)
README_BOUNDS = {
    "lbsim run scenarios/ec2_mixed.yaml --scheme ssp": SHORT,
    "lbsim compare scenarios/ec2_mixed.yaml --schemes bsp,asp,ssp,static,lbbsp": SHORT,
    "lbsim sweep scenarios/sweeps/stragglers.yaml": " --set workload.time_budget_s=5",
    "lbsim run scenarios/ec2_mixed.yaml --trace --plots": SHORT,
    "lbsim run scenarios/bench/large.yaml": " --set workload.updates=20",
    'lbsim advise --cluster "4xV100,4xT4"': " --budget-s 60",
    # at most 5 seeds an arm (the default escalates wide intervals to 20: 4x the runs, the same code paths;
    # the escalation itself is tested in tests/test_advise.py)
    "lbsim advise scenarios/ec2_mixed.yaml": " --set workload.time_budget_s=60 --max-seeds 5",
    "lbsim train scenarios/validation/cpu4.yaml": " --set workload.updates=6 --set numerics.hidden=256",
    "torchrun --nproc-per-node=4 -m lbsim train": " --set workload.updates=6 --set numerics.hidden=256",
    "lbsim validate scenarios/validation/cpu4.yaml": " --set workload.updates=6 --set numerics.hidden=256",
    # 6 updates, 2 per worker: the test reads which schemes were validated, not how close they came
    "lbsim validate scenarios/validation/ps_cpu3.yaml": " --set workload.updates=6 --set numerics.hidden=256",
    # one epoch of 14 steps instead of 3: the same recording and replay, a third of the job
    "torchrun --nproc-per-node=3 examples/ddp_digits.py": " --epochs 1",
}
TUTORIAL_BOUNDS = {"lbsim sweep scenarios/sweeps/stragglers.yaml": " --set workload.time_budget_s=5"}
REPLACED = {" --repeats 3": " --repeats 2"}  # the repeats' median and spread, from two whole validations


def _command(line: str) -> str:
    """The line without its trailing comment (a "#" after white space, followed by white space or the end)."""
    return re.split(r"\s+#(?=\s|$)", line)[0].rstrip()


def adapt(line: str, bounds: dict[str, str]) -> str:
    cmd = _command(line)
    if not cmd or cmd.lstrip().startswith("#"):
        return ""
    if re.search(r"\bpip install\b", cmd):
        return check_install_line(cmd)
    if cmd == "python3 -m pytest -q":
        return "python3 -m pytest -q --collect-only -p no:cacheprovider --assert=plain | tail -n 1"
    for was, now in REPLACED.items():
        cmd = cmd.replace(was, now)
    for prefix, extra in bounds.items():
        if cmd.startswith(prefix):
            head, sep, tail = cmd.partition(" && ")  # bound the first command of a chain
            cmd = head + extra + (sep + tail if sep else "")
            break
    if cmd.startswith("torchrun "):
        cmd = f'"{sys.executable}" -m torch.distributed.run ' + cmd[len("torchrun "):]
    if cmd.startswith("python3 "):
        cmd = f'"{sys.executable}" ' + cmd[len("python3 "):]
    return cmd


def _run_blocks(blocks: list[str], bounds: dict[str, str], clone: Path, env: dict[str, str],
                skip: frozenset[str] = frozenset()) -> list[tuple[str, str, str]]:
    """Run every line of every block in order (but those in ``skip``); returns (command, stdout, stderr) per line."""
    done = []
    for body in blocks:
        for line in body.splitlines():
            cmd = adapt(line, bounds)
            if not cmd or cmd in skip:
                continue
            proc = run_script(cmd, clone, env, timeout=900)
            assert proc.returncode == 0, f"{cmd}\nexit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
            assert "lbsim: warning: figure" not in proc.stderr, f"{cmd}: a figure a reviewer would reject\n{proc.stderr}"
            done.append((cmd, proc.stdout, proc.stderr))
    return done


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def docs_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The tutorial's commands, then the README's, in one fresh clone."""
    base = tmp_path_factory.mktemp("docs")
    clone = fresh_clone(base / "lbsim")
    env = clone_env(clone, base / "home")
    tutorial = _run_blocks(shell_blocks(TUTORIAL), TUTORIAL_BOUNDS, clone, env)
    setup, use = shell_blocks(README)[:2]
    readme = _run_blocks([setup, use], README_BOUNDS, clone, env, skip=frozenset(cmd for cmd, _, _ in tutorial))
    return {"clone": clone, "tutorial": tutorial, "readme": readme, "use": use}


def test_the_tutorial_from_a_fresh_clone_and_its_figures(docs_runs: dict[str, object]) -> None:
    clone, done = docs_runs["clone"], docs_runs["tutorial"]
    assert isinstance(clone, Path) and isinstance(done, list)
    assert len(shell_blocks(TUTORIAL)) >= 8
    text = "\n".join(stdout for _, stdout, _ in done)
    runs = clone / "runs"
    # what the text promises
    assert (runs / "ec2_mixed" / "bsp" / "summary.json").is_file()
    first = runs / "first-lbbsp"
    assert (first / "trace.json").is_file() and (first / "plots" / "batch_sizes.png").is_file()
    assert (runs / "ec2_mixed" / "compare" / "compare.csv").is_file()
    assert "12 points, 12 runs: 0 already done, 12 run now, 0 failed" in text
    assert "12 points, 12 runs: 12 already done, 0 run now, 0 failed" in text
    assert len(_rows(runs / "tutorial" / "results.csv")) == 12
    names = {p.stem for p in (runs / "tutorial" / "plots").glob("*.png")}
    assert names == {"throughput", "speedup_vs_bsp", "iteration_cdf", "lbbsp_batches", "timelines"}
    assert len(_rows(runs / "stragglers" / "results.csv")) == 180
    assert {p.stem for p in (runs / "stragglers" / "plots").glob("*.svg")} >= names | {"staleness"}


def test_the_readme_commands_from_a_fresh_clone(docs_runs: dict[str, object]) -> None:
    clone, done, use, tutorial = docs_runs["clone"], docs_runs["readme"], docs_runs["use"], docs_runs["tutorial"]
    assert isinstance(clone, Path) and isinstance(done, list) and isinstance(use, str) and isinstance(tutorial, list)
    ran = {cmd for cmd, _, _ in done} | {cmd for cmd, _, _ in tutorial}
    assert all(adapt(line, README_BOUNDS) in ran for line in use.splitlines() if adapt(line, README_BOUNDS))
    collected = next(out for cmd, out, _ in done if "pytest" in cmd)  # python3 -m pytest -q, collected from the clone
    assert "tests collected" in collected and "error" not in collected
    text = {cmd: (stdout, stderr) for cmd, stdout, stderr in done}
    runs = clone / "runs"
    ec2 = runs / "ec2_mixed"
    # the tutorial ran first: the README's default folders that already held a run are kept, the new runs beside
    assert json.loads((ec2 / "bsp-2" / "summary.json").read_text())["scheme"] == "bsp"
    assert "staleness: 2" in (ec2 / "ssp" / "scenario.resolved.yaml").read_text()
    assert [r["scheme"] for r in _rows(ec2 / "compare-2" / "compare.csv")] == ["bsp", "asp", "ssp", "static", "lbbsp"]
    assert [r["scheme"] for r in _rows(ec2 / "compare-3" / "compare.csv")] == ["bsp", "asp"]  # equal work
    assert [r["scheme"] for r in _rows(ec2 / "compare" / "compare.csv")] == ["bsp", "static", "lbbsp"]  # the tutorial's, kept
    assert (ec2 / "bsp-3" / "trace.json").is_file() and (ec2 / "bsp-3" / "plots" / "timeline.png").is_file()
    assert (runs / "large" / "bsp" / "trace.json.gz").is_file() and (runs / "large" / "bsp" / "iterations.parquet").is_file()
    assert (runs / "bsp-asp" / "plots" / "throughput.png").is_file()
    # lbsim train, then torchrun ... lbsim train into the same default folder: both kept, both tables shown
    assert (runs / "cpu4" / "runtime" / "lbbsp" / "summary.json").is_file()
    assert json.loads((runs / "cpu4" / "runtime" / "lbbsp-2" / "summary.json").read_text())["engine"] == "runtime"
    torchrun = next(v for k, v in text.items() if "torch.distributed.run" in k and "lbsim train" in k)
    assert "samples/s" in torchrun[0] and "runs/cpu4/runtime/lbbsp/ holds an earlier run, kept" in torchrun[1]
    assert (runs / "cpu4" / "validate" / "validation.json").is_file()
    assert set(json.loads((runs / "ps_cpu3" / "validate" / "validation.json").read_text())["schemes"]) == \
        {"asp", "ssp", "dssp", "elastic_bsp", "wbsp"}
    assert (runs / "cpu4" / "validate-2" / "validation.json").is_file()  # --repeats, beside the first
    assert (runs / "cal" / "fit.yaml").is_file() and (runs / "cal" / "predictions.csv").is_file()
    assert {r["scheme"] for r in _rows(runs / "lbbsp_gpu" / "compare" / "compare.csv")} == {"bsp", "lbbsp", "asp", "ssp"}  # + the baseline
    assert any((runs / "profile-model").rglob("*.json"))
    # your own DDP job, recorded by torchrun, then replayed: every scheme priced against one baseline
    job = runs / "digits_job"  # examples/ddp_digits.py --mode ddp: plain DDP, one epoch (bounded) of equal batches
    assert json.loads((job / "job.json").read_text())["scheme"] == {"name": "bsp"}
    shards = [_rows(job / f"rank-{r:05d}.csv") for r in range(3)]
    assert all([(row["step"], row["samples"], row["device"]) for row in shard] ==
               [(str(k), "32", "cpu") for k in range(14)] for shard in shards)  # 1,344 samples: 14 steps of 3 x 32
    whatif = json.loads((job / "whatif" / "whatif.json").read_text())
    assert {"bsp", "asp", "lbbsp_library"} <= {row["scheme"] for row in whatif["schemes"]}
    assert [r["scheme"] for r in _rows(runs / "seqlen_mixed" / "compare" / "compare.csv")] == ["bsp", "bucketing", "lbbsp"]
    assert (runs / "nccl_a100" / "predictions.csv").is_file() and (runs / "nccl_a100" / "scenario.yaml").is_file()
    schemes = next(v for k, v in text.items() if k.endswith("lbsim schemes"))[0]
    assert all(name in schemes for name in ("bsp", "asp", "ssp", "lbbsp", "wbsp", "loft"))
    catalog = next(v for k, v in text.items() if "lbsim catalog" in k)[0]
    assert "resnet50_imagenet" in catalog and "references.md" in catalog
