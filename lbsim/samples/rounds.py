"""One round's samples and what each worker got: the values passed between engines and schemes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class RoundSamples:
    """The samples of one global batch, in the order they were drawn.

    ``lengths[j]`` is sample j's length in tokens, ``units[j]`` its cost ``c(L_j) / c(L_ref)`` (1 for
    a sample of the reference length). ``padding``: a batch is padded to its longest sample, so a
    worker holding k samples whose longest costs u does ``k u`` units and holds ``k L_max`` tokens;
    else (packing) it does the sum of its samples' units and holds the sum of their lengths.
    ``max_tokens``: every worker's cap in (padded or packed) tokens, or None.
    """

    lengths: np.ndarray  # int64
    units: np.ndarray  # float64
    padding: bool = False
    max_tokens: int | None = None


@dataclass(frozen=True, eq=False)
class RoundPlan:
    """Who computes which sample of a round, and what that costs each worker (index = worker).

    ``owner[j]``: the worker given sample j. ``work`` is each worker's batch in units of the
    reference sample (its compute is ``t0 + work / samples_per_s``); ``tokens`` its real tokens
    (the per-token mean weighs by them); ``memory_tokens`` what its batch holds in memory (padded
    or packed).
    """

    batches: tuple[int, ...]
    owner: np.ndarray
    work: np.ndarray
    tokens: np.ndarray
    memory_tokens: np.ndarray


def contiguous_owner(batches: tuple[int, ...] | np.ndarray) -> np.ndarray:
    """Samples handed out in draw order: worker 0 the first ``b_0``, worker 1 the next ``b_1``, ..."""
    return np.repeat(np.arange(len(batches), dtype=np.int64), np.asarray(batches, dtype=np.int64))


def per_worker(samples: RoundSamples, owner: np.ndarray, n: int) -> RoundPlan:
    """Each worker's batch, work and tokens when sample j goes to worker ``owner[j]``."""
    counts = np.bincount(owner, minlength=n)
    tokens = np.bincount(owner, weights=samples.lengths, minlength=n).astype(np.int64)
    work: np.ndarray
    memory: np.ndarray
    if samples.padding:
        longest_u = np.zeros(n)
        longest_l = np.zeros(n, dtype=np.int64)
        np.maximum.at(longest_u, owner, samples.units)
        np.maximum.at(longest_l, owner, samples.lengths)
        work = counts * longest_u
        memory = counts * longest_l
    else:
        work = np.bincount(owner, weights=samples.units, minlength=n)
        memory = tokens
    return RoundPlan(tuple(int(c) for c in counts), owner, work, tokens, memory)
