"""SGD with optional momentum and a learning-rate schedule, counting the updates it applies.

One :class:`SGD` lives **where updates are applied**: on the parameter server (ASP, SSP, ElasticBSP:
one ``step`` per gradient it applies, stale or not) or in the synchronous aggregator (BSP, LB-BSP,
LOFT: one ``step`` per aggregated gradient). Its momentum buffer is therefore server-side state,
shared by all workers' contributions, as in a parameter server running ``torch.optim.SGD``.
(WBSP's local steps are local SGD: each worker would hold its own plain SGD for its local model.)

Update rule (``torch.optim.SGD`` with ``dampening = 0``, ``nesterov = False``, no weight decay; the
L2 penalty lives in the model's loss)::

    lr_t  = schedule(t)                  t = updates already applied (0 for the first)
    g'    = scale * g                    (scale: the learning-rate rule's factor for the samples the
                                          update holds, :mod:`lbsim.numerics.lr_rule`; 1 by default)
    buf   = momentum * buf + g'          (buf starts at g' on the first update; momentum 0: buf = g')
    w_new = w - lr_t * buf

Schedules (``t`` counts updates, unitless; ``lr`` is in parameter units per gradient unit):

* ``constant``: ``lr_t = lr``.
* ``step``: ``lr_t = lr * gamma ** (number of milestones <= t)`` — decay by ``gamma`` at each
  update count in ``milestones``.
* ``cosine``: ``lr_t = lr_min + (lr - lr_min) * (1 + cos(pi * min(t, total) / total)) / 2`` —
  anneals from ``lr`` to ``lr_min`` over ``total`` updates, then stays at ``lr_min``.

``step`` never modifies ``w`` in place; it returns a new array, so versions an engine keeps (the weights
a stale worker read) stay intact.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

DEFAULT_LR = 0.1
"""Learning rate that trains both bundled models on digits with batch 64 (see tests)."""
DEFAULT_MOMENTUM = 0.0
DEFAULT_SCHEDULE = "constant"
SCHEDULES = ("constant", "step", "cosine")


class LRSchedule:
    """Learning rate as a function of the number of updates already applied."""

    def __init__(self, lr: float = DEFAULT_LR, kind: str = DEFAULT_SCHEDULE, *, milestones: Sequence[int] = (),
                 gamma: float = 0.1, total: int | None = None, lr_min: float = 0.0) -> None:
        if lr <= 0:
            raise ValueError("lr must be > 0")
        if kind not in SCHEDULES:
            raise ValueError(f"unknown schedule {kind!r}; choose one of {', '.join(SCHEDULES)}")
        if kind == "step" and (not milestones or any(m <= 0 for m in milestones) or not 0 < gamma <= 1):
            raise ValueError("step schedule needs positive milestones and 0 < gamma <= 1")
        if kind == "cosine" and (total is None or total <= 0 or not 0 <= lr_min <= lr):
            raise ValueError("cosine schedule needs total > 0 and 0 <= lr_min <= lr")
        self.lr, self.kind, self.gamma, self.total, self.lr_min = float(lr), kind, float(gamma), total, float(lr_min)
        self.milestones = tuple(sorted(int(m) for m in milestones))

    def __call__(self, t: int) -> float:
        """The learning rate of update ``t``."""
        if self.kind == "step":
            return self.lr * self.gamma ** sum(1 for m in self.milestones if m <= t)
        if self.kind == "cosine":
            assert self.total is not None
            frac = min(t, self.total) / self.total
            return self.lr_min + (self.lr - self.lr_min) * 0.5 * (1.0 + math.cos(math.pi * frac))
        return self.lr


class SGD:
    """Stateful SGD: ``step(w, g)`` applies one update and returns the new weights."""

    def __init__(self, lr: float | LRSchedule = DEFAULT_LR, momentum: float = DEFAULT_MOMENTUM) -> None:
        if not 0 <= momentum < 1:
            raise ValueError("momentum must be in [0, 1)")
        self.schedule = lr if isinstance(lr, LRSchedule) else LRSchedule(lr)
        self.momentum = float(momentum)
        self.updates = 0
        self._buf: np.ndarray | None = None

    @property
    def lr(self) -> float:
        """The learning rate the next update will use."""
        return self.schedule(self.updates)

    def step(self, w: np.ndarray, g: np.ndarray, scale: float = 1.0) -> np.ndarray:
        """One update: ``buf = m buf + scale g``, ``w - lr_t buf``; returns the new weights."""
        if w.shape != g.shape:
            raise ValueError(f"weights {w.shape} and gradient {g.shape} differ in shape")
        lr = self.schedule(self.updates)
        if scale != 1.0:
            g = scale * g
        if self.momentum:
            self._buf = g.copy() if self._buf is None else self.momentum * self._buf + g
            d = self._buf
        else:
            d = g
        self.updates += 1
        return w - lr * d
