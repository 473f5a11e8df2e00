"""The numerics models in torch, on one flat parameter vector, and the data every rank draws from.

Same architecture, parameter layout, initialisation, loss and L2 penalty as
:mod:`lbsim.numerics.models` (softmax regression and a one-hidden-layer MLP): the flat vector is
``[W, b]`` or ``[W1, b1, W2, b2]`` row-major with ``logits = X @ W + b``, and the initial vector is
the numpy model's ``init`` on the same seeded stream, so both engines start from identical weights.
The loss is the batch's **mean** cross-entropy plus ``(l2 / 2) ||weights||^2`` (biases not
penalised); its gradient with respect to the flat vector comes out of autograd in one piece, which
is what the runtime scales and all-reduces.

Data: :func:`lbsim.numerics.load_dataset` (same split and standardisation as numerics mode) and one
:class:`~lbsim.numerics.SharedStream` per rank, all seeded alike: every rank draws the whole global
batch of X indices each round and keeps its own slice, ``[x_0 + ... + x_{r-1}, ... + x_r)``, so the
ranks' batches concatenate to the global batch and no data moves between processes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from lbsim.numerics import LRSchedule, load_dataset, make_model
from lbsim.numerics.lr_rule import update_scale
from lbsim.rng import stream

from .config import TrainingConfig

INIT_STREAM = ("numerics", "init")
"""Name of the random stream the initial weights are drawn from (``lbsim.rng.stream(seed, *INIT_STREAM)``)."""
DATA_STREAM = ("numerics", "shared")
"""Name of the random stream of the shared sample order."""


class FlatModel:
    """Softmax regression or MLP evaluated on a flat parameter tensor ``w``."""

    def __init__(self, cfg: TrainingConfig, n_features: int, n_classes: int) -> None:
        self.cfg = cfg
        self.reference = make_model(cfg.model, n_features, n_classes, hidden=cfg.hidden, l2=cfg.l2, activation=cfg.activation)
        f, c = n_features, n_classes
        if cfg.model == "softmax":
            self.shapes: tuple[tuple[int, ...], ...] = ((f, c), (c,))
        else:
            self.shapes = ((f, cfg.hidden), (cfg.hidden,), (cfg.hidden, c), (c,))
        self.n_params = int(sum(int(np.prod(s)) for s in self.shapes))
        assert self.n_params == self.reference.n_params

    def initial(self, seed: int, *, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """The numerics model's initial weights from the seed's :data:`INIT_STREAM` (the simulator's, exactly)."""
        w = self.reference.init(stream(seed, *INIT_STREAM))
        return torch.tensor(w, dtype=dtype, device=device)

    def unpack(self, w: torch.Tensor) -> list[torch.Tensor]:
        """Views of ``w`` as the layers' weights and biases, in :attr:`shapes` order (no copy)."""
        out, o = [], 0
        for s in self.shapes:
            k = int(np.prod(s))
            out.append(w[o:o + k].view(*s))
            o += k
        return out

    def logits(self, w: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        """``X W + b`` (softmax), or ``act(X W1 + b1) W2 + b2`` (MLP, ReLU or tanh)."""
        parts = self.unpack(w)
        if self.cfg.model == "softmax":
            W, b = parts
            return X @ W + b
        W1, b1, W2, b2 = parts
        h = X @ W1 + b1
        h = torch.relu(h) if self.cfg.activation == "relu" else torch.tanh(h)
        return h @ W2 + b2

    def penalty(self, w: torch.Tensor) -> torch.Tensor:
        """The L2 penalty ``l2/2 · Σ ||W||²`` over the weight matrices (not the biases)."""
        weights = self.unpack(w)[0::2]
        return 0.5 * self.cfg.l2 * sum((W * W).sum() for W in weights)  # type: ignore[return-value]

    def loss_and_grad(self, w: torch.Tensor, X: torch.Tensor, y: torch.Tensor) -> tuple[float, torch.Tensor]:
        """Mean cross-entropy + L2 penalty on the batch, and its gradient (a new flat tensor)."""
        w = w.detach().requires_grad_(True)
        loss = torch.nn.functional.cross_entropy(self.logits(w, X), y)
        if self.cfg.l2:
            loss = loss + self.penalty(w)
        (g,) = torch.autograd.grad(loss, w)
        return float(loss.detach()), g

    @torch.no_grad()
    def evaluate(self, w: torch.Tensor, X: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
        """Mean cross-entropy without the penalty, and accuracy."""
        logits = self.logits(w, X)
        loss = torch.nn.functional.cross_entropy(logits, y)
        return float(loss), float((logits.argmax(dim=1) == y).double().mean())


@dataclass
class TrainData:
    """The dataset's train and test splits as tensors on the rank's device, with its shape."""

    X_train: torch.Tensor
    y_train: torch.Tensor
    X_test: torch.Tensor
    y_test: torch.Tensor
    n_features: int
    n_classes: int


def load_data(cfg: TrainingConfig, *, dtype: torch.dtype, device: torch.device) -> TrainData:
    """The configured dataset (:func:`lbsim.numerics.load_dataset`, the simulator's) as tensors."""
    ds = load_dataset(cfg.dataset)
    return TrainData(
        X_train=torch.tensor(ds.X_train, dtype=dtype, device=device),
        y_train=torch.tensor(ds.y_train, dtype=torch.int64, device=device),
        X_test=torch.tensor(ds.X_test, dtype=dtype, device=device),
        y_test=torch.tensor(ds.y_test, dtype=torch.int64, device=device),
        n_features=ds.n_features,
        n_classes=ds.n_classes,
    )


class SGDState:
    """``lbsim.numerics.SGD``'s rule on a torch tensor: ``buf = m buf + scale g``; ``w -= lr_t buf``,
    ``scale`` the learning-rate rule's factor for the samples the update holds
    (:func:`lbsim.numerics.lr_rule.update_scale`, the same function the simulator's trainer uses)."""

    def __init__(self, cfg: TrainingConfig, global_batch: int) -> None:
        self.rule, self.global_batch = cfg.lr_rule, global_batch
        self.schedule = LRSchedule(cfg.lr, **cfg.schedule)
        self.momentum = cfg.momentum
        self.updates = 0
        self.buf: torch.Tensor | None = None

    def scale(self, samples: int) -> float:
        """The learning-rate rule's factor for an update holding ``samples`` samples."""
        return update_scale(self.rule, samples, self.global_batch)

    @torch.no_grad()
    def step(self, w: torch.Tensor, g: torch.Tensor, samples: int) -> None:
        """One update holding ``samples`` samples."""
        lr = self.schedule(self.updates)
        scale = self.scale(samples)
        if scale != 1.0:
            g = g * scale
        if self.momentum:
            self.buf = g.clone() if self.buf is None else self.buf.mul_(self.momentum).add_(g)
            g = self.buf
        w.sub_(g, alpha=lr)
        self.updates += 1
