"""Deterministic mini-batch streams: which training samples each worker's next batch contains.

A stream walks a random permutation of its index set and hands out the next ``x`` indices on each
``draw(x)``; when the permutation is used up it draws a fresh one (a new epoch) and continues, so a
draw may straddle two epochs. Consecutive runs of ``len(indices)`` handed-out indices are each a
permutation of the set: every sample is seen exactly once per epoch.

* :class:`SharedStream` — one stream over the whole training set shared by all workers (the scenario
  places no data). Workers' draws are served in the order the engine makes them, interleaved; the
  once-per-epoch property holds for the stream as a whole, whatever the interleaving.
* :class:`ShardStream` — the same over one worker's shard (the scenario places data); it only ever
  returns indices of that shard.
* :func:`shard_indices` — cut ``0..n-1`` into disjoint shards by given fractions.

Indices refer to rows of ``Dataset.X_train``; counts are samples. All randomness comes from the
``numpy.random.Generator`` passed in (give each stream its own, e.g. ``lbsim.rng.stream(seed,
"numerics", "shard", i)``), so a run is reproducible from the scenario seed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class ShardStream:
    """Shuffled, epoch-by-epoch stream over a fixed set of sample indices."""

    def __init__(self, indices: Sequence[int] | np.ndarray, rng: np.random.Generator) -> None:
        idx = np.array(indices, dtype=np.int64)  # a private copy: the caller's array stays as it was
        if idx.ndim != 1 or len(idx) == 0:
            raise ValueError("a stream needs a non-empty 1-D index set")
        if len(np.unique(idx)) != len(idx):
            raise ValueError("stream indices must be distinct")
        self.indices = idx
        self.indices.setflags(write=False)
        self._rng = rng
        self._perm = rng.permutation(idx)
        self._pos = 0
        self.epoch = 0
        """Completed passes over the index set."""
        self.drawn = 0
        """Samples handed out so far."""

    def __len__(self) -> int:
        return len(self.indices)

    def draw(self, x: int) -> np.ndarray:
        """The next ``x`` sample indices (a new array, may span epochs; ``x = 0`` gives an empty array)."""
        if x < 0:
            raise ValueError("cannot draw a negative number of samples")
        out = np.empty(x, dtype=np.int64)
        filled = 0
        while filled < x:
            take = min(x - filled, len(self._perm) - self._pos)
            out[filled:filled + take] = self._perm[self._pos:self._pos + take]
            filled += take
            self._pos += take
            if self._pos == len(self._perm):
                self._perm = self._rng.permutation(self.indices)
                self._pos = 0
                self.epoch += 1
        self.drawn += x
        return out

    @property
    def epochs(self) -> float:
        """Passes over the index set so far, fractional (samples drawn / set size)."""
        return self.drawn / len(self.indices)


class SharedStream(ShardStream):
    """One shuffled stream over the whole training set ``0..n_train-1``, shared by all workers."""

    def __init__(self, n_train: int, rng: np.random.Generator) -> None:
        super().__init__(np.arange(n_train, dtype=np.int64), rng)


def shard_sizes(n: int, fractions: Sequence[float]) -> list[int]:
    """Integer shard sizes summing to ``n``, proportional to ``fractions`` (largest remainders; ties to the lower index)."""
    f = np.asarray(fractions, dtype=np.float64)
    if f.ndim != 1 or len(f) == 0 or np.any(f < 0) or not np.all(np.isfinite(f)) or f.sum() <= 0:
        raise ValueError("fractions must be a non-empty list of non-negative numbers with a positive sum")
    exact = n * f / f.sum()
    sizes = np.floor(exact).astype(np.int64)
    short = n - int(sizes.sum())
    order = np.argsort(-(exact - sizes), kind="stable")
    sizes[order[:short]] += 1
    return [int(s) for s in sizes]


def shard_indices(n: int, fractions: Sequence[float], rng: np.random.Generator) -> list[np.ndarray]:
    """Disjoint shards covering ``0..n-1``: a random permutation cut into sizes from :func:`shard_sizes`.

    Fractions are normalised to sum 1. Each shard's indices are sorted ascending (the stream shuffles).
    """
    sizes = shard_sizes(n, fractions)
    perm = rng.permutation(n)
    cuts = np.cumsum([0, *sizes])
    return [np.sort(perm[cuts[i]:cuts[i + 1]]) for i in range(len(sizes))]
