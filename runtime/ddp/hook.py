"""The batch-weighted DDP communication hook: ``g = sum_r (b_r / B) g_r``.

Plain DDP averages the ranks' gradients, ``g = (1/n) sum_r g_r``, which is the gradient of the
concatenated batch only when every rank has the same batch. With per-rank batches ``b_r``
(``B = sum_r b_r``) and each rank's loss the *mean* over its own ``b_r`` samples, the gradient of
the mean loss over all ``B`` samples is

    g = (1/B) sum_r sum_{j in rank r} grad l_j = sum_r (b_r / B) g_r.

The hook multiplies each bucket by ``b_r / B`` and all-reduces with SUM. It is registered with
``DistributedDataParallel.register_comm_hook``, so DDP keeps its buckets and launches each
bucket's all-reduce as soon as the bucket is ready, overlapping communication with the rest of
backward. (DDP does not divide by the world size when a hook is registered; the hook owns the
scaling.) Before scaling, the hook marks the rank's compute clock and applies an emulated
slowdown if one is set (:mod:`lbsim.runtime.ddp.inject`): both happen where the rank's own work for the
bucket ends.
"""

from typing import Any, Protocol

import torch
import torch.distributed as dist


class WeightedState(Protocol):
    """What the hook needs: this rank's weight ``b_r / B`` for the current step, and the group."""

    weight: float
    group: Any

    def on_bucket(self) -> None:
        """Called as each gradient bucket is ready, before it is all-reduced (timing, emulated slowdown)."""


def weighted_sum_hook(state: WeightedState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP comm hook: all-reduce (SUM) of ``bucket * b_r / B``; the result is the global-batch mean gradient."""
    state.on_bucket()
    tensor = bucket.buffer()
    tensor.mul_(state.weight)
    fut = dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=state.group, async_op=True).get_future()
    return fut.then(lambda f: f.value()[0])


def weighted_gradient(g: torch.Tensor, batch: int, total: int) -> torch.Tensor:
    """This rank's contribution ``g * b_r / B`` to the summed gradient (the hook's scaling, for flat vectors)."""
    return g * (batch / total)
