"""LOFT in the torch.distributed runtime (issue 7): data placement, robust aggregation, Byzantine ranks.

* the robust statistic computed in torch equals ``lbsim.aggregation.aggregate`` on the same rows;
* the storage-node queue the ranks emulate is the simulator's ``Fetcher`` for simultaneous requests;
* one process group of 3 gloo ranks runs four short trainings with a ``data:`` section and a
  Gaussian Byzantine worker: LOFT (trimmed mean), LOFT with the plain mean, LOFT behind a slow
  storage NIC, and BSP. From their records: each rank's fetch delay is the cost model's, the local
  counts are the scheme's decisions, the final weights are the numerics trainer's (same samples,
  same robust rule, same corrupted gradients), replicas are identical, and the trimmed mean keeps
  its accuracy where the mean collapses;
* bad input still exits 2 with one line.

No wall-clock speed is asserted; the fetch delays are compared with a tolerance for sleep overshoot.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("psutil")

from lbsim.aggregation import aggregate  # noqa: E402
from lbsim.cli import main  # noqa: E402
from lbsim.fetch import DataLayout, WorkerData, arrival_order, fetch_schedule  # noqa: E402  # noqa: E402
from lbsim.numerics.trainer import Trainer  # noqa: E402
from lbsim.runtime.config import RuntimeOptions  # noqa: E402
from lbsim.runtime.launch import launch  # noqa: E402
from lbsim.runtime.loft import robust_statistic  # noqa: E402
from lbsim.runtime.worker import Job, Task  # noqa: E402
from lbsim.scenario.data import resolve_data  # noqa: E402
from lbsim.scenario.loader import load_scenario  # noqa: E402
from lbsim.scenario.resolve import build_scheme_for, resolve_workers  # noqa: E402
from lbsim.schemes.base import RoundObservation, WorkerObservation  # noqa: E402

N = 3
UPDATES = 12
SCENARIO = f"""\
name: loft3
seed: 5
workload: {{model: resnet50_imagenet, global_batch: 96, updates: {UPDATES}}}
cluster:
  groups:
    - {{instance: c5.xlarge, count: {N}, t0_s: 0.0, samples_per_s: 3000, max_batch: 512}}
network: {{name: ring_allreduce}}
data:
  sample_bytes: 100000
  placement:
    - {{workers: [0], local_fraction: 0.3, local_gbps: 1, remote_gbps: 0.5, remote_latency_s: 0.002}}
    - {{workers: [1, 2], local_fraction: 0.2, local_gbps: 2, remote_gbps: 0.25, remote_latency_s: 0.01}}
numerics: {{model: softmax, learning_rate: 0.5, byzantine: {{workers: [0], attack: gaussian, scale: 5}}}}
scheme: {{name: loft, aggregation: trimmed_mean, tolerance_f: 1}}
"""
RUNS = {
    "trimmed": ((), None),
    "mean": (("scheme.aggregation=mean", "scheme.tolerance_f=0"), None),
    "queued": (("data.storage={bandwidth_gbps: 0.4}",), None),
    "bsp": ((), "bsp"),
}


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def _by_round(run: Path, name: str, field: str, kind: type = int) -> dict[int, list]:  # type: ignore[type-arg]
    out: dict[int, dict[int, object]] = {}
    for r in _rows(run / name):
        key = "iteration" if "iteration" in r else "update"
        out.setdefault(int(r[key]), {})[int(r["worker"])] = kind(r[field])
    return {k: [v[w] for w in sorted(v)] for k, v in sorted(out.items())}


# -- pure --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize(("rule", "n", "f"), [("median", 3, 0), ("median", 4, 1), ("median", 5, 2),
                                              ("trimmed_mean", 3, 1), ("trimmed_mean", 5, 2),
                                              ("trimmed_mean", 6, 1), ("trimmed_mean", 4, 0)])
def test_robust_statistic_equals_lbsim_aggregation(rule: str, n: int, f: int, dtype: torch.dtype) -> None:
    rng = np.random.default_rng(n * 10 + f)
    rows = rng.normal(size=(n, 257)) * rng.choice([1e-3, 1.0, 1e3], size=(n, 1))
    rows[:, :5] = 0.5  # ties
    rows[0, 5:10] = np.inf if rule == "trimmed_mean" and f else rows[0, 5:10]  # an outlier the rule drops
    expect = aggregate(rule, rows, np.arange(1, n + 1), f)
    got = robust_statistic(rule, torch.tensor(rows, dtype=dtype), f).double().numpy()
    tol = 1e-12 if dtype == torch.float64 else 1e-6
    np.testing.assert_allclose(got, expect, rtol=tol, atol=tol * 1e-3)


def test_fetch_schedule_is_the_simulators_fetcher() -> None:
    """All ranks request at once; the storage NIC serves them in the given order (the simulator's FIFO)."""
    simpy = pytest.importorskip("simpy")
    from lbsim.simulator.fetch import Fetcher

    layout = DataLayout(sample_bytes=50_000, workers=(WorkerData(0.2, 4, 1.0, 0.003), WorkerData(0.1, 8, 0.5, 0.02),
                                                      WorkerData(0.0, 8, 2.0, 0.0), WorkerData(0.3, 2, 1.0, 0.01)),
                        storage_gbps=0.8, storage_latency_s=0.001)
    local, remote = [5, 0, 0, 12], [20, 30, 0, 8]
    factors = [1.0, 2.0, 1.0, 1.5]
    order = [3, 1, 0, 2]

    class _Net:
        def __init__(self, f: float) -> None:
            self.f = f

        def network_factor(self, t: float) -> float:
            return self.f

    env = simpy.Environment()
    env.contention = [_Net(f) for f in factors]  # type: ignore[attr-defined]
    fetcher = Fetcher(env, layout)
    ends: dict[int, float] = {}

    def proc(w: int):  # type: ignore[no-untyped-def]
        yield from fetcher.fetch(w, local[w], remote[w])
        ends[w] = env.now

    for w in order:  # simpy serves requests made at one instant in process order
        env.process(proc(w))
    env.run()
    got = fetch_schedule(layout, local, remote, order, factors)
    np.testing.assert_allclose(got, [ends[w] for w in range(4)], rtol=1e-12)
    alone = DataLayout(layout.sample_bytes, layout.workers)  # no storage NIC: each worker alone
    np.testing.assert_allclose(fetch_schedule(alone, local, remote, order, factors),
                               [alone.fetch_s(w, local[w], remote[w], factors[w]) for w in range(4)], rtol=1e-12)
    assert arrival_order(np.array([0.3, 0.1, 0.3, 0.2])) == [1, 3, 0, 2]


# -- one process group, four runs ---------------------------------------------------------------
@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("loft")
    path = base / "loft3.yaml"
    path.write_text(SCENARIO, encoding="utf-8")
    tasks = tuple(Task("train", str(base / name), scheme=scheme, overrides=sets) for name, (sets, scheme) in RUNS.items())
    launch(Job(scenario=str(path), options=RuntimeOptions(dtype="float64", timeout_s=60), tasks=tasks), N)
    return {name: base / name for name in RUNS}


def _scenario(run: Path):  # type: ignore[no-untyped-def]
    return load_scenario(run / "scenario.resolved.yaml")


def test_fetch_delay_is_the_cost_model(runs: dict[str, Path]) -> None:
    """Each rank's recorded fetch is DataLayout.fetch_s of its local/remote split (no storage NIC), and,
    behind the storage NIC, the FIFO schedule in the order the ranks reached the previous barrier."""
    for name in ("trimmed", "queued", "bsp"):
        run = runs[name]
        scenario = _scenario(run)
        layout = resolve_data(scenario.data, resolve_workers(scenario))
        assert layout is not None
        obs = _rows(run / "observations.csv")
        its = {(r["worker"], r["iteration"]): r for r in _rows(run / "iterations.csv")}
        local, batch = _by_round(run, "observations.csv", "local_samples"), _by_round(run, "observations.csv", "batch")
        prev_end: dict[int, list[float]] = {}
        for k in range(UPDATES):
            prev_end[k] = [float(its[(str(w), str(k))]["start_s"]) + float(its[(str(w), str(k))]["fetch_s"])
                           + float(its[(str(w), str(k))]["compute_s"]) for w in range(N)]
        expected, recorded = [], []
        for r in obs:
            w, k = int(r["worker"]), int(r["iteration"])
            loc, rem = int(r["local_samples"]), int(r["remote_samples"])
            assert loc + rem == int(r["batch"]) and loc == local[k][w]
            if layout.storage_gbps is None:
                exp = layout.fetch_s(w, loc, rem)
            else:
                order = arrival_order(np.array(prev_end[k - 1])) if k else list(range(N))
                rems = [b - v for b, v in zip(batch[k], local[k], strict=True)]
                exp = float(fetch_schedule(layout, local[k], rems, order, [1.0] * N)[w])
            expected.append(exp)
            recorded.append(float(r["fetch_s"]))
            assert float(its[(r["worker"], r["iteration"])]["fetch_s"]) == pytest.approx(float(r["fetch_s"]), rel=1e-9)
        exp_a, rec_a = np.array(expected), np.array(recorded)
        assert exp_a.min() > 0.01  # fetching matters in this scenario
        assert np.all(rec_a >= exp_a - 1e-6), name  # a sleep never ends early
        assert np.median((rec_a - exp_a) / exp_a) < 0.25, name  # overshoot: scheduling noise only
    queued, alone = _rows(runs["queued"] / "observations.csv"), _rows(runs["trimmed"] / "observations.csv")
    assert np.mean([float(r["fetch_s"]) for r in queued]) > np.mean([float(r["fetch_s"]) for r in alone])  # the queue matters


def test_local_counts_are_the_schemes_decisions(runs: dict[str, Path]) -> None:
    """Replay LOFT on the recorded observations: it returns the recorded batches and local counts;
    BSP's local counts are uniform sampling's round(b f_i)."""
    for name in ("trimmed", "queued"):
        run = runs[name]
        scenario = _scenario(run)
        scheme = build_scheme_for(scenario, resolve_workers(scenario))
        batch = _by_round(run, "observations.csv", "batch")
        local = _by_round(run, "observations.csv", "local_samples")
        assert list(scheme.initial_batches()) == batch[0] and list(scheme.local_samples()) == local[0]
        obs: dict[int, list[WorkerObservation]] = {}
        for r in _rows(run / "observations.csv"):
            obs.setdefault(int(r["iteration"]), []).append(WorkerObservation(
                worker=int(r["worker"]), batch=int(r["batch"]), compute_s=float(r["compute_s"]), comm_s=0.0, wait_s=0.0,
                cpu_available=float(r["cpu_available"]), mem_available=float(r["mem_available"]),
                fetch_s=float(r["fetch_s"]), local_samples=int(r["local_samples"]), remote_samples=int(r["remote_samples"])))
        for k in range(UPDATES - 1):
            decided = list(scheme.next_batches(RoundObservation(k, 0.0, tuple(sorted(obs[k], key=lambda o: o.worker)))))
            assert decided == batch[k + 1], f"{name} update {k + 1}"
            assert list(scheme.local_samples()) == local[k + 1], f"{name} update {k + 1}"
        assert any(0 < v < b for k in local for v, b in zip(local[k], batch[k], strict=True))  # mixed reads happen
    run = runs["bsp"]
    layout = resolve_data(_scenario(run).data, resolve_workers(_scenario(run)))
    batch, local = _by_round(run, "observations.csv", "batch"), _by_round(run, "observations.csv", "local_samples")
    assert all(local[k] == [layout.default_local(w, b) for w, b in enumerate(batch[k])] for k in batch)  # type: ignore[union-attr]


def test_weights_are_the_numerics_trainers(runs: dict[str, Path]) -> None:
    """Same samples (own shard + shared stream), same corrupted gradients, same robust rule as the
    simulator's numerics trainer fed the recorded batches: the final weights agree; replicas are identical."""
    for name in ("trimmed", "mean", "bsp"):
        run = runs[name]
        scenario = _scenario(run)
        layout = resolve_data(scenario.data, resolve_workers(scenario))
        rule = (scenario.scheme.aggregation, scenario.scheme.tolerance_f) if name != "bsp" else ("mean", 0)
        trainer = Trainer(scenario.numerics, seed=scenario.seed, workers=N, byzantine=(0,), aggregation=rule,
                          local_fractions=[w.local_fraction for w in layout.workers])  # type: ignore[union-attr]
        batch, local = _by_round(run, "observations.csv", "batch"), _by_round(run, "observations.csv", "local_samples")
        for k in range(UPDATES):
            trainer.sync_update([(w, batch[k][w], local[k][w]) for w in range(N)], float(k))
        got = torch.load(run / "model.pt")["w"].numpy()
        np.testing.assert_allclose(got, trainer.w, rtol=0, atol=1e-6)
        summary = json.loads((run / "summary.json").read_text())
        assert summary["runtime"]["replicas_identical"] is True
        assert summary["fetch_fraction"] > 0.1
        assert any("Byzantine workers [0]" in note for note in summary["runtime"]["notes"])


def test_trimmed_mean_resists_a_byzantine_rank_the_mean_does_not(runs: dict[str, Path]) -> None:
    acc = {name: json.loads((runs[name] / "summary.json").read_text())["final_accuracy"] for name in RUNS}
    assert acc["trimmed"] > 0.8 and acc["queued"] > 0.8
    assert acc["mean"] < 0.5 and acc["bsp"] < 0.5
    summary = json.loads((runs["trimmed"] / "summary.json").read_text())
    assert summary["aggregation"] == "trimmed_mean" and summary["tolerance_f"] == 1


# -- bad input ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("sets", "key"), [(["scheme.tolerance_f=2"], "scheme.tolerance_f"),
                                           (["numerics.byzantine={workers: [5]}"], "numerics.byzantine.workers[0]"),
                                           (["data.placement=[{workers: [0], remote_gbps: 1}]"], "data.placement")])
def test_bad_input_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], sets: list[str], key: str) -> None:
    path = tmp_path / "loft3.yaml"
    path.write_text(SCENARIO, encoding="utf-8")
    out = tmp_path / "run"
    argv = ["train", str(path), "--out", str(out), "-q"]
    for s in sets:
        argv += ["--set", s]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("lbsim: error:") and key in err
    assert not (out / "summary.json").exists()
