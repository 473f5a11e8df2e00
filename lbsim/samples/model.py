"""The resolved sample-cost model: seeded length draws and ``c(L) = c0 + a L + b L^2`` in reference units.

Round r's global batch of X samples has lengths drawn from the stream ``("sample_lengths", r)`` of
the run's seed (:mod:`lbsim.rng`), so every scheme and both simulator paths see the same samples in
round r whatever they decide. A sample of length L costs ``u(L) = c(L) / c(L_ref)`` units, where
``L_ref`` is the reference length at which each worker's ``samples_per_s`` holds (the
distribution's mean by default); worker i computing work U (units) takes ``t0_i + U / v_i``.
With every length equal to ``L_ref`` each unit is exactly 1.0 and a worker's work is exactly its
batch: the engines' arithmetic is then the count model's, bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lbsim.errors import InputError
from lbsim.rng import stream
from lbsim.samples.config import SampleCostConfig
from lbsim.samples.lengths import LengthDistribution, distribution
from lbsim.samples.rounds import RoundSamples


@dataclass(frozen=True, eq=False)
class SampleModel:
    """The resolved per-sample cost: seeded length draws, ``c(L) = c0 + a L + b L²`` and its unit
    ``c(L_ref)`` (``ref_tokens``), packing or padding, the token cap and the gradient mean (module docstring)."""

    dist: LengthDistribution
    a: float
    b: float
    ref_tokens: float
    padding: bool
    max_tokens: int | None
    per_token: bool
    seed: int
    c0: float = 0.0

    def cost(self, lengths: np.ndarray | float) -> np.ndarray | float:
        """``c(L) = c0 + a L + b L^2`` (the config's units)."""
        return self.c0 + self.a * lengths + self.b * lengths * lengths

    def units(self, lengths: np.ndarray) -> np.ndarray:
        """``c(L) / c(L_ref)`` per sample."""
        return np.asarray(self.cost(lengths.astype(np.float64)), dtype=np.float64) / float(self.cost(self.ref_tokens))

    def round_samples(self, r: int, k: int) -> RoundSamples:
        """Round r's ``k`` samples (their lengths depend on the seed and r only)."""
        lengths = self.dist.draw(stream(self.seed, "sample_lengths", r), k)
        return RoundSamples(lengths, self.units(lengths), self.padding, self.max_tokens)

    def iteration_work(self, worker: int, iteration: int, batch: int) -> float:
        """The work (reference samples) of worker ``worker``'s iteration ``iteration`` on ``batch`` samples
        drawn for it alone (stream ``("sample_lengths", "worker", worker, iteration)``): the drivers without
        a global round (parameter server: async, wbsp). Packing: the sum of the units; padding: ``batch``
        times the longest's. Equal to ``float(batch)`` when every length is the reference."""
        lengths = self.dist.draw(stream(self.seed, "sample_lengths", "worker", worker, iteration), batch)
        units = self.units(lengths)
        if not units.size:
            return 0.0
        return float(batch * units.max()) if self.padding else float(units.sum())


def sample_model(cfg: SampleCostConfig, seed: int, key: str = "workload.sample_cost") -> SampleModel:
    """Resolve the section (reads a lengths file); every length must fit the token cap."""
    dist = distribution(cfg.lengths, f"{key}.lengths", cfg.max_tokens)
    if cfg.max_tokens is not None and dist.longest > cfg.max_tokens:  # lognormal or constant (a file names its row)
        raise InputError(f"{key}.max_tokens", f"the lengths reach {dist.longest} tokens, above the memory cap of "
                                              f"{cfg.max_tokens} tokens per worker")
    ref = cfg.reference_tokens if cfg.reference_tokens is not None else dist.mean()
    return SampleModel(dist, cfg.cost_linear, cfg.quadratic, ref, cfg.batching == "padding", cfg.max_tokens,
                       cfg.gradient_mean == "per_token", seed, cfg.cost_per_sample)
