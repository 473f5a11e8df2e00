"""Per-sample lengths for :class:`lbsim.runtime.ddp.LoadBalancer`: what each of a step's samples costs.

The user gives every sample's length in tokens, as a tensor / sequence indexed by dataset position
or a callable ``index -> length``, and the cost of a sample of length L, ``c(L) = a L + b L^2``
(docs/sample-cost.md; ``b = 0`` when attention is a small share, ``a / (6 h)`` for a transformer of
hidden size h). A sample's work is ``c(L) / c(L_ref)`` reference samples, ``L_ref`` the mean length
of the tensor (or, for a callable, ``reference_tokens``); each rank's speed is then in reference
samples per second, as the scheme's fits are. :meth:`SampleCosts.samples` gives a step's samples as
lbsim's :class:`~lbsim.samples.rounds.RoundSamples`, which every rank partitions alike
(:func:`lbsim.sizing.length_partition.cost_partition`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from lbsim.samples.lengths import LengthDistribution, empirical
from lbsim.samples.model import SampleModel
from lbsim.samples.rounds import RoundSamples

Lengths = Callable[[int], int] | torch.Tensor | Sequence[int]


class SampleCosts:
    """Lengths and ``c(L) = a L + b L^2`` of a dataset's samples (see the module docstring)."""

    def __init__(self, lengths: Lengths, *, cost_linear: float = 1.0, cost_quadratic: float = 0.0, cost_per_sample: float = 0.0,
                 reference_tokens: float | None = None, max_tokens: int | None = None, batching: str = "packing",
                 gradient_mean: str = "per_sample", seed: int = 0) -> None:
        if batching not in ("packing", "padding") or gradient_mean not in ("per_sample", "per_token"):
            raise ValueError(f"batching {batching!r} (valid: packing, padding) / gradient_mean {gradient_mean!r} "
                             "(valid: per_sample, per_token)")
        if not cost_linear > 0 or not cost_quadratic >= 0 or not cost_per_sample >= 0:
            raise ValueError(f"c(L) = a L + b L^2 needs a > 0 and b >= 0, got a={cost_linear}, b={cost_quadratic}")
        self.table: np.ndarray | None = None
        self.fn: Callable[[int], int] | None = None
        if callable(lengths) and not isinstance(lengths, torch.Tensor):
            if reference_tokens is None:
                raise ValueError("lengths given as a callable need reference_tokens (the length samples_per_s holds at)")
            self.fn = lengths
            dist = LengthDistribution(values=np.array([1], dtype=np.int64), cum=np.array([1.0]))
        else:
            table = np.asarray(lengths.tolist() if isinstance(lengths, torch.Tensor) else list(lengths), dtype=np.int64)
            if table.ndim != 1 or not table.size or int(table.min()) < 1:
                raise ValueError("lengths must be a non-empty 1-D sequence of whole numbers >= 1")
            self.table = table
            dist = empirical(table, np.ones_like(table))
        ref = float(reference_tokens) if reference_tokens is not None else float(self.table.mean())  # type: ignore[union-attr]
        self.model = SampleModel(dist, float(cost_linear), float(cost_quadratic), ref, batching == "padding", max_tokens,
                                 gradient_mean == "per_token", seed, float(cost_per_sample))

    def lengths_of(self, indices: Sequence[int]) -> np.ndarray:
        """Token lengths of the samples ``indices`` (int64), from the table or the callable; each >= 1."""
        if self.table is not None:
            return self.table[np.asarray(indices, dtype=np.int64)]
        assert self.fn is not None
        out = np.array([int(self.fn(int(i))) for i in indices], dtype=np.int64)
        if out.size and int(out.min()) < 1:
            raise ValueError(f"lengths callable returned {int(out.min())}; lengths are whole numbers >= 1")
        return out

    def samples(self, indices: Sequence[int]) -> RoundSamples:
        """The step's samples (in the order given): lengths and units."""
        lengths = self.lengths_of(indices)
        if self.model.max_tokens is not None and lengths.size and int(lengths.max()) > self.model.max_tokens:
            bad = int(np.argmax(lengths))
            raise ValueError(f"sample {indices[bad]} has {int(lengths[bad])} tokens, above max_tokens {self.model.max_tokens}")
        return RoundSamples(lengths, self.model.units(lengths), self.model.padding, self.model.max_tokens)

    def describe(self) -> dict[str, Any]:
        """The cost model's figures for the balancer's log: ``L_ref``, ``a``, ``b``, batching, gradient mean."""
        return {"reference_tokens": self.model.ref_tokens, "a": self.model.a, "b": self.model.b,
                "batching": "padding" if self.model.padding else "packing",
                "gradient_mean": "per_token" if self.model.per_token else "per_sample"}
