"""Mixed hardware plus sequence lengths, for real (gloo, CPU ranks) and in the simulator.

Run: ``python benchmarks/bench_seqlen_runtime.py [--world 3] [--slow-ranks 2] [--batch 36] [--scale 4]
[--steps 14] [--repeats 1] [--no-pin] [--work wall] [--out runs/seqlen_runtime.json]``.

A small length-sensitive model — one self-attention block (d = 48) over each sample's own token
sequence, a next-token head, per-sample token-mean loss, float32, one thread per rank — trains on
synthetic token sequences whose lengths are the shipped Azure conversation lengths
(data/token_lengths/azure_conv_2023.csv) divided by ``SCALE`` and capped at ``CAP`` tokens. Step k's
``B`` samples are the simulator's round k (the same seed, the same lengths in the same order: both
engines compute the same steps). The last ``--slow-ranks`` of the ``--world`` ranks are slowed
``SLOWDOWN`` x (the library's emulated contention, :mod:`lbsim.runtime.ddp.inject`): fast and slow
"GPUs". Three arms, ``--steps`` steps each, run ``--repeats`` times with the arms' order rotated each
repeat (no arm always runs first or last on a host whose load drifts):

* ``bucketing``: each step's samples sorted by length, B/world consecutive ones per rank, plain DDP;
* ``lbbsp count``: :class:`lbsim.runtime.ddp.LoadBalancer` (gpu_model, lag 0, a decision per step);
* ``lbbsp cost``: the same with ``lengths=`` (the step's samples partitioned by predicted cost).

A rank computes its samples one at a time (forward, backward, gradients accumulated; DDP all-reduces
after the last), and a slowed rank sleeps after each sample until ``SLOWDOWN`` x its real time so
far. Stretching once per step instead would run every rank's real work in a burst at the step's
start: on a host with fewer cores than ranks the ranks then share cores at the start of a step and
not later, differently in each arm, and no per-rank speed describes them (measured: realized /
fitted compute 0.6-0.8 on fast ranks, 1.0-1.2 on the slowed one). Sample by sample, a slowed rank
uses ``1/SLOWDOWN`` of a core throughout its step; one fast and two slowed ranks want 1.8 cores.
Each rank is pinned (``--pin``, the default; :func:`rank_cores`): a fast rank has a core to itself and
the slowed ranks share the rest, so a fast rank never waits behind a slowed one and each rank stands
for a processor of its own, as a GPU does. A slowed rank stretches its thread's CPU seconds of work
(``--work cpu``, the default; :class:`lbsim.runtime.ddp.SlowedRank`): the time it waited for its
shared core is not multiplied by ``SLOWDOWN`` as well (``--work wall``, with ``--no-pin``, runs the
earlier set-up).

Calibration, before each repeat's arms (the simulator's figures; none is taken from the arms):

* ``c(L) = c0 + a L + b L^2``: non-negative least squares over timed single samples at 8 lengths,
  each rank alone (the others wait), coefficients averaged over the ranks: a sample's work;
* the processor share of each group: every rank at once computes its part of step 0's samples (split
  by nominal speed, so all are busy about as long, as under LB-BSP), barrier-aligned as in the arms,
  slowed ranks stretching: realized / (fitted x slowdown),
  median over the rounds, mean over the group's ranks (other jobs on the host, and the ranks
  themselves, take part of each core); the spread of a rank's ratio around its median, less what
  every rank's ratio did in the same round (the host's load moving: it scales a step, it does not
  unbalance it), is the compute's jitter (:func:`shares_and_jitter`).
  The arms' simulation takes it from the share rounds interleaved with the arms' steps (below):
  the host's load moves within seconds;
* the step's fixed time (the optimizer), the gradient's all-reduce alone, and each LB-BSP arm's
  balancer per step (its collectives, rank 0's decision, the partition), timed in 8 steps of the
  balancer alone with each rank computing its samples between them as in the arms.

The simulator then runs each arm on a scenario built from them (written beside the JSON output),
four ways, each adding one term: ``base`` (c(L), fixed time, all-reduce), ``+share`` (group speeds
divided by their shares), ``+balancer`` (the balancer's time in the LB-BSP arms' ``t0_s``),
``+jitter`` (``jitter_cv``, lognormal per worker and step; its expected effect, :func:`jitter_factor`,
times the ``+balancer`` figure). The arms run interleaved: a cycle per
step k is one share round, then step k of each arm, the arms' order rotated per cycle, so the arms
and the share rounds meet the same load. Each rank records per step when the
balancer hands it its samples, its last gradient bucket, the all-reduce's and the optimizer's ends
(:func:`decompose`). Figures: each arm's mean step over steps 2.. (the first warm up and let the
fits learn), median and range over the repeats, beside the simulator's; the cost/count ratio per
repeat. The load average is printed before and after.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.multiprocessing as mp
from scipy.optimize import nnls

REPO = Path(__file__).resolve().parents[1]
LENGTHS_FILE = REPO / "data" / "token_lengths" / "azure_conv_2023.csv"
SCALE, CAP, D, V, SLOWDOWN = 4, 768, 48, 64, 2.5
ARMS = ("bucketing", "lbbsp count", "lbbsp cost")
WORK = "cpu"  # what a slowed rank stretches (SlowedRank's ``work``); set from ``--work`` in each rank


def slowed_rank(slow: bool) -> Any:
    """A slowed rank's emulated slowdown (``SLOWDOWN`` x, stretching its ``WORK`` seconds), None for a fast rank."""
    from lbsim.runtime.ddp import SlowedRank, constant_slowdown

    return SlowedRank(constant_slowdown(SLOWDOWN), work=WORK) if slow else None


def rank_cores(world: int, slow_ranks: int, cpus: list[int]) -> list[list[int]] | None:
    """Each rank's cores (``--pin``): a core of its own where the host has one per rank; otherwise a
    core of its own for each fast rank and the rest shared by the slowed ranks (each uses about
    ``1/SLOWDOWN`` of a core); None (no pinning) where that leaves the slowed ranks no core.

    Pinned, a fast rank never waits behind a slowed one: each rank then stands for a processor of its
    own, as a GPU is, instead of the host's scheduler sharing cores among them step by step."""
    fast = world - slow_ranks
    if len(cpus) >= world:
        return [[c] for c in cpus[:world]]
    if len(cpus) <= fast:
        return None
    return [[cpus[r]] for r in range(fast)] + [cpus[fast:]] * slow_ranks


def write_lengths(folder: Path, scale: int = SCALE) -> Path:
    """The workload's length distribution, a histogram file (``tokens,count``): the shipped Azure
    conversation lengths divided by ``scale``, rounded up and clipped to ``[2, CAP]``."""
    rows = np.loadtxt(LENGTHS_FILE, skiprows=1, dtype=np.int64)
    values, counts = np.unique(np.clip(-(-rows // scale), 2, CAP), return_counts=True)
    path = folder / "lengths.csv"
    path.write_text("tokens,count\n" + "".join(f"{v},{c}\n" for v, c in zip(values, counts, strict=True)))
    return path


def step_lengths(lengths_file: Path, steps: int, B: int) -> tuple[np.ndarray, float]:  # noqa: N803
    """Each step's B lengths, as the simulator draws round k's samples (seed 0), and the mean length.

    The runtime trains on exactly these samples (sample ``k B + j`` is round k's j-th), so both
    engines see the same lengths in the same order at every step."""
    from lbsim.samples.config import FileLengths, SampleCostConfig
    from lbsim.samples.model import sample_model

    model = sample_model(SampleCostConfig(lengths=FileLengths(path=str(lengths_file))), 0)
    return np.stack([model.round_samples(k, B).lengths for k in range(steps)]), float(model.dist.mean())


class Block(torch.nn.Module):
    """Embedding, one single-head self-attention block with an MLP, a next-token head."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(V, D)
        self.qkv = torch.nn.Linear(D, 3 * D)
        self.proj = torch.nn.Linear(D, D)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(D, 2 * D), torch.nn.GELU(), torch.nn.Linear(2 * D, D))
        self.head = torch.nn.Linear(D, V)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.emb(x)
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        att = torch.softmax(q @ k.T / math.sqrt(D), dim=-1)
        h = h + self.proj(att @ v)
        h = h + self.mlp(h)
        return self.head(h)


def tokens(i: int, length: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(10_000 + i)
    return torch.randint(0, V, (length,), generator=g)


def sample_loss(model: torch.nn.Module, i: int, lengths: np.ndarray) -> torch.Tensor:
    """Sample i's token-mean next-token loss."""
    x = tokens(i, int(lengths[i]))
    return torch.nn.functional.cross_entropy(model(x[:-1]), x[1:])


def train_samples(model: torch.nn.Module, samples: list[int], lengths: np.ndarray, slowed: Any = None) -> None:
    """Forward and backward of each sample in turn, the gradients accumulated (the per-sample mean loss:
    each backward of ``loss_i / n``); under DDP only the last backward all-reduces (``no_sync`` before).

    A slowed rank stretches its work sample by sample (:meth:`SlowedRank.after_bucket` after each
    sample; the last one's bucket hook stretches the rest), so a rank slowed ``f``x computes ``1/f`` of
    the time throughout its step instead of in one burst at its start: the ranks then rarely want
    more cores than the host has (see the module docstring)."""
    n = len(samples)
    if n == 0:  # a rank with no sample still joins the step's all-reduce, with a zero gradient
        sum(p.sum() for p in model.parameters()).mul(0.0).backward()
        return
    sync = getattr(model, "no_sync", None)
    for j, i in enumerate(samples):
        last = j == n - 1
        with (contextlib.nullcontext() if last or sync is None else sync()):
            (sample_loss(model, i, lengths) / n).backward()
        if not last and slowed is not None:
            slowed.after_bucket()


def fit_sample_cost(model: torch.nn.Module | None = None) -> dict[str, float]:
    """c(L) = c0 + a L + b L^2 in seconds (forward + backward of one sample), and the step's fixed time.

    Timed inside the job on one rank at a time (:func:`run_alone`), through the code path the arms'
    samples take: ``model`` is a DDP-wrapped :class:`Block` (every rank built it) and each sample's
    tokens, forward and backward run under its ``no_sync`` (no collective), as every sample but a
    step's last does in :func:`train_samples`: the wrapper's per-call work is part of ``c0``."""
    if model is None:
        torch.manual_seed(0)
        model = Block()
    sync = getattr(model, "no_sync", None)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    grid = [8, 32, 64, 128, 256, 384, 512, 768]
    xs, ts = [], []
    for rep in range(6):
        for L in grid:
            t = time.perf_counter()
            with (contextlib.nullcontext() if sync is None else sync()):
                x = tokens(rep, L)
                torch.nn.functional.cross_entropy(model(x[:-1]), x[1:]).backward()
            dt = time.perf_counter() - t
            if rep:  # the first pass warms up
                xs.append(L)  # the sample of L tokens (the model reads L - 1 of them)
                ts.append(dt)
    X = np.array(xs, dtype=np.float64)
    # non-negative least squares: a cost term cannot be negative, and clipping an unconstrained fit's
    # negative term afterwards would leave the others fitted for it (biased low in mid-range lengths)
    c0, a, b = nnls(np.stack([np.ones_like(X), X, X * X], 1), np.array(ts))[0]
    fixed = []
    for _ in range(20):
        t = time.perf_counter()
        opt.step()
        opt.zero_grad()
        fixed.append(time.perf_counter() - t)
    return {"c0": max(float(c0), 0.0), "a": max(float(a), 1e-12), "b": max(float(b), 0.0),
            "t0_s": float(np.median(fixed)), "params": sum(p.numel() for p in model.parameters())}


class Mark:
    """The time of the last gradient bucket handed to the wrapped hook (after its emulated slowdown)."""

    def __init__(self) -> None:
        self.last = 0.0

    def start(self) -> None:
        self.last = time.perf_counter()

    def wrap(self, inner: Any) -> Any:
        def hook(state, bucket):  # type: ignore[no-untyped-def]
            self.last = time.perf_counter()
            return inner(state, bucket)
        return hook


def cost_s(fit: dict[str, float], length: int) -> float:
    """c(L) in seconds, from the fitted figures."""
    return fit["c0"] + fit["a"] * length + fit["b"] * length * length


def shared_fit(fits: list[dict[str, float]], ref: float) -> dict[str, float]:
    """One c(L) for every rank (the units must agree across ranks): the ranks' coefficients averaged."""
    out = {k: float(np.mean([f[k] for f in fits])) for k in ("c0", "a", "b", "t0_s")}
    out["params"] = fits[0]["params"]
    out["ref"] = ref
    out["ref_cost"] = cost_s(out, ref)  # c(L_ref): the reference sample's seconds (1 / samples_per_s)
    return out


def _balancer(arm: str, B: int, cfg: dict[str, float], nominal: float, slowed: Any, lengths: np.ndarray) -> Any:  # noqa: N803
    """The arm's :class:`lbsim.runtime.ddp.LoadBalancer` (lag 0, a decision per step; ``lbbsp cost``: with lengths)."""
    from lbsim.runtime.ddp import LoadBalancer

    extra: dict[str, Any] = {"lengths": torch.tensor(lengths), "cost_linear": cfg["a"], "cost_quadratic": cfg["b"],
                             "cost_per_sample": cfg["c0"], "reference_tokens": cfg["ref"]} if arm == "lbbsp cost" else {}
    return LoadBalancer(B, variant="gpu_model", samples_per_s=nominal, slowed=slowed, decide_every=1, lag=0,
                        max_batch=B, **extra)


def _mine(lb: Any, arm: str, step: list[int], lengths: np.ndarray, rank: int, world: int) -> list[int]:
    """This rank's samples of the step (dataset indices), by the arm's rule; starts the balancer's step."""
    B = len(step)  # noqa: N806
    if lb is None:  # bucketing: sorted by length (ties in draw order), the r-th run of B/world
        return sorted(step, key=lambda i: (int(lengths[i]), i))[rank * B // world:(rank + 1) * B // world]
    if lb.costs is None:
        batches = lb.next_batches()
        lb.begin_step(batches)
        lo = sum(batches[:rank])
        return step[lo:lo + batches[rank]]
    lb.next_batches()
    owner, samples = lb.assign(step)
    lb.begin_cost_step(owner, samples)
    return [i for i, o in zip(step, owner.tolist(), strict=True) if o == rank]


def calibrate_balancer(arm: str, B: int, cfg: dict[str, float], nominal: float, lengths: np.ndarray,  # noqa: N803
                       rank: int, world: int, slow: bool, rounds: int = 8) -> float:
    """The balancer's own time per step (collectives, rank 0's decision, the partition), timed alone.

    Like the all-reduce's, a figure of the calibration phase: ``rounds`` steps of the arm's balancer on
    step 0's samples, each rank computing its samples between them as in the arms (a plain model, no
    all-reduce; slowed ranks stretching), so the ranks wake into the balancer's collectives from the
    same busy state as in the arms; median over the steps after the first three, the slowest rank's."""
    import torch.distributed as dist

    lb = _balancer(arm, B, cfg, nominal, None, lengths)
    slowed = slowed_rank(slow)
    torch.manual_seed(0)
    model = Block()
    step = list(range(B))
    spent = []
    for _ in range(rounds):
        dist.barrier()
        t = time.perf_counter()
        mine = _mine(lb, arm, step, lengths, rank, world)
        spent.append(time.perf_counter() - t)
        if slowed is not None:
            slowed.begin()
        train_samples(model, mine, lengths, slowed)
        if slowed is not None:
            slowed.after_bucket()
    lb.finish()
    return float(np.median(spent[3:]))


def run_alone(fn: Any, rank: int, world: int) -> Any:
    """``fn()`` on each rank in turn, the others waiting at a barrier (a core to itself): this rank's result."""
    import torch.distributed as dist

    mine = None
    for r in range(world):
        dist.barrier()
        if r == rank:
            mine = fn()
    dist.barrier()
    return mine


class ShareProbe:
    """Rounds of one rank's processor share: realized / predicted compute of a fixed batch.

    Each round, every rank at once (barrier-aligned as in the arms) computes its part of one step's
    samples, split in proportion to the ranks' nominal speeds (a slowed rank 1/``SLOWDOWN`` of a fast
    one's), so every rank is busy for about the same time, as under LB-BSP; a slowed rank stretches
    its work sample by sample as in the arms (:func:`train_samples`). The ratio of a rank's time to
    its prediction (c(L) fitted alone, x the slowdown) is >= 1 when other processes (the other ranks,
    other jobs on the host) take part of its core."""

    def __init__(self, cfg: dict[str, float], step: np.ndarray, rank: int, world: int, slow: bool,
                 slow_ranks: int) -> None:
        from lbsim.sizing.split import proportional_split

        torch.manual_seed(0)
        self.model = Block()
        self.step = step
        weights = [1.0 / SLOWDOWN if r >= world - slow_ranks else 1.0 for r in range(world)]
        counts = proportional_split(len(step), weights, [len(step)] * world, min_batch=1)
        lo = sum(counts[:rank])
        self.mine = list(range(lo, lo + counts[rank]))
        self.slowed = slowed_rank(slow)
        self.pred = sum(cost_s(cfg, int(step[i])) for i in self.mine) * (SLOWDOWN if slow else 1.0)

    def round(self) -> float:
        """One round's realized / predicted."""
        import torch.distributed as dist

        dist.barrier()
        t = time.perf_counter()
        if self.slowed is not None:
            self.slowed.begin()
        train_samples(self.model, self.mine, self.step, self.slowed)
        if self.slowed is not None:  # the last sample's stretch (the DDP hook's, in the arms)
            self.slowed.after_bucket()
        return (time.perf_counter() - t) / self.pred


def share_of(ratios: list[float]) -> tuple[float, float]:
    """A rank's share (the median ratio) and the ratio's coefficient of variation (the simulator's ``jitter_cv``)."""
    kept = np.array(ratios)
    return float(np.median(kept)), float(kept.std() / kept.mean())


def shares_and_jitter(ratios: list[list[float]], slow_ranks: int) -> dict[str, Any]:
    """Each group's processor share and the ranks' own compute jitter, from ``ratios[rank][round]``
    (realized / predicted, every rank in every round at once).

    ``log ratio[r][k] = m_r + c_k + e[r][k]``: ``m_r`` the rank's own level, ``c_k`` what round k did to
    every rank alike (the host's load moving: it scales the whole step and does not unbalance it,
    centred), ``e`` the rank's own noise. A rank's share is ``exp(m_r)`` times the mean of ``exp(c_k)``
    (a mean step time scales with the mean of the common factor, not its median); a group's, the mean
    of its ranks';
    ``jitter_cv`` is the coefficient of variation of ``exp(e)`` (lognormal: ``sqrt(exp(s^2) - 1)``, s^2 the
    variance of ``e`` with the rank and round means removed, ``(n-1)(K-1)`` degrees of freedom), the
    simulator's independent per-worker noise; ``round_cv`` the same of ``exp(c)``, reported only."""
    x = np.log(np.asarray(ratios, dtype=np.float64))  # rank, round
    n, k = x.shape
    world = n
    level = x.mean(axis=1)
    resid = x - level[:, None]
    common = resid.mean(axis=0)
    e = resid - common
    s2 = float((e**2).sum() / max((n - 1) * (k - 1), 1))
    c2 = float(common.var(ddof=1)) if k > 1 else 0.0
    share = np.exp(level) * float(np.exp(common).mean())
    slow = np.arange(world) >= world - slow_ranks
    return {"share": {"fast": float(share[~slow].mean()), "slow": float(share[slow].mean())},
            "rank_share": share.tolist(), "jitter_cv": float(np.sqrt(np.expm1(s2))),
            "round_cv": float(np.sqrt(np.expm1(c2)))}


def calibrate_share(cfg: dict[str, float], step: np.ndarray, rank: int, world: int, slow: bool, slow_ranks: int,
                    rounds: int = 8) -> tuple[float, float]:
    """:class:`ShareProbe` for ``rounds`` rounds, the first two warming up: (share, cv)."""
    probe = ShareProbe(cfg, step, rank, world, slow, slow_ranks)
    return share_of([probe.round() for _ in range(rounds)][2:])


def calibrate(rank: int, world: int, slow: bool, slow_ranks: int, ref: float, lengths: np.ndarray,
              B: int) -> dict[str, Any]:  # noqa: N803
    """The simulator's figures, measured in the job before each repeat's arms (every rank at once, so they
    see the processor sharing the arms see): ``fit`` (c(L), the step's fixed time), ``comm_s`` (the
    gradient's all-reduce alone), ``balancer_s`` (each LB-BSP arm's balancer per step alone) and
    ``jitter_cv`` (the compute's step-to-step spread). The same on every rank."""
    import torch.distributed as dist

    fits: list[dict[str, float]] = [None] * world  # type: ignore[list-item]
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    wrapped = DDP(Block())  # built on every rank (a collective); timed one rank at a time under no_sync
    alone = run_alone(lambda: fit_sample_cost(wrapped), rank, world)
    dist.all_gather_object(fits, alone)
    cfg = shared_fit(fits, ref)
    nominal = 1.0 / cfg["ref_cost"] / (SLOWDOWN if slow else 1.0)
    grad = torch.zeros(int(cfg["params"]))
    comm = []
    for _ in range(12):
        dist.barrier()
        t = time.perf_counter()
        dist.all_reduce(grad)
        comm.append(time.perf_counter() - t)
    share, cv = calibrate_share(cfg, lengths[:B], rank, world, slow, slow_ranks)
    mine = {"balancer_s": {arm: calibrate_balancer(arm, B, cfg, nominal / share, lengths, rank, world, slow)
                           for arm in ARMS[1:]},
            "share": share, "cv": cv, "comm_s": float(np.median(comm[2:])), "slow": slow}
    every: list[dict[str, Any]] = [None] * world  # type: ignore[list-item]
    dist.all_gather_object(every, mine)
    return {"fit": cfg, "rank_fits": fits, "comm_s": float(np.median([e["comm_s"] for e in every])),
            "balancer_s": {a: max(e["balancer_s"][a] for e in every) for a in ARMS[1:]},  # the slowest rank's: all wait
            "share": {g: float(np.mean([e["share"] for e in every if e["slow"] == (g == "slow")])) for g in ("fast", "slow")},
            "rank_share": [e["share"] for e in every], "jitter_cv": float(np.mean([e["cv"] for e in every]))}


def _rank(rank: int, rendezvous: str, out: str, step_len: np.ndarray, ref: float, world: int, slow_ranks: int,
          repeats: int, cores: list[list[int]] | None, work: str) -> None:
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    from lbsim.runtime.ddp import end_group, slowed_hook

    global WORK
    WORK = work
    if cores is not None:  # before gloo starts its threads: they inherit the rank's cores
        os.sched_setaffinity(0, cores[rank])
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world)
    steps, B = step_len.shape  # noqa: N806
    lengths = step_len.ravel()  # sample k B + j: round k's j-th
    slow = rank >= world - slow_ranks
    result: dict[str, Any] = {"world": world, "slow_ranks": slow_ranks, "repeats": repeats, "cores": cores, "work": work,
                              "calibration": [],
                              "interleaved_share": []}
    for rep in range(repeats):
        calib = calibrate(rank, world, slow, slow_ranks, ref, lengths, B)
        result["calibration"].append(calib)
        cfg = calib["fit"]
        nominal = 1.0 / cfg["ref_cost"] / (SLOWDOWN if slow else 1.0) / calib["share"]["slow" if slow else "fast"]
        runs = {}
        for arm in ARMS:
            torch.manual_seed(0)
            slowed = slowed_rank(slow)
            model = DDP(Block())
            mark = Mark()
            lb = None
            if arm == "bucketing":
                model.register_comm_hook(None, slowed_hook(mark.wrap(default_hooks.allreduce_hook), slowed))
            else:
                lb = _balancer(arm, B, cfg, nominal, slowed, lengths)
                lb.attach(model)
            runs[arm] = (model, lb, slowed, mark, torch.optim.SGD(model.parameters(), lr=0.01), [])
        probe = ShareProbe(cfg, lengths[:B], rank, world, slow, slow_ranks)
        probe.round()  # warm-up
        ratios = []
        # one cycle per step k: a share round, then step k of each arm (the order rotated each cycle), so the
        # arms and the calibration rounds see the host's load at the same times
        for k in range(steps):
            ratios.append(probe.round())
            for arm in [ARMS[(i + k + rep) % len(ARMS)] for i in range(len(ARMS))]:
                model, lb, slowed, mark, opt, phases = runs[arm]
                step = list(range(k * B, (k + 1) * B))
                dist.barrier()
                t, cpu0 = time.perf_counter(), time.process_time()
                mine = _mine(lb, arm, step, lengths, rank, world)
                if lb is None:
                    if slowed is not None:
                        slowed.begin()
                    mark.start()
                t_pre, cpu_pre = time.perf_counter(), time.process_time()
                opt.zero_grad()
                train_samples(model, mine, lengths, slowed)
                t_bwd, cpu_bwd = time.perf_counter(), time.process_time()
                opt.step()
                t_end = time.perf_counter()
                marked = mark.last if lb is None else lb.clock.started_s + lb.clock.elapsed_s()
                # seconds from the step's start: the balancer done, the last gradient bucket ready
                # (the rank's own work, emulated slowdown included), backward returned (all-reduce done), the
                # optimizer done; the process's CPU seconds in the step; its samples; their fitted c(L) summed;
                # the process's CPU seconds from its samples to the end of backward
                phases.append([t_pre - t, marked - t, t_bwd - t, t_end - t, time.process_time() - cpu0,
                               len(mine), float(sum(cost_s(cfg, int(lengths[i])) for i in mine)), cpu_bwd - cpu_pre])
        for arm in ARMS:
            model, lb, slowed, mark, opt, phases = runs[arm]
            if lb is not None:
                lb.finish()
            every: list[Any] = [None] * world
            dist.all_gather_object(every, phases)
            result.setdefault(arm, []).append(every)
        every_ratios: list[list[float]] = [None] * world  # type: ignore[list-item]
        dist.all_gather_object(every_ratios, ratios)
        result["interleaved_share"].append({**shares_and_jitter(every_ratios, slow_ranks), "ratios": every_ratios})
    if rank == 0:
        Path(out).write_text(json.dumps(result))
    del runs, model  # the DDP models, then the group (docs/library.md, "Ending the job")
    end_group()


PHASES = ("pre", "mark", "bwd", "end", "cpu", "samples", "fit_s", "compute_cpu")  # the columns of a rank's step record


def decompose(records: list[list[list[float]]], slow_ranks: int, slowdown: float, skip: int = 2) -> dict[str, Any]:
    """One repeat of an arm, ``records[rank][step]`` (:data:`PHASES`), as mean seconds per step after ``skip``.

    ``step``: start to the last rank's optimizer end (a step ends when its slowest rank's does);
    ``balancer``: the slowest rank's time to its samples (the balancer's collectives, decision and
    partition); ``compute``: each rank's time from then to its last gradient bucket (its work, the
    emulated slowdown included), and ``compute_max`` the step's slowest; ``tail``: from the slowest
    rank's last bucket to the all-reduce's end on the first rank out (the all-reduce not hidden);
    ``optimizer``: the rest; ``fit``: each rank's compute predicted by the fitted c(L) (x ``slowdown``
    on the slowed ranks); ``ratio``: realized / predicted compute per rank (mean over steps) and
    ``ratio_cv``: its spread over the steps (coefficient of variation, per rank)."""
    r = np.asarray(records, dtype=np.float64)[:, skip:, :]  # rank, step, phase
    world = r.shape[0]
    pre, mark, bwd, end = r[:, :, 0], r[:, :, 1], r[:, :, 2], r[:, :, 3]
    compute = mark - pre
    fit = r[:, :, 6] * np.where(np.arange(world) >= world - slow_ranks, slowdown, 1.0)[:, None]
    ratio = compute / np.maximum(fit, 1e-12)
    return {"step": float(end.max(0).mean()), "balancer": float(pre.max(0).mean()),
            "compute": compute.mean(1).tolist(), "compute_max": float(compute.max(0).mean()),
            "wait": (compute.max(0) - compute).mean(1).tolist(),
            "tail": float((bwd.min(0) - mark.max(0)).mean()), "optimizer": float((end - bwd).mean()),
            "fit": fit.mean(1).tolist(), "fit_max": float(fit.max(0).mean()),
            "ratio": ratio.mean(1).tolist(), "ratio_cv": (ratio.std(1) / ratio.mean(1)).tolist(),
            "samples": r[:, :, 5].mean(1).tolist(), "cpu_share": (r[:, :, 4] / end).mean(1).tolist(),
            "compute_cpu": r[:, :, 7].mean(1).tolist()}


# the simulator's figures, each adding to the one before: c(L) fitted alone, t0, the all-reduce; the ranks' processor
# shares; the balancer's time per step; the compute's jitter
MODELS = ("base", "+share", "+balancer", "+jitter")


def simulate(calib: dict[str, Any], lengths_file: Path, steps: int, folder: Path, world: int, slow_ranks: int,
             B: int, model: str = "+jitter", arms: tuple[str, ...] = ARMS, seed: int = 0) -> dict[str, Any]:  # noqa: N803
    """The simulator's mean iteration time of each arm (and its per-worker compute), from one calibration.

    ``model`` (:data:`MODELS`, each adding to the one before): ``base`` (c(L) fitted on a core to
    itself, the step's fixed time, the all-reduce), ``+share`` (each group's speed divided by its
    calibrated processor share: the host's other processes take part of each core), ``+balancer``
    (the LB-BSP arms' calibrated balancer time per step added to their fixed per-iteration time
    ``t0_s``: it runs before every rank's compute, on every rank), ``+jitter`` (each worker's compute
    jitter, lognormal with the calibrated coefficient of variation: the step waits for the slowest of
    noisy ranks)."""
    import yaml

    import lbsim

    fit = calib["fit"]
    speed = 1.0 / fit["ref_cost"]
    grad_bytes = int(fit["params"]) * 4
    bw_gbps = 2 * (world - 1) / world * grad_bytes * 8 / calib["comm_s"] / 1e9  # flat ring's time = the measured all-reduce
    level = MODELS.index(model)
    share = calib["share"] if level >= 1 else {"fast": 1.0, "slow": 1.0}
    jitter = calib["jitter_cv"] if level >= 3 else 0.0
    out: dict[str, Any] = {}
    for arm, scheme, over in (("bucketing", "bucketing", {}), ("lbbsp count", None, {}),
                              ("lbbsp cost", None, {"scheme.balance": "cost"})):
        if arm not in arms:
            continue
        t0 = fit["t0_s"] + (calib["balancer_s"].get(arm, 0.0) if level >= 2 else 0.0)
        group = {"instance": "c5.xlarge", "t0_s": t0, "max_batch": B, "jitter_cv": jitter}
        scenario = {
            "name": "seqlen_runtime", "seed": seed,
            "workload": {"model": "resnet50_imagenet", "global_batch": B, "updates": steps, "gradient_bytes": grad_bytes,
                         "sample_cost": {"lengths": {"name": "file", "path": str(lengths_file.resolve())},
                                         "cost_linear": fit["a"], "cost_quadratic": fit["b"], "cost_per_sample": fit["c0"],
                                         "reference_tokens": fit["ref"]}},
            "cluster": {"groups": [{**group, "count": world - slow_ranks, "samples_per_s": speed / share["fast"]},
                                   {**group, "count": slow_ranks, "samples_per_s": speed / SLOWDOWN / share["slow"]}]},
            "network": {"name": "ring_allreduce", "alpha_s": 0.0, "bandwidth_gbps": bw_gbps},
            "scheme": {"name": "lbbsp", "variant": "gpu_model", "split_dead_band": 0.1},
        }
        path = folder / f"seqlen_runtime_{arm.replace(' ', '_')}.yaml"
        path.write_text(yaml.safe_dump(scenario, sort_keys=False))
        it = lbsim.simulate(path, scheme=scheme, overrides=over).iterations
        it = it[it["update"] >= 2]
        per_round = it.groupby("update")["end_s"].max() - it.groupby("update")["start_s"].min()
        out[arm] = {"step": float(per_round.mean()), "compute": it.groupby("worker")["compute_s"].mean().sort_index().tolist(),
                    "compute_max": float(it.groupby("update")["compute_s"].max().mean()),
                    "samples": it.groupby("worker")["batch"].mean().sort_index().tolist(), "t0_s": t0}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=14)
    ap.add_argument("--world", type=int, default=3, help="gloo ranks (3-4: the issue's runtime check)")
    ap.add_argument("--slow-ranks", type=int, default=2, help=f"the last ranks slowed {SLOWDOWN}x")
    ap.add_argument("--repeats", type=int, default=1, help="each arm this many times, the arms' order rotated")
    ap.add_argument("--batch", type=int, default=36, help="global batch B (samples per step, all ranks)")
    ap.add_argument("--scale", type=int, default=SCALE, help="the conversation lengths divided by this (then capped)")
    ap.add_argument("--out", default="runs/seqlen_runtime.json")
    ap.add_argument("--replay", default=None, help="a finished run's JSON: simulate and summarize its records again")
    ap.add_argument("--pin", action=argparse.BooleanOptionalAction, default=True,
                    help="pin ranks to cores (rank_cores): a core per fast rank, the rest shared by the slowed ranks")
    ap.add_argument("--work", choices=("cpu", "wall"), default="cpu",
                    help="a slowed rank stretches its thread's CPU seconds (cpu) or its wall seconds of work (wall)")
    args = ap.parse_args()
    if not (2 <= args.world <= 8 and 1 <= args.slow_ranks < args.world and 1 <= args.repeats <= 20
            and 3 <= args.steps <= 60 and args.world <= args.batch <= 256 and 1 <= args.scale <= 64):
        ap.error("expected 2 <= --world <= 8, 1 <= --slow-ranks < --world, 1 <= --repeats <= 20, 3 <= --steps <= 60, "
                 "--world <= --batch <= 256, 1 <= --scale <= 64")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    lengths_file = write_lengths(out.parent, args.scale)
    if args.replay is not None:
        done = json.loads(Path(args.replay).read_text())
        raw = done["raw"]
        for rec in raw["interleaved_share"]:  # the shares and jitter again from the rounds, where recorded
            if "ratios" in rec:
                rec.update(shares_and_jitter(rec["ratios"], raw["slow_ranks"]))
        steps = len(raw[ARMS[0]][0][0])
        batch = int(sum(rec[5] for rec in (rank[0] for rank in raw[ARMS[0]][0])))
        report = summarize(raw, lengths_file, steps, out.parent, batch)
        out.write_text(json.dumps({**report, "load": done.get("load"), "raw": raw}))
        return
    step_len, ref = step_lengths(lengths_file, args.steps, args.batch)
    cores = rank_cores(args.world, args.slow_ranks, sorted(os.sched_getaffinity(0))) if args.pin else None
    if args.pin and cores is None:
        print(f"not pinned: {len(os.sched_getaffinity(0))} cores leave the slowed ranks none")
    print(f"ranks' cores: {cores if cores is not None else 'not pinned'}; a slowed rank stretches its {args.work} time")
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        mp.start_processes(_rank, args=(str(Path(tmp) / "rendezvous"), str(out), step_len, ref, args.world,
                                        args.slow_ranks, args.repeats, cores, args.work), nprocs=args.world, start_method="spawn")
    load1 = os.getloadavg()
    real = json.loads(out.read_text())
    report = summarize(real, lengths_file, args.steps, out.parent, args.batch)
    report["load"] = [load0[0], load1[0]]
    print(f"load average before {load0[0]:.2f}, after {load1[0]:.2f}")
    out.write_text(json.dumps({**report, "raw": real}))


JITTER_SEEDS = 8  # realizations averaged for the jitter's expected effect


def jitter_factor(calib: dict[str, Any], lengths_file: Path, steps: int, folder: Path, world: int, slow_ranks: int,
                  B: int) -> dict[str, float]:  # noqa: N803
    """Each arm's expected step with jitter over its step without, ``sum_s T_jitter(s) / sum_s T(s)`` over
    seeds 1..:data:`JITTER_SEEDS`: one jitter realization swings a 12-step mean by ~10 % (CV 0.3), and
    the scenario's seed also draws the lengths, so the runtime's own draw (seed 0) is simulated without
    jitter and scaled by this factor."""
    with_j = {a: 0.0 for a in ARMS}
    without = {a: 0.0 for a in ARMS}
    for seed in range(1, JITTER_SEEDS + 1):
        j = simulate(calib, lengths_file, steps, folder, world, slow_ranks, B, "+jitter", seed=seed)
        n = simulate(calib, lengths_file, steps, folder, world, slow_ranks, B, "+balancer", seed=seed)
        for a in ARMS:
            with_j[a] += j[a]["step"]
            without[a] += n[a]["step"]
    return {a: with_j[a] / without[a] for a in ARMS}


def summarize(real: dict[str, Any], lengths_file: Path, steps: int, folder: Path, B: int) -> dict[str, Any]:  # noqa: N803
    """Print and return each arm's runtime decomposition beside the simulator's under each of :data:`MODELS`
    (each repeat simulated with the calibration measured just before it); medians and ranges over the
    repeats, and the cost/count ratio's."""
    world, slow_ranks, reps = real["world"], real["slow_ranks"], real["repeats"]
    # repeat r: its calibration, with the processor share and jitter of the share rounds interleaved with its arms' steps
    sims = [{m: simulate({**c, **real["interleaved_share"][r]}, lengths_file, steps, folder, world, slow_ranks, B, m)
             for m in MODELS} for r, c in enumerate(real["calibration"])]
    for r, c in enumerate(real["calibration"]):
        factor = jitter_factor({**c, **real["interleaved_share"][r]}, lengths_file, steps, folder, world, slow_ranks, B)
        for arm in ARMS:
            sims[r]["+jitter"][arm] = {**sims[r]["+balancer"][arm], "step": sims[r]["+balancer"][arm]["step"] * factor[arm],
                                       "jitter_factor": factor[arm]}
    for r, c in enumerate(real["calibration"]):
        f = c["fit"]
        print(f"calibration: c(L) = {f['c0'] * 1e3:.3f} ms + {f['a'] * 1e6:.3f} us L + {f['b'] * 1e9:.3f} ns L^2; "
              f"step fixed {f['t0_s'] * 1e3:.2f} ms; all-reduce {c['comm_s'] * 1e3:.2f} ms; L_ref {f['ref']:.1f}; "
              "balancer " + ", ".join(f"{a} {v * 1e3:.2f} ms" for a, v in c["balancer_s"].items())
              + "; processor share (realized / fitted) fast, slow; jitter cv: before the arms "
              + f"{c['share']['fast']:.2f}, {c['share']['slow']:.2f}; {c['jitter_cv']:.3f}; interleaved with them "
              + f"{real['interleaved_share'][r]['share']['fast']:.2f}, {real['interleaved_share'][r]['share']['slow']:.2f}; "
              + f"{real['interleaved_share'][r]['jitter_cv']:.3f} (rank's own; rounds moving every rank alike: cv "
              + f"{real['interleaved_share'][r]['round_cv']:.3f})")
    print(f"{world} ranks, the last {slow_ranks} slowed {SLOWDOWN}x; global batch {B}; {reps} repeat(s), arms rotated; "
          "ms per step (mean over steps 2..); median [range] over the repeats")
    rows: dict[str, Any] = {}
    for arm in ARMS:
        parts = [decompose(rep, slow_ranks, SLOWDOWN) for rep in real[arm]]
        run = [p["step"] for p in parts]
        pred = {m: [s[m][arm]["step"] for s in sims] for m in MODELS}

        def med(key: str, parts: list[dict[str, Any]] = parts) -> Any:
            return np.median(np.array([p[key] for p in parts]), axis=0)

        rows[arm] = {"runtime_s": float(np.median(run)), "runtime_repeats_s": run,
                     "sim_s": {m: float(np.median(v)) for m, v in pred.items()}, "sim_repeats_s": pred,
                     "error": {m: float(np.median(v)) / float(np.median(run)) - 1 for m, v in pred.items()},
                     "parts": {k: (med(k).tolist() if isinstance(parts[0][k], list) else float(med(k))) for k in parts[0]},
                     "sim_parts": sims[0]["+jitter"][arm]}
        m = rows[arm]["parts"]
        print(f"{arm:12s} runtime {rows[arm]['runtime_s'] * 1e3:6.1f} [{min(run) * 1e3:.1f}, {max(run) * 1e3:.1f}]  simulator "
              + "  ".join(f"{k} {rows[arm]['sim_s'][k] * 1e3:.1f} ({rows[arm]['error'][k]:+.1%})" for k in MODELS))
        print(f"{'':12s} runtime: balancer {m['balancer'] * 1e3:.1f}, compute/rank {np.round(np.array(m['compute']) * 1e3, 1)}"
              f" (max {m['compute_max'] * 1e3:.1f}), tail {m['tail'] * 1e3:.1f}, optimizer {m['optimizer'] * 1e3:.1f};"
              f" realized/fitted compute {np.round(m['ratio'], 2)} (cv {np.round(m['ratio_cv'], 2)}); "
              f"samples {np.round(m['samples'], 1)}")
        sp = rows[arm]["sim_parts"]
        print(f"{'':12s} simulator (repeat 1, without jitter): compute/rank {np.round(np.array(sp['compute']) * 1e3, 1)}"
              f" (max {sp['compute_max'] * 1e3:.1f}); samples {np.round(sp['samples'], 1)}")
    ratios = [c / n for c, n in zip(rows["lbbsp cost"]["runtime_repeats_s"], rows["lbbsp count"]["runtime_repeats_s"],
                                    strict=True)]
    pred_ratio = [c / n for c, n in zip(rows["lbbsp cost"]["sim_repeats_s"]["+jitter"],
                                        rows["lbbsp count"]["sim_repeats_s"]["+jitter"], strict=True)]
    print(f"cost / count: runtime {np.median(ratios):.3f} [{min(ratios):.3f}, {max(ratios):.3f}], cost faster in "
          f"{sum(r < 1 for r in ratios)} of {len(ratios)}; simulator (+jitter) {np.median(pred_ratio):.3f} "
          f"[{min(pred_ratio):.3f}, {max(pred_ratio):.3f}]")
    return {"rows": rows, "cost_over_count": {"runtime": ratios, "simulator": pred_ratio}}


if __name__ == "__main__":
    main()
