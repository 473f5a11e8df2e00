"""One run's real model: the global weights, the data each worker draws, and the learning curve.

Engine-independent: an engine calls these methods at the moments its schedule says, and the
trainer computes real gradients on exactly the weight versions it is handed:

* synchronous schemes — :meth:`Trainer.sync_update` at each update: every contributing worker
  draws its batch (in worker order) and computes its mean gradient on the *current* weights; the
  gradients are combined by the scheme's rule (batch-weighted mean, or LOFT's robust rule) and
  one SGD step is taken, scaled by the learning-rate rule for the samples it holds
  (:mod:`lbsim.numerics.lr_rule`: ``samples / global_batch`` by default, 1 under ``per_update``);
* parameter-server schemes — a worker keeps the weights it pulled (:meth:`Trainer.weights`; the
  arrays are never modified in place, so a reference is a snapshot), draws its batch when it
  starts computing (:meth:`Trainer.draw`), and its gradient on the pulled (possibly stale)
  weights is applied when the server applies the push (:meth:`Trainer.push`), scaled by the rule
  for the push's batch;
* local-step schemes (WBSP) — :meth:`Trainer.local_step` takes an SGD step on a worker's own
  model copy; :meth:`Trainer.add_delta` adds a pushed delta to the global model.

Samples: a worker draws from one shuffled stream over the whole training set shared by all
workers, unless the scenario places data (``data:``): then its local samples come from its own
shard and its remote ones from the shared stream. Byzantine workers replace their gradient (or
delta) by a corrupted one. Evaluation every ``eval_every`` updates on the held-out split.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from lbsim.aggregation import aggregate
from lbsim.numerics.byzantine import corrupt
from lbsim.numerics.datasets import load_dataset
from lbsim.numerics.lr_rule import update_scale
from lbsim.numerics.models import make_model
from lbsim.numerics.optim import SGD, LRSchedule
from lbsim.numerics.sampling import ShardStream, SharedStream, shard_indices
from lbsim.numerics.tracker import Tracker
from lbsim.rng import stream


class Trainer:
    """The run's real model and data (module docstring): the engines call it at their updates and pushes."""

    def __init__(
        self,
        cfg: Any,  # lbsim.scenario.numerics_config.NumericsConfig
        *,
        seed: int,
        workers: int,
        byzantine: Sequence[int] = (),
        aggregation: tuple[str, int] = ("mean", 0),
        local_fractions: Sequence[float] | None = None,
        global_batch: int | None = None,
    ) -> None:
        self.cfg = cfg
        self.global_batch = global_batch  # None: every update steps the full learning rate
        self.data = load_dataset(cfg.dataset)
        self.model = make_model(cfg.model, self.data.n_features, self.data.n_classes, hidden=cfg.hidden, l2=cfg.l2)
        self.w = self.model.init(stream(seed, "numerics", "init"))
        schedule = LRSchedule(cfg.learning_rate, cfg.schedule, milestones=cfg.milestones, gamma=cfg.gamma)
        self.opt = SGD(schedule, cfg.momentum)
        self.rule, self.f = aggregation
        self.shared = SharedStream(self.data.n_train, stream(seed, "numerics", "shared"))
        self.shards: list[ShardStream] | None = None
        if local_fractions is not None and any(f > 0 for f in local_fractions):
            rest = max(0.0, 1.0 - math.fsum(local_fractions))
            parts = shard_indices(self.data.n_train, [*local_fractions, rest], stream(seed, "numerics", "shards"))
            self.shards = [ShardStream(p, stream(seed, "numerics", "shard", i)) if len(p) else None  # type: ignore[misc]
                           for i, p in enumerate(parts[:workers])]
        self.byzantine = frozenset(byzantine)
        self._byz_rng = stream(seed, "numerics", "byzantine")
        self.updates = 0
        self.tracker = Tracker(lambda w: self.model.evaluate(w, self.data.X_test, self.data.y_test),
                               every=cfg.eval_every, target_accuracy=cfg.target_accuracy)
        self.tracker.record(0, 0.0, self.w)

    # -- data and gradients ---------------------------------------------------------------------
    def draw(self, worker: int, batch: int, local: int | None = None) -> np.ndarray:
        """The sample indices of ``worker``'s next batch (``local`` of them from its own shard)."""
        shard = self.shards[worker] if self.shards is not None and worker < len(self.shards) else None
        if shard is None or not local:
            return self.shared.draw(batch)
        return np.concatenate([shard.draw(local), self.shared.draw(batch - local)])

    def gradient(self, worker: int, w: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """Worker's mean gradient on weights ``w`` over samples ``idx`` (corrupted if Byzantine)."""
        _loss, g = self.model.loss_and_grad(w, self.data.X_train[idx], self.data.y_train[idx])
        return self._maybe_corrupt(worker, g)

    def _maybe_corrupt(self, worker: int, v: np.ndarray) -> np.ndarray:
        if worker not in self.byzantine:
            return v
        byz = self.cfg.byzantine
        return corrupt(v, byz.attack, self._byz_rng, scale=byz.scale)

    def weights(self) -> np.ndarray:
        """The current global weights (a snapshot: never modified in place)."""
        return self.w

    def scale(self, samples: int) -> float:
        """The learning-rate rule's factor for an update holding ``samples`` (lbsim.numerics.lr_rule)."""
        if self.global_batch is None:
            return 1.0
        return update_scale(self.cfg.lr_rule, samples, self.global_batch)

    # -- updates --------------------------------------------------------------------------------
    def _applied(self, time_s: float) -> None:
        self.updates += 1
        self.tracker.observe(self.updates, time_s, self.w)

    def sync_update(self, contributions: Sequence[tuple[int, int, int | None]], time_s: float) -> None:
        """One synchronous update from ``(worker, batch, local samples)`` of every contributor."""
        order = sorted(contributions)
        idx = [self.draw(w, b, loc) for w, b, loc in order]
        grads = np.stack([self.gradient(w, self.w, i) for (w, _b, _l), i in zip(order, idx, strict=True)])
        g = aggregate(self.rule, grads, [b for _w, b, _l in order], self.f)
        self.w = self.opt.step(self.w, g, self.scale(sum(b for _w, b, _l in order)))
        self._applied(time_s)

    def push(self, worker: int, w_read: np.ndarray, idx: np.ndarray, time_s: float) -> None:
        """Apply ``worker``'s gradient, computed on the weights it read, to the global model."""
        self.w = self.opt.step(self.w, self.gradient(worker, w_read, idx), self.scale(len(idx)))
        self._applied(time_s)

    def local_step(self, worker: int, w_local: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """One plain SGD step on a worker's own model copy (learning rate of the current update)."""
        _loss, g = self.model.loss_and_grad(w_local, self.data.X_train[idx], self.data.y_train[idx])
        return w_local - self.opt.lr * g

    def add_delta(self, worker: int, delta: np.ndarray, share: float) -> None:
        """Add ``share`` x a worker's pushed model delta to the global weights (no update counted)."""
        self.w = self.w + share * self._maybe_corrupt(worker, delta)

    def close_round(self, time_s: float) -> None:
        """A local-step round closed: it counts as one global update."""
        self.opt.updates += 1  # the schedule advances with global updates
        self._applied(time_s)

    # -- results --------------------------------------------------------------------------------
    def finish(self, time_s: float) -> dict[str, Any]:
        """Evaluate the final weights at ``time_s``; the numerics part of the summary."""
        self.tracker.finish(self.updates, time_s, self.w)
        return {k: (float(f"{v:.12g}") if isinstance(v, float) else v) for k, v in self.tracker.summary().items()}

    def curve(self) -> list[dict[str, float]]:
        """The learning curve: one row per evaluation."""
        return self.tracker.curve()
