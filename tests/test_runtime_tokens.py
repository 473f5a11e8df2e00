"""``lbsim train`` with ``workload.sample_cost``: the attention block on samples of different lengths.

One launch of 3 gloo ranks, two runs (bucketing, cost-balanced LB-BSP), float64. Each round's
samples are the simulator's draw and rank 0's scheme assigns them (the owners ride the gradient
all-reduce): every round holds the global batch, the first round's partition is the simulator's, and
after the runs every replica equals one process taking SGD steps on each round's whole batch (the
mean over the samples of each sample's token mean), whatever the partition, to 1e-6.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from lbsim.runtime.config import RuntimeOptions  # noqa: E402
from lbsim.runtime.launch import launch  # noqa: E402
from lbsim.runtime.tokens import TokenModel, sample_tokens  # noqa: E402
from lbsim.runtime.worker import Job, Task  # noqa: E402
from lbsim.scenario.loader import load_scenario  # noqa: E402
from lbsim.scenario.resolve import resolve_run  # noqa: E402
from lbsim.simulator.run import simulate  # noqa: E402

SCENARIO = """seed: 2
workload:
  model: resnet50_imagenet
  global_batch: 12
  updates: 4
  sample_cost:
    lengths: {name: lognormal, median_tokens: 10, sigma: 0.8, max_tokens: 48}
    cost_quadratic: 0.02
cluster:
  groups:
    - {instance: c5.xlarge, count: 2, t0_s: 0.0, samples_per_s: 400, max_batch: 12}
    - {instance: c5.xlarge, count: 1, t0_s: 0.0, samples_per_s: 100, max_batch: 12}
network: {name: ring_allreduce}
numerics: {learning_rate: 0.5}
scheme: {name: lbbsp, variant: gpu_model, balance: cost}
"""


def _batches(run: Path) -> dict[int, list[int]]:
    out: dict[int, dict[int, int]] = {}
    with open(run / "iterations.csv", newline="") as fh:
        for r in csv.DictReader(fh):
            out.setdefault(int(r["update"]), {})[int(r["worker"])] = int(r["batch"])
    return {u: [b[w] for w in sorted(b)] for u, b in sorted(out.items())}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("tokens")
    path = tmp / "s.yaml"
    path.write_text(SCENARIO)
    tasks = (Task("train", str(tmp / "cost")), Task("train", str(tmp / "bucketing"), scheme="bucketing"))
    launch(Job(scenario=str(path), options=RuntimeOptions(dtype="float64", timeout_s=120), tasks=tasks), 3)
    return tmp


@pytest.mark.parametrize("run", ["cost", "bucketing"])
def test_each_round_is_the_global_batch_and_replicas_equal_one_process(runs: Path, run: str) -> None:
    out = runs / run
    per_update = _batches(out)
    assert len(per_update) == 4 and all(sum(b) == 12 for b in per_update.values())
    summary = json.loads((out / "summary.json").read_text())
    assert summary["runtime"]["replicas_identical"] is True
    scenario = load_scenario(out / "scenario.resolved.yaml")
    model = TokenModel(per_token=False)
    w = model.initial(scenario.seed, dtype=torch.float64, device=torch.device("cpu"))
    w0 = w.clone()
    sm = resolve_run(scenario).context.sample_cost
    for u in range(4):  # one process, the whole round: the partition does not change the mean
        lengths = sm.round_samples(u, 12).lengths
        _, g = model.loss_and_grad(w, [sample_tokens(scenario.seed, u, j, int(L)) for j, L in enumerate(lengths)])
        w = w - 0.5 * g
    got = torch.load(out / "model.pt")["w"]
    assert float((got - w).abs().max()) < 1e-6
    assert float((got - w0).abs().max()) > 1e-3  # it trained


def test_first_round_is_the_simulators_partition(runs: Path) -> None:
    """Round 0 is decided from the nominal curves alone: the runtime ran the simulator's partition."""
    scenario = load_scenario(runs / "cost" / "scenario.resolved.yaml")
    sim = simulate(scenario).iterations.columns
    first = dict(zip(sim["worker"][sim["update"] == 0].tolist(), sim["batch"][sim["update"] == 0].tolist(), strict=True))
    assert _batches(runs / "cost")[0] == [first[w] for w in range(3)]
    assert len(set(first.values())) > 1  # the slow rank got fewer samples: a real partition
