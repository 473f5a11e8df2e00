"""WBSP in the torch.distributed runtime (issue 7): 3 gloo workers + a parameter-server rank.

One process group runs ``scenarios/validation/wbsp_cpu3.yaml`` (worker 2 slowed 2x by emulated
contention) with a tiny MLP, in both variants. To make a step long next to a loopback message
(~1-10 ms on this shared 2-core machine), every worker's compute is also stretched 10x by the
emulated contention (worker 2: 20x): the step times are mostly sleeps, so the figures depend less
on how busy the machine's cores are. The scheme's nominal figures designate worker 2 from the
start and ``switch_margin`` is raised, so that a noisy step does not hand the role away (the
dynamic designation itself is tested on the simulator, tests/test_wbsp.py). The tests check, from
the records:

* the global model is exactly the one the rule makes (a numpy replay of every recorded step);
* the records and updates agree (samples/gradients per round, weights, decisions);
* the slowed worker never waits, and 2x-faster workers take ~2 local steps per round;
* compute fractions, and the overlap variant hiding the communication that base WBSP pays.

No wall-clock limits are asserted: the machine is shared.
"""

from __future__ import annotations

import csv
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("psutil")

from lbsim.numerics import SharedStream, load_dataset, make_model  # noqa: E402
from lbsim.rng import stream  # noqa: E402
from lbsim.runtime.config import RuntimeOptions  # noqa: E402
from lbsim.runtime.launch import launch  # noqa: E402
from lbsim.runtime.wbsp import SAMPLE_STREAM  # noqa: E402
from lbsim.runtime.worker import Job, Task  # noqa: E402
from lbsim.scenario.loader import load_scenario  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CPU3 = REPO / "scenarios" / "validation" / "wbsp_cpu3.yaml"
ROUNDS = 30
SLOW, FAST = 2, (0, 1)
SETS = (
    f"workload.updates={ROUNDS}", "numerics.hidden=256", "scheme.switch_margin=0.5",
    # the scheme's nominal figures say worker 2 is the slow one (the runtime's speeds are measured)
    "cluster.groups=[{instance: c5.xlarge, count: 2, t0_s: 0.0088, samples_per_s: 4650, max_batch: 1024},"
    " {instance: c5.xlarge, count: 1, t0_s: 0.0176, samples_per_s: 2325, max_batch: 1024}]",
    "contention=[{name: scheduled, workers: [0, 1, 2], start_s: 0, slowdown: 10},"
    " {name: scheduled, workers: [2], start_s: 0, slowdown: 2}]",
)
VARIANTS = {"base": ("scheme.overlap=false",), "overlap": ("scheme.overlap=true",),
            "nonblocking": ("scheme.overlap=true", "scheme.overlap_pull_blocks=false")}


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


class Run:
    """One run's outputs, parsed."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
        self.its = [{k: float(v) for k, v in r.items() if k not in ("dropped", "cut")} for r in _rows(out / "iterations.csv")]
        self.ups = [{k: float(v) for k, v in r.items()} for r in _rows(out / "updates.csv")]
        self.decisions = _rows(out / "decisions.csv")
        self.by_worker: dict[int, list[dict[str, float]]] = defaultdict(list)
        for r in sorted(self.its, key=lambda r: (r["worker"], r["iteration"])):
            self.by_worker[int(r["worker"])].append(r)

    def mean(self, worker: int, key: str) -> float:
        rs = self.by_worker[worker]
        return sum(r[key] for r in rs) / len(rs)

    def step_s(self, worker: int) -> float:
        rs = self.by_worker[worker]
        return sum(r["end_s"] - r["start_s"] for r in rs) / len(rs)

    def settled(self) -> int:
        """The first round from which the slowed worker closes every round (the designation settled;
        the nominal figures designate it from the start, a noisy first step may hand the role away)."""
        by = [int(d["closed_by"]) for d in self.decisions]
        return next(r for r in range(len(by)) if all(b == SLOW for b in by[r:]))

    def round_s(self) -> float:
        """Mean time between round closes once the designation settled."""
        t = [u["time_s"] for u in self.ups]
        first = self.settled()
        return (t[-1] - t[first]) / (len(t) - 1 - first)

    def steps_per_round(self, worker: int) -> float:
        """Mean local steps per round of ``worker`` once the designation settled."""
        first = self.settled()
        steps = sum(1 for r in self.by_worker[worker] if r["update"] > first)
        return steps / (len(self.ups) - 1 - first)

    def compute_fraction(self, worker: int) -> float:
        rs = self.by_worker[worker]
        return sum(r["compute_s"] for r in rs) / sum(r["end_s"] - r["start_s"] for r in rs)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """Both variants (and overlap without the blocking pull) in one process group of 4 ranks."""
    tmp = tmp_path_factory.mktemp("wbsp")
    tasks = tuple(Task("train", str(tmp / name), overrides=sets) for name, sets in VARIANTS.items())
    launch(Job(scenario=str(CPU3), overrides=SETS, options=RuntimeOptions(dtype="float64", timeout_s=60), tasks=tasks), 4)
    return {name: Run(tmp / name) for name in VARIANTS}


def _replay(run: Run) -> np.ndarray:
    """The global model the WBSP rule makes from the recorded steps (numpy, lbsim.numerics).

    Every worker takes plain SGD steps on its own copy, from its own sample stream; a step whose
    base version differs from its predecessor's started on that round's snapshot. Round r's
    snapshot = round r-1's + 1/n x the deltas of the steps the records put in round r.
    """
    scenario = load_scenario(run.out / "scenario.resolved.yaml")
    n, lr = 3, scenario.numerics.learning_rate
    ds = load_dataset("digits")
    model = make_model("mlp", ds.n_features, ds.n_classes, hidden=256, l2=scenario.numerics.l2)
    snapshots = [model.init(stream(scenario.seed, "numerics", "init"))]
    draws = {w: SharedStream(ds.n_train, stream(scenario.seed, *SAMPLE_STREAM, w)) for w in range(n)}
    local: dict[int, tuple[int, np.ndarray]] = {}  # worker -> (base version, model after its last step)
    for r in range(len(run.ups)):
        total = np.zeros_like(snapshots[0])
        for w in range(n):
            for s in (s for s in run.by_worker[w] if s["update"] == r):
                base = int(s["update"] - s["staleness"])
                prev = local.get(w)
                start = prev[1] if prev is not None and prev[0] == base else snapshots[base]
                idx = draws[w].draw(int(s["batch"]))
                _loss, g = model.loss_and_grad(start, ds.X_train[idx], ds.y_train[idx])
                local[w] = (base, start - lr * g)
                total += local[w][1] - start
        snapshots.append(snapshots[-1] + total / n)
    return snapshots[-1]


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_global_model_is_the_rules(runs: dict[str, Run], variant: str) -> None:
    """Local SGD steps, deltas added with share 1/n, snapshots adopted: the replay gives the same weights."""
    run = runs[variant]
    got = torch.load(run.out / "model.pt")["w"].numpy()
    np.testing.assert_allclose(got, _replay(run), rtol=0, atol=1e-9)
    assert run.summary["final_accuracy"] > 0.5


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_records_updates_and_decisions_agree(runs: dict[str, Run], variant: str) -> None:
    run = runs[variant]
    s = run.summary
    assert s["engine"] == "runtime" and s["scheme"] == "wbsp" and s["updates"] == ROUNDS == len(run.ups)
    assert s["wbsp_overlap"] is (variant != "base") and s["wbsp_rounds"] == ROUNDS
    assert [int(u["update"]) for u in run.ups] == list(range(ROUNDS))
    assert all(a["time_s"] < b["time_s"] for a, b in zip(run.ups, run.ups[1:], strict=False))
    grads: Counter[int] = Counter()
    samples: Counter[int] = Counter()
    weights: defaultdict[int, float] = defaultdict(float)
    for r in run.its:
        assert r["batch"] == 128 and r["staleness"] >= 0
        assert r["compute_s"] + r["comm_s"] + r["wait_s"] == pytest.approx(r["end_s"] - r["start_s"], abs=1e-9)
        assert r["comm_s"] >= 0 and r["wait_s"] >= 0
        if variant != "base":
            assert r["wait_s"] == 0.0
        grads[int(r["update"])] += 1
        samples[int(r["update"])] += int(r["batch"])
        weights[int(r["update"])] += r["weight"]
    for up in run.ups:  # samples = the batches of the round's local steps; gradients = its local steps
        k = int(up["update"])
        assert (grads[k], samples[k]) == (up["gradients"], up["samples"]) and up["samples"] == 128 * up["gradients"]
        assert weights[k] == pytest.approx(1.0)
    for rs in run.by_worker.values():  # every worker's steps, in order, the earliest rounds first
        assert [int(r["iteration"]) for r in rs] == list(range(len(rs)))
        assert all(a["update"] <= b["update"] for a, b in zip(rs, rs[1:], strict=False))
    assert [int(d["round"]) for d in run.decisions] == list(range(ROUNDS))  # one decision row per round
    closed = Counter(int(d["closed_by"]) for d in run.decisions)
    assert [closed[w] for w in range(3)] == s["wbsp_rounds_closed_by"]
    for d, up in zip(run.decisions, run.ups, strict=True):
        assert float(d["time_s"]) == pytest.approx(up["time_s"])


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_slowest_never_waits_and_fast_workers_step_twice_per_round(runs: dict[str, Run], variant: str) -> None:
    """The 2x-slowed worker closes the rounds and never waits; workers twice as fast take ~2 steps per round.

    ``wait_s`` in base WBSP is the server's own time on the push (adding a delta, maybe a
    snapshot copy: well under a millisecond for this model); in the overlap variants it is 0 by
    definition. Both bounds are ratios to the slowed worker's own mean step time in the same run, so
    that a loaded machine, which stretches the steps too, does not fail them: on average at most 3%
    of it (observed: ~1%), which leaves room for a server rank that the shared machine's scheduler
    descheduled mid-push; and no single step waits half of it (about one fast step; observed: ~2%).
    Had the slowed worker to wait for the round (for the fast workers' steps in flight, as at a BSP
    barrier), it would wait about half a fast step, a quarter of its own, on average: the mean
    bound fails. (Before, the max bound was an absolute 20 ms, about half the slowed worker's step
    on a quiet machine, which a server rank descheduled that long on a busy machine could exceed.)

    Steps per round follow the rate argument, T_slow / T_fast (within 15%). That ratio is ~2 but
    not exactly: the emulation stretches each real step 10x (worker 2: 20x), noise included (a
    step preempted for a few milliseconds grows ten times that; on this shared machine worker 2's
    real steps, after longer sleeps, also tend to run slower), and base WBSP adds the same
    push/reply time to both steps, (2C + c) / (C + c) < 2; hence the wide band around 2 (observed:
    1.7 to 2.7).
    """
    run = runs[variant]
    s = run.summary
    assert run.settled() <= 10
    assert s["wbsp_final_slowest"] == SLOW
    assert run.mean(SLOW, "wait_s") <= 0.03 * run.step_s(SLOW)
    assert max(r["wait_s"] for r in run.by_worker[SLOW]) <= 0.5 * run.step_s(SLOW)
    assert run.steps_per_round(SLOW) == pytest.approx(1.0, abs=0.1)
    for w in FAST:
        ratio = run.step_s(SLOW) / run.step_s(w)  # the rate argument: steps per round = T_slow / T_fast
        assert run.steps_per_round(w) == pytest.approx(ratio, rel=0.15)
        assert 1.4 <= run.steps_per_round(w) <= 3.2  # the emulated slowdown is 2x


def test_compute_fraction_is_high(runs: dict[str, Run]) -> None:
    """Fast workers never wait for the round: they compute most of the time (base: all but the push
    and reply; overlap: all but pull stalls), as the summary's compute_fraction reports."""
    for variant, run in runs.items():
        s = run.summary
        fractions = [run.compute_fraction(w) for w in range(3)]
        assert s["compute_fraction"] == pytest.approx(
            sum(r["compute_s"] for r in run.its) / sum(r["end_s"] - r["start_s"] for r in run.its), abs=1e-6)
        assert min(fractions[w] for w in FAST) >= (0.6 if variant == "base" else 0.85), (variant, fractions)
    base, overlap = runs["base"].summary["compute_fraction"], runs["overlap"].summary["compute_fraction"]
    assert overlap > base


def test_overlap_round_is_max_of_compute_and_comm(runs: dict[str, Run]) -> None:
    """Base: a round is the slowed worker's compute + push/reply/pull; overlap: about its compute alone
    (the communication, shorter than a step here, runs behind the next step)."""
    base, overlap = runs["base"], runs["overlap"]
    c_base = base.mean(SLOW, "compute_s")
    comm_base = base.mean(SLOW, "comm_s") + base.mean(SLOW, "wait_s")
    assert base.round_s() == pytest.approx(c_base + comm_base, rel=0.15)
    assert comm_base > 0
    c_over = overlap.mean(SLOW, "compute_s")
    assert overlap.round_s() == pytest.approx(c_over, rel=0.1)
    assert overlap.mean(SLOW, "comm_s") < comm_base  # only the rare pull stall
    # the overhead per round beyond the slowest's compute, relative to it (robust to the load changing between runs)
    assert overlap.round_s() / c_over < base.round_s() / c_base
