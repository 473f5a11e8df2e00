"""The per-rank batch sampler: an epoch's samples, each seen once, cut into LB-BSP's per-rank batches.

Every rank draws the same permutation of the dataset for epoch ``e`` (a generator seeded by
``(seed, e)``, so no communication). Step ``k`` takes the next ``B`` positions of the permutation;
with the decided batches ``b_0..b_{n-1}`` (``sum b_r = B``) rank ``r`` takes positions
``[p + o_r, p + o_r + b_r)``, ``o_r = b_0 + ... + b_{r-1}``: the ranks' batches partition the step's
``B`` samples, and the steps partition the epoch.

The epoch's last ``R = N mod B`` samples: with ``drop_last`` they are skipped; otherwise, if
``R >= n`` they form a last, shorter step split in proportion to the current batches, and if
``R < n`` (a step where some rank would get nothing) they join the step before, which is then
``B + R`` samples. Such a step's observation is not given to the scheme (its batches were not the
scheme's). The number of steps is therefore the same whatever the decisions: ``len(sampler)``.

With per-sample lengths (``LoadBalancer(lengths=...)``) step k takes the same positions of the
permutation, but the balancer partitions them by predicted cost (every rank computes the same
partition) and rank r takes the samples assigned to it, in permutation order.

The decision for a step is taken when the step's batch is asked for (collective on every rank),
so use it with ``DataLoader(..., batch_sampler=sampler, num_workers=0)`` or with worker processes
and ``prefetch_factor`` such that no batch is drawn before the previous step's backward
(see docs/library.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch


class BalancedBatchSampler:
    """Yields this rank's sample indices for each step of an epoch (call :meth:`set_epoch` like DistributedSampler)."""

    def __init__(self, balancer: Any, dataset_size: int, *, seed: int = 0, shuffle: bool = True,
                 drop_last: bool = False) -> None:
        if dataset_size < balancer.global_batch:
            raise ValueError(f"dataset of {dataset_size} samples is smaller than the global batch {balancer.global_batch}")
        self.lb = balancer
        self.n = int(dataset_size)
        self.seed = seed
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose shuffle to draw (every rank must call it with the same epoch)."""
        self.epoch = epoch

    def __len__(self) -> int:
        full, rem = divmod(self.n, self.lb.global_batch)
        return full + (1 if rem >= self.lb.world and not self.drop_last else 0)

    def permutation(self) -> torch.Tensor:
        """The epoch's sample order, identical on every rank: seeded by ``seed · 1,000,003 + epoch``
        (the identity when ``shuffle`` is off)."""
        if not self.shuffle:
            return torch.arange(self.n)
        g = torch.Generator()
        g.manual_seed(self.seed * 1_000_003 + self.epoch)
        return torch.randperm(self.n, generator=g)

    def __iter__(self) -> Iterator[list[int]]:
        perm = self.permutation().tolist()
        lb = self.lb
        steps = len(self)
        pos = 0
        if getattr(lb, "costs", None) is not None:
            yield from self._by_cost(perm, steps)
            return
        for k in range(steps):
            decided = lb.next_batches()
            left = self.n - pos
            if k == steps - 1 and not self.drop_last:  # the last step takes whatever the epoch has left
                batches = lb.split(left, decided)  # the decided batches themselves when left == their sum
            else:
                batches = decided
            assert sum(batches) <= left, (batches, left)
            lb.begin_step(batches)
            r = lb.rank
            start = pos + sum(batches[:r])
            pos += sum(batches)
            yield perm[start:start + batches[r]]

    def _by_cost(self, perm: list[int], steps: int) -> Iterator[list[int]]:
        """Cost balance: step k's samples are the same positions of the permutation as by count; the
        balancer partitions them by predicted cost (every rank alike) and this rank takes its own."""
        lb = self.lb
        pos = 0
        for k in range(steps):
            lb.next_batches()  # the decision (and the curves) for this step
            take = self.n - pos if k == steps - 1 and not self.drop_last else lb.global_batch
            indices = perm[pos:pos + take]
            owner, samples = lb.assign(indices)
            lb.begin_cost_step(owner, samples, full=take == lb.global_batch)
            pos += take
            yield [i for i, o in zip(indices, owner.tolist(), strict=True) if o == lb.rank]
