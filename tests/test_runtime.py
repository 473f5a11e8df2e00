"""The torch.distributed runtime on gloo with 2-4 CPU processes (issue 6).

* batch-weighted aggregation over unequal batches equals single-process training on the
  concatenated batch (a numpy reference built from ``lbsim.numerics``, not from the runtime);
* every rank uses the batch sizes the shared sizing code decided (replayed from the records);
* on ``scenarios/validation/cpu4.yaml`` LB-BSP beats BSP, and ``lbsim validate`` writes its errors;
* a rank that crashes, dies or hangs ends the run with an error naming it, and the records are kept.

No wall-clock limits are asserted: the machine is shared.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("psutil")

from lbsim.cli import main  # noqa: E402
from lbsim.numerics import SharedStream, load_dataset, make_model  # noqa: E402
from lbsim.rng import stream  # noqa: E402
from lbsim.runtime.config import RuntimeOptions  # noqa: E402
from lbsim.runtime.launch import RuntimeFailure, launch  # noqa: E402
from lbsim.runtime.worker import Job, Task  # noqa: E402
from lbsim.scenario.loader import load_scenario  # noqa: E402
from lbsim.scenario.resolve import build_scheme_for, resolve_workers  # noqa: E402
from lbsim.schemes.base import RoundObservation, WorkerObservation  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CPU4 = REPO / "scenarios" / "validation" / "cpu4.yaml"


def _group(speed: float) -> str:
    return f"{{instance: c5.xlarge, count: 1, t0_s: 0.0, samples_per_s: {speed}, max_batch: 512}}"


def _scenario(tmp_path: Path, speeds: list[float], *, global_batch: int, updates: int, model: str = "softmax",
              scheme: str = "static", extra: str = "") -> Path:
    groups = "\n".join(f"    - {_group(v)}" for v in speeds)
    text = (
        f"name: t{len(speeds)}\nseed: 5\n"
        f"workload: {{model: resnet50_imagenet, global_batch: {global_batch}, updates: {updates}}}\n"
        f"cluster:\n  groups:\n{groups}\n"
        "network: {name: ring_allreduce}\n"
        f"numerics: {{model: {model}, hidden: 16, learning_rate: 0.5}}\n"
        f"scheme: {{name: {scheme}}}\n{extra}"
    )
    path = tmp_path / f"s{len(speeds)}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def _batches(run: Path) -> dict[int, list[int]]:
    out: dict[int, dict[int, int]] = {}
    for r in _rows(run / "iterations.csv"):
        out.setdefault(int(r["update"]), {})[int(r["worker"])] = int(r["batch"])
    return {u: [b[w] for w in sorted(b)] for u, b in sorted(out.items())}


# -- one process group of 2 ranks, seven runs ----------------------------------------------------
# The 2-rank aggregation, time-budget and LB-BSP-variant runs share one launch (one set of rank
# processes; starting them, torch imports included, costs more than the runs). Each run's
# scenario is the base file with its task's overrides; float64 throughout (the aggregation
# check compares weights to 1e-6).
UNEQUAL_2 = f"cluster.groups=[{_group(1000.0)}, {_group(3000.0)}]"  # static split of B = 40: (10, 30)
VARIANTS = {
    "cpu_narx": ("scheme.variant=cpu", "scheme.predictor=narx", "scheme.narx_warmup=5"),
    "cpu_oracle": ("scheme.variant=cpu", "scheme.predictor=oracle"),
    "gpu": ("scheme.variant=gpu", "scheme.window=2"),
    "gpu_model": ("scheme.variant=gpu_model",),
    "auto": ("scheme.variant=auto", "scheme.predictor=last"),
}
BUDGET_S = 0.3


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Base: two equal workers under LB-BSP, worker 1 slowed 2x from t = 0 (the variants' scenario)."""
    tmp = tmp_path_factory.mktemp("two_ranks")
    extra = "contention:\n  - {name: scheduled, workers: [1], start_s: 0, slowdown: 2}\n"
    path = _scenario(tmp, [1000.0, 1000.0], global_batch=64, updates=25, scheme="lbbsp", extra=extra)
    unequal = (UNEQUAL_2, "workload.global_batch=40", "contention=[]")
    tasks = (
        Task("train", str(tmp / "aggregation"), scheme="static", overrides=(*unequal, "workload.updates=6", "numerics.model=mlp")),
        Task("train", str(tmp / "budget"), scheme="static",
             overrides=(*unequal, "workload.updates=null", f"workload.time_budget_s={BUDGET_S}")),
        *(Task("train", str(tmp / name), overrides=sets) for name, sets in VARIANTS.items()),
    )
    launch(Job(scenario=str(path), options=RuntimeOptions(dtype="float64", timeout_s=60), tasks=tasks), 2)
    return tmp


def test_weighted_aggregation_equals_concatenated_batch_on_2_ranks(two_ranks: Path) -> None:
    _check_weighted_aggregation(two_ranks / "aggregation", [1000.0, 3000.0], 40, "mlp")


def test_weighted_aggregation_equals_concatenated_batch_on_3_ranks(tmp_path: Path) -> None:
    speeds = [1.0, 2.0, 4.0]
    path = _scenario(tmp_path, speeds, global_batch=35, updates=6, model="softmax")
    out = tmp_path / "run"
    launch(Job(scenario=str(path), options=RuntimeOptions(dtype="float64", timeout_s=60), tasks=(Task("train", str(out)),)), 3)
    _check_weighted_aggregation(out, speeds, 35, "softmax")


def _check_weighted_aggregation(out: Path, speeds: list[float], global_batch: int, model: str) -> None:
    """After several steps on unequal per-rank batches, the weights equal one process on the concatenation."""
    per_update = _batches(out)
    assert len(per_update) == 6
    assert all(sum(b) == global_batch for b in per_update.values())
    assert len(set(per_update[0])) == len(speeds), "the test needs unequal batches"

    # Reference: single-process numpy SGD (lbsim.numerics) on the concatenated global batch.
    scenario = load_scenario(out / "scenario.resolved.yaml")
    assert scenario.numerics.model == model
    ds = load_dataset("digits")
    ref = make_model(model, ds.n_features, ds.n_classes, hidden=16, l2=scenario.numerics.l2)
    w = ref.init(stream(scenario.seed, "numerics", "init"))
    order = SharedStream(ds.n_train, stream(scenario.seed, "numerics", "shared"))
    for _u, batches in per_update.items():
        idx = np.concatenate([order.draw(b) for b in batches])
        _loss, g = ref.loss_and_grad(w, ds.X_train[idx], ds.y_train[idx])
        w = w - 0.5 * g
    got = torch.load(out / "model.pt")["w"].numpy()
    np.testing.assert_allclose(got, w, rtol=0, atol=1e-6)
    assert np.max(np.abs(got - ref.init(stream(scenario.seed, "numerics", "init")))) > 1e-3  # it did train
    summary = json.loads((out / "summary.json").read_text())
    assert summary["engine"] == "runtime" and summary["runtime"]["replicas_identical"] is True


@pytest.fixture(scope="module")
def cpu4_validation(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One short ``lbsim validate`` of cpu4.yaml (profile + runtime + simulator, bsp and lbbsp).

    With a 4x narrower MLP than the scenario's (hidden 1024): the tests read what validate writes
    and how LB-BSP sized the batches, not how close the simulator came, and every profile and run
    step is ~4x cheaper (the four profiles are a fixed number of rounds).
    """
    out = tmp_path_factory.mktemp("validate")
    rc = main(["validate", str(CPU4), "--set", "workload.updates=30", "--set", "numerics.hidden=1024", "--out", str(out), "-q"])
    assert rc == 0
    return out


def test_validate_writes_errors(cpu4_validation: Path) -> None:
    report = json.loads((cpu4_validation / "validation.json").read_text())
    assert set(report["schemes"]) == {"bsp", "lbbsp"}
    for name, entry in report["schemes"].items():
        for key in ("mean_iteration_s", "throughput_samples_per_s", "batch_trajectory"):
            assert isinstance(entry["error"][key], float), (name, key)
        assert entry["error"]["compared_updates"] == 30
        for engine in ("runtime", "simulator"):
            summary = json.loads((cpu4_validation / engine / name / "summary.json").read_text())
            assert summary["engine"] == engine and summary["updates"] == 30
            for f in ("scenario.resolved.yaml", "iterations.csv", "updates.csv"):
                assert (cpu4_validation / engine / name / f).is_file()
    assert report["schemes"]["bsp"]["error"]["batch_trajectory"] == 0.0
    cal = report["calibration"]["lbbsp"]
    assert len(cal["workers"]) == 4 and cal["network"]["name"] == "ring_allreduce"


def test_lbbsp_beats_bsp_in_the_runtime(tmp_path: Path) -> None:
    """Worker 3 is emulated 2x slower: LB-BSP shrinks its batch and the others stop waiting for it.

    BSP and LB-BSP alternate in one process group (three short runs each), so a change in the load
    other tenants put on this shared machine hits both schemes alike. 14 updates a run (observed:
    LB-BSP's throughput 1.1x to 1.5x BSP's in each pair, with 14 updates as with 20; its batches
    settle within two updates, so the last half is settled).
    """
    updates = 14
    order = ("bsp", "lbbsp") * 3
    tasks = tuple(Task("train", str(tmp_path / f"{i}-{name}"), scheme=name, overrides=(f"workload.updates={updates}",))
                  for i, name in enumerate(order))
    launch(Job(scenario=str(CPU4), tasks=tasks), 4)
    samples = {"bsp": 0.0, "lbbsp": 0.0}
    seconds = {"bsp": 0.0, "lbbsp": 0.0}
    for i, name in enumerate(order):
        summary = json.loads((tmp_path / f"{i}-{name}" / "summary.json").read_text())
        samples[name] += summary["samples"]
        seconds[name] += summary["sim_time_s"]
    assert samples["lbbsp"] / seconds["lbbsp"] > samples["bsp"] / seconds["bsp"]
    last = _batches(tmp_path / "5-lbbsp")
    assert len(last) == updates
    mean = [np.mean([last[u][w] for u in range(updates // 2, updates)]) for w in range(4)]  # the last half
    assert mean[3] < min(mean[:3])


def test_every_rank_used_the_batches_the_sizing_code_decided(cpu4_validation: Path) -> None:
    """Replay LBBSP.next_batches on the recorded observations: it returns the recorded batches."""
    run = cpu4_validation / "runtime" / "lbbsp"
    scenario = load_scenario(run / "scenario.resolved.yaml")
    scheme = build_scheme_for(scenario, resolve_workers(scenario))
    recorded = _batches(run)
    assert all(sum(b) == scenario.workload.global_batch for b in recorded.values())
    assert list(scheme.initial_batches()) == recorded[0]
    obs: dict[int, list[WorkerObservation]] = {}
    for r in _rows(run / "observations.csv"):
        obs.setdefault(int(r["iteration"]), []).append(WorkerObservation(
            worker=int(r["worker"]), batch=int(r["batch"]), compute_s=float(r["compute_s"]), comm_s=0.0, wait_s=0.0,
            cpu_available=float(r["cpu_available"]), mem_available=float(r["mem_available"])))
    moved = 0
    for u in range(len(recorded) - 1):
        decided = list(scheme.next_batches(RoundObservation(u, 0.0, tuple(sorted(obs[u], key=lambda o: o.worker)))))
        assert decided == recorded[u + 1], f"update {u + 1}"
        moved += decided != recorded[u]
    assert moved > 0


@pytest.mark.parametrize(("mode", "expect"), [("raise", "rank 1 failed in round 3 of train: InjectedFailure"),
                                              ("exit", "rank 1 died without a report in round 3 (exit code 3)")])
def test_a_crashing_rank_is_named_and_records_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      mode: str, expect: str) -> None:
    path = _scenario(tmp_path, [1000.0, 1000.0], global_batch=32, updates=50)
    out = tmp_path / "run"
    monkeypatch.setenv("LBSIM_RUNTIME_FAIL", f"1:3:{mode}")
    with pytest.raises(RuntimeFailure) as info:
        launch(Job(scenario=str(path), options=RuntimeOptions(timeout_s=30), tasks=(Task("train", str(out)),)), 2)
    assert info.value.rank == 1
    assert expect in str(info.value)
    assert not (out / "summary.json").exists()
    failure = json.loads((out / "failure.json").read_text())
    assert failure["rank"] == 1 and "rank 1" in failure["error"]
    kept = _batches(out)
    assert 1 <= len(kept) <= 3 and list(kept) == list(range(len(kept)))  # whole rounds before the failure
    assert not list(out.glob("*.partial.csv"))


def test_a_hung_rank_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _scenario(tmp_path, [1000.0, 1000.0], global_batch=32, updates=50)
    monkeypatch.setenv("LBSIM_RUNTIME_FAIL", "0:2:hang")
    with pytest.raises(RuntimeFailure) as info:
        launch(Job(scenario=str(path), options=RuntimeOptions(timeout_s=3), tasks=(Task("train", str(tmp_path / "run")),)), 2)
    assert info.value.rank == 0
    assert "rank 0 hung in round 2" in str(info.value)


def test_cli_train_and_bad_nproc(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _scenario(tmp_path, [1000.0, 2000.0], global_batch=30, updates=5, scheme="lbbsp")
    out = tmp_path / "train"
    assert main(["train", str(path), "--out", str(out), "-q", "--set", "scheme.predictor=last"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["scheme"] == "lbbsp" and summary["engine"] == "runtime" and summary["updates"] == 5
    assert summary["samples"] == 150 and 0 < summary["final_accuracy"] <= 1

    assert main(["train", str(path), "--nproc", "3", "--out", str(tmp_path / "x")]) == 2
    assert "--nproc" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_real_contention_burns_the_workers_core(tmp_path: Path) -> None:
    """--contention real: from t = 1 s a co-located burner on worker 1's core leaves it about a third of it.

    Worker 1 is compared with itself before the burner starts (not with worker 0: other tenants'
    processes that the burner pushes off core 1 land on worker 0's core).
    """
    extra = "contention:\n  - {name: scheduled, workers: [1], start_s: 1.0, slowdown: 3}\n"
    path = _scenario(tmp_path, [1000.0, 1000.0], global_batch=512, updates=150, model="mlp", scheme="bsp", extra=extra)
    path.write_text(path.read_text().replace("hidden: 16", "hidden: 2048"))
    out = tmp_path / "run"
    launch(Job(scenario=str(path), options=RuntimeOptions(contention="real"), tasks=(Task("train", str(out)),)), 2)
    start = {(r["worker"], r["iteration"]): float(r["start_s"]) for r in _rows(out / "iterations.csv")}
    rows = [r for r in _rows(out / "observations.csv") if int(r["iteration"]) >= 3]

    def mean(field: str, worker: int, after: bool) -> float:
        return float(np.mean([float(r[field]) for r in rows if r["worker"] == str(worker)
                              and (start[(r["worker"], r["iteration"])] > 1.1) == after]))

    assert mean("real_compute_s", 1, True) > 1.3 * mean("real_compute_s", 1, False)  # about 2.5x on an idle machine
    assert mean("cpu_measured", 1, True) < 0.75
    summary = json.loads((out / "summary.json").read_text())
    assert summary["runtime"]["contention"] == "real" and summary["runtime"]["pinned_cores"] is True


@pytest.mark.parametrize("ranks", [1, 2])
def test_nccl_one_gpu_per_rank(tmp_path: Path, ranks: int) -> None:
    if not torch.cuda.is_available() or torch.cuda.device_count() < ranks:
        pytest.skip(f"needs {ranks} CUDA GPU(s)")
    path = _scenario(tmp_path, [1000.0, 3000.0][:ranks], global_batch=40, updates=5, model="mlp")
    out = tmp_path / "run"
    launch(Job(scenario=str(path), options=RuntimeOptions(backend="nccl", dtype="float64"), tasks=(Task("train", str(out)),)), ranks)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["runtime"]["backend"] == "nccl" and summary["runtime"]["replicas_identical"] is True
    assert summary["updates"] == 5


def test_time_budget_ends_the_sync_run_as_in_the_simulator(two_ranks: Path) -> None:
    """The simulator's end rule (lbsim.metrics.run_end): a round whose update would come at or after the
    budget B makes no update and is not recorded; the run ends at B; rows of the last update still
    running at B are recorded up to B, marked cut; the records add up."""
    budget_s = BUDGET_S
    out = two_ranks / "budget"
    assert load_scenario(out / "scenario.resolved.yaml").workload.updates is None
    summary = json.loads((out / "summary.json").read_text())
    ups, its = _rows(out / "updates.csv"), _rows(out / "iterations.csv")
    assert len(ups) >= 3
    assert summary["sim_time_s"] == budget_s
    assert all(float(u["time_s"]) < budget_s for u in ups)  # the round in flight at B made no update
    assert all(float(r["end_s"]) <= budget_s for r in its)
    assert all(float(r["end_s"]) == budget_s for r in its if r["cut"] == "true")
    assert sorted({int(r["update"]) for r in its}) == list(range(len(ups)))  # no row of a round without its update
    assert sum(int(r["batch"]) for r in its) == sum(int(u["samples"]) for u in ups) == summary["samples"]
    for r in its:  # a cut row's parts still add up to its span
        parts = float(r["fetch_s"]) + float(r["compute_s"]) + float(r["comm_s"]) + float(r["wait_s"])
        assert parts == pytest.approx(float(r["end_s"]) - float(r["start_s"]), abs=1e-9)
        assert min(float(r["comm_s"]), float(r["wait_s"])) >= 0


def test_torchrun_runs_the_same_entry_point(tmp_path: Path) -> None:
    """The documented command: torchrun --nproc-per-node=2 -m lbsim.runtime.worker SCENARIO --out DIR."""
    import os
    import shutil
    import subprocess

    if shutil.which("torchrun") is None:
        pytest.skip("torchrun not on PATH")
    path = _scenario(tmp_path, [1000.0, 3000.0], global_batch=40, updates=4)
    out = tmp_path / "run"
    out.mkdir()
    (out / "summary.json").write_text("{}")  # a previous run in --out: replaced whole, never mixed with the new one
    (out / "trace.json").write_text("{}")
    proc = subprocess.run(["torchrun", "--nnodes=1", "--nproc-per-node=2", "-m", "lbsim.runtime.worker", str(path), "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["engine"] == "runtime" and summary["updates"] == 4 and summary["runtime"]["world_size"] == 2
    assert not (out / "trace.json").exists()  # the run was staged and swapped in, as `lbsim train` does
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no stage or lock left


def test_torchrun_lbsim_train_runs_as_the_rank(tmp_path: Path) -> None:
    """``torchrun --nproc-per-node=2 lbsim train SCENARIO``: each process torchrun starts is one rank
    (before, each launched ranks of its own). From the repository root ``lbsim`` is the package
    folder, which python runs as a script."""
    import os
    import shutil
    import subprocess

    if shutil.which("torchrun") is None:
        pytest.skip("torchrun not on PATH")
    out = tmp_path / "run"
    cmd = ["torchrun", "--nproc-per-node=2", "lbsim", "train", "scenarios/validation/cpu4.yaml",
           "--set", "cluster.groups.0.count=2", "--set", "contention=[]", "--set", "workload.updates=4",
           "--set", "workload.global_batch=64", "--out", str(out)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("results in") == 1  # rank 0 reports; no rank launched ranks of its own
    summary = json.loads((out / "summary.json").read_text())
    assert summary["engine"] == "runtime" and summary["updates"] == 4 and summary["runtime"]["world_size"] == 2
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["engine"] == "runtime" and prov["libraries"]["torch"]  # the runtime's torch is recorded


def test_every_lbbsp_variant_runs(two_ranks: Path) -> None:
    """All LB-BSP variants and predictors (oracle: emulated mode knows the schedule) in one process group."""
    for name, sets in VARIANTS.items():
        summary = json.loads((two_ranks / name / "summary.json").read_text())
        assert summary["updates"] == 25 and f"scheme.variant={summary['variant']}" == sets[0]
        batches = _batches(two_ranks / name)
        assert all(sum(b) == 64 for b in batches.values())
    oracle = _batches(two_ranks / "cpu_oracle")
    assert oracle[24] == [43, 21]  # the oracle knows worker 1 is exactly 2x slower
