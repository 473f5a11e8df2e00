"""NARX speed predictor for LB-BSP's CPU variant: one small net per worker, trained online.

LB-BSP (Chen et al., SoCC'20) sizes each worker's batch from a prediction of its next sample
speed; on CPU clusters the paper predicts with NARX, a nonlinear autoregressive model with
exogenous inputs::

    v̂^k = F( v^{k-1}, …, v^{k-d_v} ;  c^k, c^{k-1}, …, c^{k-d_u} ;  m^k, …, m^{k-d_u} )

``v`` = measured sample speed of past iterations (samples / compute second), ``c`` / ``m`` = CPU /
memory availability readings in (0, 1] taken at each iteration's start (``c^k``, ``m^k``: the
current readings, taken just before iteration k starts). The paper gives the inputs only; the
delays, the net, its training and every constant below are **our choices**, not the paper's
(see docs/reference/schemes-research.md §1.4).

The model (our choice)
----------------------
* **Features**, all of order 1 whatever the speed unit: lagged speeds as normalised log-speeds
  ``s = (ln v - mu) / sigma`` with ``mu`` / ``sigma`` the mean / standard deviation of the log
  speeds currently in the replay window (``sigma`` floored at ``SIGMA_FLOOR``); readings as
  ``ln(clip(r, READING_FLOOR, 1))``; a constant 1 (bias). Working in log speed makes the model
  scale-free: multiplying every speed by a constant shifts ``mu`` and leaves every feature,
  target and weight unchanged, so 1 and 100,000 samples/s train identically. The log of a
  reading is used because speed is, to first order, proportional to the CPU share a worker gets:
  ``ln v = ln c + const`` is then linear in the features.
* **Target**: the normalised log of the next speed, ``(ln v^k - mu) / sigma``; the prediction is
  ``exp(mu + sigma * y)``, hence always > 0.
* **Net**: one hidden layer of ``hidden`` tanh units (10 by default: the MATLAB ``narxnet``
  default) plus a linear skip path from the features to the output,
  ``y = w2 . tanh(W1 x) + L . x`` (biases folded into the constant feature). The skip path is
  initialised to the identity on the newest lagged speed (``L = e_1``) and ``w2`` near zero, so
  an untrained net predicts the last speed — the same answer as during warm-up, so the handover
  is smooth — and training learns corrections to it (linear effects such as ``v ∝ c`` quickly
  through ``L``, nonlinear ones through the hidden layer). ``W1`` starts ~ N(0, 1/n_in).
* **Training**: squared error of the normalised target (summed over a minibatch: Adam's step
  does not depend on a constant factor of the loss, so this is the mean squared error), plain
  numpy backprop, Adam (beta1 = 0.9, beta2 = 0.999, eps = 1e-8, step ``learning_rate``), online
  on the run's own history. Every ``observe()`` that completes a training example stores it in
  a replay window of the last ``window`` examples and then takes ``epochs_per_update`` Adam steps, each on a minibatch of ``MINIBATCH`` examples
  drawn uniformly (with replacement) from the window. So ``epochs_per_update`` counts gradient
  steps per observation, not full passes: with the defaults (5 x 32 over 200) about 0.8 of a pass
  over the window per observation, each example being seen ~160 times while it stays in the
  window. Minibatches rather than full passes keep ``observe()`` cheap (numpy call overhead, not
  arithmetic, dominates at this size): about 0.15 ms per call with the defaults on one 2020s
  x86 core. Weights, optimiser state and the replay window are float32 (halves the cost of
  ``tanh``, the one transcendental; ample precision for order-1 features); ``predict()``
  evaluates in float64.
  Training starts with the first complete example (``max(d_v, d_u) + 1`` observations), i.e.
  during warm-up too, so the net has trained for a while when it takes over.
* **Warm-up**: until ``warmup`` observations have been made (and a full history of lags exists),
  ``predict()`` returns the last observed speed exactly. Before any observation it returns NaN
  (like the ``last`` predictor; the scheme only asks after at least one observation).
* **Divergence guard**: a prediction that is not finite or lies outside
  ``[min observed / GUARD_FACTOR, GUARD_FACTOR x max observed]`` (over the whole run) is replaced
  by the last observed speed.
* **Determinism**: the generator passed in (or ``default_rng(params.seed)`` when none is) draws
  the initial weights and the minibatch indices, nothing else; the same generator state and
  observations give bit-identical predictions.

Constants, and why
------------------
``SIGMA_FLOOR = 0.02``: a worker whose log speed varies by less than 2 % is treated as varying by
2 %, so near-constant speeds do not blow up the features (variation below that hardly moves a
batch split). ``READING_FLOOR = 0.01``: readings are clipped to [0.01, 1] before the log (1 % of a
CPU left is as good as none; keeps ``ln`` finite). ``MINIBATCH = 32``: a usual minibatch size,
large enough for a stable gradient, small enough that tanh over it stays cheap.
``GUARD_FACTOR = 4``: a prediction 4x outside everything seen so far is taken as divergence.
``RANDOM_BLOCK = 4096``: minibatch indices come from blocks of uniforms drawn at once (one
generator call per ~25 observations instead of one per step).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

SIGMA_FLOOR = 0.02
READING_FLOOR = 0.01
MINIBATCH = 32
GUARD_FACTOR = 4.0
RANDOM_BLOCK = 4096
_LOG_GUARD = math.log(GUARD_FACTOR)
_BETA1, _BETA2, _EPS = 0.9, 0.999, 1e-8
_BETAS = np.array([[_BETA1], [_BETA2]], dtype=np.float32)
_ONE_MINUS_BETAS = 1.0 - _BETAS


@dataclass(frozen=True)
class NarxParams:
    """The NARX net's shape and training (module docstring): ``d_v`` lagged log-speeds and ``d_u + 1``
    readings of each input feed ``y = w2 · tanh(W1 x) + L · x``, trained online by Adam, a few
    minibatch steps per observation drawn from a replay window of recent examples."""

    speed_delays: int = 3  # d_v: past speeds fed to the net
    input_delays: int = 3  # d_u: past CPU/memory readings fed besides the current one
    hidden: int = 10  # tanh units in the hidden layer
    warmup: int = 20  # observations before the net is used; until then predict() returns the last speed
    learning_rate: float = 0.01  # Adam step size
    epochs_per_update: int = 5  # Adam steps per observation, each on a MINIBATCH drawn from the window
    window: int = 200  # replay window: most recent training examples kept
    seed: int = 0  # seeds the generator only when NarxPredictor is given none

    def __post_init__(self) -> None:
        if self.speed_delays < 1:
            raise ValueError(f"speed_delays must be >= 1, got {self.speed_delays}")
        if self.input_delays < 0:
            raise ValueError(f"input_delays must be >= 0, got {self.input_delays}")
        if self.hidden < 1:
            raise ValueError(f"hidden must be >= 1, got {self.hidden}")
        if self.warmup < 1:
            raise ValueError(f"warmup must be >= 1, got {self.warmup}")
        if not (self.learning_rate > 0 and math.isfinite(self.learning_rate)):
            raise ValueError(f"learning_rate must be finite and > 0, got {self.learning_rate}")
        if self.epochs_per_update < 0:
            raise ValueError(f"epochs_per_update must be >= 0, got {self.epochs_per_update}")
        if self.window < 1:
            raise ValueError(f"window must be >= 1, got {self.window}")


def _reading(r: float) -> float:
    r = float(r)
    if r != r:
        raise ValueError("a CPU/memory reading is NaN")
    return math.log(min(1.0, max(READING_FLOOR, r)))


class NarxPredictor:
    """One worker's NARX speed predictor (see the module docstring for the model)."""

    def __init__(self, params: NarxParams, rng: np.random.Generator | None = None) -> None:
        p = params
        self.params = p
        self._rng = rng if rng is not None else np.random.default_rng(p.seed)
        dv, du, h = p.speed_delays, p.input_delays, p.hidden
        self._dv, self._du = dv, du
        n = dv + 2 * (du + 1) + 1  # features incl. the constant 1 (last column)
        self._n = n
        # All parameters in one flat vector (one Adam update per step). A = [W1; L] stacks the
        # hidden weights over the skip weights so one matmul serves both paths; w2 follows.
        a = (h + 1) * n
        self._theta = np.zeros(a + h, dtype=np.float32)
        self._A = self._theta[:a].reshape(h + 1, n)
        self._W1 = self._A[:h]
        self._L = self._A[h]
        self._w2 = self._theta[a:]
        # Adam state stacked as (2, P): row 0 the gradient / first moment, row 1 the squared
        # gradient / second moment, so both moments update in three array operations.
        self._G = np.zeros((2, self._theta.size), dtype=np.float32)
        self._grad = self._G[0]
        self._gA = self._grad[:a].reshape(h + 1, n)
        self._gw2 = self._grad[a:]
        self._M = np.zeros_like(self._G)
        self._tmp = np.zeros_like(self._theta)
        self._D = np.zeros((h + 1, MINIBATCH), dtype=np.float32)  # backprop buffer, (units, examples): d(loss)/dZ
        self._w2col = self._w2[:, None]
        self._colscale = np.ones(n, dtype=np.float32)
        self._colshift = np.zeros(n, dtype=np.float32)
        self._W1[:] = self._rng.normal(0.0, 1.0 / math.sqrt(n), (h, n))
        self._w2[:] = self._rng.normal(0.0, 0.1 / math.sqrt(h), h)
        self._L[0] = 1.0  # identity on the newest lagged speed: untrained net = last value
        self._steps = 0
        # Replay window (ring buffer) of raw examples: features with lagged log speeds (relative
        # to the first observation's log speed, to keep magnitudes small), target log speed.
        self._X = np.zeros((p.window, n), dtype=np.float32)
        self._X[:, -1] = 1.0
        self._T = np.zeros(p.window, dtype=np.float32)
        self._count = 0  # examples in the window
        self._pos = 0  # next slot to write
        self._sum = 0.0  # running sums of the window's targets (for mu, sigma)
        self._sumsq = 0.0
        self._uniform = np.empty(0)
        self._upos = 0
        # Histories: newest first.
        self._speeds: deque[float] = deque(maxlen=dv)  # log speeds relative to _ref
        self._cpu: deque[float] = deque(maxlen=du)  # ln readings of past iterations
        self._mem: deque[float] = deque(maxlen=du)
        self._ref = 0.0
        self._observed = 0
        self._last = float("nan")
        self._lo = math.inf
        self._hi = 0.0
        self._x = np.zeros(n)  # scratch feature vector for predict()
        self._x[-1] = 1.0

    # -- public -----------------------------------------------------------------------------

    @property
    def trained(self) -> bool:
        """Whether predict() answers with the net (warm-up over and a full lag history)."""
        return self._observed >= self.params.warmup and self._count > 0

    def observe(self, speed: float, cpu: float, mem: float) -> None:
        """Record the speed measured over the iteration that just ended, and the cpu/mem readings
        taken at that iteration's start. Builds a training example once enough history exists and trains online."""
        speed = float(speed)
        if not (speed > 0 and math.isfinite(speed)):
            raise ValueError(f"speed must be finite and > 0, got {speed}")
        c, m = _reading(cpu), _reading(mem)
        if self._observed == 0:
            self._ref = math.log(speed)
        ls = math.log(speed) - self._ref
        if len(self._speeds) == self._dv and len(self._cpu) == self._du:
            row = self._X[self._pos]
            self._fill(row, c, m)
            if self._count == self.params.window:
                old = float(self._T[self._pos])
                self._sum -= old
                self._sumsq -= old * old
            else:
                self._count += 1
            self._T[self._pos] = ls
            stored = float(self._T[self._pos])  # the float32 value, so evicting it later cancels exactly
            self._sum += stored
            self._sumsq += stored * stored
            self._pos = (self._pos + 1) % self.params.window
            if self.params.epochs_per_update > 0:
                self._train(self.params.epochs_per_update)
        self._speeds.appendleft(ls)
        if self._du > 0:
            self._cpu.appendleft(c)
            self._mem.appendleft(m)
        self._observed += 1
        self._last = speed
        self._lo = min(self._lo, speed)
        self._hi = max(self._hi, speed)

    def predict(self, cpu_now: float, mem_now: float) -> float:
        """Predicted sample speed of the next iteration given the current readings (> 0 always).

        The last observed speed during warm-up (or when the net's answer fails the divergence
        guard); NaN before any observation."""
        if not self.trained:
            return self._last
        x = self._x
        self._fill(x, _reading(cpu_now), _reading(mem_now))
        mu, inv_sd, sd = self._norm()
        x[: self._dv] -= mu
        x[: self._dv] *= inv_sd
        y = float(self._w2 @ np.tanh(self._W1 @ x)) + float(self._L @ x)
        z = self._ref + mu + sd * y
        if not (math.log(self._lo) - _LOG_GUARD <= z <= math.log(self._hi) + _LOG_GUARD):
            return self._last  # also catches NaN
        try:
            speed = math.exp(z)
        except OverflowError:
            return self._last
        return speed if speed > 0.0 else self._last

    # -- internals ----------------------------------------------------------------------------

    def _fill(self, row: np.ndarray, c_now: float, m_now: float) -> None:
        """Write the features for predicting the next speed: lags, readings (newest first), 1."""
        dv, du = self._dv, self._du
        row[:dv] = self._speeds
        row[dv] = c_now
        row[dv + du + 1] = m_now
        if du > 0:
            row[dv + 1 : dv + du + 1] = self._cpu
            row[dv + du + 2 : dv + 2 * du + 2] = self._mem

    def _norm(self) -> tuple[float, float, float]:
        n = self._count
        mu = self._sum / n
        var = max(self._sumsq / n - mu * mu, 0.0)
        sd = max(math.sqrt(var), SIGMA_FLOOR)
        return mu, 1.0 / sd, sd

    def _indices(self, k: int) -> np.ndarray:
        if self._upos + k > self._uniform.size:
            self._uniform = self._rng.random(max(RANDOM_BLOCK, k))
            self._upos = 0
        u = self._uniform[self._upos : self._upos + k]
        self._upos += k
        return (u * self._count).astype(np.intp)

    def _train(self, steps: int) -> None:
        """``steps`` Adam steps, each on a fresh minibatch drawn from the replay window."""
        B, dv = MINIBATCH, self._dv
        mu, inv_sd, _ = self._norm()
        idx = self._indices(steps * B)
        X = self._X.take(idx, axis=0)
        T = self._T.take(idx)
        self._colscale[:dv] = inv_sd  # normalise the lagged log speeds (contiguous ops)
        self._colshift[:dv] = -mu * inv_sd
        X *= self._colscale
        X += self._colshift
        T -= mu
        T *= inv_sd
        h = self.params.hidden
        A, w2, w2col, gA, gw2, D = self._A, self._w2, self._w2col, self._gA, self._gw2, self._D
        Dh, De = D[:h], D[h]
        G, M, tmp, theta = self._G, self._M, self._tmp, self._theta
        g, g2, m, v = G[0], G[1], M[0], M[1]
        lr = self.params.learning_rate
        t = self._steps
        # Layout (units, examples) throughout: every elementwise operand is contiguous. The
        # gradient is that of the summed (not mean) squared error over the minibatch: Adam's
        # step does not depend on a constant factor of the loss.
        for Xb, Tb in zip(X.reshape(steps, B, -1), T.reshape(steps, B), strict=True):
            Z = A @ Xb.T  # (h + 1, B): hidden pre-activations, then the skip path's output
            hid = Z[:h]
            np.tanh(hid, out=hid)
            e = w2 @ hid
            e += Z[h]
            e -= Tb  # d(loss)/dy per example, loss = sum of squared errors / 2
            np.dot(hid, e, out=gw2)
            np.multiply(hid, hid, out=Dh)
            np.subtract(1.0, Dh, out=Dh)
            Dh *= w2col
            Dh *= e  # d(loss)/d(hidden pre-activation)
            De[:] = e  # d(loss)/d(skip output)
            np.dot(D, Xb, out=gA)
            # Adam
            t += 1
            np.multiply(g, g, out=g2)
            M *= _BETAS
            G *= _ONE_MINUS_BETAS
            M += G
            np.sqrt(v, out=tmp)
            tmp += _EPS
            np.divide(m, tmp, out=tmp)
            tmp *= lr * math.sqrt(1.0 - _BETA2**t) / (1.0 - _BETA1**t)
            theta -= tmp
        self._steps = t
