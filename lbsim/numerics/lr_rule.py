"""The learning-rate rule: how large a step an update takes for the samples it holds.

A scheme's update may hold very different work: a BSP update aggregates the whole global batch
X, an ASP/SSP/DSSP push holds one worker's batch x_i = X/n, a BSP update with backup workers the
first n−k batches. Applying ``lr × gradient`` per update whatever it holds (``per_update``, the
rule lbsim used first) lets a scheme that updates with fewer samples move n times further per
sample — a gap that is the rule's, not the scheme's.

``per_sample`` (the default) is the linear scaling rule (Goyal et al. 2017, "Accurate, Large
Minibatch SGD: Training ImageNet in 1 Hour", §2.1: "when the minibatch size is multiplied by k,
multiply the learning rate by k"): an update holding ``b`` samples takes the step of
``learning_rate`` scaled by ``b / X``::

    scale(b) = b / X           (per_sample)       scale(b) = 1      (per_update)
    w_new    = w − lr_t · scale(b) · ḡ_b           (ḡ_b: the mean gradient over the b samples)

so every sample moves the weights by ``lr_t / X`` times its gradient in every scheme, and
``learning_rate`` keeps its meaning as the step of one full global batch (BSP's update, scale 1).

Local-step schemes (WBSP) are unaffected: a worker's local step on x_i = X/n samples at ``lr`` is
added to the global model with share 1/n, i.e. ``lr / X`` per sample already.
"""

from __future__ import annotations

from typing import Literal

LRRule = Literal["per_sample", "per_update"]
LR_RULES: tuple[str, ...] = ("per_sample", "per_update")
DEFAULT_LR_RULE: LRRule = "per_sample"


def update_scale(rule: str, samples: int, global_batch: int) -> float:
    """The factor on the learning rate of an update holding ``samples`` (of a global batch)."""
    if rule == "per_update":
        return 1.0
    if rule != "per_sample":
        raise ValueError(f"unknown learning-rate rule {rule!r}; choose one of {', '.join(LR_RULES)}")
    if global_batch <= 0 or samples < 0:
        raise ValueError(f"need samples >= 0 and global_batch > 0, got {samples} and {global_batch}")
    return samples / global_batch
