"""Bundled datasets for numerics mode: parsing, a fixed stratified split, train-only standardisation.

A :class:`Dataset` is a real classification problem that ships with lbsim (``lbsim/numerics/data/``,
attribution in its README): ``digits`` (1797 samples, 64 features, 10 classes) and
``breast_cancer`` (569 samples, 30 features, 2 classes).

The procedure is fixed so that every engine (this simulator, a torch runtime) sees the same numbers:

1. Parse the gzipped CSV into ``X`` (float64, one row per sample, in file order) and ``y`` (int64).
2. Split, stratified by class, with ``rng = numpy.random.default_rng(SPLIT_SEED)``: for each class
   ``c`` in increasing order, ``idx = rng.permutation(flatnonzero(y == c))``; its first
   ``floor(len(idx) * TEST_FRACTION + 0.5)`` entries go to the test split, the rest to training.
   Both index lists are then sorted ascending (file order). The split depends on neither the scenario
   seed nor the run: every run evaluates on the same held-out set.
3. Standardise with the *training* split's statistics: ``mean = X_train.mean(0)``,
   ``std = X_train.std(0)`` (population std, ddof = 0; a constant feature gets std 1 so it maps to 0);
   both splits become ``(X - mean) / std``.

Arrays are parsed once per process, cached, and returned read-only (``writeable = False``): callers
share them; copy before modifying. Unitless: features are standardised, labels are class indices.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

DATA_DIR = Path(__file__).resolve().parent / "data"
SPLIT_SEED = 20240605
"""Seed of the train/test split permutation (fixed; independent of the scenario seed)."""
TEST_FRACTION = 0.2
"""Share of each class held out for evaluation."""

DATASETS = ("digits", "breast_cancer")
DEFAULT_DATASET = "digits"


@dataclass(frozen=True)
class Dataset:
    """A standardised, split classification dataset. All arrays are read-only."""

    name: str
    X_train: np.ndarray  # (n_train, n_features) float64, standardised
    y_train: np.ndarray  # (n_train,) int64 class index
    X_test: np.ndarray  # (n_test, n_features) float64, standardised with the train statistics
    y_test: np.ndarray  # (n_test,) int64
    n_classes: int
    class_names: tuple[str, ...]
    mean: np.ndarray  # (n_features,) train-split mean of the raw features
    std: np.ndarray  # (n_features,) train-split std of the raw features (1 where constant)
    train_index: np.ndarray  # rows of the raw file in the train split, ascending
    test_index: np.ndarray  # rows of the raw file in the test split, ascending

    @property
    def n_features(self) -> int:
        """Features per sample."""
        return int(self.X_train.shape[1])

    @property
    def n_train(self) -> int:
        """Training samples."""
        return int(self.X_train.shape[0])

    @property
    def n_test(self) -> int:
        """Test samples."""
        return int(self.X_test.shape[0])


def _read_digits() -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    with gzip.open(DATA_DIR / "digits.csv.gz", "rt", encoding="ascii") as f:
        raw = np.loadtxt(f, delimiter=",", dtype=np.float64)
    return raw[:, :-1], raw[:, -1].astype(np.int64), tuple(str(d) for d in range(10))


def _read_breast_cancer() -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    with gzip.open(DATA_DIR / "breast_cancer.csv.gz", "rt", encoding="ascii") as f:
        header = f.readline().strip().split(",")
        raw = np.loadtxt(f, delimiter=",", dtype=np.float64)
    n_samples, n_features = int(header[0]), int(header[1])
    if raw.shape != (n_samples, n_features + 1):
        raise ValueError(f"breast_cancer.csv.gz: header says {n_samples}x{n_features}, file has {raw.shape}")
    return raw[:, :-1], raw[:, -1].astype(np.int64), tuple(header[2:])


_READERS = {"digits": _read_digits, "breast_cancer": _read_breast_cancer}


def stratified_split(y: np.ndarray, test_fraction: float = TEST_FRACTION,
                     seed: int = SPLIT_SEED) -> tuple[np.ndarray, np.ndarray]:
    """(train, test) row indices, each ascending; per class, a seeded permutation's head is the test part."""
    rng = np.random.default_rng(seed)
    train: list[np.ndarray] = []
    test: list[np.ndarray] = []
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        n_test = int(np.floor(len(idx) * test_fraction + 0.5))
        test.append(idx[:n_test])
        train.append(idx[n_test:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


@cache
def load_dataset(name: str) -> Dataset:
    """The named bundled dataset (``digits`` or ``breast_cancer``), split and standardised; cached per process."""
    if name not in _READERS:
        raise ValueError(f"unknown dataset {name!r}; choose one of {', '.join(DATASETS)}")
    X, y, class_names = _READERS[name]()
    train_index, test_index = stratified_split(y)
    mean = X[train_index].mean(axis=0)
    std = X[train_index].std(axis=0)
    std = np.where(std > 0.0, std, 1.0)
    return Dataset(
        name=name,
        X_train=_frozen((X[train_index] - mean) / std),
        y_train=_frozen(y[train_index]),
        X_test=_frozen((X[test_index] - mean) / std),
        y_test=_frozen(y[test_index]),
        n_classes=len(class_names),
        class_names=class_names,
        mean=_frozen(mean),
        std=_frozen(std),
        train_index=_frozen(train_index),
        test_index=_frozen(test_index),
    )
