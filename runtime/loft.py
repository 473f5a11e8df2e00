"""LOFT in the runtime: emulated data placement, robust aggregation and Byzantine ranks.

Three additions to the synchronous loop (:mod:`lbsim.runtime.loop`), each the simulator's semantics:

**Data placement** (a scenario with ``data:``). Before computing a round each rank "reads" its
batch: ``l`` samples from its own shard and ``r = b - l`` remotely. The data are in memory, so the
read is emulated: the rank sleeps until ``start + fetch_s`` with ``fetch_s`` the scenario's cost
(:mod:`lbsim.fetch`), then draws and computes. ``l`` is the scheme's when it is
:class:`~lbsim.schemes.base.LocalityAware` (LOFT), else :meth:`~lbsim.fetch.DataLayout.default_local`
(uniform sampling), as in :class:`lbsim.simulator.fetch.Fetcher`; rank 0 decides it with the batches and
ships it in the same tail. Which samples: the numerics trainer's (:meth:`lbsim.numerics.trainer.Trainer.draw`)
— the local ones from the rank's own shard stream, the remote ones from the shared stream, drawn
in worker order (:class:`LocalitySampler`).

Storage-node queueing: the simulator serves remote reads through one FIFO NIC shared by every
worker (``data.storage``), in the order the workers request them; in a ring all-reduce round all
workers start together, in the order they reached the previous barrier (worker order in round 0).
The runtime emulates that queue with a schedule every rank computes alike (:func:`lbsim.fetch.fetch_schedule`):
from the previous round's all-gathered table (the arrival order: compute ends) and everyone's
remote counts (the shipped tail), rank i's remote read ends at
``max(r_i s f_net / B_remote, sum of the NIC service r_j s / B_storage of the ranks queued up to it)``
plus the latency, then its local read. With no storage NIC that is exactly
``DataLayout.fetch_s(i, l, r, f_net)``. ``f_net`` is the rank's network slowdown (contention with
``target: network``) at its round start, as the simulator samples it at the request; it is applied
to this emulated read only (not to the all-reduce), and not while profiling (``inject=False``).
Difference: the simulator's order and start times are exact; the runtime's ranks leave the
all-reduce within a fraction of a millisecond of each other, and the order comes from each rank's
own clock.

**Robust aggregation** (LOFT's ``aggregation: trimmed_mean | median``, tolerance ``f``): instead of the
batch-weighted all-reduce, chunked: the (padded) parameter vector is cut in n chunks, rank j owns
chunk j; ``all_to_all_single`` gives it every rank's contribution to its chunk (the bytes of a
reduce-scatter), it computes the coordinate-wise statistic (:func:`robust_statistic`, the semantics
of :mod:`lbsim.aggregation`: unweighted, ``f`` largest and smallest dropped / the median, mean of the
two middle values for even n), and an ``all_gather`` of the chunks gives every rank the same bytes,
so replicas stay bit-identical. Rank 0's tail (next batches, local counts, stop flag) rides in its
row of that all-gather. Rule ``mean`` keeps the batch-weighted all-reduce. Every rank asks the
scheme for the rule (:func:`lbsim.schemes.base.aggregation_of`: LOFT's ``aggregation_rule``; other schemes: ``mean``),
so profiling a LOFT scenario measures the exchange the run will make.

**Byzantine ranks** (``numerics.byzantine``; the runtime always trains, so ``numerics.enabled`` does
not matter): the listed ranks replace their gradient by
:func:`lbsim.numerics.byzantine.corrupt` before aggregation, with the numerics trainer's RNG: one
stream ``stream(seed, "numerics", "byzantine")`` drawn by the Byzantine workers in worker order at
every update. Each Byzantine rank keeps its own copy of that stream and draws every Byzantine
worker's share in order (keeping its own), so its noise is the simulator's, bit for bit. With the
batch-weighted mean (bsp, static, lbbsp, LOFT's ``mean``) nothing defends against them; the run
shows what that costs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from lbsim.fetch import arrival_order, fetch_schedule
from lbsim.numerics.byzantine import DEFAULT_SCALE, corrupt
from lbsim.numerics.sampling import ShardStream, SharedStream, shard_indices
from lbsim.rng import stream
from lbsim.scenario.data import resolve_data
from lbsim.workers import select_workers

from .ddp.hook import weighted_gradient
from .dist import Comm
from .model import DATA_STREAM  # the shared sample stream, as the numerics trainer's

SHARDS_STREAM = ("numerics", "shards")
BYZANTINE_STREAM = ("numerics", "byzantine")


# -- data placement -----------------------------------------------------------------------------
class DataFetch:
    """This rank's emulated read of its batch (a no-op without a ``data:`` section)."""

    def __init__(self, scenario: Any, workers: tuple[Any, ...], rank: int, cont: Any, inject: bool) -> None:
        self.layout = resolve_data(getattr(scenario, "data", None), workers)
        self.rank = rank
        self.cont = cont if inject else None  # network slowdowns only with the scenario's contention on
        self.order = list(range(len(workers)))  # round 0: worker order, as the simulator's processes start

    def fetch_s(self, start_s: float, batches: Sequence[int], local: Sequence[int]) -> float:
        """This rank's read time for a round that starts at ``start_s`` (run clock)."""
        if self.layout is None:
            return 0.0
        n = len(batches)
        factors = [1.0] * n
        if self.cont is not None:
            factors[self.rank] = self.cont.network_factor(start_s)
        remote = [int(b) - int(v) for b, v in zip(batches, local, strict=True)]
        return float(fetch_schedule(self.layout, local, remote, self.order, factors)[self.rank])

    def read(self, clock_t0: float, start_s: float, batches: Sequence[int], local: Sequence[int]) -> float:
        """Sleep until ``start_s + fetch_s``; returns the fetch end on the run clock (``start_s``: no data)."""
        if self.layout is None:
            return start_s
        target = start_s + self.fetch_s(start_s, batches, local)
        left = clock_t0 + target - time.monotonic()
        if left > 0:
            time.sleep(left)
        return time.monotonic() - clock_t0

    def observe(self, compute_end_s: np.ndarray) -> None:
        """The round's barrier arrival order, which the next round's storage-NIC queue follows."""
        self.order = arrival_order(compute_end_s)


class LocalitySampler:
    """This rank's samples as the numerics trainer draws them with shards (the shared stream's draws, in worker order, plus each worker's shard).

    Worker w draws ``l_w`` from its own shard stream and the rest from the shared stream, whose
    draws are made in worker order; a worker without a shard (or ``l_w = 0``) takes its whole
    batch from the shared stream. Every rank replays the shared stream's draws of all workers.
    """

    def __init__(self, n_train: int, seed: int, rank: int, fractions: Sequence[float]) -> None:
        self.rank = rank
        self.shared = SharedStream(n_train, stream(seed, *DATA_STREAM))
        self.has_shard = [False] * len(fractions)
        self.own: ShardStream | None = None
        if any(f > 0 for f in fractions):
            rest = max(0.0, 1.0 - sum(fractions))
            parts = shard_indices(n_train, [*fractions, rest], stream(seed, *SHARDS_STREAM))
            self.has_shard = [len(p) > 0 for p in parts[:len(fractions)]]
            if self.has_shard[rank]:
                self.own = ShardStream(parts[rank], stream(seed, "numerics", "shard", rank))

    def next(self, batches: Sequence[int], local: Sequence[int]) -> np.ndarray:
        """This rank's sample indices for the round: its ``local`` draws from its shard, then its slice of the
        shared stream's draws (every worker's shared part, in worker order)."""
        shared = [int(b) if not (self.has_shard[w] and local[w]) else int(b) - int(local[w])
                  for w, b in enumerate(batches)]
        drawn = self.shared.draw(sum(shared))
        lo = sum(shared[:self.rank])
        mine = drawn[lo:lo + shared[self.rank]]
        if self.own is None or not local[self.rank]:
            return mine
        return np.concatenate([self.own.draw(int(local[self.rank])), mine])


# -- Byzantine ranks ----------------------------------------------------------------------------
class Byzantine:
    """This rank's gradient as the numerics trainer would push it (corrupted if the rank is listed)."""

    def __init__(self, scenario: Any, workers: tuple[Any, ...], rank: int) -> None:
        cfg = getattr(getattr(scenario, "numerics", None), "byzantine", None)
        self.workers: tuple[int, ...] = ()
        self.attack, self.scale = "", 0.0
        if cfg is not None:
            self.workers = tuple(sorted(set(select_workers(cfg.workers, workers, "numerics.byzantine.workers"))))
            self.attack = str(cfg.attack)
            self.scale = DEFAULT_SCALE[self.attack] if cfg.scale is None else float(cfg.scale)
        self.rank = rank
        self.rng = stream(scenario.seed, *BYZANTINE_STREAM) if rank in self.workers else None

    def apply(self, g: torch.Tensor) -> torch.Tensor:
        """``g`` corrupted by the attack if this rank is Byzantine (the other Byzantine draws made and dropped,
        so the generator advances as the trainer's does), else ``g``."""
        if self.rng is None:
            return g
        honest = g.detach().to(torch.float64).cpu().numpy()
        placeholder = np.zeros_like(honest)  # the other Byzantine workers' draws, made and dropped
        mine = honest
        for w in self.workers:
            v = corrupt(honest if w == self.rank else placeholder, self.attack, self.rng, scale=self.scale)
            if w == self.rank:
                mine = v
        return torch.from_numpy(mine).to(dtype=g.dtype, device=g.device)

    def note(self) -> str | None:
        """A line for the run's notes naming the Byzantine workers and the attack (None: none)."""
        if not self.workers:
            return None
        return (f"Byzantine workers {list(self.workers)}: {self.attack} (scale {self.scale:g}) "
                "replaces their gradient before aggregation")


# -- aggregation --------------------------------------------------------------------------------
def robust_statistic(rule: str, rows: torch.Tensor, f: int) -> torch.Tensor:
    """Coordinate-wise ``median`` or ``trimmed_mean`` (drop ``f`` each side) of ``rows`` (n, c)."""
    n = rows.shape[0]
    s = torch.sort(rows, dim=0).values
    if rule == "median":
        return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
    if rule == "trimmed_mean":
        return s[f:n - f].mean(dim=0)
    raise ValueError(f"no robust statistic for rule {rule!r}")


class GradientExchange:
    """One round's aggregation and the broadcast of rank 0's tail (next batches, local counts, stop).

    ``mean``: ``all_reduce(SUM)`` of ``[g_r x_r / X | tail]`` (tail written by rank 0 only).
    ``median`` / ``trimmed_mean``: chunked, see the module docstring.
    """

    def __init__(self, comm: Comm, rule: str, f: int, n_params: int) -> None:
        self.comm, self.rule, self.f = comm, rule, f
        self.n, self.d = comm.info.world, n_params
        self.chunk = math.ceil(n_params / self.n)

    def exchange(self, g: torch.Tensor, x_r: int, total: int, tail: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(aggregated gradient, rank 0's tail)``, identical on every rank."""
        d = self.d
        if self.rule == "mean":
            flat = torch.cat([weighted_gradient(g, x_r, total), tail.to(g.dtype)])  # the DDP hook's weighting
            self.comm.all_reduce(flat, "all_reduce of the gradients", k)
            return flat[:d], flat[d:]
        c, n = self.chunk, self.n
        send = torch.zeros(n * c, dtype=g.dtype, device=g.device)
        send[:d] = g
        recv = torch.empty_like(send)
        self.comm.all_to_all(recv, send, "all_to_all of the gradient chunks", k)
        mine = robust_statistic(self.rule, recv.view(n, c), self.f)
        rows = self.comm.all_gather(torch.cat([mine, tail.to(g.dtype)]), "all_gather of the aggregated chunks", k)
        return rows[:, :c].reshape(-1)[:d].to(g.device), rows[0, c:].to(g.device)
