"""A round's samples handed to the workers: the one rule both simulator paths call.

:func:`plan_round` draws round r's samples (:meth:`lbsim.samples.model.SampleModel.round_samples`),
asks a :class:`~lbsim.schemes.base.LengthAware` scheme who computes which (checked: one owner per
sample, every worker's count within its memory cap), or hands them out in draw order by the
scheme's batches, and returns each worker's batch, work (reference-sample units), tokens and
memory tokens (:class:`~lbsim.samples.rounds.RoundPlan`). Update weights follow
:func:`update_weights`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lbsim.samples.model import SampleModel
from lbsim.samples.rounds import RoundPlan, contiguous_owner, per_worker
from lbsim.schemes.base import LengthAware


def plan_round(model: SampleModel, r: int, scheme: object, batches: Sequence[int], max_batch: Sequence[int]) -> RoundPlan:
    """Round ``r``'s samples given the scheme's ``batches`` (their sum is the global batch)."""
    n = len(batches)
    k = int(sum(batches))
    samples = model.round_samples(r, k)
    if isinstance(scheme, LengthAware):
        owner = np.asarray(scheme.assign_samples(samples), dtype=np.int64)
        if owner.shape != (k,) or (k and (owner.min() < 0 or owner.max() >= n)):
            raise RuntimeError(f"scheme's sample owners (shape {owner.shape}) are not one worker in 0..{n - 1} per sample")
        plan = per_worker(samples, owner, n)
        over = [i for i, (b, cap) in enumerate(zip(plan.batches, max_batch, strict=True)) if b > cap]
        if over:
            raise RuntimeError(f"scheme's assignment gives worker {over[0]} {plan.batches[over[0]]} samples, above its cap")
        return plan
    return per_worker(samples, contiguous_owner(tuple(batches)), n)


def update_weights(model: SampleModel | None, batches: Sequence[int], tokens: np.ndarray | None,
                   contributors: Sequence[int]) -> dict[int, float]:
    """Each contributor's weight in the update: its samples / all (per-sample mean) or its tokens / all
    (``gradient_mean: per_token``)."""
    if model is not None and model.per_token and tokens is not None:
        total_t = int(sum(int(tokens[w]) for w in contributors))
        return {w: int(tokens[w]) / total_t for w in contributors}
    total = sum(batches[w] for w in contributors)
    return {w: batches[w] / total for w in contributors}
