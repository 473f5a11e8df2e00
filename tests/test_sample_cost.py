"""Per-sample cost by sequence length (lbsim/samples, lbsim/sizing/length_partition.py, bucketing, LB-BSP cost).

Both simulator paths give the same records with lengths; equal lengths give exactly the count
model's run folder; the partition respects every cap and hands out every sample once; cost balance
removes the wait that count balance leaves; bad length files exit 2 naming the key and the row.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lbsim.cli import main
from lbsim.errors import InputError
from lbsim.lifecycle.execute import run_files
from lbsim.metrics.records import ITERATION_COLUMNS
from lbsim.samples.rounds import RoundSamples, per_worker
from lbsim.scenario.loader import scenario_from_data
from lbsim.schemes.sample_plan import update_weights
from lbsim.simulator.run import simulate
from lbsim.sizing.length_partition import lpt_partition
from lbsim.sizing.split import InfeasibleSplit

REPO = Path(__file__).resolve().parents[1]
CONV = str(REPO / "data" / "token_lengths" / "azure_conv_2023.csv")


def _data(scheme, *, lengths=None, groups=None, cost=None, updates=12, batch=64, seed=5):
    workload = {"model": "resnet50_imagenet", "global_batch": batch, "updates": updates, "gradient_bytes": 1_000_000}
    if lengths is not None:
        workload["sample_cost"] = {"lengths": lengths, **(cost or {})}
    return {
        "seed": seed, "workload": workload,
        "cluster": {"groups": groups or [
            {"instance": "g4dn.xlarge", "count": 2, "t0_s": 0.01, "samples_per_s": 200.0, "max_batch": 64, "jitter_cv": 0.1},
            {"instance": "g4dn.xlarge", "count": 2, "t0_s": 0.02, "samples_per_s": 90.0, "max_batch": 64}]},
        "network": {"name": "ring_allreduce", "alpha_s": 1e-5},
        "scheme": scheme,
    }


LOGNORMAL = {"name": "lognormal", "median_tokens": 900, "sigma": 0.8, "max_tokens": 6000}
FILE = {"name": "file", "path": CONV}
COST = {"name": "lbbsp", "variant": "gpu_model", "balance": "cost"}


@pytest.mark.parametrize("scheme", [{"name": "bsp"}, {"name": "bucketing"}, {"name": "lbbsp", "variant": "gpu_model"},
                                    COST, {"name": "lbbsp", "variant": "cpu", "predictor": "ema", "balance": "cost"}],
                         ids=lambda s: "-".join(str(v) for v in s.values()))
@pytest.mark.parametrize("lengths,cost", [(LOGNORMAL, {}), (FILE, {"batching": "padding", "gradient_mean": "per_token"}),
                                          (FILE, {"max_tokens": 40_000, "cost_quadratic": 1e-3})], ids=["ln", "pad", "cap"])
def test_fast_path_equals_event_path_with_lengths(scheme, lengths, cost) -> None:
    sc = scenario_from_data(_data(scheme, lengths=lengths, cost=cost))
    fast, slow = simulate(sc), simulate(sc, fast=False)
    for name in ITERATION_COLUMNS:
        assert np.array_equal(fast.iterations.columns[name], slow.iterations.columns[name]), name
    assert fast.updates == slow.updates and fast.summary == slow.summary


def _files(data) -> dict[str, bytes]:
    files = run_files(None, yaml.safe_dump(data))
    files.pop("scenario.resolved.yaml")  # states the section; everything the run produced must match
    return files


@pytest.mark.parametrize("scheme,baseline", [({"name": "bsp"}, None), ({"name": "bucketing"}, {"name": "bsp"}),
                                             (COST, {"name": "lbbsp", "variant": "gpu_model"})],
                         ids=["bsp", "bucketing", "lbbsp-cost"])
def test_equal_lengths_give_the_count_models_run_byte_for_byte(scheme, baseline) -> None:
    today = _files(_data(baseline or scheme))
    equal = _files(_data(scheme, lengths={"name": "constant", "tokens": 700}, cost={"cost_quadratic": 0.01}))
    if baseline is not None:  # another scheme's name in the summary: compare what it ran
        today.pop("summary.json"), equal.pop("summary.json")
    assert equal == today
    assert set(today) >= {"iterations.csv", "updates.csv"}


def test_cost_balance_removes_the_wait_count_balance_leaves() -> None:
    """8 identical workers, long-tailed lengths: the ideal step is every worker at the mean work."""
    groups = [{"instance": "g4dn.xlarge", "count": 8, "t0_s": 0.01, "samples_per_s": 100.0, "max_batch": 128}]
    runs = {}
    for key, scheme in {"bsp": {"name": "bsp"}, "cost": COST}.items():
        runs[key] = simulate(scenario_from_data(_data(scheme, lengths=FILE, groups=groups, batch=256, updates=8)))
    bsp = runs["bsp"].iterations.columns
    rounds = bsp["update"]
    mean_compute = np.array([bsp["compute_s"][rounds == u].mean() for u in range(8)])
    max_compute = np.array([bsp["compute_s"][rounds == u].max() for u in range(8)])
    gap = float((max_compute - mean_compute).sum())
    assert gap > 0.05 * float(max_compute.sum())  # count balance waits for the longest draw
    cost = runs["cost"].iterations.columns
    cost_max = np.array([cost["compute_s"][cost["update"] == u].max() for u in range(8)])
    # the same samples each round (seeded by round): cost balance recovers >= 80 % of the gap
    assert float((max_compute - cost_max).sum()) >= 0.8 * gap
    assert cost["batch"].sum() == bsp["batch"].sum() == 8 * 256


def test_per_token_weights_are_token_shares() -> None:
    sc = scenario_from_data(_data(COST, lengths=FILE, cost={"gradient_mean": "per_token"}))
    res = simulate(sc)
    cols = res.iterations.columns
    for u in range(3):
        w = cols["weight"][cols["update"] == u]
        assert abs(w.sum() - 1.0) < 1e-12 and len(set(w.tolist())) > 1
    assert update_weights(None, (1, 3), None, [0, 1]) == {0: 0.25, 1: 0.75}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 5000), min_size=1, max_size=80), st.integers(1, 5), st.integers(0, 2**16),
       st.booleans(), st.booleans())
@example([1], 1, 0, True, False)  # one sample, padded: the bisection's upper end must cover it despite rounding
def test_partition_respects_every_cap_and_hands_out_every_sample_once(lengths, n, seed, padding, capped) -> None:
    rng = np.random.default_rng(seed)
    ln = np.array(lengths, dtype=np.int64)
    units = (ln + 1e-4 * ln * ln) / 1000.0
    a, b = rng.uniform(0, 0.1, n), rng.uniform(0.5, 3.0, n)
    caps = rng.integers(-(-len(ln) // n), len(ln) + 1, n)  # their sum covers the batch
    max_tokens = int(ln.max() * (len(ln) // n + 2)) if capped else None
    try:
        owner = lpt_partition(units, ln, a, b, caps, max_tokens, padding, min_count=1)
    except InfeasibleSplit:
        assert capped  # only the token cap can leave a sample without a worker here
        return
    assert owner.shape == (len(ln),) and owner.min() >= 0 and owner.max() < n
    plan = per_worker(RoundSamples(ln, units, padding, max_tokens), owner, n)
    assert sum(plan.batches) == len(ln)  # the global batch is exact
    assert len(ln) < n or min(plan.batches) >= 1  # no empty batch where there are samples for all
    assert all(c <= cap for c, cap in zip(plan.batches, caps, strict=True))
    if max_tokens is not None:
        assert int(plan.memory_tokens.max()) <= max_tokens
    if not padding and not capped:  # without the floor of one sample, the move pass ends where no move helps
        free = lpt_partition(units, ln, a, b, [len(ln)] * n)
        work = np.bincount(free, weights=units, minlength=n)
        t = a + b * work
        top = int(np.argmax(t))
        for j in np.flatnonzero(free == top):
            moved = np.maximum(a[top] + b[top] * (work[top] - units[j]), t + b * units[j])
            moved[top] = np.inf
            assert moved.min() >= t[top] - 1e-9


def _bad(tmp_path: Path, text: str, capsys, cost=None) -> str:
    path = tmp_path / "lengths.csv"
    path.write_text(text)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(_data({"name": "bsp"}, lengths={"name": "file", "path": str(path)}, cost=cost)))
    out = tmp_path / "out"
    assert main(["run", str(scenario), "--out", str(out)]) == 2
    assert not out.exists()
    return capsys.readouterr().err


@pytest.mark.parametrize("text,cost,words", [
    ("tokens\n12\n-3\n", None, ["workload.sample_cost.lengths.path", "line 3", "'-3'"]),
    ("tokens\n12\nabc\n", None, ["workload.sample_cost.lengths.path", "line 3", "not a number"]),
    ("tokens\n", None, ["workload.sample_cost.lengths.path", "empty histogram"]),
    ("tokens,count\n10,2\n90000,1\n", {"max_tokens": 4096}, ["workload.sample_cost.lengths.path", "line 3", "max_tokens"]),
    ("length\n10\n", None, ["workload.sample_cost.lengths.path", "tokens"]),
])
def test_bad_length_files_exit_2_naming_key_and_row(tmp_path, capsys, text, cost, words) -> None:
    err = _bad(tmp_path, text, capsys, cost)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    for word in words:
        assert word in err


def test_bad_sections_name_their_key() -> None:
    with pytest.raises(InputError, match="workload.sample_cost.max_tokens"):
        scenario_from_data(_data({"name": "bsp"}, lengths=LOGNORMAL, cost={"max_tokens": 100}))
    with pytest.raises(InputError, match="scheme.balance"):
        scenario_from_data(_data(COST))
    for rhythm in ({"decide_every": 4}, {"decision_lag": 1}):  # cost partitions each round's own samples
        with pytest.raises(InputError, match="scheme.balance.*decide_every 1 and decision_lag 0"):
            scenario_from_data(_data({**COST, **rhythm}, lengths=LOGNORMAL))
    with pytest.raises(InputError, match="workload.sample_cost.lengths.min_tokens"):
        scenario_from_data(_data({"name": "bsp"}, lengths={**LOGNORMAL, "min_tokens": 7000}))
    with pytest.raises(InputError, match="numerics.enabled"):
        scenario_from_data({**_data({"name": "bsp"}, lengths=LOGNORMAL), "numerics": {"enabled": True}})


PS = {"name": "parameter_server", "server_bandwidth_gbps": 10.0}


@pytest.mark.parametrize("scheme", [{"name": "asp"}, {"name": "ssp", "staleness": 1}, {"name": "wbsp"},
                                    {"name": "bsp", "backup_workers": 1}], ids=lambda s: s["name"])
def test_parameter_server_drivers_draw_each_iterations_samples_alike_on_both_paths(scheme) -> None:
    data = {**_data(scheme, lengths=FILE, cost={"batching": "padding"}, updates=30), "network": PS}
    sc = scenario_from_data(data)
    fast, slow = simulate(sc), simulate(sc, fast=False)
    for name in ITERATION_COLUMNS:
        assert np.array_equal(fast.iterations.columns[name], slow.iterations.columns[name]), name
    assert fast.summary == slow.summary
    plain = simulate(scenario_from_data({**_data(scheme, updates=30), "network": PS}))
    assert not np.array_equal(plain.iterations.columns["compute_s"][:20], fast.iterations.columns["compute_s"][:20])


def test_parameter_server_equal_lengths_are_the_count_model() -> None:
    today = _files({**_data({"name": "asp"}), "network": PS})
    equal = _files({**_data({"name": "asp"}, lengths={"name": "constant", "tokens": 50}), "network": PS})
    assert equal == today


@pytest.mark.parametrize("command,args,key", [
    ("train", ["--set", "workload.sample_cost.gradient_mean=per_token"], "gradient_mean"),
    ("train", ["--scheme", "asp", "--set", "network={name: parameter_server}"], "sample_cost"),
    ("profile", [], "sample_cost"), ("validate", ["--schemes", "bsp"], "sample_cost")])
def test_the_runtime_refuses_what_it_does_not_model(tmp_path, capsys, command, args, key) -> None:
    out = tmp_path / "train"
    assert main([command, str(REPO / "scenarios" / "seqlen_mixed.yaml"), "--out", str(out), *args]) == 2
    err = capsys.readouterr().err
    assert key in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
