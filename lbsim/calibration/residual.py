"""The fit's residual ``log(predicted / measured)`` over the fit rows, for one algorithm and NIC count.

A bounded least-squares fit evaluates it thousands of times, mostly at points that differ from the
last one in a single figure (the finite-difference Jacobian steps one coordinate at a time). The
prediction of a placement ``p`` is :func:`lbsim.calibration.model.steps_s`, whose two costly parts
depend on few figures:

* the all-reduce ``comm_s(p)`` on the link figures only (``B_intra, α_intra, B_nic, α_nic``:
  ``x[0:4]``; the algorithm, NICs per node and pipeline fill are fixed for one residual), and of
  those only on the links ``p`` crosses: a one-node placement never uses a NIC, and a placement of
  one GPU per node never uses an intra-node link (every algorithm of
  :data:`lbsim.network.algorithms.ALGORITHMS` reads a node's intra link only when it holds two or
  more GPUs, and a NIC only across two or more nodes; ``tests/test_calibration.py`` checks the
  cached values against the uncached model after a step in each figure, for every algorithm);
* the slowest replica's distribution on the shared-node slowdown ``s`` and the noise ``c`` only.

Both are kept per placement, keyed on exactly the figures they read, so a step in the overlap
shares reuses the all-reduce and a step in a link reuses the distribution. The values are the same
numbers the uncached functions return (the same calls on the same arguments): caching changes
nothing the fit sees.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from lbsim.calibration.model import LinkFigures, comm_s, steps_s, wait_distribution
from lbsim.network.replica_wait import MaxDistribution

CACHE_ENTRIES = 256  # per residual and kind: a Jacobian needs the current point's entries and one step's

FiguresOf = Callable[[np.ndarray], LinkFigures]


INTRA, NIC = (0, 1), (2, 3)  # the link figures' places in the fit's parameter vector


def _links_read(placement: tuple[int, ...]) -> tuple[int, ...]:
    """The places in ``x`` of the link figures ``placement``'s all-reduce reads (module docstring)."""
    if len(placement) == 1:
        return INTRA
    if max(placement) == 1:
        return NIC
    return INTRA + NIC


class LogResidual:
    """``x ↦ log(steps_s(p, t(b)) for each fit row) − log(measured)`` with the figures ``figures_of(x)``."""

    def __init__(self, placements: Sequence[tuple[int, ...]], compute_s: np.ndarray, log_measured: np.ndarray,
                 gradient_bytes: float, figures_of: FiguresOf) -> None:
        order: dict[tuple[int, ...], list[int]] = {}
        for i, p in enumerate(placements):
            order.setdefault(p, []).append(i)
        self._groups = [(p, np.array(ii), compute_s[ii], sum(p) > 1, _links_read(p)) for p, ii in order.items()]
        self._size = len(placements)
        self._y = log_measured
        self._gradient_bytes = gradient_bytes
        self._figures_of = figures_of
        self._comm: dict[tuple[tuple[int, ...], tuple[float, ...]], float] = {}
        self._dist: dict[tuple[tuple[int, ...], float, float], MaxDistribution | None] = {}

    def predict(self, x: np.ndarray) -> np.ndarray:
        """The mean step time (s) of every fit row under ``figures_of(x)``."""
        fig = self._figures_of(x)
        out = np.empty(self._size)
        for p, ii, t, shares, reads in self._groups:
            c = 0.0
            if shares:
                key = (p, tuple(float(x[i]) for i in reads))
                got = self._comm.get(key)
                if got is None:
                    if len(self._comm) >= CACHE_ENTRIES:
                        self._comm.clear()
                    got = self._comm[key] = comm_s(p, self._gradient_bytes, fig)
                c = got
            dkey = (p, fig.shared_node_slowdown, fig.jitter_cv)
            if dkey in self._dist:
                dist = self._dist[dkey]
            else:
                if len(self._dist) >= CACHE_ENTRIES:
                    self._dist.clear()
                dist = self._dist[dkey] = wait_distribution(p, fig)
            out[ii] = steps_s(p, t, self._gradient_bytes, fig, dist=dist, comm=c)
        return out

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """``log(predicted) − log(measured)`` per fit row."""
        return np.log(self.predict(x)) - self._y
