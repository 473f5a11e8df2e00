"""The engine-independent numerics core (``lbsim/numerics``): data, models, SGD, streams, attacks, tracker.

What the engines will rely on: the bundled datasets load with a fixed, stratified, train-standardised
split; both models' gradients are right (finite differences) and aggregate by batch weight exactly as
one process on the concatenated batch; plain SGD with the defaults learns digits; batch streams see
each sample once per epoch however workers interleave; attacks and the tracker do what they say.
"""

from __future__ import annotations

import csv
import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lbsim.aggregation import weighted_mean
from lbsim.numerics import (
    MLP,
    SGD,
    LRSchedule,
    ShardStream,
    SharedStream,
    SoftmaxRegression,
    Tracker,
    corrupt,
    load_dataset,
    make_model,
    shard_indices,
    shard_sizes,
)
from lbsim.numerics.datasets import DATA_DIR, TEST_FRACTION, stratified_split
from lbsim.numerics.tracker import DEFAULT_TARGET_ACCURACY

REPO = Path(__file__).resolve().parents[1]


def _raw(name: str) -> tuple[np.ndarray, np.ndarray]:
    """The file's rows parsed independently of lbsim (csv module): features and labels."""
    with gzip.open(DATA_DIR / f"{name}.csv.gz", "rt") as f:
        rows = list(csv.reader(f))
    if name == "breast_cancer":
        rows = rows[1:]
    data = np.array([[float(v) for v in r] for r in rows])
    return data[:, :-1], data[:, -1].astype(int)


# --- datasets -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "n", "features", "classes"), [("digits", 1797, 64, 10), ("breast_cancer", 569, 30, 2)])
def test_dataset_shapes(name: str, n: int, features: int, classes: int) -> None:
    d = load_dataset(name)
    assert (d.n_features, d.n_classes) == (features, classes)
    assert d.n_train + d.n_test == n
    assert d.X_train.shape == (d.n_train, features) and d.X_test.shape == (d.n_test, features)
    assert d.X_train.dtype == np.float64 and d.y_train.dtype.kind == "i"
    assert set(np.unique(d.y_train)) == set(np.unique(d.y_test)) == set(range(classes))
    assert abs(d.n_test - TEST_FRACTION * n) <= classes
    assert not d.X_train.flags.writeable and not d.y_test.flags.writeable
    assert load_dataset(name) is d  # cached per process


@pytest.mark.parametrize("name", ["digits", "breast_cancer"])
def test_split_is_stratified_disjoint_and_deterministic(name: str) -> None:
    d = load_dataset(name)
    _, y = _raw(name)
    train, test = d.train_index, d.test_index
    assert len(np.intersect1d(train, test)) == 0
    assert np.array_equal(np.sort(np.concatenate([train, test])), np.arange(len(y)))
    np.testing.assert_array_equal(d.y_train, y[train])
    np.testing.assert_array_equal(d.y_test, y[test])
    for c, count in enumerate(np.bincount(y)):
        assert np.sum(y[test] == c) == int(np.floor(count * TEST_FRACTION + 0.5))
    again_train, again_test = stratified_split(y)  # the fixed seed: same split in any process, any scenario
    np.testing.assert_array_equal(again_train, train)
    np.testing.assert_array_equal(again_test, test)
    assert not np.array_equal(stratified_split(y, seed=1)[1], test)  # the seed is what fixes it


@pytest.mark.parametrize("name", ["digits", "breast_cancer"])
def test_standardisation_uses_train_statistics(name: str) -> None:
    d = load_dataset(name)
    X, _ = _raw(name)
    raw_train, raw_test = X[d.train_index], X[d.test_index]
    varying = raw_train.std(axis=0) > 0
    np.testing.assert_allclose(d.mean, raw_train.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(d.X_train.mean(axis=0), 0.0, atol=1e-10)
    np.testing.assert_allclose(d.X_train.std(axis=0)[varying], 1.0, rtol=1e-10)
    np.testing.assert_allclose(d.X_test, (raw_test - raw_train.mean(axis=0)) / d.std, rtol=1e-12, atol=1e-12)
    # the test split is not standardised with its own statistics
    assert np.abs(d.X_test.mean(axis=0)).max() > 1e-3
    assert np.all(np.isfinite(d.X_test))


def test_unknown_dataset_is_refused() -> None:
    with pytest.raises(ValueError, match="digits"):
        load_dataset("mnist")


# --- models ---------------------------------------------------------------------------------------

def _models() -> list:
    return [SoftmaxRegression(64, 10, l2=0.01), MLP(64, 8, 10, l2=0.01), MLP(64, 8, 10, l2=0.01, activation="tanh")]


@pytest.mark.parametrize("model", _models(), ids=repr)
def test_gradient_matches_finite_differences(model) -> None:
    d = load_dataset("digits")
    rng = np.random.default_rng(7)
    X, y = d.X_train[:6], d.y_train[:6]
    w = rng.normal(0.0, 0.3, model.n_params)
    _, g = model.loss_and_grad(w, X, y)
    eps = 1e-6
    fd = np.empty_like(w)
    for k in range(len(w)):
        e = np.zeros_like(w)
        e[k] = eps
        fd[k] = (model.loss_and_grad(w + e, X, y)[0] - model.loss_and_grad(w - e, X, y)[0]) / (2 * eps)
    rel = np.linalg.norm(g - fd) / (np.linalg.norm(g) + np.linalg.norm(fd))
    assert rel < 1e-5


@pytest.mark.parametrize("model", _models(), ids=repr)
def test_batch_weighted_mean_of_worker_gradients_equals_concatenated_batch(model) -> None:
    d = load_dataset("digits")
    rng = np.random.default_rng(3)
    w = rng.normal(0.0, 0.3, model.n_params)
    batch = rng.choice(d.n_train, 37, replace=False)
    sizes = [1, 5, 12, 19]  # uneven split among four workers
    parts = np.split(batch, np.cumsum(sizes)[:-1])
    results = [model.loss_and_grad(w, d.X_train[p], d.y_train[p]) for p in parts]
    loss, g = model.loss_and_grad(w, d.X_train[batch], d.y_train[batch])
    np.testing.assert_allclose(weighted_mean([r[1] for r in results], sizes), g, rtol=0, atol=1e-12)
    assert sum(s * r[0] for s, r in zip(sizes, results, strict=True)) / sum(sizes) == pytest.approx(loss, abs=1e-12)
    # a plain mean over workers is not the same update
    assert np.abs(np.mean([r[1] for r in results], axis=0) - g).max() > 1e-3


def test_model_shapes_and_predictions() -> None:
    d = load_dataset("digits")
    for model in (SoftmaxRegression(64, 10), MLP(64, 32, 10)):
        w = model.init(np.random.default_rng(0))
        assert w.shape == (model.n_params,) and w.dtype == np.float64
        np.testing.assert_array_equal(model.init(np.random.default_rng(0)), w)
        pred = model.predict(w, d.X_test)
        assert pred.shape == (d.n_test,) and set(pred) <= set(range(10))
        loss, acc = model.evaluate(w, d.X_test, d.y_test)
        assert loss == pytest.approx(np.log(10), rel=0.1) and 0 <= acc <= 1  # near-uniform at init
        assert acc == pytest.approx(np.mean(pred == d.y_test))
    assert SoftmaxRegression(64, 10).n_params == 64 * 10 + 10
    assert MLP(64, 32, 10).n_params == 64 * 32 + 32 + 32 * 10 + 10


def test_loss_is_stable_for_huge_logits() -> None:
    model = SoftmaxRegression(2, 3, l2=0.0)
    w = np.array([1e4, 0, 0, 0, 0, 0, 0, 0, 0])  # logit of class 0 = 1e4 * x0
    X, y = np.array([[1.0, 0.0], [1.0, 0.0]]), np.array([0, 1])
    loss, g = model.loss_and_grad(w, X, y)
    assert np.isfinite(loss) and np.all(np.isfinite(g))
    assert loss == pytest.approx(0.5 * 1e4)  # sample 1 pays 1e4 nats, sample 0 nothing


@pytest.mark.parametrize("name", ["softmax", "mlp"])
def test_sgd_with_defaults_learns_digits(name: str) -> None:
    """Single-process SGD, batch 64, default learning rate: >= 0.90 held-out accuracy in a few hundred updates."""
    d = load_dataset("digits")
    rng = np.random.default_rng(0)
    model = make_model(name, d.n_features, d.n_classes)
    w, opt, stream = model.init(rng), SGD(), SharedStream(d.n_train, rng)
    tracker = Tracker(lambda v: model.evaluate(v, d.X_test, d.y_test))
    tracker.observe(0, 0.0, w)
    for t in range(1, 301):
        i = stream.draw(64)
        _, g = model.loss_and_grad(w, d.X_train[i], d.y_train[i])
        w = opt.step(w, g)
        tracker.observe(t, 0.01 * t, w)
    assert opt.updates == 300
    assert tracker.final_accuracy is not None and tracker.final_accuracy >= 0.90
    assert tracker.updates_to_target is not None and tracker.updates_to_target <= 300  # the default target
    assert tracker.final_loss < tracker.history[0].loss / 4


# --- optimizer -------------------------------------------------------------------------------------

def test_sgd_momentum_follows_the_torch_rule_and_never_mutates_weights() -> None:
    opt = SGD(0.5, momentum=0.9)
    w0 = np.array([1.0, -2.0])
    g1, g2 = np.array([1.0, 1.0]), np.array([0.0, 2.0])
    w1 = opt.step(w0, g1)
    w2 = opt.step(w1, g2)
    np.testing.assert_array_equal(w0, [1.0, -2.0])
    np.testing.assert_allclose(w1, w0 - 0.5 * g1)
    np.testing.assert_allclose(w2, w1 - 0.5 * (0.9 * g1 + g2))
    assert opt.updates == 2
    plain = SGD(0.5)
    np.testing.assert_allclose(plain.step(w0, g1), w0 - 0.5 * g1)


def test_learning_rate_schedules() -> None:
    step = LRSchedule(0.1, "step", milestones=[100, 200], gamma=0.5)
    assert [step(t) for t in (0, 99, 100, 199, 200, 10_000)] == pytest.approx([0.1, 0.1, 0.05, 0.05, 0.025, 0.025])
    cos = LRSchedule(0.1, "cosine", total=100, lr_min=0.01)
    assert [cos(t) for t in (0, 50, 100, 500)] == pytest.approx([0.1, 0.055, 0.01, 0.01])
    opt = SGD(step)
    for _ in range(100):
        opt.step(np.zeros(1), np.ones(1))
    assert opt.lr == pytest.approx(0.05)
    with pytest.raises(ValueError):
        LRSchedule(0.1, "cosine")


# --- sampling ------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [23, load_dataset("digits").n_train])
def test_shared_stream_sees_every_sample_once_per_epoch_whatever_the_interleaving(n: int) -> None:
    rng = np.random.default_rng(11)
    stream = SharedStream(n, np.random.default_rng(5))
    drawn: list[np.ndarray] = []
    for _ in range(400):  # 8 workers asking in a random order for random amounts, sometimes 0 or > n
        worker_batch = int(rng.choice([0, 1, 3, 7, 64, n + 5]))
        drawn.append(stream.draw(worker_batch))
    seq = np.concatenate(drawn)
    full = len(seq) // n
    assert full >= 3
    for e in range(full):
        np.testing.assert_array_equal(np.sort(seq[e * n:(e + 1) * n]), np.arange(n))
    assert stream.epoch == full and stream.drawn == len(seq)
    # the epochs are reshuffled, and the stream is reproducible from its generator
    assert not np.array_equal(seq[:n], seq[n:2 * n])
    again = SharedStream(n, np.random.default_rng(5))
    np.testing.assert_array_equal(np.concatenate([again.draw(len(d)) for d in drawn]), seq)


def test_shard_streams_stay_in_their_shards() -> None:
    n = load_dataset("digits").n_train
    shards = shard_indices(n, [0.5, 0.25, 0.125, 0.125], np.random.default_rng(0))
    assert [len(s) for s in shards] == shard_sizes(n, [0.5, 0.25, 0.125, 0.125])
    assert np.array_equal(np.sort(np.concatenate(shards)), np.arange(n))  # disjoint and covering
    for i, shard in enumerate(shards):
        stream = ShardStream(shard, np.random.default_rng(i))
        seq = np.concatenate([stream.draw(x) for x in [5, 64, 3, len(shard), 17] * 3])
        assert np.isin(seq, shard).all()
        assert shard.flags.writeable  # the stream keeps its own copy
        np.testing.assert_array_equal(np.sort(seq[:len(shard)]), shard)


def test_shard_sizes_are_integer_and_proportional() -> None:
    assert shard_sizes(10, [1, 1, 1]) == [4, 3, 3]
    assert shard_sizes(100, [0.7, 0.2, 0.1]) == [70, 20, 10]
    sizes = shard_sizes(1438, [3, 1, 1, 2])
    assert sum(sizes) == 1438 and all(abs(s - 1438 * f / 7) < 1 for s, f in zip(sizes, [3, 1, 1, 2], strict=True))
    with pytest.raises(ValueError):
        shard_sizes(10, [0, 0])


# --- Byzantine attacks ------------------------------------------------------------------------------

def test_byzantine_attacks_do_what_they_say() -> None:
    g = np.random.default_rng(0).normal(size=5000)
    np.testing.assert_array_equal(corrupt(g, "sign_flip", scale=3.0), -3.0 * g)
    np.testing.assert_array_equal(corrupt(g, "sign_flip"), -g)
    np.testing.assert_array_equal(corrupt(g, "scaled", scale=100.0), 100.0 * g)
    noise = corrupt(g, "gaussian", np.random.default_rng(1), scale=2.0)
    assert noise.shape == g.shape
    assert abs(noise.mean()) < 0.1 and noise.std() == pytest.approx(2.0, rel=0.05)
    assert abs(np.corrcoef(noise, g)[0, 1]) < 0.05  # replaces g: carries no information about it
    np.testing.assert_array_equal(corrupt(np.zeros(5000), "gaussian", np.random.default_rng(1), scale=2.0), noise)
    original = g.copy()
    corrupt(g, "sign_flip")
    np.testing.assert_array_equal(g, original)
    with pytest.raises(ValueError):
        corrupt(g, "label_flip")
    with pytest.raises(ValueError):
        corrupt(g, "gaussian")  # needs a generator


# --- tracker -------------------------------------------------------------------------------------

def test_tracker_time_to_target() -> None:
    accuracies = iter([0.1, 0.5, 0.92, 0.89, 0.95, 0.97])
    tracker = Tracker(lambda w: (1.0 - float(w[0]), next(accuracies)), every=10, target_accuracy=0.9)
    for update in range(0, 51):
        tracker.observe(update, 0.5 * update, np.array([update / 100]))
    assert [e.update for e in tracker.history] == [0, 10, 20, 30, 40, 50]
    assert tracker.updates_to_target == 20 and tracker.time_to_target_s == 10.0  # first crossing, not a later one
    assert tracker.summary() == {"final_loss": pytest.approx(0.5), "final_accuracy": 0.97,
                                 "time_to_target_s": 10.0, "updates_to_target": 20}
    assert tracker.finish(50, 25.0, np.zeros(1)) is tracker.history[-1]  # already evaluated: no duplicate


def test_tracker_without_reaching_the_target() -> None:
    tracker = Tracker(lambda w: (2.0, 0.5), every=5, target_accuracy=DEFAULT_TARGET_ACCURACY)
    for update in range(0, 13):
        tracker.observe(update, float(update), np.zeros(1))
    tracker.finish(12, 12.0, np.zeros(1))
    assert [e.update for e in tracker.history] == [0, 5, 10, 12]
    assert tracker.time_to_target_s is None and tracker.updates_to_target is None
    assert (tracker.final_loss, tracker.final_accuracy) == (2.0, 0.5)
    with pytest.raises(ValueError):
        tracker.add(11, 20.0, 1.0, 0.5)  # going back in update count


# --- boundary ------------------------------------------------------------------------------------

def test_numerics_imports_numpy_and_stdlib_only() -> None:
    code = ("import json, sys, lbsim.numerics; "
            "print(json.dumps(sorted({n.split('.')[0] for n in sys.modules} & {'simpy', 'torch', 'sklearn', 'scipy'})))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


def test_data_files_ship_with_their_attribution() -> None:
    readme = (DATA_DIR / "README.md").read_text(encoding="utf-8")
    for needle in ("CC BY 4.0", "Alpaydin", "Breast Cancer Wisconsin", "scikit-learn", "569,30,malignant,benign"):
        assert needle in readme
    setup = (REPO / "setup.py").read_text(encoding="utf-8")
    assert '"lbsim.numerics": ["data/*.gz", "data/README.md"]' in setup
