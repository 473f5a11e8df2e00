"""Numerics mode's engine-independent core: real data, small numpy models, SGD, batch streams.

In numerics mode an engine trains a real small model inside the simulation: each worker's gradient is
computed on the exact weight version the schedule gives it and on the samples it draws, so time to
accuracy is measured rather than assumed (``docs/schemes.md``, "Convergence semantics"). This package
holds the pieces the engines share; it imports numpy and the standard library only. Combining
worker gradients (batch-weighted mean, robust rules) is :mod:`lbsim.aggregation`.

Modules (one concept each):

* :mod:`~lbsim.numerics.datasets` — bundled ``digits`` / ``breast_cancer``, fixed stratified split,
  train-only standardisation.
* :mod:`~lbsim.numerics.models` — :class:`SoftmaxRegression`, :class:`MLP`; parameters and gradients
  as one flat float64 vector.
* :mod:`~lbsim.numerics.optim` — :class:`SGD` with momentum and a learning-rate schedule.
* :mod:`~lbsim.numerics.lr_rule` — :func:`update_scale`: the step an update takes for the samples it
  holds (``per_sample``, the linear scaling rule, by default; ``per_update``).
* :mod:`~lbsim.numerics.sampling` — :class:`SharedStream`, :class:`ShardStream`, :func:`shard_indices`.
* :mod:`~lbsim.numerics.byzantine` — :func:`corrupt` (sign_flip, gaussian, scaled).
* :mod:`~lbsim.numerics.tracker` — :class:`Tracker`: loss/accuracy curve and time-to-target.

Defaults (tuned on digits with batch 64): dataset ``digits``, model ``softmax``, learning rate 0.1, no
momentum, constant schedule, L2 1e-4, MLP with 64 ReLU hidden units, evaluation every 10 updates,
target accuracy 0.93.
"""

from lbsim.numerics.byzantine import ATTACKS, corrupt
from lbsim.numerics.datasets import DATASETS, Dataset, load_dataset
from lbsim.numerics.lr_rule import LR_RULES, update_scale
from lbsim.numerics.models import MLP, MODELS, SoftmaxRegression, make_model
from lbsim.numerics.optim import SGD, LRSchedule
from lbsim.numerics.sampling import ShardStream, SharedStream, shard_indices, shard_sizes
from lbsim.numerics.tracker import Evaluation, Tracker

__all__ = [
    "ATTACKS", "DATASETS", "LR_RULES", "MLP", "MODELS", "SGD", "Dataset", "Evaluation", "LRSchedule", "ShardStream",
    "SharedStream", "SoftmaxRegression", "Tracker", "corrupt", "load_dataset", "make_model", "shard_indices",
    "shard_sizes", "update_scale",
]
