"""The ``numerics:`` section: train a real small model inside the simulation (off by default).

``--set numerics.enabled=true`` turns it on for any scenario with the defaults below (digits,
softmax regression, SGD 0.1, evaluation every 10 updates, target accuracy 0.93 — tuned in
:mod:`lbsim.numerics`). Throughput-only mode (the default) costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from lbsim.errors import InputError
from lbsim.fields import param
from lbsim.limits import MAX_HISTORY
from lbsim.workers import Workers


@dataclass(frozen=True)
class ByzantineConfig:
    workers: Workers = param(help="'all' or a list of worker indices / instance types that send corrupted gradients", nonempty=True)
    attack: Literal["sign_flip", "gaussian", "scaled"] = param("sign_flip", "sign_flip (-scale x g), gaussian (N(0, scale^2) noise instead of g) or scaled (scale x g)")
    scale: float | None = param(None, "attack strength (null: sign_flip 1, gaussian 1, scaled 10)", ge=0)


@dataclass(frozen=True)
class NumericsConfig:
    enabled: bool = param(False, "train a real model in the simulation (time-to-accuracy); off = throughput only")
    dataset: Literal["digits", "breast_cancer"] = param("digits", "bundled dataset (UCI, shipped with lbsim)")
    model: Literal["softmax", "mlp"] = param("softmax", "softmax regression or a one-hidden-layer MLP (numpy)")
    hidden: int = param(64, "mlp: hidden units", gt=0, le=MAX_HISTORY)
    learning_rate: float = param(0.1, "SGD learning rate of an update holding the whole global batch (see lr_rule)", gt=0)
    lr_rule: Literal["per_sample", "per_update"] = param("per_sample", "per_sample: an update's step scales with its samples / global_batch (linear scaling rule, the same step per sample in every scheme); per_update: every update steps learning_rate, whatever it holds")
    momentum: float = param(0.0, "SGD momentum, kept where updates are applied (server or aggregator)", ge=0)
    schedule: Literal["constant", "step", "cosine"] = param("constant", "learning-rate schedule over global updates")
    milestones: tuple[int, ...] = param((), "step: updates at which the rate is multiplied by gamma")
    gamma: float = param(0.1, "step: factor at each milestone", gt=0, le=1)
    l2: float = param(0.0001, "L2 penalty on the weights", ge=0)
    eval_every: int = param(10, "evaluate the global model on the held-out split every this many updates", gt=0)
    target_accuracy: float = param(0.93, "held-out accuracy that counts as reached (time_to_target_s)", gt=0, le=1)
    byzantine: ByzantineConfig | None = param(None, "workers that send corrupted gradients (null: none)")

    def check(self) -> None:
        """Momentum below 1; milestones increasing positive update counts."""
        if self.momentum >= 1:
            raise InputError("momentum", f"must be < 1, got {self.momentum}")
        if list(self.milestones) != sorted(set(self.milestones)) or any(m <= 0 for m in self.milestones):
            raise InputError("milestones", "must be increasing positive update counts")
