"""Length bucketing — the common practice for variable-length samples (a baseline).

Rule: BSP's equal split of the global batch (X/n samples per worker), but the round's samples are
sorted by length and each worker takes a contiguous run of the sorted order, so a worker's samples
have similar lengths (Hugging Face Transformers' ``group_by_length`` / ``LengthGroupedSampler``;
fairseq's length-sorted batching, Ott et al., NAACL'19 demo). Under padding this removes most
padding; it does not balance the workers' compute: the worker given the longest bucket is the
round's straggler. Without a sample-cost model the samples are indistinguishable and the scheme is
BSP.

Our choice where practice varies: the buckets go to workers in increasing length order (worker 0
the shortest), fixed for the run; ties in length keep their draw order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from lbsim.samples.rounds import RoundSamples, contiguous_owner
from lbsim.schemes.base import RoundObservation, SchemeContext
from lbsim.schemes.bsp import check_even_split
from lbsim.schemes.registry import register_scheme
from lbsim.sizing.split import even_split


@dataclass(frozen=True)
class BucketingConfig:
    """Bucketing has no settings: equal batches, the round's samples sorted by length."""


@register_scheme("bucketing", BucketingConfig)
class Bucketing:
    """Equal batches of length-sorted samples: worker i takes the i-th bucket of the round."""

    name: ClassVar[str]
    driver: ClassVar[str] = "sync"
    needs_sample_cost: ClassVar[bool] = True  # without lengths the buckets are BSP's split

    def __init__(self, config: BucketingConfig, ctx: SchemeContext) -> None:
        self.required_gradients = ctx.workers
        self._batches = even_split(ctx.global_batch, ctx.workers)
        check_even_split(self._batches, ctx, "bucketing")

    def initial_batches(self) -> tuple[int, ...]:
        """The even split of the global batch."""
        return self._batches

    def next_batches(self, observation: RoundObservation) -> tuple[int, ...]:
        """The same even split every round (bucketing balances lengths, not speeds)."""
        return self._batches

    def assign_samples(self, samples: RoundSamples) -> np.ndarray:
        """Sorted by length (stable), then handed out in order: worker i gets the i-th run of ``X/n``."""
        order = np.argsort(samples.lengths, kind="stable")
        owner = np.empty(len(order), dtype=np.int64)
        owner[order] = contiguous_owner(self._batches)
        return owner

    def diagnostics(self) -> dict[str, object]:
        """None: bucketing decides nothing beyond its split."""
        return {}
