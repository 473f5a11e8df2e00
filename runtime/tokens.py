"""A small length-sensitive model for ``lbsim train`` with ``workload.sample_cost``: one attention block.

Each sample is a synthetic token sequence whose length is the one the simulator draws for it
(:meth:`lbsim.samples.model.SampleModel.round_samples`: round k's samples, the same on every rank
and in both engines); its tokens come from a generator seeded by ``(seed, k, j)``. The model is an
embedding, one single-head self-attention block over the sample's own tokens (its cost grows as
``L d^2`` for the projections and ``L^2 d`` for the attention: ``c(L) = a L + b L^2``), an MLP and a
next-token head, on one flat parameter vector (as :class:`lbsim.runtime.model.FlatModel`, so the loop
all-reduces it unchanged). The target of token t is ``(3 x_t + 1) mod V``: learnable, so the loss falls.
A rank's loss is the mean over its samples of each sample's token mean, weighted ``x_r / X`` in the
update (``gradient_mean: per_sample``; ``per_token``, the mean over the tokens, is the DDP
library's, whose hook weighs by tokens: the runtime's records hold per-sample weights, so
``lbsim train`` refuses it).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from lbsim.rng import stream
from lbsim.schemes.sample_plan import plan_round

D, V = 32, 32  # model width and vocabulary
SHAPES: tuple[tuple[int, ...], ...] = ((V, D), (D, 3 * D), (3 * D,), (D, D), (D,), (D, 2 * D), (2 * D,), (2 * D, D), (D,),
                                       (D, V), (V,))


def sample_tokens(seed: int, k: int, j: int, length: int) -> torch.Tensor:
    """Sample j of round k: ``length`` token ids."""
    return torch.from_numpy(stream(seed, "tokens", k, j).integers(0, V, length))


class TokenModel:
    """The attention block on a flat parameter tensor (see the module docstring)."""

    def __init__(self, per_token: bool) -> None:
        self.per_token = per_token
        self.n_params = int(sum(int(np.prod(s)) for s in SHAPES))

    def initial(self, seed: int, *, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """The flat initial parameters: matrices ~ N(0, 1/fan_in), biases 0, from the seed's own stream."""
        rng = stream(seed, "tokens", "init")
        parts = [rng.normal(0.0, 1.0 / math.sqrt(s[0]), s).ravel() if len(s) == 2 else np.zeros(s[0]) for s in SHAPES]
        return torch.tensor(np.concatenate(parts), dtype=dtype, device=device)

    def unpack(self, w: torch.Tensor) -> list[torch.Tensor]:
        """Views of the flat parameters in :data:`SHAPES` order (no copy)."""
        out, o = [], 0
        for s in SHAPES:
            k = int(np.prod(s))
            out.append(w[o:o + k].view(*s))
            o += k
        return out

    def _logits(self, p: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        emb, wqkv, bqkv, wo, bo, w1, b1, w2, b2, wh, bh = p
        h = emb[x]
        q, k, v = (h @ wqkv + bqkv).chunk(3, dim=-1)
        h = h + (torch.softmax(q @ k.T / math.sqrt(D), dim=-1) @ v) @ wo + bo
        h = h + torch.tanh(h @ w1 + b1) @ w2 + b2
        return h @ wh + bh

    def loss_and_grad(self, w: torch.Tensor, seqs: list[torch.Tensor]) -> tuple[float, torch.Tensor]:
        """This rank's loss on its sequences and its gradient (a new flat tensor)."""
        w = w.detach().requires_grad_(True)
        p = self.unpack(w)
        total = torch.zeros((), dtype=w.dtype, device=w.device)
        tokens = 0
        for x in seqs:
            x = x.to(w.device)
            per = torch.nn.functional.cross_entropy(self._logits(p, x), (3 * x + 1) % V, reduction="sum")
            total = total + (per if self.per_token else per / len(x))
            tokens += len(x)
        loss = total / (tokens if self.per_token else len(seqs))
        (g,) = torch.autograd.grad(loss, w)
        return float(loss.detach()), g

    @torch.no_grad()
    def evaluate(self, w: torch.Tensor, *_: Any) -> tuple[float, float]:
        """Token loss and token accuracy on 16 held-out sequences of 48 tokens (the same for every seed)."""
        seed = 0
        p = self.unpack(w)
        losses, hits, n = 0.0, 0, 0
        for j in range(16):
            x = torch.from_numpy(stream(seed, "tokens", "held out", j).integers(0, V, 48)).to(w.device)
            logits = self._logits(p, x)
            y = (3 * x + 1) % V
            losses += float(torch.nn.functional.cross_entropy(logits, y, reduction="sum"))
            hits += int((logits.argmax(dim=1) == y).sum())
            n += len(x)
        return losses / n, hits / n


class SampleRounds:
    """A sample-cost run's rounds in the synchronous loop: who computes which sample, and what.

    Rank 0 plans round r with its scheme (:func:`lbsim.schemes.sample_plan.plan_round`, the simulator's rule:
    the same draw of lengths, the scheme's assignment when it is LengthAware) and sends the owners in
    the tail of the gradient all-reduce; every rank then builds its own samples' tokens. ``width``: the
    owners sent per round (the global batch; 0 without a sample-cost model: nothing of this runs)."""

    def __init__(self, scenario: Any, n: int) -> None:
        from lbsim.scenario.resolve import resolve_run

        run = resolve_run(scenario)
        self.model = run.context.sample_cost
        self.caps = run.context.max_batch
        self.n = n
        self.seed = scenario.seed
        self.width = scenario.workload.global_batch if self.model is not None else 0
        self._work: dict[int, np.ndarray] = {}

    def plan(self, r: int, scheme: Any, batches: Any) -> tuple[tuple[int, ...], list[int]]:
        """Rank 0: round r's batches and owners for the scheme's ``batches``."""
        if self.model is None:
            return tuple(int(b) for b in batches), []
        p = plan_round(self.model, r, scheme, tuple(int(b) for b in batches), self.caps)
        self._work = {r: p.work}  # only the round being run is observed
        return p.batches, p.owner.tolist()

    def work_of(self, r: int) -> np.ndarray:
        """Rank 0: each worker's work in round r (units of the reference sample's cost), for the scheme's observation."""
        return self._work[r]

    def mine(self, k: int, owner: np.ndarray, rank: int) -> tuple[list[torch.Tensor], int, int]:
        """Round k's sequences for ``rank``, and its weight ``samples / global batch`` as (numerator, denominator)."""
        assert self.model is not None
        lengths = self.model.round_samples(k, self.width).lengths
        idx = np.flatnonzero(owner == rank)
        return [sample_tokens(self.seed, k, int(j), int(lengths[j])) for j in idx], len(idx), self.width
