"""Byzantine workers: gradients replaced by adversarial ones before they are pushed.

A scenario names the Byzantine workers and one attack (``byzantine: {workers: [...], attack: ...,
scale: ...}``); the engine passes each of those workers' honest gradient (computed as usual on the
weights and samples the schedule gives it) through :func:`corrupt` and pushes the result. The
attacks, with ``g`` the honest mean gradient and ``s = scale``:

* ``sign_flip``: ``-s * g`` (points uphill; ``s > 1`` outweighs honest workers in a plain mean).
* ``gaussian``: ``N(0, s^2)`` noise, drawn independently per coordinate, *replacing* ``g``.
* ``scaled``: ``s * g`` (a huge, correctly-signed gradient that blows up a plain mean).

``scale`` is unitless for ``sign_flip``/``scaled`` and in gradient units for ``gaussian``. Defaults
(our choice): ``sign_flip`` 1, ``gaussian`` 1, ``scaled`` 10. The result is always a new array.
"""

from __future__ import annotations

import numpy as np

ATTACKS = ("sign_flip", "gaussian", "scaled")
DEFAULT_SCALE = {"sign_flip": 1.0, "gaussian": 1.0, "scaled": 10.0}


def corrupt(gradient: np.ndarray, attack: str, rng: np.random.Generator | None = None, *,
            scale: float | None = None) -> np.ndarray:
    """The gradient a Byzantine worker pushes instead of ``gradient`` (``rng`` is needed by ``gaussian`` only)."""
    if attack not in ATTACKS:
        raise ValueError(f"unknown attack {attack!r}; choose one of {', '.join(ATTACKS)}")
    s = DEFAULT_SCALE[attack] if scale is None else float(scale)
    if s < 0:
        raise ValueError("attack scale must be >= 0")
    g = np.asarray(gradient, dtype=np.float64)
    if attack == "sign_flip":
        return -s * g
    if attack == "scaled":
        return s * g
    if rng is None:
        raise ValueError("the gaussian attack needs a random generator")
    return rng.normal(0.0, s, size=g.shape)
