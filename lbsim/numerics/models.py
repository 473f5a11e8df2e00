"""Small numpy classifiers whose parameters are one flat float64 vector.

Engines copy, version, aggregate and corrupt weights and gradients as plain 1-D arrays, so every
model here exposes ``n_params`` and works on a flat ``w``:

* ``init(rng) -> w``: initial parameters.
* ``loss_and_grad(w, X, y) -> (loss, grad)``: the **mean** cross-entropy over the batch plus the L2
  penalty ``(l2 / 2) * ||weights||^2`` (biases are not penalised), and its gradient (same shape as
  ``w``). Because the penalty does not depend on the batch, the batch-weighted mean of per-worker
  results equals the result on the concatenated batch (the aggregation rule in ``docs/schemes.md``).
* ``predict(w, X) -> labels``; ``evaluate(w, X, y) -> (loss, accuracy)``: mean cross-entropy
  *without* the penalty, and the fraction of correct predictions.

Cross-entropy uses a numerically stable log-softmax (``z - max(z)`` then log-sum-exp). Everything is
vectorised over the batch (no Python loop over samples). Losses are in nats.

Flat layouts (row-major; ``W`` maps inputs to outputs, ``logits = X @ W + b``; a torch
``nn.Linear`` holds ``W.T`` as its ``weight``):

* :class:`SoftmaxRegression`: ``[W (n_features x n_classes), b (n_classes)]``.
* :class:`MLP`: ``[W1 (n_features x hidden), b1 (hidden), W2 (hidden x n_classes), b2 (n_classes)]``.
"""

from __future__ import annotations

import numpy as np

DEFAULT_L2 = 1e-4
"""L2 penalty coefficient on weights (not biases)."""
DEFAULT_HIDDEN = 64
"""Hidden units of the default MLP."""
DEFAULT_ACTIVATION = "relu"
MODELS = ("softmax", "mlp")
DEFAULT_MODEL = "softmax"
ACTIVATIONS = ("relu", "tanh")


def _cross_entropy(logits: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean cross-entropy of ``logits`` (B x C) against labels ``y`` and d(loss)/d(logits)."""
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    s = e.sum(axis=1, keepdims=True)
    rows = np.arange(len(y))
    loss = float(np.mean(np.log(s[:, 0]) - z[rows, y]))
    probs = e / s
    probs[rows, y] -= 1.0
    probs /= len(y)
    return loss, probs


def _mean_cross_entropy(logits: np.ndarray, y: np.ndarray) -> float:
    z = logits - logits.max(axis=1, keepdims=True)
    return float(np.mean(np.log(np.exp(z).sum(axis=1)) - z[np.arange(len(y)), y]))


def _check_batch(X: np.ndarray, y: np.ndarray) -> None:
    if len(y) == 0 or X.shape[0] != len(y):
        raise ValueError(f"need a non-empty batch with one label per row, got X {X.shape} and y {np.shape(y)}")


class _Classifier:
    """Prediction and held-out evaluation from a model's ``logits(w, X)``."""

    def logits(self, w: np.ndarray, X: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def predict(self, w: np.ndarray, X: np.ndarray) -> np.ndarray:
        return np.argmax(self.logits(w, X), axis=1)

    def evaluate(self, w: np.ndarray, X: np.ndarray, y: np.ndarray) -> tuple[float, float]:
        _check_batch(X, y)
        logits = self.logits(w, X)
        return _mean_cross_entropy(logits, y), float(np.mean(np.argmax(logits, axis=1) == y))


class SoftmaxRegression(_Classifier):
    """Multinomial logistic regression: ``p(y | x) = softmax(x @ W + b)``."""

    def __init__(self, n_features: int, n_classes: int, *, l2: float = DEFAULT_L2) -> None:
        if n_features <= 0 or n_classes < 2 or l2 < 0:
            raise ValueError("need n_features > 0, n_classes >= 2 and l2 >= 0")
        self.n_features, self.n_classes, self.l2 = int(n_features), int(n_classes), float(l2)
        self._nw = self.n_features * self.n_classes
        self.n_params = self._nw + self.n_classes

    def __repr__(self) -> str:
        return f"SoftmaxRegression(n_features={self.n_features}, n_classes={self.n_classes}, l2={self.l2})"

    def unpack(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Views ``(W, b)`` into the flat vector."""
        return w[: self._nw].reshape(self.n_features, self.n_classes), w[self._nw:]

    def init(self, rng: np.random.Generator) -> np.ndarray:
        """``W ~ N(0, 0.01^2)``, ``b = 0``."""
        w = np.zeros(self.n_params)
        w[: self._nw] = rng.normal(0.0, 0.01, self._nw)
        return w

    def logits(self, w: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Class scores ``X W + b`` of the samples ``X`` under the flat parameters ``w``."""
        W, b = self.unpack(w)
        return X @ W + b

    def loss_and_grad(self, w: np.ndarray, X: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
        """Mean cross-entropy (L2 penalty included) of the batch and its gradient in ``w``."""
        _check_batch(X, y)
        W, b = self.unpack(w)
        loss, dz = _cross_entropy(X @ W + b, y)
        g = np.empty(self.n_params)
        gW, gb = self.unpack(g)
        np.matmul(X.T, dz, out=gW)
        dz.sum(axis=0, out=gb)
        if self.l2:
            loss += 0.5 * self.l2 * float(W.ravel() @ W.ravel())
            gW += self.l2 * W
        return loss, g


class MLP(_Classifier):
    """One hidden layer: ``softmax(act(x @ W1 + b1) @ W2 + b2)``, ``act`` = ReLU (default) or tanh."""

    def __init__(self, n_features: int, hidden: int, n_classes: int, *, l2: float = DEFAULT_L2,
                 activation: str = DEFAULT_ACTIVATION) -> None:
        if n_features <= 0 or hidden <= 0 or n_classes < 2 or l2 < 0:
            raise ValueError("need n_features > 0, hidden > 0, n_classes >= 2 and l2 >= 0")
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; choose one of {', '.join(ACTIVATIONS)}")
        self.n_features, self.hidden, self.n_classes = int(n_features), int(hidden), int(n_classes)
        self.l2, self.activation = float(l2), activation
        f, h, c = self.n_features, self.hidden, self.n_classes
        self._bounds = np.cumsum([0, f * h, h, h * c, c])
        self.n_params = int(self._bounds[-1])

    def __repr__(self) -> str:
        return (f"MLP(n_features={self.n_features}, hidden={self.hidden}, n_classes={self.n_classes}, "
                f"l2={self.l2}, activation={self.activation!r})")

    def unpack(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Views ``(W1, b1, W2, b2)`` into the flat vector."""
        o = self._bounds
        return (w[o[0]:o[1]].reshape(self.n_features, self.hidden), w[o[1]:o[2]],
                w[o[2]:o[3]].reshape(self.hidden, self.n_classes), w[o[3]:o[4]])

    def init(self, rng: np.random.Generator) -> np.ndarray:
        """Weights ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` (torch ``nn.Linear``'s law), biases 0."""
        w = np.zeros(self.n_params)
        W1, _, W2, _ = self.unpack(w)
        W1[...] = rng.uniform(-1.0, 1.0, W1.shape) / np.sqrt(self.n_features)
        W2[...] = rng.uniform(-1.0, 1.0, W2.shape) / np.sqrt(self.hidden)
        return w

    def _hidden(self, w: np.ndarray, X: np.ndarray) -> np.ndarray:
        W1, b1, _, _ = self.unpack(w)
        a = X @ W1
        a += b1
        return np.maximum(a, 0.0, out=a) if self.activation == "relu" else np.tanh(a, out=a)

    def logits(self, w: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Class scores of the samples ``X`` under the flat parameters ``w``."""
        _, _, W2, b2 = self.unpack(w)
        return self._hidden(w, X) @ W2 + b2

    def loss_and_grad(self, w: np.ndarray, X: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
        """Mean cross-entropy (L2 penalty included) of the batch and its gradient in ``w`` (backpropagation)."""
        _check_batch(X, y)
        W1, _, W2, b2 = self.unpack(w)
        h = self._hidden(w, X)
        loss, dz = _cross_entropy(h @ W2 + b2, y)
        g = np.empty(self.n_params)
        gW1, gb1, gW2, gb2 = self.unpack(g)
        np.matmul(h.T, dz, out=gW2)
        dz.sum(axis=0, out=gb2)
        dh = dz @ W2.T
        if self.activation == "relu":
            dh *= h > 0.0
        else:
            dh *= 1.0 - h * h
        np.matmul(X.T, dh, out=gW1)
        dh.sum(axis=0, out=gb1)
        if self.l2:
            loss += 0.5 * self.l2 * (float(W1.ravel() @ W1.ravel()) + float(W2.ravel() @ W2.ravel()))
            gW1 += self.l2 * W1
            gW2 += self.l2 * W2
        return loss, g


Model = SoftmaxRegression | MLP


def make_model(name: str, n_features: int, n_classes: int, *, hidden: int = DEFAULT_HIDDEN,
               l2: float = DEFAULT_L2, activation: str = DEFAULT_ACTIVATION) -> Model:
    """The model called ``name`` (``softmax`` or ``mlp``); ``hidden``/``activation`` apply to the MLP only."""
    if name == "softmax":
        return SoftmaxRegression(n_features, n_classes, l2=l2)
    if name == "mlp":
        return MLP(n_features, hidden, n_classes, l2=l2, activation=activation)
    raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}")
